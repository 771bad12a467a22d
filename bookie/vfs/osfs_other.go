//go:build !linux

package vfs

import (
	"errors"
	"os"
)

// datasync falls back to fsync where fdatasync is not available.
func datasync(f *os.File) error { return f.Sync() }

func diskUsage(dir string) (total, free uint64, err error) {
	return 0, 0, errors.ErrUnsupported
}
