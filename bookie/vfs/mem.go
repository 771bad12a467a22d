package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// MemFS is an in-memory FS that models durability strictly. For every file it
// keeps the current contents and the contents as of the last File.Sync; for
// every directory it keeps the current entries and the entries as of the last
// FS.SyncDir. A crash (CrashClone, Crash) keeps only the durable side:
// unsynced data is lost, and so is any creation, rename or removal whose
// directory was not synced afterwards.
//
// Paths are slash-separated; relative paths are taken from the root "/",
// which always exists and is always durable. All methods are safe for
// concurrent use, and CrashClone is atomic with respect to every other
// operation.
type MemFS struct {
	mu       sync.Mutex
	root     *memNode
	gen      uint64 // bumped by Crash; handles from an older generation fail
	capacity uint64
}

type memNode struct {
	isDir bool
	// Directories.
	children map[string]*memNode // current entries
	durable  map[string]*memNode // entries as of the last SyncDir
	// Files.
	data    []byte // current contents
	synced  []byte // contents as of the last Sync
	clean   int    // data[:clean] == synced[:clean]; clean <= min(len(data), len(synced))
	modTime time.Time
}

// DefaultMemCapacity is the size MemFS.Usage reports unless SetCapacity is
// called.
const DefaultMemCapacity = 1 << 40

// NewStrictMem returns an empty MemFS.
func NewStrictMem() *MemFS {
	return &MemFS{root: newDirNode(), capacity: DefaultMemCapacity}
}

func newDirNode() *memNode {
	return &memNode{isDir: true, children: map[string]*memNode{}, durable: map[string]*memNode{}, modTime: time.Now()}
}

// SetCapacity sets the total size reported by Usage.
func (m *MemFS) SetCapacity(total uint64) {
	m.mu.Lock()
	m.capacity = total
	m.mu.Unlock()
}

// CrashClone returns a new MemFS holding only what is durable in m right now:
// what a power loss at this instant would leave. m is unchanged and can keep
// being used.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &MemFS{root: cloneDurable(m.root, nil), capacity: m.capacity}
}

// CrashCloneTorn is like CrashClone but models a disk that may have written
// some unsynced data before the power went out: for each file, every 512-byte
// sector that differs from the durable contents independently keeps its old
// or its new bytes, and a file whose size changed ends up anywhere between
// its durable and its current size. Directory entries stay strict. The same
// rnd gives the same result.
func (m *MemFS) CrashCloneTorn(rnd *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &MemFS{root: cloneDurable(m.root, rnd), capacity: m.capacity}
}

// Crash turns m itself into its crash clone: unsynced data and directory
// entries are dropped, and every file handle opened before fails with
// ErrCrashed from now on.
func (m *MemFS) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.root = cloneDurable(m.root, nil)
	m.gen++
}

func cloneDurable(n *memNode, rnd *rand.Rand) *memNode {
	if n.isDir {
		d := newDirNode()
		d.modTime = n.modTime
		for name, c := range n.durable {
			cc := cloneDurable(c, rnd)
			d.children[name] = cc
			d.durable[name] = cc
		}
		return d
	}
	var data []byte
	if rnd == nil {
		data = append([]byte(nil), n.synced...)
	} else {
		data = tornContents(n, rnd)
	}
	return &memNode{data: data, synced: append([]byte(nil), data...), clean: len(data), modTime: n.modTime}
}

const sectorSize = 512

func tornContents(n *memNode, rnd *rand.Rand) []byte {
	lo, hi := len(n.synced), len(n.data)
	if lo > hi {
		lo, hi = hi, lo
	}
	size := lo
	if hi > lo {
		size = lo + rnd.IntN(hi-lo+1)
	}
	out := make([]byte, size)
	copy(out, n.synced)
	for s := n.clean / sectorSize * sectorSize; s < size; s += sectorSize {
		if rnd.IntN(2) == 0 {
			continue // keep the old bytes (or zeros past the durable end)
		}
		e := min(s+sectorSize, size)
		for i := s; i < e; i++ {
			if i < len(n.data) {
				out[i] = n.data[i]
			} else {
				out[i] = 0
			}
		}
	}
	return out
}

