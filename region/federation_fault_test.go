package region_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/replicator"
)

// faultWaitFor polls cond every 50ms until it returns true or timeout passes,
// then fails the test with what.
func faultWaitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// faultClient is a Pulsar client for every broker of r, so it survives
// the loss of any one of them.
func faultClient(t *testing.T, r *region.Region) pulsar.Client {
	t.Helper()
	var hosts []string
	for _, b := range r.Brokers() {
		hosts = append(hosts, strings.TrimPrefix(b.ServiceURL, "pulsar://"))
	}
	return pulsarClient(t, "pulsar://"+strings.Join(hosts, ","))
}

// faultOwner returns the index of the broker of r (not in skip) that has
// topicName loaded, or -1.
func faultOwner(r *region.Region, topicName string, skip map[int]bool) int {
	for i := range r.Brokers() {
		if skip[i] {
			continue
		}
		if slices.Contains(r.Broker(i).Topics(), topicName) {
			return i
		}
	}
	return -1
}

// faultTopicStats fetches a topic's stats over the admin API from any live
// broker of r.
func faultTopicStats(ctx context.Context, r *region.Region, topicName string, skip map[int]bool) (adminapi.TopicStats, error) {
	var st adminapi.TopicStats
	path := "/admin/v2/persistent/" + strings.TrimPrefix(topicName, "persistent://") + "/stats"
	var errs []error
	for i, b := range r.Brokers() {
		if skip[i] {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.WebServiceURL+path, nil)
		if err != nil {
			return st, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		err = func() error {
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %s", req.URL, resp.Status)
			}
			return json.NewDecoder(resp.Body).Decode(&st)
		}()
		if err == nil {
			return st, nil
		}
		errs = append(errs, err)
	}
	return st, errors.Join(errs...)
}

// faultDedup turns de-duplication on for acme/geo: without it a Pulsar
// producer that resends across a broker failover may store a message
// twice in its own region, which says nothing about replication.
func faultDedup(t *testing.T, f *region.Federation) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	on := true
	if _, err := f.Regions[0].Policies().UpdateNamespace(ctx, "acme/geo", func(p *policy.Policies) error {
		p.DeduplicationEnabled = &on
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Regions {
		faultWaitFor(t, 10*time.Second, r.Name()+" sees de-duplication on acme/geo", func() bool {
			p, err := r.Policies().Namespace(ctx, "acme/geo")
			return err == nil && p.DeduplicationEnabled != nil && *p.DeduplicationEnabled
		})
	}
}

// faultProducer sends payloads "<src>:<seq>" and counts acknowledgements
// and failures.
type faultProducer struct {
	p      pulsar.Producer
	src    string
	wg     sync.WaitGroup
	acked  atomic.Int64
	failed atomic.Int64
	mu     sync.Mutex
	errs   []error
}

func newFaultProducer(t *testing.T, c pulsar.Client, topicName, src string) *faultProducer {
	t.Helper()
	p, err := c.CreateProducer(pulsar.ProducerOptions{
		Topic: topicName, Name: "fault-" + src, SendTimeout: 90 * time.Second,
		BatchingMaxPublishDelay: 2 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &faultProducer{p: p, src: src}
}

func (a *faultProducer) send(ctx context.Context, seq int) {
	a.wg.Add(1)
	a.p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%s:%d", a.src, seq)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
		defer a.wg.Done()
		if err != nil {
			a.failed.Add(1)
			a.mu.Lock()
			if len(a.errs) < 5 {
				a.errs = append(a.errs, fmt.Errorf("message %d: %w", seq, err))
			}
			a.mu.Unlock()
			return
		}
		a.acked.Add(1)
	})
}

// wait waits for every send's callback (bounded by timeout) and fails
// unless every one was acknowledged.
func (a *faultProducer) wait(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		a.p.Flush()
		a.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatalf("%s: sends not settled after %v: %d acknowledged, %d failed", a.src, timeout, a.acked.Load(), a.failed.Load())
	}
	if a.failed.Load() > 0 || a.acked.Load() != int64(n) {
		a.mu.Lock()
		defer a.mu.Unlock()
		t.Fatalf("%s: %d of %d sends acknowledged, %d failed: %v", a.src, a.acked.Load(), n, a.failed.Load(), a.errs)
	}
}

// faultHold creates consumeAll's subscription "check" on topicName (at
// the earliest position) and closes it: without a subscription a topic
// keeps nothing once its replication cursors have passed it (Pulsar
// without retention), so a subscription created only at the end would
// miss ledgers trimmed after a broker failover.
func faultHold(t *testing.T, c pulsar.Client, topicName string) {
	t.Helper()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "check", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	cons.Close()
}

