package mledger

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/isobar-mq/isobar/errkind"
)

// TestTerminate: adds queued before Terminate complete, the ones after it
// fail with ErrTerminated (TopicTerminated on the wire), and a reopened
// log stays terminated.
func TestTerminate(t *testing.T) {
	w := newMemWorld(t)
	const name = "t/ns/persistent/terminate"
	m := open(t, w.env(100), name)
	ps := appendN(t, m, 0, 5)
	// More adds in flight when Terminate is asked: they are kept.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var kept []Position
	for i := range 20 {
		wg.Add(1)
		m.AddEntryAsync(context.Background(), []byte{byte(i)}, func(p Position, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				kept = append(kept, p)
				mu.Unlock()
			}
		})
	}
	last, err := m.Terminate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(kept) != 20 || last != m.LastConfirmed() || last.Ledger != ps[4].Ledger || last.Entry != ps[4].Entry+20 {
		t.Fatalf("terminated at %v with %d of 20 queued adds kept (last confirmed %v)", last, len(kept), m.LastConfirmed())
	}
	_, err = m.AddEntry(context.Background(), []byte("late"))
	if !errors.Is(err, ErrTerminated) || errkind.KindOf(err) != errkind.ErrTopicTerminated {
		t.Fatalf("add after terminate: %v", err)
	}
	if again, err := m.Terminate(context.Background()); err != nil || again != last {
		t.Fatalf("terminate again: %v %v, want %v", again, err, last)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	m = open(t, w.env(100), name)
	defer m.Close(context.Background())
	if !m.Terminated() || m.LastConfirmed() != last {
		t.Fatalf("reopened: terminated %v at %v, want true at %v", m.Terminated(), m.LastConfirmed(), last)
	}
	if _, err := m.AddEntry(context.Background(), []byte("later")); !errors.Is(err, ErrTerminated) {
		t.Fatalf("add after reopen: %v", err)
	}
}
