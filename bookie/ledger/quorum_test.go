package ledger

import (
	"fmt"
	"slices"
	"testing"
)

func TestWriteSet(t *testing.T) {
	for _, tc := range []struct {
		entry     int64
		e, qw     int
		want      []int
		wantMaskS string
	}{
		{0, 3, 2, []int{0, 1}, "011"},
		{1, 3, 2, []int{1, 2}, "110"},
		{2, 3, 2, []int{2, 0}, "101"},
		{3, 3, 2, []int{0, 1}, "011"},
		{4, 3, 3, []int{1, 2, 0}, "111"},
		{7, 5, 3, []int{2, 3, 4}, "11100"},
		{9, 5, 3, []int{4, 0, 1}, "10011"},
		{5, 1, 1, []int{0}, "1"},
		{1 << 40, 4, 2, []int{0, 1}, "0011"},
		{63, 64, 2, []int{63, 0}, "1" + fmt.Sprintf("%062b", 0) + "1"},
	} {
		got := WriteSet(tc.entry, tc.e, tc.qw)
		if !slices.Equal(got, tc.want) {
			t.Errorf("WriteSet(%d, %d, %d) = %v, want %v", tc.entry, tc.e, tc.qw, got, tc.want)
		}
		m := writeSetMask(tc.entry, tc.e, tc.qw)
		if s := fmt.Sprintf("%0*b", tc.e, m); s != tc.wantMaskS {
			t.Errorf("writeSetMask(%d, %d, %d) = %s, want %s", tc.entry, tc.e, tc.qw, s, tc.wantMaskS)
		}
	}
}

// ackStep is one event for the ack tracker and what must follow.
type ackStep struct {
	op        string // add, confirm, unconfirm, quorum
	id        int64
	idx       int // confirm/unconfirm: ensemble index; quorum: new quorum
	wantAcked int
	wantLAC   int64
}

func TestAckTracker(t *testing.T) {
	add := func(lac int64) ackStep { return ackStep{op: "add", wantLAC: lac} }
	confirm := func(id int64, idx, acked int, lac int64) ackStep {
		return ackStep{op: "confirm", id: id, idx: idx, wantAcked: acked, wantLAC: lac}
	}
	for _, tc := range []struct {
		name      string
		e, qw, qa int
		start     int64
		steps     []ackStep
	}{
		{"in order", 3, 2, 2, -1, []ackStep{
			add(-1), add(-1),
			confirm(0, 0, 0, -1), confirm(0, 1, 1, 0),
			confirm(1, 1, 0, 0), confirm(1, 2, 1, 1),
		}},
		{"out of order confirmations wait for the head", 3, 2, 2, -1, []ackStep{
			add(-1), add(-1), add(-1),
			confirm(2, 2, 0, -1), confirm(2, 0, 0, -1), // entry 2 complete, 0 is not
			confirm(1, 1, 0, -1), confirm(1, 2, 0, -1), // entry 1 complete
			confirm(0, 1, 0, -1), confirm(0, 0, 3, 2), // head completes: 0, 1, 2 at once
		}},
		{"duplicates count once", 3, 3, 2, -1, []ackStep{
			add(-1),
			confirm(0, 0, 0, -1), confirm(0, 0, 0, -1), confirm(0, 0, 0, -1),
			confirm(0, 2, 1, 0),
			confirm(0, 1, 0, 0), // late third confirmation of an acked entry
		}},
		{"index outside the write set is ignored", 3, 2, 2, -1, []ackStep{
			add(-1),
			confirm(0, 2, 0, -1), confirm(0, 0, 0, -1), confirm(0, 7, 0, -1), confirm(0, -1, 0, -1),
			confirm(0, 1, 1, 0),
		}},
		{"unknown entries are ignored", 3, 2, 2, -1, []ackStep{
			add(-1),
			confirm(5, 0, 0, -1), confirm(-1, 0, 0, -1),
			confirm(0, 0, 0, -1), confirm(0, 1, 1, 0),
		}},
		{"a failed bookie's confirmation is withdrawn", 3, 3, 2, -1, []ackStep{
			add(-1), add(-1),
			confirm(0, 0, 0, -1), confirm(1, 0, 0, -1),
			{op: "unconfirm", idx: 0, wantLAC: -1},
			confirm(0, 1, 0, -1), // only one valid confirmation now
			confirm(0, 2, 1, 0),
			confirm(1, 1, 0, 0), confirm(1, 2, 1, 1),
		}},
		{"qa 1 acks on first answer", 3, 2, 1, -1, []ackStep{
			add(-1), add(-1),
			confirm(1, 2, 0, -1), confirm(0, 1, 2, 1),
		}},
		{"lowering the quorum acknowledges", 3, 3, 3, -1, []ackStep{
			add(-1), add(-1),
			confirm(0, 0, 0, -1), confirm(0, 1, 0, -1), confirm(1, 1, 0, -1), confirm(1, 2, 0, -1),
			{op: "quorum", idx: 2, wantAcked: 2, wantLAC: 1},
		}},
		{"starts after an existing LAC", 3, 2, 2, 41, []ackStep{
			add(41), confirm(42, 0, 0, 41), confirm(42, 2, 0, 41), confirm(42, 1, 1, 42), confirm(41, 0, 0, 42),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newAckTracker(tc.e, tc.qw, tc.qa, tc.start)
			for i, s := range tc.steps {
				got := 0
				switch s.op {
				case "add":
					want := tr.Next()
					if id := tr.Add(); id != want {
						t.Fatalf("step %d: Add = %d, want %d", i, id, want)
					}
				case "confirm":
					got = tr.Confirm(s.id, s.idx)
				case "unconfirm":
					tr.Unconfirm(s.idx)
				case "quorum":
					got = tr.SetQuorum(s.idx)
				}
				if got != s.wantAcked || tr.LAC() != s.wantLAC {
					t.Fatalf("step %d (%+v): acked %d, LAC %d; want %d, %d", i, s, got, tr.LAC(), s.wantAcked, s.wantLAC)
				}
			}
		})
	}
}

