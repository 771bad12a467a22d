package primary_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/broker/primary"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/internal/wanproxy"
	"github.com/isobar-mq/isobar/metastore"
)

const ns = "acme/geo"

// world is a global store with two regions, r0 and r1, and acme/geo
// replicated to both.
type world struct {
	t   *testing.T
	c   *testcluster.Cluster
	pol *policy.Store
}

func newWorld(t *testing.T) *world {
	c := testcluster.Start(t, testcluster.Options{})
	pol, err := policy.New(c.Meta, policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, r := range []string{"r0", "r1"} {
		if err := pol.CreateCluster(ctx, r, policy.ClusterData{ServiceURL: "http://" + r}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pol.CreateTenant(ctx, "acme", policy.TenantInfo{}); err != nil {
		t.Fatal(err)
	}
	if err := pol.CreateNamespace(ctx, ns, &policy.Policies{ReplicationClusters: []string{"r0", "r1"}}); err != nil {
		t.Fatal(err)
	}
	return &world{t: t, c: c, pol: pol}
}

func (w *world) setPrimary(primary string) {
	w.t.Helper()
	mode := policy.ActiveStandby
	if primary == "" {
		mode = policy.ActiveActive
	}
	if _, err := w.pol.UpdateNamespace(context.Background(), ns, func(p *policy.Policies) error {
		return policy.SetFailover(p, mode, primary)
	}); err != nil {
		w.t.Fatal(err)
	}
}

// demotions records OnDemoted calls.
type demotions struct {
	mu  sync.Mutex
	nss []string
}

func (d *demotions) add(_ context.Context, ns, topic, _ string) {
	d.mu.Lock()
	if topic != "" {
		ns += " topic " + topic
	}
	d.nss = append(d.nss, ns)
	d.mu.Unlock()
}

func (d *demotions) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.nss)
}

func (w *world) gates(region, broker string, meta metastore.Meta, d *demotions) *primary.Gates {
	w.t.Helper()
	deps := primary.Deps{Global: meta}
	if d != nil {
		deps.Demote = d.add
	}
	g, err := primary.New(primary.Config{Region: region, Broker: broker, TTL: 2 * time.Second}, deps)
	if err != nil {
		w.t.Fatal(err)
	}
	g.Start()
	w.t.Cleanup(func() { g.Close(context.Background()) })
	return g
}

func wait(t *testing.T, g *primary.Gates) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return g.Wait(ctx, ns, "")
}

func wantNotPrimary(t *testing.T, err error, primaryRegion string) {
	t.Helper()
	var np *primary.NotPrimaryError
	if !errors.As(err, &np) || np.Primary != primaryRegion || !errors.Is(err, primary.ErrNotPrimary) {
		t.Fatalf("got %v, want not primary (primary %s)", err, primaryRegion)
	}
}

