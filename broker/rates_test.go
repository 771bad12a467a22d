package broker_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/broker/ratelimit"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/topic"
)

// The rate tests check the mechanism, not the clock: the limiters' own
// counters say what they let through and how often they held back, and
// the only timing asserted is a generous lower bound (what cannot go
// faster than the limit). BenchmarkRateLimits measures the rates.

// rateEnv starts a broker with namespace public/rates, and public/rrepl
// replicating to a second cluster, "other" (the replicator rate applies
// to its replication cursor).
func rateEnv(tb testing.TB) *env {
	tb.Helper()
	e := startEnv(tb, nil)
	ctx := context.Background()
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(e.pol.CreateNamespace(ctx, "public/rates", nil))
	must(e.pol.CreateCluster(ctx, "other", policy.ClusterData{ServiceURL: "http://127.0.0.1:2"}))
	must(e.pol.UpdateTenant(ctx, "public", policy.TenantInfo{AllowedClusters: []string{"test", "other"}}))
	must(e.pol.CreateNamespace(ctx, "public/rrepl", &policy.Policies{ReplicationClusters: []string{"test", "other"}}))
	return e
}

// setRates sets a topic's own (local) policies.
func setRates(tb testing.TB, e *env, tp string, fn func(*policy.TopicPolicies)) {
	tb.Helper()
	name, err := topic.Parse(tp)
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.pol.UpdateTopicPolicies(context.Background(), name, policy.LocalScope, func(p *policy.TopicPolicies) error {
		fn(p)
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
}

func rateStats(tb testing.TB, e *env, tp string) map[string]ratelimit.Stats {
	tb.Helper()
	name, _ := topic.Parse(tp)
	st, ok := e.b.RateStats(name)
	if !ok {
		tb.Fatalf("%s is not loaded", tp)
	}
	return st
}

// fill publishes n messages of size bytes, unbatched, as fast as the
// broker takes them.
func fill(tb testing.TB, c pulsar.Client, tp string, n, size int) {
	tb.Helper()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true, MaxPendingMessages: 2000})
	if err != nil {
		tb.Fatal(err)
	}
	defer p.Close()
	var failed atomic.Int64
	payload := make([]byte, size)
	for range n {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	if err := p.Flush(); err != nil {
		tb.Fatal(err)
	}
	if f := failed.Load(); f > 0 {
		tb.Fatalf("%d sends failed", f)
	}
}

// publishRate sends messages of size bytes as fast as the producer may
// for d, and returns the rate of receipts after the first second (the
// budget of the first period is spent at once), in messages per second.
func publishRate(tb testing.TB, c pulsar.Client, tp string, size int, d time.Duration) float64 {
	tb.Helper()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true, MaxPendingMessages: 500})
	if err != nil {
		tb.Fatal(err)
	}
	defer p.Close()
	start := time.Now()
	from, to := start.Add(time.Second), start.Add(d)
	var counted, failed atomic.Int64
	payload := make([]byte, size)
	for time.Now().Before(to) {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if now := time.Now(); err == nil && now.After(from) && now.Before(to) {
				counted.Add(1)
			} else if err != nil {
				failed.Add(1)
			}
		})
	}
	if err := p.Flush(); err != nil {
		tb.Fatal(err)
	}
	if f := failed.Load(); f > 0 {
		tb.Fatalf("%d sends failed", f)
	}
	return float64(counted.Load()) / to.Sub(from).Seconds()
}

