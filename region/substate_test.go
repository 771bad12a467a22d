package region_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/topic"
)

// TestSubscriptionStateFollowsThePrimary: a partitioned topic whose log
// in each region interleaves that region's own messages with the other's
// (written while the namespace was active-active); in the primary r0, a
// Shared subscription acknowledges individually, out of order, all but
// every fifth message, and a Failover subscription acknowledges
// cumulatively up to a point on each partition and individually beyond
// it. The standby r1 applies both states to its own copies; then r0 is
// killed and r1 promoted, and each subscription receives from r1 exactly
// the messages it had not acknowledged: nothing acknowledged comes back,
// nothing unacknowledged is missing.
func TestSubscriptionStateFollowsThePrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("federation failover test: skipped with -short")
	}
	t.Parallel()
	f := startFederation(t, 2, nil)
	r0, r1 := f.Regions[0], f.Regions[1]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	name, err := topic.Parse("persistent://acme/geo/substate")
	if err != nil {
		t.Fatal(err)
	}
	const parts = 2
	if err := r0.Policies().CreatePartitioned(ctx, name, parts); err != nil {
		t.Fatal(err)
	}

	// Active-active: both regions publish, in alternating rounds.
	producer := func(c pulsar.Client) pulsar.Producer {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: name.String(), DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	p0, p1 := producer(pulsarClient(t, r0.Endpoints().ServiceURL)), producer(pulsarClient(t, r1.Endpoints().ServiceURL))
	const rounds, per = 8, 25
	all := map[string]bool{}
	for round := range rounds {
		for _, x := range []struct {
			p   pulsar.Producer
			tag string
		}{{p0, "r0"}, {p1, "r1"}} {
			for i := range per {
				payload := fmt.Sprintf("%s:%d", x.tag, round*per+i)
				if _, err := x.p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(payload)}); err != nil {
					t.Fatal(err)
				}
				all[payload] = true
			}
		}
	}
	total := len(all)
	setPrimary(t, r0, "acme/geo", "r0")
	backlog := func(r *region.Region, sub string) int64 {
		var n int64
		for i := range parts {
			st, err := faultTopicStats(ctx, r, name.Partitioned(i).String(), nil)
			if err != nil {
				return -1
			}
			s, ok := st.Subscriptions[sub]
			if !ok {
				return -1
			}
			n += s.MsgBacklog
		}
		return n
	}

	// In the primary, through a client that lists both regions.
	c := pulsarClient(t, multiHostURL(f))
	subscribe := func(sub string, typ pulsar.SubscriptionType) pulsar.Consumer {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: name.String(), SubscriptionName: sub, Type: typ,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	receiveAll := func(cons pulsar.Consumer, n int) []pulsar.Message {
		var out []pulsar.Message
		seen := map[string]bool{}
		for len(seen) < n {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatalf("receive: %v (have %d of %d)", err, len(seen), n)
			}
			if !seen[string(m.Payload())] {
				seen[string(m.Payload())] = true
				out = append(out, m)
			}
		}
		return out
	}
	unacked := map[string]map[string]bool{"ind": {}, "cum": {}}

	// Shared: every message but each fifth, acknowledged in reverse order.
	ind := subscribe("ind", pulsar.Shared)
	msgs := receiveAll(ind, total)
	for i := len(msgs) - 1; i >= 0; i-- {
		if i%5 == 0 {
			unacked["ind"][string(msgs[i].Payload())] = true
			continue
		}
		if err := ind.Ack(msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	// Failover: cumulatively up to the 60th message of each partition,
	// then every third one individually.
	cum := subscribe("cum", pulsar.Failover)
	byPart := map[string][]pulsar.Message{}
	for _, m := range receiveAll(cum, total) {
		byPart[m.Topic()] = append(byPart[m.Topic()], m)
	}
	if len(byPart) != parts {
		t.Fatalf("messages came from %d partitions, want %d", len(byPart), parts)
	}
	for _, ms := range byPart {
		if err := cum.AckCumulative(ms[59]); err != nil {
			t.Fatal(err)
		}
		for i := 60; i < len(ms); i++ {
			if i%3 == 0 {
				if err := cum.Ack(ms[i]); err != nil {
					t.Fatal(err)
				}
			} else {
				unacked["cum"][string(ms[i].Payload())] = true
			}
		}
	}
	ind.Close()
	cum.Close()
	// Batch-index acknowledgements, on a topic written in batches of 10:
	// the whole first batch and every third message of the others.
	const batchTopic = "persistent://acme/geo/substate-batches"
	bp, err := c.CreateProducer(pulsar.ProducerOptions{Topic: batchTopic, BatchingMaxMessages: 10, BatchingMaxPublishDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var bwg sync.WaitGroup
	for i := range 50 {
		bwg.Add(1)
		bp.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("b:%02d", i))}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer bwg.Done()
			if err != nil {
				t.Error(err)
			}
		})
	}
	bp.Flush()
	bwg.Wait()
	bp.Close()
	batchConsumer := func() pulsar.Consumer {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: batchTopic, SubscriptionName: "bat", Type: pulsar.Shared,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, EnableBatchIndexAcknowledgment: true})
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	bat := batchConsumer()
	unackedBatch := map[string]bool{}
	for _, m := range receiveAll(bat, 50) {
		var i int
		fmt.Sscanf(string(m.Payload()), "b:%d", &i)
		if i < 10 || i%3 == 0 {
			if err := bat.Ack(m); err != nil {
				t.Fatal(err)
			}
		} else {
			unackedBatch[string(m.Payload())] = true
		}
	}
	bat.Close()
	batchBacklog := func(r *region.Region) int64 {
		st, err := faultTopicStats(ctx, r, batchTopic, nil)
		if s, ok := st.Subscriptions["bat"]; err == nil && ok {
			return s.MsgBacklog
		}
		return -1
	}
	// The first batch is acknowledged whole: one entry fewer, applied in
	// the same state as the partial acknowledgements.
	faultWaitFor(t, 30*time.Second, "r1's bat to apply r0's state", func() bool { return batchBacklog(r1) == 4 })

	// A third subscription's consumer has received everything in r0 and
	// acknowledges nothing before the failover; it stays open.
	moved := subscribe("moved", pulsar.Shared)
	defer moved.Close()
	fromR0 := receiveAll(moved, total)
	for sub, want := range unacked {
		faultWaitFor(t, 30*time.Second, "r0's "+sub+" to hold its acknowledgements", func() bool {
			return backlog(r0, sub) == int64(len(want))
		})
		// The standby's copy follows, within the shipping interval.
		faultWaitFor(t, 30*time.Second, "r1's "+sub+" to apply r0's state", func() bool {
			return backlog(r1, sub) == int64(len(want))
		})
	}

	// Lose r0; promote r1.
	if err := f.KillRegion("r0"); err != nil {
		t.Fatal(err)
	}
	setPrimary(t, r1, "acme/geo", "r1")

	// The open consumer moves to r1 by itself; then the application
	// acknowledges what it got in r0, by r0's message ids. r1 recognises
	// them (ledger ids carry their region) and translates those of
	// messages first written in r0 (200) to its own copies; the ids r0
	// gave messages that came from r1 name no message of r0's origin and
	// acknowledge nothing: those 200 stay in the backlog, and no other
	// entry of r1 is ever acknowledged in their place.
	faultWaitFor(t, 60*time.Second, "the consumer of moved to reconnect in r1", func() bool {
		for i := range parts {
			st, err := faultTopicStats(ctx, r1, name.Partitioned(i).String(), nil)
			if err != nil || len(st.Subscriptions["moved"].Consumers) == 0 {
				return false
			}
		}
		return true
	})
	fromOrigin := map[string]int{}
	for _, m := range fromR0 {
		fromOrigin[string(m.Payload())[:2]]++
		if err := moved.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	faultWaitFor(t, 30*time.Second, "r1 to translate r0's message ids", func() bool {
		return backlog(r1, "moved") == int64(fromOrigin["r1"])
	})
	time.Sleep(time.Second) // nothing more happens: assert it stays
	if n := backlog(r1, "moved"); n != int64(fromOrigin["r1"]) {
		t.Errorf("r1's moved backlog %d after the application acknowledged r0's ids, want %d", n, fromOrigin["r1"])
	}
	t.Logf("moved: %d acknowledgements by r0's ids translated in r1; %d (messages of r1's origin, by r0's ids) not recognised, still pending", fromOrigin["r0"], fromOrigin["r1"])

	var wg sync.WaitGroup
	for sub, want := range unacked {
		typ := pulsar.Shared
		if sub == "cum" {
			typ = pulsar.Failover
		}
		cons := subscribe(sub, typ)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cons.Close()
			got := map[string]int{}
			for len(got) < len(want) {
				m, err := cons.Receive(ctx)
				if err != nil {
					t.Errorf("%s: receive: %v (have %d of %d)", sub, err, len(got), len(want))
					return
				}
				got[string(m.Payload())]++
				cons.Ack(m)
			}
			// Then nothing more.
			qctx, qcancel := context.WithTimeout(ctx, 3*time.Second)
			defer qcancel()
			for {
				m, err := cons.Receive(qctx)
				if err != nil {
					break
				}
				got[string(m.Payload())]++
			}
			var extra, dup []string
			for p, n := range got {
				if !want[p] {
					extra = append(extra, p)
				}
				if n > 1 {
					dup = append(dup, p)
				}
			}
			slices.Sort(extra)
			if len(extra) > 0 || len(dup) > 0 {
				t.Errorf("%s: after failover %d messages acknowledged in r0 came again (%v), %d twice (%v)", sub, len(extra), extra[:min(10, len(extra))], len(dup), dup[:min(10, len(dup))])
			}
			missing := 0
			for p := range want {
				if got[p] == 0 {
					missing++
				}
			}
			if missing > 0 {
				t.Errorf("%s: %d unacknowledged messages missing after failover", sub, missing)
			}
			t.Logf("%s: %d of %d messages unacknowledged in r0; r1 delivered exactly those (%v)", sub, len(want), total, slices.Sorted(maps.Keys(want))[:3])
		}()
	}
	wg.Wait()

	// The batches: only the messages not acknowledged come, each once.
	bat = batchConsumer()
	defer bat.Close()
	got := map[string]int{}
	for len(got) < len(unackedBatch) {
		m, err := bat.Receive(ctx)
		if err != nil {
			t.Fatalf("bat: receive: %v (have %d of %d)", err, len(got), len(unackedBatch))
		}
		got[string(m.Payload())]++
	}
	qctx, qcancel := context.WithTimeout(ctx, 3*time.Second)
	defer qcancel()
	for {
		m, err := bat.Receive(qctx)
		if err != nil {
			break
		}
		got[string(m.Payload())]++
	}
	for p, n := range got {
		if !unackedBatch[p] || n > 1 {
			t.Errorf("bat: %s delivered %d times after failover; acknowledged in r0: %v", p, n, !unackedBatch[p])
		}
	}
	t.Logf("bat: %d messages of 5 batches unacknowledged in r0 (batch-index acknowledgements); r1 delivered exactly those", len(unackedBatch))
}
