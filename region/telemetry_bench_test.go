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
	const rounds = 5
	const n = 100_000
	pool := benchPayloads(benchPoolSize, benchPayloadSize, 2)
	rates := map[bool][]float64{}
	for round := range rounds {
		for _, on := range []bool{false, true} {
			rate := telemetryRound(b, on, pool, n, round)
			rates[on] = append(rates[on], rate)
			b.Logf("round %d, telemetry on=%v: %.0f msg/s", round, on, rate)
		}
	}
	med := func(xs []float64) float64 {
		s := append([]float64(nil), xs...)
		for i := range s {
			for j := i + 1; j < len(s); j++ {
				if s[j] < s[i] {
					s[i], s[j] = s[j], s[i]
				}
			}
		}
		return s[len(s)/2]
	}
	off, on := med(rates[false]), med(rates[true])
	b.ReportMetric(off, "off-msg/s")
	b.ReportMetric(on, "on-msg/s")
	b.ReportMetric(100*(off-on)/off, "overhead-%")
	b.Logf("median off %.0f msg/s, on %.0f msg/s: overhead %.1f%% (target <= 5%%)", off, on, 100*(off-on)/off)
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
		cfg.Telemetry = tel
	}
	r, err := region.Start(ctx, cfg, nil)
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
