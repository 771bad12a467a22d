package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// Journal record kinds (frame kind byte in journal files).
const (
	recAdd    uint8 = 1 // payload: ledger u64, entry u64, data
	recFence  uint8 = 2 // payload: ledger u64
	recDelete uint8 = 3 // payload: ledger u64

	flagRecovery uint8 = 1 // on recAdd: the add came from ledger recovery
)

// entryPrefixSize is the (ledger, entry) prefix of add and entry payloads.
const entryPrefixSize = 16

func validJournalKind(k uint8) bool { return k >= recAdd && k <= recDelete }

func validJournalPayload(kind uint8, p []byte) bool {
	if kind == recAdd {
		return validEntryPayload(kind, p)
	}
	return len(p) == 8
}

// journalPos is a position in the journal: a file id and an offset in it.
type journalPos struct {
	file uint64
	off  int64
}

func journalName(id uint64) string { return fmt.Sprintf("journal-%016x.log", id) }

// parseSeqName parses names like prefix-%016x.suffix.
func parseSeqName(name, prefix, suffix string) (uint64, bool) {
	if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	hex := name[len(prefix) : len(name)-len(suffix)]
	if len(hex) != 16 {
		return 0, false
	}
	id, err := strconv.ParseUint(hex, 16, 64)
	return id, err == nil
}

