package region_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/region"
)

// TestWANLatencyAndPartition runs two regions behind the emulated WAN at
// 40 ms one way: every replicated message takes at least the link's delay
// (the gateways really go through it, also after reconnecting); a
// partitioned region keeps serving its own clients, including from its
// cache of the global store it cannot reach; after the heal both regions
// have every message exactly once, in order per source.
func TestWANLatencyAndPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	t.Parallel()
	const latency = 40 * time.Millisecond
	f := startFederationWith(t, 2, nil, region.Deps{}, func(c *region.FederationConfig) {
		c.WAN = &region.WANConfig{Latency: latency}
	})
	wan := f.WAN()
	if got, want := wan.Links(), []string{"r0->global", "r0->r1", "r1->global", "r1->r0"}; !slices.Equal(got, want) {
		t.Fatalf("links %v, want %v", got, want)
	}
	r0, r1 := f.Regions[0], f.Regions[1]
	c0, c1 := pulsarClient(t, r0.Endpoints().ServiceURL), pulsarClient(t, r1.Endpoints().ServiceURL)
	const topicName = "persistent://acme/geo/wan"
	sub := func(c pulsar.Client) pulsar.Consumer {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "wan", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cons.Close)
		return cons
	}
	in0, in1 := sub(c0), sub(c1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	recv := func(cons pulsar.Consumer, n int, got *received, minLag *time.Duration) {
		t.Helper()
		for range n {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatalf("%s: after %d: %v", cons.Subscription(), got.total, err)
			}
			if minLag != nil {
				*minLag = min(*minLag, time.Since(m.PublishTime()))
			}
			got.add(string(m.Payload()))
			cons.Ack(m)
		}
	}

	produce(t, c0, topicName, "r0", 0, 200)
	got0, got1 := &received{}, &received{}
	recv(in0, 200, got0, nil)
	minLag := time.Hour
	recv(in1, 200, got1, &minLag)
	// PublishTime has millisecond resolution.
	if minLag < latency-time.Millisecond {
		t.Errorf("a message reached r1 %v after it was published, faster than the link's %v: the gateway bypasses the WAN", minLag, latency)
	}
	t.Logf("fastest replication through a %v link: %v", latency, minLag)

	// Partition r1 from r0 and from the global store.
	if err := wan.Partition("r1"); err != nil {
		t.Fatal(err)
	}
	accepted := wan.Link("r0", "r1").Stats().Accepted
	produce(t, c0, topicName, "r0", 200, 300)
	recv(in0, 300, got0, nil)
	// r1 serves its own producers and consumers meanwhile.
	produce(t, c1, topicName, "r1", 0, 100)
	recv(in1, 100, got1, nil)
	wanCheck(t, "r1 during the partition", got1, map[string]int{"r0": 200, "r1": 100})

	if err := wan.Heal("r1"); err != nil {
		t.Fatal(err)
	}
	recv(in1, 300, got1, nil)
	recv(in0, 100, got0, nil)
	wanCheck(t, "r0 after the heal", got0, map[string]int{"r0": 500, "r1": 100})
	wanCheck(t, "r1 after the heal", got1, map[string]int{"r0": 500, "r1": 100})
	if now := wan.Link("r0", "r1").Stats().Accepted; now <= accepted {
		t.Errorf("r0's gateway to r1 reconnected around its link (accepted %d before the partition, %d after the heal)", accepted, now)
	}
	for _, c := range []pulsar.Consumer{in0, in1} {
		qctx, qcancel := context.WithTimeout(ctx, time.Second)
		if m, err := c.Receive(qctx); err == nil {
			t.Errorf("%s: extra message %q", c.Subscription(), m.Payload())
		}
		qcancel()
	}
}

// wanCheck asserts that got holds exactly want[src] messages from each
// source, in order, once each.
func wanCheck(t *testing.T, where string, got *received, want map[string]int) {
	t.Helper()
	if len(got.errs) > 0 {
		t.Errorf("%s: %d order/duplicate errors, first: %v", where, len(got.errs), got.errs[:min(5, len(got.errs))])
	}
	total := 0
	for src, n := range want {
		total += n
		if got.next[src] != n {
			t.Errorf("%s: %d messages from %s, want %d", where, got.next[src], src, n)
		}
	}
	if got.total != total {
		t.Errorf("%s: %d messages, want %d", where, got.total, total)
	}
}
