package storage

import (
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// benchmarkAdd measures acknowledged adds on a real temporary directory with
// the default configuration: 64 concurrent adders (b.SetParallelism), each
// waiting for its own ack, so the journal batches many adds per fdatasync.
func benchmarkAdd(b *testing.B, size int) { benchmarkAddDelay(b, size, 0) }

func benchmarkAddDelay(b *testing.B, size int, delay time.Duration) {
	dir := b.TempDir()
	var syncs atomic.Int64
	journalDir := filepath.Join(dir, "journal")
	countSyncs := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && filepath.Dir(path) == journalDir {
			syncs.Add(1)
		}
		return nil
	})
	s, err := Open(Config{
		JournalDir:          journalDir,
		LedgerDir:           filepath.Join(dir, "ledgers"),
		FS:                  vfs.NewErrorFS(vfs.Default, countSyncs),
		Logger:              slog.New(slog.DiscardHandler),
		CompactionInterval:  -1,
		GroupCommitMaxDelay: delay,
	})
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	var ledgers atomic.Uint64
	b.SetBytes(int64(size))
	b.SetParallelism(32)
	b.ResetTimer()
	syncs.Store(0)
	b.RunParallel(func(pb *testing.PB) {
		ledger := ledgers.Add(1)
		ch := make(chan error, 1)
		for e := uint64(0); pb.Next(); e++ {
			s.Add(ledger, e, data, false, func(err error) { ch <- err })
			if err := <-ch; err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if n := syncs.Load(); n > 0 {
		b.ReportMetric(float64(b.N)/float64(n), "adds/fsync")
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkAdd1KiB(b *testing.B)  { benchmarkAdd(b, 1<<10) }
func BenchmarkAdd64KiB(b *testing.B) { benchmarkAdd(b, 64<<10) }

// BenchmarkAdd1KiBGather1ms is BenchmarkAdd1KiB with a 1 ms gather
// (groupCommitMaxDelay: 1ms, the default before 2026-12-07): groups also
// wait for adds that come after the queue emptied.
func BenchmarkAdd1KiBGather1ms(b *testing.B) { benchmarkAddDelay(b, 1<<10, time.Millisecond) }

// BenchmarkReadCold reads entries from the entry logs (not the write cache)
// in order, as a backlog reader does.
func BenchmarkReadCold(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(Config{JournalDir: filepath.Join(dir, "j"), LedgerDir: filepath.Join(dir, "l"),
		Logger: slog.New(slog.DiscardHandler), CompactionInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 4096
	data := make([]byte, 1<<10)
	done := make(chan error, n)
	for e := range uint64(n) {
		s.Add(1, e, data, false, func(err error) { done <- err })
	}
	for range n {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Checkpoint(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Read(1, uint64(i%n)); err != nil {
			b.Fatal(err)
		}
	}
}
