package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/isobar-mq/isobar/broker/ownership"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// Metric names of the load manager (docs/observability.md).
const (
	MetricBundlesUnloaded = "isobar.loadbalance.bundles_unloaded"
	MetricBundlesSplit    = "isobar.loadbalance.bundles_split"
)

// LoadManagerConfig configures a LoadManager.
type LoadManagerConfig struct {
	// Interval is how often the leader decides a round
	// (ownership.Balancer.Plan); zero means
	// ownership.DefaultSheddingInterval.
	Interval time.Duration
	// Balance is the decision core's configuration.
	Balance ownership.BalanceConfig
	// Logger; nil discards.
	Logger *slog.Logger
	// MeterProvider for the counters; nil means none.
	MeterProvider metric.MeterProvider
}

// LoadManager is the region's load manager as one broker runs it. Every
// broker runs one: it carries out the orders addressed to it (unload or
// split one of its bundles), and while its broker is the region's leader
// (ownership.Leader, the broker the auditor runs on) it also decides, every
// Interval, from the brokers' load reports, which bundles to split and
// which to move where (ownership.Balancer), and writes those orders to
// the metadata store (ownership.Order). The I/O is here; the decisions
// are the Balancer's.
type LoadManager struct {
	cfg    LoadManagerConfig
	b      *Broker
	p      *OwnershipPlacement
	logger *slog.Logger
	bal    *ownership.Balancer
	// wasLeader: the last round found this broker the leader.
	wasLeader bool
	// done is the revision of each order carried out, by bundle.
	done     map[string]int64
	unloaded metric.Int64Counter
	split    metric.Int64Counter
}

// NewLoadManager returns the load manager of broker b, whose bundles p
// places.
func NewLoadManager(b *Broker, p *OwnershipPlacement, cfg LoadManagerConfig) (*LoadManager, error) {
	if err := cfg.Balance.Validate(); err != nil {
		return nil, err
	}
	if cfg.Interval == 0 {
		cfg.Interval = ownership.DefaultSheddingInterval
	}
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("loadBalancerSheddingInterval: %v is negative", cfg.Interval)
	}
	lm := &LoadManager{cfg: cfg, b: b, p: p, logger: cfg.Logger, done: map[string]int64{}}
	if lm.logger == nil {
		lm.logger = slog.New(slog.DiscardHandler)
	}
	mp := cfg.MeterProvider
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/isobar-mq/isobar/broker")
	var err error
	if lm.unloaded, err = m.Int64Counter(MetricBundlesUnloaded, metric.WithUnit("{bundle}"),
		metric.WithDescription("Bundles this broker unloaded on the load manager's order (shed to a less loaded broker).")); err != nil {
		return nil, err
	}
	if lm.split, err = m.Int64Counter(MetricBundlesSplit, metric.WithUnit("{bundle}"),
		metric.WithDescription("Bundles this broker split on the load manager's order (hot by topics, messages or bytes).")); err != nil {
		return nil, err
	}
	return lm, nil
}

// Run carries out orders and, on the leader, decides rounds until ctx
// ends.
func (lm *LoadManager) Run(ctx context.Context) {
	reg := lm.p.Registry
	tick := time.NewTicker(lm.cfg.Interval)
	defer tick.Stop()
	var orders <-chan metastore.Event
	relist := func() {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, rev, err := reg.Orders(lctx)
		if err != nil {
			if ctx.Err() == nil {
				lm.logger.Warn("load manager: listing orders failed; retried at the next round", "err", err)
			}
			orders = nil
			return
		}
		for _, so := range l {
			lm.carryOut(ctx, so)
		}
		orders = reg.WatchOrders(ctx, rev+1)
	}
	relist()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-orders:
			switch {
			case !ok:
				orders = nil
			case ev.Reset:
				relist()
			case ev.Deleted:
				delete(lm.done, strings.TrimPrefix(ev.Key, ownership.OrdersPrefix(lm.b.cfg.Region)))
			default:
				if so, ok := reg.ParseOrderEvent(ev); ok {
					lm.carryOut(ctx, so)
				}
			}
		case <-tick.C:
			if orders == nil {
				relist()
			}
			lm.round(ctx)
		}
	}
}

