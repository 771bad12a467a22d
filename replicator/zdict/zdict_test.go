package zdict

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/isobar-mq/isobar/internal/payloadgen"
	"github.com/isobar-mq/isobar/replicator/frame"
)

// step is one event of a table test and what the core must say after it.
type step struct {
	sample  int // entries of 100 bytes offered
	train   bool
	trained bool
	failed  bool
	frames  int     // frames of the version in use...
	ratio   float64 // ...at this gain (wire over plain, raw 1000, plain 800)
	stale   int     // frames of an older version, ignored

	wantState   State
	wantTrain   bool // Train said yes (when train)
	wantVersion int
	wantHeld    int
	wantDrift   bool // a Frame call returned drifted
}

func TestPolicy(t *testing.T) {
	p := Policy{Samples: 4, SampleBytes: 64, Window: 3, CompareEvery: 1, Drift: 0.05, Pause: 5}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"collects until Samples, then trains", []step{
			{sample: 3, wantState: Collecting, wantHeld: 3 * 64},
			{train: true, wantState: Collecting, wantHeld: 3 * 64},
			{sample: 1, train: true, wantTrain: true, wantState: Training},
			{trained: true, wantState: Using, wantVersion: 1},
		}},
		{"memory is bounded by Samples × SampleBytes", []step{
			{sample: 1000, wantState: Collecting, wantHeld: 4 * 64},
			{train: true, wantTrain: true, wantState: Training, wantHeld: 0},
			{sample: 1000, wantState: Training, wantHeld: 0},
		}},
		{"frames before the first dictionary measure nothing", []step{
			{stale: 50, wantState: Collecting},
		}},
		{"stable ratio keeps the dictionary", []step{
			{sample: 4, train: true, wantTrain: true, trained: true, wantState: Using, wantVersion: 1},
			{frames: 3, ratio: 0.80, wantState: Using, wantVersion: 1},
			{frames: 30, ratio: 0.84, wantState: Using, wantVersion: 1},
		}},
		{"drift past the tolerance retrains", []step{
			{sample: 4, train: true, wantTrain: true, trained: true, wantState: Using, wantVersion: 1},
			{frames: 3, ratio: 0.80, wantState: Using, wantVersion: 1},
			{frames: 2, ratio: 0.90, wantState: Using, wantVersion: 1},
			{frames: 1, ratio: 0.90, wantState: Collecting, wantVersion: 1, wantDrift: true},
			{sample: 4, train: true, wantTrain: true, wantState: Training, wantVersion: 1},
			{trained: true, wantState: Using, wantVersion: 2},
			// The new version's first window is its own baseline.
			{frames: 3, ratio: 0.90, wantState: Using, wantVersion: 2},
			{frames: 3, ratio: 0.94, wantState: Using, wantVersion: 2},
		}},
		{"frames of an older version do not count", []step{
			{sample: 4, train: true, wantTrain: true, trained: true, wantState: Using, wantVersion: 1},
			{frames: 3, ratio: 0.80, wantState: Using, wantVersion: 1},
			{stale: 10, wantState: Using, wantVersion: 1},
		}},
		{"a failed training pauses, then collects again", []step{
			{sample: 4, train: true, wantTrain: true, failed: true, wantState: Paused},
			{sample: 10, wantState: Paused, wantHeld: 0},
			{stale: 4, wantState: Paused},
			{stale: 1, wantState: Collecting},
			{sample: 4, train: true, wantTrain: true, trained: true, wantState: Using, wantVersion: 1},
		}},
		{"a failed retraining keeps the dictionary in use", []step{
			{sample: 4, train: true, wantTrain: true, trained: true, wantState: Using, wantVersion: 1},
			{frames: 3, ratio: 0.80, wantVersion: 1, wantState: Using},
			{frames: 3, ratio: 0.95, wantVersion: 1, wantState: Collecting, wantDrift: true},
			{sample: 4, train: true, wantTrain: true, failed: true, wantVersion: 1, wantState: Paused},
		}},
		{"Trained and Failed out of turn change nothing", []step{
			{trained: true, wantState: Collecting},
			{failed: true, wantState: Collecting},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := New(p)
			for i, s := range tc.steps {
				entry := bytes.Repeat([]byte("x"), 100)
				for range s.sample {
					n.Sample(entry)
				}
				if s.train {
					samples, ok := n.Train()
					if ok != s.wantTrain {
						t.Fatalf("step %d: Train = %v, want %v", i, ok, s.wantTrain)
					}
					if ok && (len(samples) != p.Samples || len(samples[0]) != p.SampleBytes) {
						t.Fatalf("step %d: %d samples of %d bytes", i, len(samples), len(samples[0]))
					}
				}
				if s.trained {
					n.Trained()
				}
				if s.failed {
					n.Failed()
				}
				drifted := false
				for range s.frames {
					plain := 0
					if n.Compare() {
						plain = 800
					}
					drifted = n.Frame(n.Version(), 1000, int(s.ratio*800), plain) || drifted
				}
				for range s.stale {
					drifted = n.Frame(0, 1000, 900, 900) || drifted
				}
				if n.State() != s.wantState || n.Version() != s.wantVersion || n.Held() != s.wantHeld || drifted != s.wantDrift {
					t.Fatalf("step %d: state %v version %d held %d drifted %v, want %v %d %d %v",
						i, n.State(), n.Version(), n.Held(), drifted, s.wantState, s.wantVersion, s.wantHeld, s.wantDrift)
				}
			}
		})
	}
}

