package broker_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/broker/adminapi"
)

// GET .../bundle names the topic's bundle as Pulsar does; GET
// .../internal-info answers the managed ledger's ledgers and cursors.
func TestTopicBundleAndInternalInfo(t *testing.T) {
	e := startEnv(t, nil)
	srv := e.adminServer()
	const tp = "persistent://public/default/info"
	c := e.client()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	produce(t, p, "i", 5, nil)
	ms := receiveN(t, cons, 5, false)
	cons.Ack(ms[2]) // one entry acknowledged out of order

	status, body := getBody(t, srv.URL+"/lookup/v2/topic/persistent/public/default/info/bundle")
	if status != http.StatusOK || !regexp.MustCompile(`^0x[0-9a-f]{8}_0x[0-9a-f]{8}$`).MatchString(body) {
		t.Fatalf("GET bundle: %d %q", status, body)
	}
	if status, _ := getBody(t, srv.URL+"/lookup/v2/topic/persistent/public/nowhere/info/bundle"); status != http.StatusNotFound {
		t.Fatalf("GET bundle of a topic of no namespace: %d, want 404", status)
	}

	status, body = getBody(t, srv.URL+"/admin/v2/persistent/public/default/info/internal-info")
	if status != http.StatusOK {
		t.Fatalf("GET internal-info: %d %s", status, body)
	}
	var info adminapi.ManagedLedgerInfo
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		t.Fatal(err)
	}
	var entries int64
	for _, l := range info.Ledgers {
		entries += l.Entries
	}
	cur, ok := info.Cursors["s"]
	if entries != 5 || !ok {
		t.Fatalf("internal-info: %d entries, cursors %v", entries, info.Cursors)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !func() bool {
		_, body := getBody(t, srv.URL+"/admin/v2/persistent/public/default/info/internal-info")
		var info adminapi.ManagedLedgerInfo
		if json.Unmarshal([]byte(body), &info) != nil {
			return false
		}
		cur = info.Cursors["s"]
		return len(cur.IndividualDeletedMessages) == 1
	}() {
		if time.Now().After(deadline) {
			t.Fatalf("the out-of-order ack never showed in internal-info: %+v", cur)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := cur.IndividualDeletedMessages[0]
	if r.To.EntryID != r.From.EntryID+1 || r.From.LedgerID != r.To.LedgerID {
		t.Fatalf("acknowledged range %+v with mark-delete %+v", r, cur.MarkDelete)
	}
}
