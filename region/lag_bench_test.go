package region_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/region"
)

// BenchmarkReplicationLag measures what replication adds to end-to-end
// latency, the way an operator would: a federation of two regions as
// `isobar dev` starts them (r0, r1: default region settings), one producer
// in r0 offering a steady rate of 1 KiB messages to a topic of acme/geo
// (replicated to both), one consumer in r0 and one in r1. Each payload
// starts with its send time (Unix ns, taken just before SendAsync) and its
// sequence number; lag = receive time − send time, on the one clock of
// this process. Reported per rate: p50, p99, p99.9 and max in each region,
// and added-p99-ms = r1's p99 − r0's p99 (the target is at most 20 ms).
//
// Each rate runs ISOBAR_LAG_SECONDS seconds (default 20) times b.N;
// ISOBAR_LAG_RATES (e.g. "1000 10000") picks the rates and ISOBAR_LAG_WAN
// (e.g. 40ms) puts the regions behind the emulated WAN. Run:
//
//	go test -run '^$' -bench BenchmarkReplicationLag -benchtime 1x -timeout 20m ./region/
func BenchmarkReplicationLag(b *testing.B) {
	if testing.Short() {
		b.Skip("federation benchmark: skipped with -short")
	}
	secs := 20
	if s := os.Getenv("ISOBAR_LAG_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("ISOBAR_LAG_SECONDS=%q: want a positive number of seconds", s)
		}
		secs = n
	}
	rates := []int{1000, 2000, 10_000}
	if s := os.Getenv("ISOBAR_LAG_RATES"); s != "" {
		rates = nil
		for _, f := range strings.Fields(s) {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				b.Fatalf("ISOBAR_LAG_RATES=%q: want positive numbers of messages per second", s)
			}
			rates = append(rates, n)
		}
	}
	var wan []func(*region.FederationConfig)
	if s := os.Getenv("ISOBAR_LAG_WAN"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			b.Fatalf("ISOBAR_LAG_WAN=%q: want a one-way delay such as 40ms", s)
		}
		wan = append(wan, func(c *region.FederationConfig) { c.WAN = &region.WANConfig{Latency: d} })
	}
	f := startBenchFederationWith(b, nil, wan...) // as `isobar dev` starts regions
	c0 := benchClient(b, f.Regions[0].Endpoints().ServiceURL)
	c1 := benchClient(b, f.Regions[1].Endpoints().ServiceURL)
	pool := benchPayloads(benchPoolSize, benchPayloadSize, 2)
	for i, rate := range rates {
		b.Run(fmt.Sprintf("rate-%d", rate), func(b *testing.B) {
			topicName := fmt.Sprintf("persistent://acme/geo/lag-%d-%d", rate, i)
			lagRun(b, c0, c1, topicName, pool, rate, time.Duration(secs*b.N)*time.Second)
		})
	}
}

// lagPayload is pool's payload i with its first 16 bytes replaced by the
// send time and i.
func lagPayload(pool [][]byte, i int, sent time.Time) []byte {
	p := slices.Clone(pool[i%len(pool)])
	binary.BigEndian.PutUint64(p[0:8], uint64(sent.UnixNano()))
	binary.BigEndian.PutUint64(p[8:16], uint64(i))
	return p
}

