package region_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// BenchmarkReplicatorRate measures a topic's replicatorDispatchRate end
// to end: region r0 holds a backlog for r1 and replicates it at the
// limit; the rate at which the messages arrive in r1, after the first
// second, is reported relative to the limit (goal 0.9 to 1.1):
//
//	go test -run '^$' -bench BenchmarkReplicatorRate -benchtime 1x ./region/
func BenchmarkReplicatorRate(b *testing.B) {
	const limit, secs = 2000, 5
	for range b.N {
		f := startFederation(b, 2, nil)
		const tp = "persistent://acme/geo/bench-repl-rate"
		src := pulsarClient(b, f.Regions[0].Endpoints().ServiceURL)
		dst := pulsarClient(b, f.Regions[1].Endpoints().ServiceURL)
		// r0's own rate for its replicator (local scope: in r0 only).
		url := f.Regions[0].Endpoints().WebServiceURL + "/admin/v2/persistent/acme/geo/bench-repl-rate/replicatorDispatchRate"
		body := fmt.Sprintf(`{"dispatchThrottlingRateInMsg":%d,"dispatchThrottlingRateInByte":-1,"ratePeriodInSecond":1}`, limit)
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			b.Fatalf("POST replicatorDispatchRate: %s", resp.Status)
		}
		cons, err := dst.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "bench", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			b.Fatal(err)
		}
		defer cons.Close()
		hold, err := src.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "hold"})
		if err != nil {
			b.Fatal(err)
		}
		defer hold.Close()

		// The backlog: more than the limit lets through while measuring.
		p, err := src.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true, MaxPendingMessages: 2000})
		if err != nil {
			b.Fatal(err)
		}
		var failed atomic.Int64
		for range limit * (secs + 3) {
			p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: make([]byte, 100)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil {
					failed.Add(1)
				}
			})
		}
		if err := p.Flush(); err != nil || failed.Load() > 0 {
			b.Fatalf("backlog: %v, %d failed", err, failed.Load())
		}
		p.Close()

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		m, err := cons.Receive(ctx) // the first replicated message
		if err != nil {
			b.Fatal(err)
		}
		cons.Ack(m)
		from := time.Now().Add(time.Second)
		to := from.Add(secs * time.Second)
		wctx, wcancel := context.WithDeadline(ctx, to)
		var n int64
		for {
			m, err := cons.Receive(wctx)
			if err != nil {
				break
			}
			if time.Now().After(from) {
				n++
			}
			cons.Ack(m)
		}
		wcancel()
		rate := float64(n) / to.Sub(from).Seconds()
		b.ReportMetric(rate/limit, "replicator-e2e-msg/limit")
		b.Logf("replicated r0 -> r1: %.0f msg/s, limit %d (%.3f)", rate, limit, rate/limit)
	}
}
