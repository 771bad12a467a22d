package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func twoRegions() Endpoints {
	var e Endpoints
	if err := json.Unmarshal([]byte(`{"controlUrl":"http://127.0.0.1:1","regions":[
		{"name":"r0","serviceUrl":"pulsar://127.0.0.1:10","webServiceUrl":"http://127.0.0.1:11","brokers":[{"serviceUrl":"pulsar://127.0.0.1:10","webServiceUrl":"http://127.0.0.1:11/"}]},
		{"name":"r1","serviceUrl":"pulsar://127.0.0.1:20","webServiceUrl":"http://127.0.0.1:21"}]}`), &e); err != nil {
		panic(err)
	}
	return e
}

func TestEndpoints(t *testing.T) {
	e := twoRegions()
	if got := e.MultiHostURL(); got != "pulsar://127.0.0.1:10,127.0.0.1:20" {
		t.Errorf("MultiHostURL = %q", got)
	}
	r0, _ := e.Region("r0")
	if r0.webURL() != "http://127.0.0.1:11" {
		t.Errorf("webURL %q", r0.webURL())
	}
	if _, ok := e.Region("r9"); ok {
		t.Error("found r9")
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	good := Config{Endpoints: twoRegions(), Namespace: "geo/drill", From: "r0", To: "r1", Fault: Kill}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	bad := Config{Endpoints: Endpoints{Regions: twoRegions().Regions}, Namespace: "drill", From: "r0", To: "r0", Fault: "flood",
		Rate: -1, Producers: 500, AutoFailoverAfter: 1500 * time.Millisecond, MaxLost: -1, Duration: 2 * time.Hour}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{"--endpoints", "--namespace", "--to", "--fault", "--rate", "--producers", "--auto-failover-after", "--max-lost", "--duration"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no %s in %v", want, err)
		}
	}
	unknown := good
	unknown.To = "r9"
	if err := unknown.Validate(); err == nil || !strings.Contains(err.Error(), `no region "r9"`) {
		t.Errorf("unknown region: %v", err)
	}
}

func TestReportTableAndTelemetry(t *testing.T) {
	l := killLog()
	l.Writable = l.Promoted.Add(1500 * time.Millisecond)
	r := Analyze(l, Limits{MaxRTOMS: 10000, MaxLost: 1})
	r.Drill, r.RunID, r.Namespace, r.From, r.To, r.Fault, r.Promotion = "failover", "run1", "geo/drill", "r0", "r1", Kill, "drill"
	r.Started = base
	var out bytes.Buffer
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"kill r0 -> r1, promoted by the drill: PASSED",
		"fenced                -2 ms",
		"new primary writable  +2000 ms",
		"rto budget                       promotion 500 + fence 1500 + client 700 ms (slowest producer 3 ms more)",
		"rto publish (max / p99)          2705 / 2705 ms (limit 10000 ms)",
		"rpo                              15 messages, 95 ms",
		"duplicated (redelivery / copy)   20 / 1",
		"in flight / bound                55 / 75",
		"copy in r1                       1201 messages, 1200 distinct, 0 missing, 15 late",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	tel := newTelemetry(mp, tp)
	ctx, span := tel.tracer.Start(context.Background(), "drill.failover")
	tel.record(ctx, span, &r)
	span.End()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			g, ok := m.Data.(metricdata.Gauge[int64])
			if !ok {
				t.Errorf("%s: %T, want an int64 gauge", m.Name, m.Data)
				continue
			}
			for _, dp := range g.DataPoints {
				if v, _ := dp.Attributes.Value("isobar.fault"); v.AsString() != "kill" {
					t.Errorf("%s: attributes %v", m.Name, dp.Attributes)
				}
				name := m.Name
				if kind, ok := dp.Attributes.Value("isobar.kind"); ok {
					name += "/" + kind.AsString()
				}
				got[name] = dp.Value
			}
		}
	}
	want := map[string]int64{
		"isobar.drill.passed": 1, "isobar.drill.rto_publish": 2705, "isobar.drill.rto_consume": 2603,
		"isobar.drill.rpo_messages": 15, "isobar.drill.rpo": 95, "isobar.drill.lost": 1, "isobar.drill.late": 15,
		"isobar.drill.order_violations": 1, "isobar.drill.duplicated/redelivery": 20, "isobar.drill.duplicated/copy": 1,
		"isobar.drill.timestamp": base.Unix(),
	}
	for n, v := range want {
		if got[n] != v {
			t.Errorf("%s = %d, want %d", n, got[n], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("gauges %v, want %v", got, want)
	}
	ss := spans.GetSpans()
	if len(ss) != 1 || len(ss[0].Events) != 7 || ss[0].Events[2].Name != "fenced" || !ss[0].Events[2].Time.Equal(at(1998)) {
		t.Errorf("span %+v", ss)
	}
}

// TestValidateSyncFlags: --sync and --sync-fallback-after are checked
// with the rest, each problem named by its flag.
func TestValidateSyncFlags(t *testing.T) {
	good := Config{Endpoints: twoRegions(), Namespace: "geo/drill", From: "r0", To: "r1", Fault: Kill, SyncRegions: 1, SyncFallbackAfter: time.Second}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, c := range []struct {
		regions  int
		fallback time.Duration
		want     string
	}{
		{-1, 0, "--sync: -1 is not within 0..64"},
		{65, 0, "--sync: 65"},
		{1, 1500 * time.Millisecond, "--sync-fallback-after: 1.5s is not a whole number of seconds"},
		{1, 2 * time.Hour, "--sync-fallback-after: 2h0m0s"},
		{0, time.Second, "--sync-fallback-after: needs --sync"},
	} {
		bad := good
		bad.SyncRegions, bad.SyncFallbackAfter = c.regions, c.fallback
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--sync %d --sync-fallback-after %v: %v, want %q", c.regions, c.fallback, err, c.want)
		}
	}
}
