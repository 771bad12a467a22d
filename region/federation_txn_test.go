package region_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/region"
)

// TestFederationTransactions: in two regions with transactions on (as
// `isobar dev` runs them), only committed messages replicate. A
// transaction's messages reach the other region after its commit, in
// their place among the plain messages around them; an aborted
// transaction's never do.
func TestFederationTransactions(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	f := startFederation(t, 2, func(_ int, c *region.Config) { c.Broker.Transactions.Enabled = true })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, err := pulsar.NewClient(pulsar.ClientOptions{URL: f.Regions[0].Endpoints().ServiceURL, OperationTimeout: 30 * time.Second,
		Logger: quietLogger(), EnableTransaction: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := pulsarClient(t, f.Regions[1].Endpoints().ServiceURL)
	const topicName = "persistent://acme/geo/txn"
	cons, err := dst.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "remote"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	faultHold(t, src, topicName)
	prod, err := src.CreateProducer(pulsar.ProducerOptions{Topic: topicName, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	send := func(payload string, tx pulsar.Transaction) {
		t.Helper()
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(payload), Transaction: tx}); err != nil {
			t.Fatalf("send %s: %v", payload, err)
		}
	}
	receive := func(want string) {
		t.Helper()
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("waiting for %s in %s: %v", want, f.Regions[1].Name(), err)
		}
		if string(m.Payload()) != want {
			t.Fatalf("%s received %q, want %q", f.Regions[1].Name(), m.Payload(), want)
		}
		cons.Ack(m)
	}
	// Replication runs: a plain message arrives.
	send("plain-0", nil)
	receive("plain-0")

	// An open transaction holds back its messages and everything after
	// them, here and there; its abort leaves only the plain message.
	aborted, err := src.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		send(fmt.Sprintf("aborted-%d", i), aborted)
	}
	send("plain-1", nil)
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	if m, err := cons.Receive(short); err == nil {
		t.Fatalf("%s received %q while a transaction before it was open", f.Regions[1].Name(), m.Payload())
	}
	cancelShort()
	if err := aborted.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	receive("plain-1")

	// A committed transaction's messages arrive, in order, before what
	// followed them.
	committed, err := src.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		send(fmt.Sprintf("committed-%d", i), committed)
	}
	send("plain-2", nil)
	if err := committed.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		receive(fmt.Sprintf("committed-%d", i))
	}
	receive("plain-2")
	// Nothing else arrives: no aborted message, no marker, no duplicate.
	quiet, cancelQuiet := context.WithTimeout(ctx, 2*time.Second)
	defer cancelQuiet()
	if m, err := cons.Receive(quiet); err == nil {
		t.Fatalf("%s received %q after the last message", f.Regions[1].Name(), m.Payload())
	}
}
