package policy_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/testcluster"
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

// EffectiveTopicPoliciesIn reads a namespace's topic policies at once and
// agrees with EffectiveTopicPolicies topic by topic: global only, local
// only, both, another cluster's local ones ignored, other namespaces
// apart; a corrupt record fails the call.
func TestEffectiveTopicPoliciesIn(t *testing.T) {
	ctx := context.Background()
	meta := testcluster.Start(t, testcluster.Options{Bookies: 0}).Connect()
	s, err := policy.New(meta, policy.Config{LocalCluster: "r0"})
	must(t, err)
	r1, err := policy.New(meta, policy.Config{LocalCluster: "r1"})
	must(t, err)
	must(t, s.CreateCluster(ctx, "r0", policy.ClusterData{ServiceURL: "http://r0"}))
	must(t, s.CreateTenant(ctx, "acme", policy.TenantInfo{}))
	for _, ns := range []string{"acme/app", "acme/app2"} {
		must(t, s.CreateNamespace(ctx, ns, nil))
	}
	set := func(st *policy.Store, name string, sc policy.TopicScope, fn func(*policy.TopicPolicies)) {
		t.Helper()
		must(t, st.UpdateTopicPolicies(ctx, mustName(t, name), sc, func(p *policy.TopicPolicies) error { fn(p); return nil }))
	}
	set(s, "persistent://acme/app/g", policy.GlobalScope, func(p *policy.TopicPolicies) { p.MaxProducers = intp(1) })
	set(s, "persistent://acme/app/l", policy.LocalScope, func(p *policy.TopicPolicies) { p.MaxConsumers = intp(2) })
	set(s, "persistent://acme/app/both", policy.GlobalScope, func(p *policy.TopicPolicies) { p.MaxProducers, p.MaxConsumers = intp(3), intp(4) })
	set(s, "persistent://acme/app/both", policy.LocalScope, func(p *policy.TopicPolicies) { p.MaxProducers = intp(5) })
	set(s, "non-persistent://acme/app/np", policy.GlobalScope, func(p *policy.TopicPolicies) { p.MaxProducers = intp(6) })
	set(r1, "persistent://acme/app/r1only", policy.LocalScope, func(p *policy.TopicPolicies) { p.MaxProducers = intp(7) })
	set(r1, "persistent://acme/app/g", policy.LocalScope, func(p *policy.TopicPolicies) { p.MaxProducers = intp(8) })
	set(s, "persistent://acme/app2/other", policy.GlobalScope, func(p *policy.TopicPolicies) { p.MaxProducers = intp(9) })

	all, err := s.EffectiveTopicPoliciesIn(ctx, "acme/app")
	must(t, err)
	want := []string{"persistent://acme/app/g", "persistent://acme/app/l", "persistent://acme/app/both", "non-persistent://acme/app/np"}
	if len(all) != len(want) {
		t.Fatalf("got policies of %d topics, want %d: %+v", len(all), len(want), all)
	}
	for _, n := range append(want, "persistent://acme/app/r1only", "persistent://acme/app/none") {
		one, err := s.EffectiveTopicPolicies(ctx, mustName(t, n))
		must(t, err)
		if !reflect.DeepEqual(all[n], one) {
			t.Errorf("%s: at once %+v, alone %+v", n, all[n], one)
		}
	}
	if _, err := s.EffectiveTopicPoliciesIn(ctx, "acme"); !errors.Is(err, policy.ErrInvalid) {
		t.Fatalf("a bad namespace name: %v", err)
	}
	_, err = meta.Put(ctx, policy.TopicPoliciesKey(mustName(t, "persistent://acme/app/bad")), []byte("{"))
	must(t, err)
	if _, err := s.EffectiveTopicPoliciesIn(ctx, "acme/app"); !errors.Is(err, policy.ErrCorrupt) {
		t.Fatalf("a corrupt record: %v", err)
	}
}
