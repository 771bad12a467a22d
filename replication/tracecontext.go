package replication

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	nooptrace "go.opentelemetry.io/otel/trace/noop"

	"github.com/isobar-mq/isobar/wire/pb"
)

// A message carries its trace context in its properties (W3C traceparent
// and tracestate, as OpenTelemetry-instrumented Pulsar clients set them).
// Brokers and replicator workers continue that trace, in every region.

// Propagator is the text-map propagator of message trace contexts.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// PropertiesCarrier reads and writes a message's properties as a
// propagation carrier.
type PropertiesCarrier struct{ Props *[]*pb.KeyValue }

// Get implements propagation.TextMapCarrier.
func (c PropertiesCarrier) Get(key string) string {
	for _, kv := range *c.Props {
		if kv.GetKey() == key {
			return kv.GetValue()
		}
	}
	return ""
}

// Set implements propagation.TextMapCarrier.
func (c PropertiesCarrier) Set(key, value string) {
	for _, kv := range *c.Props {
		if kv.GetKey() == key {
			kv.Value = &value
			return
		}
	}
	*c.Props = append(*c.Props, &pb.KeyValue{Key: &key, Value: &value})
}

// Keys implements propagation.TextMapCarrier.
func (c PropertiesCarrier) Keys() []string {
	out := make([]string, 0, len(*c.Props))
	for _, kv := range *c.Props {
		out = append(out, kv.GetKey())
	}
	return out
}

// MessageContext returns ctx with the remote span context carried in
// meta's properties; ok is false when there is none.
func MessageContext(ctx context.Context, meta *pb.MessageMetadata) (context.Context, bool) {
	if meta == nil || len(meta.Properties) == 0 {
		return ctx, false
	}
	props := meta.Properties
	ctx = Propagator.Extract(ctx, PropertiesCarrier{Props: &props})
	return ctx, trace.SpanContextFromContext(ctx).IsValid()
}

// TracingEnabled reports whether tp records anything.
func TracingEnabled(tp trace.TracerProvider) bool {
	_, noop := tp.(nooptrace.TracerProvider)
	return tp != nil && !noop
}
