package broker

import (
	"runtime"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/isobar-mq/isobar/broker/ownership"
	"github.com/isobar-mq/isobar/topic"
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
type LoadSampler struct {
	b *Broker
	p *OwnershipPlacement

	mu      sync.Mutex
	prev    map[string]loadCounters // by topic name, of the topics with non-zero counters
	prevAt  time.Time
	prevCPU time.Duration
}

// NewLoadSampler returns a sampler of b's load, whose bundles p places.
func NewLoadSampler(b *Broker, p *OwnershipPlacement) *LoadSampler {
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
	topics := s.b.loadedTopics()
	s.b.mu.Lock()
	conns := len(s.b.conns)
	s.b.mu.Unlock()
	now := s.b.deps.Now()
	cpu := processCPU()

	s.mu.Lock()
	defer s.mu.Unlock()
	dt := now.Sub(s.prevAt).Seconds()
	first := s.prevAt.IsZero() || dt <= 0
	rep := ownership.LoadReport{
		CPU:            ownership.ResourceUsage{Limit: 100},
		LastUpdate:     now.UnixMilli(),
		LastStats:      map[string]ownership.BundleLoad{},
		NumTopics:      len(topics),
		NumConnections: conns,
	}
	if !first {
		rep.CPU.Usage = min(100, max(0, (cpu-s.prevCPU).Seconds()/(dt*float64(runtime.NumCPU()))*100))
	}
	owned := s.p.Registry.Owned()
	for _, ob := range owned {
		k := ob.Namespace + "/" + ob.Bundle.String()
		rep.Bundles = append(rep.Bundles, k)
		rep.LastStats[k] = ownership.BundleLoad{}
	}
	sort.Strings(rep.Bundles)
	rep.NumBundles = len(rep.Bundles)
	// Only topics that have carried messages are remembered: an idle
	// topic's rates are zero whatever it had before, and a broker of a
	// million idle topics keeps no map of them.
	next := make(map[string]loadCounters, len(s.prev))
	for _, t := range topics {
		var bl ownership.BundleLoad
		if c := (loadCounters{t.msgIn.Load(), t.bytesIn.Load(), t.msgOut.Load(), t.bytesOut.Load()}); c != (loadCounters{}) {
			name := t.name.String()
			next[name] = c
			if !first {
				bl = counterRates(s.prev[name], c, dt)
			}
		}
		rep.MsgRateIn += bl.MsgRateIn
		rep.MsgThroughputIn += bl.MsgThroughputIn
		rep.MsgRateOut += bl.MsgRateOut
		rep.MsgThroughputOut += bl.MsgThroughputOut
		k, ok := s.bundleKey(t.name)
		if !ok {
			continue
		}
		if agg, ok := rep.LastStats[k]; ok {
			agg.MsgRateIn += bl.MsgRateIn
			agg.MsgThroughputIn += bl.MsgThroughputIn
			agg.MsgRateOut += bl.MsgRateOut
			agg.MsgThroughputOut += bl.MsgThroughputOut
			agg.Topics++
			rep.LastStats[k] = agg
		}
	}
	s.prev, s.prevAt, s.prevCPU = next, now, cpu
	return rep
}

// bundleKey is "tenant/namespace/<bundle>" of the bundle holding name;
// false when the namespace's bundles are not known here.
func (s *LoadSampler) bundleKey(name topic.Name) (string, bool) {
	b, ok, _ := s.p.bundleFor(nil, name)
	if !ok {
		return "", false
	}
	return name.NamespaceName() + "/" + b.String(), true
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
