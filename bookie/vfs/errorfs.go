package vfs

import (
	"io/fs"
	"slices"
	"sync/atomic"
)

// Op is the kind of a filesystem operation, as seen by an Injector.
type Op uint8

// Operation kinds. File operations carry the name the file was opened with.
const (
	OpCreate Op = iota + 1
	OpOpen
	OpOpenAppend
	OpRemove
	OpRename
	OpMkdirAll
	OpList
	OpStat
	OpSyncDir
	OpUsage
	OpRead     // File.ReadAt
	OpWrite    // File.Write and File.WriteAt
	OpSync     // File.Sync
	OpTruncate // File.Truncate
	OpFileStat // File.Stat
	OpClose    // File.Close
)

var opNames = [...]string{
	OpCreate: "create", OpOpen: "open", OpOpenAppend: "openappend", OpRemove: "remove",
	OpRename: "rename", OpMkdirAll: "mkdirall", OpList: "list", OpStat: "stat",
	OpSyncDir: "syncdir", OpUsage: "usage", OpRead: "read", OpWrite: "write",
	OpSync: "sync", OpTruncate: "truncate", OpFileStat: "filestat", OpClose: "close",
}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return "op?"
}

// Injector decides, for every operation of an ErrorFS, whether it fails. It
// is called before the operation reaches the inner FS, from whatever
// goroutine performs it; it may also block (to stall an operation) or record
// something (to take a crash clone at an exact point).
type Injector interface {
	MaybeError(op Op, path string) error
}

// InjectorFunc adapts a function to an Injector.
type InjectorFunc func(op Op, path string) error

// MaybeError calls f.
func (f InjectorFunc) MaybeError(op Op, path string) error { return f(op, path) }

// NthInjector fails the Nth operation (1-based) among those whose kind is in
// Ops, and counts them. Set the exported fields before first use.
type NthInjector struct {
	N      int64 // which matching operation fails; <= 0: none, only count
	Ops    []Op  // kinds that count; empty: all
	Err    error // nil: ErrInjected
	Sticky bool  // after the Nth, every later matching operation fails too

	count atomic.Int64
	fired atomic.Bool
}

// OnNth returns an NthInjector failing the nth operation of the given kinds
// (any kind if none are given).
func OnNth(n int64, ops ...Op) *NthInjector { return &NthInjector{N: n, Ops: ops} }

// MaybeError implements Injector.
func (i *NthInjector) MaybeError(op Op, path string) error {
	if len(i.Ops) > 0 && !slices.Contains(i.Ops, op) {
		return nil
	}
	c := i.count.Add(1)
	if i.N <= 0 || c < i.N || (c > i.N && !i.Sticky) {
		return nil
	}
	i.fired.Store(true)
	if i.Err != nil {
		return i.Err
	}
	return ErrInjected
}

// Count is the number of matching operations seen so far.
func (i *NthInjector) Count() int64 { return i.count.Load() }

// Fired reports whether an error has been injected.
func (i *NthInjector) Fired() bool { return i.fired.Load() }

// ErrorFS is an FS that consults an Injector before every operation and, if
// it returns an error, fails the operation without performing it.
type ErrorFS struct {
	inner FS
	inj   Injector
}

// NewErrorFS wraps inner so that inj can fail any of its operations.
func NewErrorFS(inner FS, inj Injector) *ErrorFS { return &ErrorFS{inner: inner, inj: inj} }

// Inner returns the wrapped FS.
func (e *ErrorFS) Inner() FS { return e.inner }

func (e *ErrorFS) check(op Op, name string) error {
	if err := e.inj.MaybeError(op, name); err != nil {
		return &fs.PathError{Op: op.String(), Path: name, Err: err}
	}
	return nil
}

func (e *ErrorFS) wrap(f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &errorFile{inner: f, fs: e}, nil
}

func (e *ErrorFS) Create(name string) (File, error) {
	if err := e.check(OpCreate, name); err != nil {
		return nil, err
	}
	return e.wrap(e.inner.Create(name))
}

func (e *ErrorFS) Open(name string) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	return e.wrap(e.inner.Open(name))
}

func (e *ErrorFS) OpenAppend(name string) (File, error) {
	if err := e.check(OpOpenAppend, name); err != nil {
		return nil, err
	}
	return e.wrap(e.inner.OpenAppend(name))
}

func (e *ErrorFS) Remove(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.inner.Remove(name)
}

func (e *ErrorFS) Rename(oldname, newname string) error {
	if err := e.check(OpRename, oldname); err != nil {
		return err
	}
	return e.inner.Rename(oldname, newname)
}

func (e *ErrorFS) MkdirAll(dir string, perm fs.FileMode) error {
	if err := e.check(OpMkdirAll, dir); err != nil {
		return err
	}
	return e.inner.MkdirAll(dir, perm)
}

func (e *ErrorFS) List(dir string) ([]string, error) {
	if err := e.check(OpList, dir); err != nil {
		return nil, err
	}
	return e.inner.List(dir)
}

func (e *ErrorFS) Stat(name string) (fs.FileInfo, error) {
	if err := e.check(OpStat, name); err != nil {
		return nil, err
	}
	return e.inner.Stat(name)
}

func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.check(OpSyncDir, dir); err != nil {
		return err
	}
	return e.inner.SyncDir(dir)
}

func (e *ErrorFS) Usage(dir string) (total, free uint64, err error) {
	if err := e.check(OpUsage, dir); err != nil {
		return 0, 0, err
	}
	return e.inner.Usage(dir)
}

type errorFile struct {
	inner File
	fs    *ErrorFS
}

func (f *errorFile) Name() string { return f.inner.Name() }

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.inner.Name()); err != nil {
		return 0, err
	}
	return f.inner.ReadAt(p, off)
}

func (f *errorFile) Write(p []byte) (int, error) {
	if err := f.fs.check(OpWrite, f.inner.Name()); err != nil {
		return 0, err
	}
	return f.inner.Write(p)
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpWrite, f.inner.Name()); err != nil {
		return 0, err
	}
	return f.inner.WriteAt(p, off)
}

func (f *errorFile) Sync() error {
	if err := f.fs.check(OpSync, f.inner.Name()); err != nil {
		return err
	}
	return f.inner.Sync()
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.inner.Name()); err != nil {
		return err
	}
	return f.inner.Truncate(size)
}

func (f *errorFile) Stat() (fs.FileInfo, error) {
	if err := f.fs.check(OpFileStat, f.inner.Name()); err != nil {
		return nil, err
	}
	return f.inner.Stat()
}

// Close always closes the inner file, so an injected close error leaks
// nothing; the injected error is still reported.
func (f *errorFile) Close() error {
	ierr := f.fs.check(OpClose, f.inner.Name())
	cerr := f.inner.Close()
	if ierr != nil {
		return ierr
	}
	return cerr
}
