package broker_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/broker/mledger/ledgers"
	"github.com/isobar-mq/isobar/topic"
)

// A topic whose managed ledger another owner opened (fencing it, as a
// broker taking the bundle over does) is unloaded at the first add that
// fails for it, not left loaded failing every add: its producer
// reconnects, the topic is loaded afresh, and every message sent is
// stored.
func TestFencedTopicIsUnloaded(t *testing.T) {
	e := startEnv(t, nil)
	const tp = "persistent://public/default/fenced"
	ctx := ctxT(t)
	p, err := e.client().CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	send := func(i int) {
		t.Helper()
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m%d", i))}); err != nil {
			t.Fatalf("send m%d: %v", i, err)
		}
	}
	send(0)
	name, _ := topic.Parse(tp)
	// Another owner opens the topic's managed ledger: it recovers and
	// fences the broker's ledger.
	other, err := mledger.Open(ctx, mledger.Deps{Meta: e.cl.Connect(), Ledgers: ledgers.OnBookies(e.lc), Region: e.cl.Region, Logger: e.cl.Logger()},
		mledger.Config{}, broker.MLName(name))
	if err != nil {
		t.Fatal(err)
	}
	other.Close(context.Background())
	for i := 1; i <= 5; i++ {
		send(i) // the first of these fails in the broker, which unloads the topic; the client resends
	}
	testWaitFor(t, "the topic loaded again", func() bool { return slices.Contains(e.b.Topics(), tp) })
	c, err := e.client().Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for i := 0; i <= 5; i++ {
		m, err := c.Receive(rctx)
		if err != nil {
			t.Fatalf("receive m%d: %v", i, err)
		}
		if string(m.Payload()) != fmt.Sprintf("m%d", i) {
			t.Fatalf("got %s, want m%d", m.Payload(), i)
		}
		c.Ack(m)
	}
}
