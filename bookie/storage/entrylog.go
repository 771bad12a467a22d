package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// Entry logs (docs/format/entrylog.md) use the journal's framing with one
// frame kind; the payload is ledger u64, entry u64, data.
const recEntry uint8 = 1

func validEntryLogKind(k uint8) bool { return k == recEntry }

// validEntryPayload checks a (ledger, entry, data) payload; the entry id
// bound keeps a record that passes its checksums from addressing an absurd
// index slot.
func validEntryPayload(_ uint8, p []byte) bool {
	return len(p) >= entryPrefixSize && len(p)-entryPrefixSize <= MaxEntrySizeLimit &&
		binary.LittleEndian.Uint64(p[8:]) <= MaxEntryID
}

func entryLogName(id uint64) string  { return fmt.Sprintf("entrylog-%016x.log", id) }
func entryMetaName(id uint64) string { return fmt.Sprintf("entrylog-%016x.meta", id) }

// logLoc is where an entry's data lives: the frame at off in entry log log,
// whose data (after the ledger/entry prefix) is length bytes.
type logLoc struct {
	log    uint64
	off    int64
	length uint32
}

// logInfo is what compaction needs to know about a sealed entry log.
type logInfo struct {
	id      uint64
	size    int64             // file size
	total   uint64            // bytes of all frames
	ledgers map[uint64]uint64 // bytes of frames per ledger
	// corrupt marks a log with damage in the middle: it is never compacted
	// (and so never removed) and needs an operator.
	corrupt bool
}

// logWriter appends entries to one entry log in batches: everything
// appended between two syncs is one batch (see frame batch delta).
type logWriter struct {
	fs      vfs.FS
	dir     string
	id      uint64
	f       vfs.File
	size    int64 // bytes written to the file
	pending []byte
	batch   int64 // offset where the current batch began
	info    *logInfo
	bytes   *atomic.Int64 // the store's entry log byte count
}

const logWriteChunk = 1 << 20

func newLogWriter(fsys vfs.FS, dir string, id uint64, bytes *atomic.Int64) (*logWriter, error) {
	name := filepath.Join(dir, entryLogName(id))
	f, err := fsys.Create(name)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*logWriter, error) {
		f.Close()
		return nil, err
	}
	if _, err := f.Write(appendFileHeader(nil, entryLogMagic, id)); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	// The name must be durable before any index entry can point into it.
	if err := fsys.SyncDir(dir); err != nil {
		return fail(err)
	}
	bytes.Add(fileHeaderSize)
	return &logWriter{
		fs: fsys, dir: dir, id: id, f: f, size: fileHeaderSize, batch: fileHeaderSize,
		info:  &logInfo{id: id, ledgers: map[uint64]uint64{}},
		bytes: bytes,
	}, nil
}

// end is the offset the next frame will be written at.
func (w *logWriter) end() int64 { return w.size + int64(len(w.pending)) }

func (w *logWriter) append(ledger, entry uint64, data []byte) (logLoc, error) {
	off := w.end()
	var p [entryPrefixSize]byte
	binary.LittleEndian.PutUint64(p[0:], ledger)
	binary.LittleEndian.PutUint64(p[8:], entry)
	w.pending = appendFrame(w.pending, w.id, off, w.batch, recEntry, 0, p[:], data)
	n := uint64(frameHeaderSize + entryPrefixSize + len(data))
	w.info.ledgers[ledger] += n
	w.info.total += n
	if len(w.pending) >= logWriteChunk {
		if err := w.writePending(); err != nil {
			return logLoc{}, err
		}
	}
	return logLoc{log: w.id, off: off, length: uint32(len(data))}, nil
}

func (w *logWriter) writePending() error {
	if len(w.pending) == 0 {
		return nil
	}
	if _, err := w.f.Write(w.pending); err != nil {
		return err
	}
	w.size += int64(len(w.pending))
	w.bytes.Add(int64(len(w.pending)))
	if cap(w.pending) > 4*logWriteChunk {
		w.pending = nil
	} else {
		w.pending = w.pending[:0]
	}
	return nil
}

