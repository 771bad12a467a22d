package broker

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/replication"
)

// What a metrics collection needs of the loaded topics, kept as they
// load, unload and change, so that a collection (a /metrics scrape, an
// OTLP export) costs O(namespaces + topics that changed or have clients),
// not a walk over every loaded topic (docs/decisions.md, "Idle topics
// cost nothing periodic"). Without per-topic labels the series are per
// namespace (backlog, storage) or per broker and remote: each
// namespace's sums over its topics are kept with every topic's share in
// them as its last visit found it, and a collection visits only the
// topics listed since the last one (loaded since; their managed ledger
// reported a change, mledger.Deps.Changed; a producer or consumer came
// or went) and those it keeps listed (clients attached: their counts are
// observed; a replication backlog: its age moves with the clock).
// Nothing is listed until the first collection, which visits every
// loaded topic once: a broker whose metrics are never collected keeps
// no list.

// metricsIndex is the broker's record for metrics collections.
type metricsIndex struct {
	// pass serialises collections and guards seq and prevAt.
	pass   sync.Mutex
	seq    uint64    // collections so far
	prevAt time.Time // when the last one ran

	// on: a collection ran, topics are listed from then on.
	on atomic.Bool

	// mu guards the fields below and every topic's mx.
	mu      sync.Mutex
	dirty   map[*Topic]struct{} // the topics the next collection visits
	ns      map[string]*nsMetrics
	remotes map[string]int // topics with a replication cursor, by remote
}

// nsMetrics are a namespace's sums over its topics' shares.
type nsMetrics struct {
	subTopics    int   // topics with a subscription (a backlog series)
	storedTopics int   // topics with a ledger (a storage series)
	backlog      int64 // entries not acknowledged, over the subscriptions
	storage      int64 // bytes stored
}

// topicMetrics is a topic's share in its namespace's sums, as its last
// visit found it (kept in the topic as mx and mxFlags, which
// metricsIndex.mu guards).
type topicMetrics struct {
	topicShare
	hasSub bool // counted in subTopics
	stored bool // counted in storedTopics
	gone   bool // unloaded: no share, never listed again
}

// topicShare is the part of topicMetrics kept in Topic.mx.
type topicShare struct {
	backlog, storage int64
	// remotes are the remotes of its replication cursors, and seq the
	// collection that last visited it; nil without replication cursors.
	remotes *metricsRemotes
}

// Topic.mxFlags.
const (
	mxHasSub uint8 = 1 << iota
	mxStored
	mxGone
)

// share is t's share. metricsIndex.mu held.
func (t *Topic) share() topicMetrics {
	f := t.mxFlags
	return topicMetrics{topicShare: t.mx, hasSub: f&mxHasSub != 0, stored: f&mxStored != 0, gone: f&mxGone != 0}
}

// setShare stores s as t's share. metricsIndex.mu held.
func (t *Topic) setShare(s topicMetrics) {
	t.mx = s.topicShare
	t.mxFlags = 0
	if s.hasSub {
		t.mxFlags |= mxHasSub
	}
	if s.stored {
		t.mxFlags |= mxStored
	}
	if s.gone {
		t.mxFlags |= mxGone
	}
}

type metricsRemotes struct {
	names []string
	seq   uint64
}

// listMetrics lists t for the next metrics collection.
func (b *Broker) listMetrics(t *Topic) {
	mi := &b.metricsIdx
	if !mi.on.Load() {
		return // the first collection visits every topic
	}
	mi.mu.Lock()
	if t.mxFlags&mxGone == 0 {
		if mi.dirty == nil {
			mi.dirty = map[*Topic]struct{}{}
		}
		mi.dirty[t] = struct{}{}
	}
	mi.mu.Unlock()
}

// forgetMetrics takes the share of t, unloaded, out of the sums.
func (b *Broker) forgetMetrics(t *Topic) {
	mi := &b.metricsIdx
	mi.mu.Lock()
	defer mi.mu.Unlock()
	if t.mxFlags&mxGone != 0 {
		return
	}
	mi.setShareLocked(t, topicMetrics{gone: true})
	delete(mi.dirty, t)
}