// consumeRate receives from a backlog for d and returns the rate of
// messages (and bytes) received after the first second.
func consumeRate(tb testing.TB, c pulsar.Client, opts pulsar.ConsumerOptions, d time.Duration) (msgs, bytes float64) {
	tb.Helper()
	opts.SubscriptionInitialPosition = pulsar.SubscriptionPositionEarliest
	cons, err := c.Subscribe(opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer cons.Close()
	start := time.Now()
	from, to := start.Add(time.Second), start.Add(d)
	ctx, cancel := context.WithDeadline(context.Background(), to)
	defer cancel()
	var n, b int64
	for {
		m, err := cons.Receive(ctx)
		if err != nil {
			break
		}
		if time.Now().After(from) {
			n++
			b += int64(len(m.Payload()))
		}
		cons.Ack(m)
	}
	secs := to.Sub(from).Seconds()
	return float64(n) / secs, float64(b) / secs
}

func dispatchRate(msgs int64) *policy.DispatchRate {
	return &policy.DispatchRate{DispatchThrottlingRateInMsg: msgs, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}
}

// Sending 3N messages to a topic that takes N per second: the first N
// pass at once, the rest wait for the next periods. The connection's
// reader waits, so the producer's receipts come no faster.
func TestPublishRate(t *testing.T) {
	e := rateEnv(t)
	c := e.client()
	const tp, n = "persistent://public/rates/publish", 40
	setRates(t, e, tp, func(p *policy.TopicPolicies) {
		p.PublishRate = &policy.PublishRate{PublishThrottlingRateInMsg: n, PublishThrottlingRateInByte: -1}
	})
	start := time.Now()
	fill(t, c, tp, 3*n, 10)
	if el := time.Since(start); el < 1500*time.Millisecond {
		t.Errorf("%d messages at %d/s took %v, want about 2s", 3*n, n, el)
	}
	st := rateStats(t, e, tp)["publish"]
	if st.Msgs != 3*n || st.Throttled < n || st.Waited < 1500*time.Millisecond {
		t.Fatalf("publish limiter: %+v, want %d messages and about %d waits, 2s in all", st, 3*n, 2*n)
	}
	// Removing the rate lifts it at once on the topic.
	setRates(t, e, tp, func(p *policy.TopicPolicies) { p.PublishRate = nil })
	e.b.MaintainOnce(context.Background())
	fill(t, c, tp, 3*n, 10)
	if st2 := rateStats(t, e, tp)["publish"]; st2.Throttled != st.Throttled {
		t.Fatalf("no rate, yet throttled: %+v", st2)
	}
}

// A topic's dispatch rate holds all its subscriptions together; a
// subscription's dispatch rate each one.
func TestDispatchRates(t *testing.T) {
	e := rateEnv(t)
	c := e.client()
	const n = 40
	receiveAll := func(t *testing.T, tp, sub string, want int) time.Duration {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: sub, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		start := time.Now()
		receiveN(t, cons, want, true)
		return time.Since(start)
	}
	t.Run("topic", func(t *testing.T) {
		const tp = "persistent://public/rates/dispatch"
		setRates(t, e, tp, func(p *policy.TopicPolicies) { p.DispatchRate = dispatchRate(n) })
		fill(t, c, tp, 2*n, 10)
		var wg sync.WaitGroup
		for _, sub := range []string{"a", "b"} {
			wg.Add(1)
			go func() { defer wg.Done(); receiveAll(t, tp, sub, 2*n) }()
		}
		start := time.Now()
		wg.Wait()
		// 4N messages at N per second, the first N at once.
		if el := time.Since(start); el < 2*time.Second {
			t.Errorf("%d messages at %d/s took %v, want about 3s", 4*n, n, el)
		}
		st := rateStats(t, e, tp)
		if d := st["dispatch"]; d.Msgs != 4*n || d.Throttled == 0 {
			t.Fatalf("topic dispatch limiter: %+v, want %d messages, throttled", d, 4*n)
		}
		if s := st["subscription:a"]; s.Msgs != 2*n || s.Throttled != 0 {
			t.Fatalf("subscription a, without a rate of its own: %+v", s)
		}
	})
	t.Run("subscription", func(t *testing.T) {
		const tp = "persistent://public/rates/subdispatch"
		setRates(t, e, tp, func(p *policy.TopicPolicies) { p.SubscriptionDispatchRate = dispatchRate(n) })
		fill(t, c, tp, 3*n, 10)
		if el := receiveAll(t, tp, "a", 3*n); el < 1500*time.Millisecond {
			t.Errorf("%d messages at %d/s took %v, want about 2s", 3*n, n, el)
		}
		st := rateStats(t, e, tp)
		if s := st["subscription:a"]; s.Msgs != 3*n || s.Throttled == 0 {
			t.Fatalf("subscription limiter: %+v, want %d messages, throttled", s, 3*n)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		const tp = "persistent://public/rates/bytes"
		setRates(t, e, tp, func(p *policy.TopicPolicies) {
			p.SubscriptionDispatchRate = &policy.DispatchRate{DispatchThrottlingRateInMsg: -1, DispatchThrottlingRateInByte: 10_000, RatePeriodInSecond: 1}
		})
		fill(t, c, tp, 30, 1000) // 30 kB at 10 kB/s
		if el := receiveAll(t, tp, "a", 30); el < 1500*time.Millisecond {
			t.Errorf("30 kB at 10 kB/s took %v, want about 2s", el)
		}
		if s := rateStats(t, e, tp)["subscription:a"]; s.Bytes < 30_000 || s.Throttled == 0 {
			t.Fatalf("subscription limiter: %+v, want 30 kB, throttled", s)
		}
	})
}

// The replicator rate holds a topic's replication cursor to each remote
// region (what the replicator worker for that region reads), not its
// subscriptions.
func TestReplicatorDispatchRate(t *testing.T) {
	e := rateEnv(t)
	c := e.client()
	const tp, n = "persistent://public/rrepl/r", 40
	setRates(t, e, tp, func(p *policy.TopicPolicies) { p.ReplicatorDispatchRate = dispatchRate(n) })
	fill(t, c, tp, 3*n, 10)
	cursor := replication.CursorName("other")
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: cursor, Type: pulsar.Failover})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	start := time.Now()
	receiveN(t, cons, 3*n, true)
	if el := time.Since(start); el < 1500*time.Millisecond {
		t.Errorf("%d messages at %d/s took %v, want about 2s", 3*n, n, el)
	}
	user, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "user", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer user.Close()
	receiveN(t, user, 3*n, true)
	st := rateStats(t, e, tp)
	if s := st["subscription:"+cursor]; s.Msgs != 3*n || s.Throttled == 0 {
		t.Fatalf("replicator limiter: %+v, want %d messages, throttled", s, 3*n)
	}
	if s := st["subscription:user"]; s.Throttled != 0 {
		t.Fatalf("a user subscription was held by the replicator rate: %+v", s)
	}
}

