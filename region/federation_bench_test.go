package region_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/replicator"
)

// Sizes of the replication benchmark. Each sub-benchmark moves
// benchMessages × b.N messages (100k with -benchtime 1x).
const (
	benchMessages    = 100_000
	benchPayloadSize = 1024
	benchPoolSize    = 10_000
	benchWarmup      = 1_000            // untimed messages first: topic load, first ledger, replication stream
	benchLagRate     = 10_000           // msg/s in lag-10k
	benchLagDuration = 10 * time.Second // how long lag-10k produces
	benchWait        = 2 * time.Minute  // bound on any one wait for messages
)

// BenchmarkReplication measures geo-replication between two regions (r0,
// r1; 3 bookies and 1 broker each) running in this process, all in one
// federation started once:
//
//   - local-produce: produce throughput in r0 on a namespace replicated
//     nowhere (the baseline);
//   - replication-throughput: produce flat out in r0 on a replicated
//     topic until a consumer in r1 has every message: end-to-end msg/s at
//     the destination and its ratio to local-produce;
//   - lag-10k: produce at 10k msg/s for 10 s; publish-to-receive lag in r0
//     and in r1, and r1's p99 minus r0's (the lag replication adds);
//   - wan-bytes: the r0 replicator's StreamStats for the topics above:
//     bytes on the wire and in entries against payload bytes.
//
// Payloads are 1 KiB JSON documents with varied field values (a seeded
// pool of distinct documents), so the frames' compression is not flattered
// by repeated bytes. Run with:
//
//	go test -run '^$' -bench BenchmarkReplication -benchtime 1x -timeout 10m ./region/
func BenchmarkReplication(b *testing.B) {
	if testing.Short() {
		b.Skip("federation benchmark: skipped with -short")
	}
	f := startBenchFederation(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r0, r1 := f.Regions[0], f.Regions[1]
	c0 := benchClient(b, r0.Endpoints().ServiceURL)
	c1 := benchClient(b, r1.Endpoints().ServiceURL)
	pool := benchPayloads(benchPoolSize, benchPayloadSize, 1)

	// A namespace only r0 has: nothing in it is replicated.
	pol := r0.Policies()
	if err := pol.CreateTenant(ctx, "bench", policy.TenantInfo{AdminRoles: []string{}, AllowedClusters: []string{"r0"}}); err != nil && !errors.Is(err, policy.ErrExists) {
		b.Fatal(err)
	}
	if err := pol.CreateNamespace(ctx, "bench/local", &policy.Policies{ReplicationClusters: []string{"r0"}}); err != nil && !errors.Is(err, policy.ErrExists) {
		b.Fatal(err)
	}
	benchWaitFor(b, 30*time.Second, func() bool {
		_, err := pol.Namespace(ctx, "bench/local")
		return err == nil
	})

	var (
		seq        int     // topic name suffix: every run gets fresh topics
		localRate  float64 // msg/s of the latest local-produce run
		replicated = map[string]int64{}
	)
	nextTopic := func(ns, name string) string {
		seq++
		return fmt.Sprintf("persistent://%s/%s-%d", ns, name, seq)
	}

	b.Run("local-produce", func(b *testing.B) {
		n := benchMessages * b.N
		topicName := nextTopic("bench/local", "produce")
		p := benchProducer(b, c0, topicName)
		defer p.Close()
		benchSend(b, p, pool, 0, benchWarmup)
		b.ResetTimer()
		start := time.Now()
		benchSend(b, p, pool, benchWarmup, n)
		d := time.Since(start)
		b.StopTimer()
		localRate = float64(n) / d.Seconds()
		b.ReportMetric(localRate, "msg/s")
		b.ReportMetric(localRate*benchPayloadSize/1e6, "MB/s")
		b.Logf("local-produce: %d msgs in %v: %.0f msg/s, %.1f MB/s", n, d.Round(time.Millisecond), localRate, localRate*benchPayloadSize/1e6)
	})

	b.Run("replication-throughput", func(b *testing.B) {
		n := benchMessages * b.N
		topicName := nextTopic("acme/geo", "tput")
		cons := benchConsumer(b, c1, topicName, "dest")
		defer cons.Close()
		p := benchProducer(b, c0, topicName)
		defer p.Close()

		// Warm-up: produce, and wait until r1 has it (the replication
		// stream and r1's replicator producer now exist).
		benchSend(b, p, pool, 0, benchWarmup)
		if _, _, err := benchReceive(ctx, cons, pool, 0, benchWarmup, nil, nil); err != nil {
			b.Fatalf("warm-up in r1: %v", err)
		}
		replicated[topicName] += benchWarmup * benchPayloadSize

		b.ResetTimer()
		type result struct {
			last time.Time
			got  int
			err  error
		}
		done := make(chan result, 1)
		rctx, rcancel := context.WithTimeout(ctx, benchWait)
		defer rcancel()
		var progress atomic.Int64
		go func() {
			last, got, err := benchReceive(rctx, cons, pool, benchWarmup, n, nil, &progress)
			done <- result{last, got, err}
		}()
		start := time.Now()
		benchSend(b, p, pool, benchWarmup, n)
		produced := time.Since(start)
		atEnd := progress.Load()
		res := <-done
		b.StopTimer()
		replicated[topicName] += int64(n) * benchPayloadSize
		if res.err != nil {
			b.Fatalf("r1 received %d of %d messages: %v", res.got, n, res.err)
		}
		d := res.last.Sub(start)
		rate := float64(n) / d.Seconds()
		b.ReportMetric(rate, "msg/s")
		b.ReportMetric(rate*benchPayloadSize/1e6, "MB/s")
		ratio := "no local-produce run"
		if localRate > 0 {
			b.ReportMetric(rate/localRate, "ratio-to-local")
			ratio = fmt.Sprintf("%.2f of local-produce alone (both regions share 2 vCPUs and one disk here; replication-only measures the replicator)", rate/localRate)
		}
		b.Logf("replication-throughput: %d msgs produced in r0 in %v (%.0f msg/s; r1 had %d of them by then), all in r1 after %v: %.0f msg/s, %.1f MB/s, %s; backlog drained at %.0f msg/s after the producer finished",
			n, produced.Round(time.Millisecond), float64(n)/produced.Seconds(), atEnd, d.Round(time.Millisecond), rate, rate*benchPayloadSize/1e6, ratio,
			float64(int64(n)-atEnd)/(d-produced).Seconds())
		benchReportWAN(b, r0, []string{topicName}, replicated)
	})

	b.Run("lag-10k", func(b *testing.B) {
		topicName := nextTopic("acme/geo", "lag")
		dur := benchLagDuration * time.Duration(b.N)
		n := int(dur.Seconds() * benchLagRate)
		local := benchConsumer(b, c0, topicName, "local")
		defer local.Close()
		remote := benchConsumer(b, c1, topicName, "remote")
		defer remote.Close()
		p := benchProducer(b, c0, topicName)
		defer p.Close()
		benchSend(b, p, pool, 0, benchWarmup)
		for _, c := range []pulsar.Consumer{local, remote} {
			if _, _, err := benchReceive(ctx, c, pool, 0, benchWarmup, nil, nil); err != nil {
				b.Fatalf("warm-up: %v", err)
			}
		}
		replicated[topicName] += benchWarmup * benchPayloadSize

		b.ResetTimer()
		rctx, rcancel := context.WithTimeout(ctx, dur+benchWait)
		defer rcancel()
		lags := [2][]time.Duration{make([]time.Duration, 0, n), make([]time.Duration, 0, n)}
		errs := make(chan error, 2)
		for i, c := range []pulsar.Consumer{local, remote} {
			go func() {
				_, got, err := benchReceive(rctx, c, pool, benchWarmup, n, &lags[i], nil)
				if err != nil {
					err = fmt.Errorf("%s: received %d of %d: %w", c.Subscription(), got, n, err)
				}
				errs <- err
			}()
		}
		start := time.Now()
		benchSendPaced(b, p, pool, benchWarmup, n, benchLagRate)
		produced := time.Since(start)
		err := errors.Join(<-errs, <-errs)
		b.StopTimer()
		replicated[topicName] += int64(n) * benchPayloadSize
		if err != nil {
			b.Fatal(err)
		}
		l50, l99 := benchPercentile(lags[0], 0.50), benchPercentile(lags[0], 0.99)
		r50, r99 := benchPercentile(lags[1], 0.50), benchPercentile(lags[1], 0.99)
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
		b.ReportMetric(float64(n)/produced.Seconds(), "sent-msg/s")
		b.ReportMetric(ms(l50), "r0-p50-ms")
		b.ReportMetric(ms(l99), "r0-p99-ms")
		b.ReportMetric(ms(r50), "r1-p50-ms")
		b.ReportMetric(ms(r99), "r1-p99-ms")
		b.ReportMetric(ms(r99-l99), "added-p99-ms")
		b.Logf("lag-10k: %d msgs in %v (%.0f msg/s); lag in r0 p50 %.1f p99 %.1f max %.1f ms; in r1 p50 %.1f p99 %.1f max %.1f ms; added p99 %.1f ms (target <= 50)",
			n, produced.Round(time.Millisecond), float64(n)/produced.Seconds(),
			ms(l50), ms(l99), ms(slices.Max(lags[0])), ms(r50), ms(r99), ms(slices.Max(lags[1])), ms(r99-l99))
		benchReportWAN(b, r0, []string{topicName}, replicated)
	})

	// replication-only: the replicator alone, without production competing
	// for the same two vCPUs: a backlog of n messages is built in r0 with
	// r0's replicator worker stopped, then the worker starts and the time
	// until r1 has every message is the replication throughput.
	b.Run("replication-only", func(b *testing.B) {
		n := benchMessages * b.N
		topicName := nextTopic("acme/geo", "drain")
		cons := benchConsumer(b, c1, topicName, "dest")
		defer cons.Close()
		p := benchProducer(b, c0, topicName)
		defer p.Close()
		benchSend(b, p, pool, 0, benchWarmup)
		if _, _, err := benchReceive(ctx, cons, pool, 0, benchWarmup, nil, nil); err != nil {
			b.Fatalf("warm-up in r1: %v", err)
		}
		r0.KillReplicator(0) // its stream counters go with it: not in wan-bytes
		benchSend(b, p, pool, benchWarmup, n)
		rctx, rcancel := context.WithTimeout(ctx, benchWait)
		defer rcancel()
		b.ResetTimer()
		start := time.Now()
		if err := r0.RestartReplicator(ctx, 0); err != nil {
			b.Fatal(err)
		}
		last, got, err := benchReceive(rctx, cons, pool, benchWarmup, n, nil, nil)
		b.StopTimer()
		if err != nil {
			b.Fatalf("r1 received %d of %d messages: %v", got, n, err)
		}
		d := last.Sub(start)
		rate := float64(n) / d.Seconds()
		b.ReportMetric(rate, "msg/s")
		b.ReportMetric(rate*benchPayloadSize/1e6, "MB/s")
		ratio := "no local-produce run"
		if localRate > 0 {
			b.ReportMetric(rate/localRate, "ratio-to-local")
			ratio = fmt.Sprintf("%.2f of local-produce (target >= 0.8)", rate/localRate)
		}
		b.Logf("replication-only: a backlog of %d msgs replicated to r1 in %v (worker start included): %.0f msg/s, %.1f MB/s, %s",
			n, d.Round(time.Millisecond), rate, rate*benchPayloadSize/1e6, ratio)
	})

	b.Run("wan-bytes", func(b *testing.B) {
		if len(replicated) == 0 {
			b.Skip("no replicated sub-benchmark ran")
		}
		topics := make([]string, 0, len(replicated))
		for t := range replicated {
			topics = append(topics, t)
		}
		slices.Sort(topics)
		benchReportWAN(b, r0, topics, replicated)
	})
}

// benchReportWAN waits until the r0 replicator's counters for topics
// settle, then reports wire and raw entry bytes against payload bytes
// (payload: bytes produced per topic).
func benchReportWAN(b *testing.B, r *region.Region, topics []string, payload map[string]int64) {
	b.Helper()
	var st, prev replicator.StreamStats
	var payloadBytes int64
	for _, t := range topics {
		payloadBytes += payload[t]
	}
	benchWaitFor(b, 30*time.Second, func() bool {
		prev, st = st, benchStreamStats(r, topics, "r1")
		return st.Entries > 0 && st == prev
	})
	msgs := float64(payloadBytes) / benchPayloadSize
	wire := float64(st.WireBytes) / float64(payloadBytes)
	raw := float64(st.RawBytes) / float64(payloadBytes)
	b.ReportMetric(float64(st.WireBytes)/msgs, "wire-B/msg")
	b.ReportMetric(wire, "wire/payload")
	b.ReportMetric(raw, "raw/payload")
	b.Logf("wan: %.0f msgs, %d payload bytes; %d entries (%.1f msgs/entry), %d frames (%.0f msgs/frame); raw entries %d B (%.3f of payload); wire %d B = %.1f B/msg (%.3f of payload, target <= 0.40); %d stream errors %s",
		msgs, payloadBytes, st.Entries, msgs/float64(st.Entries), st.Frames, msgs/float64(st.Frames), st.RawBytes, raw, st.WireBytes, float64(st.WireBytes)/msgs, wire, st.Errors, st.LastError)
}

// benchStreamStats sums the counters of r's source streams to remote for
// topics over all its workers (a stream may have moved between them).
func benchStreamStats(r *region.Region, topics []string, remote string) replicator.StreamStats {
	var sum replicator.StreamStats
	for _, w := range r.Replicators() {
		if w == nil {
			continue
		}
		for _, s := range w.Stats() {
			if s.Remote != remote || !slices.Contains(topics, s.Topic) {
				continue
			}
			sum.Entries += s.Entries
			sum.RawBytes += s.RawBytes
			sum.WireBytes += s.WireBytes
			sum.Frames += s.Frames
			sum.Errors += s.Errors
			if s.LastError != "" {
				sum.LastError = s.LastError
			}
		}
	}
	return sum
}

// startBenchFederation starts regions r0 and r1 (3 bookies, 1 broker
// each) with acme/geo replicated across both; Shutdown runs in cleanup.
func startBenchFederation(b *testing.B) *region.Federation {
	return startBenchFederationWith(b, func(c *region.Config) {
		c.Brokers = 1
		c.Replicator.ScanInterval = 200 * time.Millisecond
		c.Replicator.DictDisabled = *benchDictDisabled
		c.Replicator.DictLevel = *benchDictLevel
	})
}

// benchDictDisabled runs BenchmarkReplication with plain zstd frames
// only, to compare wan-bytes with and without dictionaries.
var (
	benchDictDisabled = flag.Bool("replication-dict-disabled", false, "BenchmarkReplication: replicator.dictDisabled")
	benchDictLevel    = flag.String("replication-dict-level", "", "BenchmarkReplication: replicator.dictLevel")
)

// startBenchFederationWith starts two regions (r0, r1; 3 bookies each,
// the rest as modify leaves it) with acme/geo replicated to both.
func startBenchFederationWith(b *testing.B, modify func(*region.Config), fedOpts ...func(*region.FederationConfig)) *region.Federation {
	b.Helper()
	dir := b.TempDir()
	cfg := region.FederationConfig{GlobalDir: dir + "/global", Namespaces: []string{"acme/geo"}}
	for _, o := range fedOpts {
		o(&cfg)
	}
	for i := range 2 {
		c := region.Config{Name: fmt.Sprintf("r%d", i), DataDir: fmt.Sprintf("%s/r%d", dir, i), Bookies: 3}
		if modify != nil {
			modify(&c)
		}
		cfg.Regions = append(cfg.Regions, c)
	}
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("ISOBAR_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	f, err := region.StartFederation(ctx, cfg, region.Deps{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("federation of 2 regions started in %v", time.Since(start).Round(time.Millisecond))
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := f.Shutdown(ctx); err != nil {
			b.Errorf("federation shutdown: %v", err)
		}
	})
	return f
}

