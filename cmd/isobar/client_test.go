package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestClientAndPerfUsageErrors checks that bad arguments exit with status 2
// before anything dials a broker (none listens in these tests).
func TestClientAndPerfUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // substrings of the error
	}{
		{[]string{"client", "produce"}, []string{"exactly one topic"}},
		{[]string{"client", "produce", "a", "b", "-m", "x"}, []string{"exactly one topic"}},
		{[]string{"client", "produce", "t"}, []string{"-m/--messages"}},
		{[]string{"client", "produce", "a/b", "-m", "x"}, []string{"tenant/namespace/name"}},
		{[]string{"client", "produce", "kafka://x/y/z", "-m", "x"}, []string{"domain"}},
		{[]string{"client", "produce", "t", "-m", "x", "-n", "0", "--properties", "a=1,nokey", "--service-url", "http://h:1"},
			[]string{"-n/--num-produce", `"nokey" is not key=value`, "--service-url"}},
		{[]string{"client", "produce", "t", "-m", "x", "--nope"}, []string{"unknown flag"}},
		{[]string{"client", "consume", "t"}, []string{"-s/--subscription-name"}},
		{[]string{"client", "consume", "t", "-s", "s", "-t", "Weird", "-p", "Middle", "-n", "-1"},
			[]string{"subscription-type", "subscription-position", "negative"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			_, err := run(ctx, tc.args...)
			if err == nil {
				t.Fatal("no error")
			}
			if code := exitCode(err); code != 2 {
				t.Errorf("exit code %d for %v, want 2", code, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v: a usage error must not wait for a broker", d)
			}
		})
	}
}

func TestRestTopicPath(t *testing.T) {
	for in, want := range map[string]string{
		"t":                                 "persistent/public/default/t",
		"tenant/ns/t":                       "persistent/tenant/ns/t",
		"persistent://a/b/c":                "persistent/a/b/c",
		"non-persistent://a/b/c":            "non-persistent/a/b/c",
		"public/default/with space":         "persistent/public/default/with%20space",
		"persistent://public/default/t-p-0": "persistent/public/default/t-p-0",
	} {
		if got, err := restTopicPath(in); err != nil || got != want {
			t.Errorf("restTopicPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a/b", "a/b/c/d", "x://a/b/c", "a//c", "persistent://"} {
		if got, err := restTopicPath(bad); err == nil {
			t.Errorf("restTopicPath(%q) = %q, want an error", bad, got)
		}
	}
}

func TestPayloadGenExactSizeDeterministicVaried(t *testing.T) {
	for _, size := range []int{1, 2, 17, 39, 40, 64, 100, 170, 200, 512, 1024, 4096, 65536} {
		a, b := newPayloadGen(7, size), newPayloadGen(7, size)
		other := newPayloadGen(8, size)
		seen := map[string]bool{}
		for i := 0; i < 50; i++ {
			pa, pb, po := a.next(), b.next(), other.next()
			if len(pa) != size {
				t.Fatalf("size %d: payload %d has %d bytes", size, i, len(pa))
			}
			if !bytes.Equal(pa, pb) {
				t.Fatalf("size %d: same seed, different payload %d", size, i)
			}
			if size >= 64 && bytes.Equal(pa, po) {
				t.Fatalf("size %d: seeds 7 and 8 gave the same payload %d", size, i)
			}
			if size >= 40 && !json.Valid(pa) {
				t.Fatalf("size %d: payload is not JSON: %s", size, pa)
			}
			if size >= 16 {
				if seen[string(pa)] {
					t.Fatalf("size %d: payload %d repeats", size, i)
				}
				seen[string(pa)] = true
			}
		}
	}
	// A 1 KiB payload carries every field, and they vary between messages.
	g := newPayloadGen(1, 1024)
	fields := map[string]map[string]bool{}
	for i := 0; i < 100; i++ {
		var doc map[string]any
		if err := json.Unmarshal(g.next(), &doc); err != nil {
			t.Fatal(err)
		}
		for k, v := range doc {
			if fields[k] == nil {
				fields[k] = map[string]bool{}
			}
			b, _ := json.Marshal(v)
			fields[k][string(b)] = true
		}
	}
	for _, k := range []string{"seq", "ts", "user", "event", "region", "level", "amount", "ok", "session", "text"} {
		if len(fields[k]) < 2 {
			t.Errorf("field %q: %d distinct values in 100 payloads", k, len(fields[k]))
		}
	}
	// Not mostly one repeated byte.
	p := newPayloadGen(3, 1024).next()
	counts := map[byte]int{}
	for _, c := range p {
		counts[c]++
	}
	if len(counts) < 20 {
		t.Errorf("only %d distinct bytes in a 1 KiB payload", len(counts))
	}
}

func TestLatencyHistQuantilesWithinOnePointSixPercent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	h := newLatencyHist()
	var samples []time.Duration
	for i := 0; i < 100_000; i++ {
		// Log-uniform from 1 µs to ~10 s.
		d := time.Duration(math.Exp(r.Float64()*math.Log(1e7))) * time.Microsecond
		samples = append(samples, d)
		h.record(d)
	}
	slices.Sort(samples)
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
		exact := samples[int(math.Ceil(q*float64(len(samples))))-1]
		got := h.quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/64+float64(time.Microsecond) {
			t.Errorf("q%v = %v, exact %v", q, got, exact)
		}
	}
	if h.max != samples[len(samples)-1] || h.quantile(1) != h.max {
		t.Errorf("max %v, q1 %v, want %v", h.max, h.quantile(1), samples[len(samples)-1])
	}
}

