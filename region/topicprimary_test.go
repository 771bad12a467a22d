package region_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/region"
)

func setTopicPrimary(t *testing.T, r *region.Region, ns, local, primary string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.Policies().UpdateNamespace(ctx, ns, func(p *policy.Policies) error {
		if primary == "" {
			policy.RemoveTopicFailover(p, local)
			return nil
		}
		return policy.SetTopicFailover(p, local, policy.ActiveStandby, primary)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestTopicPrimaryOverride: a topic with its own primary lives there
// while its namespace's other topics live in the namespace's primary,
// for an unmodified client on a multi-host URL. Under a steady stream of
// sends to two topics, one of them is moved to the other region (the
// namespace's primary drains it there first) and then back (the topic
// follows its namespace again): only its clients move, no send fails,
// and the copy holds every message once, in order.
func TestTopicPrimaryOverride(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	f := startFederation(t, 2, nil)
	r0, r1 := f.Regions[0], f.Regions[1]
	setPrimary(t, r0, "acme/geo", "r0")
	const moved, stays = "persistent://acme/geo/moved", "persistent://acme/geo/stays"
	c := pulsarClient(t, multiHostURL(f))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	senders := map[string]*sender{}
	for _, tp := range []string{moved, stays} {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, Name: "app", BatchingMaxPublishDelay: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "app", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		senders[tp] = &sender{p: p, acked: map[int]time.Time{}}
	}
	where := func(r *region.Region, tp string) [2]int {
		pr, co := appClients(ctx, r, tp)
		return [2]int{pr, co}
	}
	// awaitClients waits until the application's producer and consumer of
	// tp are in r (polling another component's state).
	awaitClients := func(r, other *region.Region, tp string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for where(r, tp) != [2]int{1, 1} || where(other, tp) != [2]int{0, 0} {
			if time.Now().After(deadline) {
				t.Fatalf("%s's clients did not move to %s: %s %v, %s %v", tp, r.Name(), r.Name(), where(r, tp), other.Name(), where(other, tp))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	awaitClients(r0, r1, moved)
	awaitClients(r0, r1, stays)

	// Both topics take a send every 3 ms throughout; moved goes to r1 and
	// back to its namespace's primary.
	stop := make(chan struct{})
	sent := map[string]chan int{moved: make(chan int, 1), stays: make(chan int, 1)}
	for tp, s := range senders {
		go func() { sent[tp] <- s.run(ctx, 0, 3*time.Millisecond, stop) }()
	}
	time.Sleep(300 * time.Millisecond) // mid-stream
	setTopicPrimary(t, r0, "acme/geo", "moved", "r1")
	awaitClients(r1, r0, moved)
	time.Sleep(300 * time.Millisecond) // sends to moved in r1
	setTopicPrimary(t, r0, "acme/geo", "moved", "")
	awaitClients(r0, r1, moved)
	time.Sleep(300 * time.Millisecond) // sends after the move back
	close(stop)
	for tp, s := range senders {
		n := <-sent[tp]
		s.wg.Wait()
		if len(s.failed) > 0 {
			t.Fatalf("%s: %d sends failed, first: %v", tp, len(s.failed), s.failed[0])
		}
		gap, _ := s.longestGap()
		t.Logf("%s: %d sends, longest gap between acknowledgements %v", tp, n, gap.Round(time.Millisecond))
		// The primary's copy (a client reading another region is sent to
		// the primary) holds what r1 stored meanwhile too.
		got := consumeAll(t, pulsarClient(t, r0.Endpoints().ServiceURL), tp, n, time.Minute)
		faultCheck(t, "r0's copy of "+tp, got, n, "app")
	}
	if got := where(r1, stays); got != [2]int{0, 0} {
		t.Errorf("stays' clients went to r1: %v", got)
	}
}
