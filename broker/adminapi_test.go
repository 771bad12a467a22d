package broker_test

import (
	"context"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/broker/topic"
)

// The admin view of a topic: a stored subscription nobody consumes still
// shows its backlog, and storage size counts the open ledger.
func TestAdminStatsBacklogAndSize(t *testing.T) {
	e := startEnv(t, nil)
	ctx := context.Background()
	name, _ := topic.Parse("persistent://public/default/stats")
	adm := e.b.Admin()
	if err := adm.CreateTopic(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := adm.CreateSubscription(ctx, name, "early", &admin.Earliest); err != nil {
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
