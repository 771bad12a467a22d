package globalconfig

import (
	"context"

	"go.opentelemetry.io/otel/metric"
)

// Metric names (docs/observability.md).
const (
	MetricCacheAge      = "isobar.globalconfig.cache.age"
	MetricSynced        = "isobar.globalconfig.synced"
	MetricWatchRestarts = "isobar.globalconfig.watch.restarts"
	MetricResyncs       = "isobar.globalconfig.resyncs"
	MetricRevision      = "isobar.globalconfig.revision"
)

// registerMetrics observes the cache's age, sync state and counters.
func (c *Cache) registerMetrics(mp metric.MeterProvider) (metric.Registration, error) {
	m := mp.Meter("github.com/isobar-mq/isobar/globalconfig")
	age, err1 := m.Float64ObservableGauge(MetricCacheAge, metric.WithUnit("s"), metric.WithDescription("Time since the cache last confirmed it matches the global store; grows while the store is unreachable."))
	synced, err2 := m.Int64ObservableGauge(MetricSynced, metric.WithDescription("1 while the cache's watch is up and recently confirmed, else 0."))
	restarts, err3 := m.Int64ObservableCounter(MetricWatchRestarts, metric.WithUnit("{restart}"), metric.WithDescription("Watches that ended and were replaced by a re-list and a new watch."))
	resyncs, err4 := m.Int64ObservableCounter(MetricResyncs, metric.WithUnit("{resync}"), metric.WithDescription("Re-lists swapped in after the first load."))
	rev, err5 := m.Int64ObservableGauge(MetricRevision, metric.WithDescription("The global store revision the cache reflects."))
	for _, err := range []error{err1, err2, err3, err4, err5} {
		if err != nil {
			return nil, err
		}
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveFloat64(age, c.Age().Seconds())
		s := int64(0)
		if c.Synced() {
			s = 1
		}
		o.ObserveInt64(synced, s)
		st := c.Stats()
		o.ObserveInt64(restarts, st.WatchRestarts)
		o.ObserveInt64(resyncs, st.Resyncs)
		o.ObserveInt64(rev, c.Rev())
		return nil
	}, age, synced, restarts, resyncs, rev)
}
