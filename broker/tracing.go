package broker

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Tracing (docs/observability.md): a message carries its trace context in
// its properties (W3C traceparent/tracestate, as OpenTelemetry-instrumented
// Pulsar clients set them). The broker continues that trace with a span
// for the publish (and the ledger add within it) and one for each
// delivery; the replicator adds the replication hop. The properties
// travel with the entry into other regions, so one trace shows the
// publish in one region and the delivery in another. Messages without a
// trace context start no spans. Only the entry's own metadata is read:
// in a batch, the producer must put the context on the batch (messages
// batched by the Go client keep their properties inside the batch, which
// may be compressed, and are not traced).

func (b *Broker) tracer() trace.Tracer {
	return b.deps.TracerProvider.Tracer("github.com/isobar-mq/isobar/broker")
}

// tracePublish starts the publish span of a traced message and its
// ledger-add child; end ends both. It returns a no-op end for untraced
// messages.
func (b *Broker) tracePublish(t *Topic, meta *pb.MessageMetadata, replicatedFrom string) (end func(err error)) {
	if !b.tracing {
		return func(error) {}
	}
	ctx, ok := replication.MessageContext(context.Background(), meta)
	if !ok {
		return func(error) {}
	}
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "pulsar"),
		attribute.String("messaging.destination.name", t.name.String()),
		attribute.String("isobar.cluster", b.cfg.Cluster),
	}
	if replicatedFrom != "" {
		attrs = append(attrs, attribute.String("isobar.replicated_from", replicatedFrom))
	}
	ctx, pub := b.tracer().Start(ctx, "publish "+t.name.String(), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	_, add := b.tracer().Start(ctx, "ledger add", trace.WithAttributes(attribute.String("isobar.cluster", b.cfg.Cluster)))
	return func(err error) {
		if err != nil {
			add.RecordError(err)
			pub.RecordError(err)
		}
		add.End()
		pub.End()
	}
}

// traceDeliver records the dispatch of a traced entry to a consumer.
func (s *subscription) traceDeliver(meta *pb.MessageMetadata, k *consumer) {
	b := s.t.b
	if !b.tracing {
		return
	}
	ctx, ok := replication.MessageContext(context.Background(), meta)
	if !ok {
		return
	}
	_, sp := b.tracer().Start(ctx, "deliver "+s.t.name.String(), trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		attribute.String("messaging.system", "pulsar"),
		attribute.String("messaging.destination.name", s.t.name.String()),
		attribute.String("messaging.destination.subscription.name", s.name),
		attribute.String("messaging.consumer.name", k.name),
		attribute.String("isobar.cluster", b.cfg.Cluster),
	))
	sp.End()
}
