package drill

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	nooptrace "go.opentelemetry.io/otel/trace/noop"
)

const scope = "github.com/isobar-mq/isobar/drill"

// telemetry is the drill's spans (one per phase under the drill's own)
// and its result gauges (docs/drills.md, "Telemetry").
type telemetry struct {
	tracer trace.Tracer
	meter  metric.Meter
}

func newTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) *telemetry {
	if mp == nil {
		mp = noopmetric.NewMeterProvider()
	}
	if tp == nil {
		tp = nooptrace.NewTracerProvider()
	}
	return &telemetry{tracer: tp.Tracer(scope), meter: mp.Meter(scope)}
}

// phase starts the span of one phase; end it with its error (nil: ok).
func (t *telemetry) phase(ctx context.Context, name string) (context.Context, func(error)) {
	ctx, span := t.tracer.Start(ctx, "drill."+name)
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// labels are the attributes of every gauge: which drill it was.
func labels(r *Report) attribute.Set {
	return attribute.NewSet(
		attribute.String("pulsar.namespace", r.Namespace),
		attribute.String("isobar.fault", string(r.Fault)),
		attribute.String("isobar.source", r.From),
		attribute.String("isobar.dest", r.To),
		attribute.String("isobar.promotion", r.Promotion),
	)
}

// record sets the result gauges from r and annotates span with the
// timeline.
func (t *telemetry) record(ctx context.Context, span trace.Span, r *Report) {
	recordGauges(ctx, t.meter, r)
	span.SetAttributes(
		attribute.Bool("isobar.drill.passed", r.Passed),
		attribute.Int64("isobar.drill.rto_publish_ms", r.RTOPublishMS.Max),
		attribute.Int("isobar.drill.lost", r.Lost),
	)
	for _, pt := range []namedPoint{
		{"fault", r.Timeline.Fault}, {"detected", r.Timeline.Detected}, {"fenced", r.Timeline.Fenced},
		{"promoted", r.Timeline.Promoted}, {"first_publish_ok", r.Timeline.FirstPublishOK},
		{"first_delivery_ok", r.Timeline.FirstDeliveryOK}, {"healed", r.Timeline.Healed},
	} {
		if pt.p != nil {
			span.AddEvent(pt.name, trace.WithTimestamp(pt.p.At), trace.WithAttributes(attribute.Int64("offset_ms", pt.p.OffsetMS)))
		}
	}
	if !r.Passed {
		span.SetStatus(codes.Error, "drill failed")
	}
}

// RecordResult sets the drill's result gauges on mp from r, as Run does
// at the end of a drill (docs/drills.md, "Telemetry").
func RecordResult(ctx context.Context, mp metric.MeterProvider, r *Report) {
	recordGauges(ctx, mp.Meter(scope), r)
}

func recordGauges(ctx context.Context, meter metric.Meter, r *Report) {
	ls := labels(r)
	set := metric.WithAttributeSet(ls)
	gauge := func(name, unit, desc string, v int64) {
		g, err := meter.Int64Gauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err == nil {
			g.Record(ctx, v, set)
		}
	}
	passed := int64(0)
	if r.Passed {
		passed = 1
	}
	gauge("isobar.drill.passed", "", "1 if the last drill of this namespace, fault and regions passed, else 0", passed)
	gauge("isobar.drill.timestamp", "s", "When the last drill started (Unix time)", r.Started.Unix())
	gauge("isobar.drill.rto_publish", "ms", "Longest gap between acknowledged publishes of a producer in the last drill (max over producers)", r.RTOPublishMS.Max)
	gauge("isobar.drill.rto_consume", "ms", "Longest gap between deliveries to a consumer in the last drill (max over consumers)", r.RTOConsumeMS.Max)
	if r.RPOMessages != nil && r.RPOMS != nil {
		gauge("isobar.drill.rpo_messages", "{message}", "Messages the old primary acknowledged that the new one lacked at the cut", int64(*r.RPOMessages))
		gauge("isobar.drill.rpo", "ms", "From the oldest message of the RPO to the fault", *r.RPOMS)
	}
	gauge("isobar.drill.lost", "{message}", "Acknowledged messages never delivered in the last drill", int64(r.Lost))
	gauge("isobar.drill.late", "{message}", "Messages of the old primary's tail stored late in the new primary in the last drill", int64(r.Late))
	gauge("isobar.drill.order_violations", "{message}", "First deliveries out of their producer's order in the last drill", int64(r.OrderViolations))
	dup, err := meter.Int64Gauge("isobar.drill.duplicated", metric.WithUnit("{message}"), metric.WithDescription("Duplicates in the last drill, by kind: redelivery or copy"))
	if err == nil {
		for kind, v := range map[string]int{"redelivery": r.DuplicatedRedelivery, "copy": r.DuplicatedCopy} {
			attrs := append(ls.ToSlice(), attribute.String("isobar.kind", kind))
			dup.Record(ctx, int64(v), metric.WithAttributes(attrs...))
		}
	}
}
