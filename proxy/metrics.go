package proxy

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metric names (docs/observability.md): Pulsar's proxy metrics where it
// has them (pulsar_proxy_*), isobar.proxy.* for the rest.
const (
	MetricActiveConnections   = "pulsar.proxy.active.connections"
	MetricNewConnections      = "pulsar.proxy.new.connections"
	MetricRejectedConnections = "pulsar.proxy.rejected.connections"
	MetricBinaryBytes         = "pulsar.proxy.binary.bytes"
	MetricLookupRequests      = "pulsar.proxy.lookup.requests"
	MetricRejectedLookups     = "pulsar.proxy.rejected.lookup.requests"
	MetricHTTPRequests        = "isobar.proxy.http.requests"
)

// Attribute values.
var (
	toBroker = metric.WithAttributeSet(attribute.NewSet(attribute.String("isobar.direction", "to_broker")))
	toClient = metric.WithAttributeSet(attribute.NewSet(attribute.String("isobar.direction", "to_client")))
)

type metrics struct {
	activeConns   metric.Int64UpDownCounter
	newConns      metric.Int64Counter
	rejectedConns metric.Int64Counter
	bytes         metric.Int64Counter
	lookups       metric.Int64Counter
	rejectedLooks metric.Int64Counter
	httpRequests  metric.Int64Counter
}

func newMetrics(mp metric.MeterProvider) (*metrics, error) {
	m := mp.Meter("github.com/isobar-mq/isobar/proxy")
	var errs []error
	must := func(err error) { errs = append(errs, err) }
	mt := &metrics{}
	var err error
	mt.activeConns, err = m.Int64UpDownCounter(MetricActiveConnections, metric.WithUnit("{connection}"), metric.WithDescription("Client connections open."))
	must(err)
	mt.newConns, err = m.Int64Counter(MetricNewConnections, metric.WithUnit("{connection}"), metric.WithDescription("Client connections accepted."))
	must(err)
	mt.rejectedConns, err = m.Int64Counter(MetricRejectedConnections, metric.WithUnit("{connection}"), metric.WithDescription("Client connections closed at once: proxy.maxConnections were open."))
	must(err)
	mt.bytes, err = m.Int64Counter(MetricBinaryBytes, metric.WithUnit("By"), metric.WithDescription("Bytes forwarded on proxied binary-protocol connections, by direction."))
	must(err)
	mt.lookups, err = m.Int64Counter(MetricLookupRequests, metric.WithUnit("{request}"), metric.WithDescription("Lookup-connection requests forwarded to brokers, by command."))
	must(err)
	mt.rejectedLooks, err = m.Int64Counter(MetricRejectedLookups, metric.WithUnit("{request}"), metric.WithDescription("Lookup-connection requests refused with TooManyRequests: proxy.maxConcurrentLookupRequests were in progress."))
	must(err)
	mt.httpRequests, err = m.Int64Counter(MetricHTTPRequests, metric.WithUnit("{request}"), metric.WithDescription("HTTP requests forwarded to brokers, by the status answered."))
	must(err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Exported at zero from the start.
	ctx := context.Background()
	mt.bytes.Add(ctx, 0, toBroker)
	mt.bytes.Add(ctx, 0, toClient)
	mt.rejectedConns.Add(ctx, 0)
	mt.newConns.Add(ctx, 0)
	mt.activeConns.Add(ctx, 0)
	mt.rejectedLooks.Add(ctx, 0)
	return mt, nil
}

func (m *metrics) newConn(ctx context.Context)         { m.newConns.Add(ctx, 1) }
func (m *metrics) rejected(ctx context.Context)        { m.rejectedConns.Add(ctx, 1) }
func (m *metrics) active(ctx context.Context, d int64) { m.activeConns.Add(ctx, d) }
func (m *metrics) rejectedLookup(ctx context.Context)  { m.rejectedLooks.Add(ctx, 1) }
func (m *metrics) lookup(ctx context.Context, cmd string) {
	m.lookups.Add(ctx, 1, metric.WithAttributes(attribute.String("isobar.command", cmd)))
}
func (m *metrics) httpRequest(ctx context.Context, status int) {
	m.httpRequests.Add(ctx, 1, metric.WithAttributes(attribute.Int("http.response.status_code", status)))
}

// metricOption is a direction's attributes.
type metricOption = metric.MeasurementOption
