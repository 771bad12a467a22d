package mledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/mledger/memledger"
	"github.com/isobar-mq/isobar/metastore/metafault"
)

// Faults below the managed ledger, injected into its ledgers (memledger),
// and how it reacts to each.

// addAll adds payloads from..from+n-1 at once and returns every
// callback's position and error, in callback order, and the payload
// index of each.
func addAll(m *ManagedLedger, from, n int) (ps []Position, idx []int, errs []error) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i := from; i < from+n; i++ {
		wg.Add(1)
		m.AddEntryAsync(context.Background(), payload(i), func(p Position, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			ps, idx, errs = append(ps, p), append(idx, i), append(errs, err)
		})
	}
	wg.Wait()
	return ps, idx, errs
}

// TestAddFailsMidway: an add fails at the bookies while later ones are in
// flight behind it (the writer breaks). The managed ledger closes the
// ledger by recovery, settles the adds it kept at their positions and
// issues the others again on a new ledger: no add fails, callbacks keep
// their order, and the log holds every payload once. With the
// acknowledgement lost (the entry stored), the recovered ledger keeps
// that entry and its add succeeds there, not in the next ledger.
func TestAddFailsMidway(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		kept int64 // entries the first ledger keeps
	}{
		{"stored nowhere", memledger.ErrInjected, 2},
		{"acknowledgement lost", memledger.ErrAckLost, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newMemWorld(t)
			m := open(t, w.env(1000), "t/ns/persistent/midway")
			defer m.Close(context.Background())
			rule := &memledger.Rule{N: 3, Ops: []memledger.Op{memledger.OpAppend}, Err: tc.err}
			w.ledgers.SetInjector(rule)
			ps, idx, errs := addAll(m, 0, 20)
			for k, err := range errs {
				if err != nil {
					t.Fatalf("add %d failed: %v", idx[k], err)
				}
				if idx[k] != k || k > 0 && ps[k].Compare(ps[k-1]) <= 0 {
					t.Fatalf("callback %d for add %d at %v", k, idx[k], ps[k])
				}
			}
			if rule.Fired() != 1 {
				t.Fatalf("%d faults injected, want 1", rule.Fired())
			}
			ls := m.Ledgers()
			if len(ls) != 2 || ls[0].State != LedgerClosed || ls[0].Entries != tc.kept || ls[1].Entries != 20-tc.kept {
				t.Fatalf("ledgers %+v; want the broken one closed with %d entries, then one with the rest", ls, tc.kept)
			}
			if ps[tc.kept-1].Ledger != ls[0].ID || ps[tc.kept] != (Position{Ledger: ls[1].ID}) {
				t.Fatalf("positions %v", ps)
			}
			checkEntries(t, readAll(t, m, first(m), 7), ps, 0)
		})
	}
}

// TestCreateFails: a ledger that cannot be created fails the add that
// needed it (with the bookies' error: not fenced, nothing listed); the
// next add creates one.
func TestCreateFails(t *testing.T) {
	w := newMemWorld(t)
	ctx := context.Background()
	m := open(t, w.env(5), "t/ns/persistent/create")
	defer m.Close(ctx)
	w.ledgers.SetInjector(memledger.Once(memledger.OpCreate))
	if _, err := m.AddEntry(ctx, payload(0)); !errors.Is(err, memledger.ErrInjected) || errors.Is(err, ErrFenced) {
		t.Fatalf("add without a ledger: %v", err)
	}
	if ls := m.Ledgers(); len(ls) != 0 {
		t.Fatalf("ledgers after a failed create: %+v", ls)
	}
	ps := appendN(t, m, 0, 5) // fills the first ledger
	// At the rollover: the full ledger is still recorded closed.
	w.ledgers.SetInjector(memledger.Once(memledger.OpCreate))
	if _, err := m.AddEntry(ctx, payload(5)); !errors.Is(err, memledger.ErrInjected) {
		t.Fatalf("add across a failed rollover: %v", err)
	}
	if ls := m.Ledgers(); len(ls) != 1 || ls[0].State != LedgerClosed || ls[0].Entries != 5 {
		t.Fatalf("ledgers after a failed rollover: %+v", ls)
	}
	ps = append(ps, appendN(t, m, 5, 3)...)
	checkEntries(t, readAll(t, m, first(m), 100), ps, 0)
}

// TestWriterCloseFails: closing a full ledger fails (its metadata write
// does); the managed ledger recovers the ledger instead, which closes it
// at the same entry, and rolls over.
func TestWriterCloseFails(t *testing.T) {
	w := newMemWorld(t)
	m := open(t, w.env(5), "t/ns/persistent/close-fails")
	defer m.Close(context.Background())
	ps := appendN(t, m, 0, 5)
	w.ledgers.SetInjector(memledger.Once(memledger.OpClose))
	ps = append(ps, appendN(t, m, 5, 5)...)
	if n := w.ledgers.Calls(memledger.OpRecover); n != 1 {
		t.Fatalf("%d recoveries, want 1", n)
	}
	if ls := m.Ledgers(); len(ls) != 2 || ls[0].State != LedgerClosed || ls[0].Entries != 5 {
		t.Fatalf("ledgers %+v", ls)
	}
	checkEntries(t, readAll(t, m, first(m), 100), ps, 0)
}

