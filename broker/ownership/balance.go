package ownership

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// Defaults of the load balancer, Pulsar's: loadBalancerSheddingIntervalMinutes
// 1, loadBalancerSheddingGracePeriodMinutes 30,
// loadBalancerNamespaceBundleMaxTopics 1000, MaxMsgRate 30000,
// MaxBandwidthMbytes 100, loadBalancerNamespaceMaximumBundles 128 and
// loadBalancerMaxNumberOfBundlesToSplitPerCycle 10.
const (
	DefaultSheddingInterval        = time.Minute
	DefaultSheddingGracePeriod     = 30 * time.Minute
	DefaultBundleMaxTopics         = 1000
	DefaultBundleMaxMsgRate        = 30000
	DefaultBundleMaxBandwidth      = 100 // MB/s
	DefaultNamespaceMaximumBundles = 128
	MaxSplitsPerRound              = 10
)

// The operations of an Order.
const (
	OrderUnload = "unload"
	OrderSplit  = "split"
)

// Order is what the region's load manager (on the leader broker) asks of
// a bundle's owner, stored as JSON under
// /isobar/<region>/loadbalance/orders/<tenant>/<namespace>/<bundle>
// under the leader's lease (a leader that dies takes its orders along).
// The owner carries it out: OrderUnload unloads the bundle, and the
// lookups that place it afterwards choose Destination (or, when that
// broker is gone, any broker but the one that shed it); OrderSplit
// splits it in halves. The owner deletes a split order once done; an
// unload order is deleted by the broker that acquires the bundle, or by
// the leader once older than the grace period.
type Order struct {
	Op          string    `json:"op"`
	Broker      string    `json:"broker"`
	Destination string    `json:"destination,omitempty"`
	Issued      time.Time `json:"issued"`
}

// OrdersPrefix is the prefix of the region's load balancing orders.
func OrdersPrefix(region string) string {
	return metastore.RegionPrefix(region) + "loadbalance/orders/"
}

// ParseBundleKey reads "tenant/namespace/0x…_0x…" (a load report's bundle
// name) into the namespace and the bundle.
func ParseBundleKey(k string) (string, topic.Bundle, error) {
	i := strings.LastIndexByte(k, '/')
	if i < 0 {
		return "", topic.Bundle{}, fmt.Errorf("%w: %q is not tenant/namespace/range", ErrInvalidBundle, k)
	}
	ns, rng := k[:i], k[i+1:]
	lo, hi, ok := strings.Cut(rng, "_")
	l, err1 := strconv.ParseUint(lo, 0, 32)
	h, err2 := strconv.ParseUint(hi, 0, 32)
	if !ok || err1 != nil || err2 != nil || h <= l {
		return "", topic.Bundle{}, fmt.Errorf("%w: %q is not tenant/namespace/range", ErrInvalidBundle, k)
	}
	b := topic.Bundle{Lo: uint32(l), Hi: uint32(h)}
	if _, err := bundleKey(ns, b); err != nil {
		return "", topic.Bundle{}, err
	}
	return ns, b, nil
}

// SplitConfig says which bundles are hot enough to split (Pulsar's
// loadBalancerNamespaceBundleMax* settings). A zero limit means its
// default; a bundle is split when it exceeds any of them.
type SplitConfig struct {
	// Enabled turns automatic splits on
	// (loadBalancerAutoBundleSplitEnabled).
	Enabled bool
	// MaxTopics is the most topics a bundle holds before it is split.
	MaxTopics int64
	// MaxMsgRate is the most messages/s, in and out, a bundle carries.
	MaxMsgRate float64
	// MaxBandwidthMbytes is the most MB/s, in and out, a bundle carries.
	MaxBandwidthMbytes float64
	// MaxBundles is the most bundles a namespace is split into
	// (loadBalancerNamespaceMaximumBundles); zero means
	// DefaultNamespaceMaximumBundles.
	MaxBundles int
}

func (c SplitConfig) withDefaults() SplitConfig {
	if c.MaxTopics == 0 {
		c.MaxTopics = DefaultBundleMaxTopics
	}
	if c.MaxMsgRate == 0 {
		c.MaxMsgRate = DefaultBundleMaxMsgRate
	}
	if c.MaxBandwidthMbytes == 0 {
		c.MaxBandwidthMbytes = DefaultBundleMaxBandwidth
	}
	if c.MaxBundles == 0 {
		c.MaxBundles = DefaultNamespaceMaximumBundles
	}
	return c
}

