package ownership

import (
	"math"
	"sort"
)

// Score is the report's load as a continuous number on the scale of
// Usage (one point per 10 % CPU, per 1000 messages/s in and out, per
// MiB/s in and out): what load shedding compares between brokers. A
// nil report scores 0.
func (l *LoadReport) Score() float64 {
	if l == nil {
		return 0
	}
	s := max(0, l.CPU.Usage)/10 + max(0, l.MsgRateIn+l.MsgRateOut)/1000 + max(0, l.MsgThroughputIn+l.MsgThroughputOut)/(1<<20)
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return 0
	}
	return s
}

// weight is a bundle's share of a broker's load on the scale of Score
// (its rates; CPU is not measured per bundle).
func (b BundleLoad) weight() float64 {
	return max(0, b.MsgRateIn+b.MsgRateOut)/1000 + max(0, b.MsgThroughputIn+b.MsgThroughputOut)/(1<<20)
}

// ShedConfig configures Shed.
type ShedConfig struct {
	// Threshold is how far above the mean score, in percent of the mean,
	// a broker's score must be for it to shed (Pulsar's
	// loadBalancerBrokerThresholdShedderPercentage); zero means 10.
	Threshold float64
	// MinGap is the least difference, in score points, between a broker
	// and the mean that counts (so that idle regions do not shed over
	// noise); zero means 1.
	MinGap float64
}

// Unload is a bundle Shed chose to move: Bundle ("tenant/ns/0x…_0x…") of
// broker Broker.
type Unload struct {
	Broker string
	Bundle string
}

// Shed decides which bundles to unload so that overloaded brokers come
// down to the mean, as Pulsar's ThresholdShedder: a broker is overloaded
// when its score exceeds the mean of all brokers' scores by more than
// Threshold percent of the mean and by MinGap points (the hysteresis: a
// broker just above the mean is left alone). From an overloaded broker
// it takes its heaviest bundles first (by rates; ties by name), skipping
// those skip says were moved recently, until the weight taken reaches
// the part of the broker's bundle weight that its score exceeds the mean
// by; it never takes a broker's last bundle, nor a bundle without
// traffic. reports maps broker id to its report; a broker without one
// scores 0. Shed is pure and deterministic.
func Shed(reports map[string]*LoadReport, cfg ShedConfig, skip func(bundle string) bool) []Unload {
	if cfg.Threshold == 0 {
		cfg.Threshold = 10
	}
	if cfg.MinGap == 0 {
		cfg.MinGap = 1
	}
	if len(reports) < 2 {
		return nil
	}
	ids := make([]string, 0, len(reports))
	var sum float64
	for id, r := range reports {
		ids = append(ids, id)
		sum += r.Score()
	}
	sort.Strings(ids)
	mean := sum / float64(len(ids))
	var out []Unload
	for _, id := range ids {
		r := reports[id]
		score := r.Score()
		if score <= mean*(1+cfg.Threshold/100) || score-mean < cfg.MinGap || len(r.LastStats) < 2 {
			continue
		}
		type cand struct {
			name string
			w    float64
		}
		var cands []cand
		var total float64
		for name, b := range r.LastStats {
			w := b.weight()
			total += w
			if w > 0 && (skip == nil || !skip(name)) {
				cands = append(cands, cand{name, w})
			}
		}
		if total == 0 {
			continue
		}
		sort.Slice(cands, func(i, j int) bool {
			if cands[i].w != cands[j].w {
				return cands[i].w > cands[j].w
			}
			return cands[i].name < cands[j].name
		})
		target := total * (score - mean) / score
		var taken float64
		kept := len(r.LastStats)
		for _, c := range cands {
			if taken >= target || kept <= 1 {
				break
			}
			if taken > 0 && taken+c.w > target+c.w/2 {
				continue // overshoots by more than it helps: a lighter one may fit
			}
			out = append(out, Unload{Broker: id, Bundle: c.name})
			taken += c.w
			kept--
		}
	}
	return out
}