// Active-active writes everywhere; active-standby only at the primary,
// where every broker of the region holds a fence; a planned change of
// primary demotes the old primary's brokers at once (OnDemoted), deletes
// their fences, and lets the new primary write.
func TestPlannedFailover(t *testing.T) {
	w := newWorld(t)
	var d0 demotions
	a0, b0 := w.gates("r0", "a", w.c.Connect(), &d0), w.gates("r0", "b", w.c.Connect(), &d0)
	a1 := w.gates("r1", "a", w.c.Connect(), nil)
	for _, g := range []*primary.Gates{a0, b0, a1} {
		if err := wait(t, g); err != nil {
			t.Fatalf("active-active: %v", err)
		}
	}
	w.setPrimary("r0")
	testcluster.WaitFor(t, 10*time.Second, func() bool { return errors.Is(a1.Check(ns, ""), primary.ErrNotPrimary) })
	wantNotPrimary(t, a1.Check(ns, ""), "r0")
	for _, g := range []*primary.Gates{a0, b0} {
		testcluster.WaitFor(t, 10*time.Second, func() bool {
			f, _ := g.Failover(ns, "")
			return f.Epoch == 1 && g.Check(ns, "") == nil
		})
	}
	if f, ok := a0.Failover(ns, ""); !ok || f != (policy.Failover{Mode: policy.ActiveStandby, Primary: "r0", Epoch: 1}) {
		t.Fatalf("failover seen: %+v %v", f, ok)
	}
	keys, _ := w.c.Meta.ListKeys(context.Background(), primary.FencePrefix(ns))
	if len(keys) != 2 {
		t.Fatalf("fences %v, want r0's two brokers", keys)
	}

	w.setPrimary("r1")
	testcluster.WaitFor(t, 10*time.Second, func() bool { return a1.Check(ns, "") == nil })
	wantNotPrimary(t, a0.Check(ns, ""), "r1")
	wantNotPrimary(t, b0.Check(ns, ""), "r1")
	testcluster.WaitFor(t, 10*time.Second, func() bool { return d0.count() == 2 })
	keys, _ = w.c.Meta.ListKeys(context.Background(), primary.FencePrefix(ns))
	if len(keys) != 1 || !strings.HasSuffix(keys[0], "/r1/a") {
		t.Fatalf("fences %v, want r1's only", keys)
	}

	w.setPrimary("")
	for _, g := range []*primary.Gates{a0, b0, a1} {
		testcluster.WaitFor(t, 10*time.Second, func() bool { return g.Check(ns, "") == nil })
	}
}

