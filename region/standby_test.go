package region_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/region"
)

// multiHostURL is a service URL listing every region's broker, as an
// application of an active-standby namespace would use.
func multiHostURL(f *region.Federation) string {
	var hosts []string
	for _, r := range f.Regions {
		hosts = append(hosts, strings.TrimPrefix(r.Endpoints().ServiceURL, "pulsar://"))
	}
	return "pulsar://" + strings.Join(hosts, ",")
}

func setPrimary(t *testing.T, r *region.Region, ns, primary string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.Policies().UpdateNamespace(ctx, ns, func(p *policy.Policies) error {
		return policy.SetFailover(p, policy.ActiveStandby, primary)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestActiveStandbyPlannedFailover: an unmodified client on a multi-host
// URL lands in the primary region whichever host it asks; when the
// primary moves, the old primary sends its producers and consumers away
// and they continue in the new one without an error reaching the
// application; the new primary's copy of the topic holds every
// acknowledged message once, in order.
func TestActiveStandbyPlannedFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	f := startFederation(t, 2, nil)
	r0, r1 := f.Regions[0], f.Regions[1]
	setPrimary(t, r0, "acme/geo", "r0")
	c := pulsarClient(t, multiHostURL(f))
	const topicName = "persistent://acme/geo/standby"
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
	where := func(r *region.Region) (producers, consumers int) {
		st, err := faultTopicStats(ctx, r, topicName, nil)
		if err != nil {
			return 0, 0
		}
		for _, pp := range st.Publishers {
			if !strings.HasPrefix(pp.ProducerName, "isobar.") {
				producers++
			}
		}
		if s, ok := st.Subscriptions["app"]; ok {
			consumers = len(s.Consumers)
		}
		return producers, consumers
	}
	if pr, co := where(r0); pr != 1 || co != 1 {
		t.Fatalf("r0 (primary) has %d producers and %d consumers of the application, want 1 and 1", pr, co)
	}
	if pr, co := where(r1); pr != 0 || co != 0 {
		t.Fatalf("r1 (standby) has %d producers and %d consumers of the application, want none", pr, co)
	}

	var (
		mu      sync.Mutex
		sendErr []error
		wg      sync.WaitGroup
	)
	send := func(from, n int) {
		for i := from; i < from+n; i++ {
			wg.Add(1)
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("app:%d", i))}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					sendErr = append(sendErr, err)
					mu.Unlock()
				}
			})
			time.Sleep(2 * time.Millisecond) // a steady trickle across the failover
		}
	}
	seen := map[int]int{}
	recv := func(until int) {
		t.Helper()
		for {
			done := true
			for i := range until {
				if seen[i] == 0 {
					done = false
					break
				}
			}
			if done {
				return
			}
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatalf("receive: %v (have %d distinct)", err, len(seen))
			}
			var i int
			fmt.Sscanf(string(m.Payload()), "app:%d", &i)
			seen[i]++
			cons.Ack(m)
		}
	}
	send(0, 200)
	wg.Wait()
	recv(200)

	start := time.Now()
	moved := make(chan struct{})
	go func() {
		defer close(moved)
		time.Sleep(200 * time.Millisecond) // mid-stream
		if _, err := r0.Policies().UpdateNamespace(ctx, "acme/geo", func(p *policy.Policies) error {
			return policy.SetFailover(p, policy.ActiveStandby, "r1")
		}); err != nil {
			t.Errorf("set primary r1: %v", err)
		}
	}()
	send(200, 500)
	<-moved
	wg.Wait()
	t.Logf("500 sends across the failover took %v", time.Since(start).Round(time.Millisecond))
	if len(sendErr) > 0 {
		t.Fatalf("%d sends failed across the failover, first: %v", len(sendErr), sendErr[0])
	}
	recv(700)
	if pr, co := where(r1); pr != 1 || co != 1 {
		t.Errorf("r1 (new primary) has %d producers and %d consumers of the application, want 1 and 1", pr, co)
	}
	if pr, co := where(r0); pr != 0 || co != 0 {
		t.Errorf("r0 (old primary) still has %d producers and %d consumers of the application", pr, co)
	}
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	t.Logf("consumer: 700 distinct messages, %d redelivered (subscription state does not travel between regions yet)", dups)

	// r1's copy: every message once, in order.
	check := pulsarClient(t, r1.Endpoints().ServiceURL)
	got := consumeAll(t, check, topicName, 700, time.Minute)
	faultCheck(t, "r1's copy", got, 700, "app")
}
