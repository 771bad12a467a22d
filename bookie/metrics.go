package bookie

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/bookie/storage"
)

// meterName is the instrumentation scope of the bookie's metrics.
const meterName = "github.com/isobar-mq/isobar/bookie"

// Attribute keys. Nothing per ledger: ledger ids are unbounded.
const (
	attrBookie = attribute.Key("isobar.bookie")
	attrResult = attribute.Key("isobar.result") // ok | error
	attrQueue  = attribute.Key("isobar.queue")  // journal | flush
	attrDir    = attribute.Key("isobar.dir")    // journal | ledgers
)

// Histogram buckets, in seconds or entries.
var (
	latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
	requestBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	flushBuckets   = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	batchBuckets   = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}
)

// metrics holds the bookie's instruments. It implements storage.Observer
// for the measurements only the storage can take.
//
// Read cache hits and misses: the bookie's only cache of entry data is the
// storage's write cache (the active memtable and the one being flushed). A
// hit is a storage read served from it; a miss is one served from an entry
// log on disk (index lookup plus log read, possibly from the page cache). A
// read of an entry or ledger the bookie does not have counts as neither.
// The storage reads the bookie makes itself (loading a ledger's LAC from its
// last entry) count too.
type metrics struct {
	// attrs are the precomputed attribute sets; replaced once when the
	// bookie learns its id in StartOn.
	attrs atomic.Pointer[metricAttrs]

	syncDuration  metric.Float64Histogram
	batchSize     metric.Int64Histogram
	addDuration   metric.Float64Histogram
	readDuration  metric.Float64Histogram
	addCount      metric.Int64Counter
	readCount     metric.Int64Counter
	flushDuration metric.Float64Histogram
	cacheHits     metric.Int64Counter
	cacheMisses   metric.Int64Counter
	queueDepth    metric.Int64ObservableGauge
	diskUsage     metric.Int64ObservableGauge
	diskFree      metric.Int64ObservableGauge

	meter metric.Meter
	reg   metric.Registration // the observable gauges' callback, once registered
}

// metricAttrs are the attribute sets of every measurement, built once.
type metricAttrs struct {
	base         metric.MeasurementOption // isobar.bookie
	ok, failed   metric.MeasurementOption // + isobar.result
	queueJournal metric.MeasurementOption // + isobar.queue
	queueFlush   metric.MeasurementOption
	dirJournal   metric.MeasurementOption // + isobar.dir
	dirLedgers   metric.MeasurementOption
}

func newMetricAttrs(id string) *metricAttrs {
	b := attrBookie.String(id)
	set := func(kvs ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(append([]attribute.KeyValue{b}, kvs...)...))
	}
	return &metricAttrs{
		base:         set(),
		ok:           set(attrResult.String("ok")),
		failed:       set(attrResult.String("error")),
		queueJournal: set(attrQueue.String("journal")),
		queueFlush:   set(attrQueue.String("flush")),
		dirJournal:   set(attrDir.String("journal")),
		dirLedgers:   set(attrDir.String("ledgers")),
	}
}

// newMetrics creates the instruments on mp (nil: a no-op provider). id is
// the bookie id as far as it is known yet (see setBookie).
func newMetrics(mp metric.MeterProvider, id string) (*metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter(meterName)
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	x := &metrics{meter: m}
	x.attrs.Store(newMetricAttrs(id))
	var err error
	x.syncDuration, err = m.Float64Histogram("isobar.bookie.journal.sync.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of one journal group commit (write and fdatasync)."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...))
	check(err)
	x.batchSize, err = m.Int64Histogram("isobar.bookie.journal.batch.size", metric.WithUnit("{entry}"),
		metric.WithDescription("Journal records made durable by one group commit."),
		metric.WithExplicitBucketBoundaries(batchBuckets...))
	check(err)
	x.addDuration, err = m.Float64Histogram("isobar.bookie.add.duration", metric.WithUnit("s"),
		metric.WithDescription("Add request from arrival to response (entry durable in the journal)."),
		metric.WithExplicitBucketBoundaries(requestBuckets...))
	check(err)
	x.readDuration, err = m.Float64Histogram("isobar.bookie.read.duration", metric.WithUnit("s"),
		metric.WithDescription("Read request from arrival to response."),
		metric.WithExplicitBucketBoundaries(requestBuckets...))
	check(err)
	x.addCount, err = m.Int64Counter("isobar.bookie.add.count", metric.WithUnit("{request}"),
		metric.WithDescription("Add requests answered, by result."))
	check(err)
	x.readCount, err = m.Int64Counter("isobar.bookie.read.count", metric.WithUnit("{request}"),
		metric.WithDescription("Read requests answered, by result."))
	check(err)
	x.flushDuration, err = m.Float64Histogram("isobar.bookie.ledger_storage.flush.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of one flush of the write cache to entry logs and index, checkpoint included."),
		metric.WithExplicitBucketBoundaries(flushBuckets...))
	check(err)
	x.cacheHits, err = m.Int64Counter("isobar.bookie.read_cache.hits", metric.WithUnit("{read}"),
		metric.WithDescription("Entry reads served from the write cache (memtables)."))
	check(err)
	x.cacheMisses, err = m.Int64Counter("isobar.bookie.read_cache.misses", metric.WithUnit("{read}"),
		metric.WithDescription("Entry reads served from entry logs on disk."))
	check(err)
	x.queueDepth, err = m.Int64ObservableGauge("isobar.bookie.queue.depth", metric.WithUnit("{request}"),
		metric.WithDescription("Journal requests waiting for a group commit (journal); entries waiting to be flushed to ledger storage (flush)."))
	check(err)
	x.diskUsage, err = m.Int64ObservableGauge("isobar.bookie.disk.usage", metric.WithUnit("By"),
		metric.WithDescription("Bytes of the bookie's own files in each directory."))
	check(err)
	x.diskFree, err = m.Int64ObservableGauge("isobar.bookie.disk.free", metric.WithUnit("By"),
		metric.WithDescription("Free bytes on the filesystem of each directory."))
	check(err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("bookie: metrics: %w", err)
	}
	return x, nil
}

