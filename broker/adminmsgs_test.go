package broker_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/topic"
)

// Peeking reads a subscription's n-th unacknowledged entry and moves
// nothing: not the cursor, not the backlog, and an unknown subscription is
// not created. Examine and message id by time read the log by position and
// by publish time.
func TestAdminPeekMessages(t *testing.T) {
	e := startEnv(t, nil)
	ctx := context.Background()
	name, _ := topic.Parse("persistent://public/default/peek")
	adm := e.b.AdminAPI().Topics
	if err := adm.CreateTopic(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := adm.CreateSubscription(ctx, name, "s", &adminapi.Earliest); err != nil {
		t.Fatal(err)
	}
	cl := e.client()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: name.String(), DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	before := time.Now().Add(-time.Second)
	ids := produce(t, p, "m", 5, nil)
	at := func(i int) adminapi.MessageID {
		return adminapi.MessageID{LedgerID: ids[i].LedgerID(), EntryID: ids[i].EntryID(), PartitionIndex: -1, BatchIndex: -1}
	}
	peek := func(sub string, n int64) (adminapi.MessageID, error) {
		t.Helper()
		id, raw, err := adm.PeekMessage(ctx, name, sub, n)
		if err == nil && len(raw) == 0 {
			t.Fatalf("peek %s %d: an empty entry", sub, n)
		}
		return id, err
	}
	internal := func() adminapi.CursorStats {
		st, err := adm.InternalStats(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return st.Cursors["s"]
	}
	cur := internal()
	for n := int64(1); n <= 5; n++ {
		if id, err := peek("s", n); err != nil || id != at(int(n-1)) {
			t.Fatalf("peek s %d: %+v %v, want %+v", n, id, err, at(int(n-1)))
		}
	}
	if _, err := peek("s", 6); errkind.KindOf(err) != errkind.ErrNotFound {
		t.Fatalf("peek past the end: %v, want not found", err)
	}
	if got := internal(); got.MarkDeletePosition != cur.MarkDeletePosition || got.IndividuallyDeletedMessages != cur.IndividuallyDeletedMessages {
		t.Fatalf("peeking moved the cursor: %+v, was %+v", got, cur)
	}
	if st, _ := adm.Stats(ctx, name); st.Subscriptions["s"].MsgBacklog != 5 {
		t.Fatalf("backlog after peeking: %d, want 5", st.Subscriptions["s"].MsgBacklog)
	}
	// An unknown subscription counts from the first entry, and stays
	// unknown.
	if id, err := peek("nobody", 2); err != nil || id != at(1) {
		t.Fatalf("peek nobody 2: %+v %v", id, err)
	}
	if subs, _ := adm.Subscriptions(ctx, name); !slices.Equal(subs, []string{"s"}) {
		t.Fatalf("subscriptions after peeking an unknown one: %v", subs)
	}
	if _, err := peek("bad/name", 1); errkind.KindOf(err) != errkind.ErrBadRequest {
		t.Fatalf("peek with an invalid subscription name: %v, want bad request", err)
	}

	// Acknowledged entries are skipped: ack the second one only.
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: name.String(), SubscriptionName: "s", AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	ms := receiveN(t, c, 2, false)
	if err := c.Ack(ms[1]); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for n, want := range map[int64]int{1: 0, 2: 2, 4: 4} {
		if id, err := peek("s", n); err != nil || id != at(want) {
			t.Fatalf("after acking message 1: peek %d: %+v %v, want %+v", n, id, err, at(want))
		}
	}
	if _, err := peek("s", 5); errkind.KindOf(err) != errkind.ErrNotFound {
		t.Fatalf("peek 5 of 4 unacknowledged: %v, want not found", err)
	}

	// Examine: from either end.
	for _, tc := range []struct {
		earliest bool
		n        int64
		want     int
	}{{true, 1, 0}, {true, 5, 4}, {false, 1, 4}, {false, 5, 0}} {
		if id, _, err := adm.ExamineMessage(ctx, name, tc.earliest, tc.n); err != nil || id != at(tc.want) {
			t.Fatalf("examine earliest=%v %d: %+v %v, want %+v", tc.earliest, tc.n, id, err, at(tc.want))
		}
	}
	if _, _, err := adm.ExamineMessage(ctx, name, true, 6); errkind.KindOf(err) != errkind.ErrNotFound {
		t.Fatalf("examine 6 of 5: %v, want not found", err)
	}

	// Message id by time.
	if id, err := adm.MessageIDByTime(ctx, name, before); err != nil || id != at(0) {
		t.Fatalf("message id at %v: %+v %v, want %+v", before, id, err, at(0))
	}
	if _, err := adm.MessageIDByTime(ctx, name, time.Now().Add(time.Hour)); errkind.KindOf(err) != errkind.ErrNotFound {
		t.Fatalf("message id an hour ahead: %v, want not found", err)
	}
}

// Topic properties are kept with the topic's metadata: set, merged,
// removed, and still there once the topic is unloaded; bad ones change
// nothing.
func TestAdminTopicProperties(t *testing.T) {
	e := startEnv(t, nil)
	ctx := context.Background()
	name, _ := topic.Parse("persistent://public/default/props")
	adm := e.b.AdminAPI().Topics
	if _, err := adm.Properties(ctx, name); errkind.KindOf(err) != errkind.ErrTopicNotFound {
		t.Fatalf("properties of a missing topic: %v, want topic not found", err)
	}
	if err := adm.CreateTopic(ctx, name); err != nil {
		t.Fatal(err)
	}
	if got, err := adm.Properties(ctx, name); err != nil || len(got) != 0 {
		t.Fatalf("properties of a new topic: %v %v", got, err)
	}
	if err := adm.UpdateProperties(ctx, name, map[string]string{"a": "1", "b": "2"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := adm.UpdateProperties(ctx, name, map[string]string{"b": "3", "c": "4"}, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]string{{"": "x"}, {"big": string(make([]byte, 20<<10))}} {
		if err := adm.UpdateProperties(ctx, name, bad, nil); errkind.KindOf(err) != errkind.ErrBadRequest {
			t.Fatalf("bad properties: %v, want bad request", err)
		}
	}
	if err := adm.Unload(ctx, name); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"b": "3", "c": "4"}
	if got, err := adm.Properties(ctx, name); err != nil || !maps.Equal(got, want) {
		t.Fatalf("properties after unloading: %v %v, want %v", got, err, want)
	}
}

// Stats timestamps: none before anything happens, then the last publish,
// and a consumer's (and its subscription's) last flow, delivery and
// acknowledgement. The Go client does not say it supports partial
// producers.
func TestAdminStatsTimestamps(t *testing.T) {
	e := startEnv(t, nil)
	ctx := context.Background()
	name, _ := topic.Parse("persistent://public/default/stamps")
	adm := e.b.AdminAPI().Topics
	if err := adm.CreateTopic(ctx, name); err != nil {
		t.Fatal(err)
	}
	st, err := adm.Stats(ctx, name)
	if err != nil || st.TopicCreationTimeStamp <= 0 || st.LastPublishTimestamp != 0 {
		t.Fatalf("new topic: created %d, last publish %d, %v", st.TopicCreationTimeStamp, st.LastPublishTimestamp, err)
	}
	cl := e.client()
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: name.String(), SubscriptionName: "s", AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: name.String()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := time.Now().UnixMilli()
	produce(t, p, "m", 1, nil)
	ms := receiveN(t, c, 1, false)
	if err := c.Ack(ms[0]); err != nil {
		t.Fatal(err)
	}
	st, err = adm.Stats(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if st.LastPublishTimestamp < start || len(st.Publishers) != 1 || st.Publishers[0].IsSupportsPartialProducer {
		t.Fatalf("after a publish: last publish %d (start %d), publishers %+v", st.LastPublishTimestamp, start, st.Publishers)
	}
	sub := st.Subscriptions["s"]
	if len(sub.Consumers) != 1 {
		t.Fatalf("consumers %+v", sub.Consumers)
	}
	k := sub.Consumers[0]
	for what, v := range map[string]int64{
		"subscription lastConsumedFlowTimestamp": sub.LastConsumedFlowTimestamp, "subscription lastConsumedTimestamp": sub.LastConsumedTimestamp,
		"subscription lastAckedTimestamp": sub.LastAckedTimestamp, "consumer lastConsumedFlowTimestamp": k.LastConsumedFlowTimestamp,
		"consumer lastConsumedTimestamp": k.LastConsumedTimestamp, "consumer lastAckedTimestamp": k.LastAckedTimestamp,
	} {
		if v <= 0 || v > time.Now().UnixMilli() {
			t.Errorf("%s: %d", what, v)
		}
	}
}
