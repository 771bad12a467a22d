package region_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"

	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/topic"
)

// startFederation starts n regions (r0, r1, ...) with a replicated
// namespace acme/geo.
func startFederation(t testing.TB, n int, modify func(i int, c *region.Config)) *region.Federation {
	t.Helper()
	return startFederationWith(t, n, modify, region.Deps{})
}

// startFederationWith is startFederation with the regions' shared
// dependencies (the logger is filled in).
func startFederationWith(t testing.TB, n int, modify func(i int, c *region.Config), deps region.Deps, fedOpts ...func(*region.FederationConfig)) *region.Federation {
	t.Helper()
	dir := t.TempDir()
	cfg := region.FederationConfig{GlobalDir: dir + "/global", Namespaces: []string{"acme/geo"}}
	for _, o := range fedOpts {
		o(&cfg)
	}
	for i := range n {
		c := region.Config{Name: fmt.Sprintf("r%d", i), DataDir: fmt.Sprintf("%s/r%d", dir, i), Bookies: 3, Brokers: 1}
		c.Replicator.ScanInterval = 200 * time.Millisecond
		if modify != nil {
			modify(i, &c)
		}
		cfg.Regions = append(cfg.Regions, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	deps.Logger = testLogger(t)
	f, err := region.StartFederation(ctx, cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		f.Shutdown(ctx)
	})
	return f
}

func pulsarClient(t testing.TB, url string) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, OperationTimeout: 30 * time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// received collects messages by source region, checking per-source order
// and no duplicates.
type received struct {
	mu    sync.Mutex
	next  map[string]int // source -> next expected sequence
	total int
	errs  []string
}

func (r *received) add(payload string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	src, seqS, _ := strings.Cut(payload, ":")
	seq, _ := strconv.Atoi(seqS)
	if r.next == nil {
		r.next = map[string]int{}
	}
	if seq != r.next[src] {
		r.errs = append(r.errs, fmt.Sprintf("from %s: got %d, want %d", src, seq, r.next[src]))
	}
	r.next[src] = seq + 1
	r.total++
}

func consumeAll(t *testing.T, c pulsar.Client, topicName string, want int, timeout time.Duration) *received {
	t.Helper()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "check", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	r := &received{}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for r.total < want {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("after %d of %d messages: %v", r.total, want, err)
		}
		r.add(string(m.Payload()))
		cons.Ack(m)
	}
	// Nothing more arrives (no duplicates, no loops).
	qctx, qcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer qcancel()
	if m, err := cons.Receive(qctx); err == nil {
		t.Errorf("unexpected extra message %q (replicated from %q)", m.Payload(), m.GetReplicatedFrom())
	}
	return r
}

func produce(t *testing.T, c pulsar.Client, topicName, src string, from, n int) {
	t.Helper()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topicName, BatchingMaxPublishDelay: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := from; i < from+n; i++ {
		wg.Add(1)
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("%s:%d", src, i))}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// TestFullMeshReplication: three regions, each producing to the same
// topic; every region ends up with every message exactly once, in order
// per source, and nothing loops.
func TestFullMeshReplication(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	t.Parallel()
	f := startFederation(t, 3, nil)
	const n = 300
	topicName := "persistent://acme/geo/mesh"
	clients := make([]pulsar.Client, len(f.Regions))
	for i, r := range f.Regions {
		clients[i] = pulsarClient(t, r.Endpoints().ServiceURL)
	}
	// The subscriptions exist before anything is produced: a region
	// keeps no data nobody subscribed to once its ledger rolls over.
	for _, c := range clients {
		faultHold(t, c, topicName)
	}
	var wg sync.WaitGroup
	for i, r := range f.Regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			produce(t, clients[i], topicName, r.Name(), 0, n)
		}()
	}
	wg.Wait()
	for i, r := range f.Regions {
		got := consumeAll(t, clients[i], topicName, n*len(f.Regions), time.Minute)
		if len(got.errs) > 0 {
			t.Errorf("region %s: order/duplicate errors: %v", r.Name(), got.errs[:min(5, len(got.errs))])
		}
		for _, src := range f.Regions {
			if got.next[src.Name()] != n {
				t.Errorf("region %s: %d messages from %s, want %d", r.Name(), got.next[src.Name()], src.Name(), n)
			}
		}
	}
}

func quietLogger() plog.Logger {
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	return plog.NewLoggerWithLogrus(l)
}

// testLogger logs to stderr with ISOBAR_TEST_LOG=1, else discards.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("ISOBAR_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// TestPartitionedReplication: a partitioned topic's partitions replicate
// each to the same partition in the other region, in order per
// partition.
func TestPartitionedReplication(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	f := startFederation(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := topic.Parse("persistent://acme/geo/parts")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Regions[0].Policies().CreatePartitioned(ctx, name, 3); err != nil {
		t.Fatal(err)
	}
	c0 := pulsarClient(t, f.Regions[0].Endpoints().ServiceURL)
	p, err := c0.CreateProducer(pulsar.ProducerOptions{Topic: name.String()})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: fmt.Sprintf("k%d", i%7), Payload: []byte(fmt.Sprintf("r0:%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	c1 := pulsarClient(t, f.Regions[1].Endpoints().ServiceURL)
	cons, err := c1.Subscribe(pulsar.ConsumerOptions{Topic: name.String(), SubscriptionName: "check", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	last := map[string]int{} // partition -> last sequence
	seen := map[int]bool{}
	for len(seen) < n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("after %d: %v", len(seen), err)
		}
		var seq int
		fmt.Sscanf(string(m.Payload()), "r0:%d", &seq)
		if seen[seq] {
			t.Fatalf("duplicate %d", seq)
		}
		seen[seq] = true
		if prev, ok := last[m.Topic()]; ok && seq <= prev {
			t.Fatalf("%s: %d after %d", m.Topic(), seq, prev)
		}
		last[m.Topic()] = seq
		cons.Ack(m)
	}
	if len(last) != 3 {
		t.Errorf("messages came from %d partitions, want 3", len(last))
	}
}
