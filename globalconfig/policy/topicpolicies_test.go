package policy_test

import (
	"context"
	"testing"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// A topic's local and global policies are apart; in force is the local
// value over the global one, field by field; a refused update writes
// nothing; a partition shares its partitioned topic's; deleting the
// namespace deletes them.
func TestTopicPoliciesScopes(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, policy.Config{LocalCluster: "r0"})
	must(t, s.CreateCluster(ctx, "r0", policy.ClusterData{ServiceURL: "http://r0"}))
	must(t, s.CreateTenant(ctx, "acme", policy.TenantInfo{}))
	must(t, s.CreateNamespace(ctx, "acme/app", nil))
	tp := mustName(t, "persistent://acme/app/t")
	update := func(sc policy.TopicScope, fn func(*policy.TopicPolicies)) error {
		return s.UpdateTopicPolicies(ctx, tp, sc, func(p *policy.TopicPolicies) error { fn(p); return nil })
	}
	must(t, update(policy.GlobalScope, func(p *policy.TopicPolicies) { p.MaxProducers, p.MaxConsumers = intp(7), intp(9) }))
	must(t, update(policy.LocalScope, func(p *policy.TopicPolicies) { p.MaxProducers = intp(3) }))
	eff, err := s.EffectiveTopicPolicies(ctx, mustName(t, "persistent://acme/app/t-partition-2"))
	must(t, err)
	if *eff.MaxProducers != 3 || *eff.MaxConsumers != 9 {
		t.Fatalf("in force: producers %d consumers %d, want 3 (local) and 9 (global)", *eff.MaxProducers, *eff.MaxConsumers)
	}
	// Refused: out of range, replication in the local scope, an unknown
	// namespace. Nothing changes.
	wantErr(t, update(policy.LocalScope, func(p *policy.TopicPolicies) { p.MaxProducers = intp(-1) }), policy.ErrInvalid)
	wantErr(t, update(policy.LocalScope, func(p *policy.TopicPolicies) { p.ReplicationClusters = []string{"r0"} }), policy.ErrInvalid)
	wantErr(t, update(policy.GlobalScope, func(p *policy.TopicPolicies) { p.ReplicationClusters = []string{"nowhere"} }), policy.ErrInvalid)
	wantErr(t, s.UpdateTopicPolicies(ctx, mustName(t, "persistent://acme/none/t"), policy.GlobalScope,
		func(p *policy.TopicPolicies) error { p.MaxProducers = intp(1); return nil }), policy.ErrNotFound)
	local, _, err := s.TopicPoliciesIn(ctx, tp, policy.LocalScope)
	must(t, err)
	if *local.MaxProducers != 3 || local.ReplicationClusters != nil {
		t.Fatalf("refused updates changed the local policies: %+v", local)
	}
	// Unsetting every field deletes the record.
	must(t, update(policy.LocalScope, func(p *policy.TopicPolicies) { p.MaxProducers = nil }))
	if _, found, err := s.TopicPoliciesIn(ctx, tp, policy.LocalScope); err != nil || found {
		t.Fatalf("empty local policies: found %v, %v", found, err)
	}
	// Replication clusters do not replace the other global policies.
	must(t, s.SetTopicReplication(ctx, tp, []string{"r0"}))
	global, _, err := s.TopicPolicies(ctx, tp)
	must(t, err)
	if *global.MaxProducers != 7 || len(global.ReplicationClusters) != 1 {
		t.Fatalf("global after setting replication: %+v", global)
	}
	must(t, update(policy.LocalScope, func(p *policy.TopicPolicies) { p.MessageTTLInSeconds = intp(60) }))
	must(t, s.DeleteNamespace(ctx, "acme/app"))
	must(t, s.CreateNamespace(ctx, "acme/app", nil))
	for _, sc := range []policy.TopicScope{policy.LocalScope, policy.GlobalScope} {
		if got, found, err := s.TopicPoliciesIn(ctx, tp, sc); err != nil || found {
			t.Fatalf("%v policies outlived their namespace: %+v %v", sc, got, err)
		}
	}
}