// listSeqFiles returns the ids of the files in dir named prefix-%016x.suffix,
// in increasing order.
func listSeqFiles(fsys vfs.FS, dir, prefix, suffix string) ([]uint64, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, err
	}
	var ids []uint64
	for _, n := range names {
		if id, ok := parseSeqName(n, prefix, suffix); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// request is one journal operation waiting for the group commit.
type request struct {
	kind     uint8
	recovery bool
	ledger   uint64
	entry    uint64
	data     []byte
	done     func(error) // adds
	result   chan error  // fences and deletes; buffered
	err      error       // set when the request is rejected or fails
}

func (r *request) frameSize() int {
	if r.kind == recAdd {
		return frameHeaderSize + entryPrefixSize + len(r.data)
	}
	return frameHeaderSize + 8
}

func (r *request) finish(err error) {
	if r.done != nil {
		r.done(err)
	} else {
		r.result <- err
	}
}

// journalWriter appends group-committed batches to the current journal file.
// It belongs to the journal goroutine (and to Open before that starts).
type journalWriter struct {
	fs      vfs.FS
	dir     string
	maxSize int64

	id   uint64
	f    vfs.File
	size int64
	buf  []byte
}

// createJournalFile creates journal file id durably: header synced and the
// directory entry synced, before any record in it can be acknowledged.
func createJournalFile(fsys vfs.FS, dir string, id uint64) (vfs.File, error) {
	name := filepath.Join(dir, journalName(id))
	f, err := fsys.Create(name)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(appendFileHeader(nil, journalMagic, id)); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := fsys.SyncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func newJournalWriter(fsys vfs.FS, dir string, id uint64, maxSize int64) (*journalWriter, error) {
	f, err := createJournalFile(fsys, dir, id)
	if err != nil {
		return nil, err
	}
	return &journalWriter{fs: fsys, dir: dir, maxSize: maxSize, id: id, f: f, size: fileHeaderSize}, nil
}

// encode appends r's record to the pending batch.
func (w *journalWriter) encode(r *request) {
	off := w.size + int64(len(w.buf))
	var p [entryPrefixSize]byte
	binary.LittleEndian.PutUint64(p[0:], r.ledger)
	switch r.kind {
	case recAdd:
		binary.LittleEndian.PutUint64(p[8:], r.entry)
		var flags uint8
		if r.recovery {
			flags = flagRecovery
		}
		w.buf = appendFrame(w.buf, w.id, off, w.size, recAdd, flags, p[:], r.data)
	default:
		w.buf = appendFrame(w.buf, w.id, off, w.size, r.kind, 0, p[:8], nil)
	}
}

// commit writes and fdatasyncs the pending batch and returns the journal
// position just after it.
func (w *journalWriter) commit() (journalPos, error) {
	if len(w.buf) > 0 {
		if _, err := w.f.Write(w.buf); err != nil {
			return journalPos{}, err
		}
		if err := w.f.Sync(); err != nil {
			return journalPos{}, err
		}
		w.size += int64(len(w.buf))
	}
	if cap(w.buf) > 16<<20 {
		w.buf = nil // do not keep a huge buffer after a burst of big entries
	} else {
		w.buf = w.buf[:0]
	}
	return journalPos{w.id, w.size}, nil
}

// rotate switches to a new file once the current one is full. The current
// file is already synced: every batch is synced before the next one starts.
func (w *journalWriter) rotate() (rotated bool, err error) {
	if w.size < w.maxSize {
		return false, nil
	}
	f, err := createJournalFile(w.fs, w.dir, w.id+1)
	if err != nil {
		return false, err
	}
	w.f.Close()
	w.f, w.id, w.size = f, w.id+1, fileHeaderSize
	return true, nil
}

func (w *journalWriter) close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// replayJournal re-applies the journal from the checkpoint position. A torn
// tail of the last file (a crash during an unacknowledged write) is cut off;
// anything else that does not decode is a CorruptionError. It returns the id
// of the last journal file seen.
func (s *Store) replayJournal(cp checkpoint) (lastID uint64, err error) {
	dir := s.cfg.JournalDir
	ids, err := listSeqFiles(s.fs, dir, "journal-", ".log")
	if err != nil {
		return 0, fmt.Errorf("storage: list journal: %w", err)
	}
	lastID = cp.journal.file
	var live []uint64
	for _, id := range ids {
		if cp.valid && id < cp.journal.file {
			// Wholly before the checkpoint: a trim that did not finish.
			if err := s.fs.Remove(filepath.Join(dir, journalName(id))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return 0, fmt.Errorf("storage: remove old journal file: %w", err)
			}
			continue
		}
		live = append(live, id)
		lastID = max(lastID, id)
	}
	if cp.valid && (len(live) == 0 || live[0] != cp.journal.file) {
		return 0, &CorruptionError{File: filepath.Join(dir, journalName(cp.journal.file)), Offset: cp.journal.off,
			Reason: "journal file named by the checkpoint is missing"}
	}
	s.appliedPos = cp.journal
	records := 0
	for i, id := range live {
		start := int64(fileHeaderSize)
		if cp.valid && id == cp.journal.file {
			start = cp.journal.off
		}
		n, err := s.replayJournalFile(id, start, i == len(live)-1)
		records += n
		if err != nil {
			return 0, err
		}
	}
	if len(live) > 0 {
		s.log.Info("journal replayed", "files", len(live), "records", records,
			"fromFile", live[0], "fromOffset", s.appliedPosStart(cp), "to", s.appliedPos.file, "toOffset", s.appliedPos.off)
	}
	return lastID, nil
}

func (s *Store) appliedPosStart(cp checkpoint) int64 {
	if cp.valid {
		return cp.journal.off
	}
	return fileHeaderSize
}

func (s *Store) replayJournalFile(id uint64, start int64, last bool) (int, error) {
	dir := s.cfg.JournalDir
	name := filepath.Join(dir, journalName(id))
	f, err := s.fs.Open(name)
	if err != nil {
		return 0, fmt.Errorf("storage: open journal: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("storage: stat journal: %w", err)
	}
	size := fi.Size()
	s.journalBytes.Add(size)
	sc := newFrameScanner(f, id, size, validJournalKind, validJournalPayload)

	var hdr []byte
	if size >= fileHeaderSize {
		hdr, err = sc.bytes(0, fileHeaderSize)
		if err != nil {
			return 0, fmt.Errorf("storage: read journal %s: %w", name, err)
		}
	}
	if herr := checkFileHeader(hdr, journalMagic, id); herr != nil {
		return 0, s.badJournalHeader(f, sc, name, last, herr)
	}
	if start < fileHeaderSize || start > size {
		return 0, &CorruptionError{File: name, Offset: start, Reason: fmt.Sprintf("checkpoint offset beyond the file's %d bytes", size)}
	}

	s.appliedPos = journalPos{id, start}
	n := 0
	res, err := sc.walk(start, false, func(fr *frame) error {
		ledger := binary.LittleEndian.Uint64(fr.payload)
		var entry uint64
		var data []byte
		if fr.kind == recAdd {
			entry = binary.LittleEndian.Uint64(fr.payload[8:])
			data = append([]byte(nil), fr.payload[entryPrefixSize:]...)
		}
		s.mu.Lock()
		s.applyLocked(fr.kind, ledger, entry, data)
		s.appliedPos = journalPos{id, fr.end}
		full := s.active.bytes >= s.cfg.WriteCacheMaxBytes
		s.mu.Unlock()
		n++
		if full {
			// Keep replay memory bounded: flush and checkpoint mid-replay.
			return s.flush()
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("storage: replay %s: %w", name, err)
	}
	if res.firstBad < 0 {
		return n, nil
	}
	if !last || res.midCorrupt {
		return n, &CorruptionError{File: name, Offset: res.firstBad, Reason: "journal record fails validation and valid records follow it"}
	}
	// A torn tail: the last batch was being written when the bookie stopped,
	// so none of it was acknowledged. Cut it off so the next start sees a
	// clean file.
	s.log.Warn("truncating torn journal tail", "file", name, "offset", res.firstBad, "bytes", size-res.firstBad)
	if err := truncateFile(s.fs, name, res.firstBad); err != nil {
		return n, fmt.Errorf("storage: truncate journal tail: %w", err)
	}
	s.journalBytes.Add(res.firstBad - size)
	return n, nil
}

// badJournalHeader handles a journal file whose header does not validate. The
// last file may have been created by a run that crashed before syncing its
// header; if no record in it validates either, it held nothing acknowledged
// and is removed.
func (s *Store) badJournalHeader(f vfs.File, sc *frameScanner, name string, last bool, herr error) error {
	if last {
		next, err := sc.resync(fileHeaderSize)
		if err != nil {
			return fmt.Errorf("storage: read journal %s: %w", name, err)
		}
		if next < 0 {
			s.log.Warn("removing journal file with a torn header", "file", name, "err", herr)
			f.Close()
			if err := s.fs.Remove(name); err != nil {
				return fmt.Errorf("storage: remove torn journal file: %w", err)
			}
			s.journalBytes.Add(-sc.size)
			if err := s.fs.SyncDir(s.cfg.JournalDir); err != nil {
				return fmt.Errorf("storage: sync journal dir: %w", err)
			}
			return nil
		}
	}
	return &CorruptionError{File: name, Offset: 0, Reason: "journal file header: " + herr.Error()}
}

// truncateFile cuts a file to size durably.
func truncateFile(fsys vfs.FS, name string, size int64) error {
	f, err := fsys.OpenAppend(name)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
