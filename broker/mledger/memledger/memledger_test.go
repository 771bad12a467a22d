package memledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/mledger/ledgers"
	"github.com/isobar-mq/isobar/broker/mledger/ledgers/ledgerstest"
	"github.com/isobar-mq/isobar/broker/mledger/memledger"
)

func TestConformance(t *testing.T) {
	ledgerstest.Run(t, func(t *testing.T) ledgers.Store { return memledger.New(memledger.Config{}) })
}

func TestConformanceClient(t *testing.T) {
	ledgerstest.Run(t, func(t *testing.T) ledgers.Store { return memledger.New(memledger.Config{}).Client() })
}

func appendOne(w ledgers.Writer, data string) (int64, error) {
	type res struct {
		id  int64
		err error
	}
	ch := make(chan res, 1)
	w.AppendAsync([]byte(data), func(id int64, err error) { ch <- res{id, err} })
	r := <-ch
	return r.id, r.err
}

// TestFailedAppendBreaksTheWriter: an injected append failure fails that
// append and every later one; Close fails and leaves the ledger open;
// recovery closes it at the last stored entry.
func TestFailedAppendBreaksTheWriter(t *testing.T) {
	ctx := context.Background()
	s := memledger.New(memledger.Config{})
	rule := memledger.OnNth(3, memledger.OpAppend)
	s.SetInjector(rule)
	w, err := s.Create(ctx, ledger.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, nil, memledger.ErrInjected, memledger.ErrInjected} {
		if id, err := appendOne(w, "x"); id != int64(i) || !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Fatalf("append %d: id %d, %v; want %v", i, id, err, want)
		}
	}
	if rule.Fired() != 1 || s.Calls(memledger.OpAppend) != 3 {
		t.Fatalf("fired %d, appends reaching the store %d; want 1, 3", rule.Fired(), s.Calls(memledger.OpAppend))
	}
	if err := w.Close(ctx); !errors.Is(err, memledger.ErrInjected) {
		t.Fatalf("Close of a broken writer: %v", err)
	}
	if md, _ := s.Metadata(w.ID()); md.State != ledger.StateOpen {
		t.Fatalf("ledger %s after a failed Close, want open", md.State)
	}
	md, err := s.Recover(ctx, w.ID())
	if err != nil || md.LastEntry != 1 {
		t.Fatalf("recovered: last entry %d, %v; want 1", md.LastEntry, err)
	}
}

// TestAckLost: the entry whose acknowledgement was lost is in the ledger
// a recovery closes.
func TestAckLost(t *testing.T) {
	ctx := context.Background()
	s := memledger.New(memledger.Config{})
	s.SetInjector(&memledger.Rule{N: 2, Ops: []memledger.Op{memledger.OpAppend}, Err: memledger.ErrAckLost})
	w, _ := s.Create(ctx, ledger.CreateOptions{})
	appendOne(w, "a")
	if _, err := appendOne(w, "b"); !errors.Is(err, memledger.ErrAckLost) {
		t.Fatalf("append: %v, want ErrAckLost", err)
	}
	if w.LastAddConfirmed() != 0 {
		t.Fatalf("writer's LAC %d, want 0", w.LastAddConfirmed())
	}
	md, err := s.Recover(ctx, w.ID())
	if err != nil || md.LastEntry != 1 || string(s.Entries(w.ID())[1]) != "b" {
		t.Fatalf("recovered: last entry %d, %v; want 1 (the entry stored)", md.LastEntry, err)
	}
}

// TestHang: a hung append holds its callback and the later ones until
// released; a hung operation with a context ends with it.
func TestHang(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := memledger.New(memledger.Config{})
	w, _ := s.Create(ctx, ledger.CreateOptions{})
	h := memledger.NewHang(w.ID(), memledger.OpAppend)
	defer h.Release()
	s.SetInjector(h)
	done := make(chan int64, 2)
	w.AppendAsync([]byte("a"), func(id int64, err error) { done <- id })
	w.AppendAsync([]byte("b"), func(id int64, err error) { done <- id })
	if err := h.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-done:
		t.Fatalf("callback for entry %d while its append hangs", id)
	case <-time.After(50 * time.Millisecond):
	}
	h.Release()
	if a, b := <-done, <-done; a != 0 || b != 1 {
		t.Fatalf("callbacks %d, %d", a, b)
	}
	h2 := memledger.NewHang(0, memledger.OpRecover)
	defer h2.Release()
	s.SetInjector(h2)
	rctx, rcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer rcancel()
	if _, err := s.Recover(rctx, w.ID()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung recovery: %v, want the context's error", err)
	}
}

// TestClientClose: a closed client's writers fail their appends with
// ErrClosed and leave their ledgers open; another client recovers them.
func TestClientClose(t *testing.T) {
	ctx := context.Background()
	s := memledger.New(memledger.Config{MaxEntrySize: 4})
	c := s.Client()
	w, _ := c.Create(ctx, ledger.CreateOptions{})
	if id, err := appendOne(w, "too large"); id != -1 || !errors.Is(err, ledger.ErrTooLarge) {
		t.Fatalf("large append: %d, %v", id, err)
	}
	appendOne(w, "a")
	c.Close()
	if _, err := appendOne(w, "b"); !errors.Is(err, ledger.ErrClosed) {
		t.Fatalf("append after the client closed: %v", err)
	}
	if err := w.Close(ctx); !errors.Is(err, ledger.ErrClosed) {
		t.Fatalf("Close after the client closed: %v", err)
	}
	if _, err := c.Recover(ctx, w.ID()); !errors.Is(err, ledger.ErrClosed) {
		t.Fatalf("recover through a closed client: %v", err)
	}
	if md, _ := s.Metadata(w.ID()); md.State != ledger.StateOpen {
		t.Fatalf("the closed client's ledger is %s, want open", md.State)
	}
	md, err := s.Client().Recover(ctx, w.ID())
	if err != nil || md.LastEntry != 0 {
		t.Fatalf("recovered by another client: last entry %d, %v", md.LastEntry, err)
	}
}
