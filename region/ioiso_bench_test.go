package region_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"golang.org/x/sys/unix"

	"github.com/isobar-mq/isobar/internal/diskperf"
	"github.com/isobar-mq/isobar/region"
)

// BenchmarkIOIsolation measures what a catch-up reader of a cold backlog
// does to the producers and tailing consumers of other topics (issue 16,
// "I/O isolation"). One region as `isobar dev` starts it (3 bookies, one
// broker, all on the one disk of a temp dir), in this process:
//
//  1. the disk's cold sequential read bandwidth is measured in the same
//     temp dir (diskperf.MeasureColdRead: 1 MiB reads of a 1 GiB file
//     dropped from the page cache);
//  2. a backlog of ISOBAR_IOISO_BACKLOG_MB MiB (default 1024) of 4 KiB
//     random messages is written to one topic with a durable subscription
//     "catchup" at its start;
//  3. the bookies' ledger files are made cold (fdatasync, then
//     posix_fadvise DONTNEED: diskperf.DropCache) and a consumer on
//     "catchup" (its own client: another application) reads the first
//     1/(ISOBAR_IOISO_ROUNDS+1) of the backlog alone: the reader's
//     throughput without the tailing load;
//  4. tailing load starts: ISOBAR_IOISO_TOPICS topics (default 4), each with
//     one producer (batching off, so each message is an entry and its
//     publish latency is the storage path's) paced at its share of
//     ISOBAR_IOISO_RATE msg/s (default 2000 in all) of 1 KiB messages, and
//     one consumer; each payload carries its send time; 3 s of warm-up;
//  5. ISOBAR_IOISO_ROUNDS rounds (default 3), each a phase "alone" of
//     ISOBAR_IOISO_SECONDS seconds (default 10) of tailing load only, then
//     a phase "reader" in which the consumer reads its share of the rest
//     of the backlog as fast as it can while the tailing load goes on.
//     Pairs of phases close in time see about the same load from the rest
//     of a shared machine.
//
// Reported per round and over all rounds, over the messages sent in each
// phase: the tailing topics' publish p99 (send to the producer's receipt)
// and end-to-end p99 (send to receipt by the tailing consumer), and their
// rise with the reader (the median of the rounds' rises); the reader's
// payload MB/s (10^6), kept against its throughput alone (reader-kept),
// and its ratio to the disk's cold read bandwidth; the
// bytes the disk read in the reader phases (/proc/diskstats), which shows
// the backlog really came from the disk (ISOBAR_IOISO_WARM=1 leaves it in
// the page cache, to tell the disk's share of the contention from the
// rest).
// Goal (issue 26): rises of at most 20% while the reader keeps at least
// half of its throughput alone. ISOBAR_IOISO_PACING=off turns the
// broker's pacing of backlog reads off (broker.backlogReads.targetRise
// -1), to compare. ISOBAR_IOISO_CPUPROFILE
// names a file for a CPU profile of the rounds. Run:
//
//	go test -run '^$' -bench BenchmarkIOIsolation -benchtime 1x -timeout 15m ./region/
func BenchmarkIOIsolation(b *testing.B) {
	if testing.Short() {
		b.Skip("I/O isolation benchmark: skipped with -short")
	}
	backlogMB := ioisoEnv(b, "ISOBAR_IOISO_BACKLOG_MB", 1024)
	secs := ioisoEnv(b, "ISOBAR_IOISO_SECONDS", 10)
	topics := ioisoEnv(b, "ISOBAR_IOISO_TOPICS", 4)
	rate := ioisoEnv(b, "ISOBAR_IOISO_RATE", 2000)
	rounds := ioisoEnv(b, "ISOBAR_IOISO_ROUNDS", 3)
	for range b.N {
		ioisoRun(b, backlogMB, time.Duration(secs)*time.Second, rounds, topics, rate)
	}
}

