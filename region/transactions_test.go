package region

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"
)

// TestRegionTransactions runs a transaction through a whole region, whose
// coordinators are placed by the ownership of pulsar/system's bundles
// (the region creates the namespace when transactions are on): nothing
// of a transaction is delivered before its commit, all of it after.
func TestRegionTransactions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, c := startTxnRegion(ctx, t, "txn", 1, 2)
	const topicName = "persistent://public/default/region-txn"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prod, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topicName})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for _, action := range []string{"abort", "commit"} {
		txn, err := c.NewTransaction(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%s-%d", action, i), Transaction: txn}); err != nil {
				t.Fatal(err)
			}
		}
		short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
		if m, err := cons.Receive(short); err == nil {
			t.Fatalf("received %q before the end of its transaction", m.Payload())
		}
		cancelShort()
		if action == "abort" {
			err = txn.Abort(ctx)
		} else {
			err = txn.Commit(ctx)
		}
		if err != nil {
			t.Fatalf("%s: %v", action, err)
		}
	}
	for i := range 10 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("commit-%d", i); string(m.Payload()) != want {
			t.Fatalf("received %q, want %q", m.Payload(), want)
		}
		cons.Ack(m)
	}
}

// TestRegionTransactionsTwoBrokers: with two brokers, a transaction's
// coordinator and its topics are spread over both; the coordinator tells
// the other broker's topics of the commit over the Pulsar protocol.
func TestRegionTransactionsTwoBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("two-broker region: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, c := startTxnRegion(ctx, t, "txn2", 2, 2)
	// Eight topics (over the namespace's four bundles) in each of two
	// transactions (one per coordinator, as the client alternates).
	const n = 8
	var prods []pulsar.Producer
	var conss []pulsar.Consumer
	for i := range n {
		name := fmt.Sprintf("persistent://public/default/txn2-%d", i)
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		prod, err := c.CreateProducer(pulsar.ProducerOptions{Topic: name, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		prods, conss = append(prods, prod), append(conss, cons)
	}
	for round := range 2 {
		txn, err := c.NewTransaction(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range prods {
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%d-%d", round, i), Transaction: txn}); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.Commit(ctx); err != nil {
			t.Fatalf("commit %d: %v", round, err)
		}
		for i, cons := range conss {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%d-%d", round, i); string(m.Payload()) != want {
				t.Fatalf("topic %d: %q, want %q", i, m.Payload(), want)
			}
			cons.Ack(m)
		}
	}
}

// startTxnRegion starts a region (3 bookies, brokers brokers) with
// transactions on and coordinators coordinators, and a Pulsar client of
// it with transactions enabled; both are closed when tb ends.
func startTxnRegion(ctx context.Context, tb testing.TB, name string, brokers, coordinators int) (*Region, pulsar.Client) {
	tb.Helper()
	cfg := Config{Name: name, DataDir: tb.TempDir(), Bookies: 3, Brokers: brokers}
	cfg.Broker.Transactions.Enabled = true
	cfg.Broker.Transactions.Coordinators = coordinators
	r, err := Start(ctx, cfg, Deps{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Shutdown(context.Background()) })
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: r.Endpoints().ServiceURL, OperationTimeout: 30 * time.Second,
		Logger: plog.NewLoggerWithLogrus(l), EnableTransaction: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return r, c
}
