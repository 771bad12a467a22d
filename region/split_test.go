package region_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/topic"
)

// nsBundles reads the namespace's bundles in the region, as broker 0
// places topics in them.
func nsBundles(t *testing.T, r *region.Region, ns string) []topic.Bundle {
	t.Helper()
	bs, err := r.Broker(0).AdminAPI().Bundles.Bundles(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// globalBundles reads the namespace's bundles from its policies.
func globalBundles(t *testing.T, r *region.Region, ns string) []topic.Bundle {
	t.Helper()
	p, err := r.Policies().Namespace(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	return p.Bundles.List()
}

// putSplit sends PUT .../{bundle}/split?query to broker i and returns the
// status (redirects followed).
func putSplit(t *testing.T, r *region.Region, i int, ns string, b string, query string) int {
	t.Helper()
	u := fmt.Sprintf("%s/admin/v2/namespaces/%s/%s/split?%s", r.Brokers()[i].WebServiceURL, ns, b, query)
	req, _ := http.NewRequest(http.MethodPut, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestBundleSplitUnderTraffic splits a bundle whose topics producers send
// to without pause, twice: through the broker that does not own it
// (pulsaradmin's SplitNamespaceBundle, redirected to the owner, which
// keeps both halves), then one half by topic count on its owner.
// No send fails, every message is received, the namespace's boundaries
// are the halves', and each topic's lookup answers afterwards.
func TestBundleSplitUnderTraffic(t *testing.T) {
	r, c := twoBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "public/split"
	if err := r.Policies().CreateNamespace(ctx, ns, nil); err != nil {
		t.Fatal(err)
	}
	before := nsBundles(t, r, ns)
	// Six topics of one bundle.
	var names []string
	var b topic.Bundle
	for i := 0; len(names) < 6; i++ {
		n := fmt.Sprintf("persistent://%s/t%d", ns, i)
		tn, _ := topic.Parse(n)
		if len(names) == 0 {
			b = topic.BundleFor(tn, before)
		}
		if topic.BundleFor(tn, before) == b {
			names = append(names, n)
		}
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topics: names, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var (
		mu       sync.Mutex
		received = map[string]bool{}
		acked    = map[string]bool{}
		failed   []error
	)
	go func() {
		for m := range cons.Chan() {
			mu.Lock()
			received[string(m.Payload())] = true
			mu.Unlock()
			cons.Ack(m)
		}
	}()
	var prods []pulsar.Producer
	for _, n := range names {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: n, SendTimeout: 2 * time.Minute, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		prods = append(prods, p)
	}
	owner := ownerOf(r, ns, b)
	if owner < 0 {
		t.Fatalf("bundle %s not owned", b)
	}

	const rounds = 300
	third, twoThirds := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	sent := make(chan struct{}) // closed once every send is under way
	go func() {
		defer close(sent)
		for i := range rounds {
			switch i {
			case rounds / 3:
				close(third)
			case 2 * rounds / 3:
				close(twoThirds)
			}
			for j, p := range prods {
				payload := fmt.Sprintf("t%d-%d", j, i)
				wg.Add(1)
				p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(payload)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					defer wg.Done()
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						failed = append(failed, fmt.Errorf("%s: %w", payload, err))
						return
					}
					acked[payload] = true
				})
			}
			time.Sleep(time.Millisecond) // pacing the load, not synchronisation
		}
	}()

	<-third
	if err := adminOf(t, r, 1-owner).Namespaces().SplitNamespaceBundle(ns, b.String(), false); err != nil {
		t.Fatalf("split %s through broker %d: %v", b, 1-owner, err)
	}
	lo, hi, _ := topic.SplitRange(b)
	after := nsBundles(t, r, ns)
	if len(after) != len(before)+1 || !slices.Contains(after, lo) || !slices.Contains(after, hi) || slices.Contains(after, b) {
		t.Fatalf("bundles after the split: %v", after)
	}
	// The halves are owned where the parent was, and the parent's
	// ownership record goes (it is deleted just after the split answers;
	// the records are read from the region's metadata store).
	waitFor(t, 30*time.Second, "the halves owned by the parent's owner, the parent by none", func() bool {
		return ownerOf(r, ns, lo) == owner && ownerOf(r, ns, hi) == owner && ownerOf(r, ns, b) < 0
	})

	<-twoThirds
	// The half with more topics, by topic count.
	half := lo
	count := map[topic.Bundle]int{}
	for _, n := range names {
		tn, _ := topic.Parse(n)
		count[topic.BundleFor(tn, after)]++
	}
	if count[hi] > count[lo] {
		half = hi
	}
	if count[half] >= 2 {
		// unload=false: with unload=true under traffic a producer's
		// re-creation after the unload was once refused ProducerBusy
		// ("producer id already in use on this connection") until its
		// send timeout, an unload issue of the broker, not of the split.
		if st := putSplit(t, r, owner, ns, half.String(), "unload=false&splitAlgorithmName=topic_count_equally_divide"); st != http.StatusNoContent {
			t.Fatalf("split %s by topic count: status %d", half, st)
		}
		if got := nsBundles(t, r, ns); len(got) != len(after)+1 || slices.Contains(got, half) {
			t.Fatalf("bundles after the second split: %v", got)
		}
	} else {
		t.Logf("the halves hold %d and %d topics: no second split", count[lo], count[hi])
	}

	// Every wg.Add happens before sent closes, so Wait cannot return
	// while the sender is between rounds.
	<-sent
	wg.Wait()
	mu.Lock()
	if len(failed) > 0 {
		t.Fatalf("%d sends failed, the first: %v", len(failed), failed[0])
	}
	if len(acked) != rounds*len(names) {
		t.Fatalf("%d of %d messages acknowledged", len(acked), rounds*len(names))
	}
	mu.Unlock()
	waitFor(t, time.Minute, "every acknowledged message received", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for p := range acked {
			if !received[p] {
				return false
			}
		}
		return true
	})
	// The split is the region's: the namespace's policies keep their
	// boundaries.
	if g := globalBundles(t, r, ns); !slices.Equal(g, before) {
		t.Fatalf("the policies' bundles changed: %v", g)
	}
	// Each topic's lookup answers, at both brokers.
	final := nsBundles(t, r, ns)
	for i := range r.Brokers() {
		adm := adminOf(t, r, i)
		for _, n := range names {
			tn, _ := utils.GetTopicName(n)
			ld, err := adm.Topics().Lookup(*tn)
			if err != nil || ld.BrokerURL == "" {
				t.Fatalf("lookup %s at broker %d: %+v, %v", n, i, ld, err)
			}
			pn, _ := topic.Parse(n)
			if o := ownerOf(r, ns, topic.BundleFor(pn, final)); o < 0 || ld.BrokerURL != r.Brokers()[o].ServiceURL {
				t.Fatalf("lookup %s at broker %d: %s; the bundle's owner is broker %d", n, i, ld.BrokerURL, o)
			}
		}
	}
	// The owners' load reports count each topic in its bundle after the
	// splits (the counts kept as topics load are made again for the
	// namespace's new bundles).
	want := map[topic.Bundle]int64{}
	for _, n := range names {
		pn, _ := topic.Parse(n)
		want[topic.BundleFor(pn, final)]++
	}
	for bd, n := range want {
		o := ownerOf(r, ns, bd)
		if o < 0 {
			continue
		}
		k := ns + "/" + bd.String()
		waitFor(t, time.Minute, "the load report's topic count of "+k, func() bool {
			rep, err := adminOf(t, r, o).BrokerStats().GetLoadReport()
			return err == nil && rep.LastStats[k] != nil && rep.LastStats[k].TopicsNum == n
		})
	}
}

// TestBundleSplitRefusals: an unknown bundle, an unknown algorithm, a bad
// unload flag and a bundle too small to split are refused (4xx) and the
// namespace's bundles stay as they were.
func TestBundleSplitRefusals(t *testing.T) {
	r, _ := twoBrokers(t)
	ctx := context.Background()
	const ns = "public/nosplit"
	tiny := &policy.Policies{Bundles: &policy.BundlesData{Boundaries: []string{"0x00000000", "0x00000001", "0xffffffff"}}}
	if err := r.Policies().CreateNamespace(ctx, ns, tiny); err != nil {
		t.Fatal(err)
	}
	before := nsBundles(t, r, ns)
	if len(before) != 2 {
		t.Fatalf("bundles %v", before)
	}
	tests := []struct {
		bundle, query string
		want          int
	}{
		{"0x00000000_0x40000000", "", http.StatusPreconditionFailed},                    // not a bundle of the namespace
		{"0x00000000-0x40000000", "", http.StatusPreconditionFailed},                    // not a bundle at all
		{before[1].String(), "splitAlgorithmName=bogus", http.StatusPreconditionFailed}, // unknown algorithm
		{before[1].String(), "splitAlgorithmName=specified_positions_divide", http.StatusPreconditionFailed},
		{before[1].String(), "unload=maybe", http.StatusBadRequest},
		{before[0].String(), "", http.StatusPreconditionFailed},                                              // one hash wide
		{before[1].String(), "splitAlgorithmName=topic_count_equally_divide", http.StatusPreconditionFailed}, // no topics
	}
	for _, tt := range tests {
		for i := range r.Brokers() {
			if st := putSplit(t, r, i, ns, tt.bundle, tt.query); st != tt.want {
				t.Errorf("split %s?%s at broker %d: status %d; want %d", tt.bundle, tt.query, i, st, tt.want)
			}
		}
	}
	if after := nsBundles(t, r, ns); !slices.Equal(after, before) {
		t.Fatalf("bundles changed by refused splits: %v", after)
	}
}
