package broker_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// The admin API's transaction endpoints (docs/transactions.md, Admin
// API), as pulsar-admin's transactions commands call them.

type coordStats struct {
	State            string `json:"state"`
	LeastSigBits     int64  `json:"leastSigBits"`
	LowWaterMark     int64  `json:"lowWaterMark"`
	OngoingTxnSize   int64  `json:"ongoingTxnSize"`
	RecoverStartTime int64  `json:"recoverStartTime"`
	RecoverEndTime   int64  `json:"recoverEndTime"`
}

type bufferStats struct {
	State                  string `json:"state"`
	MaxReadPosition        string `json:"maxReadPosition"`
	LastSnapshotTimestamps *int64 `json:"lastSnapshotTimestamps"`
	OngoingTxnSize         int64  `json:"ongoingTxnSize"`
}

type inBufferStats struct {
	StartPosition *string `json:"startPosition"`
	Aborted       bool    `json:"aborted"`
}

type txnMeta struct {
	TxnID              string                    `json:"txnId"`
	Status             string                    `json:"status"`
	OpenTimestamp      int64                     `json:"openTimestamp"`
	ProducedPartitions map[string]map[string]any `json:"producedPartitions"`
}

func position(id pulsar.MessageID) string { return fmt.Sprintf("%d:%d", id.LedgerID(), id.EntryID()) }

