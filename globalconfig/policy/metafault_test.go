package policy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/metastore/metafault"
)

// TestWriteFaultsLeaveNoPartialState fails, through the metafault seam,
// the one write of each change that reads and checks several records
// (a namespace against its tenant, a topic's replication against its
// tenant and namespace, a delete against what lies under it), and the
// reads before it. Each change reports the store's error, naming what it
// changed (not a conflict, not "not found"), and leaves the global store
// exactly as it was; once the fault clears the same call succeeds.
func TestWriteFaultsLeaveNoPartialState(t *testing.T) {
	ctx := context.Background()
	tc := testcluster.Start(t, testcluster.Options{Bookies: 0})
	fm := metafault.Wrap(tc.Connect(), nil)
	s, err := policy.New(fm, policy.Config{LocalCluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	must(t, s.EnsureStandalone(ctx, "c1", policy.ClusterData{ServiceURL: "http://c1:8080"}))
	must(t, s.CreateCluster(ctx, "c2", policy.ClusterData{ServiceURL: "http://c2:8080"}))
	must(t, s.CreateTenant(ctx, "t1", policy.TenantInfo{AllowedClusters: []string{"c1", "c2"}}))
	must(t, s.CreateTenant(ctx, "t2", policy.TenantInfo{AllowedClusters: []string{"c1"}}))
	must(t, s.CreateNamespace(ctx, "t1/ns", &policy.Policies{ReplicationClusters: []string{"c1"}}))
	must(t, s.CreateNamespace(ctx, "t1/empty", &policy.Policies{ReplicationClusters: []string{"c1"}}))
	tp := mustName(t, "persistent://t1/ns/orders")

	state := func() string {
		t.Helper()
		kvs, err := tc.Meta.List(ctx, policy.Root)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, kv := range kvs {
			fmt.Fprintf(&b, "%s@%d %s\n", kv.Key, kv.Rev, kv.Value)
		}
		return b.String()
	}

	for _, c := range []struct {
		name   string
		fault  *metafault.Rule
		change func() error
	}{
		{"create namespace", metafault.Once("", metafault.OpTxn), func() error {
			return s.CreateNamespace(ctx, "t1/new", &policy.Policies{ReplicationClusters: []string{"c1", "c2"}})
		}},
		{"create namespace, tenant unreadable", metafault.Once(policy.TenantKey("t1"), metafault.OpGet), func() error {
			return s.CreateNamespace(ctx, "t1/new2", &policy.Policies{ReplicationClusters: []string{"c1"}})
		}},
		{"update namespace", metafault.Once("", metafault.OpTxn), func() error {
			_, err := s.UpdateNamespace(ctx, "t1/ns", func(p *policy.Policies) error {
				p.ReplicationClusters = []string{"c1", "c2"}
				return nil
			})
			return err
		}},
		{"topic replication", metafault.Once("", metafault.OpTxn), func() error {
			return s.SetTopicReplication(ctx, tp, []string{"c1", "c2"})
		}},
		{"partitioned topic", metafault.Once("", metafault.OpTxn), func() error {
			return s.CreatePartitioned(ctx, tp, 4)
		}},
		{"delete namespace", metafault.Once("", metafault.OpTxn), func() error {
			return s.DeleteNamespace(ctx, "t1/empty")
		}},
		{"delete tenant", metafault.Once("", metafault.OpTxn), func() error {
			return s.DeleteTenant(ctx, "t2")
		}},
		{"update tenant, namespaces unreadable", metafault.Once(policy.NamespaceKey("t1", ""), metafault.OpList), func() error {
			return s.UpdateTenant(ctx, "t1", policy.TenantInfo{AllowedClusters: []string{"c1", "c2"}, AdminRoles: []string{"ops"}})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, txns := state(), fm.Calls(metafault.OpTxn)+fm.Calls(metafault.OpCAS)
			fm.Set(c.fault)
			err := c.change()
			fm.Set(nil)
			if !errors.Is(err, metafault.ErrInjected) || c.fault.Fired() != 1 {
				t.Fatalf("error %v (injected %d); want the injected one", err, c.fault.Fired())
			}
			for _, not := range []error{policy.ErrConflict, policy.ErrNotFound, policy.ErrExists, policy.ErrInvalid, policy.ErrNotEmpty} {
				if errors.Is(err, not) {
					t.Fatalf("error %v reads as %v", err, not)
				}
			}
			if !strings.Contains(err.Error(), "t1") && !strings.Contains(err.Error(), "t2") {
				t.Fatalf("error %q does not name what it changed", err)
			}
			if after := state(); after != before {
				t.Fatalf("a failed change changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if c.fault.Ops[0] != metafault.OpTxn {
				// A failed read: no write was even tried.
				if n := fm.Calls(metafault.OpTxn) + fm.Calls(metafault.OpCAS); n != txns {
					t.Fatalf("%d writes tried after a failed read", n-txns)
				}
			}
			t.Logf("refused cleanly: %v", err)
			if err := c.change(); err != nil {
				t.Fatalf("after the fault cleared: %v", err)
			}
			if state() == before {
				t.Fatal("the change did nothing after the fault cleared")
			}
		})
	}
	if _, err := tc.Meta.Get(ctx, policy.NamespaceKey("t1", "new")); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Meta.Get(ctx, policy.TenantKey("t2")); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("tenant t2 after its delete: %v", err)
	}
}
