package region_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/internal/wanproxy"
	"github.com/isobar-mq/isobar/region"
)

// TestShortStoreOutagesCostClientsNothing: the primary region of an
// active-standby namespace loses its link to the global store, cut and
// black-holed (a stall) for less than its fence lease, while an
// application produces and consumes on it. Nothing reaches the
// application: no send fails, the producer and the consumer keep their
// connections (no ServiceNotReady, no demotion), and every message
// arrives once, never redelivered. With the default lease (2 s), cuts of
// 1 and 1.5 s and a 1.5 s black hole: the lease may lapse near the end of
// the longer ones, and then the broker holds its writers while it takes
// its fence again after the heal (primary.Config.Hold). With a 5 s lease
// (broker.fenceLeaseTTL, the trade-off for a slower failover), cuts of
// 1, 2 and 3 s and a 3 s black hole, the lease valid throughout.
func TestShortStoreOutagesCostClientsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	t.Parallel()
	for _, tc := range []struct {
		name    string
		ttl     time.Duration // broker.fenceLeaseTTL (0: the default)
		outages []outage
	}{
		{"default-lease", 0, []outage{
			{"cut", (*wanproxy.Link).Cut, time.Second},
			{"cut", (*wanproxy.Link).Cut, 1500 * time.Millisecond},
			{"blackhole", (*wanproxy.Link).Blackhole, 1500 * time.Millisecond},
			{"cut", (*wanproxy.Link).Cut, 2 * time.Second},
		}},
		{"lease-5s", 5 * time.Second, []outage{
			{"cut", (*wanproxy.Link).Cut, time.Second},
			{"cut", (*wanproxy.Link).Cut, 2 * time.Second},
			{"cut", (*wanproxy.Link).Cut, 3 * time.Second},
			{"blackhole", (*wanproxy.Link).Blackhole, 3 * time.Second},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { shortStoreOutages(t, tc.ttl, tc.outages) })
	}
}

// outage is one fault of the primary's link to the global store.
type outage struct {
	name  string
	apply func(*wanproxy.Link)
	d     time.Duration
}

func shortStoreOutages(t *testing.T, ttl time.Duration, outages []outage) {
	f := startFederationWith(t, 2, func(_ int, c *region.Config) { c.Broker.FenceLeaseTTL = ttl }, region.Deps{}, func(c *region.FederationConfig) {
		c.WAN = &region.WANConfig{Latency: 20 * time.Millisecond}
	})
	r0 := f.Regions[0]
	const ns = "acme/geo"
	setPrimary(t, r0, ns, "r0")
	c := pulsarClient(t, multiHostURL(f))
	const topicName = "persistent://acme/geo/short-outages"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topicName, Name: "app", BatchingMaxPublishDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "app", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	// Requests the primary's brokers turned away (its gate's refusals,
	// which a client's retries could hide), counted from here on.
	refusedBefore := primaryRefused(t, r0)

	// The application's consumer: every delivery, and the redelivered.
	var (
		recvMu      sync.Mutex
		seen        = map[int]int{}
		redelivered int
	)
	recvDone := make(chan struct{})
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	go func() {
		defer close(recvDone)
		for {
			m, err := cons.Receive(rctx)
			if err != nil {
				return
			}
			var i int
			fmt.Sscanf(string(m.Payload()), "app:%d", &i)
			recvMu.Lock()
			seen[i]++
			if m.RedeliveryCount() > 0 {
				redelivered++
			}
			recvMu.Unlock()
			cons.Ack(m)
		}
	}()
	received := func() int {
		recvMu.Lock()
		defer recvMu.Unlock()
		return len(seen)
	}

	s := &sender{p: p, acked: map[int]time.Time{}}
	stop := make(chan struct{})
	last := make(chan int, 1)
	go func() { last <- s.run(ctx, 0, 5*time.Millisecond, stop) }()
	faultWaitFor(t, 30*time.Second, "the first messages to come back", func() bool { return received() > 50 })
	stats, err := faultTopicStats(ctx, r0, topicName, nil)
	if err != nil {
		t.Fatal(err)
	}
	connected := func(st adminapi.TopicStats) string {
		var out []string
		for _, pp := range st.Publishers {
			if pp.ProducerName == "app" {
				out = append(out, fmt.Sprintf("producer %d since %s", pp.ProducerID, pp.ConnectedSince))
			}
		}
		for _, co := range st.Subscriptions["app"].Consumers {
			out = append(out, fmt.Sprintf("consumer %s since %s", co.ConsumerName, co.ConnectedSince))
		}
		return strings.Join(out, "; ")
	}
	before := connected(stats)
	if !strings.Contains(before, "producer") || !strings.Contains(before, "consumer") {
		t.Fatalf("the application's clients at the primary: %q, want its producer and its consumer", before)
	}

	link := f.WAN().Link("r0", region.GlobalStore)
	for _, fault := range outages {
		// The fault's length and the quiet time after it are the
		// scenario's clock; what they must not cause is watched above.
		fault.apply(link)
		time.Sleep(fault.d)
		link.Up()
		t.Logf("%s of %v over", fault.name, fault.d)
		time.Sleep(2 * time.Second)
	}

	close(stop)
	n := <-last
	s.wg.Wait()
	gap, _ := s.longestGap()
	faultWaitFor(t, 30*time.Second, "every acknowledged message to be consumed", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		recvMu.Lock()
		defer recvMu.Unlock()
		for i := range s.acked {
			if seen[i] == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("%d sent, %d acknowledged, %d consumed; longest gap between acknowledgements %v", n, len(s.acked), received(), gap.Round(time.Millisecond))
	if n := primaryRefused(t, r0) - refusedBefore; n > 0 {
		t.Errorf("the primary refused %v of its clients' requests during the outages (%s)", n, broker.MetricPrimaryRefused)
	}
	if len(s.failed) > 0 {
		t.Errorf("%d sends failed, first: %v", len(s.failed), s.failed[0])
	}
	if len(s.acked) != n {
		t.Errorf("%d of %d sends acknowledged", len(s.acked), n)
	}
	recvMu.Lock()
	dups := 0
	for _, k := range seen {
		dups += k - 1
	}
	recvMu.Unlock()
	if dups > 0 || redelivered > 0 {
		t.Errorf("%d messages delivered more than once, %d marked redelivered", dups, redelivered)
	}
	stats, err = faultTopicStats(ctx, r0, topicName, nil)
	if err != nil {
		t.Fatal(err)
	}
	if after := connected(stats); after != before {
		t.Errorf("the application's clients reconnected: before the faults %s; after %s", before, after)
	}
	rcancel()
	<-recvDone
}

// primaryRefused is the sum over r's brokers and operations of their
// client requests refused by the primary gate (broker.MetricPrimaryRefused).
func primaryRefused(t *testing.T, r *region.Region) float64 {
	t.Helper()
	name := strings.ReplaceAll(broker.MetricPrimaryRefused, ".", "_") + "_total"
	sum := 0.0
	for _, b := range r.Brokers() {
		u := b.WebServiceURL + "/metrics"
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			t.Fatalf("GET %s: %s", u, resp.Status)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if n, v, ok := parseSample(sc.Text()); ok && n == name {
				sum += v
			}
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return sum
}
