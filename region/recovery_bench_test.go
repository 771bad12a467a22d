package region_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/region"
)

// BenchmarkRegionRecovery measures how fast a region comes back (issue
// 24, point 4), in a federation of two regions behind the emulated WAN
// (40 ms one way), on an active-active topic of acme/geo:
//
//   - restart: a producer in r1 sends 1k msg/s; r1 is killed (every
//     process, as a crash) and started again on its data after
//     ISOBAR_RECOVERY_DOWN (default 5s). start-ms is how long
//     StartRegion took (until every process is ready), writes-ms the time
//     from then to the first publish r1 acknowledges, through a new
//     client.
//   - heal: a producer in r0 sends 1k msg/s and a consumer in r1 reads;
//     r1 is cut off (partition) for ISOBAR_RECOVERY_DOWN, then healed.
//     caught-up-ms is the time from the heal to r1's consumer having
//     every message r0 acknowledged before the heal.
//
// Run:
//
//	go test -run '^$' -bench BenchmarkRegionRecovery -benchtime 1x -timeout 20m ./region/
func BenchmarkRegionRecovery(b *testing.B) {
	if testing.Short() {
		b.Skip("federation benchmark: skipped with -short")
	}
	down := 5 * time.Second
	if s := os.Getenv("ISOBAR_RECOVERY_DOWN"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			b.Fatalf("ISOBAR_RECOVERY_DOWN=%q: want a duration such as 5s", s)
		}
		down = d
	}
	// The port plan, as `isobar dev` lays it out: a region started again
	// listens where it did, so its brokers take over their previous
	// lives' registrations at once (docs/ownership.md) and clients find
	// it at the same addresses.
	f := startBenchFederationWith(b, nil, func(c *region.FederationConfig) {
		c.WAN = &region.WANConfig{Latency: 40 * time.Millisecond}
		c.BasePort = recoveryBasePort
	})
	pool := benchPayloads(benchPoolSize, benchPayloadSize, 4)

	b.Run("restart", func(b *testing.B) {
		var writes, starts []time.Duration
		for i := range b.N {
			topicName := fmt.Sprintf("persistent://acme/geo/restart-%d", i)
			c1 := benchClient(b, f.Regions[1].Endpoints().ServiceURL)
			p := benchProducer(b, c1, topicName)
			s := newRecoverySender(p, pool)
			stop := s.start(1000)
			b.Cleanup(stop)
			benchWaitFor(b, 30*time.Second, func() bool { return s.acked() >= 1000 })
			if err := f.KillRegion("r1"); err != nil {
				b.Fatal(err)
			}
			stop()
			time.Sleep(down) // the outage itself, not a synchronisation
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			starting := time.Now()
			if err := f.StartRegion(ctx, "r1"); err != nil {
				cancel()
				b.Fatal(err)
			}
			cancel()
			up := time.Now()
			starts = append(starts, up.Sub(starting))
			// A new client: the measure is the region's readiness, not
			// how far the old client's reconnection backoff has grown.
			c2 := benchClient(b, f.Regions[1].Endpoints().ServiceURL)
			var first time.Time
			benchWaitFor(b, 2*time.Minute, func() bool {
				p2, err := c2.CreateProducer(pulsar.ProducerOptions{Topic: topicName, SendTimeout: 5 * time.Second})
				if err != nil {
					return false
				}
				defer p2.Close()
				sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer scancel()
				if _, err := p2.Send(sctx, &pulsar.ProducerMessage{Payload: pool[0]}); err != nil {
					return false
				}
				first = time.Now()
				return true
			})
			p.Close()
			c1.Close()
			c2.Close()
			writes = append(writes, first.Sub(up))
			b.Logf("restart %d: r1 down %v; started (every process ready) in %v; first acknowledged publish %v after that", i, down, up.Sub(starting).Round(time.Millisecond), first.Sub(up).Round(time.Millisecond))
		}
		b.ReportMetric(float64(slices.Max(starts))/1e6, "start-ms")
		b.ReportMetric(float64(slices.Max(writes))/1e6, "writes-ms")
	})

	b.Run("heal", func(b *testing.B) {
		var caught []time.Duration
		for i := range b.N {
			topicName := fmt.Sprintf("persistent://acme/geo/heal-%d", i)
			c0 := benchClient(b, f.Regions[0].Endpoints().ServiceURL)
			c1 := benchClient(b, f.Regions[1].Endpoints().ServiceURL)
			cons := benchConsumer(b, c1, topicName, "app")
			p := benchProducer(b, c0, topicName)
			s := newRecoverySender(p, pool)
			got := map[int]bool{}
			var gmu sync.Mutex
			rctx, rcancel := context.WithCancel(context.Background())
			go func() {
				for {
					m, err := cons.Receive(rctx)
					if err != nil {
						return
					}
					var n int
					fmt.Sscanf(m.Properties()["n"], "%d", &n)
					gmu.Lock()
					got[n] = true
					gmu.Unlock()
					cons.Ack(m)
				}
			}()
			stop := s.start(1000)
			b.Cleanup(stop)
			benchWaitFor(b, 30*time.Second, func() bool { gmu.Lock(); defer gmu.Unlock(); return len(got) >= 1000 })
			if err := f.WAN().Partition("r1"); err != nil {
				b.Fatal(err)
			}
			time.Sleep(down) // the outage itself, not a synchronisation
			stop()
			if err := f.WAN().Heal("r1"); err != nil {
				b.Fatal(err)
			}
			healed := time.Now()
			want := s.ackedSet()
			benchWaitFor(b, 2*time.Minute, func() bool {
				gmu.Lock()
				defer gmu.Unlock()
				for n := range want {
					if !got[n] {
						return false
					}
				}
				return true
			})
			d := time.Since(healed)
			rcancel()
			cons.Close()
			p.Close()
			c0.Close()
			c1.Close()
			caught = append(caught, d)
			b.Logf("heal %d: r1 cut off %v at 1k msg/s; every one of %d acknowledged messages received in r1 %v after the heal", i, down, len(want), d.Round(time.Millisecond))
		}
		b.ReportMetric(float64(slices.Max(caught))/1e6, "caught-up-ms")
	})
}

