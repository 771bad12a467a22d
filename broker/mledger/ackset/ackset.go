// Package ackset owns the acknowledgement state of one durable subscription
// cursor over a managed ledger, as in Pulsar's ManagedCursor: a mark-delete
// position (every entry at or before it is acknowledged) plus the set of
// entries individually acknowledged after it, kept as sorted, disjoint,
// non-adjacent closed ranges inside single ledgers.
//
// Ranges never span ledgers: entry ids are dense within a ledger, but the
// set does not know how many entries a ledger has, so it cannot tell that
// (L, last) and (L', 0) are neighbours. Only Advance, whose caller supplies
// the ledger layout through a next function, moves across ledger boundaries.
//
// The package is pure: no I/O, no clock, no goroutines, no locking. A Set
// has one owner (the cursor's driver), which persists MarshalBinary output
// and calls Advance after acknowledgements when it wants the mark-delete
// position to move.
//
// # Bounded memory
//
// Set.MaxRanges, when positive, caps the number of ranges. An acknowledgement
// that would raise the number of ranges above it fails with ErrTooManyRanges
// and leaves the set unchanged; acknowledgements that extend or merge
// existing ranges still succeed. Pulsar instead keeps every range in memory
// and persists only the first managedLedgerMaxUnackedRangesToPersist of them
// (the rest are redelivered after a crash); here the owner is told, so it
// can stop dispatching to the subscription (like Pulsar's
// maxUnackedMessagesPerSubscription) until cumulative acks catch up, and
// what is in memory is always what gets persisted.
package ackset

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
)

// Errors returned by the package. Decoding errors wrap ErrCorrupt.
var (
	ErrTooManyRanges   = errors.New("ackset: too many acknowledged ranges")
	ErrInvalidPosition = errors.New("ackset: invalid position")
	ErrCrossLedger     = errors.New("ackset: range spans ledgers")
	ErrCorrupt         = errors.New("ackset: corrupt encoding")
)

// Position is the position of an entry in a managed ledger, ordered by
// (Ledger, Entry). Entry -1 means "before the first entry of Ledger" and is
// valid only as a mark-delete position.
type Position struct {
	Ledger, Entry int64
}

// Compare returns -1, 0 or +1 as p is before, equal to or after q.
func (p Position) Compare(q Position) int {
	switch {
	case p.Ledger < q.Ledger:
		return -1
	case p.Ledger > q.Ledger:
		return 1
	case p.Entry < q.Entry:
		return -1
	case p.Entry > q.Entry:
		return 1
	}
	return 0
}

// String formats p as Pulsar does: "ledger:entry".
func (p Position) String() string {
	return strconv.FormatInt(p.Ledger, 10) + ":" + strconv.FormatInt(p.Entry, 10)
}

// Range is the closed range of entries [First, Last] of one ledger.
type Range struct {
	Ledger, First, Last int64
}

// Start is the first position of r.
func (r Range) Start() Position { return Position{r.Ledger, r.First} }

// End is the last position of r.
func (r Range) End() Position { return Position{r.Ledger, r.Last} }

// Contains reports whether p lies in r.
func (r Range) Contains(p Position) bool {
	return p.Ledger == r.Ledger && r.First <= p.Entry && p.Entry <= r.Last
}

// String formats r as Pulsar's open-closed range "(l:first-1..l:last]".
func (r Range) String() string {
	return "(" + Position{r.Ledger, r.First - 1}.String() + ".." + r.End().String() + "]"
}

// Set is the acknowledgement state of a cursor. The zero value is not
// useful; use New. A Set is not safe for concurrent use.
type Set struct {
	// MaxRanges, when positive, is the most ranges the set keeps; see the
	// package documentation. Zero means no limit.
	MaxRanges int

	md     Position
	ranges []Range // sorted, disjoint, non-adjacent, all after md
}

// New returns a set with the given mark-delete position and no individually
// acknowledged entries.
func New(markDelete Position) *Set {
	return &Set{md: markDelete}
}

// MarkDelete returns the mark-delete position.
func (s *Set) MarkDelete() Position { return s.md }

// Len returns the number of ranges of individually acknowledged entries.
func (s *Set) Len() int { return len(s.ranges) }

// Count returns the number of individually acknowledged entries after the
// mark-delete position, saturating at math.MaxInt64. It costs O(Len).
func (s *Set) Count() int64 {
	var n int64
	for _, r := range s.ranges {
		k := r.Last - r.First // the range holds k+1 entries; k >= 0
		if k == math.MaxInt64 || n > math.MaxInt64-k-1 {
			return math.MaxInt64
		}
		n += k + 1
	}
	return n
}

// Ranges returns a copy of the ranges, sorted and disjoint.
func (s *Set) Ranges() []Range { return slices.Clone(s.ranges) }

// String formats the ranges as Pulsar's individuallyDeletedMessages stats
// field, e.g. "[(3:4..3:7],(3:9..3:10]]".
func (s *Set) String() string {
	b := []byte{'['}
	for i, r := range s.ranges {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, r.String()...)
	}
	return string(append(b, ']'))
}

// IsAcked reports whether p is acknowledged, cumulatively or individually.
func (s *Set) IsAcked(p Position) bool {
	if p.Compare(s.md) <= 0 {
		return true
	}
	i := s.search(p.Ledger, p.Entry)
	return i < len(s.ranges) && s.ranges[i].Contains(p)
}

