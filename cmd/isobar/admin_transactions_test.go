package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/region"
)

// TestAdminTransactions runs `isobar admin transactions` against each
// broker of a two-broker region with two coordinators: whichever broker
// is asked, the coordinators' stats and slow transactions are gathered
// from their owners, and a topic's buffer is answered by its owner (the
// other broker redirects).
func TestAdminTransactions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := region.Config{Name: "txa", DataDir: t.TempDir(), Brokers: 2}
	cfg.Broker.Transactions.Enabled = true
	cfg.Broker.Transactions.Coordinators = 2
	r, err := region.Start(ctx, cfg, region.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); err != nil {
			t.Errorf("region shutdown: %v", err)
		}
	})
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: r.Endpoints().ServiceURL, EnableTransaction: true,
		OperationTimeout: 30 * time.Second, Logger: quietPulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	const tp = "persistent://public/default/txn-cli"
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	tx, err := client.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	first, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("a"), Transaction: tx})
	if err != nil {
		t.Fatal(err)
	}
	id := tx.GetTxnID()
	txnID := fmt.Sprintf("(%d,%d)", id.MostSigBits, id.LeastSigBits)
	m, l := fmt.Sprint(id.MostSigBits), fmt.Sprint(id.LeastSigBits)
	time.Sleep(1100 * time.Millisecond) // older than -t 1s

	for i, b := range r.Brokers() {
		t.Run(fmt.Sprintf("broker %d", i), func(t *testing.T) {
			a := adminRunner{t, b.WebServiceURL}
			var all map[string]adminapi.TransactionCoordinatorStats
			a.json(&all, "transactions", "coordinator-stats")
			if len(all) != 2 || all["0"].State != "Ready" || all["1"].State != "Ready" || all["0"].OngoingTxnSize+all["1"].OngoingTxnSize != 1 {
				t.Fatalf("coordinator-stats: %+v", all)
			}
			var one adminapi.TransactionCoordinatorStats
			a.json(&one, "transactions", "coordinator-stats", "-c", m)
			if one.OngoingTxnSize != 1 || one.LowWaterMark != int64(id.LeastSigBits)-1 || one.RecoverEndTime == 0 {
				t.Fatalf("coordinator-stats -c %s: %+v", m, one)
			}
			if out := a.ok("transactions", "coordinator-stats"); !strings.Contains(out, "COORDINATOR") || strings.Count(out, "Ready") != 2 {
				t.Errorf("coordinator-stats:\n%s", out)
			}

			var slow map[string]adminapi.TransactionMetadata
			a.json(&slow, "transactions", "slow-transactions", "-t", "1s")
			if s, ok := slow[txnID]; len(slow) != 1 || !ok || s.Status != "OPEN" {
				t.Fatalf("slow-transactions -t 1s: %+v, want %s", slow, txnID)
			}
			slow = nil // (decoding into a map adds to it)
			a.json(&slow, "transactions", "slow-transactions", "--time", "1h", "--coordinator-id", m)
			if len(slow) != 0 {
				t.Fatalf("slow-transactions -t 1h: %+v", slow)
			}
			if out := a.ok("transactions", "slow-transactions", "-t", "1s"); !strings.Contains(out, txnID) || !strings.Contains(out, tp) {
				t.Errorf("slow-transactions:\n%s", out)
			}

			var md adminapi.TransactionMetadata
			a.json(&md, "transactions", "transaction-metadata", "-m", m, "-l", l)
			if md.TxnID != txnID || md.Status != "OPEN" {
				t.Fatalf("transaction-metadata: %+v", md)
			}

			var bs adminapi.TransactionBufferStats
			a.json(&bs, "transactions", "transaction-buffer-stats", "-t", tp, "-l")
			if held := fmt.Sprintf("%d:%d", first.LedgerID(), first.EntryID()-1); bs.State != "Ready" || bs.OngoingTxnSize != 1 || bs.MaxReadPosition != held {
				t.Fatalf("transaction-buffer-stats: %+v, want maxReadPosition %s", bs, held)
			}
			var ib adminapi.TransactionInBufferStats
			a.json(&ib, "transactions", "transaction-in-buffer-stats", "--topic", "public/default/txn-cli", "-m", m, "-l", l)
			if start := fmt.Sprintf("%d:%d", first.LedgerID(), first.EntryID()); ib.StartPosition != start || ib.Aborted {
				t.Fatalf("transaction-in-buffer-stats: %+v, want start %s", ib, start)
			}

			var as adminapi.TransactionPendingAckStats
			a.json(&as, "transactions", "pending-ack-stats", "-t", tp, "-s", "s", "-l")
			if as.State != "Ready" || as.OngoingTxnSize != 0 {
				t.Fatalf("pending-ack-stats: %+v", as)
			}
			if out := a.ok("transactions", "transaction-in-pending-ack-stats", "--topic", tp, "--sub-name", "s", "-m", m, "-l", l); !strings.Contains(out, "cumulativeAckPosition") {
				t.Errorf("transaction-in-pending-ack-stats:\n%s", out)
			}
			a.fails(1, []string{"404"}, "transactions", "pending-ack-stats", "-t", tp, "-s", "nosuch")
			a.fails(2, []string{"--sub-name"}, "transactions", "pending-ack-stats", "-t", tp)

			a.fails(1, []string{"404"}, "transactions", "transaction-metadata", "-m", m, "-l", "999999")
			a.fails(1, []string{"404"}, "transactions", "transaction-buffer-stats", "-t", "nosuch")
			a.fails(1, []string{"404"}, "transactions", "coordinator-stats", "-c", "7")
			a.fails(2, []string{"--least-sig-bits"}, "transactions", "transaction-metadata", "-m", m)
			a.fails(2, []string{"--topic"}, "transactions", "transaction-in-buffer-stats", "-m", m, "-l", l)
			a.fails(2, []string{"persistent"}, "transactions", "transaction-buffer-stats", "-t", "non-persistent://public/default/x")
			a.fails(2, []string{"--time"}, "transactions", "slow-transactions")
		})
	}

	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a := adminRunner{t, r.Brokers()[1].WebServiceURL}
	var slow map[string]adminapi.TransactionMetadata
	a.json(&slow, "transactions", "slow-transactions", "-t", "0")
	if len(slow) != 0 {
		t.Fatalf("slow-transactions after the commit: %+v", slow)
	}
	var bs adminapi.TransactionBufferStats
	a.json(&bs, "transactions", "transaction-buffer-stats", "-t", tp)
	if bs.OngoingTxnSize != 0 {
		t.Fatalf("transaction-buffer-stats after the commit: %+v", bs)
	}
}
