package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/topic"
)

func newStore(t *testing.T, cfg policy.Config) *policy.Store {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{Bookies: 0})
	s, err := policy.New(c.Connect(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}

func mustName(t *testing.T, s string) topic.Name {
	t.Helper()
	n, err := topic.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConfigValidate(t *testing.T) {
	err := policy.Config{LocalCluster: "a/b", DefaultBundles: -1, MaxPartitions: -1}.Validate()
	for _, field := range []string{"policy.localCluster", "policy.defaultBundles", "policy.maxPartitions"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate() = %v, want a problem with %s", err, field)
		}
	}
}

func TestStandaloneAndLifecycle(t *testing.T) {
	ctx := context.Background()
	var hasTopics sync.Map // namespace -> bool
	s := newStore(t, policy.Config{LocalCluster: "standalone", HasTopics: func(_ context.Context, ns string) (bool, error) {
		_, ok := hasTopics.Load(ns)
		return ok, nil
	}})
	cd := policy.ClusterData{ServiceURL: "http://localhost:8080", BrokerServiceURL: "pulsar://localhost:6650"}
	for range 2 { // idempotent
		must(t, s.EnsureStandalone(ctx, "standalone", cd))
	}
	got, err := s.Cluster(ctx, "standalone")
	must(t, err)
	if got.ServiceURL != cd.ServiceURL || got.BrokerServiceURL != cd.BrokerServiceURL {
		t.Fatalf("cluster = %+v", got)
	}
	ti, err := s.Tenant(ctx, "public")
	must(t, err)
	if !slices.Equal(ti.AllowedClusters, []string{"standalone"}) {
		t.Fatalf("tenant public = %+v", ti)
	}
	p, err := s.Namespace(ctx, "public/default")
	must(t, err)
	if !slices.Equal(p.ReplicationClusters, []string{"standalone"}) || p.Bundles == nil || p.Bundles.NumBundles != topic.DefaultBundles || len(p.Bundles.Boundaries) != topic.DefaultBundles+1 {
		t.Fatalf("public/default = %+v", p)
	}

	// A namespace with unknown fields keeps them; no replication clusters
	// means the local cluster.
	var body policy.Policies
	must(t, json.Unmarshal([]byte(`{"encryption_required":true,"latency_stats_sample_rate":{"c":5},"message_ttl_in_seconds":60}`), &body))
	must(t, s.CreateNamespace(ctx, "public/ns1", &body))
	wantErr(t, s.CreateNamespace(ctx, "public/ns1", &body), policy.ErrExists)
	p, err = s.Namespace(ctx, "public/ns1")
	must(t, err)
	b, _ := json.Marshal(p)
	if !strings.Contains(string(b), `"encryption_required":true`) || !strings.Contains(string(b), `"latency_stats_sample_rate":{"c":5}`) || !strings.Contains(string(b), `"replication_clusters":["standalone"]`) || *p.MessageTTLInSeconds != 60 || !p.EncryptionRequired {
		t.Fatalf("public/ns1 = %s", b)
	}
	nss, err := s.Namespaces(ctx, "public")
	must(t, err)
	if !slices.Equal(nss, []string{"public/default", "public/ns1"}) {
		t.Fatalf("namespaces = %v", nss)
	}
	_, err = s.Namespaces(ctx, "nope")
	wantErr(t, err, policy.ErrNotFound)

	// Update by CAS.
	p, err = s.UpdateNamespace(ctx, "public/ns1", func(p *policy.Policies) error {
		p.RetentionPolicies = &policy.RetentionPolicies{RetentionTimeInMinutes: 10, RetentionSizeInMB: -1}
		return nil
	})
	must(t, err)
	if p.RetentionPolicies.RetentionTimeInMinutes != 10 || p.Extra["latency_stats_sample_rate"] == nil || !p.EncryptionRequired {
		t.Fatalf("updated = %+v", p)
	}
	_, err = s.UpdateNamespace(ctx, "public/ns1", func(p *policy.Policies) error {
		p.ReplicationClusters = []string{"elsewhere"}
		return nil
	})
	wantErr(t, err, policy.ErrInvalid)
	_, err = s.UpdateNamespace(ctx, "public/missing", func(*policy.Policies) error { return nil })
	wantErr(t, err, policy.ErrNotFound)

	// Partitioned topics.
	pt := mustName(t, "persistent://public/ns1/pt")
	must(t, s.CreatePartitioned(ctx, pt, 3))
	wantErr(t, s.CreatePartitioned(ctx, pt, 3), policy.ErrExists)
	n, ok, err := s.Partitions(ctx, pt)
	if err != nil || !ok || n != 3 {
		t.Fatalf("Partitions = %d %v %v", n, ok, err)
	}
	if n, ok, err := s.Partitions(ctx, pt.Partitioned(1)); err != nil || ok || n != 0 {
		t.Fatalf("Partitions(partition) = %d %v %v", n, ok, err)
	}
	if n, ok, err := s.Partitions(ctx, mustName(t, "public/ns1/other")); err != nil || ok || n != 0 {
		t.Fatalf("Partitions(other) = %d %v %v", n, ok, err)
	}
	wantErr(t, s.UpdatePartitions(ctx, pt, 2), policy.ErrInvalid)
	must(t, s.UpdatePartitions(ctx, pt, 3))
	must(t, s.UpdatePartitions(ctx, pt, 5))
	if n, _, _ := s.Partitions(ctx, pt); n != 5 {
		t.Fatalf("partitions after update = %d", n)
	}
	wantErr(t, s.UpdatePartitions(ctx, mustName(t, "public/ns1/nope"), 5), policy.ErrNotFound)
	npt := mustName(t, "non-persistent://public/ns1/pt")
	must(t, s.CreatePartitioned(ctx, npt, 1))
	list, err := s.ListPartitioned(ctx, "public/ns1", topic.Persistent)
	must(t, err)
	if len(list) != 1 || list[0] != pt {
		t.Fatalf("ListPartitioned(persistent) = %v", list)
	}
	list, err = s.ListPartitioned(ctx, "public/ns1", "")
	must(t, err)
	if len(list) != 2 {
		t.Fatalf("ListPartitioned(all) = %v", list)
	}

	// Not-empty checks.
	wantErr(t, s.DeleteNamespace(ctx, "public/ns1"), policy.ErrNotEmpty)
	wantErr(t, s.DeleteTenant(ctx, "public"), policy.ErrNotEmpty)
	wantErr(t, s.DeleteCluster(ctx, "standalone"), policy.ErrNotEmpty)
	must(t, s.DeletePartitioned(ctx, pt))
	must(t, s.DeletePartitioned(ctx, npt))
	wantErr(t, s.DeletePartitioned(ctx, pt), policy.ErrNotFound)
	hasTopics.Store("public/ns1", true)
	wantErr(t, s.DeleteNamespace(ctx, "public/ns1"), policy.ErrNotEmpty)
	hasTopics.Delete("public/ns1")
	must(t, s.DeleteNamespace(ctx, "public/ns1"))
	wantErr(t, s.DeleteNamespace(ctx, "public/ns1"), policy.ErrNotFound)
	wantErr(t, s.CreatePartitioned(ctx, pt, 1), policy.ErrNotFound)
	must(t, s.DeleteNamespace(ctx, "public/default"))
	must(t, s.DeleteTenant(ctx, "public"))
	must(t, s.DeleteCluster(ctx, "standalone"))
	wantErr(t, s.DeleteCluster(ctx, "standalone"), policy.ErrNotFound)
	cs, err := s.Clusters(ctx)
	must(t, err)
	if len(cs) != 0 {
		t.Fatalf("clusters = %v", cs)
	}
}

func TestValidation(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, policy.Config{MaxPartitions: 10})
	must(t, s.CreateCluster(ctx, "c1", policy.ClusterData{}))
	must(t, s.CreateCluster(ctx, "c2", policy.ClusterData{}))
	must(t, s.CreateTenant(ctx, "t", policy.TenantInfo{AllowedClusters: []string{"c1"}}))
	must(t, s.CreateTenant(ctx, "open", policy.TenantInfo{}))
	must(t, s.CreateNamespace(ctx, "t/ns", &policy.Policies{ReplicationClusters: []string{"c1"}}))
	one, zero := 1, 0

	tests := []struct {
		name string
		op   func() error
		want error
	}{
		{"cluster bad name", func() error { return s.CreateCluster(ctx, "a b", policy.ClusterData{}) }, policy.ErrInvalid},
		{"cluster exists", func() error { return s.CreateCluster(ctx, "c1", policy.ClusterData{}) }, policy.ErrExists},
		{"update missing cluster", func() error { return s.UpdateCluster(ctx, "c9", policy.ClusterData{}) }, policy.ErrNotFound},
		{"tenant bad name", func() error { return s.CreateTenant(ctx, "a/b", policy.TenantInfo{}) }, policy.ErrInvalid},
		{"tenant unknown cluster", func() error {
			return s.CreateTenant(ctx, "t2", policy.TenantInfo{AllowedClusters: []string{"c9"}})
		}, policy.ErrInvalid},
		{"tenant exists", func() error { return s.CreateTenant(ctx, "t", policy.TenantInfo{}) }, policy.ErrExists},
		{"update missing tenant", func() error { return s.UpdateTenant(ctx, "t9", policy.TenantInfo{}) }, policy.ErrNotFound},
		{"namespace bad name", func() error { return s.CreateNamespace(ctx, "t", nil) }, policy.ErrInvalid},
		{"namespace legacy name", func() error { return s.CreateNamespace(ctx, "t/c/ns", nil) }, policy.ErrInvalid},
		{"namespace no tenant", func() error { return s.CreateNamespace(ctx, "t9/ns", nil) }, policy.ErrNotFound},
		{"namespace unknown cluster", func() error {
			return s.CreateNamespace(ctx, "open/ns", &policy.Policies{ReplicationClusters: []string{"c9"}})
		}, policy.ErrInvalid},
		{"namespace cluster not allowed", func() error {
			return s.CreateNamespace(ctx, "t/ns2", &policy.Policies{ReplicationClusters: []string{"c2"}})
		}, policy.ErrInvalid},
		{"namespace duplicate cluster", func() error {
			return s.CreateNamespace(ctx, "t/ns2", &policy.Policies{ReplicationClusters: []string{"c1", "c1"}})
		}, policy.ErrInvalid},
		{"negative ttl", func() error {
			ttl := -1
			return s.CreateNamespace(ctx, "open/ns", &policy.Policies{MessageTTLInSeconds: &ttl})
		}, policy.ErrInvalid},
		{"bad retention", func() error {
			return s.CreateNamespace(ctx, "open/ns", &policy.Policies{RetentionPolicies: &policy.RetentionPolicies{RetentionTimeInMinutes: -2}})
		}, policy.ErrInvalid},
		{"bad backlog quota type", func() error {
			return s.CreateNamespace(ctx, "open/ns", &policy.Policies{BacklogQuotaMap: map[string]policy.BacklogQuota{"x": {Policy: policy.ProducerException}}})
		}, policy.ErrInvalid},
		{"bad backlog quota policy", func() error {
			return s.CreateNamespace(ctx, "open/ns", &policy.Policies{BacklogQuotaMap: map[string]policy.BacklogQuota{policy.DestinationStorage: {Policy: "drop"}}})
		}, policy.ErrInvalid},
		{"bad topic type", func() error {
			return s.CreateNamespace(ctx, "open/ns", &policy.Policies{AutoTopicCreation: &policy.AutoTopicCreation{AllowAutoTopicCreation: true, TopicType: "x"}})
		}, policy.ErrInvalid},
		{"partitioned without partitions", func() error {
			return s.CreateNamespace(ctx, "open/ns", &policy.Policies{AutoTopicCreation: &policy.AutoTopicCreation{AllowAutoTopicCreation: true, TopicType: "partitioned", DefaultNumPartitions: &zero}})
		}, policy.ErrInvalid},
		{"non-partitioned with partitions", func() error {
			return s.CreateNamespace(ctx, "open/ns", &policy.Policies{AutoTopicCreation: &policy.AutoTopicCreation{AllowAutoTopicCreation: true, TopicType: "non-partitioned", DefaultNumPartitions: &one}})
		}, policy.ErrInvalid},
		{"bad bundles", func() error {
			return s.CreateNamespace(ctx, "open/ns", &policy.Policies{Bundles: &policy.BundlesData{Boundaries: []string{"0x00000000", "0x00000000", "0xffffffff"}}})
		}, policy.ErrInvalid},
		{"bundles not covering", func() error {
			return s.CreateNamespace(ctx, "open/ns", &policy.Policies{Bundles: &policy.BundlesData{Boundaries: []string{"0x00000000", "0x80000000"}}})
		}, policy.ErrInvalid},
		{"zero bundles", func() error {
			return s.CreateNamespace(ctx, "open/ns", &policy.Policies{Bundles: &policy.BundlesData{NumBundles: 0}})
		}, policy.ErrInvalid},
		{"tenant update drops used cluster", func() error {
			return s.UpdateTenant(ctx, "t", policy.TenantInfo{AllowedClusters: []string{"c2"}})
		}, policy.ErrInvalid},
		{"zero partitions", func() error { return s.CreatePartitioned(ctx, mustName(t, "t/ns/x"), 0) }, policy.ErrInvalid},
		{"too many partitions", func() error { return s.CreatePartitioned(ctx, mustName(t, "t/ns/x"), 11) }, policy.ErrInvalid},
		{"partition name", func() error { return s.CreatePartitioned(ctx, mustName(t, "t/ns/x-partition-0"), 2) }, policy.ErrInvalid},
		{"no namespace", func() error { return s.CreatePartitioned(ctx, mustName(t, "t/none/x"), 2) }, policy.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr(t, tt.op(), tt.want)
		})
	}

	// Valid variants that must pass.
	must(t, s.CreateNamespace(ctx, "open/bundles", &policy.Policies{Bundles: &policy.BundlesData{Boundaries: []string{"0x00000000", "0x7FFFFFFF", "0xffffffff"}}}))
	p, err := s.Namespace(ctx, "open/bundles")
	must(t, err)
	if p.Bundles.NumBundles != 2 || p.Bundles.Boundaries[1] != "0x7fffffff" {
		t.Fatalf("bundles = %+v", p.Bundles)
	}
	must(t, s.CreateNamespace(ctx, "open/eight", &policy.Policies{Bundles: &policy.BundlesData{NumBundles: 8}}))
	p, err = s.Namespace(ctx, "open/eight")
	must(t, err)
	if p.Bundles.NumBundles != 8 || len(p.Bundles.Boundaries) != 9 || len(p.ReplicationClusters) != 0 {
		t.Fatalf("open/eight = %+v", p)
	}
	must(t, s.UpdateTenant(ctx, "t", policy.TenantInfo{AllowedClusters: []string{"c1", "c2"}}))
	must(t, s.UpdateCluster(ctx, "c1", policy.ClusterData{ServiceURL: "http://x"}))
	cd, err := s.Cluster(ctx, "c1")
	must(t, err)
	if cd.ServiceURL != "http://x" {
		t.Fatalf("c1 = %+v", cd)
	}
}

