package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/wire/pb"
)

// txnClient is a Pulsar client with transactions enabled.
func (e *env) txnClient() pulsar.Client {
	e.t.Helper()
	return e.clientWith(func(o *pulsar.ClientOptions) { o.EnableTransaction = true })
}

func withTransactions(s *setup) {
	s.Transactions = broker.TransactionsConfig{Enabled: true, Coordinators: 2}
}

// receiveNone checks that consumer receives nothing within a short
// time (the positive checks that follow it, messages sent after the ones
// held, show that nothing was merely slow).
func receiveNone(t *testing.T, c pulsar.Consumer, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if m, err := c.Receive(ctx); err == nil {
		t.Fatalf("received %q, want nothing", m.Payload())
	}
}

func TestTransactionsCommitAbortTimeout(t *testing.T) {
	e := startEnv(t, withTransactions)
	client := e.txnClient()
	ctx := ctxT(t)
	const topicName = "persistent://public/default/txn"
	consumer, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topicName, DisableBatching: true, SendTimeout: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	send := func(txn pulsar.Transaction, payload string) {
		t.Helper()
		if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(payload), Transaction: txn}); err != nil {
			t.Fatalf("send %s: %v", payload, err)
		}
	}
	receive := func(want string) {
		t.Helper()
		m, err := consumer.Receive(ctx)
		if err != nil {
			t.Fatalf("receive (want %s): %v", want, err)
		}
		if string(m.Payload()) != want {
			t.Fatalf("received %q, want %q", m.Payload(), want)
		}
		consumer.Ack(m)
	}

	// Committed: nothing before the commit, all ten in order after.
	committed, err := client.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		send(committed, fmt.Sprintf("c%d", i))
	}
	receiveNone(t, consumer, 300*time.Millisecond)
	if err := committed.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		receive(fmt.Sprintf("c%d", i))
	}
	if err := committed.Commit(ctx); err == nil {
		t.Fatal("second commit succeeded")
	}

	// Aborted: never delivered; a message sent after it is (the fence
	// that shows nothing of the transaction came before it).
	aborted, err := client.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		send(aborted, fmt.Sprintf("a%d", i))
	}
	if err := aborted.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	send(nil, "after-abort")
	receive("after-abort")

	// A transaction left open past its timeout is aborted by the
	// coordinator: its messages never come, later ones do.
	left, err := client.NewTransaction(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	send(left, "timed-out")
	send(nil, "after-timeout") // held behind the open transaction
	receive("after-timeout")
	if err := left.Commit(ctx); err == nil {
		t.Fatal("commit after the timeout succeeded")
	}

	// Messages of two transactions interleaved: each becomes visible at
	// its own commit, the log's order kept.
	t1, _ := client.NewTransaction(time.Minute)
	t2, _ := client.NewTransaction(time.Minute)
	send(t1, "t1-a")
	send(t2, "t2-a")
	send(t1, "t1-b")
	if err := t2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	receiveNone(t, consumer, 300*time.Millisecond) // t1 still holds everything after its first
	if err := t1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	receive("t1-a")
	receive("t2-a")
	receive("t1-b")
}

// TestTransactionBufferRecovery: after the broker crashed, the topic
// loaded again still skips an aborted transaction's messages and holds an
// open one's (and what came after it); the recovered coordinator still
// knows the open transaction, and aborts it at its deadline. The buffer
// is recovered from its snapshot at the last end and the entries after
// it, or (maintained) from a snapshot at the log's end.
func TestTransactionBufferRecovery(t *testing.T) {
	for _, maintained := range []bool{false, true} {
		t.Run(fmt.Sprintf("maintained=%v", maintained), func(t *testing.T) { testTransactionBufferRecovery(t, maintained) })
	}
}

