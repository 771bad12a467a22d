package ledger

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func closedLedger(last int64, segs ...Segment) Metadata {
	return Metadata{Version: MetadataVersion, EnsembleSize: 3, WriteQuorum: 2, AckQuorum: 2,
		State: StateClosed, LastEntry: last, Ensembles: segs}
}

func TestPlanRecovery(t *testing.T) {
	isB := func(b string) bool { return b == "b" }
	two := []Segment{{FirstEntry: 0, Bookies: []string{"a", "b", "c"}}, {FirstEntry: 6, Bookies: []string{"a", "d", "b"}}}
	for _, tc := range []struct {
		name string
		md   Metadata
		want []Fragment
	}{
		{"one segment", closedLedger(9, Segment{0, []string{"a", "b", "c"}}),
			[]Fragment{{Segment: 0, Index: 1, Bookie: "b", First: 0, Last: 9}}},
		{"two segments, lost in both", closedLedger(10, two...),
			[]Fragment{{Segment: 0, Index: 1, Bookie: "b", First: 0, Last: 5}, {Segment: 1, Index: 2, Bookie: "b", First: 6, Last: 10}}},
		{"empty ledger", closedLedger(-1, Segment{0, []string{"a", "b", "c"}}),
			[]Fragment{{Segment: 0, Index: 1, Bookie: "b", First: 0, Last: -1}}},
		{"last segment past the last entry", closedLedger(5, two...),
			[]Fragment{{Segment: 0, Index: 1, Bookie: "b", First: 0, Last: 5}, {Segment: 1, Index: 2, Bookie: "b", First: 6, Last: 5}}},
		{"not on a lost bookie", closedLedger(3, Segment{0, []string{"a", "c", "d"}}), nil},
		{"open ledger is not planned", func() Metadata {
			m := closedLedger(-1, two...)
			m.State = StateOpen
			return m
		}(), nil},
		{"in-recovery ledger is not planned", func() Metadata {
			m := closedLedger(-1, two...)
			m.State = StateInRecovery
			return m
		}(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.md.Validate(); err != nil {
				t.Fatal(err)
			}
			got := PlanRecovery(&tc.md, isB)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestFragmentEntries: a fragment's entries are exactly those whose write
// set (WriteSet, the writer's striping) names its position.
func TestFragmentEntries(t *testing.T) {
	for e := 1; e <= 5; e++ {
		for qw := 1; qw <= e; qw++ {
			for idx := range e {
				f := Fragment{Index: idx, First: 3, Last: 40}
				var want []int64
				for id := f.First; id <= f.Last; id++ {
					if slices.Contains(WriteSet(id, e, qw), idx) {
						want = append(want, id)
					}
				}
				if got := f.Entries(e, qw); !slices.Equal(got, want) {
					t.Fatalf("E=%d Qw=%d idx=%d: got %v, want %v", e, qw, idx, got, want)
				}
			}
		}
	}
	if got := (Fragment{Index: 0, First: 6, Last: 5}).Entries(3, 2); got != nil {
		t.Fatalf("empty range: %v", got)
	}
	// E=3 Qw=2: position 1 holds entries 0,1 of every 3 (write sets {0,1},{1,2},{2,0}).
	if got := (Fragment{Index: 1, First: 0, Last: 5}).Entries(3, 2); !slices.Equal(got, []int64{0, 1, 3, 4}) {
		t.Fatalf("got %v", got)
	}
}

func TestWithFragmentReplaced(t *testing.T) {
	md := closedLedger(10, Segment{0, []string{"a", "b", "c"}}, Segment{6, []string{"a", "d", "b"}})
	f := PlanRecovery(&md, func(b string) bool { return b == "b" })
	n, err := md.WithFragmentReplaced(f[1], "e")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(n.Ensembles[1].Bookies, []string{"a", "d", "e"}) || !slices.Equal(n.Ensembles[0].Bookies, []string{"a", "b", "c"}) {
		t.Fatalf("ensembles %+v", n.Ensembles)
	}
	if md.Ensembles[1].Bookies[2] != "b" {
		t.Fatal("the original was changed")
	}
	for _, tc := range []struct {
		name string
		md   Metadata
		f    Fragment
		repl string
		want string
	}{
		{"already replaced", n, f[1], "x", "no longer has it"},
		{"replacement in the segment", md, f[1], "d", "already"},
		{"no such segment", md, Fragment{Segment: 5, Bookie: "b"}, "x", "no segment"},
		{"open ledger", func() Metadata { m := md.Clone(); m.State, m.LastEntry = StateOpen, -1; return m }(), f[0], "x", "not closed"},
	} {
		if _, err := tc.md.WithFragmentReplaced(tc.f, tc.repl); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
	if got := LostBookies(&md, func(b string) bool { return b == "b" || b == "d" }); !slices.Equal(got, []string{"b", "d"}) {
		t.Fatalf("LostBookies %v", got)
	}
}

func TestDueOpenLedgers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const grace = 10 * time.Second
	since := map[uint64]time.Time{}
	// First seen: waiting starts now, nothing due.
	if due := DueOpenLedgers(since, []uint64{7, 9}, t0, grace); len(due) != 0 {
		t.Fatalf("due at first sight: %v", due)
	}
	if !since[7].Equal(t0) || !since[9].Equal(t0) {
		t.Fatalf("since %v", since)
	}
	// Ledger 9 closed meanwhile (no longer waiting): forgotten. 11 is new.
	if due := DueOpenLedgers(since, []uint64{7, 11}, t0.Add(grace-time.Millisecond), grace); len(due) != 0 {
		t.Fatalf("due before the grace period: %v", due)
	}
	if _, ok := since[9]; ok {
		t.Fatal("a ledger no longer waiting is still timed")
	}
	// At the grace period 7 is due, 11 not yet; an id listed twice counts once.
	if due := DueOpenLedgers(since, []uint64{7, 11, 7}, t0.Add(grace), grace); !slices.Equal(due, []uint64{7}) {
		t.Fatalf("due at the grace period: %v, want [7]", due)
	}
	// Still open and waiting (the recovery failed): due again.
	if due := DueOpenLedgers(since, []uint64{11, 7}, t0.Add(2*grace), grace); !slices.Equal(due, []uint64{11, 7}) {
		t.Fatalf("due later: %v, want [11 7]", due)
	}
	// Nothing waiting: nothing timed.
	if due := DueOpenLedgers(since, nil, t0.Add(3*grace), grace); len(due) != 0 || len(since) != 0 {
		t.Fatalf("due %v, since %v", due, since)
	}
	// A zero or negative grace: due at first sight.
	if due := DueOpenLedgers(since, []uint64{3}, t0, -time.Second); !slices.Equal(due, []uint64{3}) {
		t.Fatalf("negative grace: %v", due)
	}
}