func TestSampleCopies(t *testing.T) {
	n := New(Policy{Samples: 2})
	e := []byte("entry data")
	n.Sample(e, nil, []byte{})
	e[0] = 'X'
	n.Sample([]byte("other"))
	samples, ok := n.Train()
	if !ok || string(samples[0]) != "entry data" {
		t.Fatalf("samples %q (ok %v): want a copy, empty entries skipped", samples, ok)
	}
}

func TestTrain(t *testing.T) {
	samples := payloadgen.New(payloadgen.Logs, 3).Messages(DefaultSamples)
	a, err := Train("platform/logs", 1, samples, Policy{}, zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Train("platform/logs", 1, samples, Policy{}, zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("two trainings on the same samples: %d and %d bytes, equal %v", len(a), len(b), bytes.Equal(a, b))
	if len(a) > DefaultDictBytes+1024 {
		t.Fatalf("dictionary of %d bytes", len(a))
	}
	if _, err := frame.NewDict(a, frame.Limits{}); err != nil {
		t.Fatalf("frame does not take the dictionary: %v", err)
	}
	c, _ := Train("platform/logs", 2, samples, Policy{}, zstd.SpeedFastest)
	if frame.IDOf(a) == frame.IDOf(c) {
		t.Fatal("versions 1 and 2 have the same id")
	}
	for _, bad := range [][][]byte{nil, samples[:3]} {
		if _, err := Train("ns/x", 1, bad, Policy{}, zstd.SpeedFastest); !errors.Is(err, ErrNoDictionary) {
			t.Fatalf("%d samples: err = %v, want ErrNoDictionary", len(bad), err)
		}
	}
}

// TestDriftStory runs the core as the replicator does on the payload
// set: order events are sampled and a dictionary trained; after their
// schema change (payloadgen.OrdersV2) frames compress worse with it,
// the core asks for a new one, and the retrained dictionary wins back.
func TestDriftStory(t *testing.T) {
	const per = 20 // a quiet topic: small frames, where dictionaries matter
	p := Policy{}
	n := New(p)
	gen := payloadgen.New(payloadgen.Orders, 11)
	var (
		enc     *frame.Encoder
		ratios  = map[int][]float64{}
		drifted bool
	)
	send := func(msgs [][]byte) {
		entries := make([]frame.Entry, len(msgs))
		for i, m := range msgs {
			entries[i] = frame.Entry{Pos: frame.Pos{Ledger: 1, Entry: int64(i)}, Data: m}
		}
		n.Sample(msgs...)
		if samples, ok := n.Train(); ok {
			data, err := Train("shop/orders", n.Version()+1, samples, p, zstd.SpeedFastest)
			if err != nil {
				t.Fatal(err)
			}
			d, err := frame.NewDict(data, frame.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if enc, err = frame.NewDictEncoder(d, zstd.SpeedFastest); err != nil {
				t.Fatal(err)
			}
			n.Trained()
		}
		version := n.Version()
		e := enc
		if e == nil {
			e = frame.NewEncoder()
		}
		compare := n.Compare()
		f, raw, err := e.Encode(nil, entries)
		if err != nil {
			t.Fatal(err)
		}
		plain := 0
		if compare {
			pf, _, _ := frame.NewEncoder().Encode(nil, entries)
			plain = len(pf)
		}
		ratios[version] = append(ratios[version], float64(len(f))/float64(raw))
		if n.Frame(version, raw, len(f), plain) {
			drifted = true
			t.Logf("drift seen at gain %.3f", n.Gain())
		}
	}
	for range 200 {
		send(gen.Messages(per))
	}
	if n.Version() != 1 || drifted {
		t.Fatalf("before drift: version %d, drifted %v", n.Version(), drifted)
	}
	t.Logf("before drift: gain %.3f, ratio %.3f", n.Gain(), n.Ratio())
	gen = payloadgen.New(payloadgen.OrdersV2, 12)
	for range 300 {
		send(gen.Messages(per))
	}
	if !drifted || n.Version() != 2 {
		t.Fatalf("after drift: version %d, drifted %v (ratios by version: %v)", n.Version(), drifted, summary(ratios))
	}
	t.Logf("after retraining: gain %.3f, ratio %.3f; mean wire/raw by dictionary version: %s", n.Gain(), n.Ratio(), summary(ratios))
}

func summary(r map[int][]float64) string {
	var b strings.Builder
	for v := range 3 {
		if len(r[v]) == 0 {
			continue
		}
		var s float64
		for _, x := range r[v] {
			s += x
		}
		fmt.Fprintf(&b, "v%d: %.3f; ", v, s/float64(len(r[v])))
	}
	return b.String()
}
