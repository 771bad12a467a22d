package broker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/wire/pb"
)

// endTxnRaw ends transaction id through its coordinator over a raw
// connection (after a crash the client that made it is gone).
func endTxnRaw(t *testing.T, e *env, id pulsar.TxnID, a pb.TxnAction) {
	t.Helper()
	c := dialRaw(t, e.url, true)
	req := uint64(1)
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN.Enum(), EndTxn: &pb.CommandEndTxn{RequestId: &req,
		TxnidMostBits: &id.MostSigBits, TxnidLeastBits: &id.LeastSigBits, TxnAction: a.Enum()}})
	r := c.recv().Cmd.GetEndTxnResponse()
	if r == nil || r.Error != nil {
		t.Fatalf("end %v of %v: %v", a, id, r)
	}
}

// receiveExactly receives want, in order, then nothing.
func receiveExactly(t *testing.T, c pulsar.Consumer, want ...string) []pulsar.Message {
	t.Helper()
	ctx := ctxT(t)
	var ms []pulsar.Message
	for _, w := range want {
		m, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("receive (want %s): %v", w, err)
		}
		if string(m.Payload()) != w {
			t.Fatalf("received %q, want %q", m.Payload(), w)
		}
		ms = append(ms, m)
	}
	receiveNone(t, c, 500*time.Millisecond)
	return ms
}

func msgNames(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// TestPendingAcksSurviveCrash: acknowledgements made in an open
// transaction are recorded in the topic's log. After the broker crashed,
// the topic served again still holds them: the same messages acknowledged
// in another transaction are a conflict; a commit then acknowledges
// them (a new consumer gets only the rest), an abort gives them back
// (delivered again, once). The commit is also tried before any consumer
// came back (the subscription is not loaded then). The state is replayed
// from the records, or (abort) restored from a snapshot.
func TestPendingAcksSurviveCrash(t *testing.T) {
	for _, mode := range []string{"commit", "abort", "commit-unloaded"} {
		t.Run(mode, func(t *testing.T) { testPendingAcksSurviveCrash(t, mode) })
	}
}

func testPendingAcksSurviveCrash(t *testing.T, mode string) {
	e := startEnv(t, withTransactions)
	client := e.txnClient()
	ctx := ctxT(t)
	const topicName = "persistent://public/default/txn-pending"
	subscribe := func(client pulsar.Client) pulsar.Consumer {
		t.Helper()
		c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	consumer := subscribe(client)
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topicName, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	all := msgNames("m", 0, 6)
	for _, p := range all {
		if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(p)}); err != nil {
			t.Fatal(err)
		}
	}
	ms := receiveExactly(t, consumer, all...)
	tx, err := client.NewTransaction(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:3] {
		if err := consumer.AckWithTxn(m, tx); err != nil {
			t.Fatal(err)
		}
	}
	id := tx.GetTxnID()
	if mode == "abort" {
		// The abort's case restores them from the buffer's snapshot
		// (taken at the log's end), the commits' from the records.
		e.b.MaintainOnce(ctx)
	}
	e.b.Abort() // a crash: nothing closed, nothing handed over
	e.startBroker()
	client = e.txnClient()

	action := pb.TxnAction_COMMIT
	if mode == "abort" {
		action = pb.TxnAction_ABORT
	}
	if mode == "commit-unloaded" {
		endTxnRaw(t, e, id, action)
		consumer = subscribe(client)
		defer consumer.Close()
		receiveExactly(t, consumer, all[3:]...)
		return
	}
	// The pending acknowledgements were replayed: the messages (which
	// the consumer of the subscription gets again meanwhile) are held by
	// tx.
	consumer = subscribe(client)
	ms = receiveExactly(t, consumer, all...)
	// (A transaction whose ACK failed is done for, in the client: one
	// each; nor can it be aborted.)
	for i, m := range ms[:4] {
		other, err := client.NewTransaction(time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		err = consumer.AckWithTxn(m, other)
		switch {
		case i < 3 && (err == nil || !strings.Contains(err.Error(), "TransactionConflict")):
			t.Fatalf("%s acknowledged in a second transaction after the crash: %v", m.Payload(), err)
		case i == 3 && err != nil: // not tx's
			t.Fatal(err)
		case i == 3:
			if err := other.Abort(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	consumer.Close()
	endTxnRaw(t, e, id, action)
	consumer = subscribe(client)
	defer consumer.Close()
	if mode == "commit" {
		receiveExactly(t, consumer, all[3:]...)
	} else {
		receiveExactly(t, consumer, all...)
	}
}

// TestPendingAckMarkersNotDelivered: the records of pending
// acknowledgements and of their ends are entries of the topic's log,
// between the messages and after them, yet a reader and another
// subscription get only the messages, before and after the topic is
// loaded again, and the reader knows when it has read the last.
func TestPendingAckMarkersNotDelivered(t *testing.T) {
	e := startEnv(t, withTransactions)
	client := e.txnClient()
	ctx := ctxT(t)
	const topicName = "persistent://public/default/txn-markers"
	consumer, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topicName, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	send := func(ps []string) {
		for _, p := range ps {
			if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(p)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(msgNames("m", 0, 4))
	ms := receiveExactly(t, consumer, msgNames("m", 0, 4)...)
	committed, _ := client.NewTransaction(time.Minute)
	aborted, _ := client.NewTransaction(time.Minute)
	open, _ := client.NewTransaction(time.Hour)
	for i, tx := range []pulsar.Transaction{committed, aborted, open} {
		if err := consumer.AckWithTxn(ms[i], tx); err != nil {
			t.Fatal(err)
		}
	}
	if err := committed.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := aborted.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	send(msgNames("m", 4, 8))
	// The log ends with records: GET_LAST_MESSAGE_ID passes over them.
	// (m1 again first: its acknowledgement was aborted.)
	ms = receiveExactly(t, consumer, append([]string{"m1"}, msgNames("m", 4, 8)...)...)
	if err := consumer.AckWithTxn(ms[1], open); err != nil {
		t.Fatal(err)
	}
	check := func(client pulsar.Client) {
		t.Helper()
		reader, err := client.CreateReader(pulsar.ReaderOptions{Topic: topicName, StartMessageID: pulsar.EarliestMessageID()})
		if err != nil {
			t.Fatal(err)
		}
		defer reader.Close()
		var got []pulsar.Message
		for range 8 {
			m, err := reader.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m)
		}
		for i, m := range got {
			if want := fmt.Sprintf("m%d", i); string(m.Payload()) != want {
				t.Fatalf("reader: %q, want %q", m.Payload(), want)
			}
		}
		// The records are there, between m3 and m4.
		if a, b := got[3].ID(), got[4].ID(); a.LedgerID() == b.LedgerID() && b.EntryID()-a.EntryID() < 6 { // three acks, two ends
			t.Fatalf("m3 at %v, m4 at %v: no records between them", a, b)
		}
		if reader.HasNext() {
			t.Fatal("reader: more after the last message")
		}
		nctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		if m, err := reader.Next(nctx); err == nil {
			t.Fatalf("reader got %q after the messages", m.Payload())
		}
		other, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: fmt.Sprintf("other-%d", time.Now().UnixNano()),
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		receiveExactly(t, other, msgNames("m", 0, 8)...)
	}
	check(client)
	e.b.Abort()
	e.startBroker()
	check(e.txnClient())
}