// BalanceConfig configures a Balancer.
type BalanceConfig struct {
	Shed  ShedConfig
	Split SplitConfig
	// Grace is how long a bundle that was moved or split is left where it
	// is (Pulsar's loadBalancerSheddingGracePeriodMinutes); zero means
	// DefaultSheddingGracePeriod.
	Grace time.Duration
	// Settle is the least time after a round that gave orders before the
	// next decides anything, and the brokers it involved must have
	// published a report sampled after it (their earlier reports count
	// the moved load where it was); two load report intervals. Zero: no
	// wait.
	Settle time.Duration
}

// Validate reports every problem at once.
func (c BalanceConfig) Validate() error {
	var errs []error
	if c.Shed.Threshold < 0 || math.IsNaN(c.Shed.Threshold) {
		errs = append(errs, fmt.Errorf("loadBalancerBrokerThresholdShedderPercentage: %v; want 0 (default 10) or more", c.Shed.Threshold))
	}
	if c.Shed.MinGap < 0 || math.IsNaN(c.Shed.MinGap) {
		errs = append(errs, fmt.Errorf("loadBalancerSheddingMinLoadGap: %v; want 0 (default 1) or more", c.Shed.MinGap))
	}
	if c.Grace < 0 {
		errs = append(errs, fmt.Errorf("loadBalancerSheddingGracePeriod: %v is negative", c.Grace))
	}
	if c.Split.MaxTopics < 0 {
		errs = append(errs, fmt.Errorf("loadBalancerNamespaceBundleMaxTopics: %d is negative", c.Split.MaxTopics))
	}
	if c.Split.MaxMsgRate < 0 || math.IsNaN(c.Split.MaxMsgRate) {
		errs = append(errs, fmt.Errorf("loadBalancerNamespaceBundleMaxMsgRate: %v is negative", c.Split.MaxMsgRate))
	}
	if c.Split.MaxBandwidthMbytes < 0 || math.IsNaN(c.Split.MaxBandwidthMbytes) {
		errs = append(errs, fmt.Errorf("loadBalancerNamespaceBundleMaxBandwidthMbytes: %v is negative", c.Split.MaxBandwidthMbytes))
	}
	if c.Split.MaxBundles < 0 || c.Split.MaxBundles > topic.MaxBundles {
		errs = append(errs, fmt.Errorf("loadBalancerNamespaceMaximumBundles (limits.maxBundlesPerNamespace): %d is not in [0, %d]", c.Split.MaxBundles, topic.MaxBundles))
	}
	return errors.Join(errs...)
}

// Planned is one order a round of the Balancer decided, for bundle
// Bundle ("tenant/namespace/0x…_0x…").
type Planned struct {
	Bundle string
	Order  Order
}

// Balancer is the load manager's decision core: from the brokers'
// registrations it decides, round by round, which bundles to split and
// which to move where. It remembers the bundles it moved (the grace)
// and the brokers a round involved (the settling); it does no I/O and
// reads no clock. It is not safe for concurrent use: the load manager's
// loop owns it.
type Balancer struct {
	cfg BalanceConfig
	// moved is when each bundle was last moved or split.
	moved map[string]time.Time
	// actedAt and involved: the last round that gave orders, and the
	// brokers whose bundles it changed.
	actedAt  time.Time
	involved map[string]bool
}

// NewBalancer returns a Balancer with cfg's defaults filled in.
func NewBalancer(cfg BalanceConfig) *Balancer {
	if cfg.Grace == 0 {
		cfg.Grace = DefaultSheddingGracePeriod
	}
	cfg.Split = cfg.Split.withDefaults()
	return &Balancer{cfg: cfg, moved: map[string]time.Time{}}
}

// InGrace reports whether bundle was moved or split less than the grace
// period before now.
func (b *Balancer) InGrace(bundle string, now time.Time) bool {
	t, ok := b.moved[bundle]
	return ok && now.Sub(t) < b.cfg.Grace
}

// settled reports whether the load has settled since the last acting
// round: Settle has passed, and every broker that round involved (and
// still registered) has published a report sampled after it. A broker
// publishes at once when its set of bundles changes, and again when a
// figure moves by more than the report threshold, so by then its report
// counts the moved bundles where they are. The wait ends anyway after
// 10×Settle or the grace period, whichever is first: a broker whose order
// failed may publish nothing new for a long time (an unchanged report is
// published every LoadReportConfig.MaxInterval only).
func (b *Balancer) settled(brokers map[string]*LoadReport, now time.Time) bool {
	if b.actedAt.IsZero() || now.Sub(b.actedAt) >= min(b.cfg.Grace, 10*b.cfg.Settle) {
		return true
	}
	if now.Sub(b.actedAt) < b.cfg.Settle {
		return false
	}
	for id := range b.involved {
		if r, ok := brokers[id]; ok && r.LastUpdate <= b.actedAt.UnixMilli() {
			return false
		}
	}
	return true
}