func lagRun(b *testing.B, c0, c1 pulsar.Client, topicName string, pool [][]byte, rate int, dur time.Duration) {
	local := benchConsumer(b, c0, topicName, "local")
	defer local.Close()
	remote := benchConsumer(b, c1, topicName, "remote")
	defer remote.Close()
	p := benchProducer(b, c0, topicName)
	defer p.Close()
	// Warm-up, untimed: the topic is loaded in both regions and the
	// replication stream runs. The first message's lag in r1 is how long
	// a new topic waits for its replication stream (first-ms).
	const warm = 1000
	s := benchSender{}
	for i := range warm {
		s.send(p, lagPayload(pool, i, time.Now()))
	}
	if err := s.wait(); err != nil {
		b.Fatal(err)
	}
	n := int(dur.Seconds() * float64(rate))
	ctx, cancel := context.WithTimeout(context.Background(), dur+benchWait)
	defer cancel()
	var warmLags []time.Duration
	warmed := make(chan error, 1)
	go func() { warmed <- lagReceive(ctx, remote, 0, 0, warm, &warmLags) }()
	if err := errors.Join(lagReceive(ctx, local, 0, 0, warm, nil), <-warmed); err != nil {
		b.Fatal(err)
	}
	lags := [2][]time.Duration{make([]time.Duration, 0, n), make([]time.Duration, 0, n)}
	errs := make(chan error, 2)
	for k, c := range []pulsar.Consumer{local, remote} {
		go func() { errs <- lagReceive(ctx, c, warm, warm, warm+n, &lags[k]) }()
	}
	b.ResetTimer()
	s = benchSender{}
	tick := time.NewTicker(time.Millisecond)
	start, i := time.Now(), warm
	for i < warm+n {
		due := warm + min(n, int(time.Since(start).Seconds()*float64(rate)))
		for ; i < due; i++ {
			s.send(p, lagPayload(pool, i, time.Now()))
		}
		<-tick.C
	}
	tick.Stop()
	produced := time.Since(start)
	if err := s.wait(); err != nil {
		b.Fatal(err)
	}
	if err := errors.Join(<-errs, <-errs); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	q := func(k int, x float64) float64 { return ms(benchPercentile(lags[k], x)) }
	b.ReportMetric(float64(n)/produced.Seconds(), "sent-msg/s")
	b.ReportMetric(q(0, 0.50), "r0-p50-ms")
	b.ReportMetric(q(0, 0.99), "r0-p99-ms")
	b.ReportMetric(q(1, 0.50), "r1-p50-ms")
	b.ReportMetric(q(1, 0.99), "r1-p99-ms")
	b.ReportMetric(ms(slices.Max(lags[1])), "r1-max-ms")
	b.ReportMetric(q(1, 0.99)-q(0, 0.99), "added-p99-ms")
	b.ReportMetric(ms(warmLags[0]), "r1-first-ms")
	b.Logf("%s: %d msgs at %.0f msg/s; r0 p50 %.1f p99 %.1f p99.9 %.1f max %.1f ms; r1 p50 %.1f p99 %.1f p99.9 %.1f max %.1f ms; added p99 %.1f ms; first message in r1 after %.1f ms",
		topicName, n, float64(n)/produced.Seconds(),
		q(0, 0.5), q(0, 0.99), q(0, 0.999), ms(slices.Max(lags[0])),
		q(1, 0.5), q(1, 0.99), q(1, 0.999), ms(slices.Max(lags[1])), q(1, 0.99)-q(0, 0.99), ms(warmLags[0]))
}

// lagReceive receives messages next..to-1 in order and appends the lag
// of each one from on to lags (nil: none kept).
func lagReceive(ctx context.Context, c pulsar.Consumer, next, from, to int, lags *[]time.Duration) error {
	want := next
	for want < to {
		m, err := c.Receive(ctx)
		if err != nil {
			return fmt.Errorf("%s: waiting for message %d: %w", c.Subscription(), want, err)
		}
		now := time.Now()
		pl := m.Payload()
		if len(pl) < 16 {
			return fmt.Errorf("%s: message %v: %d bytes", c.Subscription(), m.ID(), len(pl))
		}
		i := int(binary.BigEndian.Uint64(pl[8:16]))
		if i != want {
			return fmt.Errorf("%s: got message %d, want %d", c.Subscription(), i, want)
		}
		want++
		if i >= from && lags != nil {
			l := now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(pl[0:8]))))
			*lags = append(*lags, l)
		}
		if want%1000 == 0 || want == to {
			if err := c.AckCumulative(m); err != nil {
				return fmt.Errorf("%s: ack: %w", c.Subscription(), err)
			}
		}
	}
	return nil
}
