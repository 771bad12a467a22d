package storage

import (
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// Index files (docs/format/entrylog.md): LedgerDir/index/<ledger %016x>.idx,
// one per ledger: a 64-byte header, then one 32-byte slot per entry id at
// offset 64 + 32*entry.
//
// Header:
//
//	0  [8] magic "ISBRLIDX"
//	8  u32 format version (1)
//	12 u32 flags (bit 0: fenced)
//	16 u64 ledger id
//	24 [36] reserved, zero
//	60 u32 CRC32C of bytes 0..60
//
// Slot (all zero: no entry):
//
//	0  u64 entry log id (ids start at 1)
//	8  u64 offset of the entry's frame in the entry log
//	16 u32 data length
//	20 [8] reserved, zero
//	28 u32 CRC32C of (ledger u64, entry u64, slot bytes 0..28)
//
// Slots are 32-byte aligned so a slot never straddles a 512-byte sector:
// a slot write is atomic on real disks.
const (
	indexHeaderSize = 64
	slotSize        = 32
	slotsPerPage    = 128
	indexPageSize   = slotSize * slotsPerPage
	indexFlagFenced = 1
)

var indexMagic = [8]byte{'I', 'S', 'B', 'R', 'L', 'I', 'D', 'X'}

func indexName(ledger uint64) string { return fmt.Sprintf("%016x.idx", ledger) }

func encodeIndexHeader(ledger uint64, fenced bool) []byte {
	b := make([]byte, indexHeaderSize)
	copy(b, indexMagic[:])
	binary.LittleEndian.PutUint32(b[8:], formatVersion)
	if fenced {
		binary.LittleEndian.PutUint32(b[12:], indexFlagFenced)
	}
	binary.LittleEndian.PutUint64(b[16:], ledger)
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], crcTable))
	return b
}

func decodeIndexHeader(b []byte, ledger uint64) (fenced bool, err error) {
	switch {
	case len(b) < indexHeaderSize:
		return false, errors.New("short index header")
	case [8]byte(b[0:8]) != indexMagic:
		return false, errors.New("bad magic")
	case binary.LittleEndian.Uint32(b[60:]) != crc32.Checksum(b[:60], crcTable):
		return false, errors.New("index header checksum mismatch")
	case binary.LittleEndian.Uint32(b[8:]) != formatVersion:
		return false, errors.New("unsupported format version")
	case binary.LittleEndian.Uint64(b[16:]) != ledger:
		return false, fmt.Errorf("header names ledger %d", binary.LittleEndian.Uint64(b[16:]))
	}
	return binary.LittleEndian.Uint32(b[12:])&indexFlagFenced != 0, nil
}

func slotCRC(ledger, entry uint64, s []byte) uint32 {
	var b [16 + 28]byte
	binary.LittleEndian.PutUint64(b[0:], ledger)
	binary.LittleEndian.PutUint64(b[8:], entry)
	copy(b[16:], s[:28])
	return crc32.Checksum(b[:], crcTable)
}

func encodeSlot(b []byte, ledger, entry uint64, loc logLoc) {
	clear(b[:slotSize])
	binary.LittleEndian.PutUint64(b[0:], loc.log)
	binary.LittleEndian.PutUint64(b[8:], uint64(loc.off))
	binary.LittleEndian.PutUint32(b[16:], loc.length)
	binary.LittleEndian.PutUint32(b[28:], slotCRC(ledger, entry, b))
}

// decodeSlot returns the slot's location; present is false for an empty
// slot, ok false for one that fails validation.
func decodeSlot(b []byte, ledger, entry uint64) (loc logLoc, present, ok bool) {
	if isZero(b[:slotSize]) {
		return logLoc{}, false, true
	}
	if binary.LittleEndian.Uint32(b[28:]) != slotCRC(ledger, entry, b) || !isZero(b[20:28]) {
		return logLoc{}, true, false
	}
	off := binary.LittleEndian.Uint64(b[8:])
	loc = logLoc{log: binary.LittleEndian.Uint64(b[0:]), off: int64(off), length: binary.LittleEndian.Uint32(b[16:])}
	if loc.log == 0 || off < fileHeaderSize || off > 1<<62 || loc.length > MaxEntrySizeLimit {
		return logLoc{}, true, false
	}
	return loc, true, true
}

func slotOffset(entry uint64) int64 { return indexHeaderSize + int64(entry)*slotSize }

type pageKey struct {
	ledger uint64
	page   uint64
}

type indexPage struct {
	key  pageKey
	data []byte // indexPageSize bytes; zeros past the end of the file
}

// indexStore reads and writes the per-ledger index files. Writers (the
// flusher and the compactor's swaps) are serialized by Store.storeMu; readers
// go through the page cache and never wait for a writer's fsync.
type indexStore struct {
	fs    vfs.FS
	dir   string
	files *fileCache[uint64]
	bytes atomic.Int64 // approximate total size of the index files

	mu       sync.Mutex // guards the fields below
	pages    map[pageKey]*list.Element
	lru      list.List // *indexPage, most recent at the front
	maxPages int
	gen      uint64 // bumped by every write; a page read that raced one is not cached
	sizes    map[uint64]int64
}

