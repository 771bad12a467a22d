package bookie

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/isobar-mq/isobar/bookie/client"
	"github.com/isobar-mq/isobar/bookie/proto"
)

// collected indexes one collection's data points by instrument name.
type collected map[string]metricdata.Aggregation

func collect(t *testing.T, r sdkmetric.Reader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := collected{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != meterName {
			continue
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// hist returns the count and sum of a histogram's points whose attributes
// include want, checking every point carries the bookie id.
func (c collected) hist(t *testing.T, name, id string, want ...attribute.KeyValue) (count uint64, sum float64) {
	t.Helper()
	switch h := c[name].(type) {
	case metricdata.Histogram[float64]:
		for _, p := range h.DataPoints {
			checkBookie(t, name, p.Attributes, id)
			if hasAll(p.Attributes, want) {
				count += p.Count
				sum += p.Sum
			}
		}
	case metricdata.Histogram[int64]:
		for _, p := range h.DataPoints {
			checkBookie(t, name, p.Attributes, id)
			if hasAll(p.Attributes, want) {
				count += p.Count
				sum += float64(p.Sum)
			}
		}
	default:
		t.Fatalf("%s: no histogram collected (got %T)", name, c[name])
	}
	return count, sum
}

// value sums the points of a counter or gauge whose attributes include want.
func (c collected) value(t *testing.T, name, id string, want ...attribute.KeyValue) int64 {
	t.Helper()
	var pts []metricdata.DataPoint[int64]
	switch d := c[name].(type) {
	case metricdata.Sum[int64]:
		pts = d.DataPoints
	case metricdata.Gauge[int64]:
		pts = d.DataPoints
	default:
		t.Fatalf("%s: no int64 sum or gauge collected (got %T)", name, c[name])
	}
	var v int64
	found := false
	for _, p := range pts {
		checkBookie(t, name, p.Attributes, id)
		if hasAll(p.Attributes, want) {
			v += p.Value
			found = true
		}
	}
	if !found {
		t.Fatalf("%s: no point with %v", name, want)
	}
	return v
}

func checkBookie(t *testing.T, name string, attrs attribute.Set, id string) {
	t.Helper()
	if v, ok := attrs.Value(attrBookie); !ok || v.AsString() != id {
		t.Errorf("%s: isobar.bookie = %q, want %q", name, v.AsString(), id)
	}
}

func hasAll(attrs attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := attrs.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })

	cfg := testConfig(t, t.TempDir())
	cfg.FlushInterval = time.Hour            // flushes only when the test asks:
	cfg.WriteCacheMaxBytes = writeCacheBytes // with flushWriteCache
	s := startServer(t, cfg, Deps{MeterProvider: mp})
	id := s.ID()

	ctx := context.Background()
	c, err := client.Dial(ctx, s.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	const ledger, n = 42, 50
	for e := uint64(0); e < n; e++ {
		if err := c.Add(ctx, ledger, e, entry(ledger, e, int64(e)-1, "metrics"), false); err != nil {
			t.Fatalf("add %d: %v", e, err)
		}
	}
	// From the write cache: hits.
	for e := uint64(0); e < 10; e++ {
		if _, err := c.Read(ctx, ledger, e, false); err != nil {
			t.Fatalf("read %d: %v", e, err)
		}
	}
	if _, err := c.Read(ctx, ledger, n+100, false); err == nil {
		t.Fatal("read of a missing entry succeeded")
	}

	m := collect(t, reader)
	if count, _ := m.hist(t, "isobar.bookie.journal.sync.duration", id); count == 0 {
		t.Error("journal.sync.duration: no syncs recorded")
	}
	if count, sum := m.hist(t, "isobar.bookie.journal.batch.size", id); count == 0 || sum < n {
		t.Errorf("journal.batch.size: count %d sum %v, want syncs covering at least %d entries", count, sum, n)
	}
	if count, sum := m.hist(t, "isobar.bookie.add.duration", id); count != n || sum <= 0 {
		t.Errorf("add.duration: count %d sum %v, want %d adds", count, sum, n)
	}
	if count, sum := m.hist(t, "isobar.bookie.read.duration", id); count != 11 || sum <= 0 {
		t.Errorf("read.duration: count %d sum %v, want 11 reads", count, sum)
	}
	if v := m.value(t, "isobar.bookie.add.count", id, attrResult.String("ok")); v != n {
		t.Errorf("add.count{ok} = %d, want %d", v, n)
	}
	if v := m.value(t, "isobar.bookie.read.count", id, attrResult.String("ok")); v != 10 {
		t.Errorf("read.count{ok} = %d, want 10", v)
	}
	if v := m.value(t, "isobar.bookie.read.count", id, attrResult.String("error")); v != 1 {
		t.Errorf("read.count{error} = %d, want 1", v)
	}
	if v := m.value(t, "isobar.bookie.read_cache.hits", id); v < 10 {
		t.Errorf("read_cache.hits = %d, want at least 10", v)
	}
	if v := m.value(t, "isobar.bookie.queue.depth", id, attrQueue.String("flush")); v != n {
		t.Errorf("queue.depth{flush} = %d, want the %d unflushed entries", v, n)
	}
	if v := m.value(t, "isobar.bookie.queue.depth", id, attrQueue.String("journal")); v != 0 {
		t.Errorf("queue.depth{journal} = %d, want 0 when idle", v)
	}

	// Flush to ledger storage; reads then come from the entry log: misses.
	flushWriteCache(t, ctx, s, c, ledger+1)
	for e := uint64(10); e < 20; e++ {
		if _, err := c.Read(ctx, ledger, e, false); err != nil {
			t.Fatalf("read %d: %v", e, err)
		}
	}

	m = collect(t, reader)
	if count, sum := m.hist(t, "isobar.bookie.ledger_storage.flush.duration", id); count == 0 || sum <= 0 {
		t.Errorf("ledger_storage.flush.duration: count %d sum %v, want a flush", count, sum)
	}
	if v := m.value(t, "isobar.bookie.read_cache.misses", id); v < 10 {
		t.Errorf("read_cache.misses = %d, want at least 10", v)
	}
	if v := m.value(t, "isobar.bookie.queue.depth", id, attrQueue.String("flush")); v != 0 {
		t.Errorf("queue.depth{flush} = %d after a flush, want 0", v)
	}
	for _, dir := range []string{"journal", "ledgers"} {
		if v := m.value(t, "isobar.bookie.disk.usage", id, attrDir.String(dir)); v <= 0 {
			t.Errorf("disk.usage{%s} = %d, want > 0", dir, v)
		}
		if v := m.value(t, "isobar.bookie.disk.free", id, attrDir.String(dir)); v <= 0 {
			t.Errorf("disk.free{%s} = %d, want > 0", dir, v)
		}
	}
	if v := m.value(t, "isobar.bookie.read.count", id, attrResult.String("ok")); v != 20 {
		t.Errorf("read.count{ok} = %d, want 20", v)
	}
}

// A bookie without a MeterProvider records nothing and still works; one
// whose provider is shut down keeps serving.
func TestMetricsNilProvider(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()), Deps{})
	c := dialRaw(t, s.Addr())
	if r := c.do(addReq(1, 1, 0, -1, "x")); r.Status != proto.StatusOK {
		t.Fatalf("add: %+v", r)
	}
	if r := c.do(proto.Request{Op: proto.OpRead, ID: 2, Ledger: 1, Entry: 0}); r.Status != proto.StatusOK {
		t.Fatalf("read: %+v", r)
	}
}

// Shutdown unregisters the gauges: a collection afterwards does not touch
// the closed storage.
func TestMetricsAfterShutdown(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	cfg := testConfig(t, t.TempDir())
	s, err := New(cfg, Deps{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	m := collect(t, reader)
	if d, ok := m["isobar.bookie.disk.usage"].(metricdata.Gauge[int64]); ok && len(d.DataPoints) > 0 {
		t.Errorf("disk.usage still observed after shutdown: %+v", d.DataPoints)
	}
}
