package storage

import (
	"io/fs"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// TestOutOfDescriptorsIsTransient: while the process has no file
// descriptor left (every create and open fails with EMFILE), flushes,
// checkpoints and journal rotations are postponed, not fatal: the store
// keeps accepting and serving entries (up to its write cache), never turns
// failed, and once descriptors are back it flushes everything. A restart
// then reads every entry.
func TestOutOfDescriptorsIsTransient(t *testing.T) {
	dir := t.TempDir()
	var exhausted atomic.Bool
	var refused atomic.Int64
	fsys := vfs.NewErrorFS(vfs.Default, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if exhausted.Load() && (op == vfs.OpCreate || op == vfs.OpOpen || op == vfs.OpOpenAppend) {
			refused.Add(1)
			return &fs.PathError{Op: "open", Path: path, Err: syscall.EMFILE}
		}
		return nil
	}))
	cfg := smallConfig(fsys, dir)
	cfg.WriteCacheMaxBytes = 16 << 20 // room for what is written during the shortage
	s := openT(t, cfg)
	want := roundTripData(t, s, 3, 50, 1)

	exhausted.Store(true)
	more := roundTripData(t, s, 3, 60, 2) // rotates the journal; flushes come every 20ms
	for k, v := range more {
		want[k] = v
	}
	deadline := time.Now().Add(10 * time.Second)
	for refused.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no create or open was attempted during the shortage")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.Failed(); err != nil {
		t.Fatalf("storage failed for lack of descriptors: %v", err)
	}
	verifyAll(t, s, want)

	exhausted.Store(false)
	checkpointT(t, s)
	if err := s.Failed(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d creates and opens refused with EMFILE", refused.Load())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, smallConfig(vfs.Default, dir))
	defer s.Close()
	verifyAll(t, s, want)
}