// faultCheck asserts that got holds exactly n messages from each of srcs,
// in order, once each.
func faultCheck(t *testing.T, where string, got *received, n int, srcs ...string) {
	t.Helper()
	if len(got.errs) > 0 {
		t.Errorf("%s: %d order/duplicate errors, first: %v", where, len(got.errs), got.errs[:min(5, len(got.errs))])
	}
	for _, s := range srcs {
		if got.next[s] != n {
			t.Errorf("%s: last message from %s is %d, want %d", where, s, got.next[s]-1, n-1)
		}
	}
	if got.total != n*len(srcs) {
		t.Errorf("%s: %d messages, want %d", where, got.total, n*len(srcs))
	}
}

func faultWorkerStats(w *replicator.Worker, topicName, remote string) (replicator.StreamStats, bool) {
	if w == nil {
		return replicator.StreamStats{}, false
	}
	for _, s := range w.Stats() {
		if s.Topic == topicName && s.Remote == remote {
			return s, true
		}
	}
	return replicator.StreamStats{}, false
}

// TestReplicationKill: two regions with two brokers and two replicator
// workers each; while r0 produces, a replicator worker of r0 crashes
// (and restarts), r0's owning broker crashes, r1's owning broker (the
// sink side) crashes and r0's NATS server restarts. r1 still ends up
// with every message once, in order.
func TestReplicationKill(t *testing.T) {
	if testing.Short() {
		t.Skip("federation fault test: skipped with -short")
	}
	t.Parallel()
	start := time.Now()
	f := startFederation(t, 2, func(i int, c *region.Config) {
		c.Brokers = 2
		c.Broker.LeaseTTL = 2 * time.Second
		c.Replicators = 2
	})
	t.Logf("federation up in %v", time.Since(start).Round(time.Millisecond))
	faultDedup(t, f)
	r0, r1 := f.Regions[0], f.Regions[1]
	const topicName = "persistent://acme/geo/kill"
	const n = 4000
	c0, c1 := faultClient(t, r0), faultClient(t, r1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	faultHold(t, c1, topicName)
	prod := newFaultProducer(t, c0, topicName, "r0")
	killed0, killed1 := map[int]bool{}, map[int]bool{}
	// Faults by message sequence; production is paced at ~8ms per
	// message so it spans ~32 s.
	type fault struct {
		at   int
		name string
		do   func()
	}
	faults := []fault{
		{300, "kill r0 replicator 0", func() { r0.KillReplicator(0) }},
		{900, "restart r0 replicator 0", func() {
			if err := r0.RestartReplicator(ctx, 0); err != nil {
				t.Errorf("restart replicator: %v", err)
			}
		}},
		{1400, "kill r0 owning broker", func() {
			i := faultOwner(r0, topicName, killed0)
			if i < 0 {
				t.Errorf("no r0 broker has %s loaded; killing broker 0", topicName)
				i = 0
			}
			t.Logf("killing r0 broker %d", i)
			r0.KillBroker(i)
			killed0[i] = true
		}},
		{2400, "kill r1 owning broker", func() {
			i := faultOwner(r1, topicName, killed1)
			if i < 0 {
				t.Errorf("no r1 broker has %s loaded; killing broker 0", topicName)
				i = 0
			}
			t.Logf("killing r1 broker %d", i)
			r1.KillBroker(i)
			killed1[i] = true
		}},
		{3200, "restart r0 nats (down 2s)", func() {
			if err := r0.RestartNATS(ctx, 2*time.Second); err != nil {
				t.Errorf("restart nats: %v", err)
			}
		}},
	}
	prodStart := time.Now()
	for seq := range n {
		if len(faults) > 0 && faults[0].at == seq {
			t.Logf("%v: %s (acknowledged so far: %d)", time.Since(prodStart).Round(time.Millisecond), faults[0].name, prod.acked.Load())
			faults[0].do()
			faults = faults[1:]
		}
		prod.send(ctx, seq)
		time.Sleep(8 * time.Millisecond)
	}
	prod.wait(t, n, 2*time.Minute)
	t.Logf("all %d sends acknowledged after %v", n, time.Since(prodStart).Round(time.Millisecond))

	logStreams := func() {
		for i, w := range r0.Replicators() {
			if s, ok := faultWorkerStats(w, topicName, "r1"); ok {
				t.Logf("r0 replicator %d: entries %d, skipped %d, errors %d (last %q), active %v, last progress %v ago",
					i, s.Entries, s.Skipped, s.Errors, s.LastError, s.Active, time.Since(s.LastProgress).Round(time.Millisecond))
			}
		}
		if st, err := faultTopicStats(ctx, r0, topicName, killed0); err == nil {
			t.Logf("r0 topic stats: replication %+v", st.Replication)
		} else {
			t.Logf("r0 topic stats: %v", err)
		}
		if st, err := faultTopicStats(ctx, r1, topicName, killed1); err == nil {
			t.Logf("r1 topic stats: msgInCounter %d, publishers %d", st.MsgCounterIn, len(st.Publishers))
		} else {
			t.Logf("r1 topic stats: %v", err)
		}
	}
	// Replication catches up: r0's backlog to r1 drains.
	drained := time.Now()
	deadline := time.Now().Add(90 * time.Second)
	for {
		st, err := faultTopicStats(ctx, r0, topicName, killed0)
		if err == nil && st.Replication["r1"].ReplicationBacklog == 0 {
			break
		}
		if time.Now().After(deadline) {
			logStreams()
			t.Fatalf("r0's replication backlog to r1 did not drain in 90 s (backlog %d, err %v)", st.Replication["r1"].ReplicationBacklog, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("replication backlog drained %v after the last send", time.Since(drained).Round(time.Millisecond))
	logStreams()
	got := consumeAll(t, c1, topicName, n, 60*time.Second)
	faultCheck(t, "r1", got, n, "r0")
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// TestReplicationLinkCut: r1's NATS server is down for 30 s, so r0's
// frames cannot reach r1. r0 keeps serving its own consumers, shows a
// growing replication backlog and failing streams; after the link heals
// r1 gets everything exactly once, in order.
func TestReplicationLinkCut(t *testing.T) {
	if testing.Short() {
		t.Skip("federation fault test: skipped with -short")
	}
	// Mostly waiting out a 30 s outage: runs beside the other waiters.
	t.Parallel()
	start := time.Now()
	f := startFederation(t, 2, nil)
	r0, r1 := f.Regions[0], f.Regions[1]
	const topicName = "persistent://acme/geo/linkcut"
	c0, c1 := faultClient(t, r0), faultClient(t, r1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A local subscription in r0 from the start.
	local, err := c0.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "local", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	faultHold(t, c1, topicName)

	produce(t, c0, topicName, "r0", 0, 1000)
	// The first 1000 reach r1 before the cut.
	faultWaitFor(t, 30*time.Second, "r0's replication backlog to r1 drains before the cut", func() bool {
		st, err := faultTopicStats(ctx, r0, topicName, nil)
		rs, ok := st.Replication["r1"]
		return err == nil && ok && rs.ReplicationBacklog == 0 && faultEntriesTo(r0, topicName, "r1") >= 1
	})

	const cut = 30 * time.Second
	cutDone := make(chan error, 1)
	cutStart := time.Now()
	go func() { cutDone <- r1.RestartNATS(ctx, cut) }()
	cutOver := func() bool {
		select {
		case err := <-cutDone:
			cutDone <- err
			return true
		default:
			return false
		}
	}
	before := faultSumStats(r0, topicName, "r1")

	produce(t, c0, topicName, "r0", 1000, 2000)
	t.Logf("produced 2000 during the cut in %v", time.Since(cutStart).Round(time.Millisecond))

	// The backlog is visible in r0's stats.
	var backlog int64
	faultWaitFor(t, 15*time.Second, "r0 topic stats to show a replication backlog to r1", func() bool {
		st, err := faultTopicStats(ctx, r0, topicName, nil)
		if err != nil {
			return false
		}
		backlog = st.Replication["r1"].ReplicationBacklog
		return backlog > 0
	})
	t.Logf("replication backlog to r1 during the cut: %d", backlog)
	// The stream fails or makes no progress.
	faultWaitFor(t, 15*time.Second, "r0 replicator stream to r1 to fail or stall", func() bool {
		now := faultSumStats(r0, topicName, "r1")
		return now.Errors > before.Errors || time.Since(now.LastProgress) > 5*time.Second
	})
	during := faultSumStats(r0, topicName, "r1")
	t.Logf("r0 -> r1 during the cut: entries %d (before %d), errors %d (before %d), last error %q, last progress %v before the cut",
		during.Entries, before.Entries, during.Errors, before.Errors, during.LastError, cutStart.Sub(during.LastProgress).Round(time.Millisecond))
	// Everything before the cut was confirmed (the backlog was 0), so
	// nothing may be confirmed while r1's NATS server is down.
	if !cutOver() && during.Entries != before.Entries {
		t.Errorf("r0 replicator confirmed %d entries to r1 while r1's NATS server was down", during.Entries-before.Entries)
	}

	// r0's own consumers get everything during the cut.
	lr := &received{}
	lctx, lcancel := context.WithTimeout(ctx, 20*time.Second)
	for lr.total < 3000 {
		m, err := local.Receive(lctx)
		if err != nil {
			lcancel()
			t.Fatalf("r0 local consumer: after %d of 3000: %v", lr.total, err)
		}
		lr.add(string(m.Payload()))
		local.Ack(m)
	}
	lcancel()
	faultCheck(t, "r0 local", lr, 3000, "r0")
	if cutOver() {
		t.Errorf("r0 local consumption finished only after the cut healed (%v)", time.Since(cutStart))
	} else {
		t.Logf("r0 local consumer got all 3000 during the cut (%v into it)", time.Since(cutStart).Round(time.Millisecond))
	}

	// Heal.
	select {
	case err := <-cutDone:
		if err != nil {
			t.Fatalf("restart r1 nats: %v", err)
		}
	case <-time.After(cut + 30*time.Second):
		t.Fatal("r1 nats restart did not return")
	}
	healed := time.Now()
	got := consumeAll(t, c1, topicName, 3000, 90*time.Second)
	t.Logf("r1 had all 3000 %v after the heal", time.Since(healed).Round(time.Millisecond))
	faultCheck(t, "r1", got, 3000, "r0")
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// faultEntriesTo sums the Entries of r's replicator streams of topicName to remote.
func faultEntriesTo(r *region.Region, topicName, remote string) int64 {
	return faultSumStats(r, topicName, remote).Entries
}

// faultSumStats adds up r's workers' stats for (topicName, remote).
func faultSumStats(r *region.Region, topicName, remote string) replicator.StreamStats {
	var sum replicator.StreamStats
	for _, w := range r.Replicators() {
		if s, ok := faultWorkerStats(w, topicName, remote); ok {
			sum.Entries += s.Entries
			sum.Errors += s.Errors
			if s.LastError != "" {
				sum.LastError = s.LastError
			}
			if s.LastProgress.After(sum.LastProgress) {
				sum.LastProgress = s.LastProgress
			}
			sum.Active = sum.Active || s.Active
		}
	}
	return sum
}

// TestReplicationGlobalStoreDown: with the global configuration store
// down for 30 s, both regions auto-create a new topic from their cached
// configuration, produce and replicate to each other; once it is back,
// a tenant created through r0 reaches r1.
func TestReplicationGlobalStoreDown(t *testing.T) {
	if testing.Short() {
		t.Skip("federation fault test: skipped with -short")
	}
	// Mostly waiting out a 30 s outage: runs beside the other waiters.
	t.Parallel()
	start := time.Now()
	f := startFederation(t, 2, nil)
	const topicName = "persistent://acme/geo/noglobal"
	const n = 1000
	clients := []pulsar.Client{faultClient(t, f.Regions[0]), faultClient(t, f.Regions[1])}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const down = 30 * time.Second
	f.StopGlobal()
	downSince := time.Now()
	held := time.NewTimer(down)
	defer held.Stop()
	// The store is really gone: a write through r0 fails.
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	err := f.Regions[0].Policies().CreateTenant(wctx, "during", policy.TenantInfo{AdminRoles: []string{}, AllowedClusters: []string{"r0"}})
	wcancel()
	if err == nil {
		t.Fatal("created a tenant while the global store was stopped")
	}
	t.Logf("write while the global store is down fails as expected: %v", err)

	for _, c := range clients {
		faultHold(t, c, topicName)
	}
	t.Logf("topic created in both regions %v after the global store stopped", time.Since(downSince).Round(time.Millisecond))
	var wg sync.WaitGroup
	for i, r := range f.Regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			produce(t, clients[i], topicName, r.Name(), 0, n)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("produced %d in each region %v after the global store stopped", n, time.Since(downSince).Round(time.Millisecond))
	for i, r := range f.Regions {
		got := consumeAll(t, clients[i], topicName, 2*n, time.Until(downSince.Add(down)))
		faultCheck(t, r.Name(), got, n, "r0", "r1")
	}
	t.Logf("both regions had both regions' messages %v after the global store stopped", time.Since(downSince).Round(time.Millisecond))
	select {
	case <-held.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}

	if err := f.StartGlobal(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	var lastErr error
	faultWaitFor(t, 30*time.Second, "creating tenant \"after\" through r0", func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		lastErr = f.Regions[0].Policies().CreateTenant(cctx, "after", policy.TenantInfo{AdminRoles: []string{}, AllowedClusters: []string{"r0", "r1"}})
		if lastErr != nil && !errors.Is(lastErr, policy.ErrExists) {
			t.Logf("create tenant: %v", lastErr)
			return false
		}
		return true
	})
	t.Logf("tenant created %v after the restart", time.Since(restarted).Round(time.Millisecond))
	faultWaitFor(t, 30*time.Second, "tenant \"after\" to be visible in r1", func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		ti, err := f.Regions[1].Policies().Tenant(cctx, "after")
		return err == nil && slices.Equal(ti.AllowedClusters, []string{"r0", "r1"})
	})
	t.Logf("tenant visible in r1 %v after the restart; total %v", time.Since(restarted).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
