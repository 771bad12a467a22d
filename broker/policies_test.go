package broker_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

// clock is real time plus an offset tests move forward.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }
func intp(v int) *int                    { return &v }

func policyEnv(t *testing.T, ns string, pol *policy.Policies) (*env, *clock) {
	clk := &clock{}
	e := startEnv(t, func(c *setup) {
		c.Now = clk.now
		c.MaintenanceInterval = time.Hour // driven by MaintainOnce
		c.Ledger.MaxEntriesPerLedger = 5
	})
	if err := e.pol.CreateNamespace(context.Background(), ns, pol); err != nil {
		t.Fatal(err)
	}
	return e, clk
}

func backlog(t *testing.T, e *env, tp, sub string) int64 {
	t.Helper()
	name, _ := topic.Parse(tp)
	st, err := e.b.AdminAPI().Topics.Stats(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Subscriptions[sub].MsgBacklog
}

func TestMessageTTL(t *testing.T) {
	e, clk := policyEnv(t, "public/ttl", &policy.Policies{MessageTTLInSeconds: intp(3600)})
	const tp = "persistent://public/ttl/t"
	c := e.client()
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
	e.b.MaintainOnce(context.Background())
	if got := backlog(t, e, tp, "s"); got != 12 {
		t.Fatalf("backlog before the TTL passed: %d", got)
	}
	clk.advance(time.Hour)
	e.b.MaintainOnce(context.Background())
	if got := backlog(t, e, tp, "s"); got != 0 {
		t.Fatalf("backlog after the TTL: %d, want 0", got)
	}
	// What is published now reaches the subscription.
	cons, err = c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	produce(t, p, "new", 3, nil)
	if got := payloads(receiveN(t, cons, 3, true)); strings.Join(got, ",") != "new-0,new-1,new-2" {
		t.Fatalf("after expiry: %v", got)
	}
}

func TestBacklogQuotaProducerException(t *testing.T) {
	e, _ := policyEnv(t, "public/quota", &policy.Policies{BacklogQuotaMap: map[string]policy.BacklogQuota{
		policy.DestinationStorage: {LimitSize: 1000, Policy: policy.ProducerException}}})
	const tp = "persistent://public/quota/t"
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
	produce(t, p, strings.Repeat("x", 100), 20, nil)
	p.Close()
	e.b.MaintainOnce(context.Background())
	_, err = c.CreateProducer(pulsar.ProducerOptions{Topic: tp})
	if err == nil || !strings.Contains(err.Error(), "ProducerBlockedQuotaExceeded") {
		t.Fatalf("producer over the quota: %v", err)
	}
	// Consuming the backlog lifts the block at the next check.
	receiveN(t, cons, 20, true)
	testWaitBacklog(t, e, tp, "slow", 0)
	e.b.MaintainOnce(context.Background())
	p, err = c.CreateProducer(pulsar.ProducerOptions{Topic: tp})
	if err != nil {
		t.Fatalf("producer after the backlog drained: %v", err)
	}
	p.Close()
}

func testWaitBacklog(t *testing.T, e *env, tp, sub string, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for backlog(t, e, tp, sub) != want {
		if time.Now().After(deadline) {
			t.Fatalf("backlog of %s stays %d, want %d", sub, backlog(t, e, tp, sub), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBacklogQuotaEviction(t *testing.T) {
	e, _ := policyEnv(t, "public/evict", &policy.Policies{BacklogQuotaMap: map[string]policy.BacklogQuota{
		policy.DestinationStorage: {LimitSize: 2000, Policy: policy.ConsumerBacklogEviction}}})
	const tp = "persistent://public/evict/t"
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
	produce(t, p, strings.Repeat("y", 150), 40, nil)
	before := backlog(t, e, tp, "slow")
	e.b.MaintainOnce(context.Background())
	after := backlog(t, e, tp, "slow")
	if before != 40 || after >= before || after == 0 {
		t.Fatalf("backlog %d before eviction, %d after", before, after)
	}
	// The oldest went: the subscription resumes at the first kept one.
	cons, err = c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := payloads(receiveN(t, cons, int(after), true))
	if want := fmt.Sprintf("%s-%d", strings.Repeat("y", 150), 40-after); got[0] != want {
		t.Fatalf("first kept message %q, want %q", got[0], want)
	}
}

func TestRetention(t *testing.T) {
	e, clk := policyEnv(t, "public/keep", &policy.Policies{RetentionPolicies: &policy.RetentionPolicies{RetentionTimeInMinutes: 60, RetentionSizeInMB: -1}})
	const tp = "persistent://public/keep/t"
	c := e.client()
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
	e.b.MaintainOnce(context.Background())
	read := func() int {
		r, err := c.CreateReader(pulsar.ReaderOptions{Topic: tp, StartMessageID: pulsar.EarliestMessageID()})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		return len(readAll(t, r))
	}
	if n := read(); n != 12 {
		t.Fatalf("retention kept %d consumed messages, want 12", n)
	}
	clk.advance(2 * time.Hour)
	e.b.MaintainOnce(context.Background())
	if n := read(); n != 2 {
		t.Fatalf("after retention: %d messages readable, want the 2 of the open ledger", n)
	}
}

// TestSubscriptionExpiration: a namespace's subscription expiration
// deletes a durable subscription that had no consumer for that long, not
// one with a consumer, nor one whose consumer left recently.
func TestSubscriptionExpiration(t *testing.T) {
	e, clk := policyEnv(t, "public/expiry", &policy.Policies{SubscriptionExpirationTime: intp(10)})
	const tp = "persistent://public/expiry/t"
	name, _ := topic.Parse(tp)
	c := e.client()
	subscribe := func(sub string) pulsar.Consumer {
		t.Helper()
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: sub})
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	subscribe("idle").Close()
	busy := subscribe("busy")
	defer busy.Close()
	late := subscribe("late")
	subs := func() string {
		t.Helper()
		s, err := e.b.AdminAPI().Topics.Subscriptions(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(s, ",")
	}
	clk.advance(8 * time.Minute)
	late.Close() // idle from now
	e.b.MaintainOnce(context.Background())
	if got := subs(); got != "busy,idle,late" {
		t.Fatalf("before the expiration: %s", got)
	}
	clk.advance(3 * time.Minute) // idle 11 minutes; late 3
	e.b.MaintainOnce(context.Background())
	if got := subs(); got != "busy,late" {
		t.Fatalf("after 11 minutes: %s, want idle gone", got)
	}
	clk.advance(8 * time.Minute) // late idle 11 minutes, busy still has its consumer
	e.b.MaintainOnce(context.Background())
	if got := subs(); got != "busy" {
		t.Fatalf("after 19 minutes: %s, want only busy", got)
	}
}

// TestAutoSubscriptionCreationOverride: a namespace's override refuses a
// consumer's new subscription (existing ones still open); a topic's own
// override wins over the namespace's.
func TestAutoSubscriptionCreationOverride(t *testing.T) {
	e, _ := policyEnv(t, "public/autosub", &policy.Policies{
		AutoSubscriptionCreationOverride: &policy.AutoSubscriptionCreation{AllowAutoSubscriptionCreation: false}})
	name, _ := topic.Parse("persistent://public/autosub/t")
	ctx := context.Background()
	if err := e.b.AdminAPI().Topics.CreateTopic(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := e.b.AdminAPI().Topics.CreateSubscription(ctx, name, "made", nil); err != nil {
		t.Fatal(err)
	}
	c := e.client()
	if _, err := c.Subscribe(pulsar.ConsumerOptions{Topic: name.String(), SubscriptionName: "new"}); err == nil || !strings.Contains(err.Error(), "auto subscription creation is off") {
		t.Fatalf("new subscription under the namespace's override: %v", err)
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: name.String(), SubscriptionName: "made"})
	if err != nil {
		t.Fatalf("existing subscription: %v", err)
	}
	cons.Close()
	// The topic's own override wins.
	setTopicPolicies(t, e, name.String(), policy.GlobalScope, func(p *policy.TopicPolicies) {
		p.AutoSubscriptionCreation = &policy.AutoSubscriptionCreation{AllowAutoSubscriptionCreation: true}
	})
	if err := e.b.AdminAPI().PolicyRefresher.RefreshTopicPolicies(ctx, name); err != nil {
		t.Fatal(err)
	}
	cons, err = c.Subscribe(pulsar.ConsumerOptions{Topic: name.String(), SubscriptionName: "new"})
	if err != nil {
		t.Fatalf("new subscription under the topic's override: %v", err)
	}
	cons.Close()
}
