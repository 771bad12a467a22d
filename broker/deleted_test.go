package broker_test

import (
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire/pb"
)

// TestDeletedReplicatedTopicNotRecreatedByReplication: a replicated topic
// deleted here is not created again by another region's replicator
// (whose copy still streams here): its producer is refused, saying why,
// and nothing is created. Once a client creates the topic here again,
// replication into it works again. The mark goes with the namespace.
func TestDeletedReplicatedTopicNotRecreatedByReplication(t *testing.T) {
	e := startEnv(t, nil)
	ctx := ctxT(t)
	const ns, tp = "public/geo", "persistent://public/geo/gone"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.pol.CreateCluster(ctx, "other", policy.ClusterData{ServiceURL: "http://127.0.0.1:2"}))
	must(e.pol.UpdateTenant(ctx, "public", policy.TenantInfo{AllowedClusters: []string{"test", "other"}}))
	must(e.pol.CreateNamespace(ctx, ns, &policy.Policies{ReplicationClusters: []string{"test", "other"}}))
	name, _ := topic.Parse(tp)
	must(e.b.AdminAPI().Topics.CreateTopic(ctx, name))

	replicatorOn := func(tp string) *pb.CommandError {
		t.Helper()
		c := dialRaw(t, e.url, true)
		c.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
			Topic: proto.String(tp), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1), ProducerName: proto.String(replication.Prefix + "other")}})
		switch r := c.recv().Cmd; r.GetType() {
		case pb.BaseCommand_PRODUCER_SUCCESS:
			return nil
		case pb.BaseCommand_ERROR:
			return r.GetError()
		default:
			t.Fatalf("replicator producer: %v", r)
			return nil
		}
	}
	replicator := func() *pb.CommandError { t.Helper(); return replicatorOn(tp) }
	if err := replicator(); err != nil {
		t.Fatalf("replicator producer on the existing topic: %v", err)
	}
	must(e.b.AdminAPI().Topics.DeleteTopic(ctx, name, true))
	for range 2 { // and again: the refusal creates nothing
		err := replicator()
		if err == nil || err.GetError() != pb.ServerError_TopicNotFound || !strings.Contains(err.GetMessage(), "was deleted in region") {
			t.Fatalf("replicator producer after the delete: %v, want TopicNotFound saying it was deleted", err)
		}
		if ts, lerr := e.b.PersistentTopics(ctx, ns); lerr != nil || len(ts) != 0 {
			t.Fatalf("topics after a refused replicator: %v %v", ts, lerr)
		}
	}

	// A client's producer creates it here again: replication may too.
	p, err := e.client().CreateProducer(pulsar.ProducerOptions{Topic: tp})
	must(err)
	p.Close()
	if err := replicator(); err != nil {
		t.Fatalf("replicator producer after the topic was created again: %v", err)
	}

	// A partition of a partitioned topic deleted here is refused while
	// the partitioned topic is gone, and let through once it is created
	// again (in any region: its metadata is the federation's).
	parts, _ := topic.Parse("persistent://public/geo/parts")
	must(e.pol.CreatePartitioned(ctx, parts, 2))
	if err := replicatorOn(parts.Partitioned(0).String()); err != nil {
		t.Fatalf("replicator producer on a partition: %v", err)
	}
	must(e.b.AdminAPI().Topics.DeleteTopic(ctx, parts.Partitioned(0), true))
	must(e.pol.DeletePartitioned(ctx, parts))
	if err := replicatorOn(parts.Partitioned(0).String()); err == nil || err.GetError() != pb.ServerError_TopicNotFound {
		t.Fatalf("replicator producer on a partition of a deleted partitioned topic: %v, want TopicNotFound", err)
	}
	must(e.pol.CreatePartitioned(ctx, parts, 2))
	if err := replicatorOn(parts.Partitioned(0).String()); err != nil {
		t.Fatalf("replicator producer on a partition of the partitioned topic created again: %v", err)
	}

	// Deleted again, then its namespace: the maintenance pass drops the
	// mark (the partition's went when it was created again).
	must(e.b.AdminAPI().Topics.DeleteTopic(ctx, name, true))
	meta := e.cl.Connect()
	marks := func() int {
		ks, err := meta.ListKeys(ctx, metastore.RegionPrefix(e.cl.Region)+"deleted-topics/")
		must(err)
		return len(ks)
	}
	if n := marks(); n != 1 {
		t.Fatalf("%d marks after the delete, want 1", n)
	}
	must(e.b.AdminAPI().Topics.DeleteTopic(ctx, parts.Partitioned(0), true))
	must(e.pol.DeletePartitioned(ctx, parts))
	if n := marks(); n != 2 {
		t.Fatalf("%d marks after deleting the topic and the partitioned one, want 2", n)
	}
	must(e.pol.DeleteNamespace(ctx, ns))
	e.b.MaintainOnce(ctx)
	if n := marks(); n != 0 {
		t.Fatalf("%d marks after the namespace was deleted, want 0", n)
	}
}
