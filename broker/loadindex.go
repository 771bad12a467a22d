package broker

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/isobar-mq/isobar/topic"
)

// What the load reports need of the loaded topics, kept as topics load,
// unload and carry messages, so that a report walks neither every loaded
// topic nor anything per idle topic (docs/decisions.md, "Idle topics cost
// nothing periodic").

// bundleCounts counts the loaded topics of each namespace by bundle, from
// the hash of each topic's name (topic.Hash, computed once at its load).
// Counts per bundle are kept against the bundles a namespace had when
// they were counted; a split changes them, and recount counts the
// namespace again from its topics' hashes. It does no locking (the
// broker's mu guards it, as it guards the topics themselves).
type bundleCounts struct {
	total int
	ns    map[string]*nsCounts
}

// nsCounts are one namespace's counts: n topics, of which counts[i] fall
// in bundles[i]; bundles nil when they were not known at some add or
// remove (the counts must be made again).
type nsCounts struct {
	n       int
	bundles []topic.Bundle
	counts  []int
}

// add counts a topic of namespace ns whose name hashes to h (delta 1) or
// forgets it (delta -1); bs are the namespace's bundles now, nil when not
// known.
func (c *bundleCounts) add(ns string, h uint32, bs []topic.Bundle, delta int) {
	if c.ns == nil {
		c.ns = map[string]*nsCounts{}
	}
	nc := c.ns[ns]
	if nc == nil {
		nc = &nsCounts{}
		c.ns[ns] = nc
	}
	c.total += delta
	nc.n += delta
	if nc.n <= 0 {
		delete(c.ns, ns)
		return
	}
	if nc.counts != nil && bs != nil && slices.Equal(bs, nc.bundles) {
		if i := bundleIndex(bs, h); i >= 0 {
			nc.counts[i] += delta
			return
		}
	}
	nc.bundles, nc.counts = nil, nil
}

// current reports whether the counts of ns are kept against bs (false:
// recount them).
func (c *bundleCounts) current(ns string, bs []topic.Bundle) bool {
	nc := c.ns[ns]
	return nc == nil || nc.counts != nil && slices.Equal(bs, nc.bundles)
}

// recount counts ns again against bs from the hashes of its loaded
// topics.
func (c *bundleCounts) recount(ns string, bs []topic.Bundle, hashes []uint32) {
	nc := c.ns[ns]
	if nc == nil {
		return
	}
	nc.bundles, nc.counts = bs, make([]int, len(bs))
	for _, h := range hashes {
		if i := bundleIndex(bs, h); i >= 0 {
			nc.counts[i]++
		}
	}
}

// of is the number of loaded topics of ns in bundle b, when counted
// against bundles that have b.
func (c *bundleCounts) of(ns string, b topic.Bundle) int {
	nc := c.ns[ns]
	if nc == nil || nc.counts == nil {
		return 0
	}
	if i := slices.Index(nc.bundles, b); i >= 0 {
		return nc.counts[i]
	}
	return 0
}

// bundleIndex is the index of the bundle of bs holding hash h; -1 when
// none does (bs do not tile the hash space).
func bundleIndex(bs []topic.Bundle, h uint32) int {
	i, _ := slices.BinarySearchFunc(bs, h, func(b topic.Bundle, h uint32) int {
		switch {
		case b.Contains(h):
			return 0
		case b.Lo > h:
			return 1
		}
		return -1
	})
	if i < len(bs) && bs[i].Contains(h) {
		return i
	}
	return -1
}

// trafficList collects the topics that carried messages since the last
// load sample: a topic is added once per sample (its flag), with its
// counters as they were before (the base its rates count from when the
// sampler does not know it from the previous sample). Only the first
// message of a topic in an interval takes the list's lock.
type trafficList struct {
	on atomic.Bool // a sampler takes the list (NewLoadSampler); off, nothing is listed

	mu   sync.Mutex
	list []trafficEntry
}

// trafficEntry is a topic that carried messages, and its counters when
// it started to.
type trafficEntry struct {
	t    *Topic
	base loadCounters
}

