package region_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/region"
)

// TestBrokerKilledUnderLoad kills the broker that owns a topic while a
// producer and a consumer are busy on it: clients move to the other
// broker once the dead one's lease expires, and the topic then holds every
// acknowledged message exactly once (de-duplication on), in the
// producer's order; the consumer sees every one of them.
func TestBrokerKilledUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("broker failover takes ~15 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := region.Start(ctx, haConfig(t), region.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	dedup := true
	if err := r.Policies().CreateNamespace(ctx, "public/ha", &policy.Policies{DeduplicationEnabled: &dedup}); err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, b := range r.Brokers() {
		hosts = append(hosts, strings.TrimPrefix(b.ServiceURL, "pulsar://"))
	}
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + strings.Join(hosts, ","), OperationTimeout: 30 * time.Second,
		Logger: plog.NewLoggerWithLogrus(l)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	const topic = "persistent://public/ha/orders"
	// A subscription that never acknowledges keeps every ledger (without
	// it, ledgers the consumer finished are trimmed, as in Pulsar without
	// retention) so the stored log can be checked at the end.
	hold, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "hold"})
	if err != nil {
		t.Fatal(err)
	}
	hold.Close()
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Failover})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "p1", SendTimeout: time.Minute, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	owner := -1
	for i, b := range r.Brokers() {
		if len(r.Broker(i).Topics()) > 0 {
			owner = i
			t.Logf("topic owned by broker %d (%s)", i, b.ServiceURL)
		}
	}
	if owner < 0 {
		t.Fatal("no broker has the topic loaded")
	}

	var (
		mu       sync.Mutex
		acked    = map[int]bool{}
		received []int
		wg       sync.WaitGroup
	)
	go func() {
		for m := range cons.Chan() {
			var i int
			fmt.Sscanf(string(m.Payload()), "msg-%d", &i)
			mu.Lock()
			received = append(received, i)
			mu.Unlock()
			cons.Ack(m)
		}
	}()
	const n = 3000
	killed := make(chan struct{})
	for i := range n {
		if i == n/3 {
			// Kill once a good part is acknowledged.
			for {
				mu.Lock()
				k := len(acked)
				mu.Unlock()
				if k >= n/4 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			r.KillBroker(owner)
			close(killed)
		}
		wg.Add(1)
		prod.SendAsync(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "msg-%d", i)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				acked[i] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	mu.Lock()
	nAcked := len(acked)
	mu.Unlock()
	t.Logf("%d of %d sends acknowledged", nAcked, n)
	if nAcked < n/4 {
		t.Fatalf("only %d acknowledged", nAcked)
	}

	// The stored log: every acknowledged message once, in send order.
	rd, err := client.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var stored []int
	for rd.HasNext() {
		m, err := rd.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var i int
		fmt.Sscanf(string(m.Payload()), "msg-%d", &i)
		stored = append(stored, i)
	}
	seen := map[int]bool{}
	for j, i := range stored {
		if seen[i] {
			t.Fatalf("message %d stored twice (de-duplication on)", i)
		}
		seen[i] = true
		if j > 0 && i < stored[j-1] {
			t.Fatalf("stored out of order: %d after %d", i, stored[j-1])
		}
	}
	mu.Lock()
	for i := range acked {
		if !seen[i] {
			t.Errorf("acknowledged message %d is lost", i)
		}
	}
	mu.Unlock()
	// The consumer got them all too (at least once, in order of first
	// delivery).
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got := map[int]bool{}
		last := -1
		for _, i := range received {
			if !got[i] {
				if i < last {
					mu.Unlock()
					t.Fatalf("consumer: %d first delivered after %d", i, last)
				}
				last = i
			}
			got[i] = true
		}
		missing := 0
		for i := range acked {
			if !got[i] {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer is missing %d acknowledged messages", missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
	<-killed
}

// haConfig is a region of two brokers whose dead broker's bundles move
// after 2 s.
func haConfig(t *testing.T) region.Config {
	c := region.Config{Name: "ha", DataDir: t.TempDir(), Brokers: 2}
	c.Broker.LeaseTTL = 2 * time.Second
	return c
}
