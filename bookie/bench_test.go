package bookie_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/internal/diskperf"
	"github.com/isobar-mq/isobar/internal/testcluster"
)

var (
	diskOnce sync.Once
	disk     diskperf.Result
	diskErr  error
)

// BenchmarkLedgerAppend measures ledger add throughput and latency on 3 real
// bookies (E=3 Qw=2 Qa=2, one writer, many adds in flight) and reports it
// next to the same disk's fdatasync latency and synced sequential bandwidth,
// measured in the same run:
//
//	go test -run '^$' -bench BenchmarkLedgerAppend -benchtime 20000x ./bookie/
//
// target-ratio is throughput / (50% of synced sequential bandwidth / Qw)
// (≥1 meets the target); p99-per-fsync is p99 latency / fdatasync p50 (≤3
// meets the target).
func BenchmarkLedgerAppend(b *testing.B) {
	for _, bc := range []struct {
		name     string
		size     int
		inFlight int // the writer's bound on outstanding entries; 0: the client default (1024)
	}{{"1KiB", 1 << 10, 0}, {"64KiB", 64 << 10, 0}, {"1KiB-inflight8", 1 << 10, 8}} {
		b.Run(bc.name, func(b *testing.B) {
			cl := testcluster.Start(b, testcluster.Options{Bookies: 3})
			diskOnce.Do(func() { disk, diskErr = diskperf.Measure(cl.Dir, time.Second) })
			if diskErr != nil {
				b.Fatal(diskErr)
			}
			lc, err := ledger.NewClient(cl.Connect(), ledger.Config{Region: cl.Region, MaxInFlight: bc.inFlight})
			if err != nil {
				b.Fatal(err)
			}
			defer lc.Close()
			ctx := context.Background()
			w, err := lc.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2})
			if err != nil {
				b.Fatal(err)
			}
			// Varied payloads so nothing downstream can win by repetition.
			bufs := make([][]byte, 64)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range bufs {
				bufs[i] = make([]byte, bc.size)
				for j := range bufs[i] {
					bufs[i][j] = byte(rng.Uint32())
				}
			}
			b.SetBytes(int64(bc.size))
			b.ResetTimer()
			m := ledger.NewAppendMeter(w)
			for i := 0; i < b.N; i++ {
				if !m.Append(bufs[i%len(bufs)]) {
					break
				}
			}
			res, err := m.Wait()
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			const qw = 2
			target := 0.5 * disk.SeqSyncedMBps / qw
			b.ReportMetric(res.MBPerSec, "MB/s-acked")
			b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
			b.ReportMetric(disk.SeqSyncedMBps, "disk-seq-sync-MB/s")
			b.ReportMetric(float64(disk.FsyncP50.Microseconds())/1000, "disk-fsync-ms")
			b.ReportMetric(res.MBPerSec/target, "target-ratio")
			b.ReportMetric(float64(res.P99)/float64(disk.FsyncP50), "p99-per-fsync")
			w.Close(ctx)
		})
	}
}
