package proxy_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// TestFailoverThroughProxy: two brokers behind the proxy; the broker that
// owns the topic is killed while a producer sends through the proxy. The
// client, which knows only the proxy, keeps producing once the bundle
// has moved to the other broker, and the topic holds every acknowledged
// message exactly once (de-duplication on), in order.
func TestFailoverThroughProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("a broker failover takes a lease TTL and the client's backoff")
	}
	e := startEnv(t, func(s *setup) { s.brokers = 2 })
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: e.proxies[0].Endpoints().WebServiceURL})
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Namespaces().CreateNamespace("public/ha"); err != nil {
		t.Fatal(err)
	}
	ns, _ := utils.GetNamespaceName("public/ha")
	if err := adm.Namespaces().SetDeduplicationStatus(ns.String(), true); err != nil {
		t.Fatal(err)
	}
	c := e.client(pulsar.ClientOptions{})
	const topic = "persistent://public/ha/orders"
	// A subscription that never acknowledges keeps every ledger (without
	// one, the ledgers a topic rolls over are trimmed, as in Pulsar
	// without retention), so the stored log can be checked at the end.
	hold, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "hold"})
	if err != nil {
		t.Fatal(err)
	}
	hold.Close()
	prod, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "p1", SendTimeout: time.Minute, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	owner := e.owner(topic)
	if owner < 0 {
		t.Fatal("no broker has the topic loaded")
	}
	var (
		mu    sync.Mutex
		acked = map[int]bool{}
		wg    sync.WaitGroup
	)
	ackedN := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	const n = 1500
	for i := range n {
		if i == n/3 {
			waitFor(t, 30*time.Second, "a part of the messages acknowledged", func() bool { return ackedN() >= n/4 })
			t.Logf("killing broker %d, the owner, after %d acknowledged", owner, ackedN())
			e.kill(owner)
		}
		wg.Add(1)
		prod.SendAsync(e.ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "msg-%d", i)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				acked[i] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("%d of %d sends acknowledged", ackedN(), n)
	if ackedN() <= n/3 {
		t.Fatalf("only %d acknowledged: the producer did not go on after the failover", ackedN())
	}
	if o := e.owner(topic); o == owner || o < 0 {
		t.Fatalf("topic owner after the failover: %d", o)
	}
	rd, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var stored []int
	for rd.HasNext() {
		m, err := rd.Next(e.ctx)
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
	defer mu.Unlock()
	for i := range acked {
		if !seen[i] {
			t.Errorf("acknowledged message %d is lost", i)
		}
	}
}
