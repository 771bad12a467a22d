package ackset

import (
	"errors"
	"testing"
)

func pos(l, e int64) Position { return Position{l, e} }

// layout is a managed ledger's ledgers and their entry counts, in order.
type layout []struct{ ledger, entries int64 }

// next is the position after p in the layout, skipping empty ledgers.
func (ly layout) next(p Position) (Position, bool) {
	for _, l := range ly {
		if l.ledger == p.Ledger && p.Entry+1 < l.entries {
			return Position{p.Ledger, p.Entry + 1}, true
		}
		if l.ledger > p.Ledger && l.entries > 0 {
			return Position{l.ledger, 0}, true
		}
	}
	return Position{}, false
}

// testLayout: ledger 1 has 10 entries, 2 is empty, 3 has 5, 4 has 10.
var testLayout = layout{{1, 10}, {2, 0}, {3, 5}, {4, 10}}

type step struct {
	op       string // ack, range, cum, inledger, advance
	from, to Position
	changed  bool
	err      error
}

func ack(l, e int64, changed bool) step { return step{op: "ack", from: pos(l, e), changed: changed} }
func rng(l, a, b int64, changed bool) step {
	return step{op: "range", from: pos(l, a), to: pos(l, b), changed: changed}
}
func cum(l, e int64, changed bool) step { return step{op: "cum", from: pos(l, e), changed: changed} }

func apply(t *testing.T, s *Set, i int, st step) {
	t.Helper()
	var changed bool
	var err error
	switch st.op {
	case "ack":
		changed, err = s.Ack(st.from)
	case "range":
		changed, err = s.AckRange(st.from, st.to)
	case "cum":
		changed = s.AckCumulative(st.from)
	case "inledger":
		changed = s.AdvanceInLedger()
	case "advance":
		changed = s.Advance(testLayout.next)
	default:
		t.Fatalf("step %d: unknown op %q", i, st.op)
	}
	if st.err != nil {
		if !errors.Is(err, st.err) {
			t.Fatalf("step %d %s %v..%v: err = %v, want %v", i, st.op, st.from, st.to, err, st.err)
		}
	} else if err != nil {
		t.Fatalf("step %d %s %v..%v: unexpected error %v", i, st.op, st.from, st.to, err)
	}
	if changed != st.changed {
		t.Fatalf("step %d %s %v..%v: changed = %v, want %v (now md %v %v)", i, st.op, st.from, st.to, changed, st.changed, s.md, s)
	}
	checkInvariants(t, s)
}

// checkInvariants verifies that ranges are valid, sorted, disjoint,
// non-adjacent and after the mark-delete position.
func checkInvariants(t testing.TB, s *Set) {
	t.Helper()
	for i, r := range s.ranges {
		if r.Ledger < 0 || r.First < 0 || r.Last < r.First {
			t.Fatalf("range %d %v invalid in %v", i, r, s)
		}
		if r.Start().Compare(s.md) <= 0 {
			t.Fatalf("range %d %v not after mark-delete %v", i, r, s.md)
		}
		if i > 0 {
			p := s.ranges[i-1]
			if p.Ledger > r.Ledger || (p.Ledger == r.Ledger && p.Last+1 >= r.First) {
				t.Fatalf("ranges %d %v and %d %v overlap, touch or are unsorted in %v", i-1, p, i, r, s)
			}
		}
	}
}