// round is one round of the leader: decide and write the orders, and
// delete the orders older than the grace period. A broker that is not
// the leader does nothing (and forgets the decisions of an earlier
// leadership).
func (lm *LoadManager) round(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, lm.cfg.Interval+10*time.Second)
	defer cancel()
	reg := lm.p.Registry
	infos, err := reg.Brokers(ctx)
	if err != nil {
		lm.logger.Warn("load manager: reading the brokers failed", "err", err)
		return
	}
	l, ok := ownership.Leader(infos)
	if !ok || l.ID != reg.Self().ID {
		lm.wasLeader = false
		return
	}
	if !lm.wasLeader {
		lm.bal, lm.wasLeader = ownership.NewBalancer(lm.cfg.Balance), true
		lm.logger.Info("load manager: this broker is the region's leader; balancing")
	}
	now := lm.b.deps.Now()
	lm.expireOrders(ctx, now)
	for _, pl := range lm.bal.Plan(infos, now) {
		ns, b, err := ownership.ParseBundleKey(pl.Bundle)
		if err != nil {
			continue
		}
		if err := reg.IssueOrder(ctx, ns, b, pl.Order); err != nil {
			lm.logger.Warn("load manager: order failed", "op", pl.Order.Op, "bundle", pl.Bundle, "err", err)
			continue
		}
		lm.logger.Info("load manager: order", "op", pl.Order.Op, "bundle", pl.Bundle, "broker", pl.Order.Broker, "destination", pl.Order.Destination)
	}
}

// expireOrders deletes the orders issued more than the grace period ago
// (an unload order whose bundle nobody looked up since, a split order
// whose owner died).
func (lm *LoadManager) expireOrders(ctx context.Context, now time.Time) {
	grace := lm.cfg.Balance.Grace
	if grace == 0 {
		grace = ownership.DefaultSheddingGracePeriod
	}
	l, _, err := lm.p.Registry.Orders(ctx)
	if err != nil {
		return
	}
	for _, so := range l {
		if now.Sub(so.Order.Issued) > grace {
			_ = lm.p.Registry.DeleteOrder(ctx, so)
		}
	}
}

// carryOut carries out an order addressed to this broker, once per
// order.
func (lm *LoadManager) carryOut(ctx context.Context, so ownership.StoredOrder) {
	reg := lm.p.Registry
	if so.Order.Broker != reg.Self().ID {
		return
	}
	key := so.Namespace + "/" + so.Bundle.String()
	if lm.done[key] >= so.Rev {
		return
	}
	lm.done[key] = so.Rev
	if !reg.Owns(so.Namespace, so.Bundle) {
		if so.Order.Op == ownership.OrderSplit {
			_ = reg.DeleteOrder(ctx, so)
		}
		return // moved or split meanwhile
	}
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	switch so.Order.Op {
	case ownership.OrderUnload:
		if err := (adminTopics{lm.b}).UnloadBundle(octx, so.Namespace, so.Bundle); err != nil {
			lm.logger.Warn("load manager: unload failed", "bundle", key, "err", err)
			return
		}
		lm.unloaded.Add(ctx, 1)
		lm.logger.Info("load manager: bundle unloaded", "bundle", key, "destination", so.Order.Destination)
	case ownership.OrderSplit:
		defer func() { _ = reg.DeleteOrder(ctx, so) }()
		lo, hi, err := topic.SplitRange(so.Bundle)
		if err == nil {
			err = lm.p.SplitBundle(octx, so.Namespace, so.Bundle, lo, hi)
		}
		if err != nil {
			if !errors.Is(err, topic.ErrUnsplittable) {
				lm.logger.Warn("load manager: split failed", "bundle", key, "err", err)
			}
			return
		}
		lm.split.Add(ctx, 1)
		lm.logger.Info("load manager: bundle split", "bundle", key, "into", lo.String()+" "+hi.String())
	default:
		lm.logger.Warn("load manager: unknown order", "op", so.Order.Op, "bundle", key)
	}
}
