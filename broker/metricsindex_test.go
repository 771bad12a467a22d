package broker_test

import (
	"context"
	"fmt"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

// pausableClock is the real clock plus an offset, which can stand still
// (so that two reads of the same state see the same time).
type pausableClock struct{ offset, paused atomic.Int64 }

func (c *pausableClock) now() time.Time {
	if p := c.paused.Load(); p != 0 {
		return time.Unix(0, p)
	}
	return time.Now().Add(time.Duration(c.offset.Load()))
}
func (c *pausableClock) advance(d time.Duration) { c.offset.Add(int64(d)) }
func (c *pausableClock) pause()                  { c.paused.Store(c.now().UnixNano()) }
func (c *pausableClock) resume()                 { c.paused.Store(0) }

// TestMetricsIndexMatchesWalk: the metrics callback's values, kept from
// the topics that changed (the metrics index), are those of a walk over
// every loaded topic, through idle topics with and without a
// subscription, publishes, consumers acknowledging, closed clients,
// replication backlogs, admin operations on cursors, unloads, a
// non-persistent topic and time passing; and a replication stall counts
// from the last collection that found the cursor without a backlog, as
// a walk at every collection would have had it.
func TestMetricsIndexMatchesWalk(t *testing.T) {
	clk := &pausableClock{}
	e := startEnv(t, func(c *setup) {
		c.Now = clk.now
		c.MaintenanceInterval = time.Hour // no pass runs
		c.Ledger.MaxEntriesPerLedger = 5  // several ledgers
		c.ReplicationStallAfter = 30 * time.Second
	})
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.pol.CreateCluster(ctx, "other", policy.ClusterData{ServiceURL: "http://127.0.0.1:2"}))
	must(e.pol.CreateCluster(ctx, "third", policy.ClusterData{ServiceURL: "http://127.0.0.1:3"}))
	must(e.pol.UpdateTenant(ctx, "public", policy.TenantInfo{AllowedClusters: []string{"test", "other", "third"}}))
	must(e.pol.CreateNamespace(ctx, "public/mxa", &policy.Policies{}))
	must(e.pol.CreateNamespace(ctx, "public/mxb", &policy.Policies{}))
	must(e.pol.CreateNamespace(ctx, "public/mxr", &policy.Policies{ReplicationClusters: []string{"test", "other"}}))
	must(e.pol.CreateNamespace(ctx, "public/mxs", &policy.Policies{ReplicationClusters: []string{"test", "third"}}))
	adm := e.b.AdminAPI().Topics
	name := func(s string) topic.Name {
		n, err := topic.Parse(s)
		must(err)
		return n
	}
	check := func(stage string) string {
		t.Helper()
		clk.pause()
		defer clk.resume()
		idx := e.b.MetricsIndexed(ctx)
		walk := e.b.MetricsWalked(ctx)
		if idx != walk {
			t.Fatalf("%s: the index has\n%s\na walk has\n%s", stage, idx, walk)
		}
		return idx
	}

	// Idle topics, with and without a subscription.
	for _, ns := range []string{"mxa", "mxb", "mxr"} {
		for i := range 4 {
			n := name(fmt.Sprintf("persistent://public/%s/idle-%d", ns, i))
			must(adm.CreateTopic(ctx, n))
			if i%2 == 0 {
				must(adm.CreateSubscription(ctx, n, "s", &adminapi.Earliest))
			}
		}
	}
	check("idle") // the first collection: every topic visited
	check("idle again")

	// Traffic: a producer, a subscription behind, a consumer acknowledging.
	c := e.client()
	const busy = "persistent://public/mxa/busy"
	must(adm.CreateTopic(ctx, name(busy)))
	must(adm.CreateSubscription(ctx, name(busy), "behind", &adminapi.Earliest))
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: busy, DisableBatching: true})
	must(err)
	produce(t, p, "m", 12, nil)
	check("published, producer attached")
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: busy, SubscriptionName: "reader",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AckWithResponse: true})
	must(err)
	for range 7 {
		m, err := cons.Receive(ctx)
		must(err)
		must(cons.Ack(m))
	}
	check("consumer acknowledged")
	produce(t, p, "n", 3, nil)
	check("published again")
	cons.Close()
	p.Close()
	check("clients closed")
	clk.advance(time.Minute)
	check("a minute on")

	// A replication backlog, its age moving with the clock.
	pr, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/mxr/idle-1", DisableBatching: true})
	must(err)
	produce(t, pr, "r", 4, nil)
	pr.Close()
	check("replication backlog")
	clk.advance(40 * time.Second)
	check("replication backlog, stalled")

	// Admin operations on cursors, unloads.
	must(adm.Skip(ctx, name(busy), "behind", 5))
	check("skipped")
	must(adm.DeleteSubscription(ctx, name("persistent://public/mxb/idle-0"), "s", false))
	check("subscription deleted")
	must(adm.CreateSubscription(ctx, name("persistent://public/mxb/idle-1"), "s", &adminapi.Earliest))
	check("subscription created")
	must(adm.Unload(ctx, name("persistent://public/mxa/idle-0")))
	must(adm.Unload(ctx, name(busy)))
	check("unloaded")
	_, err = adm.Stats(ctx, name(busy)) // loaded again
	must(err)
	check("loaded again")

	// A non-persistent topic's consumer.
	np, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "non-persistent://public/mxb/np", SubscriptionName: "s"})
	must(err)
	check("non-persistent consumer")
	np.Close()
	check("non-persistent consumer gone")

	// A stall counts from the last collection that found the
	// replication cursor without a backlog, even when that collection
	// did not visit the topic (indexed collections only, below: a walk
	// would note the cursor itself).
	stalled := func() string {
		clk.pause()
		defer clk.resume()
		m := regexp.MustCompile(`repl third .*stalled (\d+)`).FindStringSubmatch(e.b.MetricsIndexed(ctx))
		if m == nil {
			t.Fatal("no series for remote third")
		}
		return m[1]
	}
	const quiet = "persistent://public/mxs/quiet"
	must(adm.CreateTopic(ctx, name(quiet)))
	stalled() // visits it: no backlog
	clk.advance(20 * time.Second)
	stalled() // does not visit it; a walk would have found no backlog now
	pq, err := c.CreateProducer(pulsar.ProducerOptions{Topic: quiet, DisableBatching: true})
	must(err)
	produce(t, pq, "q", 2, nil)
	pq.Close()
	clk.advance(20 * time.Second) // 40 s after the visit, 20 s after the collection
	if got := stalled(); got != "0" {
		t.Fatalf("stalled %s 20 s after a collection without a backlog, want 0", got)
	}
	clk.advance(15 * time.Second) // 35 s after that collection
	if got := stalled(); got != "1" {
		t.Fatalf("stalled %s 35 s after a collection without a backlog, want 1", got)
	}
	check("stall")
}