// A primary that dies keeps its fence until its lease expires: the new
// primary writes only after that.
func TestNewPrimaryWaitsForADeadPrimarysLease(t *testing.T) {
	w := newWorld(t)
	w.setPrimary("r0")
	g0, err := primary.New(primary.Config{Region: "r0", Broker: "a", TTL: 2 * time.Second}, primary.Deps{Global: w.c.Connect()})
	if err != nil {
		t.Fatal(err)
	}
	g0.Start()
	if err := wait(t, g0); err != nil {
		t.Fatal(err)
	}
	g1 := w.gates("r1", "a", w.c.Connect(), nil)
	wantNotPrimary(t, wait(t, g1), "r0")
	g0.Abort() // a crash: the fence stays until the lease expires
	w.setPrimary("r1")
	watch := w.c.Meta.Watch(context.Background(), primary.FenceKey(ns, "r0", "a"), 0)
	testcluster.WaitFor(t, 10*time.Second, func() bool { return errors.Is(g1.Check(ns, ""), primary.ErrFenced) })
	if err := g1.Check(ns, ""); !strings.Contains(err.Error(), "r0/a") {
		t.Fatalf("while r0's fence lasts: %v, want it to name r0/a", err)
	}
	testcluster.WaitFor(t, 30*time.Second, func() bool { return g1.Check(ns, "") == nil })
	ev := <-watch
	kv, err := w.c.Meta.Get(context.Background(), primary.FenceKey(ns, "r1", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Deleted || ev.Rev >= kv.Rev {
		t.Fatalf("r0's fence ended at revision %d (%+v), r1's began at %d: r1 must begin after", ev.Rev, ev, kv.Rev)
	}
}

// Split brain: the primary is cut off from the global store (a black
// hole) and another region is promoted. The old primary stops accepting
// before the new one starts.
func TestPartitionedPrimaryStopsBeforeTheNewOneStarts(t *testing.T) {
	w := newWorld(t)
	w.setPrimary("r0")
	link, err := wanproxy.Listen("127.0.0.1:0", strings.TrimPrefix(w.c.Endpoints()[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	cut, err := metastore.Connect(context.Background(), metastore.Config{Endpoints: []string{"http://" + link.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	g0, err := primary.New(primary.Config{Region: "r0", Broker: "a", TTL: 2 * time.Second}, primary.Deps{Global: cut})
	if err != nil {
		t.Fatal(err)
	}
	g0.Start()
	defer func() {
		g0.Abort()
		cut.Close()
	}()
	if err := wait(t, g0); err != nil {
		t.Fatal(err)
	}
	g1 := w.gates("r1", "a", w.c.Connect(), nil)
	wantNotPrimary(t, wait(t, g1), "r0")

	link.Blackhole()
	w.setPrimary("r1")
	var stopped0, started1 time.Time
	deadline := time.Now().Add(30 * time.Second)
	for (stopped0.IsZero() || started1.IsZero()) && time.Now().Before(deadline) {
		now := time.Now()
		if stopped0.IsZero() && g0.Check(ns, "") != nil {
			stopped0 = now
		}
		if started1.IsZero() && g1.Check(ns, "") == nil {
			started1 = now
			if stopped0.IsZero() {
				t.Fatal("split brain: r1 accepts while cut-off r0 still does")
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	if stopped0.IsZero() || started1.IsZero() {
		t.Fatalf("r0 stopped at %v, r1 started at %v", stopped0, started1)
	}
	if err := g0.Check(ns, ""); !errors.Is(err, primary.ErrFenced) {
		t.Fatalf("cut-off r0: %v, want fenced", err)
	}
	t.Logf("r0 stopped %v before r1 started", started1.Sub(stopped0).Round(time.Millisecond))

	// After the heal r0 learns it is no longer primary.
	link.Up()
	testcluster.WaitFor(t, 30*time.Second, func() bool { return errors.Is(g0.Check(ns, ""), primary.ErrNotPrimary) })
}

func TestConfigRefused(t *testing.T) {
	_, err := primary.New(primary.Config{Broker: "a/b", TTL: -1}, primary.Deps{})
	for _, want := range []string{"region required", `broker id "a/b"`, "global store required", "ttl"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v, want it to say %q", err, want)
		}
	}
}

// Automatic failover: with the primary region's brokers gone from the
// global store (a crash: their leases expire) for the namespace's delay,
// the first present region of its clusters promotes itself, once; while
// the primary is present nothing happens.
func TestAutomaticFailover(t *testing.T) {
	w := newWorld(t)
	w.setPrimary("r0")
	if _, err := w.pol.UpdateNamespace(context.Background(), ns, func(p *policy.Policies) error {
		return policy.SetAutoFailover(p, 2)
	}); err != nil {
		t.Fatal(err)
	}
	auto := func(pol *policy.Store) func() []primary.AutoNamespace {
		return func() []primary.AutoNamespace {
			nss, _ := pol.AutoFailoverNamespaces(context.Background())
			var out []primary.AutoNamespace
			for _, n := range nss {
				out = append(out, primary.AutoNamespace{Name: n.Namespace, Failover: n.Failover, Clusters: n.Clusters})
			}
			return out
		}
	}
	var promotions sync.Map
	start := func(region string) *primary.Gates {
		g, err := primary.New(primary.Config{Region: region, Broker: "a", TTL: 2 * time.Second}, primary.Deps{
			Global:         w.c.Connect(),
			AutoNamespaces: auto(w.pol),
			Promote: func(ctx context.Context, ns, from string) error {
				promotions.Store(region, true)
				return w.pol.Promote(ctx, ns, from, region)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		g.Start()
		return g
	}
	g0, g1 := start("r0"), start("r1")
	defer g1.Close(context.Background())
	if err := wait(t, g0); err != nil {
		t.Fatal(err)
	}
	// Present: twice the delay passes with no promotion.
	time.Sleep(5 * time.Second)
	if _, ok := promotions.Load("r1"); ok {
		t.Fatal("r1 promoted itself while r0 was present")
	}
	crash := time.Now()
	g0.Abort()
	testcluster.WaitFor(t, 30*time.Second, func() bool { return g1.Check(ns, "") == nil })
	p, err := w.pol.Namespace(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	if f := policy.FailoverOf(p); f.Primary != "r1" || f.Epoch != 2 || f.AutoAfterSeconds != 2 {
		t.Fatalf("after the automatic failover: %+v", f)
	}
	t.Logf("r1 writes %v after r0 crashed (lease TTL 2s, delay 2s)", time.Since(crash).Round(time.Millisecond))
}

func (w *world) setTopicPrimary(local, primary string) int64 {
	w.t.Helper()
	_, err := w.pol.UpdateNamespace(context.Background(), ns, func(p *policy.Policies) error {
		if primary == "" {
			policy.RemoveTopicFailover(p, local)
			return nil
		}
		return policy.SetTopicFailover(p, local, policy.ActiveStandby, primary)
	})
	if err != nil {
		w.t.Fatal(err)
	}
	kv, err := w.c.Meta.Get(context.Background(), policy.NamespaceKey("acme", "geo"))
	if err != nil {
		w.t.Fatal(err)
	}
	return kv.Rev
}

// A topic with its own primary is fenced apart from its namespace. Moving
// it to another region demotes it in the namespace's primary (drained
// there before the other region writes) and leaves the namespace's other
// topics writing; when the topic's primary dies and the topic goes back
// to its namespace's primary, that region writes it only once the dead
// one's fence has ended, and its other topics never stop.
func TestTopicPrimaryIsFencedApart(t *testing.T) {
	w := newWorld(t)
	w.setPrimary("r0")
	var g1 *primary.Gates
	var mu sync.Mutex
	var demoted []string
	deps := primary.Deps{Global: w.c.Connect(), Demote: func(_ context.Context, ns, topic, to string) {
		mu.Lock()
		defer mu.Unlock()
		demoted = append(demoted, topic+"->"+to)
		// r1 may not write the topic before r0 has stopped and drained it.
		if err := g1.Check(ns, topic); err == nil {
			t.Errorf("r1 writes %s while r0 is demoting it", topic)
		}
	}}
	g0, err := primary.New(primary.Config{Region: "r0", Broker: "a", TTL: 2 * time.Second}, deps)
	if err != nil {
		t.Fatal(err)
	}
	g0.Start()
	t.Cleanup(func() { g0.Close(context.Background()) })
	g1, err = primary.New(primary.Config{Region: "r1", Broker: "a", TTL: 2 * time.Second}, primary.Deps{Global: w.c.Connect()})
	if err != nil {
		t.Fatal(err)
	}
	g1.Start()
	if err := wait(t, g0); err != nil {
		t.Fatal(err)
	}
	wantNotPrimary(t, wait(t, g1), "r0")
	if err := g0.Check(ns, "orders"); err != nil {
		t.Fatalf("orders follows its namespace: %v", err)
	}

	rev := w.setTopicPrimary("orders", "r1")
	testcluster.WaitFor(t, 10*time.Second, func() bool { return g1.Check(ns, "orders") == nil })
	var np *primary.NotPrimaryError
	if err := g0.Check(ns, "orders"); !errors.As(err, &np) || np.Topic != "orders" || np.Primary != "r1" {
		t.Fatalf("r0 on orders: %v", err)
	}
	for _, local := range []string{"", "audit"} {
		if err := g0.Check(ns, local); err != nil {
			t.Fatalf("r0 on %q: %v", local, err)
		}
		wantNotPrimary(t, g1.Check(ns, local), "r0")
	}
	if f, ok := g1.Failover(ns, "orders"); !ok || f.Primary != "r1" || f.Epoch != 2 {
		t.Fatalf("r1 sees orders as %+v", f)
	}
	mu.Lock()
	if len(demoted) != 1 || demoted[0] != "orders->r1" {
		t.Fatalf("demoted %v, want orders to r1 once", demoted)
	}
	mu.Unlock()
	// r1 took its fence after r0 confirmed its own for the new policy.
	r0, err := w.c.Meta.Get(context.Background(), primary.FenceKey(ns, "r0", "a"))
	if err != nil {
		t.Fatal(err)
	}
	r1, err := w.c.Meta.Get(context.Background(), primary.TopicFenceKey(ns, "orders", "r1", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if !(rev < r0.Rev && r0.Rev < r1.Rev) {
		t.Fatalf("policy at %d, r0 confirmed at %d, r1 took orders at %d: want that order", rev, r0.Rev, r1.Rev)
	}

	// r1 dies holding orders; orders goes back to the namespace's primary.
	g1.Abort()
	watch := w.c.Meta.Watch(context.Background(), primary.TopicFenceKey(ns, "orders", "r1", "a"), 0)
	w.setTopicPrimary("orders", "")
	testcluster.WaitFor(t, 10*time.Second, func() bool { return errors.Is(g0.Check(ns, "orders"), primary.ErrFenced) })
	if err := g0.Check(ns, "orders"); !strings.Contains(err.Error(), "r1/a/topic/orders") {
		t.Fatalf("while r1's fence lasts: %v, want it to name it", err)
	}
	if err := g0.Check(ns, "audit"); err != nil {
		t.Fatalf("another topic while orders waits: %v", err)
	}
	testcluster.WaitFor(t, 30*time.Second, func() bool { return g0.Check(ns, "orders") == nil })
	ev := <-watch
	mine, err := w.c.Meta.Get(context.Background(), primary.TopicFenceKey(ns, "orders", "r0", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Deleted || ev.Rev >= mine.Rev {
		t.Fatalf("r1's fence ended at revision %d (%+v), r0's began at %d: r0 must begin after", ev.Rev, ev, mine.Rev)
	}
	if err := g0.Check(ns, ""); err != nil {
		t.Fatalf("the namespace after all that: %v", err)
	}
}

// cutGates starts region r0's gates (broker "a", the default TTL and
// hold) reaching the global store through a link the test can cut.
func (w *world) cutGates(d *demotions) (*primary.Gates, *wanproxy.Link) {
	w.t.Helper()
	link, err := wanproxy.Listen("127.0.0.1:0", strings.TrimPrefix(w.c.Endpoints()[0], "http://"))
	if err != nil {
		w.t.Fatal(err)
	}
	cut, err := metastore.Connect(context.Background(), metastore.Config{Endpoints: []string{"http://" + link.Addr()}})
	if err != nil {
		w.t.Fatal(err)
	}
	g, err := primary.New(primary.Config{Region: "r0", Broker: "a"}, primary.Deps{Global: cut, Demote: d.add})
	if err != nil {
		w.t.Fatal(err)
	}
	g.Start()
	w.t.Cleanup(func() {
		g.Abort()
		cut.Close()
		link.Close()
	})
	return g, link
}

// TestLapsedFenceIsTakenAgainWithinTheHold: a primary cut off from the
// global store for longer than its lease is valid, but back within the
// hold, stops writing at the lapse (as it must: another region might be
// promoted), holds its writers meanwhile (Wait waits rather than
// refuses), takes its fence again on a new lease and goes on: its
// clients are not demoted. Cut off for longer, it demotes them.
func TestLapsedFenceIsTakenAgainWithinTheHold(t *testing.T) {
	w := newWorld(t)
	w.setPrimary("r0")
	var d demotions
	g0, link := w.cutGates(&d)
	if err := wait(t, g0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		fault func()
	}{{"cut", link.Cut}, {"black hole", link.Blackhole}} {
		c.fault()
		// The lease lapses: writes stop, and a writer that asks now is
		// held, not refused.
		testcluster.WaitFor(t, 10*time.Second, func() bool { return g0.Check(ns, "") != nil })
		lapsed := time.Now()
		if err := g0.Check(ns, ""); !errors.Is(err, primary.ErrLapsed) {
			t.Fatalf("%s: after the lapse: %v, want lapsed", c.name, err)
		}
		held := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			held <- g0.Wait(ctx, ns, "")
		}()
		link.Up()
		if err := <-held; err != nil {
			t.Fatalf("%s: a writer held through the lapse got %v", c.name, err)
		}
		t.Logf("%s: writable again %v after the lapse", c.name, time.Since(lapsed).Round(time.Millisecond))
		if n := d.count(); n != 0 {
			t.Fatalf("%s: %d demotions, want none", c.name, n)
		}
	}

	// A cut that outlasts the hold: the clients are sent away, and the
	// broker says it lapsed for as long as the cut lasts (a lookup here
	// sends clients on to another region rather than keeping them),
	// also once its tries to reach the store again have failed.
	link.Cut()
	testcluster.WaitFor(t, 10*time.Second, func() bool { return d.count() == 1 })
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := g0.Check(ns, ""); !errors.Is(err, primary.ErrLapsed) {
			t.Fatalf("after the hold, still cut off: %v, want lapsed", err)
		}
	}
	link.Up()
	testcluster.WaitFor(t, 30*time.Second, func() bool { return g0.Check(ns, "") == nil })
}

// TestAbsentFollowsPresence: a region is absent once none of its brokers
// is present in the global store (the last one crashed: its presence
// ends with its lease), present again when one comes back; a region a
// broker knows nothing of yet is not called absent before the store was
// read.
func TestAbsentFollowsPresence(t *testing.T) {
	w := newWorld(t)
	w.setPrimary("r0")
	g1 := w.gates("r1", "a", w.c.Connect(), nil)
	g0, err := primary.New(primary.Config{Region: "r0", Broker: "a", TTL: 2 * time.Second}, primary.Deps{Global: w.c.Connect()})
	if err != nil {
		t.Fatal(err)
	}
	g0.Start()
	testcluster.WaitFor(t, 10*time.Second, func() bool { return !g1.Absent("r0") && g1.ReachedSince(time.Time{}) })
	g0.Abort() // a crash: the presence key ends with the lease
	testcluster.WaitFor(t, 10*time.Second, func() bool { return g1.Absent("r0") })
	g0 = w.gates("r0", "a", w.c.Connect(), nil)
	testcluster.WaitFor(t, 10*time.Second, func() bool { return !g1.Absent("r0") })
	if g1.Absent("r1") {
		t.Fatal("r1 absent while its own broker is present")
	}
}

// unrenewedCache is longer than how long Gates.Unrenewed keeps an answer.
const unrenewedCache = 150 * time.Millisecond

// TestUnrenewedBeforeAbsent: a region whose brokers crashed is called
// unrenewed (present, but no lease renewed for over a second) before its
// presence ends with the lease, which is what lets a standby hold
// lookups rather than send clients to it, and still once its presence
// ended (nobody renews); it is neither while its broker renews, and not
// unrenewed once back.
func TestUnrenewedBeforeAbsent(t *testing.T) {
	w := newWorld(t)
	g1 := w.gates("r1", "a", w.c.Connect(), nil)
	g0, err := primary.New(primary.Config{Region: "r0", Broker: "a", TTL: 2 * time.Second}, primary.Deps{Global: w.c.Connect()})
	if err != nil {
		t.Fatal(err)
	}
	g0.Start()
	testcluster.WaitFor(t, 10*time.Second, func() bool { return !g1.Absent("r0") && g1.ReachedSince(time.Time{}) })
	// Renewing: not unrenewed, over more than a lease.
	for deadline := time.Now().Add(2500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if g1.Unrenewed("r0") {
			t.Fatal("r0 called unrenewed while its broker renews")
		}
	}
	g0.Abort() // a crash: the presence key stays until the lease ends
	crashed := time.Now()
	var unrenewedAt time.Time
	testcluster.WaitFor(t, 10*time.Second, func() bool {
		if g1.Absent("r0") {
			return true
		}
		if unrenewedAt.IsZero() && g1.Unrenewed("r0") {
			unrenewedAt = time.Now()
		}
		return false
	})
	if unrenewedAt.IsZero() {
		t.Fatal("r0 absent without having been called unrenewed first")
	}
	t.Logf("unrenewed %v and absent %v after the crash", unrenewedAt.Sub(crashed).Round(time.Millisecond), time.Since(crashed).Round(time.Millisecond))
	testcluster.WaitFor(t, 10*time.Second, func() bool { return g1.Unrenewed("r0") }) // past the cached answer
	for range 5 {
		if !g1.Unrenewed("r0") {
			t.Fatal("r0 not unrenewed once absent: nobody renews")
		}
		time.Sleep(unrenewedCache)
	}
	w.gates("r0", "a", w.c.Connect(), nil)
	testcluster.WaitFor(t, 10*time.Second, func() bool { return !g1.Absent("r0") && !g1.Unrenewed("r0") })
}
