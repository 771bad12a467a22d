package broker_test

import (
	"context"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire/pb"
)

// The admin view of a topic: a stored subscription nobody consumes still
// shows its backlog, and storage size counts the open ledger.
func TestAdminStatsBacklogAndSize(t *testing.T) {
	e := startEnv(t, nil)
	ctx := context.Background()
	name, _ := topic.Parse("persistent://public/default/stats")
	adm := e.b.AdminAPI().Topics
	if err := adm.CreateTopic(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := adm.CreateSubscription(ctx, name, "early", &adminapi.Earliest); err != nil {
		t.Fatal(err)
	}
	p, err := e.client().CreateProducer(pulsar.ProducerOptions{Topic: name.String(), DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	produce(t, p, "s", 4, nil)
	st, err := adm.Stats(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Subscriptions["early"].MsgBacklog; got != 4 {
		t.Fatalf("backlog of the unloaded subscription: %d, want 4", got)
	}
	if st.StorageSize <= 0 || st.BacklogSize <= 0 || len(st.Publishers) != 1 {
		t.Fatalf("storage %d, backlog size %d, publishers %d", st.StorageSize, st.BacklogSize, len(st.Publishers))
	}
	if err := adm.Skip(ctx, name, "early", 1); err != nil {
		t.Fatal(err)
	}
	if st, _ = adm.Stats(ctx, name); st.Subscriptions["early"].MsgBacklog != 3 {
		t.Fatalf("after skip 1: backlog %d", st.Subscriptions["early"].MsgBacklog)
	}
}

// A producer can ask for a subscription to exist before it sends (the
// client's dead-letter producer does): nothing it sends is missed.
func TestProducerInitialSubscription(t *testing.T) {
	e := startEnv(t, nil)
	const tp = "persistent://public/default/initial-sub"
	c := dialRaw(t, e.url, true)
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: proto.String(tp), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1),
		InitialSubscriptionName: proto.String("dlq-sub")}})
	if r := c.recv().Cmd; r.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("producer: %v", r)
	}
	name, _ := topic.Parse(tp)
	subs, err := e.b.AdminAPI().Topics.Subscriptions(context.Background(), name)
	if err != nil || len(subs) != 1 || subs[0] != "dlq-sub" {
		t.Fatalf("subscriptions %v, %v", subs, err)
	}
}