func benchClient(b *testing.B, url string) pulsar.Client {
	b.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, OperationTimeout: 30 * time.Second, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

// benchProducer is a producer with the client's defaults: batching on.
func benchProducer(b *testing.B, c pulsar.Client, topicName string) pulsar.Producer {
	b.Helper()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topicName})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// benchConsumer subscribes from the earliest message.
func benchConsumer(b *testing.B, c pulsar.Client, topicName, sub string) pulsar.Consumer {
	b.Helper()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: sub, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		b.Fatal(err)
	}
	return cons
}

// benchSend sends messages from..from+n-1 (payload i is pool[i%len(pool)])
// asynchronously as fast as the producer takes them and waits for every
// acknowledgement.
func benchSend(b *testing.B, p pulsar.Producer, pool [][]byte, from, n int) {
	b.Helper()
	s := benchSender{}
	for i := from; i < from+n; i++ {
		s.send(p, pool[i%len(pool)])
	}
	if err := s.wait(); err != nil {
		b.Fatal(err)
	}
}

// benchSendPaced sends like benchSend at rate msg/s: every millisecond it
// sends the messages due by then.
func benchSendPaced(b *testing.B, p pulsar.Producer, pool [][]byte, from, n, rate int) {
	b.Helper()
	s := benchSender{}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start, i := time.Now(), from
	for i < from+n {
		due := from + min(n, int(time.Since(start).Seconds()*float64(rate)))
		for ; i < due; i++ {
			s.send(p, pool[i%len(pool)])
		}
		<-tick.C
	}
	if err := s.wait(); err != nil {
		b.Fatal(err)
	}
}