func TestSet(t *testing.T) {
	tests := []struct {
		name   string
		md     Position
		max    int
		steps  []step
		wantMD Position
		want   string
		count  int64
	}{
		{name: "empty", md: pos(1, 4), wantMD: pos(1, 4), want: "[]"},
		{
			name: "in order merges", md: pos(1, 4),
			steps:  []step{ack(1, 6, true), ack(1, 7, true), ack(1, 8, true)},
			wantMD: pos(1, 4), want: "[(1:5..1:8]]", count: 3,
		},
		{
			name: "out of order fills gap from both sides", md: pos(1, 0),
			steps:  []step{ack(1, 9, true), ack(1, 5, true), ack(1, 7, true), ack(1, 6, true), ack(1, 8, true)},
			wantMD: pos(1, 0), want: "[(1:4..1:9]]", count: 5,
		},
		{
			name: "duplicate ack is no-op", md: pos(1, 0),
			steps:  []step{ack(1, 3, true), ack(1, 3, false), rng(1, 5, 7, true), ack(1, 6, false), rng(1, 5, 7, false), rng(1, 6, 6, false)},
			wantMD: pos(1, 0), want: "[(1:2..1:3],(1:4..1:7]]", count: 4,
		},
		{
			name: "acks at or before mark-delete are no-ops", md: pos(2, 5),
			steps:  []step{ack(2, 5, false), ack(2, 0, false), ack(1, 100, false), rng(1, 0, 9, false), rng(2, 0, 5, false)},
			wantMD: pos(2, 5), want: "[]",
		},
		{
			name: "range straddling mark-delete is clipped", md: pos(2, 5),
			steps:  []step{rng(2, 3, 8, true)},
			wantMD: pos(2, 5), want: "[(2:5..2:8]]", count: 3,
		},
		{
			name: "overlapping ranges merge", md: pos(1, -1),
			steps:  []step{rng(1, 2, 4, true), rng(1, 8, 10, true), rng(1, 14, 16, true), rng(1, 3, 15, true)},
			wantMD: pos(1, -1), want: "[(1:1..1:16]]", count: 15,
		},
		{
			name: "range touching neighbour on left only", md: pos(1, -1),
			steps:  []step{rng(1, 2, 4, true), rng(1, 5, 6, true), rng(1, 9, 9, true)},
			wantMD: pos(1, -1), want: "[(1:1..1:6],(1:8..1:9]]", count: 6,
		},
		{
			name: "range touching neighbour on right only", md: pos(1, -1),
			steps:  []step{rng(1, 5, 6, true), rng(1, 3, 4, true), rng(1, 0, 0, true)},
			wantMD: pos(1, -1), want: "[(1:-1..1:0],(1:2..1:6]]", count: 5,
		},
		{
			name: "ranges in different ledgers never merge", md: pos(1, 0),
			steps:  []step{ack(1, 9, true), ack(3, 0, true), ack(2, 0, true)},
			wantMD: pos(1, 0), want: "[(1:8..1:9],(2:-1..2:0],(3:-1..3:0]]", count: 3,
		},
		{
			name: "cumulative ack drops and trims ranges", md: pos(1, 0),
			steps: []step{
				rng(1, 3, 5, true), rng(1, 8, 9, true), rng(3, 1, 4, true), ack(4, 2, true),
				cum(3, 2, true),
			},
			wantMD: pos(3, 2), want: "[(3:2..3:4],(4:1..4:2]]", count: 3,
		},
		{
			name: "cumulative ack at range end drops it", md: pos(1, 0),
			steps:  []step{rng(1, 3, 5, true), ack(1, 7, true), cum(1, 5, true)},
			wantMD: pos(1, 5), want: "[(1:6..1:7]]", count: 1,
		},
		{
			name: "cumulative ack behind is no-op", md: pos(3, 3),
			steps:  []step{ack(3, 5, true), cum(3, 3, false), cum(1, 9, false)},
			wantMD: pos(3, 3), want: "[(3:4..3:5]]", count: 1,
		},
		{
			name: "cumulative ack does not absorb next range", md: pos(1, 0),
			steps:  []step{rng(1, 4, 6, true), cum(1, 3, true)},
			wantMD: pos(1, 3), want: "[(1:3..1:6]]", count: 3,
		},
		{
			name: "in-ledger merge", md: pos(1, 2),
			steps:  []step{rng(1, 3, 5, true), ack(1, 7, true), {op: "inledger", changed: true}, {op: "inledger"}},
			wantMD: pos(1, 5), want: "[(1:6..1:7]]", count: 1,
		},
		{
			name: "in-ledger merge from entry -1", md: pos(3, -1),
			steps:  []step{ack(3, 0, true), {op: "inledger", changed: true}},
			wantMD: pos(3, 0), want: "[]",
		},
		{
			name: "in-ledger merge stops at ledger end", md: pos(1, 7),
			steps:  []step{rng(1, 8, 9, true), ack(3, 0, true), {op: "inledger", changed: true}, {op: "inledger"}},
			wantMD: pos(1, 9), want: "[(3:-1..3:0]]", count: 1,
		},
		{
			name: "advance over ledger boundary and empty ledger", md: pos(1, 7),
			steps: []step{
				rng(1, 8, 9, true), rng(3, 0, 4, true), rng(4, 0, 2, true), ack(4, 5, true),
				{op: "advance", changed: true}, {op: "advance"},
			},
			wantMD: pos(4, 2), want: "[(4:4..4:5]]", count: 1,
		},
		{
			name: "advance stops at gap", md: pos(1, 7),
			steps:  []step{ack(1, 9, true), {op: "advance"}},
			wantMD: pos(1, 7), want: "[(1:8..1:9]]", count: 1,
		},
		{
			name: "advance stops at end of layout", md: pos(4, 7),
			steps:  []step{rng(4, 8, 9, true), ack(5, 0, true), {op: "advance", changed: true}},
			wantMD: pos(4, 9), want: "[(5:-1..5:0]]", count: 1,
		},
		{
			name: "max ranges refuses a new range only", md: pos(1, -1), max: 2,
			steps: []step{
				ack(1, 1, true), ack(1, 5, true),
				{op: "ack", from: pos(1, 9), err: ErrTooManyRanges},
				ack(1, 2, true), rng(1, 3, 4, true), // extends, then merges to one
				ack(1, 9, true),
				{op: "ack", from: pos(3, 0), err: ErrTooManyRanges},
			},
			wantMD: pos(1, -1), want: "[(1:0..1:5],(1:8..1:9]]", count: 6,
		},
		{
			name: "invalid positions", md: pos(1, -1),
			steps: []step{
				{op: "ack", from: pos(1, -1), err: ErrInvalidPosition},
				{op: "ack", from: pos(-1, 0), err: ErrInvalidPosition},
				{op: "range", from: pos(1, 5), to: pos(1, 4), err: ErrInvalidPosition},
				{op: "range", from: pos(1, 5), to: pos(3, 1), err: ErrCrossLedger},
			},
			wantMD: pos(1, -1), want: "[]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.md)
			s.MaxRanges = tt.max
			for i, st := range tt.steps {
				apply(t, s, i, st)
			}
			if s.MarkDelete() != tt.wantMD {
				t.Errorf("MarkDelete() = %v, want %v", s.MarkDelete(), tt.wantMD)
			}
			if got := s.String(); got != tt.want {
				t.Errorf("String() = %s, want %s", got, tt.want)
			}
			if got := s.Count(); got != tt.count {
				t.Errorf("Count() = %d, want %d", got, tt.count)
			}
			if s.Len() != len(s.Ranges()) {
				t.Errorf("Len() = %d, len(Ranges()) = %d", s.Len(), len(s.Ranges()))
			}
			roundTrip(t, s)
		})
	}
}

