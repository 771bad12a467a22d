package policy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// geoStore is a policy store with clusters r0, r1 and r2, tenant acme
// and namespace acme/geo replicated to r0 and r1.
func geoStore(t *testing.T) *policy.Store {
	t.Helper()
	ctx := context.Background()
	s := newStore(t, policy.Config{LocalCluster: "r0"})
	for _, c := range []string{"r0", "r1", "r2"} {
		must(t, s.CreateCluster(ctx, c, policy.ClusterData{ServiceURL: "http://" + c}))
	}
	must(t, s.CreateTenant(ctx, "acme", policy.TenantInfo{}))
	must(t, s.CreateNamespace(ctx, "acme/geo", &policy.Policies{ReplicationClusters: []string{"r0", "r1"}}))
	return s
}

// A namespace is active-active at epoch 0 until told otherwise; every
// change of mode or primary raises the epoch by one, setting the same
// again does not; a primary must be a replication cluster, and dropping
// the primary from the replication clusters is refused.
func TestFailoverPolicy(t *testing.T) {
	ctx := context.Background()
	s := geoStore(t)
	p, err := s.Namespace(ctx, "acme/geo")
	must(t, err)
	if f := policy.FailoverOf(p); f != (policy.Failover{Mode: policy.ActiveActive}) {
		t.Fatalf("new namespace: %+v", f)
	}
	set := func(mode, primary string) (policy.Failover, error) {
		p, err := s.UpdateNamespace(ctx, "acme/geo", func(p *policy.Policies) error { return policy.SetFailover(p, mode, primary) })
		if err != nil {
			return policy.Failover{}, err
		}
		return policy.FailoverOf(p), nil
	}
	steps := []struct {
		mode, primary string
		want          policy.Failover
	}{
		{policy.ActiveStandby, "r0", policy.Failover{Mode: policy.ActiveStandby, Primary: "r0", Epoch: 1}},
		{policy.ActiveStandby, "r0", policy.Failover{Mode: policy.ActiveStandby, Primary: "r0", Epoch: 1}},
		{policy.ActiveStandby, "r1", policy.Failover{Mode: policy.ActiveStandby, Primary: "r1", Epoch: 2}},
		{policy.ActiveActive, "", policy.Failover{Mode: policy.ActiveActive, Epoch: 3}},
		{policy.ActiveStandby, "r0", policy.Failover{Mode: policy.ActiveStandby, Primary: "r0", Epoch: 4}},
	}
	for _, st := range steps {
		got, err := set(st.mode, st.primary)
		must(t, err)
		if got != st.want {
			t.Fatalf("set %s %q: %+v, want %+v", st.mode, st.primary, got, st.want)
		}
	}
	for _, bad := range []struct{ mode, primary, want string }{
		{policy.ActiveStandby, "r2", `"r2" is not one of the replication clusters`},
		{policy.ActiveStandby, "", "needs a primary region"},
		{policy.ActiveActive, "r0", "has no primary"},
		{"active-passive", "r0", `failover.mode: "active-passive"`},
	} {
		_, err := set(bad.mode, bad.primary)
		wantErr(t, err, policy.ErrInvalid)
		if !strings.Contains(err.Error(), bad.want) {
			t.Errorf("set %s %q: %v, want it to say %q", bad.mode, bad.primary, err, bad.want)
		}
	}
	_, err = s.UpdateNamespace(ctx, "acme/geo", func(p *policy.Policies) error {
		p.ReplicationClusters = []string{"r1"}
		return nil
	})
	wantErr(t, err, policy.ErrInvalid)
	p, err = s.Namespace(ctx, "acme/geo")
	must(t, err)
	if f := policy.FailoverOf(p); f != (policy.Failover{Mode: policy.ActiveStandby, Primary: "r0", Epoch: 4}) {
		t.Fatalf("after refused changes: %+v", f)
	}
}

// Promote moves the primary only from the region named, raising the
// epoch by one and keeping the automatic failover delay; from another
// region it is refused (ErrPrimaryChanged), to a region outside the
// replication clusters too (ErrInvalid), and neither changes anything.
func TestPromote(t *testing.T) {
	ctx := context.Background()
	s := geoStore(t)
	_, err := s.UpdateNamespace(ctx, "acme/geo", func(p *policy.Policies) error {
		if err := policy.SetFailover(p, policy.ActiveStandby, "r0"); err != nil {
			return err
		}
		return policy.SetAutoFailover(p, 2)
	})
	must(t, err)
	wantErr(t, s.Promote(ctx, "acme/geo", "r1", "r0"), policy.ErrPrimaryChanged)
	wantErr(t, s.Promote(ctx, "acme/geo", "r0", "r2"), policy.ErrInvalid)
	wantErr(t, s.Promote(ctx, "acme/nope", "r0", "r1"), policy.ErrNotFound)
	p, err := s.Namespace(ctx, "acme/geo")
	must(t, err)
	if f := policy.FailoverOf(p); f != (policy.Failover{Mode: policy.ActiveStandby, Primary: "r0", Epoch: 1, AutoAfterSeconds: 2}) {
		t.Fatalf("after refused promotions: %+v", f)
	}
	must(t, s.Promote(ctx, "acme/geo", "r0", "r1"))
	p, err = s.Namespace(ctx, "acme/geo")
	must(t, err)
	if f := policy.FailoverOf(p); f != (policy.Failover{Mode: policy.ActiveStandby, Primary: "r1", Epoch: 2, AutoAfterSeconds: 2}) {
		t.Fatalf("after the promotion: %+v", f)
	}
	wantErr(t, s.Promote(ctx, "acme/geo", "r0", "r1"), policy.ErrPrimaryChanged)
}

