package storage

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

func TestConfigValidate(t *testing.T) {
	err := Config{
		GroupCommitMaxBytes: -1, JournalFileMaxBytes: -1, WriteCacheMaxBytes: -1, FlushInterval: -1,
		EntryLogMaxBytes: -1, CompactionThreshold: 2, MaxEntrySize: MaxEntrySizeLimit + 1,
	}.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, field := range []string{"JournalDir", "LedgerDir", "GroupCommitMaxBytes", "JournalFileMaxBytes",
		"WriteCacheMaxBytes", "FlushInterval", "EntryLogMaxBytes", "CompactionThreshold", "MaxEntrySize"} {
		if !strings.Contains(err.Error(), "Config."+field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	if err := (Config{JournalDir: "j", LedgerDir: "l"}).Validate(); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	if _, err := Open(Config{}); err == nil {
		t.Fatal("Open accepted an empty config")
	}
}

// roundTripData adds entries of varied sizes (up to 64 KiB) to several
// ledgers from several goroutines and returns what was written.
func roundTripData(t *testing.T, s *Store, ledgers, entries int, seed uint64) map[[2]uint64][]byte {
	t.Helper()
	want := map[[2]uint64][]byte{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, ledgers)
	for l := range uint64(ledgers) {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, l))
			var pending sync.WaitGroup
			for e := range uint64(entries) {
				size := r.IntN(64<<10) + 1
				if e%7 == 0 {
					size = r.IntN(100) + 1
				}
				d := payload(l+1, e, 0, size)[:size]
				pending.Add(1)
				s.Add(l+1, e, d, false, func(err error) {
					defer pending.Done()
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					want[[2]uint64{l + 1, e}] = d
					mu.Unlock()
				})
			}
			pending.Wait()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("add: %v", err)
	}
	return want
}

func verifyAll(t *testing.T, s *Store, want map[[2]uint64][]byte) {
	t.Helper()
	last := map[uint64]int64{}
	for k, d := range want {
		expectRead(t, s, k[0], k[1], d)
		last[k[0]] = max(last[k[0]], int64(k[1]))
	}
	for l, e := range last {
		if got, err := s.LastEntryID(l); err != nil || got != e {
			t.Fatalf("LastEntryID(%d) = %d, %v; want %d", l, got, err, e)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig(nil, dir)
	cfg.FS = vfs.Default
	cfg.WriteCacheMaxBytes = 1 << 20
	cfg.EntryLogMaxBytes = 1 << 20
	cfg.JournalFileMaxBytes = 1 << 20
	cfg.FlushInterval = time.Hour // flushes come from the cache filling up and Checkpoint
	s := openT(t, cfg)
	want := roundTripData(t, s, 5, 60, 1)
	verifyAll(t, s, want)

	checkpointT(t, s)
	verifyAll(t, s, want)

	if _, err := s.Read(1, 1000); !errors.Is(err, ErrNoEntry) {
		t.Fatalf("missing entry: %v", err)
	}
	if _, err := s.Read(99, 0); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("missing ledger: %v", err)
	}
	if _, err := s.LastEntryID(99); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("LastEntryID of a missing ledger: %v", err)
	}

	// Entries added after the checkpoint live only in the journal and the
	// write cache when the store closes.
	more := roundTripData(t, s, 2, 20, 2)
	for k, v := range more {
		want[k] = v
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, cfg)
	verifyAll(t, s, want)

	// A crash without Close: the journal replays what was not checkpointed.
	extra := roundTripData(t, s, 3, 30, 3)
	for k, v := range extra {
		want[k] = v
	}
	crashStop(s)
	s = openT(t, cfg)
	verifyAll(t, s, want)
	if u, err := s.Usage(); err != nil || u.LedgerTotal == 0 || u.LedgerUsed == 0 || u.JournalUsed == 0 {
		t.Fatalf("Usage = %+v, %v", u, err)
	}
}

func TestRoundTripMemPowerLoss(t *testing.T) {
	m := vfs.NewStrictMem()
	cfg := smallConfig(m, "/data")
	s := openT(t, cfg)
	want := roundTripData(t, s, 4, 40, 4)
	checkpointT(t, s)
	more := roundTripData(t, s, 4, 10, 5)
	for k, v := range more {
		want[k] = v
	}
	clone := m.CrashClone() // everything acked is durable
	s.Close()
	cfg.FS = clone
	s = openT(t, cfg)
	verifyAll(t, s, want)
}

func TestOverwriteEntry(t *testing.T) {
	s := openT(t, smallConfig(vfs.NewStrictMem(), "/d"))
	mustAdd(t, s, 1, 0, []byte("first"))
	mustAdd(t, s, 1, 0, []byte("second"))
	expectRead(t, s, 1, 0, []byte("second"))
	checkpointT(t, s)
	mustAdd(t, s, 1, 0, []byte("third"))
	expectRead(t, s, 1, 0, []byte("third"))
	checkpointT(t, s)
	expectRead(t, s, 1, 0, []byte("third"))
}

func TestAddRejections(t *testing.T) {
	cfg := smallConfig(vfs.NewStrictMem(), "/d")
	cfg.MaxEntrySize = 100
	s := openT(t, cfg)
	if err := addWait(s, 1, 0, make([]byte, 101), false); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversize add: %v", err)
	}
	if err := addWait(s, 1, MaxEntryID+1, []byte("x"), false); !errors.Is(err, ErrEntryIDRange) {
		t.Fatalf("entry id out of range: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := addWait(s, 1, 0, []byte("x"), false); !errors.Is(err, ErrClosed) {
		t.Fatalf("add after close: %v", err)
	}
	if err := s.Fence(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("fence after close: %v", err)
	}
	if _, err := s.Read(1, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if err := s.Checkpoint(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("checkpoint after close: %v", err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
}

func TestSparseEntriesAndLastEntry(t *testing.T) {
	// With striping (ensemble larger than the write quorum) a bookie holds
	// only some entry ids of a ledger.
	cfg := smallConfig(vfs.NewStrictMem(), "/d")
	s := openT(t, cfg)
	for _, e := range []uint64{0, 2, 3, 5, 300} {
		mustAdd(t, s, 7, e, payload(7, e, 0, 50))
	}
	check := func() {
		t.Helper()
		if last, err := s.LastEntryID(7); err != nil || last != 300 {
			t.Fatalf("LastEntryID = %d, %v", last, err)
		}
		for _, e := range []uint64{1, 4, 299, 301} {
			if _, err := s.Read(7, e); !errors.Is(err, ErrNoEntry) {
				t.Fatalf("read hole %d: %v", e, err)
			}
		}
		expectRead(t, s, 7, 300, payload(7, 300, 0, 50))
	}
	check()
	checkpointT(t, s)
	check()
	s.Close()
	s = openT(t, cfg)
	check()
}

func TestRestartsDoNotAccumulateJournalFiles(t *testing.T) {
	m := vfs.NewStrictMem()
	cfg := smallConfig(m, "/d")
	s := openT(t, cfg)
	mustAdd(t, s, 1, 0, []byte("x"))
	s.Close()
	for range 5 {
		s = openT(t, cfg)
		s.Close()
	}
	ids, err := listSeqFiles(m, cfg.JournalDir, "journal-", ".log")
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) > 2 {
		t.Fatalf("%d journal files after idle restarts: %v", len(ids), ids)
	}
	s = openT(t, cfg)
	expectRead(t, s, 1, 0, []byte("x"))
}