// sync makes everything appended so far durable and starts a new batch.
func (w *logWriter) sync() error {
	if err := w.writePending(); err != nil {
		return err
	}
	if w.batch == w.size {
		return nil
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	w.batch = w.size
	return nil
}

// seal syncs the log, writes its meta file and closes it.
func (w *logWriter) seal() (*logInfo, error) {
	if err := w.sync(); err != nil {
		return nil, err
	}
	w.info.size = w.size
	if err := writeLogMeta(w.fs, w.dir, w.info); err != nil {
		return nil, err
	}
	err := w.f.Close()
	w.f = nil
	return w.info, err
}

// abandon closes the file without sealing it (after a failure); the next
// Open scans it.
func (w *logWriter) abandon() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}

// Meta file (entrylog-<id>.meta), written once when a log is sealed:
//
//	0  [8] magic "ISBRELMT"
//	8  u32 format version (1)
//	12 u32 flags (bit 0: the log has mid-file corruption)
//	16 u64 entry log id
//	24 u64 entry log size
//	32 u64 total frame bytes
//	40 u32 ledger count n
//	44 n × (u64 ledger, u64 frame bytes), ledgers increasing
//	.. u32 CRC32C of everything before
var metaMagic = [8]byte{'I', 'S', 'B', 'R', 'E', 'L', 'M', 'T'}

const (
	metaHeaderSize  = 44
	metaFlagCorrupt = 1
)

func encodeLogMeta(info *logInfo) []byte {
	ids := make([]uint64, 0, len(info.ledgers))
	for l := range info.ledgers {
		ids = append(ids, l)
	}
	slices.Sort(ids)
	b := make([]byte, metaHeaderSize, metaHeaderSize+16*len(ids)+4)
	copy(b, metaMagic[:])
	binary.LittleEndian.PutUint32(b[8:], formatVersion)
	if info.corrupt {
		binary.LittleEndian.PutUint32(b[12:], metaFlagCorrupt)
	}
	binary.LittleEndian.PutUint64(b[16:], info.id)
	binary.LittleEndian.PutUint64(b[24:], uint64(info.size))
	binary.LittleEndian.PutUint64(b[32:], info.total)
	binary.LittleEndian.PutUint32(b[40:], uint32(len(ids)))
	for _, l := range ids {
		b = binary.LittleEndian.AppendUint64(b, l)
		b = binary.LittleEndian.AppendUint64(b, info.ledgers[l])
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

func decodeLogMeta(b []byte, id uint64) (*logInfo, error) {
	if len(b) < metaHeaderSize+4 {
		return nil, errors.New("short meta")
	}
	n := binary.LittleEndian.Uint32(b[40:])
	switch {
	case [8]byte(b[0:8]) != metaMagic:
		return nil, errors.New("bad magic")
	case uint64(len(b)) != metaHeaderSize+16*uint64(n)+4:
		return nil, fmt.Errorf("meta of %d bytes cannot hold %d ledgers", len(b), n)
	case binary.LittleEndian.Uint32(b[len(b)-4:]) != crc32.Checksum(b[:len(b)-4], crcTable):
		return nil, errors.New("checksum mismatch")
	case binary.LittleEndian.Uint32(b[8:]) != formatVersion:
		return nil, errors.New("unsupported format version")
	case binary.LittleEndian.Uint64(b[16:]) != id:
		return nil, fmt.Errorf("meta names entry log %d", binary.LittleEndian.Uint64(b[16:]))
	}
	info := &logInfo{
		id:      id,
		size:    int64(binary.LittleEndian.Uint64(b[24:]) & (1<<62 - 1)),
		total:   binary.LittleEndian.Uint64(b[32:]),
		corrupt: binary.LittleEndian.Uint32(b[12:])&metaFlagCorrupt != 0,
		ledgers: make(map[uint64]uint64, n),
	}
	for i := range int(n) {
		p := b[metaHeaderSize+16*i:]
		info.ledgers[binary.LittleEndian.Uint64(p)] = binary.LittleEndian.Uint64(p[8:])
	}
	return info, nil
}

func writeLogMeta(fsys vfs.FS, dir string, info *logInfo) error {
	return writeFileAtomic(fsys, dir, entryMetaName(info.id), encodeLogMeta(info))
}

// entryLogs is the registry of entry logs and the cache of read handles.
type entryLogs struct {
	fs      vfs.FS
	dir     string
	handles *fileCache[uint64]
	bytes   atomic.Int64 // total size of the entry log files
	nextID  atomic.Uint64

	mu     sync.Mutex // guards sealed
	sealed map[uint64]*logInfo
}

func newEntryLogs(fsys vfs.FS, dir string) *entryLogs {
	return &entryLogs{fs: fsys, dir: dir, handles: newFileCache[uint64](64), sealed: map[uint64]*logInfo{}}
}

func (l *entryLogs) path(id uint64) string { return filepath.Join(l.dir, entryLogName(id)) }

func (l *entryLogs) allocID() uint64 { return l.nextID.Add(1) - 1 }

func (l *entryLogs) addSealed(info *logInfo) {
	l.mu.Lock()
	l.sealed[info.id] = info
	l.mu.Unlock()
}

// snapshotSealed returns the sealed logs (the infos are not modified after
// sealing, except corrupt, which is read under mu).
func (l *entryLogs) snapshotSealed() []*logInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*logInfo, 0, len(l.sealed))
	for _, info := range l.sealed {
		if !info.corrupt {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b *logInfo) int { return compareU64(a.id, b.id) })
	return out
}

