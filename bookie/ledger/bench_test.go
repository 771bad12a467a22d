package ledger_test

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/internal/testcluster"
)

func BenchmarkAppend1KiB(b *testing.B)  { benchmarkAppend(b, 1<<10, 0) }
func BenchmarkAppend64KiB(b *testing.B) { benchmarkAppend(b, 64<<10, 0) }

// BenchmarkAppend1KiBOneInFlight is the unloaded add latency: one entry at a time.
func BenchmarkAppend1KiBOneInFlight(b *testing.B) { benchmarkAppend(b, 1<<10, 1) }

// benchmarkAppend measures one writer on three local bookies, E=3 Qw=2
// Qa=2, with up to inFlight entries outstanding (0: the default, 1024, and
// 32 MiB): throughput (MB/s) and add latency (p50, p99 in ms, from the
// writer accepting an entry to its callback; see AppendMeter). With many in
// flight the latency is mostly queueing behind the other entries.
func benchmarkAppend(b *testing.B, size, inFlight int) {
	cl := testcluster.Start(b, testcluster.Options{Bookies: 3, Region: "bench"})
	c, err := ledger.NewClient(cl.Meta, ledger.Config{Region: cl.Region, Logger: cl.Logger(), MaxInFlight: inFlight})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	w, err := c.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2})
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, size)
	rand.Read(data)
	m := ledger.NewAppendMeter(w)
	b.SetBytes(int64(size))
	for b.Loop() {
		if !m.Append(data) {
			break
		}
	}
	r, err := m.Wait() // the last in-flight entries complete outside the timed loop
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(r.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(r.P99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(r.MBPerSec, "e2e-MB/s")
}