func TestAckTrackerLong(t *testing.T) {
	// Many entries confirmed in reverse order: nothing until the first, then all.
	tr := newAckTracker(5, 3, 2, -1)
	const n = 1000
	for range n {
		tr.Add()
	}
	for id := int64(n - 1); id >= 1; id-- {
		ws := WriteSet(id, 5, 3)
		if got := tr.Confirm(id, ws[0]) + tr.Confirm(id, ws[2]); got != 0 {
			t.Fatalf("entry %d acknowledged before entry 0", id)
		}
	}
	if got := tr.Confirm(0, 1); got != 0 {
		t.Fatal("entry 0 acknowledged with one confirmation")
	}
	if got := tr.Confirm(0, 0); got != n || tr.LAC() != n-1 || tr.Pending() != 0 {
		t.Fatalf("acked %d, LAC %d, pending %d", got, tr.LAC(), tr.Pending())
	}
	// The tracker keeps working after compaction.
	id := tr.Add()
	if tr.Confirm(id, int(id%5)) != 0 || tr.Confirm(id, int((id+1)%5)) != 1 || tr.LAC() != id {
		t.Fatal("tracker broken after compaction")
	}
}

func TestFenceTracker(t *testing.T) {
	for _, tc := range []struct {
		e, qw, qa      int
		fenced, failed []int
		done, imposs   bool
	}{
		// E3 Qw2 Qa2: one fenced bookie per write set ({0,1} {1,2} {2,0}) suffices.
		{3, 2, 2, nil, nil, false, false},
		{3, 2, 2, []int{0}, nil, false, false},
		{3, 2, 2, []int{1}, []int{0}, false, false},
		{3, 2, 2, []int{0, 2}, nil, true, false},
		{3, 2, 2, []int{1}, []int{0, 2}, false, true}, // write set {2,0} has nobody left
		{3, 2, 2, []int{0, 1, 2}, nil, true, false},
		// E3 Qw3 Qa2: two of the three.
		{3, 3, 2, []int{0}, nil, false, false},
		{3, 3, 2, []int{0, 2}, []int{1}, true, false},
		{3, 3, 2, []int{0}, []int{1, 2}, false, true},
		// E3 Qw2 Qa1: every bookie of every write set, i.e. all.
		{3, 2, 1, []int{0, 1}, nil, false, false},
		{3, 2, 1, []int{0, 1}, []int{2}, false, true},
		{3, 2, 1, []int{0, 1, 2}, nil, true, false},
		// E5 Qw3 Qa2: two in each window of three consecutive bookies.
		{5, 3, 2, []int{0, 2, 4}, nil, false, false}, // window {4,0,1} has 0 and 4: ok; {1,2,3} has only 2
		{5, 3, 2, []int{0, 1, 3, 4}, nil, true, false},
		{5, 3, 2, []int{0, 2, 3}, []int{1, 4}, false, true}, // {4,0,1}: only 0 can answer
		// E1: the only bookie.
		{1, 1, 1, []int{0}, nil, true, false},
		{1, 1, 1, nil, []int{0}, false, true},
	} {
		f := newFenceTracker(tc.e, tc.qw, tc.qa)
		for _, i := range tc.fenced {
			f.Fenced(i)
		}
		for _, i := range tc.failed {
			f.Failed(i)
		}
		if f.Done() != tc.done || f.Impossible() != tc.imposs {
			t.Errorf("E%d Qw%d Qa%d fenced %v failed %v: done %v impossible %v, want %v %v",
				tc.e, tc.qw, tc.qa, tc.fenced, tc.failed, f.Done(), f.Impossible(), tc.done, tc.imposs)
		}
	}
}