func TestBacklogQuotaDecoding(t *testing.T) {
	tests := []struct {
		in   string
		want policy.BacklogQuota
	}{
		{`{"limit": "10240", "policy": "producer_request_hold"}`, policy.BacklogQuota{LimitSize: 10240, Policy: "producer_request_hold"}},
		{`{"limitSize": 5, "limitTime": 7, "policy": "producer_exception"}`, policy.BacklogQuota{LimitSize: 5, LimitTime: 7, Policy: "producer_exception"}},
		{`{"limit": 1, "limitSize": 2, "policy": "x"}`, policy.BacklogQuota{LimitSize: 2, Policy: "x"}},
		{`{"limitSize": null}`, policy.BacklogQuota{}},
	}
	for _, tt := range tests {
		var q policy.BacklogQuota
		if err := json.Unmarshal([]byte(tt.in), &q); err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if q != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.in, q, tt.want)
		}
	}
	var q policy.BacklogQuota
	if err := json.Unmarshal([]byte(`{"limit":"ten"}`), &q); err == nil {
		t.Error("want an error for a non-numeric limit")
	}
}

// Concurrent namespace creation and tenant deletion never leave a
// namespace without its tenant.
func TestNoOrphans(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, policy.Config{})
	for i := range 20 {
		must(t, s.CreateTenant(ctx, "t", policy.TenantInfo{}))
		var wg sync.WaitGroup
		var nsErr, tErr error
		wg.Add(2)
		go func() { defer wg.Done(); nsErr = s.CreateNamespace(ctx, "t/ns", nil) }()
		go func() { defer wg.Done(); tErr = s.DeleteTenant(ctx, "t") }()
		wg.Wait()
		_, getErr := s.Tenant(ctx, "t")
		tenantGone := errors.Is(getErr, policy.ErrNotFound)
		_, nsGetErr := s.Namespace(ctx, "t/ns")
		nsThere := nsGetErr == nil
		if tenantGone && nsThere {
			t.Fatalf("round %d: namespace outlived its tenant (create: %v, delete: %v)", i, nsErr, tErr)
		}
		if nsThere {
			must(t, s.DeleteNamespace(ctx, "t/ns"))
		}
		if !tenantGone {
			must(t, s.DeleteTenant(ctx, "t"))
		}
	}
}

func TestUpdateNamespaceConcurrent(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, policy.Config{})
	must(t, s.CreateTenant(ctx, "t", policy.TenantInfo{}))
	must(t, s.CreateNamespace(ctx, "t/ns", nil))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, err := s.UpdateNamespace(ctx, "t/ns", func(p *policy.Policies) error {
				v := 1
				if p.MessageTTLInSeconds != nil {
					v = *p.MessageTTLInSeconds + 1
				}
				p.MessageTTLInSeconds = &v
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	p, err := s.Namespace(ctx, "t/ns")
	must(t, err)
	if *p.MessageTTLInSeconds != 8 {
		t.Fatalf("ttl = %d, want 8 (lost updates)", *p.MessageTTLInSeconds)
	}
}
