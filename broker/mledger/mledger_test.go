package mledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/mledger/ledgers"
	"github.com/isobar-mq/isobar/broker/mledger/memledger"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore"
)

func startCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	return testcluster.Start(t, testcluster.Options{Bookies: 3})
}

func newLedgerClient(t *testing.T, cl *testcluster.Cluster) *ledger.Client {
	t.Helper()
	c, err := ledger.NewClient(cl.Connect(), ledger.Config{
		Region:          cl.Region,
		Logger:          cl.Logger(),
		RequestTimeout:  5 * time.Second,
		LongPollTimeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testEnv is what Open takes, in one value (its fields promoted).
type testEnv struct {
	Deps
	Config
}

func testConfig(cl *testcluster.Cluster, lc *ledger.Client, perLedger int64) testEnv {
	return testEnv{
		Deps:   Deps{Meta: cl.Connect(), Ledgers: ledgers.OnBookies(lc), Region: cl.Region, Logger: cl.Logger()},
		Config: Config{MaxEntriesPerLedger: perLedger, EnsembleSize: 3, WriteQuorum: 2, AckQuorum: 2},
	}
}

func open(t *testing.T, cfg testEnv, name string) *ManagedLedger {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Open(ctx, cfg.Deps, cfg.Config, name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	return m
}

func payload(i int) []byte { return []byte(fmt.Sprintf("entry-%05d-%s", i, strings.Repeat("x", i%50))) }

// appendN adds entries from..from+n-1 asynchronously and checks that the
// callbacks come in order with strictly increasing positions.
func appendN(t *testing.T, m *ManagedLedger, from, n int) []Position {
	t.Helper()
	var (
		mu    sync.Mutex
		got   []Position
		order []int
		errs  []error
		wg    sync.WaitGroup
	)
	ctx := context.Background()
	for i := from; i < from+n; i++ {
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
			order = append(order, i)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("adds failed: %v", errs[0])
	}
	for k := range order {
		if order[k] != from+k {
			t.Fatalf("callback %d was for add %d", k, order[k])
		}
		if k > 0 && got[k].Compare(got[k-1]) <= 0 {
			t.Fatalf("position %v after %v", got[k], got[k-1])
		}
	}
	return got
}

// readAll reads everything from `from` in chunks of chunk entries.
func readAll(t *testing.T, m *ManagedLedger, from Position, chunk int) []Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []Entry
	for {
		es, next, err := m.Read(ctx, from, chunk)
		if err != nil {
			t.Fatalf("read from %v: %v", from, err)
		}
		if len(es) == 0 {
			return out
		}
		out = append(out, es...)
		from = next
	}
}

func checkEntries(t *testing.T, es []Entry, want []Position, firstPayload int) {
	t.Helper()
	if len(es) != len(want) {
		t.Fatalf("read %d entries, want %d", len(es), len(want))
	}
	for i, e := range es {
		if e.Position != want[i] {
			t.Fatalf("entry %d at %v, want %v", i, e.Position, want[i])
		}
		if !bytes.Equal(e.Data, payload(firstPayload+i)) {
			t.Fatalf("entry %d at %v: data %q, want %q", i, e.Position, e.Data, payload(firstPayload+i))
		}
	}
}

// first is a position to read the log from its start (entry 0 of the
// first ledger, or (0, 0) while there is no ledger yet).
func first(m *ManagedLedger) Position {
	if ls := m.Ledgers(); len(ls) > 0 {
		return Position{Ledger: ls[0].ID}
	}
	return Position{}
}

func TestAppendReadAcrossLedgers(t *testing.T) {
	cl := startCluster(t)
	m := open(t, testConfig(cl, newLedgerClient(t, cl), 100), "t/ns/persistent/a")
	defer m.Close(context.Background())
	ps := appendN(t, m, 0, 1000)
	ledgers := map[int64]int{}
	for _, p := range ps {
		ledgers[p.Ledger]++
	}
	if len(ledgers) != 10 {
		t.Fatalf("1000 entries in %d ledgers, want 10: %v", len(ledgers), ledgers)
	}
	for id, n := range ledgers {
		if n != 100 {
			t.Errorf("ledger %d holds %d entries", id, n)
		}
	}
	if lc := m.LastConfirmed(); lc != ps[999] {
		t.Fatalf("LastConfirmed %v, want %v", lc, ps[999])
	}
	checkEntries(t, readAll(t, m, first(m), 37), ps, 0)
	checkEntries(t, readAll(t, m, ps[0], 1000), ps, 0)
	// Next walks the same positions.
	for i := 0; i+1 < len(ps); i++ {
		if n, ok := m.Next(ps[i]); !ok || n != ps[i+1] {
			t.Fatalf("Next(%v) = %v, %v; want %v", ps[i], n, ok, ps[i+1])
		}
	}
	if _, ok := m.Next(ps[999]); ok {
		t.Fatal("Next of the last entry")
	}
}

func TestReopenAfterClose(t *testing.T) {
	w := newMemWorld(t)
	const name = "t/ns/persistent/reopen"
	m := open(t, w.env(100), name)
	ps := appendN(t, m, 0, 250)
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddEntry(context.Background(), []byte("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("add after close: %v", err)
	}
	m = open(t, w.env(100), name)
	defer m.Close(context.Background())
	checkEntries(t, readAll(t, m, first(m), 64), ps, 0)
	more := appendN(t, m, 250, 10)
	if more[0].Ledger <= ps[249].Ledger || more[0].Entry != 0 {
		t.Fatalf("after reopen the first add went to %v (last before: %v)", more[0], ps[249])
	}
	checkEntries(t, readAll(t, m, first(m), 64), append(ps, more...), 0)
}

// crash stops m as if its process died: its metadata connection and its
// ledger client go at once (the writer's ledger stays open), so nothing
// more is written anywhere.
func crash(m *ManagedLedger, lc *ledger.Client) {
	m.deps.Meta.(*metastore.Store).Close()
	lc.Close()
	m.addMu.Lock()
	m.closing = true
	m.addMu.Unlock()
	m.stopDrivers()
}

func TestCrashRecovery(t *testing.T) {
	cl := startCluster(t)
	lc1, err := ledger.NewClient(cl.Connect(), ledger.Config{Region: cl.Region, Logger: cl.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	const name = "t/ns/persistent/crash"
	m1 := open(t, testConfig(cl, lc1, 100), name)
	ps := appendN(t, m1, 0, 150)
	openLedger := m1.Ledgers()[len(m1.Ledgers())-1]
	// More adds in flight when the owner dies: those acknowledged must
	// survive, the others may or may not.
	var (
		mu    sync.Mutex
		acked int
		wg    sync.WaitGroup
	)
	for i := 150; i < 350; i++ {
		wg.Add(1)
		m1.AddEntryAsync(context.Background(), payload(i), func(p Position, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				acked++
				mu.Unlock()
			}
		})
	}
	testcluster.WaitFor(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return acked >= 30 })
	crash(m1, lc1)
	wg.Wait()

	m2 := open(t, testConfig(cl, newLedgerClient(t, cl), 100), name)
	defer m2.Close(context.Background())
	var rec *LedgerInfo
	for _, l := range m2.Ledgers() {
		if l.ID == openLedger.ID {
			rec = &l
		}
	}
	if rec == nil || rec.State != LedgerClosed || rec.Entries < 50 {
		t.Fatalf("recovered ledger %d: %+v, want closed with at least 50 entries", openLedger.ID, rec)
	}
	got := readAll(t, m2, first(m2), 64)
	if len(got) < 150+acked {
		t.Fatalf("recovered %d entries, but %d were acknowledged", len(got), 150+acked)
	}
	for i, e := range got {
		if !bytes.Equal(e.Data, payload(i)) || (i < 150 && e.Position != ps[i]) {
			t.Fatalf("entry %d at %v: %q", i, e.Position, e.Data)
		}
	}
	t.Logf("%d acknowledged after the first 150, %d recovered", acked, len(got)-150)
	more := appendN(t, m2, len(got), 5)
	all := readAll(t, m2, first(m2), 64)
	checkEntries(t, all[len(got):], more, len(got))
}

// The owner dies with adds in flight to its open ledger (none of them
// acknowledged yet: the bookies hang): recovery keeps every acknowledged
// entry, in order, and no other.
func TestCrashWithAddsInFlight(t *testing.T) {
	w := newMemWorld(t)
	const name = "t/ns/persistent/crash-inflight"
	m1 := open(t, w.env(100), name)
	ps := appendN(t, m1, 0, 150)
	openLedger := m1.Ledgers()[len(m1.Ledgers())-1]
	hang := memledger.NewHang(uint64(openLedger.ID), memledger.OpAppend)
	defer hang.Release()
	w.ledgers.SetInjector(hang)
	var (
		mu    sync.Mutex
		acked int
		wg    sync.WaitGroup
	)
	for i := 150; i < 190; i++ {
		wg.Add(1)
		m1.AddEntryAsync(context.Background(), payload(i), func(p Position, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				acked++
				mu.Unlock()
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hang.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	crashMem(m1)
	wg.Wait()
	w.ledgers.SetInjector(nil)
	m2 := open(t, w.env(100), name)
	defer m2.Close(context.Background())
	got := readAll(t, m2, first(m2), 64)
	if len(got) != 150 || acked != 0 {
		t.Fatalf("recovered %d entries, %d acknowledged after the first 150; want 150, 0", len(got), acked)
	}
	for i, e := range got {
		if !bytes.Equal(e.Data, payload(i)) || (i < 150 && e.Position != ps[i]) {
			t.Fatalf("entry %d at %v: %q", i, e.Position, e.Data)
		}
	}
}

func TestCrashWithEmptyLedger(t *testing.T) {
	w := newMemWorld(t)
	ctx := context.Background()
	const name = "t/ns/persistent/crash-empty"
	m0 := open(t, w.env(10), name)
	ps := appendN(t, m0, 0, 5)
	if err := m0.Close(ctx); err != nil {
		t.Fatal(err)
	}
	m1 := open(t, w.env(10), name)
	// Ledgers are created by the first add; make one as a rollover does
	// (no driver runs yet).
	if err := m1.rollover(ctx); err != nil {
		t.Fatal(err)
	}
	ls := m1.Ledgers()
	empty := ls[len(ls)-1].ID
	crashMem(m1) // its ledger is open and empty

	m2 := open(t, w.env(10), name)
	defer m2.Close(ctx)
	for _, l := range m2.Ledgers() {
		if l.ID == empty {
			t.Fatalf("the empty recovered ledger %d is still listed: %+v", empty, m2.Ledgers())
		}
	}
	if w.ledgerExists(empty) {
		t.Fatalf("the empty recovered ledger %d was not deleted", empty)
	}
	checkEntries(t, readAll(t, m2, first(m2), 64), ps, 0)
}

func TestCursors(t *testing.T) {
	w := newMemWorld(t)
	ctx := context.Background()
	const name = "t/ns/persistent/cursors"
	m := open(t, w.env(10), name)
	ps := appendN(t, m, 0, 20) // two ledgers of 10
	c, err := m.OpenCursor(ctx, "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	wantBacklog := func(c *Cursor, n int64) {
		t.Helper()
		if got := c.Backlog(); got != n {
			t.Fatalf("backlog %d, want %d (mark-delete %v, ranges %v)", got, n, c.MarkDelete(), c.AckedRanges())
		}
	}
	wantBacklog(c, 20)
	for _, i := range []int{5, 3, 12} {
		if err := c.Ack(ctx, ps[i]); err != nil {
			t.Fatal(err)
		}
	}
	wantBacklog(c, 17)
	for _, i := range []int{2, 0, 1} {
		if err := c.Ack(ctx, ps[i]); err != nil {
			t.Fatal(err)
		}
	}
	if c.MarkDelete() != ps[3] {
		t.Fatalf("mark-delete %v, want %v", c.MarkDelete(), ps[3])
	}
	wantBacklog(c, 14)
	if err := c.AckCumulative(ctx, ps[9]); err != nil {
		t.Fatal(err)
	}
	wantBacklog(c, 9)
	for _, i := range []int{11, 10} { // crosses into the second ledger
		if err := c.Ack(ctx, ps[i]); err != nil {
			t.Fatal(err)
		}
	}
	if c.MarkDelete() != ps[12] {
		t.Fatalf("mark-delete %v, want %v", c.MarkDelete(), ps[12])
	}
	if err := c.Ack(ctx, ps[15]); err != nil {
		t.Fatal(err)
	}
	wantBacklog(c, 6)
	latest, err := m.OpenCursor(ctx, "tail", Latest)
	if err != nil {
		t.Fatal(err)
	}
	wantBacklog(latest, 0)
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}

	m = open(t, w.env(10), name)
	defer m.Close(ctx)
	c, err = m.OpenCursor(ctx, "sub", Latest) // exists: restored, initial ignored
	if err != nil {
		t.Fatal(err)
	}
	if c.MarkDelete() != ps[12] || !c.IsAcked(ps[15]) || c.IsAcked(ps[13]) || !c.IsAcked(ps[4]) {
		t.Fatalf("restored mark-delete %v ranges %v", c.MarkDelete(), c.AckedRanges())
	}
	wantBacklog(c, 6)
	tail, err := m.OpenCursor(ctx, "tail", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	wantBacklog(tail, 0)
	more := appendN(t, m, 20, 3)
	wantBacklog(tail, 3)
	wantBacklog(c, 9)
	if err := tail.AckCumulative(ctx, more[2]); err != nil {
		t.Fatal(err)
	}
	wantBacklog(tail, 0)
	if err := m.DeleteCursor(ctx, "tail"); err != nil {
		t.Fatal(err)
	}
	if err := tail.Ack(ctx, more[0]); !errors.Is(err, ErrClosed) {
		t.Fatalf("ack on a deleted cursor: %v", err)
	}
	if err := m.DeleteCursor(ctx, "tail"); !errors.Is(err, ErrNoCursor) {
		t.Fatalf("delete twice: %v", err)
	}
	if got := m.Cursors(); len(got) != 1 || got[0] != "sub" {
		t.Fatalf("cursors %v", got)
	}
}

func TestTrimming(t *testing.T) {
	cl := startCluster(t)
	lc := newLedgerClient(t, cl)
	ctx := context.Background()
	m := open(t, testConfig(cl, lc, 10), "t/ns/persistent/trim")
	defer m.Close(ctx)
	c, err := m.OpenCursor(ctx, "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	ps := appendN(t, m, 0, 35)
	before := m.Ledgers()
	if len(before) != 4 {
		t.Fatalf("%d ledgers, want 4", len(before))
	}
	if err := c.AckCumulative(ctx, ps[14]); err != nil { // halfway through the second
		t.Fatal(err)
	}
	if got := m.Ledgers(); len(got) != 3 || got[0].ID != before[1].ID {
		t.Fatalf("after acking into ledger 2: %+v", got)
	}
	if err := c.AckCumulative(ctx, ps[34]); err != nil {
		t.Fatal(err)
	}
	after := m.Ledgers()
	if len(after) != 1 || after[0].ID != before[3].ID {
		t.Fatalf("after acking everything: %+v", after)
	}
	// The metadata says so too, and the bookies no longer have them.
	kv, err := cl.Meta.Get(ctx, TopicKey(cl.Region, "t/ns/persistent/trim"))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := decodeMeta(kv.Value)
	if err != nil || len(tm.Ledgers) != 1 {
		t.Fatalf("metadata: %+v, %v", tm, err)
	}
	other := newLedgerClient(t, cl)
	for _, l := range before[:3] {
		if _, err := other.OpenNoRecovery(ctx, uint64(l.ID)); !errors.Is(err, ledger.ErrNoLedger) {
			t.Errorf("ledger %d after trimming: %v", l.ID, err)
		}
	}
	// A read from a trimmed position starts at the first entry kept.
	es, _, err := m.Read(ctx, ps[0], 100)
	if err != nil || len(es) != 5 || es[0].Position != ps[30] {
		t.Fatalf("read from a trimmed position: %d entries, %v", len(es), err)
	}
	if c.Backlog() != 0 {
		t.Fatalf("backlog %d", c.Backlog())
	}
}

func TestNoCursorsNoTrimming(t *testing.T) {
	w := newMemWorld(t)
	ctx := context.Background()
	m := open(t, w.env(5), "t/ns/persistent/keep")
	defer m.Close(ctx)
	ps := appendN(t, m, 0, 12)
	c, err := m.OpenCursor(ctx, "x", Latest)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteCursor(ctx, c.Name()); err != nil {
		t.Fatal(err)
	}
	if n := len(m.Ledgers()); n != 3 {
		t.Fatalf("%d ledgers, want all 3 kept", n)
	}
	checkEntries(t, readAll(t, m, first(m), 100), ps, 0)
}

func TestSecondOwnerFencesFirst(t *testing.T) {
	cl := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const name = "t/ns/persistent/fence"
	m1 := open(t, testConfig(cl, newLedgerClient(t, cl), 100), name)
	ps := appendN(t, m1, 0, 5)

	m2 := open(t, testConfig(cl, newLedgerClient(t, cl), 100), name)
	kv, err := cl.Meta.Get(ctx, TopicKey(cl.Region, name))
	if err != nil {
		t.Fatal(err)
	}
	// m1's next metadata update fails: it must not clobber m2's list.
	if _, err := m1.OpenCursor(ctx, "sub", Earliest); !errors.Is(err, ErrFenced) {
		t.Fatalf("first owner's cursor create: %v, want ErrFenced", err)
	}
	if _, err := m1.AddEntry(ctx, []byte("stale")); !errors.Is(err, ErrFenced) {
		t.Fatalf("first owner's add: %v, want ErrFenced", err)
	}
	if err := m1.Close(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("first owner's close: %v, want ErrFenced", err)
	}
	kv2, err := cl.Meta.Get(ctx, TopicKey(cl.Region, name))
	if err != nil {
		t.Fatal(err)
	}
	if kv2.Rev != kv.Rev {
		t.Fatalf("the fenced owner wrote the metadata")
	}
	more := appendN(t, m2, 5, 3)
	checkEntries(t, readAll(t, m2, first(m2), 100), append(ps, more...), 0)

	// A third owner takes over from m2; m2's next add hits its fenced ledger.
	m3 := open(t, testConfig(cl, newLedgerClient(t, cl), 100), name)
	defer m3.Close(context.Background())
	if _, err := m2.AddEntry(ctx, []byte("stale")); !errors.Is(err, ErrFenced) {
		t.Fatalf("second owner's add after a takeover: %v, want ErrFenced", err)
	}
	m2.Close(ctx)
	checkEntries(t, readAll(t, m3, first(m3), 100), append(ps, more...), 0)
}

func TestBadInput(t *testing.T) {
	w := newMemWorld(t)
	ctx := context.Background()
	cfg := w.env(10)
	for _, name := range []string{"", "a/../b", "..", "/abs", strings.Repeat("n", MaxNameLen+1), "sp ace"} {
		if _, err := Open(ctx, cfg.Deps, cfg.Config, name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Open(%q): %v, want ErrInvalidName", name, err)
		}
	}
	if _, err := Open(ctx, cfg.Deps, Config{MaxEntriesPerLedger: -1}, "ok"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Open with a negative setting: %v, want ErrInvalidConfig", err)
	} else if !strings.Contains(err.Error(), "maxEntriesPerLedger") {
		t.Errorf("config error does not name the field: %v", err)
	}
	if _, err := Open(ctx, Deps{}, Config{}, "ok"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Open without dependencies: %v, want ErrInvalidConfig", err)
	} else if !strings.Contains(err.Error(), "metadata store") || !strings.Contains(err.Error(), "ledger client") {
		t.Errorf("dependency error does not name each: %v", err)
	}
	if keys := w.keys(metastore.RegionPrefix(w.region) + "topics/"); len(keys) != 0 {
		t.Fatalf("bad names wrote metadata: %v", keys)
	}
	if ids := w.ledgers.IDs(); len(ids) != 0 {
		t.Fatalf("bad names created ledgers: %v", ids)
	}

	const name = "t/ns/persistent/bad"
	m := open(t, cfg, name)
	defer m.Close(ctx)
	ps := appendN(t, m, 0, 3)
	c, err := m.OpenCursor(ctx, "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.OpenCursor(ctx, "a/b", Earliest); !errors.Is(err, ErrInvalidName) {
		t.Errorf("cursor a/b: %v", err)
	}
	kv, _ := cfg.Meta.Get(ctx, TopicKey(w.region, name))
	end := Position{Ledger: ps[2].Ledger, Entry: 3}
	if es, next, err := m.Read(ctx, end, 10); err != nil || len(es) != 0 || next != end {
		t.Errorf("read at the end: %d entries, %v, %v", len(es), next, err)
	}
	for _, p := range []Position{{Ledger: ps[2].Ledger, Entry: 4}, {Ledger: ps[2].Ledger + 100}, {Ledger: -1}, {Ledger: ps[0].Ledger, Entry: -2}} {
		if _, _, err := m.Read(ctx, p, 10); !errors.Is(err, ErrInvalidPosition) {
			t.Errorf("read from %v: %v, want ErrInvalidPosition", p, err)
		}
		if err := c.Ack(ctx, p); !errors.Is(err, ErrInvalidPosition) {
			t.Errorf("ack %v: %v, want ErrInvalidPosition", p, err)
		}
	}
	if err := c.AckCumulative(ctx, end); !errors.Is(err, ErrInvalidPosition) {
		t.Errorf("cumulative ack of the end: %v", err)
	}
	if _, _, err := m.Read(ctx, ps[0], 0); err == nil {
		t.Error("read of 0 entries accepted")
	}
	kv2, _ := cfg.Meta.Get(ctx, TopicKey(w.region, name))
	if kv2.Rev != kv.Rev {
		t.Error("bad input changed the metadata")
	}
	if c.Backlog() != 3 {
		t.Errorf("backlog %d", c.Backlog())
	}
}

// With a tiny tail cache the current ledger's entries come from the bookies,
// whose last-add-confirmed trails the writer.
func TestReadCurrentLedgerFromBookies(t *testing.T) {
	cl := startCluster(t)
	cfg := testConfig(cl, newLedgerClient(t, cl), 1000)
	cfg.TailCacheEntries = 2
	m := open(t, cfg, "t/ns/persistent/tail")
	defer m.Close(context.Background())
	ps := appendN(t, m, 0, 200)
	checkEntries(t, readAll(t, m, ps[0], 33), ps, 0)
	ps = append(ps, appendN(t, m, 200, 1)...)
	checkEntries(t, readAll(t, m, ps[0], 1000), ps, 0)
}

func TestRolloverBySizeAndAge(t *testing.T) {
	w := newMemWorld(t)
	var (
		mu  sync.Mutex
		now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	)
	cfg := w.env(0)
	cfg.MaxLedgerSize = 100
	cfg.MaxLedgerAge = time.Minute
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	m := open(t, cfg, "t/ns/persistent/size-age")
	defer m.Close(context.Background())
	ctx := context.Background()
	var ps []Position
	for i := 0; i < 5; i++ { // 40 bytes each: a ledger takes 3 (120 >= 100)
		p, err := m.AddEntry(ctx, bytes.Repeat([]byte{byte(i)}, 40))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if ps[2].Ledger != ps[0].Ledger || ps[3].Ledger == ps[2].Ledger || ps[3].Entry != 0 {
		t.Fatalf("size rollover: %v", ps)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	p, err := m.AddEntry(ctx, []byte("aged"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Ledger == ps[4].Ledger || p.Entry != 0 {
		t.Fatalf("age rollover: %v after %v", p, ps[4])
	}
	ls := m.Ledgers()
	if len(ls) != 3 || ls[0].Size != 120 || ls[0].Entries != 3 || ls[1].Entries != 2 || ls[1].Size != 80 {
		t.Fatalf("ledgers %+v", ls)
	}
}

// A reader tails the log while a writer appends across rollovers.
func TestConcurrentAppendAndRead(t *testing.T) {
	w := newMemWorld(t)
	m := open(t, w.env(50), "t/ns/persistent/tailing")
	defer m.Close(context.Background())
	const n = 400
	start := first(m)
	done := make(chan []Position, 1)
	go func() {
		var ps []Position
		for i := 0; i < n; i += 40 {
			ps = append(ps, appendNNoT(m, i, 40)...)
		}
		done <- ps
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []Entry
	from := start
	for len(got) < n {
		es, next, err := m.Read(ctx, from, 25)
		if err != nil {
			t.Fatalf("read from %v: %v", from, err)
		}
		if len(es) == 0 {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		got = append(got, es...)
		from = next
	}
	ps := <-done
	checkEntries(t, got, ps, 0)
}

// appendNNoT is appendN for goroutines other than the test's: it returns
// nil positions on failure, which checkEntries then reports.
func appendNNoT(m *ManagedLedger, from, n int) []Position {
	ps := make([]Position, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		m.AddEntryAsync(context.Background(), payload(from+i), func(p Position, err error) {
			defer wg.Done()
			if err == nil {
				ps[i] = p
			}
		})
	}
	wg.Wait()
	return ps
}

func TestConcurrentAcks(t *testing.T) {
	w := newMemWorld(t)
	ctx := context.Background()
	m := open(t, w.env(10), "t/ns/persistent/acks")
	defer m.Close(ctx)
	ps := appendN(t, m, 0, 40)
	c, err := m.OpenCursor(ctx, "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(ps))
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			for i := g; i < len(ps); i += 4 {
				if err := c.Ack(ctx, ps[len(ps)-1-i]); err != nil {
					errs <- err
				}
				_ = c.Backlog()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if c.MarkDelete() != ps[39] || c.Backlog() != 0 || len(c.AckedRanges()) != 0 {
		t.Fatalf("mark-delete %v backlog %d ranges %v", c.MarkDelete(), c.Backlog(), c.AckedRanges())
	}
	if ls := m.Ledgers(); len(ls) != 1 || ls[0].ID != ps[39].Ledger {
		t.Fatalf("ledgers after acking everything: %+v", ls)
	}
}

// TestChainedAddsStopAtFirstFailure: once an add of a chain fails, every
// later add of that chain fails too, even though the managed ledger rolls
// over to a new ledger and unchained adds succeed there; a new chain
// works again.
func TestChainedAddsStopAtFirstFailure(t *testing.T) {
	w := newMemWorld(t)
	w.ledgers = memledger.New(memledger.Config{MaxEntrySize: 1024})
	m := open(t, w.env(1000), "t/ns/persistent/chain")
	defer m.Close(context.Background())
	ctx := context.Background()
	chain := NewChain()
	type result struct {
		p   Position
		err error
	}
	add := func(c *Chain, data []byte) <-chan result {
		ch := make(chan result, 1)
		cb := func(p Position, err error) { ch <- result{p, err} }
		if c == nil {
			m.AddEntryAsync(ctx, data, cb)
		} else {
			m.AddEntryChainedAsync(ctx, c, data, cb)
		}
		return ch
	}
	first := add(chain, []byte("a"))
	tooBig := add(chain, bytes.Repeat([]byte("x"), 4096)) // fails: over MaxEntrySize
	after := add(chain, []byte("b"))
	other := add(nil, []byte("c"))
	if r := <-first; r.err != nil {
		t.Fatalf("first add: %v", r.err)
	}
	if r := <-tooBig; r.err == nil {
		t.Fatal("oversize add succeeded")
	}
	if r := <-after; !errors.Is(r.err, ErrChainBroken) {
		t.Fatalf("add after the failure: %v, want ErrChainBroken", r.err)
	}
	if r := <-other; r.err != nil {
		t.Fatalf("unchained add after the failure: %v", r.err)
	}
	if !chain.Broken() {
		t.Fatal("chain not broken")
	}
	if r := <-add(NewChain(), []byte("d")); r.err != nil {
		t.Fatalf("add of a new chain: %v", r.err)
	}
}

// TestAddsSurviveALedgerTheEnsembleCannotRepair: with three bookies and
// ensembles of two, bookies restart one after the other while adds flow,
// as in a rolling restart. A writer whose failed bookie has no replacement
// (the only other one failed under it earlier and is quarantined) breaks;
// its ledger is closed (recovered), the adds it kept succeed at their
// positions and the others are issued again on a new ledger. No add
// fails, and the log holds every payload once, in order.
func TestAddsSurviveALedgerTheEnsembleCannotRepair(t *testing.T) {
	cl := startCluster(t)
	env := testConfig(cl, newLedgerClient(t, cl), 100000)
	env.EnsembleSize, env.WriteQuorum, env.AckQuorum = 2, 2, 2
	m := open(t, env, "t/ns/persistent/rolling")
	defer m.Close(context.Background())

	var (
		mu   sync.Mutex
		got  []Position
		errs []error
		wg   sync.WaitGroup
	)
	const n = 3000
	stop := make(chan struct{})
	go func() {
		// Every bookie in turn, while the adds below run.
		for _, b := range cl.Bookies() {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			b.Restart()
		}
	}()
	ctx := context.Background()
	for i := 0; i < n; i++ {
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
		})
		if i%50 == 0 {
			time.Sleep(10 * time.Millisecond) // spread the adds over the restarts
		}
	}
	wg.Wait()
	close(stop)
	if len(errs) > 0 {
		t.Fatalf("%d adds failed, first: %v", len(errs), errs[0])
	}
	for k := 1; k < len(got); k++ {
		if got[k].Compare(got[k-1]) <= 0 {
			t.Fatalf("callback %d at %v after %v", k, got[k], got[k-1])
		}
	}
	es := readAll(t, m, first(m), 500)
	checkEntries(t, es, got, 0)
	t.Logf("%d adds across %d ledgers", n, len(m.Ledgers()))
}

// A cursor's acknowledged ranges are bounded (Config.MaxAckedRanges): an
// ack that would add one more fails with ErrTooManyAckRanges, of the
// PreconditionFailed kind, and changes nothing; acks that merge ranges or
// move the mark-delete position still work. Reopened, the cursor keeps
// the bound.
func TestMaxAckedRanges(t *testing.T) {
	w := newMemWorld(t)
	cfg := w.env(100)
	cfg.MaxAckedRanges = 3
	ctx := context.Background()
	const name = "t/ns/persistent/ranges"
	m := open(t, cfg, name)
	ps := appendN(t, m, 0, 20)
	c, err := m.OpenCursor(ctx, "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 3, 5} {
		if err := c.Ack(ctx, ps[i]); err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
	}
	err = c.Ack(ctx, ps[7])
	if !errors.Is(err, ErrTooManyAckRanges) || errkind.KindOf(err) != errkind.ErrPreconditionFailed {
		t.Fatalf("fourth range: %v (kind %v)", err, errkind.KindOf(err))
	}
	if c.IsAcked(ps[7]) || c.Backlog() != 17 {
		t.Fatalf("the refused ack changed the cursor: backlog %d", c.Backlog())
	}
	if err := c.Ack(ctx, ps[4]); err != nil { // merges 3..5
		t.Fatalf("merging ack: %v", err)
	}
	if err := c.Ack(ctx, ps[7]); err != nil {
		t.Fatalf("ack after a merge: %v", err)
	}
	if err := c.AckCumulative(ctx, ps[10]); err != nil {
		t.Fatalf("cumulative ack: %v", err)
	}
	m.Close(ctx)
	m = open(t, cfg, name)
	defer m.Close(ctx)
	c, err = m.OpenCursor(ctx, "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{12, 14, 16} {
		if err := c.Ack(ctx, ps[i]); err != nil {
			t.Fatalf("ack %d after reopening: %v", i, err)
		}
	}
	if err := c.Ack(ctx, ps[18]); !errors.Is(err, ErrTooManyAckRanges) {
		t.Fatalf("fourth range after reopening: %v", err)
	}
}

// TestCursorBatchAcks: a batch entry acknowledged in parts keeps the
// messages still to acknowledge (the intersection of the ack sets), across
// a reopen of the managed ledger, and is acknowledged whole once none is
// left; a reset forgets partial batches.
func TestCursorBatchAcks(t *testing.T) {
	w := newMemWorld(t)
	const name = "t/ns/persistent/batch"
	ctx := context.Background()
	m := open(t, w.env(100), name)
	ps := appendN(t, m, 0, 3)
	c, err := m.OpenCursor(ctx, "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	// A batch of 5: messages 0 and 2 acknowledged, then 1 and 4.
	if err := c.AckBatch(ctx, ps[0], []int64{0b11010}); err != nil {
		t.Fatal(err)
	}
	if err := c.AckBatch(ctx, ps[0], []int64{0b01101}); err != nil {
		t.Fatal(err)
	}
	if got := c.BatchRemaining(ps[0]); len(got) != 1 || got[0] != 0b01000 {
		t.Fatalf("remaining %b, want 1000 (message 3)", got)
	}
	if c.IsAcked(ps[0]) || c.Backlog() != 3 {
		t.Fatalf("partly acknowledged entry counts as acknowledged: acked %v backlog %d", c.IsAcked(ps[0]), c.Backlog())
	}
	if err := c.AckBatch(ctx, ps[1], make([]int64, MaxBatchWords+1)); err == nil {
		t.Error("an ack set of 65 words was taken")
	}
	if err := c.AckBatch(ctx, Position{Ledger: ps[0].Ledger + 100, Entry: 0}, []int64{1}); !errors.Is(err, ErrInvalidPosition) {
		t.Errorf("ack set for no entry: %v", err)
	}
	// Stored: a reopened managed ledger has it.
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	m = open(t, w.env(100), name)
	defer m.Close(ctx)
	c, err = m.OpenCursor(ctx, "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.BatchRemaining(ps[0]); len(got) != 1 || got[0] != 0b01000 {
		t.Fatalf("after reopen remaining %b, want 1000", got)
	}
	// The last message: the entry is acknowledged, the mark-delete moves.
	if err := c.AckBatch(ctx, ps[0], []int64{0b10111}); err != nil {
		t.Fatal(err)
	}
	if !c.IsAcked(ps[0]) || c.MarkDelete() != ps[0] || c.BatchRemaining(ps[0]) != nil {
		t.Fatalf("fully acknowledged batch: acked %v, mark-delete %v, remaining %v", c.IsAcked(ps[0]), c.MarkDelete(), c.BatchRemaining(ps[0]))
	}
	if err := c.AckBatch(ctx, ps[1], []int64{1}); err != nil {
		t.Fatal(err)
	}
	if err := c.ResetTo(ctx, ps[0]); err != nil {
		t.Fatal(err)
	}
	if got := c.PartialBatches(); len(got) != 0 {
		t.Fatalf("partial batches after a reset: %v", got)
	}
}
