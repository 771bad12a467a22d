package region_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/isobar-mq/isobar/observability"
	"github.com/isobar-mq/isobar/region"
)

// TestTraceAcrossRegions: a message published in r0 with a trace context
// (as an instrumented client sends it) is traced through the publish and
// ledger add in r0, the replication hop, and the delivery in r1, all in
// one trace.
func TestTraceAcrossRegions(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	spans := tracetest.NewInMemoryExporter()
	f := startFederationWith(t, 2, nil, region.Deps{SpanExporters: []sdkSpanExporter{spans}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topicName = "persistent://acme/geo/traced"
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	parent := fmt.Sprintf("00-%s-00f067aa0ba902b7-01", traceID)

	c1 := pulsarClient(t, f.Regions[1].Endpoints().ServiceURL)
	cons, err := c1.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	c0 := pulsarClient(t, f.Regions[0].Endpoints().ServiceURL)
	p, err := c0.CreateProducer(pulsar.ProducerOptions{Topic: topicName, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("traced"), Properties: map[string]string{"traceparent": parent}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("untraced")}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cons.Ack(m)
	}
	want := []string{
		"publish " + topicName + "@r0", "ledger add@r0",
		"replicate " + topicName + " to r1@r0",
		"replicate apply " + topicName + " from r0@r1",
		"publish " + topicName + "@r1", "ledger add@r1",
		"deliver " + topicName + "@r1",
	}
	var got []string
	waitFor(t, 20*time.Second, "every span of the trace", func() bool {
		got = got[:0]
		for _, s := range spans.GetSpans() {
			if s.SpanContext.TraceID() != traceID {
				continue
			}
			region := ""
			for _, kv := range s.Resource.Attributes() {
				if string(kv.Key) == observability.AttrRegion {
					region = kv.Value.AsString()
				}
			}
			got = append(got, s.Name+"@"+region)
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false
			}
		}
		return true
	})
	for _, s := range spans.GetSpans() {
		if s.SpanContext.TraceID() != traceID {
			t.Errorf("span %q in another trace: an untraced message started spans", s.Name)
		}
	}
	t.Logf("spans of the trace: %v", got)
}

type sdkSpanExporter = sdktrace.SpanExporter