// clean path relative to the root, split into components.
func splitPath(name string) []string {
	p := path.Clean("/" + name)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

func (m *MemFS) lookup(name string) (*memNode, error) {
	n := m.root
	for _, c := range splitPath(name) {
		if !n.isDir {
			return nil, fs.ErrNotExist
		}
		next, ok := n.children[c]
		if !ok {
			return nil, fs.ErrNotExist
		}
		n = next
	}
	return n, nil
}

// parent returns the directory holding name and name's last component.
func (m *MemFS) parent(name string) (*memNode, string, error) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", fs.ErrInvalid
	}
	dir, err := m.lookup(strings.Join(parts[:len(parts)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !dir.isDir {
		return nil, "", fs.ErrNotExist
	}
	return dir, parts[len(parts)-1], nil
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent(name)
	if err != nil {
		return nil, pathErr("create", name, err)
	}
	n, ok := dir.children[base]
	switch {
	case ok && n.isDir:
		return nil, pathErr("create", name, fs.ErrExist)
	case ok:
		n.data = n.data[:0]
		n.clean = 0
	default:
		n = &memNode{}
		dir.children[base] = n
	}
	n.modTime = time.Now()
	return &memFile{fs: m, node: n, name: name, gen: m.gen}, nil
}

func (m *MemFS) open(op, name string, readOnly, atEnd bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	if n.isDir && !readOnly {
		return nil, pathErr(op, name, fmt.Errorf("is a directory"))
	}
	f := &memFile{fs: m, node: n, name: name, gen: m.gen, readOnly: readOnly}
	if atEnd {
		f.pos = int64(len(n.data))
	}
	return f, nil
}

func (m *MemFS) Open(name string) (File, error) { return m.open("open", name, true, false) }

func (m *MemFS) OpenAppend(name string) (File, error) {
	return m.open("openappend", name, false, true)
}

func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent(name)
	if err != nil {
		return pathErr("remove", name, err)
	}
	n, ok := dir.children[base]
	if !ok {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if n.isDir && len(n.children) > 0 {
		return pathErr("remove", name, fmt.Errorf("directory not empty"))
	}
	delete(dir.children, base)
	return nil
}

func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	odir, obase, err := m.parent(oldname)
	if err != nil {
		return pathErr("rename", oldname, err)
	}
	n, ok := odir.children[obase]
	if !ok {
		return pathErr("rename", oldname, fs.ErrNotExist)
	}
	ndir, nbase, err := m.parent(newname)
	if err != nil {
		return pathErr("rename", newname, err)
	}
	if t, ok := ndir.children[nbase]; ok && t.isDir {
		return pathErr("rename", newname, fs.ErrExist)
	}
	delete(odir.children, obase)
	ndir.children[nbase] = n
	return nil
}

func (m *MemFS) MkdirAll(dir string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, c := range splitPath(dir) {
		next, ok := n.children[c]
		if !ok {
			next = newDirNode()
			n.children[c] = next
		} else if !next.isDir {
			return pathErr("mkdir", dir, fmt.Errorf("not a directory"))
		}
		n = next
	}
	return nil
}

func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(dir)
	if err != nil {
		return nil, pathErr("list", dir, err)
	}
	if !n.isDir {
		return nil, pathErr("list", dir, fmt.Errorf("not a directory"))
	}
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	return n.info(path.Base(path.Clean("/" + name))), nil
}

func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(dir)
	if err != nil {
		return pathErr("syncdir", dir, err)
	}
	if !n.isDir {
		return pathErr("syncdir", dir, fmt.Errorf("not a directory"))
	}
	n.durable = make(map[string]*memNode, len(n.children))
	for k, v := range n.children {
		n.durable[k] = v
	}
	return nil
}

func (m *MemFS) Usage(dir string) (total, free uint64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.lookup(dir); err != nil {
		return 0, 0, pathErr("usage", dir, err)
	}
	used := usedBytes(m.root)
	total = m.capacity
	if used < total {
		free = total - used
	}
	return total, free, nil
}

func usedBytes(n *memNode) uint64 {
	if !n.isDir {
		return uint64(len(n.data))
	}
	var s uint64
	for _, c := range n.children {
		s += usedBytes(c)
	}
	return s
}

// memInfo is the fs.FileInfo of a MemFS node.
type memInfo struct {
	name    string
	size    int64
	isDir   bool
	modTime time.Time
}

func (n *memNode) info(name string) memInfo {
	return memInfo{name: name, size: int64(len(n.data)), isDir: n.isDir, modTime: n.modTime}
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return i.modTime }
func (i memInfo) IsDir() bool        { return i.isDir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() fs.FileMode {
	if i.isDir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

// memFile is a handle on a MemFS file. Like a POSIX descriptor it refers to
// the file itself, not its name: it keeps working after a rename or a remove.
type memFile struct {
	fs       *MemFS
	node     *memNode
	name     string
	gen      uint64
	readOnly bool

	mu     sync.Mutex // guards pos
	pos    int64
	closed bool
}

// check must be called with fs.mu held.
func (f *memFile) check(op string, write bool) error {
	if f.closed {
		return pathErr(op, f.name, fs.ErrClosed)
	}
	if f.gen != f.fs.gen {
		return pathErr(op, f.name, ErrCrashed)
	}
	if write && f.readOnly {
		return pathErr(op, f.name, fs.ErrPermission)
	}
	if f.node.isDir && (write || op == "read") {
		return pathErr(op, f.name, fmt.Errorf("is a directory"))
	}
	return nil
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, fs.ErrInvalid)
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.WriteAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("write", f.name, fs.ErrInvalid)
	}
	n := f.node
	end := int(off) + len(p)
	if end > len(n.data) {
		old := len(n.data)
		n.data = growTo(n.data, end)
		clear(n.data[old:end])
	}
	copy(n.data[off:], p)
	n.clean = min(n.clean, int(off))
	n.modTime = time.Now()
	return len(p), nil
}

func growTo(b []byte, size int) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := make([]byte, size, max(size, 2*cap(b)))
	copy(nb, b)
	return nb
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, fs.ErrInvalid)
	}
	n := f.node
	s := int(size)
	if s > len(n.data) {
		old := len(n.data)
		n.data = growTo(n.data, s)
		clear(n.data[old:s])
	} else {
		n.data = n.data[:s]
	}
	n.clean = min(n.clean, s)
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	n := f.node
	if n.isDir {
		return nil
	}
	n.synced = append(n.synced[:n.clean], n.data[n.clean:]...)
	n.clean = len(n.data)
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return nil, err
	}
	return f.node.info(path.Base(path.Clean("/" + f.name))), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}
