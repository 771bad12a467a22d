package broker

import (
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/broker/dispatch"
	"github.com/isobar-mq/isobar/broker/ratelimit"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Rates are a topic's rate limits (Pulsar's publish, dispatch,
// subscription dispatch, replicator dispatch and subscribe rates): its
// own policies' over its namespace's. The zero Rates limit nothing.
type Rates struct {
	// Publish bounds what producers publish to the topic (replicated
	// messages are exempt: they were accepted in their region).
	Publish ratelimit.Rate
	// Dispatch bounds what the topic's subscriptions dispatch, together;
	// SubscriptionDispatch what each one does; ReplicatorDispatch what
	// each replication cursor (one per remote region) does.
	Dispatch, SubscriptionDispatch, ReplicatorDispatch ratelimit.Rate
	// DispatchRelative, SubscriptionDispatchRelative and
	// ReplicatorDispatchRelative add the topic's publish rate to the
	// dispatch rate of the same name (Pulsar's relativeToPublishRate).
	DispatchRelative, SubscriptionDispatchRelative, ReplicatorDispatchRelative bool
	// SubscribePerConsumer bounds the SUBSCRIBE commands of one consumer
	// (its client's host and consumer name) per SubscribePeriod; 0 is
	// none.
	SubscribePerConsumer int
	SubscribePeriod      time.Duration
}

// DispatchRateOf converts a stored dispatch rate (nil: none).
func DispatchRateOf(d *policy.DispatchRate) ratelimit.Rate {
	if d == nil {
		return ratelimit.Rate{}
	}
	return ratelimit.Rate{Msgs: d.DispatchThrottlingRateInMsg, Bytes: d.DispatchThrottlingRateInByte, Period: time.Duration(d.RatePeriodInSecond) * time.Second}
}

// PublishRateOf converts a stored publish rate (nil: none); Pulsar's
// publish rates are per second.
func PublishRateOf(p *policy.PublishRate) ratelimit.Rate {
	if p == nil {
		return ratelimit.Rate{}
	}
	return ratelimit.Rate{Msgs: p.PublishThrottlingRateInMsg, Bytes: p.PublishThrottlingRateInByte, Period: time.Second}
}

// withSubscribe sets the subscribe rate (nil: left as it is).
func (r Rates) withSubscribe(s *policy.SubscribeRate) Rates {
	if s != nil {
		r.SubscribePerConsumer = max(0, s.SubscribeThrottlingRatePerConsumer)
		r.SubscribePeriod = time.Duration(s.RatePeriodInSecond) * time.Second
		if r.SubscribePeriod <= 0 {
			r.SubscribePeriod = 30 * time.Second // Pulsar's default period
		}
	}
	return r
}

// withTopic returns r with the rates the topic's own policies set
// replacing the namespace's.
func (r Rates) withTopic(tp policy.TopicPolicies) Rates {
	if tp.PublishRate != nil {
		r.Publish = PublishRateOf(tp.PublishRate)
	}
	r.setDispatch(tp.DispatchRate, tp.SubscriptionDispatchRate, tp.ReplicatorDispatchRate)
	return r.withSubscribe(tp.SubscribeRate)
}

// setDispatch sets the three dispatch rates that are not nil.
func (r *Rates) setDispatch(topic, sub, repl *policy.DispatchRate) {
	for _, x := range []struct {
		d        *policy.DispatchRate
		dst      *ratelimit.Rate
		relative *bool
	}{
		{topic, &r.Dispatch, &r.DispatchRelative},
		{sub, &r.SubscriptionDispatch, &r.SubscriptionDispatchRelative},
		{repl, &r.ReplicatorDispatch, &r.ReplicatorDispatchRelative},
	} {
		if x.d != nil {
			*x.dst, *x.relative = DispatchRateOf(x.d), x.d.RelativeToPublishRate
		}
	}
}

// relativeTo returns rate, when relative, with the publish rate (msgs
// and bytes per second) added to each budget it sets, for its period.
func relativeTo(rate ratelimit.Rate, relative bool, msgs, bytes float64) ratelimit.Rate {
	if !relative || rate.Unlimited() {
		return rate
	}
	per := rate.Period.Seconds()
	if per <= 0 {
		per = 1
	}
	if rate.Msgs > 0 {
		rate.Msgs += int64(msgs * per)
	}
	if rate.Bytes > 0 {
		rate.Bytes += int64(bytes * per)
	}
	return rate
}

// topicRates are a loaded topic's limiters.
type topicRates struct {
	mu sync.Mutex
	r  Rates
	// subscribes counts SUBSCRIBE commands per consumer in its current
	// window.
	subscribes map[string]*subscribeWindow

	publish, dispatch ratelimit.Limiter

	// The topic's publish rate, for the relative dispatch rates: its
	// message and byte counters when last sampled, and the rates since
	// the sample before.
	pubAt                time.Time
	pubMsgs, pubBytes    int64
	pubMsgRate, pubBRate float64
}

type subscribeWindow struct {
	start time.Time
	n     int
}

// set applies new rates.
func (tr *topicRates) set(r Rates) {
	tr.mu.Lock()
	tr.r = r
	pm, pb := tr.pubMsgRate, tr.pubBRate
	tr.mu.Unlock()
	tr.publish.SetRate(r.Publish)
	tr.dispatch.SetRate(relativeTo(r.Dispatch, r.DispatchRelative, pm, pb))
}

// limits returns t's rates and limiters, made on first use: a topic
// without rates of its own (most of a million idle ones) has none.
func (t *Topic) limits() *topicRates {
	if tr := t.rl.Load(); tr != nil {
		return tr
	}
	t.rl.CompareAndSwap(nil, &topicRates{})
	return t.rl.Load()
}

// setRates applies new rates (none: nothing to do until there are some).
func (t *Topic) setRates(r Rates) {
	if r == (Rates{}) && t.rl.Load() == nil {
		return
	}
	t.limits().set(r)
}

// rates returns t's rates and its publish rate in messages and bytes per
// second, sampled at most once a second (all zero while it has none).
func (t *Topic) rates() (r Rates, pubMsgs, pubBytes float64) {
	tr := t.rl.Load()
	if tr == nil {
		return Rates{}, 0, 0
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if now := time.Now(); tr.pubAt.IsZero() || now.Sub(tr.pubAt) >= time.Second {
		c := t.counters()
		m, b := c.msgIn, c.bytesIn
		if !tr.pubAt.IsZero() {
			el := now.Sub(tr.pubAt).Seconds()
			tr.pubMsgRate, tr.pubBRate = float64(m-tr.pubMsgs)/el, float64(b-tr.pubBytes)/el
		}
		tr.pubAt, tr.pubMsgs, tr.pubBytes = now, m, b
	}
	return tr.r, tr.pubMsgRate, tr.pubBRate
}

// ErrSubscribeRate refuses a SUBSCRIBE beyond the topic's subscribe rate;
// the client retries it (ServiceNotReady, as in Pulsar).
var ErrSubscribeRate = errkind.Sentinel(errkind.ErrServiceNotReady, "Subscribe limited by subscribe rate limit per consumer")

// maxSubscribeWindows bounds the consumers a topic remembers before it
// forgets those whose window has passed.
const maxSubscribeWindows = 256

// checkSubscribe counts a SUBSCRIBE of the consumer key at now and
// refuses it when the consumer already subscribed as often as the rate
// allows in the current period.
func (tr *topicRates) checkSubscribe(key string, now time.Time) error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	limit, period := tr.r.SubscribePerConsumer, tr.r.SubscribePeriod
	if limit <= 0 {
		tr.subscribes = nil
		return nil
	}
	if tr.subscribes == nil {
		tr.subscribes = map[string]*subscribeWindow{}
	}
	if len(tr.subscribes) >= maxSubscribeWindows {
		for k, w := range tr.subscribes {
			if now.Sub(w.start) >= period {
				delete(tr.subscribes, k)
			}
		}
	}
	w := tr.subscribes[key]
	if w == nil || now.Sub(w.start) >= period {
		w = &subscribeWindow{start: now}
		tr.subscribes[key] = w
	}
	if w.n >= limit {
		return fmt.Errorf("%w (%d per %v)", ErrSubscribeRate, limit, period)
	}
	w.n++
	return nil
}

// checkSubscribeRate applies t's subscribe rate to a SUBSCRIBE, by
// consumer: its client's host (not port: a reconnection comes from
// another) and consumer name (a client names its consumers at random
// unless told a name). The broker's own subscriptions (replication
// cursors) are exempt.
func (c *conn) checkSubscribeRate(t *Topic, cmd *pb.CommandSubscribe) error {
	if strings.HasPrefix(cmd.GetSubscription(), ReservedPrefix) {
		return nil
	}
	host := c.nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	tr := t.rl.Load()
	if tr == nil {
		return nil // no subscribe rate
	}
	return tr.checkSubscribe(host+"|"+cmd.GetConsumerName(), c.b.deps.Now())
}

// throttlePublish charges what a producer just sent to its topic's
// publish rate and, when that is spent, waits until the next budget
// before the connection reads its next frame: as Pulsar stops reading a
// throttled producer's connection, the client's sends queue up at its
// end. Replicator producers are exempt.
func (c *conn) throttlePublish(p *producer, msgs, bytes int) {
	if p.replFrom != "" {
		return
	}
	if tr := p.t.rl.Load(); tr != nil {
		_ = tr.publish.Wait(c.ctx, int64(msgs), int64(bytes))
	}
}

// dispatchLimiters are the limiters a subscription's dispatch is charged
// to: a replication cursor's own at the replicator rate, a user
// subscription's own and its topic's; the broker's other cursors have
// none.
func (s *subscription) dispatchLimiters() []*ratelimit.Limiter {
	r, pm, pb := s.t.rates()
	switch {
	case strings.HasPrefix(s.name, replication.Prefix):
		s.rl.lim.SetRate(relativeTo(r.ReplicatorDispatch, r.ReplicatorDispatchRelative, pm, pb))
		return []*ratelimit.Limiter{&s.rl.lim}
	case strings.HasPrefix(s.name, ReservedPrefix):
		return nil
	}
	s.rl.lim.SetRate(relativeTo(r.SubscriptionDispatch, r.SubscriptionDispatchRelative, pm, pb))
	tr := s.t.rl.Load()
	if tr == nil {
		return []*ratelimit.Limiter{&s.rl.lim} // the topic has no dispatch rate
	}
	if r.DispatchRelative {
		tr.dispatch.SetRate(relativeTo(r.Dispatch, true, pm, pb))
	}
	return []*ratelimit.Limiter{&s.rl.lim, &tr.dispatch}
}

// subRates are a subscription's dispatch limiter and what the
// dispatcher learnt of its entries' size.
type subRates struct {
	lim ratelimit.Limiter
	// avgEntry is the mean size of the entries last dispatched, for
	// byte rates and the read bound maxReadBytes (dispatcher goroutine
	// only; 0: none yet).
	avgEntry int64
	// avgMsgs is the mean messages per entry of the entries last
	// dispatched, to read entries for the consumers' permits (0: none
	// yet).
	avgMsgs int64
}

// dispatchBudget is how many entries the dispatcher may read now, or 0
// and how long until it may read any. Under a byte rate the entries are
// counted at the size of the last ones sent (one when none were yet), so
// that a round does not run far past the budget.
func (s *subscription) dispatchBudget() (int64, time.Duration) {
	budget, wait := int64(math.MaxInt64), time.Duration(0)
	for _, l := range s.dispatchLimiters() {
		n, b, d := l.Available()
		if b != math.MaxInt64 {
			n = min(n, max(1, b/max(1, s.rl.avgEntry)))
			if s.rl.avgEntry == 0 {
				n = 1
			}
		}
		budget, wait = min(budget, n), max(wait, d)
	}
	if wait > 0 {
		return 0, wait
	}
	return budget, 0
}

// readBytesCap is how many entries of the size of the last ones sent
// fit in maxReadBytes (one when none were sent yet).
func (s *subscription) readBytesCap() int64 {
	if s.rl.avgEntry == 0 {
		return 1
	}
	return max(1, maxReadBytes/s.rl.avgEntry)
}

// chargeDispatch charges what a round sent.
func (s *subscription) chargeDispatch(frames []outFrame) {
	var msgs, bytes int64
	for _, f := range frames {
		msgs += f.n
		bytes += f.bytes
	}
	if len(frames) == 0 {
		return
	}
	s.rl.avgEntry = max(1, bytes/int64(len(frames)))
	s.rl.avgMsgs = max(1, msgs/int64(len(frames)))
	for _, l := range s.dispatchLimiters() {
		l.Charge(msgs, bytes)
	}
}

// limitPlan caps what pl reads at n entries.
func limitPlan(pl dispatch.Plan, n int64) dispatch.Plan {
	if int64(len(pl.Replay)) > n {
		pl.Replay = pl.Replay[:n]
	}
	if int64(pl.N) > n {
		pl.N = int(n)
	}
	return pl
}

// RateStats returns the counters of a loaded topic's rate limiters:
// "publish", "dispatch" (the topic's) and "subscription:<name>" (each
// subscription's, a replication cursor's at the replicator rate); ok is
// false when the topic is not loaded here.
func (b *Broker) RateStats(name topic.Name) (stats map[string]ratelimit.Stats, ok bool) {
	t := b.loadedTopic(name)
	if t == nil {
		return nil, false
	}
	tr := t.limits()
	stats = map[string]ratelimit.Stats{"publish": tr.publish.Stats(), "dispatch": tr.dispatch.Stats()}
	t.mu.Lock()
	defer t.mu.Unlock()
	for n, s := range t.subs {
		stats["subscription:"+n] = s.rl.lim.Stats()
	}
	return stats, true
}

// namespaceRates are the rates a namespace sets for cluster.
func namespaceRates(r policy.NamespaceRates, cluster string) Rates {
	out := Rates{Publish: PublishRateOf(policy.RateIn(r.PublishMaxMessageRate, cluster))}
	out.setDispatch(r.DispatchRateIn(cluster), policy.RateIn(r.SubscriptionDispatchRate, cluster), policy.RateIn(r.ReplicatorDispatchRate, cluster))
	return out.withSubscribe(policy.RateIn(r.ClusterSubscribeRate, cluster))
}
