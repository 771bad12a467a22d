package storage

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

func flipBit(t *testing.T, name string, off int64, bit uint) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1 << bit
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func asCorruption(t *testing.T, err error) *CorruptionError {
	t.Helper()
	var ce *CorruptionError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
		t.Fatalf("want a CorruptionError, got %v", err)
	}
	return ce
}

func TestBitFlipInEntryLog(t *testing.T) {
	cfg := smallConfig(vfs.Default, t.TempDir())
	s := openT(t, cfg)
	for e := range uint64(4) {
		mustAdd(t, s, 1, e, payload(1, e, 0, 1000))
	}
	checkpointT(t, s)
	locs := make([]logLoc, 4)
	for e := range uint64(4) {
		loc, found, err := s.idx.lookup(1, e)
		if err != nil || !found {
			t.Fatalf("lookup %d: %v %v", e, found, err)
		}
		locs[e] = loc
	}
	s.Close()

	logName := filepath.Join(cfg.LedgerDir, entryLogName(locs[1].log))
	// Entry 1: a bit in its data. Entry 2: a bit in its frame header.
	// Entry 3: a bit in its ledger/entry prefix.
	flipBit(t, logName, locs[1].off+frameHeaderSize+entryPrefixSize+500, 3)
	flipBit(t, logName, locs[2].off+2, 0)
	flipBit(t, logName, locs[3].off+frameHeaderSize+1, 7)

	s = openT(t, cfg)
	expectRead(t, s, 1, 0, payload(1, 0, 0, 1000))
	for e := uint64(1); e <= 3; e++ {
		data, err := s.Read(1, e)
		if data != nil {
			t.Fatalf("entry %d: corrupt read returned data", e)
		}
		ce := asCorruption(t, err)
		if ce.File != logName || ce.Offset != locs[e].off || ce.Ledger != 1 || ce.Entry != e {
			t.Fatalf("entry %d: %+v", e, ce)
		}
	}
}

func TestBitFlipInIndexSlot(t *testing.T) {
	cfg := smallConfig(vfs.Default, t.TempDir())
	s := openT(t, cfg)
	mustAdd(t, s, 9, 0, []byte("zero"))
	mustAdd(t, s, 9, 1, []byte("one"))
	checkpointT(t, s)
	s.Close()
	idxName := filepath.Join(cfg.LedgerDir, "index", indexName(9))
	flipBit(t, idxName, slotOffset(1)+9, 1)
	s = openT(t, cfg)
	expectRead(t, s, 9, 0, []byte("zero"))
	_, err := s.Read(9, 1)
	if ce := asCorruption(t, err); ce.File != idxName {
		t.Fatalf("%+v", ce)
	}
}

// journalWithEntries writes n entries of 100 bytes, each in its own group
// commit, and stops like a crash so they exist only in the journal. It
// returns the journal file and the offset of each entry's frame.
func journalWithEntries(t *testing.T, cfg Config, n int) (string, []int64) {
	t.Helper()
	cfg.FlushInterval = time.Hour
	s := openT(t, cfg)
	for e := range uint64(n) {
		mustAdd(t, s, 1, e, payload(1, e, 0, 100))
	}
	name := filepath.Join(cfg.JournalDir, journalName(s.jw.id))
	crashStop(s)
	offs := make([]int64, n)
	for i := range offs {
		offs[i] = fileHeaderSize + int64(i)*(frameHeaderSize+entryPrefixSize+100)
	}
	return name, offs
}

func TestBitFlipInJournalMiddle(t *testing.T) {
	cfg := smallConfig(vfs.Default, t.TempDir())
	name, offs := journalWithEntries(t, cfg, 10)
	flipBit(t, name, offs[4]+frameHeaderSize+entryPrefixSize+50, 2)
	_, err := Open(cfg)
	ce := asCorruption(t, err)
	if ce.File != name || ce.Offset != offs[4] {
		t.Fatalf("%+v", ce)
	}
}

func TestBitFlipInJournalHeaderMiddle(t *testing.T) {
	cfg := smallConfig(vfs.Default, t.TempDir())
	name, offs := journalWithEntries(t, cfg, 10)
	flipBit(t, name, offs[2]+1, 0) // the length field
	_, err := Open(cfg)
	if ce := asCorruption(t, err); ce.File != name || ce.Offset != offs[2] {
		t.Fatalf("%+v", ce)
	}
}

func TestBitFlipInJournalTailIsTruncated(t *testing.T) {
	cfg := smallConfig(vfs.Default, t.TempDir())
	name, offs := journalWithEntries(t, cfg, 10)
	flipBit(t, name, offs[9]+frameHeaderSize+entryPrefixSize+50, 2)
	for range 2 { // the truncation itself must leave a clean journal
		s := openT(t, cfg)
		for e := range uint64(9) {
			expectRead(t, s, 1, e, payload(1, e, 0, 100))
		}
		if _, err := s.Read(1, 9); !errors.Is(err, ErrNoEntry) {
			t.Fatalf("torn entry: %v", err)
		}
		s.Close()
	}
	fi, err := os.Stat(name)
	if err == nil && fi.Size() != offs[9] {
		t.Fatalf("journal is %d bytes, want truncation at %d", fi.Size(), offs[9])
	}
}

func TestJournalTornTailAfterPowerLoss(t *testing.T) {
	// A torn clone keeps random sectors of an unsynced write: the batch
	// being written when the power went out. Replay must cut it off and
	// keep everything before it.
	for seed := range uint64(30) {
		m := vfs.NewStrictMem()
		cfg := smallConfig(m, "/d")
		cfg.FlushInterval = time.Hour
		var syncs atomic.Int64
		var clone *vfs.MemFS
		inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
			if op == vfs.OpSync && filepath.Dir(path) == cfg.JournalDir && syncs.Add(1) == int64(5+seed%7) {
				clone = m.CrashCloneTorn(rand.New(rand.NewPCG(seed, 99)))
			}
			return nil
		})
		cfg.FS = vfs.NewErrorFS(m, inj)
		s := openT(t, cfg)
		for e := range uint64(12) {
			mustAdd(t, s, 1, e, payload(1, e, 0, 700+int(e)*300))
		}
		s.Close()
		if clone == nil {
			t.Fatal("no clone taken")
		}
		cfg.FS = clone
		s = openT(t, cfg)
		// The clone was taken just before the sync of the record for entry
		// n-1 (the journal header sync is sync 1): entries before it are
		// acked and must be there; that one may or may not be.
		acked := 5 + seed%7 - 2
		for e := range acked {
			expectRead(t, s, 1, e, payload(1, e, 0, 700+int(e)*300))
		}
		if d, err := s.Read(1, acked); err == nil {
			if string(d) != string(payload(1, acked, 0, 700+int(acked)*300)) {
				t.Fatalf("seed %d: torn entry read back wrong", seed)
			}
		} else if !errors.Is(err, ErrNoEntry) {
			t.Fatalf("seed %d: %v", seed, err)
		}
		s.Close()
	}
}
