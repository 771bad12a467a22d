package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"github.com/isobar-mq/isobar/roles"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/observability"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// heapProfileEnv names a file BenchmarkManyTopics writes a heap profile
// to once every topic is created (what holds the idle topics' memory).
const heapProfileEnv = "ISOBAR_SCALE_HEAPPROFILE"

// BenchmarkManyTopics is the million-topic run of a region (issue 16):
// storage (embedded etcd, 3 bookies) in a child process, one real broker
// (roles.NewBroker: ownership registry, policies, Pulsar and HTTP
// listeners) in this one. It creates b.N topics over b.N/10,000
// namespaces (at least 1) with one durable subscription each, then
// reports: the creation rate; the broker's live heap and goroutines per
// idle topic; the etcd database size and keys per topic; one maintenance
// pass over every loaded topic; the broker's CPU while idle; binary
// LOOKUP latency over a random sample; the broker's shutdown time; and,
// after a restart on the same storage, that no topic is loaded until
// asked for and how long a sample takes to be served again (LOOKUP then
// SUBSCRIBE on the existing subscription):
//
//	go test -run '^$' -bench BenchmarkManyTopics -benchtime 1000000x -timeout 90m ./broker/
//
// Not part of `go test ./...` (benchmarks run only with -bench); results
// in docs/BENCHMARKS.md, "A million topics (issue 16)".
func BenchmarkManyTopics(b *testing.B) {
	ctx := context.Background()
	endpoint := startStorageChild(b)
	metaCfg := metastore.Config{Endpoints: []string{endpoint}}
	var tel *observability.Telemetry
	start := func() *roles.Broker {
		// Metrics on (served, not exported: the scrape below collects them).
		var err error
		tel, err = observability.New(ctx, observability.Config{Getenv: func(string) string { return "" }})
		if err != nil {
			b.Fatal(err)
		}
		rb := roles.NewBroker(roles.BrokerConfig{
			Config:     broker.Config{Region: "scale"},
			Name:       "scale-1",
			ListenAddr: "127.0.0.1:0", HTTPListenAddr: "127.0.0.1:0",
		}, metaCfg, metastore.Config{}, roles.Deps{Telemetry: tel})
		if err := rb.Start(ctx); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for err := rb.Ready(ctx); err != nil; err = rb.Ready(ctx) {
			if time.Now().After(deadline) {
				b.Fatalf("broker not ready: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return rb
	}
	rb := start()
	stopped := false
	defer func() {
		if !stopped {
			rb.Shutdown(context.Background())
		}
	}()

	namespaces := max(1, b.N/10000)
	pol := rb.Policies()
	for i := range namespaces {
		if err := pol.CreateNamespace(ctx, fmt.Sprintf("public/ns-%d", i), nil); err != nil {
			b.Fatal(err)
		}
	}
	adm := rb.Broker().AdminAPI().Topics
	name := func(i int) string {
		return fmt.Sprintf("persistent://public/ns-%d/t-%d", i%namespaces, i)
	}
	mk := func(n string) error {
		tn, err := topic.Parse(n)
		if err != nil {
			return err
		}
		if err := adm.CreateTopic(ctx, tn); err != nil {
			return err
		}
		return adm.CreateSubscription(ctx, tn, "sub", nil)
	}
	// Warm up each namespace (its policies, its bundles' ownership) with
	// one topic, then measure.
	for i := range namespaces {
		if err := mk(fmt.Sprintf("persistent://public/ns-%d/warm", i)); err != nil {
			b.Fatal(err)
		}
	}
	before, gBefore := liveHeap()
	b.ResetTimer()
	created := createConcurrently(b, 50000, func(i int) error { return mk(name(i)) })
	b.StopTimer()
	after, gAfter := liveHeap()
	if got, want := len(rb.Broker().Topics()), b.N+namespaces; got != want {
		b.Fatalf("%d topics loaded, want %d", got, want)
	}
	if path := os.Getenv(heapProfileEnv); path != "" {
		writeHeapProfile(b, path)
	}
	b.ReportMetric(float64(b.N)/created.Seconds(), "topics/s")
	b.ReportMetric(float64(after-before)/float64(b.N), "heap-B/topic")
	b.ReportMetric(float64(gAfter-gBefore)/float64(b.N), "goroutines/topic")

	// etcd: database size and keys.
	ms, err := metastore.Connect(ctx, metastore.Config{Endpoints: []string{endpoint}})
	if err != nil {
		b.Fatal(err)
	}
	defer ms.Close()
	dbSize, dbInUse, err := etcdDBSize(ctx, endpoint)
	if err != nil {
		b.Fatal(err)
	}
	allKeys, _, err := ms.Count(ctx, "/")
	if err != nil {
		b.Fatal(err)
	}
	topicKeys, _, err := ms.Count(ctx, metastore.RegionPrefix("scale")+"topics/")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(dbSize)/(1<<20), "etcd-db-MiB")
	b.ReportMetric(float64(dbInUse)/(1<<20), "etcd-inuse-MiB")
	b.ReportMetric(float64(dbInUse)/float64(b.N), "etcd-inuse-B/topic")
	b.ReportMetric(float64(allKeys)/float64(b.N), "etcd-keys/topic")
	fmt.Fprintf(os.Stderr, "etcd: %d keys (%d under topics/), db %d B, in use %d B\n", allKeys, topicKeys, dbSize, dbInUse)

	// Background work with every topic loaded and idle: the broker's CPU
	// over 30 s, and one maintenance pass (every minute by default).
	cpu0 := cpuTime()
	time.Sleep(30 * time.Second) // a measurement window, not synchronisation
	b.ReportMetric((cpuTime()-cpu0).Seconds()/30*100, "idle-cpu-%")
	m0 := time.Now()
	rb.Broker().MaintainOnce(ctx)
	b.ReportMetric(time.Since(m0).Seconds(), "maintain-s")
	// The other periodic work, each timed once on its own: a load report
	// (every 10 s; the second sample of a new sampler, which has rates)
	// and scrapes of /metrics (the metrics callback: the first visits
	// every loaded topic, the second only what changed since).
	m0 = time.Now()
	rb.Broker().MaintainOnce(ctx)
	b.ReportMetric(time.Since(m0).Seconds()*1e3, "maintain-again-ms")
	ls := rb.Broker().NewLoadSampler()
	ls.Sample()
	l0 := time.Now()
	if rep := ls.Sample(); rep.NumTopics != b.N+namespaces {
		b.Fatalf("load report of %d topics, want %d", rep.NumTopics, b.N+namespaces)
	}
	b.ReportMetric(time.Since(l0).Seconds()*1e3, "load-sample-ms")
	s0 := time.Now()
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "pulsar_broker_topic_count") {
		b.Fatalf("no topic count in /metrics:\n%.2000s", rec.Body.String())
	}
	b.ReportMetric(time.Since(s0).Seconds()*1e3, "metrics-scrape-ms")
	// The first collection visits every loaded topic; the next ones
	// only those that changed since (metricsindex.go).
	s0 = time.Now()
	rec = httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "pulsar_broker_topic_count") {
		b.Fatalf("no topic count in /metrics:\n%.2000s", rec.Body.String())
	}
	b.ReportMetric(time.Since(s0).Seconds()*1e3, "metrics-scrape-again-ms")

	// Lookups over the binary protocol, one at a time, of random topics.
	rng := rand.New(rand.NewPCG(1, 2))
	sample := func(n int) []string {
		out := make([]string, min(n, b.N))
		for i := range out {
			out[i] = name(rng.IntN(b.N))
		}
		return out
	}
	lc := dialScale(b, rb.Endpoints().ServiceURL)
	var lat []time.Duration
	for _, n := range sample(10000) {
		l0 := time.Now()
		lc.lookup(n)
		lat = append(lat, time.Since(l0))
	}
	lc.nc.Close()
	b.ReportMetric(pct(lat, 50).Seconds()*1e3, "lookup-p50-ms")
	b.ReportMetric(pct(lat, 99).Seconds()*1e3, "lookup-p99-ms")

	// Restart on the same storage.
	s0 = time.Now()
	if err := rb.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	stopped = true
	b.ReportMetric(time.Since(s0).Seconds(), "shutdown-s")
	r0 := time.Now()
	rb = start()
	stopped = false
	b.ReportMetric(time.Since(r0).Seconds(), "restart-ready-s")
	if n := len(rb.Broker().Topics()); n != 0 {
		b.Fatalf("%d topics loaded by the restart itself, want 0 (lazy loading)", n)
	}
	heapRestarted, _ := liveHeap()
	b.ReportMetric(float64(heapRestarted)/(1<<20), "restarted-heap-MiB")
	// A sample served again: LOOKUP, then SUBSCRIBE to the existing
	// subscription (which loads the topic), then CLOSE_CONSUMER.
	sc := dialScale(b, rb.Endpoints().ServiceURL)
	lat = lat[:0]
	for i, n := range sample(1000) {
		l0 := time.Now()
		sc.lookup(n)
		sc.subscribe(n, uint64(i+1))
		lat = append(lat, time.Since(l0))
	}
	b.ReportMetric(time.Since(r0).Seconds(), "restart-serve-1000-s")
	b.ReportMetric(pct(lat, 50).Seconds()*1e3, "first-serve-p50-ms")
	b.ReportMetric(pct(lat, 99).Seconds()*1e3, "first-serve-p99-ms")
	if n := len(rb.Broker().Topics()); n > 1000 {
		b.Fatalf("%d topics loaded after serving 1000, want at most 1000", n)
	}
}

