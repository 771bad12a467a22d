package ledger

import (
	"fmt"
	"slices"
	"time"
)

// The pure core of automatic recovery (docs/ledger.md "Automatic
// recovery"): which entries of a ledger lost a copy with a bookie, and
// the metadata that points a segment at the bookie that holds them now.
// No I/O and no clock (the time is passed in); the auditor
// (autorecovery.go) drives it.

// Fragment is what one lost bookie held of one segment of a ledger: the
// entries of that segment whose write set includes the bookie's ensemble
// position. Recovery copies them to a replacement and swaps it in.
type Fragment struct {
	// Segment is the segment's index in Metadata.Ensembles.
	Segment int `json:"segment"`
	// Index is the lost bookie's position in the segment's ensemble.
	Index int `json:"index"`
	// Bookie is the lost bookie.
	Bookie string `json:"bookie"`
	// First and Last bound the segment's entries; Last < First when the
	// segment holds none (the fragment then needs only the metadata swap).
	First int64 `json:"firstEntry"`
	Last  int64 `json:"lastEntry"`
}

// Entries lists the fragment's entries (those of First..Last whose write
// set includes Index) for a ledger of ensemble size e and write quorum qw.
func (f Fragment) Entries(e, qw int) []int64 {
	var out []int64
	for id := f.First; id <= f.Last; id++ {
		if inWriteSet(id, e, qw, f.Index) {
			out = append(out, id)
		}
	}
	return out
}

// inWriteSet reports whether ensemble position idx is in entry id's write
// set: the qw positions starting at id mod e.
func inWriteSet(id int64, e, qw, idx int) bool {
	d := (idx - int(id%int64(e)) + e) % e
	return d < qw
}

// PlanRecovery lists the fragments of ledger md held by bookies for which
// lost is true, in segment then position order. Only a closed ledger is
// planned: an open or in-recovery one may still change its last segment
// (its writer's own ensemble changes replace a failed bookie there, and a
// writer refuses to go on once another client rewrote its ensembles), so
// it returns nil for them; the auditor reports them and plans them once
// they are closed.
func PlanRecovery(md *Metadata, lost func(bookie string) bool) []Fragment {
	if md.State != StateClosed {
		return nil
	}
	var out []Fragment
	for i, s := range md.Ensembles {
		last := md.LastEntry
		if i+1 < len(md.Ensembles) {
			last = min(last, md.Ensembles[i+1].FirstEntry-1)
		}
		for idx, b := range s.Bookies {
			if lost(b) {
				out = append(out, Fragment{Segment: i, Index: idx, Bookie: b, First: s.FirstEntry, Last: last})
			}
		}
	}
	return out
}

// LostBookies lists, once each, the bookies of any segment of md for
// which lost is true, whatever the ledger's state.
func LostBookies(md *Metadata, lost func(bookie string) bool) []string {
	var out []string
	for _, b := range md.AllBookies() {
		if lost(b) {
			out = append(out, b)
		}
	}
	return out
}

// WithFragmentReplaced returns a copy of closed ledger md whose segment
// f.Segment has bookie repl at position f.Index in place of f.Bookie. It
// fails when the ledger is not closed, the segment no longer has f.Bookie
// there (someone else recovered it), or repl is in the segment already.
// The caller writes the result with compare-and-swap.
func (m *Metadata) WithFragmentReplaced(f Fragment, repl string) (Metadata, error) {
	if m.State != StateClosed {
		return Metadata{}, fmt.Errorf("ledger: replace bookie %s: the ledger is %s, not closed", f.Bookie, m.State)
	}
	if f.Segment < 0 || f.Segment >= len(m.Ensembles) {
		return Metadata{}, fmt.Errorf("ledger: replace bookie %s: no segment %d", f.Bookie, f.Segment)
	}
	s := m.Ensembles[f.Segment]
	if f.Index < 0 || f.Index >= len(s.Bookies) || s.Bookies[f.Index] != f.Bookie {
		return Metadata{}, fmt.Errorf("ledger: replace bookie %s: segment %d no longer has it at position %d", f.Bookie, f.Segment, f.Index)
	}
	if slices.Contains(s.Bookies, repl) {
		return Metadata{}, fmt.Errorf("ledger: replace bookie %s: %s is in segment %d already", f.Bookie, repl, f.Segment)
	}
	n := m.Clone()
	n.Ensembles[f.Segment].Bookies[f.Index] = repl
	return n, nil
}

// DueOpenLedgers decides which open (or in-recovery) ledgers the auditor
// fences and recovers now, BookKeeper's openLedgerRereplicationGracePeriod:
// waiting lists the ledgers that are not closed and have a copy on a lost
// bookie at this pass, since when each of them has been seen so (it is
// updated: ledgers seen for the first time start at now, those no longer
// waiting are dropped), and a ledger is due once it has waited grace. A
// ledger its writer closes within grace (a managed ledger rolls over) is
// never fenced. The result is in the order of waiting; ids listed twice
// count once. A negative grace counts as zero.
func DueOpenLedgers(since map[uint64]time.Time, waiting []uint64, now time.Time, grace time.Duration) []uint64 {
	keep := make(map[uint64]bool, len(waiting))
	var due []uint64
	for _, id := range waiting {
		if keep[id] {
			continue
		}
		keep[id] = true
		t, ok := since[id]
		if !ok {
			since[id], t = now, now
		}
		if now.Sub(t) >= max(grace, 0) {
			due = append(due, id)
		}
	}
	for id := range since {
		if !keep[id] {
			delete(since, id)
		}
	}
	return due
}
