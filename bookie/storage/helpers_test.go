package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// TestMain fails the package if any Store goroutine outlives the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := storeGoroutines(2 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked Store goroutines:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// storeGoroutines waits up to d for Store goroutines to exit and returns the
// stacks of those still running.
func storeGoroutines(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "storage.(*Store).") && !strings.Contains(g, "storeGoroutines") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testLogger logs to the test at warn level and above, so surprises show.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// smallConfig is a configuration that rotates, flushes and compacts often.
func smallConfig(fsys vfs.FS, root string) Config {
	return Config{
		JournalDir:          root + "/journal",
		LedgerDir:           root + "/ledgers",
		FS:                  fsys,
		GroupCommitMaxDelay: -1,
		GroupCommitMaxBytes: 64 << 10,
		JournalFileMaxBytes: 256 << 10,
		WriteCacheMaxBytes:  256 << 10,
		FlushInterval:       20 * time.Millisecond,
		EntryLogMaxBytes:    256 << 10,
		CompactionInterval:  -1,
	}
}

func openT(t testing.TB, cfg Config) *Store {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// addWait adds an entry and waits for its completion.
func addWait(s *Store, ledger, entry uint64, data []byte, recovery bool) error {
	ch := make(chan error, 1)
	s.Add(ledger, entry, data, recovery, func(err error) { ch <- err })
	return <-ch
}

func mustAdd(t testing.TB, s *Store, ledger, entry uint64, data []byte) {
	t.Helper()
	if err := addWait(s, ledger, entry, data, false); err != nil {
		t.Fatalf("add %d/%d: %v", ledger, entry, err)
	}
}

// payload is deterministic data for (ledger, entry, version) of the given
// size; its first 24 bytes name it, so a mixed-up read is recognizable.
func payload(ledger, entry, version uint64, size int) []byte {
	b := make([]byte, max(size, 24))
	binary.LittleEndian.PutUint64(b[0:], ledger)
	binary.LittleEndian.PutUint64(b[8:], entry)
	binary.LittleEndian.PutUint64(b[16:], version)
	r := rand.New(rand.NewPCG(ledger*1_000_003+entry, version))
	for i := 24; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
	return b[:max(size, 24)]
}

func expectRead(t testing.TB, s *Store, ledger, entry uint64, want []byte) {
	t.Helper()
	got, err := s.Read(ledger, entry)
	if err != nil {
		t.Fatalf("read %d/%d: %v", ledger, entry, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d/%d: %d bytes differ from the %d written", ledger, entry, len(got), len(want))
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// crashStop stops s like a killed process: no final flush, no checkpoint.
// The files keep whatever was written to them.
func crashStop(s *Store) {
	s.skipFinalFlush.Store(true)
	s.Close()
}

func checkpointT(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Checkpoint(context.Background()); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
}

func isNotFound(err error) bool {
	return errors.Is(err, ErrNoEntry) || errors.Is(err, ErrNoLedger)
}