func ioisoEnv(b *testing.B, name string, def int) int {
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

// tailSample is one tailing message: when it was sent and how long its
// publish receipt and its delivery took (0: not yet).
type tailSample struct {
	sent    time.Time
	publish time.Duration
	e2e     time.Duration
}

// tailTopic is one tailing topic's producer, consumer and samples; the
// producer's goroutine appends samples, callbacks and the consumer fill
// them in by sequence number.
type tailTopic struct {
	name     string
	p        pulsar.Producer
	c        pulsar.Consumer
	mu       sync.Mutex
	samples  []tailSample
	received atomic.Int64
	errMu    sync.Mutex
	err      error
}

func (t *tailTopic) fail(err error) {
	t.errMu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.errMu.Unlock()
}

func ioisoRun(b *testing.B, backlogMB int, phase time.Duration, rounds, nTopics, rate int) {
	dir := b.TempDir()
	diskMBs, err := diskperf.MeasureColdRead(dir, 1<<30, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	cfg := region.Config{Name: "ioiso", DataDir: dir, Bookies: 3, Brokers: 1}
	if os.Getenv("ISOBAR_IOISO_PACING") == "off" {
		cfg.Broker.BacklogReads.TargetRise = -1 // backlog reads never paced: the comparison
	}
	r, err := region.Start(ctx, cfg, region.Deps{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		r.Shutdown(sctx)
	}()
	// The catch-up reader is another application: its own client, so its
	// own connection to the broker.
	c := benchClient(b, r.Endpoints().ServiceURL)
	readerClient := benchClient(b, r.Endpoints().ServiceURL)

	// The backlog, behind a durable subscription created first.
	const backlogMsg = 4 << 10
	backlogTopic := "persistent://public/default/ioiso-backlog"
	cc := benchConsumer(b, c, backlogTopic, "catchup")
	cc.Close()
	nBacklog := backlogMB << 20 / backlogMsg
	pool := make([][]byte, 256)
	for i := range pool {
		pool[i] = make([]byte, backlogMsg)
		rand.Read(pool[i])
	}
	bp, err := c.CreateProducer(pulsar.ProducerOptions{Topic: backlogTopic, MaxPendingMessages: 2000})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	benchSend(b, bp, pool, 0, nBacklog)
	b.Logf("backlog: %d messages, %d MiB written in %v", nBacklog, backlogMB, time.Since(start).Round(time.Millisecond))
	bp.Close()

	// The bookies' ledger files leave the page cache (the backlog is
	// cold), and the reader reads its first share alone: the throughput
	// it reaches without the tailing load, which it must keep half of.
	dropped, err := ioisoDropLedgers(dir)
	if err != nil {
		b.Fatal(err)
	}
	cr, err := readerClient.Subscribe(pulsar.ConsumerOptions{Topic: backlogTopic, SubscriptionName: "catchup"})
	if err != nil {
		b.Fatal(err)
	}
	defer cr.Close()
	got := 0
	read := func(until int) (bytes int64) {
		for ; got < until; got++ {
			m, err := cr.Receive(ctx)
			if err != nil {
				b.Fatalf("catch-up reader: message %d: %v", got, err)
			}
			bytes += int64(len(m.Payload()))
			if got%1000 == 999 || got == until-1 {
				if err := cr.AckCumulative(m); err != nil {
					b.Fatal(err)
				}
			}
		}
		return bytes
	}
	aloneShare := nBacklog / (rounds + 1)
	aloneStart := time.Now()
	aloneMBs := float64(read(aloneShare)) / 1e6 / time.Since(aloneStart).Seconds()
	b.Logf("reader alone: %d messages at %.0f MB/s", aloneShare, aloneMBs)

	// Tailing load.
	tpool := benchPayloads(1000, benchPayloadSize, 16)
	tails := make([]*tailTopic, nTopics)
	for k := range tails {
		t := &tailTopic{name: fmt.Sprintf("persistent://public/default/ioiso-tail-%d", k)}
		t.c = benchConsumer(b, c, t.name, "tail")
		defer t.c.Close()
		t.p, err = c.CreateProducer(pulsar.ProducerOptions{Topic: t.name, DisableBatching: true})
		if err != nil {
			b.Fatal(err)
		}
		defer t.p.Close()
		tails[k] = t
	}
	stop := make(chan struct{})
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	var sending, receiving sync.WaitGroup
	per := float64(rate) / float64(nTopics)
	for _, t := range tails {
		sending.Go(func() { ioisoProduce(t, tpool, per, stop) })
		receiving.Go(func() { ioisoTail(rctx, t) })
	}
	// Warm-up; the rest of the backlog is still cold (unread since its
	// files were dropped).
	ioisoSleepUntil(ctx, time.Now().Add(3*time.Second))
	if path := os.Getenv("ISOBAR_IOISO_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	// Rounds of a phase without the reader followed by one with it, so
	// that each pair sees about the same load from the rest of the
	// machine. The reader reads its share of the backlog in each round;
	// between rounds it stops receiving (the broker stops dispatching
	// once its receive queue is full).
	type window struct{ from, to time.Time }
	var alones, readers []window
	var readBytes, diskBytes int64
	var readTime time.Duration
	metricsURL := r.Endpoints().MetricsURL
	var stages [][2]map[string]float64 // per round, per phase: mean seconds of the bookie's stages
	for round := range rounds {
		m0 := ioisoStageSums(b, metricsURL)
		a := window{from: time.Now()}
		a.to = a.from.Add(phase)
		ioisoSleepUntil(ctx, a.to)
		alones = append(alones, a)
		m1 := ioisoStageSums(b, metricsURL)
		// The disk's counter, where the temp dir has one (not on tmpfs):
		// diskBytes stays 0 otherwise.
		before, beforeErr := diskReadBytes(dir)
		r := window{from: time.Now()}
		readBytes += read(aloneShare + (nBacklog-aloneShare)*(round+1)/rounds)
		r.to = time.Now()
		readTime += r.to.Sub(r.from)
		readers = append(readers, r)
		if after, err := diskReadBytes(dir); err == nil && beforeErr == nil {
			diskBytes += after - before
		}
		m2 := ioisoStageSums(b, metricsURL)
		stages = append(stages, [2]map[string]float64{ioisoStageMeans(m0, m1), ioisoStageMeans(m1, m2)})
	}
	close(stop)
	sending.Wait()
	// Every tailing message sent is received before the samples are read.
	benchWaitFor(b, time.Minute, func() bool {
		for _, t := range tails {
			t.mu.Lock()
			n := len(t.samples)
			t.mu.Unlock()
			if t.received.Load() < int64(n) {
				return false
			}
		}
		return true
	})
	rcancel()
	receiving.Wait()

	// [round][alone, reader][publish, e2e] latencies.
	lat := make([][2][2][]time.Duration, rounds)
	for _, t := range tails {
		if t.err != nil {
			b.Fatalf("%s: %v", t.name, t.err)
		}
		t.mu.Lock()
		for _, s := range t.samples {
			for i := range rounds {
				for k, w := range []window{alones[i], readers[i]} {
					if !s.sent.Before(w.from) && s.sent.Before(w.to) {
						lat[i][k][0] = append(lat[i][k][0], s.publish)
						lat[i][k][1] = append(lat[i][k][1], s.e2e)
					}
				}
			}
		}
		t.mu.Unlock()
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	p99 := func(ds []time.Duration) float64 { return ms(benchPercentile(ds, 0.99)) }
	var all [2][2][]time.Duration
	var pubRises, e2eRises []float64
	for i := range rounds {
		l := lat[i]
		for k := range 2 {
			for j := range 2 {
				all[k][j] = append(all[k][j], l[k][j]...)
			}
		}
		pubRises = append(pubRises, 100*(p99(l[1][0])/p99(l[0][0])-1))
		e2eRises = append(e2eRises, 100*(p99(l[1][1])/p99(l[0][1])-1))
		b.Logf("round %d: alone %d msgs: publish p50 %.2f p99 %.2f ms, e2e p50 %.2f p99 %.2f ms; with reader (%.1f s) %d msgs: publish p50 %.2f p99 %.2f ms, e2e p50 %.2f p99 %.2f ms; p99 rise publish %+.0f%% e2e %+.0f%%",
			i, len(l[0][0]), ms(benchPercentile(l[0][0], 0.5)), p99(l[0][0]), ms(benchPercentile(l[0][1], 0.5)), p99(l[0][1]),
			readers[i].to.Sub(readers[i].from).Seconds(), len(l[1][0]), ms(benchPercentile(l[1][0], 0.5)), p99(l[1][0]), ms(benchPercentile(l[1][1], 0.5)), p99(l[1][1]),
			pubRises[i], e2eRises[i])
		b.Logf("round %d: bookie mean ms alone / with reader: %s", i, ioisoStageLine(stages[i]))
	}
	readMBs := float64(readBytes) / 1e6 / readTime.Seconds()
	b.ReportMetric(p99(all[0][0]), "pub-p99-alone-ms")
	b.ReportMetric(p99(all[1][0]), "pub-p99-reader-ms")
	b.ReportMetric(median(pubRises), "pub-p99-rise-%")
	b.ReportMetric(p99(all[0][1]), "e2e-p99-alone-ms")
	b.ReportMetric(p99(all[1][1]), "e2e-p99-reader-ms")
	b.ReportMetric(median(e2eRises), "e2e-p99-rise-%")
	b.ReportMetric(readMBs, "reader-MB/s")
	b.ReportMetric(aloneMBs, "reader-alone-MB/s")
	b.ReportMetric(readMBs/aloneMBs, "reader-kept")
	b.ReportMetric(diskMBs, "disk-read-MB/s")
	b.ReportMetric(readMBs/diskMBs, "reader/disk")
	b.Logf("all rounds: tailing %d topics, %d msg/s; alone: publish p50 %.2f p99 %.2f ms, e2e p50 %.2f p99 %.2f ms; with reader: publish p50 %.2f p99 %.2f ms, e2e p50 %.2f p99 %.2f ms; median p99 rise publish %+.0f%% e2e %+.0f%%",
		nTopics, rate, ms(benchPercentile(all[0][0], 0.5)), p99(all[0][0]), ms(benchPercentile(all[0][1], 0.5)), p99(all[0][1]),
		ms(benchPercentile(all[1][0], 0.5)), p99(all[1][0]), ms(benchPercentile(all[1][1], 0.5)), p99(all[1][1]), median(pubRises), median(e2eRises))
	b.Logf("reader: %d MB in %.1f s = %.0f MB/s, %.0f%% of the %.0f MB/s it read alone; disk cold sequential read %.0f MB/s (ratio %.2f); the disk read %.0f MB while the reader read; %d ledger files dropped from the page cache",
		readBytes/1e6, readTime.Seconds(), readMBs, 100*readMBs/aloneMBs, aloneMBs, diskMBs, readMBs/diskMBs, float64(diskBytes)/1e6, dropped)
}

// ioisoProduce sends t's messages at rate msg/s until stop: every
// millisecond the messages due by then, each stamped with its send time
// and sequence number.
func ioisoProduce(t *tailTopic, pool [][]byte, rate float64, stop <-chan struct{}) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var pending sync.WaitGroup
	defer pending.Wait()
	start, i := time.Now(), 0
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		due := int(time.Since(start).Seconds() * rate)
		for ; i < due; i++ {
			sent := time.Now()
			t.mu.Lock()
			t.samples = append(t.samples, tailSample{sent: sent})
			t.mu.Unlock()
			seq := i
			pending.Add(1)
			t.p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: lagPayload(pool, i, sent)},
				func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					defer pending.Done()
					if err != nil {
						t.fail(fmt.Errorf("send %d: %w", seq, err))
						return
					}
					d := time.Since(sent)
					t.mu.Lock()
					t.samples[seq].publish = d
					t.mu.Unlock()
				})
		}
	}
}