// TestTransactionAdminEndpoints: coordinator stats (one, and all
// gathered), slow transactions by age, a topic's transaction buffer
// (its max read position held at an open transaction's first entry) and
// a transaction's part of it, through commit and abort; 400s and 404s.
func TestTransactionAdminEndpoints(t *testing.T) {
	e := startEnv(t, withTransactions)
	base := e.adminServer().URL + "/admin/v3/transactions"
	client := e.txnClient()
	ctx := ctxT(t)
	const tp = "persistent://public/default/txn-stats"
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	send := func(tx pulsar.Transaction, payload string) pulsar.MessageID {
		t.Helper()
		id, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(payload), Transaction: tx})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	get := func(path string, v any) {
		t.Helper()
		code, body := httpGet(t, base+path)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		reflect.ValueOf(v).Elem().SetZero() // (decoding into a map or pointer would merge)
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
	tb := "/transactionBufferStats/public/default/txn-stats"
	inBuffer := func(tx pulsar.Transaction) string {
		id := tx.GetTxnID()
		return fmt.Sprintf("/transactionInBufferStats/public/default/txn-stats/%d/%d", id.MostSigBits, id.LeastSigBits)
	}

	// No transaction yet: the buffer is unused, nothing held back.
	plain := send(nil, "plain")
	var bs bufferStats
	get(tb, &bs)
	if bs.State != "Unused" || bs.MaxReadPosition != position(plain) || bs.OngoingTxnSize != 0 || bs.LastSnapshotTimestamps == nil {
		t.Fatalf("buffer before any transaction: %+v", bs)
	}
	get(tb+"?lowWaterMarks=true", &bs)

	// tx1 writes, then a plain message: dispatch is held just before
	// tx1's first entry.
	tx1, err := client.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	first := send(tx1, "t1-a")
	send(tx1, "t1-b")
	after := send(nil, "after")
	get(tb, &bs)
	held := fmt.Sprintf("%d:%d", first.LedgerID(), first.EntryID()-1)
	if bs.State != "Ready" || bs.MaxReadPosition != held || bs.OngoingTxnSize != 1 {
		t.Fatalf("buffer with tx1 open: %+v, want maxReadPosition %s (before %s; last %s)", bs, held, position(first), position(after))
	}
	var ib inBufferStats
	get(inBuffer(tx1), &ib)
	if ib.StartPosition == nil || *ib.StartPosition != position(first) || ib.Aborted {
		t.Fatalf("tx1 in the buffer: %+v, want start %s", ib, position(first))
	}

	// tx2 writes and aborts.
	tx2, err := client.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	send(tx2, "t2")
	get(tb, &bs)
	if bs.OngoingTxnSize != 2 || bs.MaxReadPosition != held {
		t.Fatalf("buffer with tx1 and tx2 open: %+v", bs)
	}
	if err := tx2.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	get(inBuffer(tx2), &ib)
	if ib.StartPosition != nil || !ib.Aborted {
		t.Fatalf("aborted tx2 in the buffer: %+v", ib)
	}

	// The coordinators: tx1's holds it (and perhaps tx2, still ending);
	// the gathered form has every coordinator, the same.
	id1 := tx1.GetTxnID()
	var one coordStats
	get(fmt.Sprintf("/coordinatorStats?coordinatorId=%d", id1.MostSigBits), &one)
	if one.State != "Ready" || one.OngoingTxnSize < 1 || one.LeastSigBits < int64(id1.LeastSigBits) || one.LowWaterMark != int64(id1.LeastSigBits)-1 ||
		one.RecoverStartTime == 0 || one.RecoverEndTime < one.RecoverStartTime {
		t.Fatalf("coordinator %d: %+v (tx1 %v)", id1.MostSigBits, one, id1)
	}
	var all map[string]coordStats
	get("/coordinatorStats", &all)
	if len(all) != 2 || all["0"].State != "Ready" || all["1"].State != "Ready" || all[strconv.FormatUint(id1.MostSigBits, 10)].RecoverStartTime != one.RecoverStartTime {
		t.Fatalf("all coordinators: %+v", all)
	}

	// Slow transactions: tx1 is older than 1 ms, not than an hour.
	time.Sleep(5 * time.Millisecond)
	tx1ID := fmt.Sprintf("(%d,%d)", id1.MostSigBits, id1.LeastSigBits)
	var slow map[string]txnMeta
	get("/slowTransactions/1", &slow)
	if m, ok := slow[tx1ID]; !ok || m.TxnID != tx1ID || m.Status != "OPEN" || m.ProducedPartitions[tp] == nil || m.OpenTimestamp == 0 {
		t.Fatalf("slow transactions over 1 ms: %+v, want %s", slow, tx1ID)
	}
	get(fmt.Sprintf("/slowTransactions/1?coordinatorId=%d", id1.MostSigBits), &slow)
	if _, ok := slow[tx1ID]; !ok {
		t.Fatalf("slow transactions of coordinator %d: %+v", id1.MostSigBits, slow)
	}
	get(fmt.Sprintf("/slowTransactions/1?coordinatorId=%d", 1-id1.MostSigBits), &slow)
	if _, ok := slow[tx1ID]; ok {
		t.Fatalf("slow transactions of the other coordinator: %+v", slow)
	}
	get("/slowTransactions/3600000", &slow)
	if len(slow) != 0 {
		t.Fatalf("slow transactions over an hour: %+v", slow)
	}

	// tx1 commits: nothing held, tx1 no longer in the buffer.
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	get(tb, &bs)
	if bs.State != "Ready" || bs.OngoingTxnSize != 0 || bs.MaxReadPosition == held {
		t.Fatalf("buffer after the commit: %+v", bs)
	}
	get(inBuffer(tx1), &ib)
	if ib.StartPosition != nil || ib.Aborted {
		t.Fatalf("committed tx1 in the buffer: %+v", ib)
	}
	get("/slowTransactions/0", &slow)
	if _, ok := slow[tx1ID]; ok {
		t.Fatalf("committed tx1 still slow: %+v", slow)
	}

	// Refusals.
	for path, want := range map[string]int{
		"/coordinatorStats?coordinatorId=2":                                404,
		"/coordinatorStats?coordinatorId=x":                                400,
		"/slowTransactions/1?coordinatorId=9":                              404,
		"/slowTransactions/soon":                                           400,
		"/slowTransactions/-1":                                             400,
		"/transactionBufferStats/public/default/nosuch":                    404,
		"/transactionBufferStats/public/nosuch/t":                          404,
		"/transactionBufferStats/public/default/txn-stats?lowWaterMarks=x": 400,
		"/transactionInBufferStats/public/default/nosuch/0/1":              404,
		"/transactionInBufferStats/public/default/txn-stats/0/x":           400,
		"/transactionMetadata/9/0":                                         404,
	} {
		if code, body := httpGet(t, base+path); code != want || !strings.Contains(body, "reason") {
			t.Errorf("GET %s: %d %s, want %d", path, code, body, want)
		}
	}
}