// Plan decides a round at now from the region's registrations: first the
// hot bundles to split (at most MaxSplitsPerRound, none in grace); when
// there are none, the bundles to shed (Shed, skipping those in grace),
// each given the destination that is least loaded once the bundles
// before it are counted where they go, never the broker shedding it.
// Draining brokers are left out; a broker without a report counts as
// idle. Nothing is decided while the brokers of the last acting round
// have not reported since (their reports would still show the moved
// load where it was). Plan records the bundles it orders to move.
func (b *Balancer) Plan(brokers []BrokerInfo, now time.Time) []Planned {
	reports := map[string]*LoadReport{}
	for _, info := range brokers {
		if info.Draining {
			continue
		}
		r := info.Report
		if r == nil {
			r = &LoadReport{}
		}
		reports[info.ID] = r
	}
	for k, t := range b.moved {
		if now.Sub(t) >= b.cfg.Grace {
			delete(b.moved, k)
		}
	}
	if !b.settled(reports, now) {
		return nil
	}
	out := b.planSplits(reports, now)
	if len(out) == 0 {
		out = b.planShed(reports, now)
	}
	if len(out) > 0 {
		b.actedAt, b.involved = now, map[string]bool{}
		for _, p := range out {
			b.moved[p.Bundle] = now
			b.involved[p.Order.Broker] = true
			if p.Order.Destination != "" {
				b.involved[p.Order.Destination] = true
			}
		}
	}
	return out
}

func (b *Balancer) planSplits(reports map[string]*LoadReport, now time.Time) []Planned {
	c := b.cfg.Split
	if !c.Enabled {
		return nil
	}
	perNS := map[string]int{}
	type hot struct {
		broker, bundle, ns string
	}
	var hots []hot
	for id, r := range reports {
		for name, bl := range r.LastStats {
			ns, _, err := ParseBundleKey(name)
			if err != nil {
				continue
			}
			perNS[ns]++
			if bl.Topics < 2 || b.InGrace(name, now) {
				continue
			}
			if bl.Topics > c.MaxTopics || bl.MsgRateIn+bl.MsgRateOut > c.MaxMsgRate ||
				(bl.MsgThroughputIn+bl.MsgThroughputOut)/1e6 > c.MaxBandwidthMbytes {
				hots = append(hots, hot{id, name, ns})
			}
		}
	}
	sort.Slice(hots, func(i, j int) bool { return hots[i].bundle < hots[j].bundle })
	var out []Planned
	for _, h := range hots {
		if len(out) == MaxSplitsPerRound {
			break
		}
		if perNS[h.ns] >= c.MaxBundles {
			continue
		}
		perNS[h.ns]++
		out = append(out, Planned{Bundle: h.bundle, Order: Order{Op: OrderSplit, Broker: h.broker, Issued: now}})
	}
	return out
}

func (b *Balancer) planShed(reports map[string]*LoadReport, now time.Time) []Planned {
	unloads := Shed(reports, b.cfg.Shed, func(bundle string) bool { return b.InGrace(bundle, now) })
	if len(unloads) == 0 {
		return nil
	}
	ids := make([]string, 0, len(reports))
	proj := map[string]float64{}
	for id, r := range reports {
		ids = append(ids, id)
		proj[id] = r.Score()
	}
	sort.Strings(ids)
	var out []Planned
	for _, u := range unloads {
		w := reports[u.Broker].LastStats[u.Bundle].weight()
		dest := ""
		for _, id := range ids {
			if id != u.Broker && (dest == "" || proj[id] < proj[dest]) {
				dest = id
			}
		}
		if dest == "" {
			continue
		}
		proj[dest] += w
		proj[u.Broker] -= w
		out = append(out, Planned{Bundle: u.Bundle, Order: Order{Op: OrderUnload, Broker: u.Broker, Destination: dest, Issued: now}})
	}
	return out
}

// Destination is where an unowned bundle under order o goes, given the
// candidates placement would choose from: o's destination when it is one
// of them; otherwise the candidates without the broker that shed the
// bundle (all of them when it is the only one). For no order, or one
// that is not an unload, the candidates are returned as they are.
func Destination(o *Order, cands []Candidate) (string, []Candidate) {
	if o == nil || o.Op != OrderUnload {
		return "", cands
	}
	for _, c := range cands {
		if c.ID == o.Destination && c.ID != o.Broker {
			return c.ID, cands
		}
	}
	rest := make([]Candidate, 0, len(cands))
	for _, c := range cands {
		if c.ID != o.Broker {
			rest = append(rest, c)
		}
	}
	if len(rest) == 0 {
		return "", cands
	}
	return "", rest
}
