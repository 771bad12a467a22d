package broker

import (
	"runtime"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/isobar-mq/isobar/broker/ownership"
)

// loadCounters are a topic's cumulative message and byte counters.
type loadCounters struct{ msgIn, bytesIn, msgOut, bytesOut int64 }

// LoadSampler turns the broker's counters into load reports
// (ownership.LoadReport) for the registry to publish: each Sample takes
// the rates since the previous one, per topic and summed per owned bundle
// and for the broker, the process's CPU usage over the same interval
// (getrusage user+system time, as a percentage of runtime.NumCPU CPUs),
// and the topic, bundle and connection counts. The first Sample has no
// rates. It is safe for concurrent use.
//
// A sample costs nothing per idle topic: topic counts per bundle are
// kept as topics load and unload, and rates are taken only from the
// topics that carried messages since the previous sample
// (loadindex.go).
type LoadSampler struct {
	b *Broker
	p *OwnershipPlacement

	mu      sync.Mutex
	prev    map[*Topic]loadCounters // of the topics that carried messages in the previous interval
	prevAt  time.Time
	prevCPU time.Duration
}

// NewLoadSampler returns a sampler of b's load, whose bundles p places.
func NewLoadSampler(b *Broker, p *OwnershipPlacement) *LoadSampler {
	b.traffic.on.Store(true)
	return &LoadSampler{b: b, p: p}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Sample implements the load source of ownership.Registry.SetLoadSource.
func (s *LoadSampler) Sample() ownership.LoadReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.mu.Lock()
	conns := len(s.b.conns)
	s.b.mu.Unlock()
	now := s.b.deps.Now()
	cpu := processCPU()
	// The topics that carried messages: taken before the counters are
	// read, so that a message after this is listed for the next sample.
	busy := s.b.takeTraffic()

	dt := now.Sub(s.prevAt).Seconds()
	first := s.prevAt.IsZero() || dt <= 0
	rep := ownership.LoadReport{
		CPU:            ownership.ResourceUsage{Limit: 100},
		LastUpdate:     now.UnixMilli(),
		LastStats:      map[string]ownership.BundleLoad{},
		NumConnections: conns,
	}
	if !first {
		rep.CPU.Usage = min(100, max(0, (cpu-s.prevCPU).Seconds()/(dt*float64(runtime.NumCPU()))*100))
	}
	owned := s.p.Registry.Owned()
	rep.NumTopics = s.b.loadedCounts(s.p.cachedBundles, func(c *bundleCounts) {
		for _, ob := range owned {
			k := ob.Namespace + "/" + ob.Bundle.String()
			rep.Bundles = append(rep.Bundles, k)
			rep.LastStats[k] = ownership.BundleLoad{Topics: int64(c.of(ob.Namespace, ob.Bundle))}
		}
	})
	sort.Strings(rep.Bundles)
	rep.NumBundles = len(rep.Bundles)
	next := make(map[*Topic]loadCounters, len(busy))
	for _, e := range busy {
		t := e.t
		if t.isClosed() {
			continue // unloaded: not this broker's load any more
		}
		c := t.counters()
		next[t] = c
		if first {
			continue
		}
		base, ok := s.prev[t]
		if !ok {
			base = e.base
		}
		bl := counterRates(base, c, dt)
		rep.MsgRateIn += bl.MsgRateIn
		rep.MsgThroughputIn += bl.MsgThroughputIn
		rep.MsgRateOut += bl.MsgRateOut
		rep.MsgThroughputOut += bl.MsgThroughputOut
		k, ok := s.bundleKey(t)
		if !ok {
			continue
		}
		if agg, ok := rep.LastStats[k]; ok {
			agg.MsgRateIn += bl.MsgRateIn
			agg.MsgThroughputIn += bl.MsgThroughputIn
			agg.MsgRateOut += bl.MsgRateOut
			agg.MsgThroughputOut += bl.MsgThroughputOut
			rep.LastStats[k] = agg
		}
	}
	s.prev, s.prevAt, s.prevCPU = next, now, cpu
	return rep
}

// bundleKey is "tenant/namespace/<bundle>" of the bundle holding t;
// false when the namespace's bundles are not known here.
func (s *LoadSampler) bundleKey(t *Topic) (string, bool) {
	ns := t.name.NamespaceName()
	bs, ok := s.p.cachedBundles(ns)
	if !ok {
		return "", false
	}
	i := bundleIndex(bs, t.hash)
	if i < 0 {
		return "", false
	}
	return ns + "/" + bs[i].String(), true
}

// counterRates are the rates of a topic whose counters went from prev to
// cur in dt seconds. Counters that went down belong to a topic loaded
// again since (they restarted from zero): cur alone is counted.
func counterRates(prev, cur loadCounters, dt float64) ownership.BundleLoad {
	d := func(p, c int64) float64 {
		if c < p {
			return float64(c) / dt
		}
		return float64(c-p) / dt
	}
	return ownership.BundleLoad{
		MsgRateIn: d(prev.msgIn, cur.msgIn), MsgThroughputIn: d(prev.bytesIn, cur.bytesIn),
		MsgRateOut: d(prev.msgOut, cur.msgOut), MsgThroughputOut: d(prev.bytesOut, cur.bytesOut),
	}
}

// LoadReport returns this broker's last sampled load report; false
// before the first sample.
func (p *OwnershipPlacement) LoadReport() (ownership.LoadReport, bool) {
	return p.Registry.LoadReport()
}
