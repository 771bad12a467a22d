package replicator

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/replicator/frame"
	"github.com/isobar-mq/isobar/wire"
)

// Metric names (docs/observability.md). Every series carries
// isobar.source and isobar.dest, the regions of the stream.
const (
	MetricFrames    = "isobar.replication.frames"
	MetricEntries   = "isobar.replication.entries"
	MetricWireBytes = "isobar.replication.wire.size"
	MetricErrors    = "isobar.replication.errors"
	MetricRoundTrip = "isobar.replication.frame.duration"
	MetricLag       = "isobar.replication.lag"
	MetricStreams   = "isobar.replication.streams"
	// The dictionaries of the namespaces a worker sends (series carry
	// isobar.source and isobar.namespace).
	MetricDictVersion   = "isobar.replication.dictionary.version"
	MetricDictGain      = "isobar.replication.dictionary.gain"
	MetricDictRatio     = "isobar.replication.dictionary.ratio"
	MetricDictTrainings = "isobar.replication.dictionary.trainings"
)

type metrics struct {
	frames    metric.Int64Counter
	entries   metric.Int64Counter
	wire      metric.Int64Counter
	errors    metric.Int64Counter
	roundTrip metric.Float64Histogram
	lag       metric.Float64Histogram
	trainings metric.Int64Counter
	reg       metric.Registration
}

func (w *Worker) initMetrics() error {
	m := w.deps.MeterProvider.Meter("github.com/isobar-mq/isobar/replicator")
	mt := &metrics{}
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	mt.frames, err = m.Int64Counter(MetricFrames, metric.WithUnit("{frame}"), metric.WithDescription("Frames sent and confirmed (isobar.result ok) or failed (error), by source and destination region."))
	add(err)
	mt.entries, err = m.Int64Counter(MetricEntries, metric.WithUnit("{entry}"), metric.WithDescription("Entries replicated and confirmed by the destination."))
	add(err)
	mt.wire, err = m.Int64Counter(MetricWireBytes, metric.WithUnit("By"), metric.WithDescription("Bytes of confirmed frames: isobar.encoding raw (entries as stored) and zstd (frame on the wire)."))
	add(err)
	mt.errors, err = m.Int64Counter(MetricErrors, metric.WithUnit("{error}"), metric.WithDescription("Failed stream sessions (send, receive or subscribe errors) and refused frames at the sink (isobar.side)."))
	add(err)
	mt.roundTrip, err = m.Float64Histogram(MetricRoundTrip, metric.WithUnit("s"), metric.WithDescription("A frame's round trip: sent until the destination confirmed it stored."),
		metric.WithExplicitBucketBoundaries(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5))
	add(err)
	mt.lag, err = m.Float64Histogram(MetricLag, metric.WithUnit("s"), metric.WithDescription("Replication lag at the destination: stored minus publish time of each replicated entry."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 300))
	add(err)
	mt.trainings, err = m.Int64Counter(MetricDictTrainings, metric.WithUnit("{training}"), metric.WithDescription("Dictionary trainings of a namespace (isobar.namespace) by isobar.result: ok (a new version in use) or failed (frames stay as they were)."))
	add(err)
	dictVersion, err := m.Int64ObservableGauge(MetricDictVersion, metric.WithUnit("{version}"), metric.WithDescription("Version of the zstd dictionary a namespace's frames are compressed with (isobar.namespace); 0 before the first is trained."))
	add(err)
	dictGain, err := m.Float64ObservableGauge(MetricDictGain, metric.WithUnit("1"), metric.WithDescription("Size of a namespace's frames with its dictionary over their size without it, on the last 10 compared frames (below 1: the dictionary helps); 0 before measured."))
	add(err)
	dictRatio, err := m.Float64ObservableGauge(MetricDictRatio, metric.WithUnit("1"), metric.WithDescription("Wire bytes over raw bytes of a namespace's last 10 frames compressed with its dictionary; 0 before measured."))
	add(err)
	streams, err := m.Int64ObservableGauge(MetricStreams, metric.WithUnit("{stream}"), metric.WithDescription("Source streams of this worker by isobar.state: active (consuming), failing (last session failed) or stalled (no confirmed frame for 30s while failing)."))
	add(err)
	if len(errs) > 0 {
		return errs[0]
	}
	mt.reg, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		type key struct{ dest, state string }
		counts := map[key]int64{}
		now := time.Now()
		for _, st := range w.Stats() {
			state := "idle"
			switch {
			case st.Active:
				state = "active"
			case st.LastError != "" && !st.LastProgress.IsZero() && now.Sub(st.LastProgress) > 30*time.Second:
				state = "stalled"
			case st.LastError != "":
				state = "failing"
			}
			counts[key{st.Remote, state}]++
		}
		for k, v := range counts {
			o.ObserveInt64(streams, v, metric.WithAttributes(attribute.String("isobar.source", w.cfg.Region), attribute.String("isobar.dest", k.dest), attribute.String("isobar.state", k.state)))
		}
		for _, d := range w.dictStatuses() {
			attrs := metric.WithAttributes(attribute.String("isobar.source", w.cfg.Region), attribute.String("isobar.namespace", d.namespace))
			o.ObserveInt64(dictVersion, int64(d.version), attrs)
			o.ObserveFloat64(dictGain, d.gain, attrs)
			o.ObserveFloat64(dictRatio, d.ratio, attrs)
		}
		return nil
	}, streams, dictVersion, dictGain, dictRatio)
	if err != nil {
		return err
	}
	w.metrics = mt
	return nil
}

func (w *Worker) pairAttrs(source, dest string, extra ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append([]attribute.KeyValue{attribute.String("isobar.source", source), attribute.String("isobar.dest", dest)}, extra...)...)
}

// traceEntries starts a span for each entry that carries a trace context
// in its properties (none when tracing is off).
func (w *Worker) traceEntries(entries []frame.Entry, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) []trace.Span {
	if !w.tracing {
		return nil
	}
	var out []trace.Span
	tr := w.deps.TracerProvider.Tracer("github.com/isobar-mq/isobar/replicator")
	for _, e := range entries {
		meta, _, err := wire.DecodeEntry(e.Data)
		if err != nil {
			continue
		}
		ctx, ok := replication.MessageContext(context.Background(), meta)
		if !ok {
			continue
		}
		_, sp := tr.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(append(attrs, attribute.String("isobar.source_position", e.Pos.String()))...))
		out = append(out, sp)
	}
	return out
}

func endSpans(spans []trace.Span, err error) {
	for _, sp := range spans {
		if err != nil {
			sp.RecordError(err)
		}
		sp.End()
	}
}
