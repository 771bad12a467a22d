package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/topic"
)

// storageChildEnv makes the test binary run a region's storage (etcd and
// bookies, no broker) instead of tests, so that a benchmark can measure
// the broker's heap alone.
const storageChildEnv = "ISOBAR_TEST_STORAGE_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(storageChildEnv); dir != "" {
		os.Exit(runStorageChild(dir))
	}
	os.Exit(m.Run())
}

func runStorageChild(dir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := region.Start(ctx, region.Config{Name: "scale", DataDir: dir, Brokers: -1}, region.Deps{})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Println("ETCD", r.Endpoints().MetadataURL)
	// Until the parent closes stdin or signals.
	go func() { _, _ = bufio.NewReader(os.Stdin).ReadString('\n'); stop() }()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.Shutdown(sctx)
	return 0
}

// startStorageChild runs a region's storage (embedded etcd and 3
// bookies) in a child process on a temporary directory and returns its
// etcd endpoint; the child stops when the benchmark ends.
func startStorageChild(b *testing.B) string {
	dir := b.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), storageChildEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ETCD ") {
		b.Fatalf("storage child: %q %v", line, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "ETCD "))
}

// BenchmarkIdleTopics creates b.N topics with one durable subscription
// each on a broker whose storage (etcd, bookies) runs in another process,
// and reports the broker's live heap and goroutines per idle topic:
//
//	go test -run '^$' -bench BenchmarkIdleTopics -benchtime 100000x ./broker/
func BenchmarkIdleTopics(b *testing.B) {
	endpoint := startStorageChild(b)
	ctx := context.Background()
	meta, err := metastore.Connect(ctx, metastore.Config{Endpoints: []string{endpoint}})
	if err != nil {
		b.Fatal(err)
	}
	defer meta.Close()
	lc, err := ledger.NewClient(meta, ledger.Config{Region: "scale"})
	if err != nil {
		b.Fatal(err)
	}
	defer lc.Close()
	pol, err := policy.New(meta, policy.Config{LocalCluster: "scale"})
	if err != nil {
		b.Fatal(err)
	}
	if err := pol.EnsureStandalone(ctx, "scale", policy.ClusterData{ServiceURL: "http://127.0.0.1:1"}); err != nil {
		b.Fatal(err)
	}
	br, err := broker.New(broker.Config{Region: "scale", ServiceURL: "pulsar://127.0.0.1:1"},
		broker.Deps{Meta: meta, Ledgers: lc, Namespaces: broker.PolicyNamespaces{Store: pol, Default: policy.AutoTopicCreation{AllowAutoTopicCreation: true}}})
	if err != nil {
		b.Fatal(err)
	}
	br.Start()
	defer br.Shutdown(context.Background())
	adm := br.AdminAPI().Topics

	// Warm up the shared structures with one topic, then measure.
	mk := func(i int) error {
		name, err := topic.Parse(fmt.Sprintf("persistent://public/default/idle-%d", i))
		if err != nil {
			return err
		}
		if err := adm.CreateTopic(ctx, name); err != nil {
			return err
		}
		return adm.CreateSubscription(ctx, name, "sub", nil)
	}
	if err := mk(-1); err != nil {
		b.Fatal(err)
	}
	before, gBefore := liveHeap()
	b.ResetTimer()
	created := createConcurrently(b, 20000, mk)
	b.StopTimer()
	after, gAfter := liveHeap()
	if got := len(br.Topics()); got != b.N+1 {
		b.Fatalf("%d topics loaded, want %d", got, b.N+1)
	}
	if path := os.Getenv(heapProfileEnv); path != "" {
		writeHeapProfile(b, path)
	}
	b.ReportMetric(float64(after-before)/float64(b.N), "heap-B/topic")
	b.ReportMetric(float64(gAfter-gBefore)/float64(b.N), "goroutines/topic")
	b.ReportMetric(float64(b.N)/created.Seconds(), "topics/s")
}

// createConcurrently calls mk(i) for every i below b.N, 32 at a time,
// printing progress every `every` topics, and fails b on the first error.
// It returns how long that took.
func createConcurrently(b *testing.B, every int, mk func(i int) error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	start := time.Now()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for firstErr.Load() == nil {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				if err := mk(i); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				if i > 0 && i%every == 0 {
					fmt.Fprintf(os.Stderr, "%d topics in %v\n", i, time.Since(start).Round(time.Second))
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if p := firstErr.Load(); p != nil {
		b.Fatal(*p)
	}
	return took
}

// liveHeap returns the live heap after a full collection, and the
// goroutine count.
func liveHeap() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, runtime.NumGoroutine()
}