// TestLedgerFencedByAnotherOwner: another owner opened the topic (which
// recovered, so fenced, our ledger, and changed the metadata). Our next
// add meets the fence at the bookies: the managed ledger counts itself
// fenced (the add fails with ErrFenced, and so does Close), writes no
// metadata, and the new owner has every entry.
func TestLedgerFencedByAnotherOwner(t *testing.T) {
	w := newMemWorld(t)
	ctx := context.Background()
	const name = "t/ns/persistent/fenced-ledger"
	m1 := open(t, w.env(100), name)
	ps := appendN(t, m1, 0, 5)
	m2 := open(t, w.env(100), name)
	defer m2.Close(ctx)
	if md, _ := w.ledgers.Metadata(uint64(ps[0].Ledger)); md.State != ledger.StateClosed {
		t.Fatalf("the new owner left our ledger %s", md.State)
	}
	kv, _ := w.connect().Get(ctx, TopicKey(w.region, name))
	if _, err := m1.AddEntry(ctx, []byte("stale")); !errors.Is(err, ErrFenced) {
		t.Fatalf("add to the fenced ledger: %v, want ErrFenced", err)
	}
	if err := m1.Close(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("close: %v, want ErrFenced", err)
	}
	if kv2, _ := w.connect().Get(ctx, TopicKey(w.region, name)); kv2.Rev != kv.Rev {
		t.Fatal("the fenced owner wrote the metadata")
	}
	more := appendN(t, m2, 5, 3)
	checkEntries(t, readAll(t, m2, first(m2), 100), append(ps, more...), 0)
}

// TestLedgerFencedByRecovery: automatic recovery fences our idle ledger
// while the topic stays ours. The next add meets the fence, and the
// managed ledger rolls over instead of counting itself fenced: the add
// succeeds on a new ledger, the fenced one is listed closed with every
// entry.
func TestLedgerFencedByRecovery(t *testing.T) {
	w := newMemWorld(t)
	ctx := context.Background()
	m := open(t, w.env(100), "t/ns/persistent/fenced-auto")
	defer m.Close(ctx)
	ps := appendN(t, m, 0, 5)
	if _, err := w.ledgers.Client().Recover(ctx, uint64(ps[0].Ledger)); err != nil {
		t.Fatal(err)
	}
	p, err := m.AddEntry(ctx, payload(5))
	if err != nil {
		t.Fatalf("add after automatic recovery: %v", err)
	}
	if p.Ledger == ps[0].Ledger || p.Entry != 0 {
		t.Fatalf("add after automatic recovery at %v, want entry 0 of a new ledger", p)
	}
	if ls := m.Ledgers(); len(ls) != 2 || ls[0].State != LedgerClosed || ls[0].Entries != 5 {
		t.Fatalf("ledgers %+v", ls)
	}
	checkEntries(t, readAll(t, m, first(m), 100), append(ps, p), 0)
}

// TestRecoveryFailsAtOpen: the previous owner's open ledger cannot be
// recovered: Open fails with the bookies' error and writes nothing; the
// next Open recovers it.
func TestRecoveryFailsAtOpen(t *testing.T) {
	w := newMemWorld(t)
	ctx := context.Background()
	const name = "t/ns/persistent/recover-fails"
	m1 := open(t, w.env(100), name)
	ps := appendN(t, m1, 0, 5)
	crashMem(m1)
	kv, _ := w.connect().Get(ctx, TopicKey(w.region, name))
	w.ledgers.SetInjector(memledger.Once(memledger.OpRecover))
	env := w.env(100)
	if _, err := Open(ctx, env.Deps, env.Config, name); !errors.Is(err, memledger.ErrInjected) {
		t.Fatalf("open with a failing recovery: %v", err)
	}
	// A recovery that hangs: Open gives up with its context.
	hang := memledger.NewHang(0, memledger.OpRecover)
	defer hang.Release()
	w.ledgers.SetInjector(hang)
	hctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := Open(hctx, env.Deps, env.Config, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("open with a hung recovery: %v", err)
	}
	if kv2, _ := w.connect().Get(ctx, TopicKey(w.region, name)); kv2.Rev != kv.Rev {
		t.Fatal("a failed open wrote the metadata")
	}
	w.ledgers.SetInjector(nil)
	m2 := open(t, w.env(100), name)
	defer m2.Close(ctx)
	checkEntries(t, readAll(t, m2, first(m2), 100), ps, 0)
}

