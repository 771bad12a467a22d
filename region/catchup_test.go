package region_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/region"
)

// TestReplicationCatchesUpAfterPartition (issue 24, point 4): two regions
// behind the emulated WAN (40 ms one way).
//
//   - heal: r0 produces steadily while r1 is cut off for 3 s, so a
//     frame is in flight when the link goes; r1 must hold every message
//     within 5 s of the heal, once each and in order. The frame's reply
//     is lost with the gateway connection; the stream used to wait the
//     whole RequestTimeout (15 s) for it, about 12 s after the heal.
//   - slow: a frame that takes seconds on a bandwidth-limited link is
//     not given up while the remote is there (its probes queue behind
//     it and go unanswered, which is no reason to give it up): it goes
//     through with no failure of the stream.
func TestReplicationCatchesUpAfterPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	t.Parallel()
	f := startFederationWith(t, 2, nil, region.Deps{}, func(c *region.FederationConfig) {
		c.WAN = &region.WANConfig{Latency: 40 * time.Millisecond}
	})
	wan := f.WAN()
	r0, r1 := f.Regions[0], f.Regions[1]
	c0, c1 := pulsarClient(t, r0.Endpoints().ServiceURL), pulsarClient(t, r1.Endpoints().ServiceURL)

	t.Run("heal", func(t *testing.T) {
		const topicName = "persistent://acme/geo/catchup-heal"
		cons, err := c1.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "app", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		got := &received{}
		rctx, rcancel := context.WithCancel(context.Background())
		recvDone := make(chan struct{})
		go func() {
			defer close(recvDone)
			for {
				m, err := cons.Receive(rctx)
				if err != nil {
					return
				}
				got.add(string(m.Payload()))
				cons.Ack(m)
			}
		}()
		defer func() { rcancel(); <-recvDone }()
		total := func() int { got.mu.Lock(); defer got.mu.Unlock(); return got.total }

		p, err := c0.CreateProducer(pulsar.ProducerOptions{Topic: topicName, BatchingMaxPublishDelay: 2 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		sent := steadyProducer(t, p, "r0", 500)
		waitFor(t, 30*time.Second, "r1 to receive 200 replicated messages", func() bool { return total() >= 200 })

		if err := wan.Partition("r1"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // the partition itself, not a synchronisation
		n, err := sent()            // every send acknowledged in r0
		if err != nil {
			t.Fatalf("send in r0: %v", err)
		}
		if err := wan.Heal("r1"); err != nil {
			t.Fatal(err)
		}
		healed := time.Now()
		waitFor(t, 60*time.Second, fmt.Sprintf("r1 to receive all %d messages", n), func() bool { return total() >= n })
		took := time.Since(healed)
		t.Logf("r1 cut off 3s with r0 producing 500 msg/s: all %d messages in r1 %v after the heal", n, took.Round(time.Millisecond))
		if took > 5*time.Second {
			t.Errorf("r1 received every message %v after the heal, want within 5s", took.Round(time.Millisecond))
		}
		got.mu.Lock()
		defer got.mu.Unlock()
		faultCheck(t, "r1", got, n, "r0")
	})

	t.Run("slow", func(t *testing.T) {
		const topicName = "persistent://acme/geo/catchup-slow"
		link := wan.Link("r0", "r1")
		// 1 MiB of random (incompressible) payload through 256 KiB/s:
		// a frame takes seconds, many times ProbeInterval.
		link.SetBandwidth(256 << 10)
		defer link.SetBandwidth(0)
		const n = 256
		p, err := c0.CreateProducer(pulsar.ProducerOptions{Topic: topicName, BatchingMaxPublishDelay: 2 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var sendErr error
		for i := range n {
			payload := make([]byte, 4<<10)
			rand.Read(payload)
			copy(payload, fmt.Sprintf("r0:%d\x00", i))
			wg.Add(1)
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					sendErr = err
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if sendErr != nil {
			t.Fatal(sendErr)
		}
		start := time.Now()
		cons, err := c1.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "app", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		got := &received{}
		for got.total < n {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatalf("r1: after %d of %d: %v", got.total, n, err)
			}
			text, _, _ := bytes.Cut(m.Payload(), []byte{0})
			got.add(string(text))
			cons.Ack(m)
		}
		t.Logf("1 MiB through a 256 KiB/s link: all %d messages in r1 after %v", n, time.Since(start).Round(time.Millisecond))
		faultCheck(t, "r1", got, n, "r0")
		if st := faultSumStats(r0, topicName, "r1"); st.Errors != 0 {
			t.Errorf("r0's stream to r1 failed %d times over a slow but working link (last: %s)", st.Errors, st.LastError)
		}
	})
}

// steadyProducer sends "src:i" at rate msg/s from a goroutine until the
// returned function is called, which stops it, waits for every send to be
// acknowledged and returns how many were sent, or the first send error.
func steadyProducer(t *testing.T, p pulsar.Producer, src string, rate int) (stop func() (int, error)) {
	t.Helper()
	done, finished := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sendErr error
	sent := 0
	go func() {
		defer close(finished)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for due := int(time.Since(start).Seconds() * float64(rate)); sent < due; sent++ {
				wg.Add(1)
				p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%s:%d", src, sent)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					defer wg.Done()
					if err != nil {
						mu.Lock()
						sendErr = err
						mu.Unlock()
					}
				})
			}
		}
	}()
	var once sync.Once
	stop = func() (int, error) {
		once.Do(func() {
			close(done)
			<-finished
			wg.Wait()
		})
		mu.Lock()
		defer mu.Unlock()
		return sent, sendErr
	}
	t.Cleanup(func() { stop() })
	return stop
}
