package broker

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/isobar-mq/isobar/wire"
)

// Metric names (docs/observability.md): Pulsar's OpenTelemetry names
// (PIP-264) for what Pulsar has, isobar.* for the rest.
const (
	MetricMsgIn         = "pulsar.broker.topic.message.incoming.count"
	MetricBytesIn       = "pulsar.broker.topic.message.incoming.size"
	MetricMsgOut        = "pulsar.broker.topic.message.outgoing.count"
	MetricBytesOut      = "pulsar.broker.topic.message.outgoing.size"
	MetricPublishTime   = "pulsar.broker.topic.publish.duration"
	MetricBacklog       = "pulsar.broker.topic.subscription.message.backlog"
	MetricStorage       = "pulsar.broker.topic.storage.size"
	MetricTopics        = "pulsar.broker.topic.count"
	MetricProducers     = "pulsar.broker.topic.producer.count"
	MetricConsumers     = "pulsar.broker.topic.consumer.count"
	MetricConnections   = "pulsar.broker.connection.count"
	MetricReplBacklog   = "isobar.replication.backlog"
	MetricReplBacklogB  = "isobar.replication.backlog.size"
	MetricReplLag       = "isobar.replication.backlog.age"
	MetricReplIn        = "isobar.replication.incoming.count"
	MetricReplStalled   = "isobar.replication.stalled"
	MetricReplConnected = "isobar.replication.connected"
	MetricReplLate      = "isobar.replication.late"
	MetricSyncFallback  = "isobar.replication.sync.fallback"
	// MetricPrimaryRefused counts client requests this broker refused
	// because it may not write for their namespace (failover.go).
	MetricPrimaryRefused = "isobar.primary.refused"
)

// metrics are the broker's instruments. With per-topic labels off (the
// default) series carry the namespace only, so their number does not
// grow with topics.
type metrics struct {
	perTopic bool
	msgIn    metric.Int64Counter
	bytesIn  metric.Int64Counter
	msgOut   metric.Int64Counter
	bytesOut metric.Int64Counter
	publish  metric.Float64Histogram
	replIn   metric.Int64Counter
	replLate metric.Int64Counter
	// syncFallback counts topics' falls from synchronous to asynchronous
	// replication (syncrepl.go).
	syncFallback metric.Int64Counter
	// primaryRefused counts requests refused by the primary gate
	// (failover.go, countRefused).
	primaryRefused metric.Int64Counter
	reg            metric.Registration
}