// TestReadFails: reads the bookies fail return what was read before the
// failure and the position to go on from; the next read goes on. A read
// that hangs ends with its context.
func TestReadFails(t *testing.T) {
	w := newMemWorld(t)
	ctx := context.Background()
	const name = "t/ns/persistent/read-fails"
	m := open(t, w.env(10), name)
	ps := appendN(t, m, 0, 20) // two ledgers
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	m = open(t, w.env(10), name) // no tail cache: every read reaches the bookies
	defer m.Close(ctx)

	w.ledgers.SetInjector(memledger.Once(memledger.OpOpen))
	if es, next, err := m.Read(ctx, ps[0], 5); !errors.Is(err, memledger.ErrInjected) || len(es) != 0 || next != ps[0] {
		t.Fatalf("read with a failing open: %d entries, next %v, %v", len(es), next, err)
	}
	// The second ledger's read fails: the first ledger's entries come
	// back, with the position of the first entry not read.
	rule := memledger.OnNth(2, memledger.OpRead)
	w.ledgers.SetInjector(rule)
	es, next, err := m.Read(ctx, ps[0], 20)
	if !errors.Is(err, memledger.ErrInjected) || next != ps[10] {
		t.Fatalf("read failing in the second ledger: next %v, %v; want %v, the injected error", next, err, ps[10])
	}
	checkEntries(t, es, ps[:10], 0)
	rest, _, err := m.Read(ctx, next, 20)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, rest, ps[10:], 10)

	hang := memledger.NewHang(0, memledger.OpRead)
	defer hang.Release()
	w.ledgers.SetInjector(hang)
	hctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := m.Read(hctx, ps[3], 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung read: %v", err)
	}
	hang.Release()
	es, _, err = m.Read(ctx, ps[3], 2)
	if err != nil || len(es) != 2 || !bytes.Equal(es[0].Data, payload(3)) {
		t.Fatalf("read after the hang: %d entries, %v", len(es), err)
	}
}

// TestFaultSweep fails the Nth operation of a workload (open, adds
// across rollovers, a read, close), for every N until the workload runs
// out of operations: on ledgers, with each kind of error (stored nowhere;
// for appends, stored with the acknowledgement lost), and on the metadata
// store. Whatever failed, a new owner then reads a log in which every
// acknowledged add is at its position with its payload, and payloads
// appear in the order they were added, each at most once.
func TestFaultSweep(t *testing.T) {
	for _, kind := range []struct {
		name   string
		inject func(w *memWorld, env *testEnv, n int64) (fired func() int64)
	}{
		{"ledger error", func(w *memWorld, _ *testEnv, n int64) func() int64 {
			r := memledger.OnNth(n)
			w.ledgers.SetInjector(r)
			return r.Fired
		}},
		{"ack lost", func(w *memWorld, _ *testEnv, n int64) func() int64 {
			r := &memledger.Rule{N: n, Ops: []memledger.Op{memledger.OpAppend}, Err: memledger.ErrAckLost}
			w.ledgers.SetInjector(r)
			return r.Fired
		}},
		{"metadata error", func(_ *memWorld, env *testEnv, n int64) func() int64 {
			r := metafault.OnNth(n, "")
			env.Meta = metafault.Wrap(env.Meta, r)
			return r.Fired
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			for n := int64(1); ; n++ {
				if !sweepOnce(t, n, kind.inject) {
					t.Logf("%d operations failed in turn", n-1)
					break
				}
				if n > 1000 {
					t.Fatal("the workload does not end")
				}
			}
		})
	}
}

// sweepOnce runs the workload with the nth operation failing and checks
// the log; false when fewer than n operations were made.
func sweepOnce(t *testing.T, n int64, inject func(*memWorld, *testEnv, int64) func() int64) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w := newMemWorld(t)
	const name = "t/ns/persistent/sweep"
	env := w.env(10)
	fired := inject(w, &env, n)
	acked := map[int]Position{}
	if m, err := Open(ctx, env.Deps, env.Config, name); err == nil {
		ps, idx, errs := addAll(m, 0, 25)
		for k, err := range errs {
			if err == nil {
				acked[idx[k]] = ps[k]
			}
		}
		m.Read(ctx, first(m), 30)
		m.Close(ctx)
	}
	w.ledgers.SetInjector(nil)
	m2 := open(t, w.env(10), name)
	defer m2.Close(ctx)
	got := readAll(t, m2, first(m2), 7)
	at := map[Position]int{}
	last := -1
	for _, e := range got {
		var i int
		if _, err := fmt.Sscanf(string(e.Data), "entry-%05d-", &i); err != nil || !bytes.Equal(e.Data, payload(i)) {
			t.Fatalf("fault %d: entry at %v is %q", n, e.Position, e.Data)
		}
		if i <= last {
			t.Fatalf("fault %d: payload %d at %v after payload %d", n, i, e.Position, last)
		}
		last = i
		at[e.Position] = i
	}
	for i, p := range acked {
		if j, ok := at[p]; !ok || j != i {
			t.Fatalf("fault %d: add %d acknowledged at %v, which holds %d (present %v)", n, i, p, j, ok)
		}
	}
	return fired() > 0
}
