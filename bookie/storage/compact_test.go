package storage

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

func entryLogIDs(t *testing.T, fsys vfs.FS, dir string) map[uint64]bool {
	t.Helper()
	ids, err := listSeqFiles(fsys, dir, "entrylog-", ".log")
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

func TestDeleteAndCompactionReclaimSpace(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig(vfs.Default, dir)
	cfg.EntryLogMaxBytes = 128 << 10
	cfg.WriteCacheMaxBytes = 128 << 10
	ctx := context.Background()
	s := openT(t, cfg)

	// Ledgers 1..8, interleaved so every entry log holds several of them.
	want := map[[2]uint64][]byte{}
	for round := range uint64(40) {
		for l := uint64(1); l <= 8; l++ {
			d := payload(l, round, 0, 3000)
			mustAdd(t, s, l, round, d)
			want[[2]uint64{l, round}] = d
		}
	}
	checkpointT(t, s)
	before := entryLogIDs(t, vfs.Default, cfg.LedgerDir)
	u0, _ := s.Usage()

	// Delete three quarters of the data.
	for l := uint64(1); l <= 6; l++ {
		if err := s.Delete(ctx, l); err != nil {
			t.Fatal(err)
		}
		for e := range uint64(40) {
			delete(want, [2]uint64{l, e})
		}
	}
	if _, err := s.Read(1, 0); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("read of a deleted ledger: %v", err)
	}
	checkpointT(t, s)

	// Compact while adds continue on other ledgers.
	var wg sync.WaitGroup
	var stop atomic.Bool
	var addErr atomic.Value
	var added sync.Map
	for w := range uint64(3) {
		wg.Go(func() {
			l := 100 + w
			for e := uint64(0); !stop.Load(); e++ {
				d := payload(l, e, 0, 2000)
				if err := addWait(s, l, e, d, false); err != nil {
					addErr.Store(err)
					return
				}
				added.Store([2]uint64{l, e}, d)
			}
		})
	}
	time.Sleep(10 * time.Millisecond)
	st, err := s.Compact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if err, _ := addErr.Load().(error); err != nil {
		t.Fatalf("add during compaction: %v", err)
	}
	if st.LogsRemoved == 0 || st.BytesReclaimed == 0 {
		t.Fatalf("nothing reclaimed: %+v", st)
	}
	after := entryLogIDs(t, vfs.Default, cfg.LedgerDir)
	gone := 0
	for id := range before {
		if !after[id] {
			gone++
		}
	}
	if gone == 0 {
		t.Fatalf("no entry log file removed: before %v after %v", before, after)
	}
	u1, _ := s.Usage()
	t.Logf("compaction: %+v; %d logs removed; ledger bytes %d -> %d", st, gone, u0.LedgerUsed, u1.LedgerUsed)

	added.Range(func(k, v any) bool {
		want[k.([2]uint64)] = v.([]byte)
		return true
	})
	verifyAll(t, s, want)
	// Only the added ledgers' new data should remain: usage drops even with
	// the concurrent adds.
	checkpointT(t, s)
	if st2, err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("second pass: %+v", st2)
	}
	u2, _ := s.Usage()
	var addedBytes uint64
	added.Range(func(_, v any) bool { addedBytes += uint64(len(v.([]byte))); return true })
	if u2.LedgerUsed >= u0.LedgerUsed/2+addedBytes*2 {
		t.Fatalf("ledger usage %d did not drop enough from %d (adds %d bytes)", u2.LedgerUsed, u0.LedgerUsed, addedBytes)
	}

	// Deleted ledgers stay deleted after a restart, and everything else is
	// still there.
	s.Close()
	s = openT(t, cfg)
	for l := uint64(1); l <= 6; l++ {
		if _, err := s.Read(l, 0); !errors.Is(err, ErrNoLedger) {
			t.Fatalf("deleted ledger %d after restart: %v", l, err)
		}
		if _, err := s.LastEntryID(l); !errors.Is(err, ErrNoLedger) {
			t.Fatalf("deleted ledger %d LastEntryID after restart: %v", l, err)
		}
	}
	verifyAll(t, s, want)
	if _, err := vfs.Default.Stat(filepath.Join(cfg.LedgerDir, "index", indexName(1))); err == nil {
		t.Fatal("index file of a deleted ledger still exists")
	}
}

func TestBackgroundCompaction(t *testing.T) {
	m := vfs.NewStrictMem()
	cfg := smallConfig(m, "/d")
	cfg.EntryLogMaxBytes = 64 << 10
	cfg.CompactionInterval = 10 * time.Millisecond
	s := openT(t, cfg)
	for e := range uint64(100) {
		mustAdd(t, s, 1, e, payload(1, e, 0, 2000))
		mustAdd(t, s, 2, e, payload(2, e, 0, 2000))
	}
	checkpointT(t, s)
	before := len(entryLogIDs(t, m, cfg.LedgerDir))
	if err := s.Delete(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	checkpointT(t, s)
	waitFor(t, 5*time.Second, "background compaction", func() bool {
		return len(entryLogIDs(t, m, cfg.LedgerDir)) < before
	})
	for e := range uint64(100) {
		expectRead(t, s, 2, e, payload(2, e, 0, 2000))
	}
}

// stallIndexWrites blocks the first index write while armed.
type stallIndexWrites struct {
	indexDir string
	armed    atomic.Bool
	stalled  chan struct{}
	release  chan struct{}
}

func (s *stallIndexWrites) MaybeError(op vfs.Op, path string) error {
	if op == vfs.OpWrite && filepath.Dir(path) == s.indexDir && s.armed.CompareAndSwap(true, false) {
		close(s.stalled)
		<-s.release
	}
	return nil
}

// TestCompactionDuringFlushKeepsNewLogs is the regression test for a race
// the crash sweep found: a flush that rotates entry logs seals them before
// it writes the index slots pointing into them. A compaction pass starting
// in between saw their entries as unreferenced and removed the logs.
func TestCompactionDuringFlushKeepsNewLogs(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig(nil, dir)
	cfg.EntryLogMaxBytes = 8 << 10
	cfg.FlushInterval = time.Hour
	cfg.WriteCacheMaxBytes = 1 << 20
	cfg.CompactionThreshold = 0.95
	stall := &stallIndexWrites{indexDir: filepath.Join(cfg.LedgerDir, "index"), stalled: make(chan struct{}), release: make(chan struct{})}
	cfg.FS = vfs.NewErrorFS(vfs.Default, stall)
	s := openT(t, cfg)
	for e := range uint64(20) {
		mustAdd(t, s, 1, e, payload(1, e, 0, 1000))
	}
	for e := range uint64(20) {
		mustAdd(t, s, 2, e, payload(2, e, 0, 1000))
	}
	stall.armed.Store(true)
	flushed := make(chan error, 1)
	go func() { flushed <- s.Checkpoint(context.Background()) }()
	<-stall.stalled // every entry is in the new logs; no index slot yet
	// Ledger 2 goes away, so the new logs look mostly dead.
	if err := s.Delete(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(stall.release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	for e := range uint64(20) {
		expectRead(t, s, 1, e, payload(1, e, 0, 1000))
	}
	// Now the logs may go: compaction reclaims ledger 2's space and keeps
	// ledger 1.
	st, err := s.Compact(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.LogsRemoved == 0 {
		t.Fatalf("nothing compacted after the flush: %+v", st)
	}
	for e := range uint64(20) {
		expectRead(t, s, 1, e, payload(1, e, 0, 1000))
	}
}