// A topic's own failover policy overrides its namespace's; its epoch is
// above every epoch the namespace holds; it is checked as the
// namespace's is, names a base topic, fails over manually only, and a
// change of the replication clusters may not drop its primary.
func TestTopicFailoverPolicy(t *testing.T) {
	ctx := context.Background()
	s := geoStore(t)
	update := func(fn func(p *policy.Policies) error) (*policy.Policies, error) {
		return s.UpdateNamespace(ctx, "acme/geo", fn)
	}
	p, err := update(func(p *policy.Policies) error { return policy.SetFailover(p, policy.ActiveStandby, "r0") })
	must(t, err)
	if f := policy.TopicFailoverOf(p, "orders"); f != (policy.Failover{Mode: policy.ActiveStandby, Primary: "r0", Epoch: 1}) {
		t.Fatalf("a topic without its own: %+v", f)
	}
	p, err = update(func(p *policy.Policies) error {
		return policy.SetTopicFailover(p, "orders", policy.ActiveStandby, "r1")
	})
	must(t, err)
	if f := policy.TopicFailoverOf(p, "orders"); f != (policy.Failover{Mode: policy.ActiveStandby, Primary: "r1", Epoch: 2}) {
		t.Fatalf("its own: %+v", f)
	}
	if f := policy.TopicFailoverOf(p, "other"); f.Primary != "r0" || f.Epoch != 1 {
		t.Fatalf("another topic: %+v", f)
	}
	// Setting the same again changes nothing; another topic's epoch is
	// above both.
	p, err = update(func(p *policy.Policies) error {
		must(t, policy.SetTopicFailover(p, "orders", policy.ActiveStandby, "r1"))
		return policy.SetTopicFailover(p, "audit", policy.ActiveActive, "")
	})
	must(t, err)
	if a, o := policy.TopicFailoverOf(p, "audit"), policy.TopicFailoverOf(p, "orders"); a != (policy.Failover{Mode: policy.ActiveActive, Epoch: 3}) || o.Epoch != 2 {
		t.Fatalf("audit %+v, orders %+v", a, o)
	}
	for _, bad := range []struct {
		local, mode, primary string
		auto                 int
		want                 string
	}{
		{"orders", policy.ActiveStandby, "r2", 0, `"r2" is not one of the replication clusters`},
		{"orders", policy.ActiveStandby, "", 0, "needs a primary region"},
		{"orders", policy.ActiveActive, "r0", 0, "has no primary"},
		{"orders-partition-3", policy.ActiveStandby, "r1", 0, "not the local name of a (partitioned) topic"},
		{"a/b", policy.ActiveStandby, "r1", 0, "not the local name"},
		{"", policy.ActiveStandby, "r1", 0, "not the local name"},
		{"orders", policy.ActiveStandby, "r1", 30, "fails over manually only"},
	} {
		_, err := update(func(p *policy.Policies) error {
			if err := policy.SetTopicFailover(p, bad.local, bad.mode, bad.primary); err != nil {
				return err
			}
			if bad.auto != 0 {
				f := p.TopicFailover[bad.local]
				f.AutoAfterSeconds = bad.auto
				p.TopicFailover[bad.local] = f
			}
			return nil
		})
		wantErr(t, err, policy.ErrInvalid)
		if !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q %s %q: %v, want it to say %q", bad.local, bad.mode, bad.primary, err, bad.want)
		}
	}
	_, err = update(func(p *policy.Policies) error {
		p.ReplicationClusters = []string{"r0"}
		return nil
	})
	wantErr(t, err, policy.ErrInvalid)
	if err == nil || !strings.Contains(err.Error(), "topicFailover.orders") {
		t.Fatalf("dropping a topic's primary: %v", err)
	}
	p, err = update(func(p *policy.Policies) error {
		if !policy.RemoveTopicFailover(p, "orders") || policy.RemoveTopicFailover(p, "orders") {
			t.Error("RemoveTopicFailover: want true, then false")
		}
		return nil
	})
	must(t, err)
	if f := policy.TopicFailoverOf(p, "orders"); f.Primary != "r0" {
		t.Fatalf("after removal: %+v", f)
	}
	p, err = s.Namespace(ctx, "acme/geo")
	must(t, err)
	if len(p.TopicFailover) != 1 || p.TopicFailover["audit"].Mode != policy.ActiveActive {
		t.Fatalf("stored: %+v", p.TopicFailover)
	}
}