// TestTransactionAdminOff: with transactions off, every transaction
// endpoint answers as transactionMetadata does (405, the reason naming
// the setting).
func TestTransactionAdminOff(t *testing.T) {
	e := startEnv(t, nil)
	base := e.adminServer().URL + "/admin/v3/transactions"
	ctx := ctxT(t)
	producer, err := e.client().CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/plain"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"/transactionMetadata/0/1",
		"/coordinatorStats",
		"/coordinatorStats?coordinatorId=0",
		"/slowTransactions/1000",
		"/slowTransactions/1000?coordinatorId=0",
		"/transactionBufferStats/public/default/plain",
		"/transactionInBufferStats/public/default/plain/0/1",
		"/pendingAckStats/public/default/plain/s",
		"/transactionInPendingAckStats/public/default/plain/s/0/1",
	} {
		if code, body := httpGet(t, base+path); code != http.StatusMethodNotAllowed || !strings.Contains(body, "broker.transactions.enabled") {
			t.Errorf("GET %s with transactions off: %d %s", path, code, body)
		}
	}
}

// TestPendingAckAdmin: a subscription's pending acknowledgements as
// pulsar-admin's pending-ack-stats reads them: none before any
// transaction, one transaction pending after AckWithTxn, none after its
// commit; a transaction's part of them; 404 for a subscription the topic
// does not have.
func TestPendingAckAdmin(t *testing.T) {
	e := startEnv(t, withTransactions)
	base := e.adminServer().URL + "/admin/v3/transactions"
	client := e.txnClient()
	ctx := ctxT(t)
	const tp = "persistent://public/default/txn-acks"
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	type ackStats struct {
		State          string `json:"state"`
		OngoingTxnSize int64  `json:"ongoingTxnSize"`
	}
	stats := func() ackStats {
		t.Helper()
		code, body := httpGet(t, base+"/pendingAckStats/public/default/txn-acks/s")
		if code != 200 {
			t.Fatalf("pendingAckStats: %d %s", code, body)
		}
		var st ackStats
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("pendingAckStats: %v: %s", err, body)
		}
		return st
	}
	for i := range 2 {
		if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if st := stats(); st.State != "None" || st.OngoingTxnSize != 0 {
		t.Fatalf("before any transaction: %+v", st)
	}
	tx, err := client.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := cons.AckWithTxn(m, tx); err != nil {
			t.Fatal(err)
		}
	}
	if st := stats(); st.State != "Ready" || st.OngoingTxnSize != 1 {
		t.Fatalf("with a transaction's acknowledgements pending: %+v", st)
	}
	id := tx.GetTxnID()
	if code, body := httpGet(t, fmt.Sprintf("%s/transactionInPendingAckStats/public/default/txn-acks/s/%d/%d", base, id.MostSigBits, id.LeastSigBits)); code != 200 || strings.TrimSpace(body) != "{}" {
		t.Fatalf("transactionInPendingAckStats: %d %s, want 200 {}", code, body)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if st := stats(); st.State != "Ready" || st.OngoingTxnSize != 0 {
		t.Fatalf("after the commit: %+v", st)
	}
	for path, want := range map[string]int{
		"/pendingAckStats/public/default/txn-acks/nosuch":                  404,
		"/pendingAckStats/public/default/nosuch/s":                         404,
		"/pendingAckStats/public/default/txn-acks/s?lowWaterMarks=x":       400,
		"/transactionInPendingAckStats/public/default/txn-acks/nosuch/0/1": 404,
		"/transactionInPendingAckStats/public/default/txn-acks/s/x/1":      400,
	} {
		if code, body := httpGet(t, base+path); code != want {
			t.Errorf("GET %s: %d %s, want %d", path, code, body, want)
		}
	}
}
