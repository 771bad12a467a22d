package ledger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCoreRandomized drives the write core with random interleavings of
// appends, bookie answers, bookie deaths and ensemble changes, and checks:
// callbacks come once each, in entry order, successes before the first
// failure; the LAC is the last success; and every acknowledged entry has at
// least Qa copies on the bookies its final metadata says hold it.
func TestCoreRandomized(t *testing.T) {
	for seed := range uint64(400) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runCoreSim(t, seed) })
	}
}

func runCoreSim(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	e := 1 + rng.IntN(5)
	qw := 1 + rng.IntN(e)
	qa := 1 + rng.IntN(qw)
	const pool = 9
	var ensemble []string
	for i := range e {
		ensemble = append(ensemble, fmt.Sprintf("b%d", i))
	}
	md := Metadata{Version: 1, EnsembleSize: e, WriteQuorum: qw, AckQuorum: qa, State: StateOpen, LastEntry: -1,
		Ensembles: []Segment{{FirstEntry: 0, Bookies: slices.Clone(ensemble)}}}
	c := newWriteCore(1, e, qw, qa, false, md.Last(), -1, 0)

	dead := map[string]bool{}
	used := map[string]bool{}
	for _, b := range ensemble {
		used[b] = true
	}
	stored := map[int64]map[string]bool{}
	var inflight []sendOp
	var change *changeRequest
	var done []completion
	collect := func() {
		s, d, ch := c.Ready()
		inflight = append(inflight, s...)
		done = append(done, d...)
		if ch != nil {
			if change != nil {
				t.Fatalf("second change requested while one runs")
			}
			change = ch
		}
	}
	appended := 0
	for step := 0; step < 400; step++ {
		switch r := rng.IntN(100); {
		case r < 30 && appended < 150:
			c.Append([]byte{byte(appended)}, nil)
			appended++
		case r < 85 && len(inflight) > 0:
			i := rng.IntN(len(inflight))
			op := inflight[i]
			inflight = slices.Delete(inflight, i, i+1)
			if dead[op.Bookie] || rng.IntN(200) == 0 {
				c.AddResult(op.Entry, op.Index, op.Bookie, errBookieDown)
				continue
			}
			if stored[op.Entry] == nil {
				stored[op.Entry] = map[string]bool{}
			}
			stored[op.Entry][op.Bookie] = true
			c.AddResult(op.Entry, op.Index, op.Bookie, nil)
		case r < 86 && len(dead) < 3:
			b := fmt.Sprintf("b%d", rng.IntN(pool))
			dead[b] = true
		case change != nil:
			// Complete the running change: replace what live unused bookies allow.
			repl := map[int]string{}
			for _, idx := range change.Failed {
				for k := range pool {
					b := fmt.Sprintf("b%d", k)
					if !used[b] && !dead[b] {
						repl[idx] = b
						used[b] = true
						break
					}
				}
			}
			if len(repl) == 0 {
				c.EnsembleChangeFailed(fmt.Errorf("%w: none", ErrNotEnoughBookies))
			} else {
				n, err := md.WithEnsembleChange(change.Start, repl)
				if err != nil {
					t.Fatal(err)
				}
				md = n
				c.EnsembleChanged(change.Start, repl)
			}
			change = nil
		default:
			if c.Degraded() {
				c.RetryChange()
			}
		}
		collect()
	}
	// Drain: answer everything; finish changes until quiet.
	for range 10000 {
		if change != nil {
			c.EnsembleChangeFailed(fmt.Errorf("%w: draining", ErrNotEnoughBookies))
			change = nil
		} else if len(inflight) > 0 {
			op := inflight[0]
			inflight = inflight[1:]
			if dead[op.Bookie] {
				c.AddResult(op.Entry, op.Index, op.Bookie, errBookieDown)
			} else {
				if stored[op.Entry] == nil {
					stored[op.Entry] = map[string]bool{}
				}
				stored[op.Entry][op.Bookie] = true
				c.AddResult(op.Entry, op.Index, op.Bookie, nil)
			}
		} else {
			break
		}
		collect()
	}
	if len(inflight) > 0 || change != nil {
		t.Fatal("simulation did not settle")
	}

	// Callbacks: once each, in order, failures only after the last success.
	lastOK := int64(-1)
	failed := false
	seen := map[int64]bool{}
	for _, d := range done {
		if d.Entry >= 0 {
			if seen[d.Entry] {
				t.Fatalf("entry %d completed twice", d.Entry)
			}
			seen[d.Entry] = true
		}
		if d.Err == nil {
			if failed || d.Entry != lastOK+1 {
				t.Fatalf("success for entry %d after last success %d (failed before: %v)", d.Entry, lastOK, failed)
			}
			lastOK = d.Entry
		} else {
			failed = true
			if !errors.Is(d.Err, ErrNotEnoughBookies) {
				t.Fatalf("unexpected error %v", d.Err)
			}
		}
	}
	if c.Err() == nil && (len(seen) != appended || !c.Idle()) {
		t.Fatalf("%d of %d entries completed, idle %v, err %v", len(seen), appended, c.Idle(), c.Err())
	}
	if c.LAC() != lastOK {
		t.Fatalf("LAC %d, last success %d", c.LAC(), lastOK)
	}
	// Durability against the final metadata.
	if err := md.Validate(); err != nil {
		t.Fatal(err)
	}
	for id := int64(0); id <= lastOK; id++ {
		seg := md.SegmentFor(id)
		n := 0
		for _, idx := range WriteSet(id, e, qw) {
			if stored[id][seg.Bookies[idx]] {
				n++
			}
		}
		if n < qa {
			t.Fatalf("E%d Qw%d Qa%d: acked entry %d has %d copies in its write set %v of %v (stored on %v)",
				e, qw, qa, id, n, WriteSet(id, e, qw), seg.Bookies, stored[id])
		}
	}
}