// recoveryBasePort is BenchmarkRegionRecovery's port plan (two regions:
// 5000-5242 and 6793-6993), apart from cmd/isobar's tests'.
const recoveryBasePort = 5000

// recoverySender sends numbered messages (property "n") at a steady rate
// and records when each was acknowledged.
type recoverySender struct {
	p    pulsar.Producer
	pool [][]byte
	mu   sync.Mutex
	acks map[int]time.Time
}

func newRecoverySender(p pulsar.Producer, pool [][]byte) *recoverySender {
	return &recoverySender{p: p, pool: pool, acks: map[int]time.Time{}}
}

// start sends rate msg/s until the returned stop is called.
func (s *recoverySender) start(rate int) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		start, i := time.Now(), 0
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			due := int(time.Since(start).Seconds() * float64(rate))
			for ; i < due; i++ {
				n := i
				s.p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: s.pool[n%len(s.pool)], Properties: map[string]string{"n": strconv.Itoa(n)}},
					func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
						if err != nil {
							return
						}
						s.mu.Lock()
						s.acks[n] = time.Now()
						s.mu.Unlock()
					})
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-finished }) }
}

func (s *recoverySender) acked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acks)
}

func (s *recoverySender) lastAck() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last time.Time
	for _, t := range s.acks {
		if t.After(last) {
			last = t
		}
	}
	return last
}

func (s *recoverySender) firstAckAfter(t0 time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Time
	for _, t := range s.acks {
		if t.After(t0) && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

func (s *recoverySender) ackedSet() map[int]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]bool, len(s.acks))
	for n := range s.acks {
		out[n] = true
	}
	return out
}
