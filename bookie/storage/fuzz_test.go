package storage

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

func fuzzConfig(fsys vfs.FS) Config {
	cfg := smallConfig(fsys, "/f")
	cfg.FlushInterval = time.Hour
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

func readMemFile(t testing.TB, fsys vfs.FS, name string) []byte {
	t.Helper()
	b, err := readSmallFile(fsys, name, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sampleJournal returns the bytes of a journal file holding adds, a fence
// and a delete, as file id 1.
func sampleJournal(t testing.TB) []byte {
	m := vfs.NewStrictMem()
	cfg := fuzzConfig(m)
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for e := range uint64(4) {
		if err := addWait(s, 1, e, payload(1, e, 0, 40+int(e)*10), false); err != nil {
			t.Fatal(err)
		}
		if err := addWait(s, 2, e, payload(2, e, 0, 30), e == 3); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := s.Fence(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, 3); err != nil {
		t.Fatal(err)
	}
	crashStop(s)
	return readMemFile(t, m, filepath.Join(cfg.JournalDir, journalName(1)))
}

// FuzzJournalReplay opens a store whose only journal file holds the fuzzed
// bytes. Open may refuse the file with a CorruptionError; it must never
// panic or fail otherwise, and a store it opens must work.
func FuzzJournalReplay(f *testing.F) {
	j := sampleJournal(f)
	f.Add(j)
	f.Add(j[:len(j)-7])              // torn tail
	f.Add(j[:fileHeaderSize])        // header only
	f.Add(j[:fileHeaderSize-3])      // torn header
	f.Add([]byte{})                  // empty
	mid := append([]byte(nil), j...) // flipped bit in the middle
	mid[fileHeaderSize+frameHeaderSize+20] ^= 4
	f.Add(mid)
	f.Fuzz(func(t *testing.T, data []byte) {
		m := vfs.NewStrictMem()
		cfg := fuzzConfig(m)
		if err := m.MkdirAll(cfg.JournalDir, 0o755); err != nil {
			t.Fatal(err)
		}
		jf, err := m.Create(filepath.Join(cfg.JournalDir, journalName(1)))
		if err != nil {
			t.Fatal(err)
		}
		jf.Write(data)
		jf.Close()
		s, err := Open(cfg)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open failed without a CorruptionError: %v", err)
			}
			return
		}
		defer s.Close()
		for l := range uint64(4) {
			s.LastEntryID(l)
			s.Fenced(l)
			for e := range uint64(5) {
				if _, err := s.Read(l, e); err != nil && !isNotFound(err) {
					t.Fatalf("read %d/%d: %v", l, e, err)
				}
			}
		}
		if err := addWait(s, 7, 0, []byte("x"), false); err != nil {
			t.Fatal(err)
		}
		if err := s.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzDecoders feeds garbage to every decoder of on-disk data.
func FuzzDecoders(f *testing.F) {
	f.Add(encodeCheckpoint(checkpoint{valid: true, journal: journalPos{3, 100}, nextLogID: 4}))
	f.Add(encodeLogMeta(&logInfo{id: 1, size: 99, total: 50, ledgers: map[uint64]uint64{1: 20, 2: 30}}))
	f.Add(encodeIndexHeader(1, true))
	slot := make([]byte, slotSize)
	encodeSlot(slot, 1, 1, logLoc{log: 1, off: 40, length: 10})
	f.Add(slot)
	var p [entryPrefixSize]byte
	p[0], p[8] = 1, 1
	f.Add(append(appendFileHeader(nil, entryLogMagic, 1), appendFrame(nil, 1, fileHeaderSize, fileHeaderSize, recEntry, 0, p[:], []byte("data"))...))
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeCheckpoint(b)
		decodeLogMeta(b, 1)
		decodeIndexHeader(b, 1)
		checkFileHeader(b, entryLogMagic, 1)
		s := make([]byte, slotSize)
		copy(s, b)
		decodeSlot(s, 1, 1)
		parseFrameHeader(b, 1, fileHeaderSize, int64(len(b))+fileHeaderSize, validJournalKind)

		// The same bytes as an entry log: scanned at Open, compacted, read
		// through a location taken from the bytes themselves.
		m := vfs.NewStrictMem()
		f, _ := m.Create("/entrylog-0000000000000001.log")
		f.Write(b)
		f.Close()
		if _, err := scanEntryLog(m, "/entrylog-0000000000000001.log", 1, int64(len(b))); err != nil {
			t.Fatalf("scan: %v", err)
		}
		logs := newEntryLogs(m, "/")
		defer logs.handles.close()
		r := rand.New(rand.NewPCG(uint64(len(b)), 1))
		for range 4 {
			loc := logLoc{log: 1, off: int64(r.IntN(len(b) + 1)), length: uint32(r.IntN(len(b) + 1))}
			if _, err := logs.read(loc, 1, 1); err == nil {
				// Only a frame that really is (1, 1) there may validate.
				continue
			} else if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read: %v", err)
			}
		}
	})
}

func TestGarbageFilesDoNotPanic(t *testing.T) {
	// Random bytes in every kind of file: Open either refuses with a
	// CorruptionError or opens a store whose reads fail cleanly.
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 5))
		m := vfs.NewStrictMem()
		cfg := fuzzConfig(m)
		s := openT(t, cfg)
		for e := range uint64(20) {
			mustAdd(t, s, 1, e, payload(1, e, 0, 200))
		}
		checkpointT(t, s)
		s.Close()
		files := []string{
			filepath.Join(cfg.LedgerDir, checkpointName),
			filepath.Join(cfg.LedgerDir, entryLogName(1)),
			filepath.Join(cfg.LedgerDir, entryMetaName(1)),
			filepath.Join(cfg.LedgerDir, "index", indexName(1)),
		}
		jids, _ := listSeqFiles(m, cfg.JournalDir, "journal-", ".log")
		for _, id := range jids {
			files = append(files, filepath.Join(cfg.JournalDir, journalName(id)))
		}
		name := files[r.IntN(len(files))]
		orig := readMemFile(t, m, name)
		garbage := append([]byte(nil), orig...)
		switch r.IntN(3) {
		case 0: // random bytes over a random range
			if len(garbage) > 0 {
				i := r.IntN(len(garbage))
				for j := i; j < min(len(garbage), i+1+r.IntN(64)); j++ {
					garbage[j] = byte(r.Uint32())
				}
			}
		case 1: // truncated
			garbage = garbage[:r.IntN(len(garbage)+1)]
		case 2: // all random
			garbage = make([]byte, r.IntN(4096))
			for i := range garbage {
				garbage[i] = byte(r.Uint32())
			}
		}
		f, _ := m.Create(name)
		f.Write(garbage)
		f.Sync()
		f.Close()
		s, err := Open(cfg)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("seed %d (%s): %v", seed, filepath.Base(name), err)
			}
			continue
		}
		for e := range uint64(21) {
			d, err := s.Read(1, e)
			if err == nil && string(d) != string(payload(1, e, 0, 200)) {
				t.Fatalf("seed %d (%s): entry %d read back wrong", seed, filepath.Base(name), e)
			}
			if err != nil && !errors.Is(err, ErrCorrupt) && !isNotFound(err) {
				t.Fatalf("seed %d: read %d: %v", seed, e, err)
			}
		}
		s.Close()
	}
}
