package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// errorWorkload is a short workload touching every code path that does I/O:
// adds (with journal and entry log rotation), reads, a fence, a delete,
// checkpoints, compaction and close. It records what was acknowledged and
// reports any broken promise (a callback called twice, a read returning
// wrong bytes).
func errorWorkload(s *Store, m *model) []string {
	ctx := context.Background()
	var mu sync.Mutex
	var problems []string
	report := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	calls := map[key]int{}
	add := func(k key, recovery bool, wg *sync.WaitGroup) {
		m.mu.Lock()
		m.attempted[k]++
		v := m.attempted[k]
		m.mu.Unlock()
		wg.Add(1)
		s.Add(k.ledger, k.entry, dataFor(k, v), recovery, func(err error) {
			defer wg.Done()
			m.mu.Lock()
			defer m.mu.Unlock()
			calls[k]++
			if calls[k] > int(v) {
				report("done called twice for %v", k)
			}
			if err == nil {
				m.acked[k] = max(m.acked[k], v)
			}
		})
	}
	read := func(k key) {
		d, err := s.Read(k.ledger, k.entry)
		if err != nil {
			return // failing reads are fine; wrong bytes are not
		}
		m.mu.Lock()
		maxV := m.attempted[k]
		m.mu.Unlock()
		ok := false
		for v := uint64(1); v <= maxV; v++ {
			ok = ok || bytes.Equal(d, dataFor(k, v))
		}
		if !ok {
			report("read %v returned bytes never written", k)
		}
	}

	var wg sync.WaitGroup
	for round := range uint64(12) {
		for l := uint64(1); l <= 3; l++ {
			add(key{l, round}, false, &wg)
		}
		if round%4 == 3 {
			wg.Wait()
			read(key{1, round - 1})
		}
	}
	wg.Wait()
	if s.Fence(ctx, 1) == nil {
		m.mu.Lock()
		m.fenced[1] = true
		m.mu.Unlock()
	}
	add(key{1, 12}, true, &wg)
	wg.Wait()
	_ = s.Checkpoint(ctx)
	m.mu.Lock()
	m.deleting[2] = true
	m.mu.Unlock()
	if s.Delete(ctx, 2) == nil {
		m.mu.Lock()
		m.deleted[2] = true
		m.mu.Unlock()
	}
	_ = s.Checkpoint(ctx)
	_, _ = s.Compact(ctx)
	for e := uint64(12); e < 20; e++ {
		add(key{3, e}, false, &wg)
	}
	add(key{3, 0}, false, &wg) // overwrite
	wg.Wait()
	read(key{3, 5})
	read(key{1, 12})
	_ = s.Checkpoint(ctx)
	return problems
}

func sweepConfig(fsys vfs.FS) Config {
	cfg := smallConfig(fsys, "/e")
	cfg.JournalFileMaxBytes = 12 << 10
	cfg.EntryLogMaxBytes = 12 << 10
	cfg.WriteCacheMaxBytes = 16 << 10
	cfg.FlushInterval = time.Hour
	cfg.CompactionThreshold = 0.9
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

// runWithInjector runs the workload with inj and checks the promises.
func runWithInjector(t *testing.T, label string, inj vfs.Injector) {
	t.Helper()
	mem := vfs.NewStrictMem()
	m := newModel()
	cfg := sweepConfig(vfs.NewErrorFS(mem, inj))
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("%s: panic: %v", label, r)
			}
		}()
		s, err := Open(cfg)
		if err != nil {
			return // nothing acknowledged
		}
		for _, p := range errorWorkload(s, m) {
			t.Errorf("%s: %s", label, p)
		}
		s.Close()
	}()
	if t.Failed() {
		t.FailNow()
	}
	// Every add got exactly one answer (Close has returned, so all
	// callbacks ran). What was acknowledged must be there after a restart
	// on the healthy disk, even after a power loss.
	attempted := m.attempted
	cfg.FS = mem.CrashClone()
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("%s: reopen on the clean filesystem: %v", label, err)
	}
	checkStore(t, label, s, m, attempted)
	if err := s.Close(); err != nil {
		t.Fatalf("%s: close: %v", label, err)
	}
}

func TestErrorSweep(t *testing.T) {
	count := vfs.OnNth(0)
	runWithInjector(t, "no errors", count)
	total := count.Count()
	step := int64(1)
	if testing.Short() && total > 300 {
		step = total / 300
	}
	t.Logf("workload does %d filesystem operations; failing each %d", total, step)
	start := time.Now()
	runs := 0
	for n := int64(1); n <= total+5; n += step {
		runWithInjector(t, fmt.Sprintf("fail op %d", n), vfs.OnNth(n))
		runs++
	}
	// A disk that dies: every operation fails from the Nth on.
	for n := int64(1); n <= total; n += max(1, total/40) {
		runWithInjector(t, fmt.Sprintf("fail from op %d on", n), &vfs.NthInjector{N: n, Sticky: true})
		runs++
	}
	// Only syncs fail, one at a time (fsyncgate: after a failed fsync
	// nothing written since the last good one can be trusted).
	syncs := vfs.OnNth(0, vfs.OpSync, vfs.OpSyncDir)
	runWithInjector(t, "count syncs", syncs)
	for n := int64(1); n <= syncs.Count(); n++ {
		runWithInjector(t, fmt.Sprintf("fail sync %d", n), vfs.OnNth(n, vfs.OpSync, vfs.OpSyncDir))
		runs++
	}
	t.Logf("%d runs in %v", runs, time.Since(start).Round(time.Millisecond))
}

func TestFailedStoreRefusesWrites(t *testing.T) {
	inj := &vfs.NthInjector{N: 1, Ops: []vfs.Op{vfs.OpSync}, Sticky: true}
	on := vfs.InjectorFunc(func(op vfs.Op, path string) error { return nil })
	var cur vfs.Injector = on
	var mu sync.Mutex
	cfg := sweepConfig(vfs.NewErrorFS(vfs.NewStrictMem(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
		mu.Lock()
		defer mu.Unlock()
		return cur.MaybeError(op, path)
	})))
	s := openT(t, cfg)
	mustAdd(t, s, 1, 0, []byte("ok"))
	mu.Lock()
	cur = inj
	mu.Unlock()
	if err := addWait(s, 1, 1, []byte("x"), false); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("add with a failing fsync: %v", err)
	}
	mu.Lock()
	cur = on
	mu.Unlock()
	// The disk recovered, but the store must not trust it any more.
	if err := addWait(s, 1, 2, []byte("y"), false); err == nil {
		t.Fatal("add accepted after a failed fsync")
	}
	if err := s.Fence(context.Background(), 1); err == nil {
		t.Fatal("fence accepted after a failed fsync")
	}
	expectRead(t, s, 1, 0, []byte("ok")) // reads keep working
	if err := s.Close(); err == nil {
		t.Fatal("Close of a failed store reported no error")
	}
}
