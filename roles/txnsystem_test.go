package roles

import (
	"context"
	"testing"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/topic"
)

// TestEnsureTransactionSystem: a broker with transactions on creates
// tenant pulsar, namespace pulsar/system joined by its cluster and the
// coordinator assign topic's record, as `isobar region` does; a second
// broker (or a second start) changes nothing, and another region joins.
func TestEnsureTransactionSystem(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Bookies: 0})
	pol, err := policy.New(c.Connect(), policy.Config{LocalCluster: "east"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, cl := range []string{"east", "west"} {
		if err := pol.CreateCluster(ctx, cl, policy.ClusterData{ServiceURL: "http://" + cl, BrokerServiceURL: "pulsar://" + cl}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := EnsureTransactionSystem(ctx, pol, "east", 2); err != nil {
			t.Fatal(err)
		}
	}
	// Another count later does not change the record: every broker of a
	// region must have the same.
	if err := EnsureTransactionSystem(ctx, pol, "west", 3); err != nil {
		t.Fatal(err)
	}
	ti, err := pol.Tenant(ctx, "pulsar")
	if err != nil {
		t.Fatal(err)
	}
	if len(ti.AllowedClusters) != 2 {
		t.Errorf("tenant pulsar allows %v, want east and west", ti.AllowedClusters)
	}
	p, err := pol.Namespace(ctx, TransactionSystemNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.ReplicationClusters) != 2 {
		t.Errorf("pulsar/system replicated to %v, want east and west", p.ReplicationClusters)
	}
	name, _ := topic.Parse(broker.TCAssignTopic)
	n, ok, err := pol.Partitions(ctx, name)
	if err != nil || !ok || n != 2 {
		t.Errorf("assign topic: %d partitions (recorded %v, %v), want 2", n, ok, err)
	}
}
