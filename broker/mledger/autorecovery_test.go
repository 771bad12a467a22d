package mledger

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestAddsGoOnAfterRecoveryFencesTheLedger: automatic recovery (another
// ledger client, as the region's auditor) fences and closes the managed
// ledger's open ledger while adds flow and the topic stays ours. The
// managed ledger rolls over instead of counting itself fenced: no add
// fails, each is stored once and in order, and the ledger list records
// the recovered ledger closed at its last entry. A cursor acknowledges
// throughout, so the topic's metadata changes under the managed
// ledger's check that the topic is still its own.
func TestAddsGoOnAfterRecoveryFencesTheLedger(t *testing.T) {
	cl := startCluster(t)
	m := open(t, testConfig(cl, newLedgerClient(t, cl), 100000), "t/ns/persistent/autorec")
	defer m.Close(context.Background())
	auditor := newLedgerClient(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	ps := appendN(t, m, 0, 50)
	fenced := ps[0].Ledger
	cur, err := m.OpenCursor(ctx, "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	acks := make(chan Position, 1000)
	acking := make(chan error, 1)
	go func() {
		var err error
		for p := range acks {
			if aerr := cur.Ack(ctx, p); aerr != nil && err == nil {
				err = aerr
			}
		}
		acking <- err
	}()
	var (
		mu   sync.Mutex
		got  []Position
		errs []error
		wg   sync.WaitGroup
	)
	const n = 600
	recovered := make(chan error, 1)
	for i := 50; i < n; i++ {
		if i == 150 {
			go func() {
				_, err := auditor.OpenRecover(ctx, uint64(fenced))
				recovered <- err
			}()
		}
		wg.Add(1)
		m.AddEntryAsync(ctx, payload(i), func(p Position, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			got = append(got, p)
			acks <- p
		})
		if i%20 == 0 {
			time.Sleep(5 * time.Millisecond) // adds before, during and after the fencing
		}
	}
	wg.Wait()
	close(acks)
	if err := <-acking; err != nil {
		t.Fatalf("ack: %v", err)
	}
	if err := <-recovered; err != nil {
		t.Fatalf("recovery of ledger %d: %v", fenced, err)
	}
	if len(errs) > 0 {
		t.Fatalf("%d adds failed, first: %v", len(errs), errs[0])
	}
	// And after it.
	got = append(append(ps, got...), appendN(t, m, n, 20)...)
	for k := 1; k < len(got); k++ {
		if got[k].Compare(got[k-1]) <= 0 {
			t.Fatalf("callback %d at %v after %v", k, got[k], got[k-1])
		}
	}
	checkEntries(t, readAll(t, m, first(m), 500), got, 0)
	ls := m.Ledgers()
	if len(ls) < 2 || ls[0].ID != fenced || ls[0].State != LedgerClosed {
		t.Fatalf("ledgers %+v: want the fenced ledger %d closed, then a new one", ls, fenced)
	}
	md, _, err := auditor.Metadata(ctx, uint64(fenced))
	if err != nil {
		t.Fatal(err)
	}
	if ls[0].Entries != md.LastEntry+1 {
		t.Fatalf("list says %d entries in ledger %d, the ledger closed at %d", ls[0].Entries, fenced, md.LastEntry)
	}
}

// TestCloseAfterRecoveryFencedTheLedger: the open ledger is fenced and
// closed by automatic recovery while the managed ledger is idle; closing
// the managed ledger then succeeds and records the ledger closed, and a
// new owner reads every entry.
func TestCloseAfterRecoveryFencedTheLedger(t *testing.T) {
	w := newMemWorld(t)
	const name = "t/ns/persistent/autorec-idle"
	env := w.env(100000)
	m := open(t, env, name)
	ps := appendN(t, m, 0, 30)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := w.ledgers.Client().Recover(ctx, uint64(ps[0].Ledger)); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatalf("close after the ledger was recovered: %v", err)
	}
	m2 := open(t, env, name)
	defer m2.Close(context.Background())
	if ls := m2.Ledgers(); len(ls) != 1 || ls[0].State != LedgerClosed || ls[0].Entries != 30 {
		t.Fatalf("ledgers %+v", ls)
	}
	checkEntries(t, readAll(t, m2, first(m2), 100), ps, 0)
}
