package main

import (
	"math"
	"slices"
	"time"
)

// samples keeps every latency of a run (a 30 s run at 10k msg/s is 300k
// values, 2.4 MB), so that its percentiles are exact rather than
// bucketed. Not safe for concurrent use: the caller locks.
type samples struct {
	d   []time.Duration
	sum time.Duration
}

func (s *samples) add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	s.d = append(s.d, d)
	s.sum += d
}

// latencySummary is what `isobar perf --json` reports under latency_ms,
// with the same keys, so that one parser reads both tools' output.
type latencySummary struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// summarize sorts the samples and returns their p50, p99, p99.9, maximum
// and mean in milliseconds (rounded to µs). Empty: all zero.
func (s *samples) summarize() latencySummary {
	if len(s.d) == 0 {
		return latencySummary{}
	}
	slices.Sort(s.d)
	return latencySummary{
		P50:  ms(quantile(s.d, 0.5)),
		P99:  ms(quantile(s.d, 0.99)),
		P999: ms(quantile(s.d, 0.999)),
		Max:  ms(s.d[len(s.d)-1]),
		Mean: ms(s.sum / time.Duration(len(s.d))),
	}
}

// quantile is the nearest-rank q-quantile (0 < q ≤ 1) of sorted, which
// must not be empty: the ceil(q·n)-th smallest value. `isobar perf` uses
// the same rank (on histogram buckets), so p99 of 1000 samples is the
// 990th smallest in both.
func quantile(sorted []time.Duration, q float64) time.Duration {
	n := len(sorted)
	rank := int(math.Ceil(q * float64(n)))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }
func round3(x float64) float64   { return math.Round(x*1000) / 1000 }