// setBookie sets the isobar.bookie attribute of later measurements, once
// the bookie's id is known, and exports its counters at zero so that
// dashboards see them before the first read or error.
func (x *metrics) setBookie(id string) {
	a := newMetricAttrs(id)
	x.attrs.Store(a)
	ctx := context.Background()
	for _, c := range []metric.Int64Counter{x.addCount, x.readCount} {
		c.Add(ctx, 0, a.ok)
		c.Add(ctx, 0, a.failed)
	}
	x.cacheHits.Add(ctx, 0, a.base)
	x.cacheMisses.Add(ctx, 0, a.base)
}

// observe registers the callback of the observable gauges, which read the
// storage's queue depths and disk usage at collection time. Usage is the
// storage's own byte accounting plus one statfs per directory: cheap enough
// to take on every collection, so it is not cached.
func (x *metrics) observe(st *storage.Store) error {
	reg, err := x.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		a := x.attrs.Load()
		journal, flush := st.QueueDepths()
		o.ObserveInt64(x.queueDepth, int64(journal), a.queueJournal)
		o.ObserveInt64(x.queueDepth, int64(flush), a.queueFlush)
		u, err := st.Usage()
		if err != nil {
			return nil // a failing statfs is the disk's problem, not the scrape's
		}
		o.ObserveInt64(x.diskUsage, clampInt64(u.JournalUsed), a.dirJournal)
		o.ObserveInt64(x.diskUsage, clampInt64(u.LedgerUsed), a.dirLedgers)
		o.ObserveInt64(x.diskFree, clampInt64(u.JournalFree), a.dirJournal)
		o.ObserveInt64(x.diskFree, clampInt64(u.LedgerFree), a.dirLedgers)
		return nil
	}, x.queueDepth, x.diskUsage, x.diskFree)
	if err != nil {
		return fmt.Errorf("bookie: metrics: %w", err)
	}
	x.reg = reg
	return nil
}

// stop unregisters the gauges' callback (the storage is closing).
func (x *metrics) stop() {
	if x.reg != nil {
		x.reg.Unregister()
	}
}

func clampInt64(v uint64) int64 { return int64(min(v, 1<<63-1)) }

// addDone records an add answered with status, start being its arrival.
func (x *metrics) addDone(start time.Time, status proto.Status) {
	a := x.attrs.Load()
	x.addDuration.Record(context.Background(), time.Since(start).Seconds(), a.base)
	x.addCount.Add(context.Background(), 1, a.result(status))
}

// readDone records a read answered with status, start being its arrival.
func (x *metrics) readDone(start time.Time, status proto.Status) {
	a := x.attrs.Load()
	x.readDuration.Record(context.Background(), time.Since(start).Seconds(), a.base)
	x.readCount.Add(context.Background(), 1, a.result(status))
}

// result is the attribute set for a response status: anything but
// StatusOK (including no such entry) is an error.
func (a *metricAttrs) result(status proto.Status) metric.MeasurementOption {
	if status == proto.StatusOK {
		return a.ok
	}
	return a.failed
}

// JournalSynced implements storage.Observer.
func (x *metrics) JournalSynced(d time.Duration, records int) {
	a := x.attrs.Load()
	x.syncDuration.Record(context.Background(), d.Seconds(), a.base)
	x.batchSize.Record(context.Background(), int64(records), a.base)
}

// Flushed implements storage.Observer.
func (x *metrics) Flushed(d time.Duration) {
	x.flushDuration.Record(context.Background(), d.Seconds(), x.attrs.Load().base)
}

// Read implements storage.Observer.
func (x *metrics) Read(fromMemory bool) {
	if fromMemory {
		x.cacheHits.Add(context.Background(), 1, x.attrs.Load().base)
	} else {
		x.cacheMisses.Add(context.Background(), 1, x.attrs.Load().base)
	}
}
