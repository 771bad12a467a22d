// Package vfs is the bookie's filesystem seam. The storage engine reaches the
// disk only through the small FS and File interfaces defined here, so tests
// can swap the disk for something they control:
//
//   - Default is the operating system's filesystem.
//   - NewStrictMem is an in-memory filesystem that remembers, per file and per
//     directory, what has been made durable (File.Sync, FS.SyncDir) and can
//     produce what a power loss would leave behind (MemFS.CrashClone).
//   - NewErrorFS wraps another FS and fails chosen operations with an
//     injected error (or blocks them), so a test can sweep a failure over
//     every operation of a workload.
//
// Durability rules every caller must follow (and that MemFS enforces): a
// file's data survives a crash once File.Sync has returned; a created,
// renamed or removed name survives once FS.SyncDir of its directory has
// returned.
package vfs

import (
	"errors"
	"io"
	"io/fs"
)

// File is an open file. Implementations are safe for concurrent use: ReadAt
// and WriteAt may be called from several goroutines at once; Write keeps a
// single write offset and must not be raced with itself.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Write writes at the handle's write offset and advances it. The offset
	// starts at 0 for Create and at the end of the file for OpenAppend.
	Write(p []byte) (int, error)
	// Sync makes the file's data durable, with fdatasync semantics: the
	// contents and the size, but not the file's directory entry (use
	// FS.SyncDir for that).
	Sync() error
	// Truncate changes the file's size; like a write, it is durable after Sync.
	Truncate(size int64) error
	// Stat describes the file.
	Stat() (fs.FileInfo, error)
	// Name is the name the file was opened with.
	Name() string
}

// FS is the set of filesystem operations the bookie's storage needs.
// Errors for missing files satisfy errors.Is(err, fs.ErrNotExist).
type FS interface {
	// Create creates the named file, or truncates it if it exists, and opens
	// it for reading and writing.
	Create(name string) (File, error)
	// Open opens an existing file read-only.
	Open(name string) (File, error)
	// OpenAppend opens an existing file for reading and writing with the
	// write offset at its end.
	OpenAppend(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename renames a file, replacing newname if it exists.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(dir string, perm fs.FileMode) error
	// List returns the names of a directory's entries, sorted.
	List(dir string) ([]string, error)
	// Stat describes the named file or directory.
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the directory's entries (creations, renames, removals)
	// durable.
	SyncDir(dir string) error
	// Usage reports the size and the free space of the filesystem holding
	// dir, in bytes.
	Usage(dir string) (total, free uint64, err error)
}

// AdviseRandom tells the operating system that f is read at scattered
// offsets, so that a read brings in only the pages it asks for, without the
// kernel's read-ahead (posix_fadvise POSIX_FADV_RANDOM). It is a hint:
// files of other filesystems than Default ignore it, and so do systems
// without posix_fadvise.
func AdviseRandom(f File) error {
	if o, ok := f.(osFile); ok {
		return adviseRandom(o.File)
	}
	return nil
}

// AdviseWillNeed tells the operating system that n bytes of f from off
// will be read soon, so it starts reading them into the page cache
// (posix_fadvise POSIX_FADV_WILLNEED). A hint, like AdviseRandom.
func AdviseWillNeed(f File, off, n int64) error {
	if o, ok := f.(osFile); ok {
		return adviseWillNeed(o.File, off, n)
	}
	return nil
}

// Default is the operating system's filesystem.
var Default FS = osFS{}

// ErrInjected is the error an ErrorFS returns by default for a failed
// operation.
var ErrInjected = errors.New("vfs: injected error")

// ErrCrashed is returned by a MemFS file handle opened before MemFS.Crash.
var ErrCrashed = errors.New("vfs: file handle invalidated by a simulated crash")
