package ledger

import "math/bits"

// This file holds the pure quorum arithmetic: which bookies an entry goes to,
// when an entry is acknowledged, when fencing is complete and whether
// recovery may treat an entry as present or absent. No I/O, no clock.

// WriteSet returns the ensemble indices entry goes to: (entry+k) mod e for
// k < qw, in that order (the first is where a reader tries first).
func WriteSet(entry int64, e, qw int) []int {
	out := make([]int, qw)
	first := int(entry % int64(e))
	for k := range qw {
		out[k] = (first + k) % e
	}
	return out
}

// writeSetMask is WriteSet as a bit mask over ensemble indices.
func writeSetMask(entry int64, e, qw int) uint64 {
	var m uint64
	first := int(entry % int64(e))
	for k := range qw {
		m |= 1 << uint((first+k)%e)
	}
	return m
}

// ackTracker acknowledges entries strictly in order: entry i is acknowledged
// once quorum distinct bookies of its write set confirmed it and every entry
// before it is acknowledged. It tracks entries lac+1 .. next-1.
type ackTracker struct {
	e, qw  int
	quorum int
	lac    int64    // last acknowledged entry
	masks  []uint64 // masks[i]: confirmations of entry lac+1+i
	head   int      // masks[:head] are acknowledged and awaiting compaction
}

func newAckTracker(e, qw, quorum int, lac int64) *ackTracker {
	return &ackTracker{e: e, qw: qw, quorum: quorum, lac: lac}
}

// LAC is the last acknowledged entry (-1: none).
func (t *ackTracker) LAC() int64 { return t.lac }

// Next is the id the next added entry gets.
func (t *ackTracker) Next() int64 { return t.lac + 1 + int64(len(t.masks)-t.head) }

// Pending is how many entries are added but not yet acknowledged.
func (t *ackTracker) Pending() int { return len(t.masks) - t.head }

// Add registers the next entry and returns its id.
func (t *ackTracker) Add() int64 {
	id := t.Next()
	t.masks = append(t.masks, 0)
	return id
}

func (t *ackTracker) slot(id int64) (int, bool) {
	if id <= t.lac {
		return 0, false
	}
	i := t.head + int(id-t.lac-1)
	if i >= len(t.masks) {
		return 0, false
	}
	return i, true
}

// Confirm records that the bookie at ensemble index idx has entry id and
// returns how many entries became acknowledged (in order) as a result.
// Confirmations of entries already acknowledged or never added, from an
// index outside the entry's write set, or repeated, change nothing.
func (t *ackTracker) Confirm(id int64, idx int) int {
	i, ok := t.slot(id)
	if !ok || idx < 0 || idx >= t.e || writeSetMask(id, t.e, t.qw)&(1<<uint(idx)) == 0 {
		return 0
	}
	t.masks[i] |= 1 << uint(idx)
	return t.advance()
}

// Unconfirm withdraws index idx's confirmation from every pending entry (its
// bookie failed or was replaced; its copies no longer count).
func (t *ackTracker) Unconfirm(idx int) {
	for i := t.head; i < len(t.masks); i++ {
		t.masks[i] &^= 1 << uint(idx)
	}
}

// SetQuorum changes the ack quorum and returns how many entries became acknowledged.
func (t *ackTracker) SetQuorum(q int) int {
	t.quorum = q
	return t.advance()
}

func (t *ackTracker) advance() int {
	n := 0
	for t.head < len(t.masks) && bits.OnesCount64(t.masks[t.head]) >= t.quorum {
		t.head++
		t.lac++
		n++
	}
	if t.head > 64 && t.head*2 >= len(t.masks) {
		t.masks = t.masks[:copy(t.masks, t.masks[t.head:])]
		t.head = 0
	}
	return n
}

// fenceQuorum is how many bookies of a write set must answer (fence, or say
// they lack an entry) so that the rest cannot make up an ack quorum:
// Qw − Qa + 1.
func fenceQuorum(qw, qa int) int { return qw - qa + 1 }

// fenceTracker decides when fencing an ensemble is complete: every one of
// its write sets has at least Qw−Qa+1 fenced bookies, so no writer that
// missed the fence can still gather Qa acknowledgements for any entry.
type fenceTracker struct {
	e, qw, qa int
	fenced    uint64
	failed    uint64
}

func newFenceTracker(e, qw, qa int) *fenceTracker { return &fenceTracker{e: e, qw: qw, qa: qa} }

// Fenced records a successful fence at ensemble index idx.
func (f *fenceTracker) Fenced(idx int) { f.fenced |= 1 << uint(idx) }

// Failed records that the bookie at idx could not be fenced.
func (f *fenceTracker) Failed(idx int) { f.failed |= 1 << uint(idx) }

// Done reports whether fencing is complete.
func (f *fenceTracker) Done() bool {
	need := fenceQuorum(f.qw, f.qa)
	for s := range f.e {
		if bits.OnesCount64(f.fenced&writeSetMask(int64(s), f.e, f.qw)) < need {
			return false
		}
	}
	return true
}

// Impossible reports whether too many bookies failed for fencing to complete.
func (f *fenceTracker) Impossible() bool {
	need := fenceQuorum(f.qw, f.qa)
	for s := range f.e {
		if f.qw-bits.OnesCount64(f.failed&writeSetMask(int64(s), f.e, f.qw)) < need {
			return true
		}
	}
	return false
}

// entryOutcome is what recovery knows about an entry from its write set.
type entryOutcome int

const (
	entryUndecided entryOutcome = iota // wait for more answers
	entryPresent                       // a bookie returned it: recover it
	entryAbsent                        // enough bookies lack it: it was never acknowledged
	entryUnknown                       // every bookie answered, neither holds: recovery cannot decide
)

func (o entryOutcome) String() string {
	return [...]string{"undecided", "present", "absent", "unknown"}[o]
}

// entryVote decides an entry's fate during recovery from the answers of its
// write set: found bookies returned a valid copy, missing said NoEntry or
// NoLedger, failed gave an error or a corrupt copy. An entry is present as
// soon as one copy is found. Otherwise recovery waits for every bookie of
// the write set (a bookie that does not answer fails by the request timeout),
// so that a copy on a slower bookie is not overlooked; the entry is then
// absent if at least Qw−Qa+1 bookies lack it (the others cannot have made an
// ack quorum, so it was never acknowledged), and unknown if too many failed
// to tell.
func entryVote(qw, qa, found, missing, failed int) entryOutcome {
	switch {
	case found > 0:
		return entryPresent
	case found+missing+failed < qw:
		return entryUndecided
	case missing >= fenceQuorum(qw, qa):
		return entryAbsent
	}
	return entryUnknown
}