func (l *entryLogs) markCorrupt(id uint64) {
	l.mu.Lock()
	if info, ok := l.sealed[id]; ok {
		info.corrupt = true
	}
	l.mu.Unlock()
}

func compareU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Entry reads from the logs bypass the kernel's read-ahead (which reads up
// to the device's read_ahead_kb, often MiBs, whatever a reader needs):
// an entry of smallReadBytes or more is read alone; a smaller one brings
// the readAheadBytes after it into the page cache in the same I/O, so a
// catch-up reader of small entries still reads the log sequentially.
// docs/storage.md "Reads and the journal".
const (
	smallReadBytes = 64 << 10
	readAheadBytes = 256 << 10
)

// errLogGone means the entry log was removed (by compaction) after the index
// was read: the caller reads the index again.
var errLogGone = errors.New("entry log removed")

// read returns the data of entry (ledger, entry) at loc, validating it.
func (l *entryLogs) read(loc logLoc, ledger, entry uint64) ([]byte, error) {
	name := l.path(loc.log)
	cf, err := l.handles.acquire(loc.log, func() (vfs.File, error) {
		f, err := l.fs.Open(name)
		if err == nil {
			// No kernel read-ahead: see smallReadBytes.
			err = vfs.AdviseRandom(f)
			if err != nil {
				f.Close()
			}
		}
		return f, err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errLogGone
	}
	if err != nil {
		return nil, err
	}
	defer l.handles.release(cf)
	buf := make([]byte, frameHeaderSize+entryPrefixSize+int(loc.length))
	if len(buf) < smallReadBytes {
		// Small entries: the ones after it in the log (the same
		// ledger's, as a flush writes them) come in with it, in one
		// I/O of a bounded size. A hint: its error changes nothing.
		_ = vfs.AdviseWillNeed(cf.f, loc.off, readAheadBytes)
	}
	n, err := cf.f.ReadAt(buf, loc.off)
	corrupt := func(reason string) error {
		return &CorruptionError{File: name, Offset: loc.off, Ledger: ledger, Entry: entry, Reason: reason}
	}
	if n < len(buf) {
		if err == nil || err == io.EOF {
			return nil, corrupt("entry log ends inside the record")
		}
		return nil, err
	}
	fh, ok := parseFrameHeader(buf, loc.log, loc.off, loc.off+int64(len(buf)), validEntryLogKind)
	switch {
	case !ok:
		return nil, corrupt("record header fails validation")
	case fh.length != entryPrefixSize+int(loc.length):
		return nil, corrupt(fmt.Sprintf("record holds %d bytes, index says %d", fh.length-entryPrefixSize, loc.length))
	case crc32.Checksum(buf[frameHeaderSize:], crcTable) != fh.payloadCRC:
		return nil, corrupt("record checksum mismatch")
	}
	p := buf[frameHeaderSize:]
	if binary.LittleEndian.Uint64(p) != ledger || binary.LittleEndian.Uint64(p[8:]) != entry {
		return nil, corrupt(fmt.Sprintf("record is ledger %d entry %d", binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:])))
	}
	return p[entryPrefixSize:], nil
}