func TestIsAcked(t *testing.T) {
	s := New(pos(2, 3))
	for _, st := range []step{rng(2, 5, 6, true), ack(4, 0, true)} {
		apply(t, s, 0, st)
	}
	for _, c := range []struct {
		p    Position
		want bool
	}{
		{pos(1, 100), true}, {pos(2, 3), true}, {pos(2, 4), false}, {pos(2, 5), true},
		{pos(2, 6), true}, {pos(2, 7), false}, {pos(3, 0), false}, {pos(4, 0), true}, {pos(4, 1), false},
	} {
		if got := s.IsAcked(c.p); got != c.want {
			t.Errorf("IsAcked(%v) = %v, want %v", c.p, got, c.want)
		}
	}
}

func TestRangesIsCopy(t *testing.T) {
	s := New(pos(1, 0))
	s.Ack(pos(1, 5))
	r := s.Ranges()
	r[0].Last = 100
	if s.IsAcked(pos(1, 6)) {
		t.Fatal("mutating Ranges() result changed the set")
	}
}

func TestExtremes(t *testing.T) {
	const max = 1<<63 - 1
	s := New(pos(1, max-3))
	apply(t, s, 0, rng(1, max-1, max, true))
	apply(t, s, 1, ack(1, max-2, true))
	if got, want := s.String(), "[(1:9223372036854775804..1:9223372036854775807]]"; got != want {
		t.Fatalf("String() = %s, want %s", got, want)
	}
	apply(t, s, 2, step{op: "inledger", changed: true})
	apply(t, s, 3, ack(1, max, false))
	roundTrip(t, s)

	s = New(pos(0, -1))
	apply(t, s, 0, rng(0, 0, max, true))
	apply(t, s, 1, rng(max, 0, max, true))
	if got := s.Count(); got != max {
		t.Fatalf("Count() = %d, want saturation at %d", got, int64(max))
	}
	roundTrip(t, s)
	apply(t, s, 2, cum(0, max, true))
	roundTrip(t, s)

	// A mark-delete far below -1 (only reachable through New) still encodes.
	s = New(pos(1, -max-1))
	apply(t, s, 0, ack(1, 10, true))
	roundTrip(t, s)
	apply(t, s, 1, ack(1, 0, true))
	roundTrip(t, s)
}
