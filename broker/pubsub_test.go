package broker_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
)

func TestProduceConsumeExclusive(t *testing.T) {
	e := startEnv(t, nil)
	c := e.client()
	ctx := ctxT(t)
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "persistent://public/default/basic", SubscriptionName: "s", Type: pulsar.Exclusive})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/basic"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 200
	for i := range n {
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("m-%d", i); string(m.Payload()) != want {
			t.Fatalf("message %d: got %q want %q", i, m.Payload(), want)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMixedSizeEntriesDelivered: entries on both sides of the size from
// which a connection writes an entry from its own buffer (sendEntryMin),
// sent back to back so their frames share the writer's batches, reach a
// live consumer and one that reads them afterwards byte for byte and in
// order.
func TestMixedSizeEntriesDelivered(t *testing.T) {
	e := startEnv(t, nil)
	c := e.client()
	ctx := ctxT(t)
	const topic = "persistent://public/default/mixed-sizes"
	const from = 16 << 10
	sizes := []int{16, from - 200, from, from + 1, 100 << 10, 3, 400 << 10, 50}
	payload := func(i int) []byte {
		b := make([]byte, sizes[i%len(sizes)])
		for j := range b {
			b[j] = byte(i*31 + j)
		}
		return b
	}
	live, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "live"})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 80
	for i := range n {
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload(i)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	late, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "late", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	for _, cons := range []pulsar.Consumer{live, late} {
		for i := range n {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m.Payload(), payload(i)) {
				t.Fatalf("%s: message %d: %d bytes, want %d (or different content)", cons.Subscription(), i, len(m.Payload()), sizes[i%len(sizes)])
			}
		}
	}
}