// remove deletes a compacted entry log and its meta file.
func (l *entryLogs) remove(id uint64) error {
	l.mu.Lock()
	info := l.sealed[id]
	delete(l.sealed, id)
	l.mu.Unlock()
	l.handles.evict(id)
	if err := l.fs.Remove(l.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if info != nil {
		l.bytes.Add(-info.size)
	}
	if err := l.fs.Remove(filepath.Join(l.dir, entryMetaName(id))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return l.fs.SyncDir(l.dir)
}

// load registers the entry logs found at Open. A log without a valid meta
// file (the one being written when the bookie stopped, or one whose meta
// write did not finish) is scanned and sealed now.
func (l *entryLogs) load(log interface {
	Warn(string, ...any)
	Error(string, ...any)
}) (maxID uint64, err error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return 0, err
	}
	var ids []uint64
	metas := map[uint64]bool{}
	for _, n := range names {
		if id, ok := parseSeqName(n, "entrylog-", ".log"); ok {
			ids = append(ids, id)
		} else if id, ok := parseSeqName(n, "entrylog-", ".meta"); ok {
			metas[id] = true
		} else if n == checkpointName+".tmp" || (len(n) > 4 && n[len(n)-4:] == ".tmp") {
			if err := l.fs.Remove(filepath.Join(l.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return 0, err
			}
		}
	}
	slices.Sort(ids)
	for id := range metas {
		if _, ok := slices.BinarySearch(ids, id); !ok {
			// The log was compacted away but its meta removal did not
			// reach the disk.
			if err := l.fs.Remove(filepath.Join(l.dir, entryMetaName(id))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return 0, err
			}
		}
	}
	for _, id := range ids {
		maxID = max(maxID, id)
		fi, err := l.fs.Stat(l.path(id))
		if err != nil {
			return 0, err
		}
		if metas[id] {
			// A log can hold at most one ledger per smallest frame.
			limit := metaHeaderSize + 4 + 16*(fi.Size()/(frameHeaderSize+entryPrefixSize)+1)
			b, err := readSmallFile(l.fs, filepath.Join(l.dir, entryMetaName(id)), limit)
			if err == nil {
				info, derr := decodeLogMeta(b, id)
				if derr == nil && info.size == fi.Size() {
					l.sealed[id] = info
					l.bytes.Add(fi.Size())
					continue
				}
				log.Warn("entry log meta invalid, rescanning the log", "log", id, "err", derr)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return 0, err
			}
		}
		info, err := scanEntryLog(l.fs, l.path(id), id, fi.Size())
		if err != nil {
			return 0, err
		}
		if info == nil {
			// Created but never written: nothing can refer to it.
			if err := l.fs.Remove(l.path(id)); err != nil {
				return 0, err
			}
			continue
		}
		if info.corrupt {
			log.Error("entry log has mid-file corruption; it will not be compacted", "log", id, "file", l.path(id))
		}
		if err := writeLogMeta(l.fs, l.dir, info); err != nil {
			return 0, err
		}
		l.sealed[id] = info
		l.bytes.Add(fi.Size())
	}
	return maxID, nil
}

// scanEntryLog rebuilds a log's info from its frames. It returns nil for a
// file too short to hold a header or whose header is all zeros (created, then
// the bookie stopped before the header reached the disk).
func scanEntryLog(fsys vfs.FS, name string, id uint64, size int64) (*logInfo, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := newFrameScanner(f, id, size, validEntryLogKind, validEntryPayload)
	info := &logInfo{id: id, size: size, ledgers: map[uint64]uint64{}}
	if size < fileHeaderSize {
		return nil, nil
	}
	h, err := sc.bytes(0, fileHeaderSize)
	if err != nil {
		return nil, err
	}
	if herr := checkFileHeader(h, entryLogMagic, id); herr != nil {
		if isZero(h) {
			if next, err := sc.resync(fileHeaderSize); err != nil || next >= 0 {
				info.corrupt = true
				return info, err
			}
			return nil, nil
		}
		info.corrupt = true
	}
	res, err := sc.walk(fileHeaderSize, true, func(fr *frame) error {
		n := uint64(frameHeaderSize + fr.length)
		info.ledgers[binary.LittleEndian.Uint64(fr.payload)] += n
		info.total += n
		return nil
	})
	if err != nil {
		return nil, err
	}
	info.corrupt = info.corrupt || res.midCorrupt
	return info, nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