func newIndexStore(fsys vfs.FS, dir string) *indexStore {
	return &indexStore{
		fs: fsys, dir: dir, files: newFileCache[uint64](256),
		pages: map[pageKey]*list.Element{}, maxPages: 2048, sizes: map[uint64]int64{},
	}
}

func (x *indexStore) path(ledger uint64) string { return filepath.Join(x.dir, indexName(ledger)) }

// acquire opens ledger's index file; with create it creates a missing one
// (header written, not yet synced) and reports created. Only the flusher
// creates index files (under Store.storeMu), and it does so outside the
// handle cache's lock, so readers never wait for that write.
func (x *indexStore) acquire(ledger uint64, create bool) (cf *cachedFile[uint64], created bool, err error) {
	name := x.path(ledger)
	cf, err = x.files.acquire(ledger, func() (vfs.File, error) { return x.fs.OpenAppend(name) })
	if err == nil || !create || !errors.Is(err, fs.ErrNotExist) {
		return cf, false, err
	}
	f, err := x.fs.Create(name)
	if err != nil {
		return nil, false, err
	}
	if _, err := f.WriteAt(encodeIndexHeader(ledger, false), 0); err != nil {
		f.Close()
		return nil, false, err
	}
	x.grew(ledger, indexHeaderSize)
	cf, err = x.files.insert(ledger, f)
	return cf, err == nil, err
}

func (x *indexStore) release(cf *cachedFile[uint64]) { x.files.release(cf) }

// grew records that ledger's file reaches at least size bytes.
func (x *indexStore) grew(ledger uint64, size int64) {
	x.mu.Lock()
	if old := x.sizes[ledger]; size > old {
		x.sizes[ledger] = size
		x.bytes.Add(size - old)
	}
	x.mu.Unlock()
}

// lookup returns where entry (ledger, entry) is stored.
func (x *indexStore) lookup(ledger, entry uint64) (logLoc, bool, error) {
	key := pageKey{ledger, entry / slotsPerPage}
	page, err := x.page(key)
	if err != nil {
		return logLoc{}, false, err
	}
	if page == nil {
		return logLoc{}, false, nil
	}
	i := int(entry%slotsPerPage) * slotSize
	loc, present, ok := decodeSlot(page[i:i+slotSize], ledger, entry)
	if !ok {
		return logLoc{}, false, &CorruptionError{File: x.path(ledger), Offset: slotOffset(entry), Ledger: ledger, Entry: entry, Reason: "index slot fails validation"}
	}
	return loc, present, nil
}