// A consumer may subscribe as often as the subscribe rate allows per
// period; the next SUBSCRIBE is refused with a retriable error.
func TestSubscribeRate(t *testing.T) {
	e := rateEnv(t)
	c := e.client()
	const tp = "persistent://public/rates/subscribe"
	setRates(t, e, tp, func(p *policy.TopicPolicies) {
		p.SubscribeRate = &policy.SubscribeRate{SubscribeThrottlingRatePerConsumer: 2, RatePeriodInSecond: 3600}
	})
	sub := func(name string) error {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s", Name: name, Type: pulsar.Shared})
		if err == nil {
			cons.Close()
		}
		return err
	}
	for i := range 2 {
		if err := sub("k"); err != nil {
			t.Fatalf("subscribe %d: %v", i, err)
		}
	}
	err := sub("k")
	if err == nil || !strings.Contains(err.Error(), "Subscribe limited by subscribe rate limit per consumer") {
		t.Fatalf("third subscribe: %v, want the subscribe rate's refusal", err)
	}
	if err := sub("other"); err != nil {
		t.Fatalf("another consumer: %v", err)
	}
	if k := errkind.KindOf(broker.ErrSubscribeRate); k != errkind.ErrServiceNotReady || !k.Retriable {
		t.Fatalf("the refusal is %v, want ServiceNotReady (retriable, as Pulsar)", k)
	}
}

// BenchmarkRateLimits runs each rate for a few seconds and reports the
// rate measured after the first period, relative to the limit (1 is the
// limit; the goal is 0.9 to 1.1):
//
//	go test -run '^$' -bench BenchmarkRateLimits -benchtime 1x ./broker/
func BenchmarkRateLimits(b *testing.B) {
	const limit, secs = 2000, 5
	d := secs * time.Second
	for range b.N {
		e := rateEnv(b)
		c := e.client()
		report := func(name string, got, want float64) {
			b.ReportMetric(got/want, name+"/limit")
			b.Logf("%s: %.0f per second, limit %.0f (%.3f)", name, got, want, got/want)
		}

		tp := "persistent://public/rates/bench-publish"
		setRates(b, e, tp, func(p *policy.TopicPolicies) {
			p.PublishRate = &policy.PublishRate{PublishThrottlingRateInMsg: limit, PublishThrottlingRateInByte: -1}
		})
		report("publish-msg", publishRate(b, c, tp, 100, d), limit)

		const byteLimit = 1 << 20 // 1 MiB/s of 1 kB messages
		tp = "persistent://public/rates/bench-publish-bytes"
		setRates(b, e, tp, func(p *policy.TopicPolicies) {
			p.PublishRate = &policy.PublishRate{PublishThrottlingRateInMsg: -1, PublishThrottlingRateInByte: byteLimit}
		})
		report("publish-byte", publishRate(b, c, tp, 1000, d)*1000, byteLimit)

		backlog := limit*(secs+2) + 1000
		tp = "persistent://public/rates/bench-dispatch"
		setRates(b, e, tp, func(p *policy.TopicPolicies) { p.DispatchRate = dispatchRate(limit) })
		fill(b, c, tp, backlog, 100)
		m, _ := consumeRate(b, c, pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "a"}, d)
		report("dispatch-msg", m, limit)

		tp = "persistent://public/rates/bench-subdispatch"
		setRates(b, e, tp, func(p *policy.TopicPolicies) {
			p.SubscriptionDispatchRate = dispatchRate(limit)
		})
		fill(b, c, tp, backlog, 100)
		m, _ = consumeRate(b, c, pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "a"}, d)
		report("subscription-dispatch-msg", m, limit)

		tp = "persistent://public/rates/bench-subdispatch-bytes"
		setRates(b, e, tp, func(p *policy.TopicPolicies) {
			p.SubscriptionDispatchRate = &policy.DispatchRate{DispatchThrottlingRateInMsg: -1, DispatchThrottlingRateInByte: byteLimit, RatePeriodInSecond: 1}
		})
		fill(b, c, tp, byteLimit*(secs+2)/1000+1000, 1000)
		_, by := consumeRate(b, c, pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "a"}, d)
		report("subscription-dispatch-byte", by, byteLimit)

		tp = "persistent://public/rrepl/bench-replicator"
		setRates(b, e, tp, func(p *policy.TopicPolicies) { p.ReplicatorDispatchRate = dispatchRate(limit) })
		fill(b, c, tp, backlog, 100)
		m, _ = consumeRate(b, c, pulsar.ConsumerOptions{Topic: tp, SubscriptionName: replication.CursorName("other"), Type: pulsar.Failover}, d)
		report("replicator-dispatch-msg", m, limit)
	}
}

