//go:build linux

package vfs

import (
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// adviseRandom is posix_fadvise(POSIX_FADV_RANDOM) on the whole file: the
// kernel reads only the pages a read asks for, no read-ahead.
func adviseRandom(f *os.File) error { return fadvise(f, 0, 0, unix.FADV_RANDOM) }

// adviseWillNeed is posix_fadvise(POSIX_FADV_WILLNEED): the kernel starts
// reading the range into the page cache and returns.
func adviseWillNeed(f *os.File, off, n int64) error {
	return fadvise(f, off, n, unix.FADV_WILLNEED)
}

func fadvise(f *os.File, off, n int64, advice int) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var aerr error
	if err := sc.Control(func(fd uintptr) { aerr = unix.Fadvise(int(fd), off, n, advice) }); err != nil {
		return err
	}
	if aerr != nil {
		return &fs.PathError{Op: "fadvise", Path: f.Name(), Err: aerr}
	}
	return nil
}

// datasync is fdatasync(2): the file's data and the metadata needed to read
// it back, without flushing unrelated metadata such as timestamps.
func datasync(f *os.File) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &fs.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}

func diskUsage(dir string) (total, free uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, &fs.PathError{Op: "statfs", Path: dir, Err: err}
	}
	bs := uint64(st.Bsize)
	return st.Blocks * bs, st.Bavail * bs, nil
}