func (b *Broker) initMetrics() error {
	m := b.deps.MeterProvider.Meter("github.com/isobar-mq/isobar/broker")
	mt := &metrics{perTopic: b.cfg.TopicMetrics}
	var err error
	must := func(e error) {
		if err == nil {
			err = e
		}
	}
	var e error
	mt.msgIn, e = m.Int64Counter(MetricMsgIn, metric.WithUnit("{message}"), metric.WithDescription("Messages received from producers (replicated ones included)."))
	must(e)
	mt.bytesIn, e = m.Int64Counter(MetricBytesIn, metric.WithUnit("By"), metric.WithDescription("Bytes received from producers."))
	must(e)
	mt.msgOut, e = m.Int64Counter(MetricMsgOut, metric.WithUnit("{message}"), metric.WithDescription("Messages dispatched to consumers."))
	must(e)
	mt.bytesOut, e = m.Int64Counter(MetricBytesOut, metric.WithUnit("By"), metric.WithDescription("Bytes dispatched to consumers."))
	must(e)
	mt.publish, e = m.Float64Histogram(MetricPublishTime, metric.WithUnit("s"), metric.WithDescription("Time from a SEND's arrival to its receipt (storage included)."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5))
	must(e)
	mt.replIn, e = m.Int64Counter(MetricReplIn, metric.WithUnit("{message}"), metric.WithDescription("Messages stored from another region's replicator, by source region."))
	must(e)
	mt.syncFallback, e = m.Int64Counter(MetricSyncFallback, metric.WithUnit("{event}"), metric.WithDescription("Times a topic with synchronous replication acknowledged publishes the other regions had not confirmed within its fallbackAfterSeconds, and went on asynchronously until they caught up."))
	must(e)
	mt.primaryRefused, e = m.Int64Counter(MetricPrimaryRefused, metric.WithUnit("{request}"), metric.WithDescription("Client requests (lookup, producer, subscribe, publish, ack) of an active-standby namespace refused because this broker may not write for it: not the primary region, or cut off from the global store past its fence lease's hold; by operation."))
	must(e)
	mt.replLate, e = m.Int64Counter(MetricReplLate, metric.WithUnit("{message}"), metric.WithDescription("Messages of an active-standby namespace that arrived from a former primary after this region took over (its unreplicated tail after a failover), by source region; stored, marked with the property "+LateProperty+"."))
	must(e)
	backlog, e := m.Int64ObservableGauge(MetricBacklog, metric.WithUnit("{entry}"), metric.WithDescription("Entries not yet acknowledged, per subscription (per namespace without per-topic labels)."))
	must(e)
	storage, e := m.Int64ObservableGauge(MetricStorage, metric.WithUnit("By"), metric.WithDescription("Bytes stored for the loaded topics."))
	must(e)
	topics, e := m.Int64ObservableGauge(MetricTopics, metric.WithUnit("{topic}"), metric.WithDescription("Loaded topics."))
	must(e)
	producers, e := m.Int64ObservableGauge(MetricProducers, metric.WithUnit("{producer}"), metric.WithDescription("Connected producers."))
	must(e)
	consumers, e := m.Int64ObservableGauge(MetricConsumers, metric.WithUnit("{consumer}"), metric.WithDescription("Connected consumers."))
	must(e)
	conns, e := m.Int64ObservableGauge(MetricConnections, metric.WithUnit("{connection}"), metric.WithDescription("Open client connections."))
	must(e)
	replBacklog, e := m.Int64ObservableGauge(MetricReplBacklog, metric.WithUnit("{entry}"), metric.WithDescription("Entries not yet replicated, by local and remote region."))
	must(e)
	replBacklogB, e := m.Int64ObservableGauge(MetricReplBacklogB, metric.WithUnit("By"), metric.WithDescription("Bytes not yet replicated (estimated from the average entry size), by local and remote region."))
	must(e)
	replLag, e := m.Float64ObservableGauge(MetricReplLag, metric.WithUnit("s"), metric.WithDescription("Age of the oldest entry not yet replicated (max over topics), by remote region."))
	must(e)
	replStalled, e := m.Int64ObservableGauge(MetricReplStalled, metric.WithUnit("{topic}"), metric.WithDescription("Topics whose replication to a remote has a backlog and has not moved for the stall threshold."))
	must(e)
	replConnected, e := m.Int64ObservableGauge(MetricReplConnected, metric.WithUnit("{topic}"), metric.WithDescription("Topics with a replicator attached to their replication cursor, by remote region."))
	must(e)
	if err != nil {
		return err
	}
	local := attribute.String("isobar.cluster", b.cfg.Cluster)
	self := b.brokerAttr()
	mt.reg, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		var tot metricsTotals
		if mt.perTopic {
			tot = b.walkMetrics(ctx, true) // a series per topic: the walk is theirs
		} else {
			tot = b.indexedMetrics(ctx) // the topics that changed, not every one (metricsindex.go)
		}
		attrs := func(k metricKey) metric.MeasurementOption {
			kv := []attribute.KeyValue{local, self, attribute.String("pulsar.namespace", k.ns)}
			if k.topic != "" {
				kv = append(kv, attribute.String("pulsar.topic", k.topic))
			}
			if k.sub != "" {
				kv = append(kv, attribute.String("pulsar.subscription.name", k.sub))
			}
			return metric.WithAttributes(kv...)
		}
		for k, v := range tot.backlogs {
			o.ObserveInt64(backlog, v, attrs(k))
		}
		for k, v := range tot.storage {
			o.ObserveInt64(storage, v, attrs(k))
		}
		o.ObserveInt64(topics, tot.topics, metric.WithAttributes(local, self))
		o.ObserveInt64(producers, tot.producers, metric.WithAttributes(local, self))
		o.ObserveInt64(consumers, tot.consumers, metric.WithAttributes(local, self))
		b.mu.Lock()
		nConns := int64(len(b.conns))
		b.mu.Unlock()
		o.ObserveInt64(conns, nConns, metric.WithAttributes(local, self))
		for r, v := range tot.repl {
			ra := metric.WithAttributes(local, self, attribute.String("isobar.remote", r))
			o.ObserveInt64(replBacklog, v.backlog, ra)
			o.ObserveInt64(replBacklogB, v.bytes, ra)
			o.ObserveFloat64(replLag, v.lag, ra)
			o.ObserveInt64(replStalled, v.stalled, ra)
			o.ObserveInt64(replConnected, v.connected, ra)
		}
		return nil
	}, backlog, storage, topics, producers, consumers, conns, replBacklog, replBacklogB, replLag, replStalled, replConnected)
	if err != nil {
		return err
	}
	b.metrics = mt
	return nil
}

