package broker_test

import (
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
