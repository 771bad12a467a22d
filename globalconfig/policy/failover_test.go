package policy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// A namespace is active-active at epoch 0 until told otherwise; every
// change of mode or primary raises the epoch by one, setting the same
// again does not; a primary must be a replication cluster, and dropping
// the primary from the replication clusters is refused.
func TestFailoverPolicy(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, policy.Config{LocalCluster: "r0"})
	for _, c := range []string{"r0", "r1", "r2"} {
		must(t, s.CreateCluster(ctx, c, policy.ClusterData{ServiceURL: "http://" + c}))
	}
	must(t, s.CreateTenant(ctx, "acme", policy.TenantInfo{}))
	must(t, s.CreateNamespace(ctx, "acme/geo", &policy.Policies{ReplicationClusters: []string{"r0", "r1"}}))
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
