package observability_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/isobar-mq/isobar/observability"
)

// TestPrometheusHandler: a counter recorded through the provider is on
// the /metrics page with the resource's region and component as labels.
func TestPrometheusHandler(t *testing.T) {
	tel, err := observability.New(context.Background(), observability.Config{Region: "eu", Component: "broker", Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	c, _ := tel.MeterProvider().Meter("t").Int64Counter("isobar.test.things", metric.WithUnit("{thing}"))
	c.Add(context.Background(), 3, metric.WithAttributes(attribute.String("kind", "a")))
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	want := `isobar_test_things_total{isobar_component="broker",isobar_region="eu",kind="a"} 3`
	if !strings.Contains(rec.Body.String(), want) {
		t.Fatalf("page lacks %s:\n%s", want, rec.Body.String())
	}
}

// TestOTLPWhenConfigured: with OTEL_EXPORTER_OTLP_ENDPOINT set, metrics
// and spans are pushed over OTLP/HTTP to it; without, nothing is.
func TestOTLPWhenConfigured(t *testing.T) {
	var mu sync.Mutex
	paths := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		paths[r.URL.Path]++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}
	tel, err := observability.New(context.Background(), observability.Config{Region: "eu", Component: "broker", Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := tel.MeterProvider().Meter("t").Int64Counter("isobar.test.things")
	c.Add(context.Background(), 1)
	_, sp := tel.TracerProvider().Tracer("t").Start(context.Background(), "op")
	sp.End()
	if err := tel.Shutdown(context.Background()); err != nil { // flushes both
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if paths["/v1/metrics"] == 0 || paths["/v1/traces"] == 0 {
		t.Fatalf("OTLP requests by path: %v, want /v1/metrics and /v1/traces", paths)
	}
}

// TestDisabledIsNoop: a disabled Telemetry records nothing and serves an
// empty page.
func TestDisabledIsNoop(t *testing.T) {
	tel := observability.Disabled()
	c, _ := tel.MeterProvider().Meter("t").Int64Counter("isobar.test.things")
	c.Add(context.Background(), 1)
	if _, sp := tel.TracerProvider().Tracer("t").Start(context.Background(), "op"); sp.SpanContext().IsValid() {
		t.Error("disabled tracer made a real span")
	}
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if strings.Contains(rec.Body.String(), "isobar_test") {
		t.Errorf("disabled telemetry exported: %s", rec.Body.String())
	}
}