// search returns the index of the first range that ends at or after
// (ledger, entry).
func (s *Set) search(ledger, entry int64) int {
	return sort.Search(len(s.ranges), func(i int) bool {
		r := s.ranges[i]
		return r.Ledger > ledger || (r.Ledger == ledger && r.Last >= entry)
	})
}

// Ack acknowledges the single position p. Acks at or before the
// mark-delete position, and of already acknowledged positions, are no-ops
// and report changed == false. It fails with ErrInvalidPosition for a
// negative ledger or entry and with ErrTooManyRanges as described in the
// package documentation.
func (s *Set) Ack(p Position) (changed bool, err error) {
	return s.AckRange(p, p)
}

// AckRange acknowledges every entry from from to to inclusive, which must
// lie in the same ledger (ErrCrossLedger) with from.Entry <= to.Entry.
// The part at or before the mark-delete position is ignored. It merges with
// neighbouring and overlapping ranges on both sides.
func (s *Set) AckRange(from, to Position) (changed bool, err error) {
	if from.Ledger != to.Ledger {
		return false, fmt.Errorf("%w: ack %v..%v", ErrCrossLedger, from, to)
	}
	if from.Ledger < 0 || from.Entry < 0 || to.Entry < from.Entry {
		return false, fmt.Errorf("%w: ack %v..%v", ErrInvalidPosition, from, to)
	}
	l, a, b := from.Ledger, from.Entry, to.Entry
	switch {
	case l < s.md.Ledger:
		return false, nil
	case l == s.md.Ledger:
		if b <= s.md.Entry {
			return false, nil
		}
		if a <= s.md.Entry {
			a = s.md.Entry + 1 // no overflow: md.Entry < b
		}
	}
	// Ranges [i, j) overlap or touch [a, b] and are merged into it.
	// a-1 and First-1 cannot overflow: both are >= 0.
	i := s.search(l, a-1)
	if i < len(s.ranges) {
		if r := s.ranges[i]; r.Ledger == l && r.First <= a && b <= r.Last {
			return false, nil
		}
	}
	j := i
	for j < len(s.ranges) && s.ranges[j].Ledger == l && s.ranges[j].First-1 <= b {
		a = min(a, s.ranges[j].First)
		b = max(b, s.ranges[j].Last)
		j++
	}
	if j == i && s.MaxRanges > 0 && len(s.ranges)+1 > s.MaxRanges {
		return false, fmt.Errorf("%w: %d ranges, ack %v..%v", ErrTooManyRanges, len(s.ranges), from, to)
	}
	s.ranges = slices.Replace(s.ranges, i, j, Range{l, a, b})
	return true, nil
}

// AckCumulative moves the mark-delete position to p if p is after it and
// drops the individually acknowledged entries at or before p. It reports
// whether the mark-delete position moved. It does not absorb a range that
// starts right after p; call AdvanceInLedger or Advance for that.
func (s *Set) AckCumulative(p Position) (changed bool) {
	if p.Compare(s.md) <= 0 {
		return false
	}
	s.md = p
	i := s.search(p.Ledger, p.Entry) // first range ending at or after p
	if i < len(s.ranges) && s.ranges[i].Ledger == p.Ledger && s.ranges[i].First <= p.Entry {
		if s.ranges[i].Last == p.Entry {
			i++
		} else {
			s.ranges[i].First = p.Entry + 1 // no overflow: p.Entry < Last
		}
	}
	s.ranges = slices.Delete(s.ranges, 0, i)
	return true
}

// AdvanceInLedger moves the mark-delete position over the first range while
// that range starts right after it in the same ledger: mark-delete (L, e)
// and a range [(L, e+1)..(L, f)] give mark-delete (L, f). It needs no
// knowledge of ledger boundaries and so never crosses one.
func (s *Set) AdvanceInLedger() (changed bool) {
	// Ranges are non-adjacent, so at most one range is absorbed.
	if len(s.ranges) > 0 {
		if r := s.ranges[0]; r.Ledger == s.md.Ledger && r.First-1 == s.md.Entry {
			s.md = r.End()
			s.ranges = slices.Delete(s.ranges, 0, 1)
			return true
		}
	}
	return false
}

// Advance moves the mark-delete position forward over individually
// acknowledged entries contiguous with it. next(p) returns the position
// of the entry after p and true, or false if that is not known (p is the
// last entry written); it knows ledger boundaries, so the last entry of a
// ledger is followed by entry 0 of the next non-empty ledger, and the
// position after (L, -1) is (L, 0) if ledger L has entries.
//
// next is called once per range absorbed plus once. If next returns a
// position that is not after its argument, Advance stops.
func (s *Set) Advance(next func(Position) (Position, bool)) (changed bool) {
	for len(s.ranges) > 0 {
		n, ok := next(s.md)
		if !ok || n.Compare(s.md) <= 0 {
			break
		}
		i := s.search(n.Ledger, n.Entry)
		if i == len(s.ranges) || !s.ranges[i].Contains(n) {
			break
		}
		s.AckCumulative(s.ranges[i].End())
		changed = true
	}
	return changed
}
