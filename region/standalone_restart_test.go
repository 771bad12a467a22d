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

// TestStandaloneRestartKeepsMessages is the regression test of a region
// restarted on its data directory with bookies on free ports (as `isobar
// standalone` runs them): the bookies come back on other ports, and
// messages produced before the restart are still delivered after it. The
// bookies' ids live in their directories (cookies), so the ledger metadata,
// which names ids, finds them at their new addresses.
func TestStandaloneRestartKeepsMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("region restart test: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := Config{Name: "standalone", DataDir: t.TempDir(), Bookies: 3, Brokers: 1}
	const (
		topicName = "persistent://public/default/restart"
		sub       = "restart-sub"
		n         = 5
	)

	r, err := Start(ctx, cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	before := r.Endpoints().Bookies
	c := restartTestClient(t, r.Endpoints().ServiceURL)
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: sub})
	if err != nil {
		r.Shutdown(context.Background())
		t.Fatal(err)
	}
	cons.Close()
	prod, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topicName, SendTimeout: 30 * time.Second})
	if err != nil {
		r.Shutdown(context.Background())
		t.Fatal(err)
	}
	for i := range n {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "msg-%d", i)}); err != nil {
			r.Shutdown(context.Background())
			t.Fatalf("send %d: %v", i, err)
		}
	}
	prod.Close()
	c.Close()
	if err := r.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	r, err = Start(ctx, cfg, Deps{})
	if err != nil {
		t.Fatalf("restart on the same data directory: %v", err)
	}
	defer r.Shutdown(context.Background())
	after := r.Endpoints().Bookies
	t.Logf("bookies before the restart %v, after %v", before, after)
	for _, a := range after {
		for _, b := range before {
			if a == b {
				t.Logf("bookie address %s was reused (the test still holds, but proves less)", a)
			}
		}
	}
	c = restartTestClient(t, r.Endpoints().ServiceURL)
	defer c.Close()
	cons, err = c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: sub})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for i := range n {
		rctx, rcancel := context.WithTimeout(ctx, time.Minute)
		m, err := cons.Receive(rctx)
		rcancel()
		if err != nil {
			t.Fatalf("message %d of %d after the restart: %v", i, n, err)
		}
		if got, want := string(m.Payload()), fmt.Sprintf("msg-%d", i); got != want {
			t.Fatalf("message %d after the restart is %q, want %q", i, got, want)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
}

func restartTestClient(t *testing.T, url string) pulsar.Client {
	t.Helper()
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, OperationTimeout: 30 * time.Second,
		Logger: plog.NewLoggerWithLogrus(l)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