// A namespace's rates, set for this cluster, apply to its topics; a
// topic's own rate takes precedence (-1: none, whatever the namespace
// says).
func TestNamespaceRates(t *testing.T) {
	e := rateEnv(t)
	c := e.client()
	ctx := context.Background()
	const n = 40
	if _, err := e.pol.UpdateNamespace(ctx, "public/rates", func(p *policy.Policies) error {
		p.PublishMaxMessageRate = map[string]policy.PublishRate{
			"test":  {PublishThrottlingRateInMsg: n, PublishThrottlingRateInByte: -1},
			"other": {PublishThrottlingRateInMsg: 1, PublishThrottlingRateInByte: -1}, // another region's
		}
		p.ClusterSubscribeRate = map[string]policy.SubscribeRate{"test": {SubscribeThrottlingRatePerConsumer: 1, RatePeriodInSecond: 3600}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	const tp = "persistent://public/rates/ns"
	start := time.Now()
	fill(t, c, tp, 3*n, 10)
	if el := time.Since(start); el < 1500*time.Millisecond {
		t.Errorf("%d messages at %d/s took %v, want about 2s", 3*n, n, el)
	}
	st := rateStats(t, e, tp)["publish"]
	if st.Msgs != 3*n || st.Throttled == 0 {
		t.Fatalf("publish limiter: %+v", st)
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s", Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	cons.Close()
	if _, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s", Name: "k"}); err == nil || !strings.Contains(err.Error(), "subscribe rate") {
		t.Fatalf("second subscribe: %v, want the namespace's subscribe rate's refusal", err)
	}

	setRates(t, e, tp, func(p *policy.TopicPolicies) {
		p.PublishRate = &policy.PublishRate{PublishThrottlingRateInMsg: -1, PublishThrottlingRateInByte: -1}
	})
	e.b.MaintainOnce(ctx)
	fill(t, c, tp, 3*n, 10)
	if st2 := rateStats(t, e, tp)["publish"]; st2.Throttled != st.Throttled {
		t.Fatalf("the topic's own rate (none) did not replace the namespace's: %+v", st2)
	}
}

// A dispatch rate relative to the publish rate (relativeToPublishRate)
// adds the topic's publish rate, sampled each second, to its budget: a
// consumer keeps up with producers far beyond the rate's own budget.
func TestRelativeDispatchRate(t *testing.T) {
	e := rateEnv(t)
	c := e.client()
	const tp, own = "persistent://public/rates/relative", 5
	setRates(t, e, tp, func(p *policy.TopicPolicies) {
		p.SubscriptionDispatchRate = &policy.DispatchRate{DispatchThrottlingRateInMsg: own, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1, RelativeToPublishRate: true}
	})
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// About 100 msg/s for 4 s.
	const sent = 400
	go func() {
		for range sent {
			p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte("m")}, func(pulsar.MessageID, *pulsar.ProducerMessage, error) {})
			time.Sleep(10 * time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := 0
	for got < sent {
		m, err := cons.Receive(ctx)
		if err != nil {
			break
		}
		cons.Ack(m)
		got++
	}
	// Without the publish rate, 10 s would let through at most
	// own*11 = 55.
	if got < sent/2 {
		t.Fatalf("received %d of %d in 10 s; the rate did not follow the publish rate", got, sent)
	}
	// The charge is recorded as the entry goes out, so it may land just
	// after the client has the message: wait for it.
	deadline := time.Now().Add(5 * time.Second)
	for s := rateStats(t, e, tp)["subscription:a"]; s.Msgs != int64(got); s = rateStats(t, e, tp)["subscription:a"] {
		if time.Now().After(deadline) {
			t.Fatalf("limiter charged %+v, want %d messages", s, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