func TestEntryVote(t *testing.T) {
	for _, tc := range []struct {
		qw, qa, found, missing, failed int
		want                           entryOutcome
	}{
		{2, 2, 0, 0, 0, entryUndecided},
		{2, 2, 1, 0, 0, entryPresent},
		{2, 2, 1, 1, 0, entryPresent},
		{2, 2, 0, 1, 0, entryUndecided}, // the other bookie may still return a copy
		{2, 2, 0, 2, 0, entryAbsent},
		{2, 2, 0, 1, 1, entryAbsent}, // Qw−Qa+1 = 1: the failed one alone cannot have acked it
		{2, 2, 0, 0, 1, entryUndecided},
		{2, 2, 0, 0, 2, entryUnknown},
		{3, 2, 0, 1, 0, entryUndecided},
		{3, 2, 0, 2, 0, entryUndecided},
		{3, 2, 0, 2, 1, entryAbsent},
		{3, 2, 0, 3, 0, entryAbsent},
		{3, 2, 0, 1, 2, entryUnknown},
		{3, 2, 1, 2, 0, entryPresent},
		{3, 3, 0, 1, 2, entryAbsent},
		{3, 1, 0, 2, 0, entryUndecided},
		{3, 1, 0, 3, 0, entryAbsent},
		{3, 1, 0, 2, 1, entryUnknown}, // the bookie that failed may hold the only copy
		{1, 1, 0, 1, 0, entryAbsent},
		{1, 1, 0, 0, 1, entryUnknown},
	} {
		if got := entryVote(tc.qw, tc.qa, tc.found, tc.missing, tc.failed); got != tc.want {
			t.Errorf("entryVote(qw %d, qa %d, found %d, missing %d, failed %d) = %v, want %v",
				tc.qw, tc.qa, tc.found, tc.missing, tc.failed, got, tc.want)
		}
	}
}

// TestQuorumIntersection checks the property recovery relies on, for every
// small configuration: if an entry was acknowledged (Qa bookies of its write
// set have it), fencing/absence by Qw−Qa+1 bookies of the write set always
// includes one that has it.
func TestQuorumIntersection(t *testing.T) {
	for qw := 1; qw <= 6; qw++ {
		for qa := 1; qa <= qw; qa++ {
			if qa+fenceQuorum(qw, qa) <= qw {
				t.Errorf("Qw %d Qa %d: ack quorum and fence quorum need not intersect", qw, qa)
			}
		}
	}
}