// benchSender counts a producer's outstanding sends and keeps the first
// error.
type benchSender struct {
	wg     sync.WaitGroup
	failed atomic.Int64
	mu     sync.Mutex
	err    error
}

func (s *benchSender) send(p pulsar.Producer, payload []byte) {
	s.wg.Add(1)
	p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
		defer s.wg.Done()
		if err != nil && s.failed.Add(1) == 1 {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
		}
	})
}

func (s *benchSender) wait() error {
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return fmt.Errorf("%d sends failed, first: %w", s.failed.Load(), s.err)
	}
	return nil
}

// benchReceive receives messages from..from+n-1, checking each against
// the pool (order and content), and returns when the last one arrived.
// With lags set it appends each message's receive time minus its publish
// time (the producer is in this process: same clock); with progress set
// it stores the count received so far.
func benchReceive(ctx context.Context, c pulsar.Consumer, pool [][]byte, from, n int, lags *[]time.Duration, progress *atomic.Int64) (last time.Time, got int, err error) {
	for got < n {
		m, err := c.Receive(ctx)
		if err != nil {
			return last, got, err
		}
		last = time.Now()
		if lags != nil {
			*lags = append(*lags, last.Sub(m.PublishTime()))
		}
		i := from + got
		if !bytes.Equal(m.Payload(), pool[i%len(pool)]) {
			return last, got, fmt.Errorf("message %d (id %v): payload differs from the one sent (%d bytes)", i, m.ID(), len(m.Payload()))
		}
		got++
		if progress != nil {
			progress.Store(int64(got))
		}
		if got%1000 == 0 || got == n {
			if err := c.AckCumulative(m); err != nil {
				return last, got, fmt.Errorf("ack: %w", err)
			}
		}
	}
	return last, got, nil
}

func benchPercentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func benchWaitFor(b *testing.B, timeout time.Duration, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("condition not met within %v", timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Dictionaries of the payload generator.
var (
	benchFirstNames = []string{"ada", "boris", "chen", "dana", "emeka", "fatima", "goran", "hana", "ivan", "julia", "kenji", "lena", "mateo", "nadia", "omar", "priya", "quinn", "rosa", "sven", "tariq", "uma", "viktor", "wen", "yusuf", "zoe"}
	benchLastNames  = []string{"abe", "berg", "costa", "dubois", "eriksen", "fischer", "garcia", "haddad", "ito", "jansen", "kowalski", "lopez", "muller", "novak", "okafor", "petrov", "rossi", "silva", "tanaka", "weber"}
	benchCities     = []string{"amsterdam", "berlin", "cairo", "dublin", "frankfurt", "helsinki", "istanbul", "jakarta", "lagos", "lisbon", "madrid", "mumbai", "nairobi", "osaka", "paris", "quito", "seoul", "sydney", "toronto", "vienna", "warsaw", "zurich"}
	benchCountries  = []string{"nl", "de", "eg", "ie", "fi", "tr", "id", "ng", "pt", "es", "in", "ke", "jp", "fr", "ec", "kr", "au", "ca", "at", "pl", "ch"}
	benchEvents     = []string{"order_created", "order_paid", "order_shipped", "cart_updated", "page_view", "search", "login", "refund_requested"}
	benchDevices    = []string{"ios", "android", "web", "desktop", "tv"}
	benchCurrencies = []string{"eur", "usd", "gbp", "jpy", "inr", "brl"}
	benchWords      = []string{"please", "deliver", "before", "noon", "leave", "parcel", "with", "neighbour", "gift", "wrap", "fragile", "handle", "care", "call", "on", "arrival", "back", "door", "thanks", "again", "the", "blue", "box", "second", "floor", "ring", "twice", "no", "plastic", "birthday", "surprise", "office", "hours", "only"}
)

// benchPayloads makes n distinct JSON documents of exactly size bytes
// from seed: an order event with ids, timestamps, a user (name, city),
// 2–5 line items with prices, a shipping address, flags, and a short
// free-text note of dictionary words that fills the document to size.
func benchPayloads(n, size int, seed int64) [][]byte {
	rng := rand.New(rand.NewSource(seed))
	pick := func(d []string) string { return d[rng.Intn(len(d))] }
	ts := int64(1_764_000_000_000)
	out := make([][]byte, n)
	for i := range out {
		ts += int64(rng.Intn(50))
		d := make([]byte, 0, size)
		d = append(d, `{"id":"`...)
		d = fmt.Appendf(d, "%016x", rng.Uint64())
		d = append(d, `","seq":`...)
		d = strconv.AppendInt(d, int64(i), 10)
		d = append(d, `,"ts":`...)
		d = strconv.AppendInt(d, ts, 10)
		d = append(d, `,"event":"`...)
		d = append(d, pick(benchEvents)...)
		d = append(d, `","user":{"id":`...)
		d = strconv.AppendInt(d, int64(rng.Intn(5_000_000)), 10)
		d = append(d, `,"name":"`...)
		d = append(d, pick(benchFirstNames)+" "+pick(benchLastNames)...)
		city := rng.Intn(len(benchCities))
		d = append(d, `","city":"`...)
		d = append(d, benchCities[city]...)
		d = append(d, `","country":"`...)
		d = append(d, benchCountries[city%len(benchCountries)]...)
		d = append(d, `","device":"`...)
		d = append(d, pick(benchDevices)...)
		d = append(d, `","premium":`...)
		d = strconv.AppendBool(d, rng.Intn(4) == 0)
		d = append(d, `},"currency":"`...)
		d = append(d, pick(benchCurrencies)...)
		d = append(d, `","items":[`...)
		var total float64
		for j := range 2 + rng.Intn(4) {
			if j > 0 {
				d = append(d, ',')
			}
			price := float64(rng.Intn(100_000)) / 100
			qty := 1 + rng.Intn(5)
			total += price * float64(qty)
			d = append(d, `{"sku":"SKU-`...)
			d = strconv.AppendInt(d, int64(rng.Intn(1_000_000)), 10)
			d = append(d, `","qty":`...)
			d = strconv.AppendInt(d, int64(qty), 10)
			d = append(d, `,"price":`...)
			d = strconv.AppendFloat(d, price, 'f', 2, 64)
			d = append(d, `,"gift":`...)
			d = strconv.AppendBool(d, rng.Intn(10) == 0)
			d = append(d, '}')
		}
		d = append(d, `],"total":`...)
		d = strconv.AppendFloat(d, total, 'f', 2, 64)
		d = append(d, `,"discount":`...)
		d = strconv.AppendFloat(d, rng.Float64()*0.3, 'f', 4, 64)
		d = append(d, `,"lat":`...)
		d = strconv.AppendFloat(d, rng.Float64()*180-90, 'f', 5, 64)
		d = append(d, `,"lon":`...)
		d = strconv.AppendFloat(d, rng.Float64()*360-180, 'f', 5, 64)
		d = append(d, `,"shipping":{"street":"`...)
		d = strconv.AppendInt(d, int64(1+rng.Intn(300)), 10)
		d = append(d, ' ')
		d = append(d, pick(benchLastNames)...)
		d = append(d, ` street","zip":"`...)
		d = fmt.Appendf(d, "%05d", rng.Intn(100_000))
		d = append(d, `","city":"`...)
		d = append(d, pick(benchCities)...)
		d = append(d, `","express":`...)
		d = strconv.AppendBool(d, rng.Intn(3) == 0)
		d = append(d, `},"tags":["`...)
		d = append(d, pick(benchWords)...)
		d = append(d, `","`...)
		d = append(d, pick(benchDevices)...)
		d = append(d, `"],"ip":"10.`...)
		d = fmt.Appendf(d, "%d.%d.%d", rng.Intn(256), rng.Intn(256), rng.Intn(256))
		d = append(d, `","latency_ms":`...)
		d = strconv.AppendFloat(d, rng.ExpFloat64()*40, 'f', 3, 64)
		d = append(d, `,"trace":"`...)
		d = fmt.Appendf(d, "%016x%016x", rng.Uint64(), rng.Uint64())
		d = append(d, `","note":"`...)
		const tail = `"}`
		for first := true; ; first = false {
			w := pick(benchWords)
			if len(d)+1+len(w)+len(tail) > size {
				break
			}
			if !first {
				d = append(d, ' ')
			}
			d = append(d, w...)
		}
		for len(d)+len(tail) < size {
			d = append(d, '.')
		}
		out[i] = append(d, tail...)
	}
	return out
}

// pairedRounds runs a and b back to back in each of rounds rounds,
// alternating which goes first (so an advantage of the second region
// start of a pair sides with neither), logs each round and returns the
// results and the per-round b/a ratios. Region starts vary a lot on a
// small machine, so callers estimate with the median of the ratios.
func pairedRounds(b *testing.B, rounds int, nameA, nameB string, runA, runB func(round int) float64) (as, bs, ratios []float64) {
	b.Helper()
	for round := range rounds {
		var x, y float64
		if round%2 == 0 {
			x, y = runA(2*round), runB(2*round+1)
		} else {
			y, x = runB(2*round), runA(2*round+1)
		}
		as, bs, ratios = append(as, x), append(bs, y), append(ratios, y/x)
		b.Logf("round %d: %s %.0f msg/s, %s %.0f msg/s (ratio %.3f)", round, nameA, x, nameB, y, y/x)
	}
	return as, bs, ratios
}

// median is the middle value of xs (the upper one of an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
