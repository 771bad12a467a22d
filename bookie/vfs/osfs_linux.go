//go:build linux

package vfs

import (
	"io/fs"
	"os"
	"syscall"
)

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
