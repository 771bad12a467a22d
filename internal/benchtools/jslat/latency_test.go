package main

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond // 1..100 ms
	}
	thousand := make([]time.Duration, 1000)
	for i := range thousand {
		thousand[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"one sample, median", ms(7), 0.5, 7 * time.Millisecond},
		{"one sample, p99.9", ms(7), 0.999, 7 * time.Millisecond},
		{"two samples, median is the lower", ms(1, 9), 0.5, time.Millisecond},
		{"two samples, p99 is the upper", ms(1, 9), 0.99, 9 * time.Millisecond},
		{"odd count, median is the middle", ms(1, 2, 3, 4, 5), 0.5, 3 * time.Millisecond},
		{"100 samples, p50 is the 50th", hundred, 0.5, 50 * time.Millisecond},
		{"100 samples, p99 is the 99th", hundred, 0.99, 99 * time.Millisecond},
		{"100 samples, p99.9 is the largest", hundred, 0.999, 100 * time.Millisecond},
		{"1000 samples, p99 is the 990th", thousand, 0.99, 990 * time.Millisecond},
		{"1000 samples, p99.9 is the 999th", thousand, 0.999, 999 * time.Millisecond},
		{"q = 1 is the maximum", hundred, 1, 100 * time.Millisecond},
		{"tiny q is the minimum", hundred, 1e-9, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quantile(tc.sorted, tc.q); got != tc.want {
				t.Fatalf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	var s samples
	if got := s.summarize(); got != (latencySummary{}) {
		t.Fatalf("empty: %+v, want zeros", got)
	}
	// 1..1000 µs in a shuffled order; a negative value counts as 0.
	r := rand.New(rand.NewPCG(1, 2))
	for _, i := range r.Perm(1000) {
		s.add(time.Duration(i+1) * time.Microsecond)
	}
	s.add(-time.Second)
	got := s.summarize()
	// 1001 samples: 0, 1..1000 µs. Ranks: p50 ceil(500.5)=501 -> 500 µs,
	// p99 ceil(990.99)=991 -> 990 µs, p99.9 ceil(999.999)=1000 -> 999 µs.
	want := latencySummary{P50: 0.5, P99: 0.99, P999: 0.999, Max: 1, Mean: 0.5}
	if got != want {
		t.Fatalf("summarize = %+v, want %+v", got, want)
	}
}