// topicIO are a topic's cumulative counters: received from producers
// (replicated entries included) and dispatched to consumers.
type topicIO struct {
	msgIn, bytesIn, msgOut, bytesOut atomic.Int64
	npIDs                            atomic.Int64 // message ids of a non-persistent topic (Topic.npLast)
}

// ioCounters returns t's counters, made by the first message.
func (t *Topic) ioCounters() *topicIO {
	if c := t.io.Load(); c != nil {
		return c
	}
	t.io.CompareAndSwap(nil, &topicIO{})
	return t.io.Load()
}

// counters are t's cumulative counters now.
func (t *Topic) counters() loadCounters {
	c := t.io.Load()
	if c == nil {
		return loadCounters{}
	}
	return loadCounters{c.msgIn.Load(), c.bytesIn.Load(), c.msgOut.Load(), c.bytesOut.Load()}
}

// markTraffic lists t in b's traffic list, once per load sample. It is
// called before t's counters move, so that the base it records does not
// include what it is called for.
func (b *Broker) markTraffic(t *Topic) {
	l := &b.traffic
	if !l.on.Load() || t.flag(flTrafficListed) {
		return
	}
	base := t.counters()
	if t.swapFlag(flTrafficListed, true) {
		return
	}
	l.mu.Lock()
	l.list = append(l.list, trafficEntry{t, base})
	l.mu.Unlock()
}

// takeTraffic empties the traffic list, returning what it held; the
// topics are listed again by their next message.
func (b *Broker) takeTraffic() []trafficEntry {
	l := &b.traffic
	l.mu.Lock()
	out := l.list
	l.list = nil
	l.mu.Unlock()
	for _, e := range out {
		e.t.setFlag(flTrafficListed, false)
	}
	return out
}

// countIn counts messages received on t.
func (t *Topic) countIn(msgs, bytes int64) {
	t.b.markTraffic(t)
	t.b.listMaint(t) // it may have a backlog or ledgers to trim now
	c := t.ioCounters()
	c.msgIn.Add(msgs)
	c.bytesIn.Add(bytes)
}

// countOut counts messages dispatched from t.
func (t *Topic) countOut(msgs, bytes int64) {
	t.b.markTraffic(t)
	c := t.ioCounters()
	c.msgOut.Add(msgs)
	c.bytesOut.Add(bytes)
}

// bundleCache is implemented by placements that know a namespace's
// bundles without blocking (OwnershipPlacement).
type bundleCache interface {
	cachedBundles(ns string) ([]topic.Bundle, bool)
}

func (p *OwnershipPlacement) cachedBundles(ns string) ([]topic.Bundle, bool) {
	bs, ok, _ := p.bundlesOf(nil, ns)
	return bs, ok
}

// countLoaded counts t as loaded (delta 1) or unloaded (-1) in
// b.loaded; b.mu held.
func (b *Broker) countLoaded(t *Topic, delta int) {
	ns := t.name.NamespaceName()
	var bs []topic.Bundle
	if bc, ok := b.deps.Placement.(bundleCache); ok {
		bs, _ = bc.cachedBundles(ns)
	}
	b.loaded.add(ns, t.hash, bs, delta)
}

// loadedCounts returns the number of loaded topics, and calls f with
// each namespace's counts made current against bundles (the namespace's
// topics counted again when its bundles changed since: a split).
func (b *Broker) loadedCounts(bundles func(ns string) ([]topic.Bundle, bool), f func(c *bundleCounts)) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var stale map[string][]topic.Bundle
	for ns := range b.loaded.ns {
		if bs, ok := bundles(ns); ok && !b.loaded.current(ns, bs) {
			if stale == nil {
				stale = map[string][]topic.Bundle{}
			}
			stale[ns] = bs
		}
	}
	if stale != nil {
		hashes := map[string][]uint32{}
		for _, s := range b.topics {
			if s.ready == loadedReady && s.t != nil {
				if ns := s.t.name.NamespaceName(); stale[ns] != nil {
					hashes[ns] = append(hashes[ns], s.t.hash)
				}
			}
		}
		for ns, bs := range stale {
			b.loaded.recount(ns, bs, hashes[ns])
		}
	}
	f(&b.loaded)
	return b.loaded.total
}
