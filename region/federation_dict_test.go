package region_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/internal/payloadgen"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/replicator"
)

// TestReplicationWithDictionaries: with a small sample count, r0's
// worker trains acme/geo's dictionary from the first entries and sends
// the next frames with it through real NATS and brokers; after r1's
// worker restarts (its sink holds no dictionary) the stream's next frame
// is refused as naming an unknown dictionary and sent again carrying
// it, in the same session. r1 gets every payload once, in order, with
// its exact bytes.
func TestReplicationWithDictionaries(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	f := startFederation(t, 2, func(i int, c *region.Config) { c.Replicator.DictSamples = 16 })
	r0, r1 := f.Regions[0], f.Regions[1]
	const topicName = "persistent://acme/geo/dictionaries"
	c0, c1 := pulsarClient(t, r0.Endpoints().ServiceURL), pulsarClient(t, r1.Endpoints().ServiceURL)
	cons, err := c1.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "check", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	// One message per entry: the frames are the payload set's messages.
	prod, err := c0.CreateProducer(pulsar.ProducerOptions{Topic: topicName, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gen := payloadgen.New(payloadgen.Orders, 9)
	var got []string
	phase := func(n int) []string {
		t.Helper()
		var sent []string
		for _, m := range gen.Messages(n) {
			if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: m}); err != nil {
				t.Fatal(err)
			}
			sent = append(sent, string(m))
		}
		for range n {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatalf("after %d messages: %v", len(got), err)
			}
			got = append(got, string(m.Payload()))
			cons.Ack(m)
		}
		return sent
	}
	stream := func() replicator.StreamStats {
		for _, w := range r0.Replicators() {
			if w == nil {
				continue
			}
			for _, s := range w.Stats() {
				if s.Topic == topicName && s.Remote == "r1" {
					return s
				}
			}
		}
		return replicator.StreamStats{}
	}

	want := phase(100)
	waitFor(t, 30*time.Second, "a dictionary in use", func() bool {
		want = append(want, phase(20)...)
		return stream().DictVersion > 0
	})
	if !slices.Equal(got, want) {
		t.Fatalf("r1 got %d messages, not the %d sent in order", len(got), len(want))
	}

	// Every frame answered before the kill, so that no store is cut
	// short (that frame would fail and be sent again: a failure, but
	// not the one this test is about).
	waitFor(t, 30*time.Second, "r0's frames all confirmed", func() bool { return stream().Entries == int64(len(want)) })
	r1.KillReplicator(0)
	if err := r1.RestartReplicator(ctx, 0); err != nil {
		t.Fatal(err)
	}
	want = append(want, phase(100)...)
	if !slices.Equal(got, want) {
		t.Fatalf("after r1's worker restarted: r1 got %d messages, not the %d sent in order", len(got), len(want))
	}
	if st := stream(); st.DictVersion == 0 || st.Errors != 0 {
		t.Fatalf("r0 stream %+v: want dictionary frames and no failed session", st)
	}
}
