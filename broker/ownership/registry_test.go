package ownership

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

const ns = "tenant/ns"

// losses records OnLost calls.
type losses struct {
	mu  sync.Mutex
	got []string
}

func (l *losses) add(ns string, b topic.Bundle) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, ns+"/"+b.String())
}

func (l *losses) has(ns string, b topic.Bundle) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.got {
		if s == ns+"/"+b.String() {
			return true
		}
	}
	return false
}

func (l *losses) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.got)
}

type node struct {
	*Registry
	lost *losses
	cfg  setup
}

// setup is a Registry's configuration and dependencies in a test.
type setup struct {
	Config
	Deps
}

func config(c *testcluster.Cluster, id string, port int) setup {
	return setup{Config{
		Region: c.Region,
		Self: BrokerInfo{ID: id,
			ServiceURL: fmt.Sprintf("pulsar://127.0.0.1:%d", port),
			HTTPURL:    fmt.Sprintf("http://127.0.0.1:%d", port+1)},
		LeaseTTL: 2 * time.Second,
	}, Deps{
		Meta:   c.Connect(),
		Logger: c.Logger().With("test", id),
	}}
}

// newStarted builds a registry and starts it.
func newStarted(ctx context.Context, cfg Config, deps Deps) (*Registry, error) {
	r, err := New(cfg, deps)
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

func start(t *testing.T, cfg setup) *node {
	t.Helper()
	n := &node{lost: &losses{}, cfg: cfg}
	cfg.OnLost = n.lost.add
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := newStarted(ctx, cfg.Config, cfg.Deps)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.Self.ID, err)
	}
	n.Registry = r
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.Close(ctx)
	})
	return n
}

func lookup(t *testing.T, r *node, b topic.Bundle, authoritative bool) BrokerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := r.Lookup(ctx, ns, b, authoritative)
	if err != nil {
		t.Fatalf("%s: lookup %s: %v", r.self.ID, b, err)
	}
	return info
}

// follow looks b up at from and, if redirected, at the broker it names with
// authoritative set, as the Pulsar client does; it returns the owner.
func follow(t *testing.T, b topic.Bundle, from *node, all ...*node) BrokerInfo {
	t.Helper()
	owner := lookup(t, from, b, false)
	if owner.ID == from.self.ID {
		return owner
	}
	for _, n := range all {
		if n.self.ID == owner.ID {
			again := lookup(t, n, b, true)
			if again.ID != owner.ID {
				t.Fatalf("redirected to %s, which says the owner is %s", owner.ID, again.ID)
			}
			return again
		}
	}
	t.Fatalf("redirected to unknown broker %s", owner.ID)
	return BrokerInfo{}
}

// cachedLoad is broker id's load as r's watch has seen it.
func cachedLoad(r *node, id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.brokers[id].Load
}