// setShareLocked replaces t's share in the sums by s (its remotes'
// collection number kept from s). mi.mu held.
func (mi *metricsIndex) setShareLocked(t *Topic, s topicMetrics) {
	old := t.share()
	ns := t.name.NamespaceName()
	n := mi.ns[ns]
	if n == nil {
		n = &nsMetrics{}
		if mi.ns == nil {
			mi.ns = map[string]*nsMetrics{}
		}
		mi.ns[ns] = n
	}
	n.backlog += s.backlog - old.backlog
	n.storage += s.storage - old.storage
	n.subTopics += b2i(s.hasSub) - b2i(old.hasSub)
	n.storedTopics += b2i(s.stored) - b2i(old.stored)
	if *n == (nsMetrics{}) {
		delete(mi.ns, ns)
	}
	if old.remotes != nil {
		for _, r := range old.remotes.names {
			if mi.remotes[r]--; mi.remotes[r] <= 0 {
				delete(mi.remotes, r)
			}
		}
	}
	if s.remotes != nil {
		if mi.remotes == nil {
			mi.remotes = map[string]int{}
		}
		for _, r := range s.remotes.names {
			mi.remotes[r]++
		}
	}
	t.setShare(s)
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// mlChanged lists the topic of managed ledger m, loaded here, for the
// next collection (mledger.Deps.Changed).
func (b *Broker) mlChanged(m *mledger.ManagedLedger) {
	if !b.metricsIdx.on.Load() {
		return
	}
	b.mu.Lock()
	s := b.topics[m.Name()] // a persistent topic's slot key is its managed ledger's name (slotKey)
	var t *Topic
	if s != nil && s.ready == loadedReady {
		t = s.t
	}
	b.mu.Unlock()
	if t != nil && t.ml == m {
		b.listMetrics(t)
	}
	// A topic still loading is listed by its load.
}

// metricKey is what a backlog or storage series is kept by: the
// namespace, and with per-topic labels the topic and subscription.
type metricKey struct{ ns, topic, sub string }

// replTotals are a remote's replication series.
type replTotals struct {
	backlog, bytes, stalled, connected int64
	lag                                float64
}

// metricsTotals are what a collection observes.
type metricsTotals struct {
	backlogs, storage            map[metricKey]int64
	topics, producers, consumers int64
	repl                         map[string]*replTotals
}

func newMetricsTotals() metricsTotals {
	return metricsTotals{backlogs: map[metricKey]int64{}, storage: map[metricKey]int64{}, repl: map[string]*replTotals{}}
}

func (m *metricsTotals) remote(r string) *replTotals {
	rt := m.repl[r]
	if rt == nil {
		rt = &replTotals{}
		m.repl[r] = rt
	}
	return rt
}

// topicSample is what one topic adds to a collection.
type topicSample struct {
	producers, consumers int64
	hasSub, stored       bool
	backlog, storage     int64
	repl                 []replSample // by replication cursor
}

type replSample struct {
	remote             string
	backlog, bytes     int64
	stalled, connected bool
	lag                float64
}

// metricsSample reads t for a collection at now; perSub, when set, is
// called with each subscription's backlog.
func (t *Topic) metricsSample(ctx context.Context, now time.Time, perSub func(sub string, backlog int64)) topicSample {
	var s topicSample
	t.mu.Lock()
	s.producers = int64(len(t.producers))
	subs := make([]*subscription, 0, len(t.subs))
	for _, sub := range t.subs {
		subs = append(subs, sub)
	}
	t.mu.Unlock()
	for _, sub := range subs {
		sub.mu.Lock()
		s.consumers += int64(len(sub.consumers))
		sub.mu.Unlock()
	}
	if t.ml == nil {
		return s
	}
	for _, l := range t.ml.Ledgers() {
		s.stored = true
		s.storage += l.Size
	}
	for _, name := range t.ml.Cursors() {
		c, err := t.ml.OpenCursor(ctx, name, mledger.Latest)
		if err != nil {
			continue
		}
		if remote, ok := strings.CutPrefix(name, replication.Prefix); ok {
			r := replSample{remote: remote, backlog: c.Backlog()}
			_, _, avg := t.backlogBytes(c)
			r.bytes = r.backlog * avg
			r.stalled = t.replStalled(remote, c.MarkDelete(), r.backlog)
			if pt := t.oldestUnacked(ctx, c); !pt.IsZero() {
				r.lag = now.Sub(pt).Seconds()
			}
			for _, sub := range subs {
				if sub.name == name && len(sub.consumers) > 0 {
					r.connected = true
				}
			}
			s.repl = append(s.repl, r)
			continue
		}
		if strings.HasPrefix(name, ReservedPrefix) {
			continue
		}
		n := c.Backlog()
		s.hasSub = true
		s.backlog += n
		if perSub != nil {
			perSub(name, n)
		}
	}
	return s
}

// addRepl adds a topic's replication samples to m.
func (m *metricsTotals) addRepl(rs []replSample) {
	for _, r := range rs {
		rt := m.remote(r.remote)
		rt.backlog += r.backlog
		rt.bytes += r.bytes
		rt.lag = max(rt.lag, r.lag)
		if r.stalled {
			rt.stalled++
		}
		if r.connected {
			rt.connected++
		}
	}
}

// walkMetrics reads every loaded topic (per-topic labels: a series per
// topic anyway).
func (b *Broker) walkMetrics(ctx context.Context, perTopic bool) metricsTotals {
	m := newMetricsTotals()
	now := b.deps.Now()
	for _, t := range b.loadedTopics() {
		m.topics++
		k := metricKey{ns: t.name.NamespaceName()}
		if perTopic {
			k.topic = t.name.String()
		}
		var perSub func(string, int64)
		if perTopic {
			perSub = func(sub string, n int64) { m.backlogs[metricKey{k.ns, k.topic, sub}] += n }
		}
		s := t.metricsSample(ctx, now, perSub)
		m.producers += s.producers
		m.consumers += s.consumers
		if s.hasSub && !perTopic {
			m.backlogs[k] += s.backlog
		}
		if s.stored {
			m.storage[k] += s.storage
		}
		m.addRepl(s.repl)
	}
	return m
}

// indexedMetrics is walkMetrics without per-topic labels from the index:
// it visits the listed topics only.
func (b *Broker) indexedMetrics(ctx context.Context) metricsTotals {
	mi := &b.metricsIdx
	mi.pass.Lock()
	defer mi.pass.Unlock()
	m := newMetricsTotals()
	now := b.deps.Now()
	var visit []*Topic
	mi.mu.Lock()
	if !mi.on.Load() {
		// The first collection: every loaded topic, once. Listing is
		// on first, so that a topic loaded after the walk took the
		// loaded ones is listed (and visited by the next collection).
		mi.on.Store(true)
		mi.mu.Unlock()
		visit = b.loadedTopics()
	} else {
		visit = make([]*Topic, 0, len(mi.dirty))
		for t := range mi.dirty {
			visit = append(visit, t)
		}
		mi.dirty = nil
		mi.mu.Unlock()
	}
	seq := mi.seq + 1
	var keep []*Topic
	for _, t := range visit {
		if t.ml != nil {
			t.ml.ClearChanged() // before reading: a change from now lists t again
		}
		mi.mu.Lock()
		rem := t.mx.remotes
		skipped := rem != nil && rem.seq+1 < seq
		mi.mu.Unlock()
		if skipped {
			// Not visited by the last collection: its replication
			// backlogs were empty and did not move (else it would have
			// been), so the last collection would have found its
			// replication cursors unmoved then.
			t.replSeenAt(mi.prevAt)
		}
		s := t.metricsSample(ctx, now, nil)
		share := topicMetrics{topicShare: topicShare{backlog: s.backlog, storage: s.storage}, hasSub: s.hasSub, stored: s.stored}
		again := s.producers > 0 || s.consumers > 0
		if len(s.repl) > 0 {
			share.remotes = &metricsRemotes{seq: seq}
			for _, r := range s.repl {
				share.remotes.names = append(share.remotes.names, r.remote)
				again = again || r.backlog > 0
			}
		}
		mi.mu.Lock()
		if t.mxFlags&mxGone == 0 {
			mi.setShareLocked(t, share)
			m.producers += s.producers
			m.consumers += s.consumers
			m.addRepl(s.repl)
			if again {
				keep = append(keep, t)
			}
		}
		mi.mu.Unlock()
	}
	mi.seq, mi.prevAt = seq, now
	mi.mu.Lock()
	for _, t := range keep {
		if t.mxFlags&mxGone == 0 {
			if mi.dirty == nil {
				mi.dirty = map[*Topic]struct{}{}
			}
			mi.dirty[t] = struct{}{}
		}
	}
	for ns, n := range mi.ns {
		if n.subTopics > 0 {
			m.backlogs[metricKey{ns: ns}] = n.backlog
		}
		if n.storedTopics > 0 {
			m.storage[metricKey{ns: ns}] = n.storage
		}
	}
	for r := range mi.remotes {
		m.remote(r)
	}
	mi.mu.Unlock()
	b.mu.Lock()
	m.topics = int64(b.loaded.total)
	b.mu.Unlock()
	return m
}

// replSeenAt records that t's replication cursors were found where they
// are, with no backlog, at at (as replStalled would have: a stall counts
// from then).
func (t *Topic) replSeenAt(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rx == nil {
		return
	}
	for _, o := range t.rx.replOut {
		if at.After(o.since) {
			o.since = at
		}
	}
}
