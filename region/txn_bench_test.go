package region

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// BenchmarkConsumeTransformProduce measures a consume-transform-produce
// pipeline through a region as `isobar standalone` runs it (3 bookies, one
// broker, transactions on), with the Pulsar Go client: a backlog of 1 KiB
// messages on an input topic is read by one consumer, each message is
// transformed (its bytes reversed) and sent to an output topic by one
// producer (batching on, the client's defaults), and the input is
// acknowledged:
//
//   - plain: no transaction; each input message is acknowledged once its
//     output is stored (at-least-once);
//   - txn-1: one transaction per message (send and acknowledgement in it,
//     then commit): exactly-once;
//   - txn-100: one transaction per 100 messages, committed when their
//     sends are stored.
//
// Each mode runs on topics of its own for ISOBAR_CTP_SECONDS (default 10)
// seconds or until its backlog (ISOBAR_CTP_BACKLOG messages, default
// 50,000) is consumed, and reports messages per second and, for the
// transactional modes, the commit latency's p50 and p99. Run:
//
//	go test -run '^$' -bench BenchmarkConsumeTransformProduce -benchtime 1x -timeout 15m ./region/
func BenchmarkConsumeTransformProduce(b *testing.B) {
	if testing.Short() {
		b.Skip("region benchmark: skipped with -short")
	}
	secs := ctpEnv(b, "ISOBAR_CTP_SECONDS", 10)
	backlog := ctpEnv(b, "ISOBAR_CTP_BACKLOG", 50_000)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	_, c := startTxnRegion(ctx, b, "ctp", 1, 1)
	for _, mode := range []struct {
		name   string
		perTxn int // 0: no transactions
	}{{"plain", 0}, {"txn-1", 1}, {"txn-100", 100}} {
		b.Run(mode.name, func(b *testing.B) {
			for i := range b.N {
				in := fmt.Sprintf("persistent://public/default/ctp-in-%s-%d", mode.name, i)
				out := fmt.Sprintf("persistent://public/default/ctp-out-%s-%d", mode.name, i)
				done, commits, elapsed := ctpRun(ctx, b, c, in, out, backlog, mode.perTxn, time.Duration(secs)*time.Second)
				b.ReportMetric(float64(done)/elapsed.Seconds(), "msg/s")
				if len(commits) > 0 {
					slices.Sort(commits)
					pct := func(p float64) float64 {
						return float64(commits[min(len(commits)-1, int(p*float64(len(commits))))].Microseconds()) / 1e3
					}
					b.ReportMetric(pct(0.50), "commit-p50-ms")
					b.ReportMetric(pct(0.99), "commit-p99-ms")
				}
				b.Logf("%s: %d messages in %v (%d transactions)", mode.name, done, elapsed.Round(time.Millisecond), len(commits))
			}
		})
	}
}

func ctpEnv(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

// ctpRun fills in with backlog messages, then runs the pipeline from in to
// out for at most d: it returns the messages done (sent, stored, their
// input acknowledged or committed), the commit latencies and the time
// taken.
func ctpRun(ctx context.Context, b *testing.B, c pulsar.Client, in, out string, backlog, perTxn int, d time.Duration) (int, []time.Duration, time.Duration) {
	b.Helper()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: in, SubscriptionName: "ctp", ReceiverQueueSize: 1000})
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	fill, err := c.CreateProducer(pulsar.ProducerOptions{Topic: in})
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 1024)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	var fillErr error
	var fillMu sync.Mutex
	for range backlog {
		fill.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				fillMu.Lock()
				fillErr = err
				fillMu.Unlock()
			}
		})
	}
	if err := fill.Flush(); err != nil {
		b.Fatal(err)
	}
	fill.Close()
	if fillErr != nil {
		b.Fatal(fillErr)
	}
	prod, err := c.CreateProducer(pulsar.ProducerOptions{Topic: out, SendTimeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()

	transform := func(p []byte) []byte {
		o := make([]byte, len(p))
		for i, x := range p {
			o[len(p)-1-i] = x
		}
		return o
	}
	var (
		mu      sync.Mutex
		sendErr error
		commits []time.Duration
	)
	fail := func(err error) {
		mu.Lock()
		if sendErr == nil {
			sendErr = err
		}
		mu.Unlock()
	}
	done := 0
	start := time.Now()
	deadline := start.Add(d)
	for done < backlog && time.Now().Before(deadline) {
		n := 1
		if perTxn > 0 {
			n = min(perTxn, backlog-done)
		}
		var tx pulsar.Transaction
		if perTxn > 0 {
			if tx, err = c.NewTransaction(time.Minute); err != nil {
				b.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for range n {
			m, err := cons.Receive(ctx)
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			msg := &pulsar.ProducerMessage{Payload: transform(m.Payload()), Transaction: tx}
			if tx == nil {
				prod.SendAsync(ctx, msg, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					defer wg.Done()
					if err != nil {
						fail(err)
						return
					}
					if err := cons.Ack(m); err != nil {
						fail(err)
					}
				})
				continue
			}
			prod.SendAsync(ctx, msg, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				defer wg.Done()
				if err != nil {
					fail(err)
				}
			})
			if err := cons.AckWithTxn(m, tx); err != nil {
				b.Fatal(err)
			}
		}
		if tx != nil {
			// A transaction commits once its sends are stored.
			if err := prod.Flush(); err != nil {
				b.Fatal(err)
			}
			wg.Wait()
			t0 := time.Now()
			if err := tx.Commit(ctx); err != nil {
				b.Fatal(err)
			}
			commits = append(commits, time.Since(t0))
		}
		done += n
		mu.Lock()
		err := sendErr
		mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := prod.Flush(); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	return done, commits, elapsed
}
