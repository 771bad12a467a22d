package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/topic"
)

// setTopicPolicies changes a topic's own policies of scope sc in the
// store.
func setTopicPolicies(t *testing.T, e *env, tp string, sc policy.TopicScope, fn func(*policy.TopicPolicies)) {
	t.Helper()
	name, err := topic.Parse(tp)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.pol.UpdateTopicPolicies(context.Background(), name, sc, func(p *policy.TopicPolicies) error {
		fn(p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func wantRefusedErr(t *testing.T, err error, reason string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), reason) {
		t.Fatalf("got %v, want a refusal naming %q", err, reason)
	}
}

// A topic's own policies replace its namespace's (message TTL,
// retention) or set its limits (producers, consumers, consumers per
// subscription, subscriptions, message size); its local policies take
// precedence over its global ones. They apply when the topic loads and
// at each maintenance round.
func TestTopicPolicies(t *testing.T) {
	e, clk := policyEnv(t, "public/tp", &policy.Policies{MessageTTLInSeconds: intp(600)})
	c := e.client()
	ctx := context.Background()

	t.Run("maxProducers", func(t *testing.T) {
		const tp = "persistent://public/tp/producers"
		setTopicPolicies(t, e, tp, policy.GlobalScope, func(p *policy.TopicPolicies) { p.MaxProducers = intp(5) })
		setTopicPolicies(t, e, tp, policy.LocalScope, func(p *policy.TopicPolicies) { p.MaxProducers = intp(1) })
		p1, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp})
		if err != nil {
			t.Fatal(err)
		}
		defer p1.Close()
		_, err = c.CreateProducer(pulsar.ProducerOptions{Topic: tp})
		wantRefusedErr(t, err, "limit of 1 producers")
		// Another region's replicator is neither counted nor limited.
		repl, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, Name: replication.Prefix + "elsewhere"})
		if err != nil {
			t.Fatalf("replicator producer: %v", err)
		}
		defer repl.Close()
		// Without the local limit the global one is in force, at once
		// when the admin API says the policies changed.
		setTopicPolicies(t, e, tp, policy.LocalScope, func(p *policy.TopicPolicies) { p.MaxProducers = nil })
		name, _ := topic.Parse(tp)
		if err := e.b.AdminAPI().PolicyRefresher.RefreshTopicPolicies(ctx, name); err != nil {
			t.Fatal(err)
		}
		p2, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp})
		if err != nil {
			t.Fatal(err)
		}
		p2.Close()
	})

	t.Run("maxConsumers", func(t *testing.T) {
		const tp = "persistent://public/tp/consumers"
		setTopicPolicies(t, e, tp, policy.LocalScope, func(p *policy.TopicPolicies) { p.MaxConsumers = intp(2) })
		for _, sub := range []string{"a", "b"} {
			cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: sub})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
		}
		_, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "c"})
		wantRefusedErr(t, err, "limit of 2 consumers")
	})

	t.Run("maxConsumersPerSubscription", func(t *testing.T) {
		const tp = "persistent://public/tp/persub"
		setTopicPolicies(t, e, tp, policy.GlobalScope, func(p *policy.TopicPolicies) { p.MaxConsumersPerSubscription = intp(1) })
		opts := pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s", Type: pulsar.Shared}
		cons, err := c.Subscribe(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		_, err = c.Subscribe(opts)
		wantRefusedErr(t, err, "limit of 1 consumers")
		other, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "other", Type: pulsar.Shared})
		if err != nil {
			t.Fatal(err)
		}
		other.Close()
	})

	t.Run("maxSubscriptionsPerTopic", func(t *testing.T) {
		const tp = "persistent://public/tp/subs"
		setTopicPolicies(t, e, tp, policy.LocalScope, func(p *policy.TopicPolicies) { p.MaxSubscriptionsPerTopic = intp(1) })
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "a"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "b"})
		wantRefusedErr(t, err, "limit of 1 subscriptions")
		cons.Close()
		// The existing subscription takes consumers again.
		cons, err = c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "a"})
		if err != nil {
			t.Fatal(err)
		}
		cons.Close()
	})

	t.Run("maxMessageSize", func(t *testing.T) {
		const tp = "persistent://public/tp/size"
		setTopicPolicies(t, e, tp, policy.LocalScope, func(p *policy.TopicPolicies) { p.MaxMessageSize = intp(1024) })
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		// The broker answers NotAllowedError, as Pulsar; the Go client
		// then drops the producer, so the send fails by its timeout.
		big, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true, SendTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer big.Close()
		_, err = big.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 2000)})
		wantRefusedErr(t, err, "")
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 1000)}); err != nil {
			t.Fatalf("a message within the topic's limit: %v", err)
		}
		if ms := receiveN(t, cons, 1, true); len(ms[0].Payload()) != 1000 {
			t.Fatalf("first message stored: %d bytes, want the 1000 of the one within the limit", len(ms[0].Payload()))
		}
	})

	t.Run("maxUnackedMessagesOnConsumer", func(t *testing.T) {
		const tp = "persistent://public/tp/unacked"
		setTopicPolicies(t, e, tp, policy.LocalScope, func(p *policy.TopicPolicies) { p.MaxUnackedMessagesOnConsumer = intp(2) })
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s", Type: pulsar.Shared})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		produce(t, p, "u", 5, nil)
		held := receiveN(t, cons, 2, false)
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		m, err := cons.Receive(rctx)
		cancel()
		if err == nil {
			t.Fatalf("a third message %q while two are unacknowledged", m.Payload())
		}
		must(t, cons.Ack(held[0]))
		receiveN(t, cons, 1, true)
	})

	t.Run("messageTTL", func(t *testing.T) {
		// The namespace expires after 10 minutes, the topic after an hour.
		const tp = "persistent://public/tp/ttl"
		setTopicPolicies(t, e, tp, policy.GlobalScope, func(p *policy.TopicPolicies) { p.MessageTTLInSeconds = intp(3600) })
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		cons.Close()
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		produce(t, p, "old", 12, nil)
		clk.advance(30 * time.Minute)
		e.b.MaintainOnce(ctx)
		if got := backlog(t, e, tp, "s"); got != 12 {
			t.Fatalf("backlog after the namespace's TTL, before the topic's: %d, want 12", got)
		}
		clk.advance(time.Hour)
		e.b.MaintainOnce(ctx)
		if got := backlog(t, e, tp, "s"); got != 0 {
			t.Fatalf("backlog after the topic's TTL: %d, want 0", got)
		}
	})

	t.Run("retention", func(t *testing.T) {
		// The namespace keeps nothing consumed, the topic an hour.
		const tp = "persistent://public/tp/keep"
		setTopicPolicies(t, e, tp, policy.LocalScope, func(p *policy.TopicPolicies) {
			p.RetentionPolicies = &policy.RetentionPolicies{RetentionTimeInMinutes: 60, RetentionSizeInMB: -1}
		})
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		produce(t, p, "r", 12, nil) // ledgers of 5 entries: 5, 5, 2 (open)
		receiveN(t, cons, 12, true)
		testWaitBacklog(t, e, tp, "s", 0)
		e.b.MaintainOnce(ctx)
		read := func() int {
			r, err := c.CreateReader(pulsar.ReaderOptions{Topic: tp, StartMessageID: pulsar.EarliestMessageID()})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			return len(readAll(t, r))
		}
		if n := read(); n != 12 {
			t.Fatalf("the topic's retention kept %d consumed messages, want 12", n)
		}
		clk.advance(2 * time.Hour)
		e.b.MaintainOnce(ctx)
		if n := read(); n != 2 {
			t.Fatalf("after the topic's retention: %d messages readable, want the 2 of the open ledger", n)
		}
	})
}