func TestLatencyHistEdgesAndMerge(t *testing.T) {
	h := newLatencyHist()
	if h.quantile(0.5) != 0 || h.mean() != 0 {
		t.Fatal("empty histogram is not zero")
	}
	h.record(-time.Second) // clamped to 0
	h.record(0)
	h.record(100 * time.Microsecond) // exact below 128 µs
	if got := h.quantile(1); got != 100*time.Microsecond {
		t.Errorf("q1 = %v", got)
	}
	huge := newLatencyHist()
	huge.record(1000 * time.Hour) // beyond the last bucket: counted, clamped
	h.merge(huge)
	if h.n != 4 || h.max != 1000*time.Hour || h.quantile(1) != 1000*time.Hour {
		t.Errorf("after merge: n %d max %v q1 %v", h.n, h.max, h.quantile(1))
	}
	if h.quantile(0.5) != 0 {
		t.Errorf("median %v, want 0", h.quantile(0.5))
	}
	// Every bucket's upper edge maps back into that bucket, and the
	// next value into the next one: the buckets tile the range.
	for i := 0; i < histBuckets-1; i++ {
		u := histUpper(i)
		if histBucket(u) != i || histBucket(u+1) != i+1 {
			t.Fatalf("bucket %d: upper %d maps to %d, upper+1 to %d", i, u, histBucket(u), histBucket(u+1))
		}
	}
	if histBucket(math.MaxUint64) != histBuckets-1 {
		t.Fatalf("max value maps to bucket %d of %d", histBucket(math.MaxUint64), histBuckets)
	}
}

func TestPerfStatsIntervalsFoldIntoTotal(t *testing.T) {
	s := newPerfStats()
	s.record(time.Millisecond, 100, nil)
	s.record(3*time.Millisecond, 100, nil)
	s.record(0, 0, context.DeadlineExceeded)
	msgs, nb, errs, h, first := s.takeInterval()
	if msgs != 2 || nb != 200 || errs != 1 || h.n != 2 || first == nil {
		t.Fatalf("interval: %d msgs %d bytes %d errs %d samples %v", msgs, nb, errs, h.n, first)
	}
	s.record(2*time.Millisecond, 50, nil)
	sum := s.summary("t", "publish", 2*time.Second)
	if sum.Messages != 3 || sum.Bytes != 250 || sum.Errors != 1 || sum.MsgPerSec != 1.5 || sum.Latency.Max != 3 {
		t.Fatalf("summary %+v", sum)
	}
	var out bytes.Buffer
	if err := printPerfSummary(&out, sum, true); err != nil {
		t.Fatal(err)
	}
	var back perfSummary
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back != sum {
		t.Fatalf("JSON round trip: %s, %v", out.String(), err)
	}
}