// leaseOf reads the lease of broker id's registration straight from etcd.
func leaseOf(t *testing.T, c *testcluster.Cluster, id string) int64 {
	t.Helper()
	kv, err := c.Meta.Get(context.Background(), BrokerKey(c.Region, id))
	if errors.Is(err, metastore.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return kv.Lease
}

func keyExists(t *testing.T, c *testcluster.Cluster, key string) bool {
	t.Helper()
	_, err := c.Meta.Get(context.Background(), key)
	if errors.Is(err, metastore.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func TestSpreadLookupAndClose(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	a := start(t, config(c, "a", 7000))
	b := start(t, config(c, "b", 7100))
	testcluster.WaitFor(t, 5*time.Second, func() bool { return len(a.candidatesIDs()) == 2 })

	bundles := topic.Bundles(8)
	for _, bu := range bundles {
		owner := follow(t, bu, a, a, b)
		// The next placement should see the load this one added.
		testcluster.WaitFor(t, 5*time.Second, func() bool {
			return cachedLoad(a, "b") == len(b.Owned()) && cachedLoad(b, "a") == len(a.Owned())
		})
		if !(owner.ID == "a" && a.Owns(ns, bu) || owner.ID == "b" && b.Owns(ns, bu)) {
			t.Fatalf("%s: owner %s does not own it", bu, owner.ID)
		}
		if a.Owns(ns, bu) && b.Owns(ns, bu) {
			t.Fatalf("%s owned by both", bu)
		}
	}
	if na, nb := len(a.Owned()), len(b.Owned()); na != 4 || nb != 4 {
		t.Fatalf("a owns %d, b owns %d; want 4 each", na, nb)
	}

	// Every lookup from either side agrees on the owner.
	for _, bu := range bundles {
		fromA, fromB := lookup(t, a, bu, false), lookup(t, b, bu, false)
		if fromA.ID != fromB.ID {
			t.Fatalf("%s: a says %s, b says %s", bu, fromA.ID, fromB.ID)
		}
		if fromA.ID == "a" && fromA.ServiceURL != a.self.ServiceURL {
			t.Fatalf("%s: owner URL %s", bu, fromA.ServiceURL)
		}
	}

	brokers, err := a.Brokers(context.Background())
	if err != nil || len(brokers) != 2 || brokers[0].ID != "a" || brokers[1].ID != "b" {
		t.Fatalf("Brokers = %+v, %v", brokers, err)
	}

	// A closes: its bundles are free at once and b's next lookup takes them.
	aOwned := a.Owned()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.Owns(ns, aOwned[0].Bundle) {
		t.Fatal("a still owns a bundle after Close")
	}
	for _, o := range aOwned {
		if owner := lookup(t, b, o.Bundle, false); owner.ID != "b" || !b.Owns(ns, o.Bundle) {
			t.Fatalf("%s after a closed: owner %s, b owns: %v", o.Bundle, owner.ID, b.Owns(ns, o.Bundle))
		}
	}
	if len(b.Owned()) != 8 || a.lost.len() != 0 || b.lost.len() != 0 {
		t.Fatalf("b owns %d; losses a=%d b=%d", len(b.Owned()), a.lost.len(), b.lost.len())
	}
	if _, err := a.Lookup(context.Background(), ns, bundles[0], true); !errors.Is(err, ErrClosed) {
		t.Fatalf("lookup after close: %v", err)
	}
}

func (r *Registry) candidatesIDs() []Candidate {
	_, c := r.candidates()
	return c
}

func TestReleaseAndOverwriteLoss(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	a := start(t, config(c, "a", 7000))
	bu := topic.Bundles(4)[1]
	if owner := lookup(t, a, bu, true); owner.ID != "a" || !a.Owns(ns, bu) {
		t.Fatalf("owner %s", owner.ID)
	}
	key, _ := OwnershipKey(c.Region, ns, bu)
	if err := a.Release(context.Background(), ns, bu); err != nil {
		t.Fatal(err)
	}
	if a.Owns(ns, bu) || keyExists(t, c, key) {
		t.Fatal("still owned after release")
	}
	if err := a.Release(context.Background(), ns, bu); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("second release: %v", err)
	}

	// Someone else deletes our key: that is a loss.
	lookup(t, a, bu, true)
	if err := c.Meta.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 5*time.Second, func() bool { return a.lost.has(ns, bu) })
	if a.Owns(ns, bu) || a.lost.len() != 1 {
		t.Fatalf("owns %v, losses %d", a.Owns(ns, bu), a.lost.len())
	}

	if _, err := a.Lookup(context.Background(), "bad", bu, true); err == nil {
		t.Fatal("bad namespace accepted")
	}
	if _, err := a.Lookup(context.Background(), ns, topic.Bundle{Lo: 5, Hi: 5}, true); !errors.Is(err, ErrInvalidBundle) {
		t.Fatalf("empty bundle: %v", err)
	}
}

func TestConcurrentAuthoritativeLookups(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	a := start(t, config(c, "a", 7000))
	b := start(t, config(c, "b", 7100))
	for i, bu := range topic.Bundles(16) {
		var wg sync.WaitGroup
		var got [2]BrokerInfo
		var errs [2]error
		for j, n := range []*node{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[j], errs[j] = n.Lookup(context.Background(), ns, bu, true)
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("bundle %d: %v, %v", i, errs[0], errs[1])
		}
		if got[0].ID != got[1].ID {
			t.Fatalf("bundle %d: a says %s, b says %s", i, got[0].ID, got[1].ID)
		}
		if a.Owns(ns, bu) == b.Owns(ns, bu) {
			t.Fatalf("bundle %d: a owns %v, b owns %v", i, a.Owns(ns, bu), b.Owns(ns, bu))
		}
		winner := map[string]*node{"a": a, "b": b}[got[0].ID]
		if !winner.Owns(ns, bu) {
			t.Fatalf("bundle %d: %s reported as owner but does not own it", i, got[0].ID)
		}
	}
}

func TestLeaseRevokedExternally(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	a := start(t, config(c, "a", 7000))
	b := start(t, config(c, "b", 7100))
	bu := topic.Bundles(4)[0]
	lookup(t, a, bu, true)
	old := leaseOf(t, c, "a")
	if err := c.Meta.RevokeLease(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 10*time.Second, func() bool { return a.lost.has(ns, bu) })
	if a.Owns(ns, bu) || len(a.Owned()) != 0 {
		t.Fatal("a still owns the bundle after its lease was revoked")
	}
	testcluster.WaitFor(t, 10*time.Second, func() bool {
		l := leaseOf(t, c, "a")
		return l != 0 && l != old
	})
	// b can take the bundle; a, registered again, sees b as the owner.
	if owner := lookup(t, b, bu, true); owner.ID != "b" {
		t.Fatalf("owner %s", owner.ID)
	}
	if owner := lookup(t, a, bu, true); owner.ID != "b" || a.Owns(ns, bu) {
		t.Fatalf("a sees owner %s", owner.ID)
	}
	// a can own bundles again under its new lease.
	bu2 := topic.Bundles(4)[2]
	if owner := lookup(t, a, bu2, true); owner.ID != "a" || !a.Owns(ns, bu2) {
		t.Fatalf("owner %s", owner.ID)
	}
	if a.lost.len() != 1 {
		t.Fatalf("%d losses, want 1", a.lost.len())
	}
}

func TestEtcdOutageLongerThanTTL(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	a := start(t, config(c, "a", 7000))
	bundles := topic.Bundles(4)
	for _, bu := range bundles[:2] {
		lookup(t, a, bu, true)
	}
	old := leaseOf(t, c, "a")
	c.StopEtcd()
	testcluster.WaitFor(t, 15*time.Second, func() bool { return a.lost.len() == 2 })
	for _, bu := range bundles[:2] {
		if a.Owns(ns, bu) || !a.lost.has(ns, bu) {
			t.Fatalf("%s still owned after the lease ran out", bu)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err := a.Lookup(ctx, ns, bundles[3], true)
	cancel()
	if err == nil {
		t.Fatal("lookup succeeded with etcd down")
	}
	c.StartEtcd()
	testcluster.WaitFor(t, 30*time.Second, func() bool {
		l := leaseOf(t, c, "a")
		return l != 0 && l != old
	})
	// The old ownership keys are gone (the old lease was revoked), the old
	// bundles are not considered owned, and a can acquire again.
	for _, bu := range bundles[:2] {
		key, _ := OwnershipKey(c.Region, ns, bu)
		if keyExists(t, c, key) {
			t.Fatalf("%s: stale ownership key after re-registration", bu)
		}
		if a.Owns(ns, bu) {
			t.Fatalf("%s owned after re-registration", bu)
		}
	}
	if owner := lookup(t, a, bundles[0], true); owner.ID != "a" || !a.Owns(ns, bundles[0]) {
		t.Fatalf("owner %s", owner.ID)
	}
}

func TestRestartTakesOverPreviousLife(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	t0 := time.Unix(1_700_000_000, 0)
	cfg1 := config(c, "a", 7000)
	cfg1.Now = func() time.Time { return t0 }
	old := start(t, cfg1)
	bu := topic.Bundles(4)[0]
	lookup(t, old, bu, true)
	key, _ := OwnershipKey(c.Region, ns, bu)

	// A new incarnation (same id and URLs, started later) does not wait for
	// the old lease: it revokes it, freeing the old bundles at once.
	cfg2 := config(c, "a", 7000)
	cfg2.Now = func() time.Time { return t0.Add(time.Second) }
	cur := start(t, cfg2)
	if keyExists(t, c, key) {
		t.Fatal("the previous life's bundle is still owned")
	}
	testcluster.WaitFor(t, 10*time.Second, func() bool { return old.lost.has(ns, bu) })
	if owner := lookup(t, cur, bu, true); owner.ID != "a" || !cur.Owns(ns, bu) || old.Owns(ns, bu) {
		t.Fatalf("owner %s", owner.ID)
	}
	// The old incarnation, which lost its lease, tries to register again
	// but must not take the id back from the newer one.
	l := leaseOf(t, c, "a")
	time.Sleep(2 * time.Second) // several re-registration attempts
	if old.Registered() {
		t.Fatal("the old incarnation registered again")
	}
	if err := old.reg.Err(); !errors.Is(err, metastore.ErrTaken) {
		t.Fatalf("old incarnation re-registering: %v", err)
	}
	if leaseOf(t, c, "a") != l || !cur.Owns(ns, bu) {
		t.Fatal("the newer incarnation lost its registration")
	}

	// A different broker with the same id waits, then fails.
	cfg3 := config(c, "a", 7200)
	ctx3, cancel3 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel3()
	if _, err := newStarted(ctx3, cfg3.Config, cfg3.Deps); !errors.Is(err, ErrIDInUse) {
		t.Fatalf("duplicate id: %v", err)
	}
}

// registryGoroutines counts the goroutines of this package and of the
// etcd client (watches, lease keep-alives) besides the test's own: the
// embedded etcd server's and gRPC's transport goroutines come and go with
// the load and say nothing about the registry.
func registryGoroutines() (int, string) {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	var ours []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "ownership.TestCloseLeavesNoGoroutines") {
			continue
		}
		if strings.Contains(g, "isobar/broker/ownership.") || strings.Contains(g, "go.etcd.io/etcd/client/v3.") {
			n++
			ours = append(ours, g)
		}
	}
	return n, strings.Join(ours, "\n\n")
}

// TestCloseLeavesNoGoroutines checks that Close waits for everything the
// registry started, its own goroutines and the etcd client's for its
// watches and leases (the client's per-connection goroutines are started
// before counting).
func TestCloseLeavesNoGoroutines(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cfg := config(c, "a", 7000)
	warm, err := cfg.Meta.Grant(context.Background(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	warm.Revoke(context.Background())
	before, _ := registryGoroutines()

	r, err := newStarted(context.Background(), cfg.Config, cfg.Deps)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lookup(context.Background(), ns, topic.Bundles(4)[0], true); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The etcd client ends a cancelled watch's stream once the server
	// has answered the cancel: seconds under the race detector on a busy
	// machine, so the wait is long (it ends as soon as the count drops).
	deadline := time.Now().Add(30 * time.Second)
	testcluster.WaitFor(t, 60*time.Second, func() bool {
		n, stacks := registryGoroutines()
		if n > before && time.Now().After(deadline) {
			t.Fatalf("%d goroutines of the registry and the etcd client after Close, %d before:\n%s", n, before, stacks)
		}
		return n <= before
	})
}

func TestLeader(t *testing.T) {
	t0 := time.Unix(1000, 0)
	bs := []BrokerInfo{
		{ID: "c", Started: t0.Add(time.Second)},
		{ID: "b", Started: t0},
		{ID: "a", Started: t0, Draining: true},
		{ID: "d", Started: t0},
	}
	if l, ok := Leader(bs); !ok || l.ID != "b" {
		t.Fatalf("leader = %q, want b (oldest, not draining, lowest id)", l.ID)
	}
	if l, _ := Leader(bs[2:3]); l.ID != "a" {
		t.Fatalf("leader of draining brokers only = %q", l.ID)
	}
	if _, ok := Leader(nil); ok {
		t.Fatal("a leader of no brokers")
	}
}