// scaleConn is a protocol connection for BenchmarkManyTopics that answers
// the broker's pings.
type scaleConn struct {
	b   testing.TB
	nc  net.Conn
	req uint64
}

func dialScale(b testing.TB, url string) *scaleConn {
	b.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(url, "pulsar://"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	c := &scaleConn{b: b, nc: nc}
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: proto.String("scale-bench"), ProtocolVersion: proto.Int32(20)}})
	if f := c.recv(); f.Cmd.GetType() != pb.BaseCommand_CONNECTED {
		b.Fatalf("want CONNECTED, got %v", f.Cmd)
	}
	return c
}

func (c *scaleConn) send(cmd *pb.BaseCommand) {
	f, err := wire.AppendCommand(nil, cmd)
	if err != nil {
		c.b.Fatal(err)
	}
	if _, err := c.nc.Write(f); err != nil {
		c.b.Fatal(err)
	}
}

func (c *scaleConn) recv() wire.Frame {
	for {
		c.nc.SetReadDeadline(time.Now().Add(time.Minute))
		raw, err := wire.ReadFrame(c.nc, 0, nil)
		if err != nil {
			c.b.Fatal(err)
		}
		f, err := wire.DecodeFrame(raw)
		if err != nil {
			c.b.Fatal(err)
		}
		if f.Cmd.GetType() == pb.BaseCommand_PING {
			c.send(&pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}})
			continue
		}
		return f
	}
}

