package region_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/topic"
)

// BenchmarkSyncReplication measures what synchronous replication costs a
// publisher: two regions as `isobar dev` starts them behind the emulated
// WAN (40 ms one way; ISOBAR_SYNC_WAN changes it), one producer in r0
// (batching on, the client's defaults) offering a steady rate of 1 KiB
// messages, alternately to a topic of acme/geo without synchronous
// replication and to one with its own syncReplication policy (regions 1),
// in the same run: each round sends ISOBAR_SYNC_SECONDS seconds (default
// 10) to each, async first in odd rounds and sync first in even ones.
// Reported per rate and mode: publish latency (SendAsync to its callback)
// p50, p99 and p99.9. ISOBAR_SYNC_RATES (default "1000 10000") picks the
// rates and ISOBAR_SYNC_ROUNDS (default 2) the rounds. Run:
//
//	go test -run '^$' -bench BenchmarkSyncReplication -benchtime 1x -timeout 20m ./region/
func BenchmarkSyncReplication(b *testing.B) {
	if testing.Short() {
		b.Skip("federation benchmark: skipped with -short")
	}
	env := func(name string, def int) int {
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
	secs, rounds := env("ISOBAR_SYNC_SECONDS", 10), env("ISOBAR_SYNC_ROUNDS", 2)
	rates := []int{1000, 10_000}
	if s := os.Getenv("ISOBAR_SYNC_RATES"); s != "" {
		rates = nil
		for _, f := range strings.Fields(s) {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				b.Fatalf("ISOBAR_SYNC_RATES=%q: want positive numbers of messages per second", s)
			}
			rates = append(rates, n)
		}
	}
	wan := 40 * time.Millisecond
	if s := os.Getenv("ISOBAR_SYNC_WAN"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			b.Fatalf("ISOBAR_SYNC_WAN=%q: want a one-way delay such as 40ms", s)
		}
		wan = d
	}
	f := startBenchFederationWith(b, nil, func(c *region.FederationConfig) { c.WAN = &region.WANConfig{Latency: wan} })
	c0 := benchClient(b, f.Regions[0].Endpoints().ServiceURL)
	pool := benchPayloads(benchPoolSize, benchPayloadSize, 3)
	for ri, rate := range rates {
		b.Run(fmt.Sprintf("rate-%d", rate), func(b *testing.B) {
			names := map[string]string{
				"async": fmt.Sprintf("persistent://acme/geo/async-%d-%d", rate, ri),
				"sync":  fmt.Sprintf("persistent://acme/geo/sync-%d-%d", rate, ri),
			}
			name, err := topic.Parse(names["sync"])
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err = f.Regions[0].Policies().UpdateTopicPolicies(ctx, name, policy.GlobalScope, func(tp *policy.TopicPolicies) error {
				tp.SyncReplication = &policy.SyncReplication{Regions: 1}
				return nil
			})
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			prods := map[string]pulsar.Producer{}
			for mode, tn := range names {
				prods[mode] = benchProducer(b, c0, tn)
				defer prods[mode].Close()
				syncSend(b, prods[mode], pool, 1000, 0) // warm-up: loaded in both regions, streams running
			}
			lat := map[string][]time.Duration{}
			b.ResetTimer()
			for r := range rounds * b.N {
				order := []string{"async", "sync"}
				if r%2 == 1 {
					order = []string{"sync", "async"}
				}
				for _, mode := range order {
					lat[mode] = append(lat[mode], syncSend(b, prods[mode], pool, rate*secs, rate)...)
				}
			}
			b.StopTimer()
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			for _, mode := range []string{"async", "sync"} {
				ds := lat[mode]
				b.ReportMetric(ms(benchPercentile(ds, 0.50)), mode+"-p50-ms")
				b.ReportMetric(ms(benchPercentile(ds, 0.99)), mode+"-p99-ms")
				b.Logf("%s at %d msg/s: %d publishes; p50 %.1f p99 %.1f p99.9 %.1f ms", mode, rate, len(ds),
					ms(benchPercentile(ds, 0.50)), ms(benchPercentile(ds, 0.99)), ms(benchPercentile(ds, 0.999)))
			}
		})
	}
}

// syncSend sends n messages at rate msg/s (0: as fast as the producer
// takes them) and returns each one's publish latency.
func syncSend(b *testing.B, p pulsar.Producer, pool [][]byte, n, rate int) []time.Duration {
	b.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		lats = make([]time.Duration, 0, n)
		ferr error
	)
	send := func(i int) {
		wg.Add(1)
		sent := time.Now()
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: pool[i%len(pool)]}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			d := time.Since(sent)
			mu.Lock()
			if err != nil && ferr == nil {
				ferr = err
			}
			lats = append(lats, d)
			mu.Unlock()
			wg.Done()
		})
	}
	if rate == 0 {
		for i := range n {
			send(i)
		}
	} else {
		tick := time.NewTicker(time.Millisecond)
		start, i := time.Now(), 0
		for i < n {
			due := min(n, int(time.Since(start).Seconds()*float64(rate)))
			for ; i < due; i++ {
				send(i)
			}
			<-tick.C
		}
		tick.Stop()
	}
	wg.Wait()
	if ferr != nil {
		b.Fatal(ferr)
	}
	return lats
}