func testTransactionBufferRecovery(t *testing.T, maintained bool) {
	e := startEnv(t, withTransactions)
	client := e.txnClient()
	ctx := ctxT(t)
	const topicName = "persistent://public/default/txn-recovery"
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topicName, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	aborted, _ := client.NewTransaction(time.Hour)
	open, _ := client.NewTransaction(4 * time.Second)
	for _, m := range []struct {
		txn pulsar.Transaction
		p   string
	}{{nil, "plain"}, {aborted, "aborted"}, {open, "open"}, {nil, "held"}} {
		if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(m.p), Transaction: m.txn}); err != nil {
			t.Fatal(err)
		}
	}
	if err := aborted.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if maintained {
		e.b.MaintainOnce(ctx)
	}
	e.b.Abort() // a crash: nothing closed, nothing handed over
	e.startBroker()

	client = e.txnClient()
	consumer, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	m, err := consumer.Receive(ctx)
	if err != nil || string(m.Payload()) != "plain" {
		t.Fatalf("first message %v %v", m, err)
	}
	receiveNone(t, consumer, 300*time.Millisecond)
	// The coordinator is loaded by a client connecting to it; at the
	// open transaction's deadline it aborts it: "held" comes, "open"
	// never.
	m, err = consumer.Receive(ctx)
	if err != nil || string(m.Payload()) != "held" {
		t.Fatalf("got %v %v, want held", m, err)
	}
}

// TestTransactionsOff: without broker.transactions, a client with
// transactions enabled fails to start, as against a Pulsar broker
// without a coordinator.
func TestTransactionsOff(t *testing.T) {
	e := startEnv(t, nil)
	_, err := pulsar.NewClient(pulsar.ClientOptions{URL: e.url, EnableTransaction: true, OperationTimeout: 5 * time.Second})
	if err == nil {
		t.Fatal("client with transactions started against a broker without them")
	}
}

// TestTransactionalAcks: acknowledgements in a transaction take effect at
// its commit, are undone (the message comes again) by an abort, and a
// message acknowledged in one transaction cannot be in another
// (TransactionConflict).
func TestTransactionalAcks(t *testing.T) {
	e := startEnv(t, withTransactions)
	client := e.txnClient()
	ctx := ctxT(t)
	const topicName = "persistent://public/default/txn-acks"
	subscribe := func() pulsar.Consumer {
		t.Helper()
		c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	consumer := subscribe()
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topicName, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for _, p := range []string{"m0", "m1"} {
		if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(p)}); err != nil {
			t.Fatal(err)
		}
	}
	m0, err := consumer.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := consumer.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	aborted, _ := client.NewTransaction(time.Minute)
	if err := consumer.AckWithTxn(m0, aborted); err != nil {
		t.Fatal(err)
	}
	other, _ := client.NewTransaction(time.Minute)
	if err := consumer.AckWithTxn(m0, other); err == nil {
		t.Fatal("a message acknowledged in two transactions")
	}
	committed, _ := client.NewTransaction(time.Minute)
	if err := consumer.AckWithTxn(m1, committed); err != nil {
		t.Fatal(err)
	}
	if err := aborted.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	// The abort sends m0 again.
	again, err := consumer.Receive(ctx)
	if err != nil || string(again.Payload()) != "m0" {
		t.Fatalf("after the abort: %v %v", again, err)
	}
	if err := committed.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	consumer.Close()
	// A new consumer of the subscription gets m0 (its acknowledgement
	// was aborted), not m1 (committed).
	consumer = subscribe()
	defer consumer.Close()
	m, err := consumer.Receive(ctx)
	if err != nil || string(m.Payload()) != "m0" {
		t.Fatalf("after the commit: %v %v", m, err)
	}
	receiveNone(t, consumer, 300*time.Millisecond)
}

// TestTransactionMetadataAdmin: GET
// /admin/v3/transactions/transactionMetadata/{most}/{least} describes an
// open transaction as Pulsar's admin API does, and answers 404 once it
// ended.
func TestTransactionMetadataAdmin(t *testing.T) {
	e := startEnv(t, withTransactions)
	srv := e.adminServer()
	client := e.txnClient()
	ctx := ctxT(t)
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: "txn-admin", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := client.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("x"), Transaction: tx}); err != nil {
		t.Fatal(err)
	}
	id := tx.GetTxnID()
	url := fmt.Sprintf("%s/admin/v3/transactions/transactionMetadata/%d/%d", srv.URL, id.MostSigBits, id.LeastSigBits)
	var m struct {
		Status             string                    `json:"status"`
		ProducedPartitions map[string]map[string]any `json:"producedPartitions"`
	}
	if code := getJSON(t, url, &m); code != 200 || m.Status != "OPEN" || m.ProducedPartitions["persistent://public/default/txn-admin"] == nil {
		t.Fatalf("metadata: %d %+v", code, m)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if code := getJSON(t, url, &m); code != 404 {
		t.Fatalf("metadata of an ended transaction: %d", code)
	}
}

