// Package observability is the one place that builds the OpenTelemetry
// SDK (docs/observability.md): a MeterProvider whose metrics are served
// in Prometheus format on /metrics (always) and pushed over OTLP when the
// standard OTEL_EXPORTER_OTLP_* variables are set, and a TracerProvider
// (OTLP, or any span exporter a caller adds). Every other package uses
// only the OTel API and gets its providers from here; a disabled
// Telemetry hands out no-op providers that cost close to nothing.
package observability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	nooptrace "go.opentelemetry.io/otel/trace/noop"
)

// Resource attribute keys Isobar adds; isobar.region and isobar.component
// also become labels of every Prometheus series.
const (
	AttrRegion    = "isobar.region"
	AttrComponent = "isobar.component"
)

// Config configures a Telemetry.
type Config struct {
	// Service is service.name; empty means "isobar".
	Service string
	// Region, Component and Instance are isobar.region, isobar.component
	// and service.instance.id.
	Region, Component, Instance string
	// Disabled hands out no-op providers and serves an empty /metrics.
	Disabled bool
	// SpanExporters receive every finished span (tests pass an in-memory
	// exporter); spans are exported synchronously to them.
	SpanExporters []sdktrace.SpanExporter
	// Getenv reads the OTEL_* variables; nil means os.Getenv.
	Getenv func(string) string
	// Logger; nil discards.
	Logger *slog.Logger
}

// Telemetry holds a component's providers and its /metrics handler.
type Telemetry struct {
	meter    metric.MeterProvider
	tracer   trace.TracerProvider
	registry *prometheus.Registry
	shutdown []func(context.Context) error
}

// New builds the providers for cfg.
func New(ctx context.Context, cfg Config) (*Telemetry, error) {
	if cfg.Disabled {
		return &Telemetry{meter: noopmetric.NewMeterProvider(), tracer: nooptrace.NewTracerProvider(), registry: prometheus.NewRegistry()}, nil
	}
	if cfg.Service == "" {
		cfg.Service = "isobar"
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", cfg.Service),
		attribute.String("service.instance.id", cfg.Instance),
		attribute.String(AttrRegion, cfg.Region),
		attribute.String(AttrComponent, cfg.Component),
	))
	if err != nil {
		return nil, fmt.Errorf("observability: resource: %w", err)
	}
	t := &Telemetry{registry: prometheus.NewRegistry()}
	exp, err := otelprom.New(
		otelprom.WithRegisterer(t.registry),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		otelprom.WithResourceAsConstantLabels(attribute.NewAllowKeysFilter(AttrRegion, AttrComponent)),
		otelprom.WithoutScopeInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("observability: prometheus exporter: %w", err)
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(exp)}
	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	for _, e := range cfg.SpanExporters {
		topts = append(topts, sdktrace.WithSyncer(e))
	}
	if otlpWanted(cfg.Getenv, "METRICS") {
		me, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(otlpURL(cfg.Getenv, "METRICS", "/v1/metrics")))
		if err != nil {
			return nil, fmt.Errorf("observability: OTLP metrics: %w", err)
		}
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me)))
		cfg.Logger.Info("exporting metrics over OTLP")
	}
	if otlpWanted(cfg.Getenv, "TRACES") {
		te, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(otlpURL(cfg.Getenv, "TRACES", "/v1/traces")))
		if err != nil {
			return nil, fmt.Errorf("observability: OTLP traces: %w", err)
		}
		topts = append(topts, sdktrace.WithBatcher(te))
		cfg.Logger.Info("exporting traces over OTLP")
	}
	mp := sdkmetric.NewMeterProvider(mopts...)
	t.meter = mp
	t.shutdown = append(t.shutdown, mp.Shutdown)
	if len(cfg.SpanExporters) > 0 || otlpWanted(cfg.Getenv, "TRACES") {
		tp := sdktrace.NewTracerProvider(topts...)
		t.tracer = tp
		t.shutdown = append(t.shutdown, tp.Shutdown)
	} else {
		// No exporter: no spans are recorded at all.
		t.tracer = nooptrace.NewTracerProvider()
	}
	return t, nil
}

// otlpWanted reports whether an OTLP endpoint is configured for signal
// (TRACES or METRICS), by the standard variables.
func otlpWanted(getenv func(string) string, signal string) bool {
	if getenv("OTEL_SDK_DISABLED") == "true" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != ""
}

// otlpURL is the OTLP/HTTP URL of signal by the standard variables: the
// signal's own endpoint as given, else the base endpoint plus the
// signal's path. The exporters read the other OTEL_EXPORTER_OTLP_*
// variables (headers, timeout, compression) themselves.
func otlpURL(getenv func(string) string, signal, path string) string {
	if u := getenv("OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT"); u != "" {
		return u
	}
	return strings.TrimSuffix(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "/") + path
}

// Disabled returns a Telemetry with no-op providers.
func Disabled() *Telemetry {
	t, _ := New(context.Background(), Config{Disabled: true})
	return t
}

// MeterProvider is the provider components create their meters from.
func (t *Telemetry) MeterProvider() metric.MeterProvider { return t.meter }

// TracerProvider is the provider components create their tracers from.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tracer }

// Propagator carries trace context in message properties and NATS
// headers (W3C trace context).
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// Handler serves the metrics in Prometheus text format.
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Timeout: 10 * time.Second})
}

// Shutdown flushes and stops the exporters.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}
