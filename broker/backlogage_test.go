package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// The message_age backlog quota: a subscription whose oldest
// unacknowledged message is older than limitTime blocks producers
// (producer_exception) until it catches up.
func TestBacklogQuotaByAgeProducerException(t *testing.T) {
	e, clk := policyEnv(t, "public/agequota", &policy.Policies{BacklogQuotaMap: map[string]policy.BacklogQuota{
		policy.MessageAge: {LimitTime: 3600, Policy: policy.ProducerException}}})
	const tp = "persistent://public/agequota/t"
	c := e.client()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	produce(t, p, "old", 8, nil)
	p.Close()
	clk.advance(30 * time.Minute)
	e.b.MaintainOnce(context.Background())
	p, err = c.CreateProducer(pulsar.ProducerOptions{Topic: tp})
	if err != nil {
		t.Fatalf("producer while the backlog is younger than the limit: %v", err)
	}
	p.Close()
	clk.advance(time.Hour)
	e.b.MaintainOnce(context.Background())
	_, err = c.CreateProducer(pulsar.ProducerOptions{Topic: tp})
	if err == nil || !strings.Contains(err.Error(), "ProducerBlockedQuotaExceeded") {
		t.Fatalf("producer with a backlog older than the limit: %v", err)
	}
	if got := backlog(t, e, tp, "slow"); got != 8 {
		t.Fatalf("producer_exception changed the backlog: %d, want 8", got)
	}
	receiveN(t, cons, 8, true)
	testWaitBacklog(t, e, tp, "slow", 0)
	e.b.MaintainOnce(context.Background())
	p, err = c.CreateProducer(pulsar.ProducerOptions{Topic: tp})
	if err != nil {
		t.Fatalf("producer after the backlog drained: %v", err)
	}
	p.Close()
}

// consumer_backlog_eviction with message_age acknowledges exactly the
// messages older than the limit.
func TestBacklogQuotaByAgeEviction(t *testing.T) {
	e, clk := policyEnv(t, "public/ageevict", &policy.Policies{BacklogQuotaMap: map[string]policy.BacklogQuota{
		policy.MessageAge: {LimitTime: 3600, Policy: policy.ConsumerBacklogEviction}}})
	const tp = "persistent://public/ageevict/t"
	c := e.client()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	produce(t, p, "old", 7, nil)
	// Publish times come from the client's real clock: the broker's clock
	// two hours on makes every message so far older than the limit.
	clk.advance(2 * time.Hour)
	e.b.MaintainOnce(context.Background())
	if got := backlog(t, e, tp, "slow"); got != 0 {
		t.Fatalf("backlog after every message passed the age limit: %d, want 0", got)
	}
	// Back to real time: messages published now are young and stay.
	clk.advance(-2 * time.Hour)
	produce(t, p, "new", 4, nil)
	e.b.MaintainOnce(context.Background())
	if got := backlog(t, e, tp, "slow"); got != 4 {
		t.Fatalf("backlog of young messages after the check: %d, want 4", got)
	}
	cons, err = c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if got := payloads(receiveN(t, cons, 4, true)); strings.Join(got, ",") != "new-0,new-1,new-2,new-3" {
		t.Fatalf("after eviction: %v", got)
	}
}
