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

// adviseRandom is a no-op where posix_fadvise is not available.
func adviseRandom(*os.File) error { return nil }

// adviseWillNeed is a no-op where posix_fadvise is not available.
func adviseWillNeed(*os.File, int64, int64) error { return nil }
