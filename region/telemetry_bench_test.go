package region_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/isobar-mq/isobar/observability"
	"github.com/isobar-mq/isobar/region"
)

// BenchmarkTelemetryOverhead measures produce throughput in one region
// (3 bookies, 1 broker) with telemetry off (no-op providers) and on
// (metrics with a Prometheus registry that is scraped every second, and a
// tracer provider with an exporter), alternating off/on rounds in the same
// run, and reports the overhead of "on":
//
//	go test -run '^$' -bench BenchmarkTelemetryOverhead -benchtime 1x -timeout 10m ./region/
func BenchmarkTelemetryOverhead(b *testing.B) {
	if testing.Short() {
		b.Skip("skipped with -short")
	}
	const rounds = 7
	const n = 50_000
	pool := benchPayloads(benchPoolSize, benchPayloadSize, 2)
	// Each round starts a fresh region, whose throughput varies a lot
	// from one start to the next on this machine (disk state), so the
	// estimate is the median of the per-round on/off ratios (each round
	// runs both back to back), not a ratio of medians.
	offs, ons, ratios := pairedRounds(b, rounds, "telemetry off", "on",
		func(round int) float64 { return telemetryRound(b, false, pool, n, round) },
		func(round int) float64 { return telemetryRound(b, true, pool, n, round) })
	r := median(ratios)
	b.ReportMetric(median(offs), "off-msg/s")
	b.ReportMetric(median(ons), "on-msg/s")
	b.ReportMetric(100*(1-r), "overhead-%")
	b.Logf("median on/off ratio %.3f: overhead %.1f%% (target <= 5%%); medians off %.0f, on %.0f msg/s", r, 100*(1-r), median(offs), median(ons))
}

func telemetryRound(b *testing.B, on bool, pool [][]byte, n, round int) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := region.Config{Name: "tel", DataDir: b.TempDir(), Bookies: 3, Brokers: 1, TelemetryOff: !on}
	var tel *observability.Telemetry
	if on {
		var err error
		tel, err = observability.New(ctx, observability.Config{Region: "tel", Component: "region", Instance: "tel",
			SpanExporters: []sdkSpanExporter{tracetest.NewNoopExporter()}})
		if err != nil {
			b.Fatal(err)
		}
	}
	r, err := region.Start(ctx, cfg, region.Deps{Telemetry: tel})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		r.Shutdown(sctx)
		if tel != nil {
			tel.Shutdown(sctx)
		}
	}()
	stop := make(chan struct{})
	defer close(stop)
	if on {
		// A scraper, as Prometheus would be.
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					scrape(r.Endpoints().MetricsURL)
				}
			}
		}()
	}
	c := benchClient(b, r.Endpoints().ServiceURL)
	p := benchProducer(b, c, fmt.Sprintf("persistent://public/default/tel-%d", round))
	defer p.Close()
	benchSend(b, p, pool, 0, 1000) // warm up
	start := time.Now()
	benchSend(b, p, pool, 0, n)
	return float64(n) / time.Since(start).Seconds()
}

// scrape reads a metrics page and throws it away.
func scrape(url string) {
	resp, err := http.Get(url)
	if err != nil {
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