// brokerAttr names the broker in its series (several brokers of a region
// share one registry): its Pulsar service address.
func (b *Broker) brokerAttr() attribute.KeyValue {
	return attribute.String("isobar.broker", strings.TrimPrefix(b.cfg.ServiceURL, "pulsar://"))
}

// publishTime is an entry's publish time; zero when it does not decode.
func publishTime(entry []byte) time.Time {
	meta, _, err := wire.DecodeEntry(entry)
	if err != nil || meta.PublishTime == nil {
		return time.Time{}
	}
	return time.UnixMilli(int64(meta.GetPublishTime()))
}

// topicAttrs are the attributes of a topic's counters.
func (b *Broker) topicAttrs(t *Topic) metric.MeasurementOption {
	ns := t.name.NamespaceName()
	if !b.metrics.perTopic {
		// One attribute set per namespace, shared by its topics (a
		// million idle topics do not each carry a copy).
		if a, ok := b.nsAttrs.Load(ns); ok {
			return a.(metric.MeasurementOption)
		}
	}
	kv := []attribute.KeyValue{attribute.String("isobar.cluster", b.cfg.Cluster), b.brokerAttr(), attribute.String("pulsar.namespace", ns)}
	if b.metrics.perTopic {
		kv = append(kv, attribute.String("pulsar.topic", t.name.String()))
		return metric.WithAttributes(kv...)
	}
	a, _ := b.nsAttrs.LoadOrStore(ns, metric.WithAttributes(kv...))
	return a.(metric.MeasurementOption)
}

// recordIn counts messages received and the publish time of their SEND.
func (b *Broker) recordIn(t *Topic, msgs, bytes int64, since time.Time, replicatedFrom string) {
	ctx := context.Background()
	a := t.attrs
	b.metrics.msgIn.Add(ctx, msgs, a)
	b.metrics.bytesIn.Add(ctx, bytes, a)
	took := b.deps.Now().Sub(since)
	b.metrics.publish.Record(ctx, took.Seconds(), a)
	b.backlog.observe(took)
	if replicatedFrom != "" {
		b.metrics.replIn.Add(ctx, msgs, metric.WithAttributes(attribute.String("isobar.cluster", b.cfg.Cluster), b.brokerAttr(), attribute.String("isobar.source", replicatedFrom)))
	}
}

// recordOut counts messages dispatched.
func (b *Broker) recordOut(t *Topic, msgs, bytes int64) {
	ctx := context.Background()
	t.countOut(msgs, bytes)
	b.metrics.msgOut.Add(ctx, msgs, t.attrs)
	b.metrics.bytesOut.Add(ctx, bytes, t.attrs)
}