// page returns a page of slots from the cache or the file; nil if the
// ledger has no index file.
func (x *indexStore) page(key pageKey) ([]byte, error) {
	x.mu.Lock()
	if e, ok := x.pages[key]; ok {
		x.lru.MoveToFront(e)
		data := e.Value.(*indexPage).data
		x.mu.Unlock()
		return data, nil
	}
	gen := x.gen
	x.mu.Unlock()

	cf, _, err := x.acquire(key.ledger, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	data := make([]byte, indexPageSize)
	n, err := cf.f.ReadAt(data, indexHeaderSize+int64(key.page)*indexPageSize)
	x.release(cf)
	if err != nil && err != io.EOF {
		return nil, err
	}
	// A partial slot at the end of the file (a torn extension) reads as
	// empty.
	clear(data[n/slotSize*slotSize:])

	x.mu.Lock()
	if x.gen == gen {
		if _, ok := x.pages[key]; !ok {
			x.pages[key] = x.lru.PushFront(&indexPage{key: key, data: data})
			for len(x.pages) > x.maxPages {
				old := x.lru.Remove(x.lru.Back()).(*indexPage)
				delete(x.pages, old.key)
			}
		}
	}
	x.mu.Unlock()
	return data, nil
}

// invalidate drops cached pages of ledger in [first, last] (all of them if
// all is set) and makes in-flight page reads skip caching.
func (x *indexStore) invalidate(ledger uint64, first, last uint64, all bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.gen++
	if all || last-first > 64 {
		for e := x.lru.Front(); e != nil; {
			next := e.Next()
			if p := e.Value.(*indexPage); p.key.ledger == ledger && (all || (p.key.page >= first && p.key.page <= last)) {
				x.lru.Remove(e)
				delete(x.pages, p.key)
			}
			e = next
		}
		return
	}
	for p := first; p <= last; p++ {
		if e, ok := x.pages[pageKey{ledger, p}]; ok {
			x.lru.Remove(e)
			delete(x.pages, pageKey{ledger, p})
		}
	}
}

// writeSlots writes the slots of consecutive entries first, first+1, ....
func (x *indexStore) writeSlots(cf *cachedFile[uint64], ledger, first uint64, locs []logLoc) error {
	b := make([]byte, slotSize*len(locs))
	for i, loc := range locs {
		encodeSlot(b[i*slotSize:], ledger, first+uint64(i), loc)
	}
	if _, err := cf.f.WriteAt(b, slotOffset(first)); err != nil {
		return err
	}
	last := first + uint64(len(locs)) - 1
	x.invalidate(ledger, first/slotsPerPage, last/slotsPerPage, false)
	x.grew(ledger, slotOffset(last+1))
	return nil
}

// writeSlotsSpan writes the slots of ids (ascending, not necessarily
// consecutive: a bookie of a striped ensemble holds every other entry or
// so) with one read and one write of the span they cover, keeping the slots
// in the gaps as they are. The caller must hold storeMu so that no
// compaction swap interleaves with the read-modify-write. Rewriting an
// unchanged slot with its own bytes is harmless even if the write tears.
func (x *indexStore) writeSlotsSpan(cf *cachedFile[uint64], ledger uint64, ids []uint64, locs []logLoc) error {
	first, last := ids[0], ids[len(ids)-1]
	b := make([]byte, slotSize*int(last-first+1))
	n, err := cf.f.ReadAt(b, slotOffset(first))
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	clear(b[n:]) // past the end of the file: empty slots
	for i, id := range ids {
		encodeSlot(b[int(id-first)*slotSize:], ledger, id, locs[i])
	}
	if _, err := cf.f.WriteAt(b, slotOffset(first)); err != nil {
		return err
	}
	x.invalidate(ledger, first/slotsPerPage, last/slotsPerPage, false)
	x.grew(ledger, slotOffset(last+1))
	return nil
}

// swapSlot points entry at to if it still points at from (compaction).
func (x *indexStore) swapSlot(cf *cachedFile[uint64], ledger, entry uint64, from, to logLoc) (bool, error) {
	b := make([]byte, slotSize)
	n, err := cf.f.ReadAt(b, slotOffset(entry))
	if n < slotSize {
		if err == nil || err == io.EOF {
			return false, nil
		}
		return false, err
	}
	cur, present, ok := decodeSlot(b, ledger, entry)
	if !ok || !present || cur != from {
		return false, nil
	}
	encodeSlot(b, ledger, entry, to)
	if _, err := cf.f.WriteAt(b, slotOffset(entry)); err != nil {
		return false, err
	}
	x.invalidate(ledger, entry/slotsPerPage, entry/slotsPerPage, false)
	return true, nil
}

func (x *indexStore) setFenced(cf *cachedFile[uint64], ledger uint64) error {
	_, err := cf.f.WriteAt(encodeIndexHeader(ledger, true), 0)
	return err
}

// remove deletes ledger's index file (the caller syncs the directory).
func (x *indexStore) remove(ledger uint64) error {
	x.files.evict(ledger)
	x.invalidate(ledger, 0, 0, true)
	x.mu.Lock()
	x.bytes.Add(-x.sizes[ledger])
	delete(x.sizes, ledger)
	x.mu.Unlock()
	if err := x.fs.Remove(x.path(ledger)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// ledgerMeta is what Open learns about a ledger from its index file.
type ledgerMeta struct {
	fenced    bool
	lastEntry int64
}

// load reads the header and finds the last entry of ledger's index file. ok
// is false for a file left over from a creation that never reached the disk
// (shorter than a header, or an all-zero header); the caller removes it.
func (x *indexStore) load(ledger uint64) (meta ledgerMeta, ok bool, err error) {
	name := x.path(ledger)
	f, err := x.fs.Open(name)
	if err != nil {
		return meta, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return meta, false, err
	}
	size := fi.Size()
	if size < indexHeaderSize {
		return meta, false, nil
	}
	h := make([]byte, indexHeaderSize)
	if _, err := f.ReadAt(h, 0); err != nil && err != io.EOF {
		return meta, false, err
	}
	if isZero(h) {
		return meta, false, nil
	}
	fenced, herr := decodeIndexHeader(h, ledger)
	if herr != nil {
		return meta, false, &CorruptionError{File: name, Ledger: ledger, Reason: herr.Error()}
	}
	meta = ledgerMeta{fenced: fenced, lastEntry: -1}
	// The last non-empty slot, reading backwards a page at a time.
	nslots := (size - indexHeaderSize) / slotSize
	buf := make([]byte, indexPageSize)
	for end := nslots; end > 0; {
		start := max(0, end-slotsPerPage)
		b := buf[:(end-start)*slotSize]
		if _, err := f.ReadAt(b, indexHeaderSize+start*slotSize); err != nil && err != io.EOF {
			return meta, false, err
		}
		for i := end - start - 1; i >= 0; i-- {
			if !isZero(b[i*slotSize : (i+1)*slotSize]) {
				meta.lastEntry = start + i
				x.grew(ledger, size)
				return meta, true, nil
			}
		}
		end = start
	}
	x.grew(ledger, size)
	return meta, true, nil
}

// list returns the ledgers that have an index file.
func (x *indexStore) list() ([]uint64, error) {
	names, err := x.fs.List(x.dir)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, n := range names {
		if len(n) == 20 && n[16:] == ".idx" {
			var id uint64
			if _, err := fmt.Sscanf(n[:16], "%016x", &id); err == nil {
				out = append(out, id)
			}
		}
	}
	return out, nil
}

func (x *indexStore) close() { x.files.close() }