// lookup asks where topic n is served and fails unless it is here.
func (c *scaleConn) lookup(n string) {
	c.req++
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
		Topic: proto.String(n), RequestId: proto.Uint64(c.req)}})
	f := c.recv()
	r := f.Cmd.GetLookupTopicResponse()
	if r == nil || r.GetResponse() != pb.CommandLookupTopicResponse_Connect || r.GetRequestId() != c.req {
		c.b.Fatalf("lookup %s: %v", n, f.Cmd)
	}
}

// subscribe attaches a consumer to the topic's subscription "sub" and
// closes it again.
func (c *scaleConn) subscribe(n string, id uint64) {
	c.req++
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
		Topic: proto.String(n), Subscription: proto.String("sub"), SubType: pb.CommandSubscribe_Shared.Enum(),
		ConsumerId: proto.Uint64(id), RequestId: proto.Uint64(c.req)}})
	c.await(fmt.Sprintf("subscribe %s", n))
	c.req++
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(), CloseConsumer: &pb.CommandCloseConsumer{
		ConsumerId: proto.Uint64(id), RequestId: proto.Uint64(c.req)}})
	c.await(fmt.Sprintf("close consumer on %s", n))
}

// await reads frames until the SUCCESS of the last request.
func (c *scaleConn) await(what string) {
	for {
		f := c.recv()
		switch f.Cmd.GetType() {
		case pb.BaseCommand_SUCCESS:
			if f.Cmd.GetSuccess().GetRequestId() == c.req {
				return
			}
		case pb.BaseCommand_ERROR:
			c.b.Fatalf("%s: %v", what, f.Cmd)
		}
	}
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func writeHeapProfile(b testing.TB, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// etcdDBSize reads the size of etcd's backend database and the part of it
// in use from the metrics etcd serves at endpoint/metrics (what its space
// quota is checked against, and what compaction and defragmentation
// would leave).
func etcdDBSize(ctx context.Context, endpoint string) (size, inUse int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("etcd metrics: %s", resp.Status)
	}
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		var dst *int64
		switch {
		case !ok:
			continue
		case name == "etcd_mvcc_db_total_size_in_bytes":
			dst = &size
		case name == "etcd_mvcc_db_total_size_in_use_in_bytes":
			dst = &inUse
		default:
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("etcd metrics: %s %q: %w", name, value, err)
		}
		*dst = int64(f)
		found++
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("etcd metrics: the database size metrics are missing")
	}
	return size, inUse, nil
}
