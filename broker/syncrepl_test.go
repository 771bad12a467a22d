package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/replication"
)

// syncNamespace creates namespace ns replicated to this region ("test")
// and "other" with synchronous replication sr.
func syncNamespace(t *testing.T, e *env, ns string, sr policy.SyncReplication) {
	t.Helper()
	ctx := ctxT(t)
	must(t, e.pol.CreateCluster(ctx, "other", policy.ClusterData{ServiceURL: "http://127.0.0.1:2", BrokerServiceURL: "pulsar://127.0.0.1:2"}))
	must(t, e.pol.UpdateTenant(ctx, "public", policy.TenantInfo{AllowedClusters: []string{"test", "other"}}))
	must(t, e.pol.CreateNamespace(ctx, ns, &policy.Policies{ReplicationClusters: []string{"test", "other"}, SyncReplication: &sr}))
}

// sendAsync sends payload and returns a channel that gets the result.
func sendAsync(p pulsar.Producer, payload string) <-chan error {
	ch := make(chan error, 1)
	p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte(payload)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { ch <- err })
	return ch
}

// syncStats is the topic's synchronous replication state.
func syncStats(t *testing.T, e *env, tp string) *adminapi.SyncReplicationStats {
	t.Helper()
	st, err := e.b.AdminAPI().Topics.Stats(ctxT(t), mustParse(t, tp))
	must(t, err)
	return st.SyncReplication
}

// TestSyncReplicationHoldsUntilTheRegionConfirms: with synchronous
// replication to one other region, a publish is acknowledged only once
// that region's replicator acknowledged the entry on its replication
// cursor (which it does once the region stored it), in order; with
// the policy removed, publishes are acknowledged at once again.
func TestSyncReplicationHoldsUntilTheRegionConfirms(t *testing.T) {
	e := startEnv(t, nil)
	const ns, tp = "public/sync", "persistent://public/sync/held"
	syncNamespace(t, e, ns, policy.SyncReplication{Regions: 1})
	c := e.client()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	must(t, err)
	defer p.Close()

	// An application's consumer: it gets only what the other region
	// confirmed (the dispatch limit), so a failover never delivers a
	// message twice because its producer sent it again.
	app, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "app", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	must(t, err)
	defer app.Close()
	sent := []<-chan error{sendAsync(p, "m0"), sendAsync(p, "m1")}
	testWaitFor(t, "two publishes held", func() bool {
		st := syncStats(t, e, tp)
		return st != nil && st.Waiting == 2 && st.State == adminapi.SyncStateSync
	})
	for i, ch := range sent {
		select {
		case err := <-ch:
			t.Fatalf("m%d acknowledged (%v) before the other region confirmed it", i, err)
		default:
		}
	}

	// The other region's replicator: it reads the replication cursor and
	// acknowledges cumulatively what its region stored.
	repl, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: replication.CursorName("other"), Type: pulsar.Failover,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	must(t, err)
	defer repl.Close()
	ctx := ctxT(t)
	m0, err := repl.Receive(ctx)
	must(t, err)
	m1, err := repl.Receive(ctx) // the replicator reads past the limit
	must(t, err)
	if n := len(app.Chan()); n != 0 {
		t.Fatalf("the application's consumer got %d messages no other region holds", n)
	}
	must(t, repl.AckCumulative(m0))
	if err := <-sent[0]; err != nil {
		t.Fatalf("m0: %v", err)
	}
	if got, err := app.Receive(ctx); err != nil || string(got.Payload()) != "m0" {
		t.Fatalf("the application's consumer: %v, %v; want m0", got, err)
	}
	select {
	case err := <-sent[1]:
		t.Fatalf("m1 acknowledged (%v) before the other region confirmed it", err)
	default:
	}
	if n := len(app.Chan()); n != 0 {
		t.Fatalf("the application's consumer got m1 (%d messages) before the other region confirmed it", n)
	}
	must(t, repl.AckCumulative(m1))
	if err := <-sent[1]; err != nil {
		t.Fatalf("m1: %v", err)
	}
	if got, err := app.Receive(ctx); err != nil || string(got.Payload()) != "m1" {
		t.Fatalf("the application's consumer: %v, %v; want m1", got, err)
	}

	// Policy removed: acknowledged without the other region.
	_, err = e.pol.UpdateNamespace(ctx, ns, func(p *policy.Policies) error { p.SyncReplication = nil; return nil })
	must(t, err)
	held := sendAsync(p, "m2")
	testWaitFor(t, "m2 held", func() bool { st := syncStats(t, e, tp); return st != nil && st.Waiting == 1 })
	e.b.MaintainOnce(ctx)
	if err := <-held; err != nil {
		t.Fatalf("m2: %v", err)
	}
	if st := syncStats(t, e, tp); st != nil {
		t.Fatalf("stats after the policy went: %+v", st)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("m3")}); err != nil {
		t.Fatalf("m3 (asynchronous): %v", err)
	}
}

// TestSyncReplicationFallsBackAfterItsBound: with fallbackAfterSeconds,
// publishes the other region does not confirm are acknowledged after
// that long, the topic says it is degraded, and publishes are not held
// until the region caught up with where the log was when it fell back.
func TestSyncReplicationFallsBackAfterItsBound(t *testing.T) {
	e := startEnv(t, nil)
	const ns, tp = "public/sync", "persistent://public/sync/fallback"
	syncNamespace(t, e, ns, policy.SyncReplication{Regions: 1, FallbackAfterSeconds: 1})
	c := e.client()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	must(t, err)
	defer p.Close()
	ctx := ctxT(t)

	start := time.Now()
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("m0")}); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("acknowledged after %v, before the 1 s fallback", waited)
	}
	st := syncStats(t, e, tp)
	if st == nil || st.State != adminapi.SyncStateDegraded || st.DegradedSince == "" {
		t.Fatalf("stats after the fallback: %+v", st)
	}
	// Degraded: not held.
	for i := range 3 {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "d%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// The region catches up: synchronous again.
	repl, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: replication.CursorName("other"), Type: pulsar.Failover,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	must(t, err)
	defer repl.Close()
	var last pulsar.Message
	for range 4 {
		last, err = repl.Receive(ctx)
		must(t, err)
	}
	must(t, repl.AckCumulative(last))
	testWaitFor(t, "synchronous again", func() bool { st := syncStats(t, e, tp); return st.State == adminapi.SyncStateSync })
	held := sendAsync(p, "m1")
	testWaitFor(t, "m1 held", func() bool { return syncStats(t, e, tp).Waiting == 1 })
	m, err := repl.Receive(ctx)
	must(t, err)
	must(t, repl.AckCumulative(m))
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}
