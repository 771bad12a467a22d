// Package atomicfile replaces small files on the OS filesystem so that a
// reader, and the file after a crash, sees the old content or the new one,
// never a part of either: the data goes to a temporary file in the same
// directory, which is synced, renamed over the file, and the directory
// synced.
//
// The bookie's storage has its own copy over vfs.FS (bookie/storage
// checkpoint.go), so tests can inject faults into it; everything that
// writes to the real filesystem uses this one.
package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data, with mode perm exactly (the umask does
// not apply). On failure path is left as it was and no temporary file
// remains. The directory must exist.
func Write(path string, data []byte, perm fs.FileMode) (err error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close() // a second Close only returns an error
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