// ioisoTail receives t's messages in order until ctx ends, recording each
// one's end-to-end latency.
func ioisoTail(ctx context.Context, t *tailTopic) {
	want := 0
	for {
		m, err := t.c.Receive(ctx)
		if err != nil {
			if ctx.Err() == nil {
				t.fail(fmt.Errorf("receive: %w", err))
			}
			return
		}
		now := time.Now()
		pl := m.Payload()
		if len(pl) < 16 {
			t.fail(fmt.Errorf("message %v: %d bytes", m.ID(), len(pl)))
			return
		}
		seq := int(binary.BigEndian.Uint64(pl[8:16]))
		if seq != want {
			t.fail(fmt.Errorf("got message %d, want %d", seq, want))
			return
		}
		want++
		sent := time.Unix(0, int64(binary.BigEndian.Uint64(pl[0:8])))
		t.mu.Lock()
		t.samples[seq].e2e = now.Sub(sent)
		t.mu.Unlock()
		t.received.Store(int64(want))
		if want%1000 == 0 {
			if err := t.c.AckCumulative(m); err != nil {
				t.fail(fmt.Errorf("ack: %w", err))
				return
			}
		}
	}
}

func ioisoSleepUntil(ctx context.Context, t time.Time) {
	tm := time.NewTimer(time.Until(t))
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}

