package region_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/region"
)

// TestSyncReplicationFailoverLosesNothing: an active-standby namespace
// of two regions with synchronous replication to the other region and a
// fallback after 1 s, a steady stream of sends from a multi-host client
// behind a 40 ms WAN, and the primary killed or partitioned, then the
// standby promoted. The new primary holds every message that was ever
// acknowledged at the moment it takes over, without the old primary
// coming back: nothing acknowledged was only in the old primary (the
// partitioned one, cut off from the global store, holds its publishes
// rather than fall back). The new primary, whose only other region is
// gone, falls back and takes writes, degraded. When the old primary comes
// back, nothing is stored twice (what it held unacknowledged was resent
// by the producer to the new primary, and its late copy dropped), and the
// new primary is synchronous again once the old one caught up.
func TestSyncReplicationFailoverLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("federation failover test: skipped with -short")
	}
	t.Parallel()
	for _, fault := range []string{"kill", "partition"} {
		t.Run(fault, func(t *testing.T) {
			f := startFederationWith(t, 2, nil, region.Deps{}, func(c *region.FederationConfig) {
				c.WAN = &region.WANConfig{Latency: 40 * time.Millisecond}
			})
			r0, r1 := f.Regions[0], f.Regions[1]
			setPrimary(t, r0, "acme/geo", "r0")
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			if _, err := r0.Policies().UpdateNamespace(ctx, "acme/geo", func(p *policy.Policies) error {
				p.SyncReplication = &policy.SyncReplication{Regions: 1, FallbackAfterSeconds: 1}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			c := pulsarClient(t, multiHostURL(f))
			topicName := "persistent://acme/geo/sync-" + fault
			p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topicName, Name: "app", BatchingMaxPublishDelay: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			s := &sender{p: p, acked: map[int]time.Time{}}
			stop := make(chan struct{})
			last := make(chan int, 1)
			go func() { last <- s.run(ctx, 0, 5*time.Millisecond, stop) }()
			faultWaitFor(t, 60*time.Second, "100 synchronous acknowledgements", func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return len(s.acked) >= 100
			})
			if st, err := faultTopicStats(ctx, r0, topicName, nil); err != nil || st.SyncReplication == nil || st.SyncReplication.Regions != 1 {
				t.Fatalf("r0's topic is not synchronous: %+v, %v", st, err)
			}

			switch fault {
			case "kill":
				if err := f.KillRegion("r0"); err != nil {
					t.Fatal(err)
				}
			case "partition":
				if err := f.WAN().Partition("r0"); err != nil {
					t.Fatal(err)
				}
			}
			setPrimary(t, r1, "acme/geo", "r1")
			faultWaitFor(t, 60*time.Second, "the producer to move to r1", func() bool {
				pr, _ := appClients(ctx, r1, topicName)
				return pr == 1
			})
			// Some sends through the new primary: it waits for no one now
			// (r0 is gone), so they are acknowledged.
			s.mu.Lock()
			moved := len(s.acked)
			s.mu.Unlock()
			faultWaitFor(t, 60*time.Second, "sends through r1", func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return len(s.acked) >= moved+100
			})
			if st, err := faultTopicStats(ctx, r1, topicName, nil); err != nil || st.SyncReplication == nil || st.SyncReplication.State != adminapi.SyncStateDegraded {
				t.Fatalf("r1 took writes without its only other region, but its topic is not degraded: %+v, %v", st.SyncReplication, err)
			}
			close(stop)
			n := <-last
			rto, _ := s.longestGap()
			t.Logf("%s: %d sent, %d acknowledged; longest gap between acknowledgements %v", fault, n, len(s.acked), rto.Round(time.Millisecond))

			// Every acknowledged message is in r1 now, with r0 still down.
			check := pulsarClient(t, r1.Endpoints().ServiceURL)
			cons, err := check.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "check", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			have := map[int]int{}
			late := 0
			s.mu.Lock()
			acked := make(map[int]bool, len(s.acked))
			for k := range s.acked {
				acked[k] = true
			}
			s.mu.Unlock()
			missing := func() (out []int) {
				for i := range acked {
					if have[i] == 0 {
						out = append(out, i)
					}
				}
				return out
			}
			read := func(until func() bool, within time.Duration) {
				rctx, rcancel := context.WithTimeout(ctx, within)
				defer rcancel()
				for !until() {
					m, err := cons.Receive(rctx)
					if err != nil {
						return
					}
					var i int
					fmt.Sscanf(string(m.Payload()), "app:%d", &i)
					have[i]++
					if _, ok := m.Properties()[broker.LateProperty]; ok {
						late++
					}
					cons.Ack(m)
				}
			}
			read(func() bool { return len(missing()) == 0 }, 30*time.Second)
			if m := missing(); len(m) > 0 {
				t.Fatalf("RPO not 0: %d acknowledged messages are not in the new primary while the old one is down: %v", len(m), m[:min(10, len(m))])
			}
			t.Logf("%s: every one of %d acknowledged messages was in r1 when it took over (RPO 0)", fault, len(acked))

			// The old primary comes back; its replication to r1 drains.
			switch fault {
			case "kill":
				if err := f.StartRegion(ctx, "r0"); err != nil {
					t.Fatal(err)
				}
				r0 = f.Regions[0] // started again, on new ports
			case "partition":
				if err := f.WAN().Heal("r0"); err != nil {
					t.Fatal(err)
				}
			}
			faultWaitFor(t, 90*time.Second, "r0's replication to r1 to drain", func() bool {
				st, err := faultTopicStats(ctx, r0, topicName, nil)
				if err != nil {
					return false
				}
				rs, ok := st.Replication["r1"]
				return ok && rs.Connected && rs.ReplicationBacklog == 0
			})
			faultWaitFor(t, 60*time.Second, "r1 to be synchronous again", func() bool {
				st, err := faultTopicStats(ctx, r1, topicName, nil)
				return err == nil && st.SyncReplication != nil && st.SyncReplication.State == adminapi.SyncStateSync
			})
			read(func() bool { return false }, 3*time.Second) // anything it brought
			dups := 0
			for i, k := range have {
				if k > 1 {
					dups++
					t.Errorf("message %d stored %d times in r1", i, k)
				}
			}
			t.Logf("%s: after the old primary came back: %d late messages, %d stored twice", fault, late, dups)
		})
	}
}
