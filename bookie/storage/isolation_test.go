package storage

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// blockingSync stalls the journal's fdatasync while armed.
type blockingSync struct {
	journalDir string
	armed      atomic.Bool
	blocked    chan struct{} // receives when a sync is stalled
	release    chan struct{}
}

func (b *blockingSync) MaybeError(op vfs.Op, path string) error {
	if op == vfs.OpSync && filepath.Dir(path) == b.journalDir && b.armed.Load() {
		b.blocked <- struct{}{}
		<-b.release
	}
	return nil
}

func TestReadDoesNotWaitForJournalSync(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig(nil, dir)
	cfg.FlushInterval = time.Hour
	bs := &blockingSync{journalDir: cfg.JournalDir, blocked: make(chan struct{}), release: make(chan struct{})}
	cfg.FS = vfs.NewErrorFS(vfs.Default, bs)
	s := openT(t, cfg)

	for e := range uint64(10) {
		mustAdd(t, s, 1, e, payload(1, e, 0, 500))
	}
	checkpointT(t, s) // entries 0..9 now in an entry log
	for e := uint64(10); e < 20; e++ {
		mustAdd(t, s, 1, e, payload(1, e, 0, 500)) // 10..19 in the write cache
	}

	bs.armed.Store(true)
	addDone := make(chan error, 1)
	s.Add(1, 20, payload(1, 20, 0, 500), false, func(err error) { addDone <- err })
	select {
	case <-bs.blocked:
	case <-time.After(5 * time.Second):
		t.Fatal("journal sync never started")
	}
	bs.armed.Store(false)

	// The journal goroutine is stuck inside fdatasync. Everything below must
	// complete anyway.
	done := make(chan struct{})
	go func() {
		defer close(done)
		expectRead(t, s, 1, 5, payload(1, 5, 0, 500))   // entry log
		expectRead(t, s, 1, 15, payload(1, 15, 0, 500)) // write cache
		// The add being synced is not visible yet.
		if _, err := s.Read(1, 20); !errors.Is(err, ErrNoEntry) {
			t.Errorf("unsynced entry visible: %v", err)
		}
		if last, err := s.LastEntryID(1); err != nil || last != 19 {
			t.Errorf("LastEntryID = %d, %v", last, err)
		}
		_ = s.Fenced(1)
		if _, err := s.Usage(); err != nil {
			t.Error(err)
		}
		// A flush does not need the journal either: 10..19 move to the
		// entry log while the sync is stuck, and stay readable.
		if err := s.Checkpoint(context.Background()); err != nil {
			t.Error(err)
		}
		expectRead(t, s, 1, 15, payload(1, 15, 0, 500))
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		close(bs.release)
		t.Fatal("reads blocked behind the journal fsync")
	}
	select {
	case err := <-addDone:
		t.Fatalf("add completed before its fsync: %v", err)
	default:
	}
	close(bs.release)
	if err := <-addDone; err != nil {
		t.Fatal(err)
	}
	expectRead(t, s, 1, 20, payload(1, 20, 0, 500))
}