// diskReadBytes returns the bytes read so far from the block device that
// holds dir (/proc/diskstats, sectors of 512 bytes).
func diskReadBytes(dir string) (int64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, err
	}
	major, minor := unix.Major(st.Dev), unix.Minor(st.Dev)
	f, err := os.Open("/proc/diskstats")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 6 || fl[0] != strconv.Itoa(int(major)) || fl[1] != strconv.Itoa(int(minor)) {
			continue
		}
		sectors, err := strconv.ParseInt(fl[5], 10, 64)
		return sectors * 512, err
	}
	return 0, fmt.Errorf("device %d:%d of %s not in /proc/diskstats", major, minor, dir)
}

// ioisoStages are the bookie's histograms whose means the benchmark logs
// per phase, to tell where a tailing message's time went.
var ioisoStages = []string{"isobar_bookie_add_duration_seconds", "isobar_bookie_journal_sync_duration_seconds", "isobar_bookie_read_duration_seconds"}

// ioisoStageSums scrapes the region's metrics for the _sum and _count of
// each stage, summed over the bookies.
func ioisoStageSums(b *testing.B, url string) map[string]float64 {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, st := range ioisoStages {
			for _, suf := range []string{"_sum", "_count"} {
				if strings.HasPrefix(line, st+suf+"{") || strings.HasPrefix(line, st+suf+" ") {
					f := strings.Fields(line)
					v, err := strconv.ParseFloat(f[len(f)-1], 64)
					if err == nil {
						out[st+suf] += v
					}
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

// ioisoStageMeans is each stage's mean seconds between two scrapes.
func ioisoStageMeans(from, to map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, st := range ioisoStages {
		if n := to[st+"_count"] - from[st+"_count"]; n > 0 {
			out[st] = (to[st+"_sum"] - from[st+"_sum"]) / n
		}
	}
	return out
}

func ioisoStageLine(p [2]map[string]float64) string {
	var parts []string
	for _, st := range ioisoStages {
		short := strings.TrimSuffix(strings.TrimPrefix(st, "isobar_bookie_"), "_duration_seconds")
		parts = append(parts, fmt.Sprintf("%s %.2f / %.2f", short, 1e3*p[0][st], 1e3*p[1][st]))
	}
	return strings.Join(parts, ", ")
}

// ioisoDropLedgers drops the bookies' ledger files under dir from the
// page cache (unless ISOBAR_IOISO_WARM is set) and returns how many.
func ioisoDropLedgers(dir string) (int, error) {
	var dropped int
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if os.Getenv("ISOBAR_IOISO_WARM") == "" && d.Type().IsRegular() && strings.Contains(path, string(filepath.Separator)+"ledgers"+string(filepath.Separator)) {
			dropped++
			return diskperf.DropCache(path)
		}
		return nil
	})
	return dropped, err
}