// getJSON gets url and decodes a 200's body into v; it returns the status.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	code, body := httpGet(t, url)
	if code == 200 {
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
	}
	return code
}

// TestTransactionBadInput: malformed or refused transaction commands get
// their error responses; the connection stays.
func TestTransactionBadInput(t *testing.T) {
	e := startEnv(t, func(s *setup) {
		withTransactions(s)
		s.Transactions.MaxTimeout = time.Hour
	})
	c := dialRaw(t, e.url, true)
	u64 := func(v uint64) *uint64 { return &v }
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST.Enum(), TcClientConnectRequest: &pb.CommandTcClientConnectRequest{RequestId: u64(1), TcId: u64(7)}})
	if r := c.recv().Cmd.GetTcClientConnectResponse(); r.GetRequestId() != 1 || r.GetError() != pb.ServerError_TransactionCoordinatorNotFound {
		t.Fatalf("connect to coordinator 7 of 2: %v", r)
	}
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_NEW_TXN.Enum(), NewTxn: &pb.CommandNewTxn{RequestId: u64(2), TxnTtlSeconds: u64(uint64(2 * time.Hour / time.Millisecond))}})
	if r := c.recv().Cmd.GetNewTxnResponse(); r.GetRequestId() != 2 || r.GetError() != pb.ServerError_NotAllowedError {
		t.Fatalf("timeout over the maximum: %v", r)
	}
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_NEW_TXN.Enum(), NewTxn: &pb.CommandNewTxn{RequestId: u64(3), TxnTtlSeconds: u64(60000)}})
	nt := c.recv().Cmd.GetNewTxnResponse()
	if nt.GetRequestId() != 3 || nt.Error != nil {
		t.Fatalf("new txn: %v", nt)
	}
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_ADD_PARTITION_TO_TXN.Enum(), AddPartitionToTxn: &pb.CommandAddPartitionToTxn{RequestId: u64(4),
		TxnidMostBits: nt.TxnidMostBits, TxnidLeastBits: nt.TxnidLeastBits, Partitions: []string{"bogus://x/y/z"}}})
	if r := c.recv().Cmd.GetAddPartitionToTxnResponse(); r.GetRequestId() != 4 || r.GetError() != pb.ServerError_InvalidTopicName {
		t.Fatalf("bad partition name: %v", r)
	}
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN.Enum(), EndTxn: &pb.CommandEndTxn{RequestId: u64(5), TxnidMostBits: nt.TxnidMostBits, TxnidLeastBits: nt.TxnidLeastBits}})
	if r := c.recv().Cmd.GetEndTxnResponse(); r.GetRequestId() != 5 || r.GetError() != pb.ServerError_NotAllowedError {
		t.Fatalf("end without an action: %v", r)
	}
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN.Enum(), EndTxn: &pb.CommandEndTxn{RequestId: u64(6), TxnidMostBits: u64(0), TxnidLeastBits: u64(999), TxnAction: pb.TxnAction_COMMIT.Enum()}})
	if r := c.recv().Cmd.GetEndTxnResponse(); r.GetRequestId() != 6 || r.GetError() != pb.ServerError_TransactionNotFound {
		t.Fatalf("end of an unknown transaction: %v", r)
	}
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN_ON_SUBSCRIPTION.Enum(), EndTxnOnSubscription: &pb.CommandEndTxnOnSubscription{RequestId: u64(7), TxnAction: pb.TxnAction_ABORT.Enum()}})
	if r := c.recv().Cmd.GetEndTxnOnSubscriptionResponse(); r.GetRequestId() != 7 || r.GetError() != pb.ServerError_NotAllowedError {
		t.Fatalf("end on no subscription: %v", r)
	}
	c.alive()
}

// TestTransactionSystemTopicsRefused: a coordinator's log and the assign
// topic are not served as topics (a producer or consumer there would
// fence the coordinator's log, or read it).
func TestTransactionSystemTopicsRefused(t *testing.T) {
	e := startEnv(t, withTransactions)
	client := e.client()
	for _, name := range []string{"persistent://pulsar/system/__transaction_log_0", broker.TCAssignTopic + "-partition-0"} {
		if _, err := client.CreateProducer(pulsar.ProducerOptions{Topic: name, SendTimeout: time.Second}); err == nil {
			t.Fatalf("producer on %s", name)
		}
	}
}
