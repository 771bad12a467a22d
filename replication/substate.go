package replication

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Subscription state across regions (docs/failover.md). A message is
// known everywhere by its Identity: the region that first stored it (its
// origin) and its position there. Every region's log holds each origin's
// messages in the origin's order (replication keeps per-source order and
// never re-replicates), so "every message of origin O up to position X"
// names the same messages in every region, wherever they sit in each
// region's log. A subscription's acknowledgement state travels as such a
// frontier per origin (its mark-delete) plus the identities of the messages
// acknowledged beyond it; each region applies it to its own copy of each
// message, whether written there or replicated, and a message that has not
// arrived yet is acknowledged when it does.

// Identity is a message's identity in every region.
type Identity struct {
	Origin string   `json:"o"`
	Pos    Position `json:"p"`
}

// SubState is a subscription's acknowledgement state in identities.
type SubState struct {
	// Subscription is the subscription's name.
	Subscription string `json:"subscription"`
	// MarkDelete acknowledges, for each origin, every message of that
	// origin at or before the position.
	MarkDelete map[string]Position `json:"markDelete"`
	// Acked are messages acknowledged beyond MarkDelete.
	Acked []Identity `json:"acked,omitempty"`
	// Partial are batch messages acknowledged in part (batch-index
	// acknowledgements), not covered by the above.
	Partial []PartialAck `json:"partial,omitempty"`
}

// PartialAck is a batch message some of whose messages are acknowledged:
// Remaining is Pulsar's ack set (64-bit words; bit i set: message i of
// the batch not acknowledged yet).
type PartialAck struct {
	ID        Identity `json:"id"`
	Remaining []int64  `json:"r"`
}

// MaxAckSetWords bounds an ack set: batches of up to 4096 messages.
const MaxAckSetWords = 64

// PartialOf returns the ack set of a partly acknowledged message, nil
// when s does not list it.
func (s *SubState) PartialOf(id Identity) []int64 {
	i, found := slices.BinarySearchFunc(s.Partial, id, func(p PartialAck, id Identity) int { return compareIdentity(p.ID, id) })
	if !found {
		return nil
	}
	return s.Partial[i].Remaining
}

// Limits of a SubState from another region.
const (
	MaxSubStateOrigins = 64
	MaxSubStateAcked   = 10000
	maxSubStateBytes   = 2 << 20
)

// Covers reports whether s acknowledges the message id.
func (s *SubState) Covers(id Identity) bool {
	if md, ok := s.MarkDelete[id.Origin]; ok && id.Pos.compare(md) <= 0 {
		return true
	}
	_, found := slices.BinarySearchFunc(s.Acked, id, compareIdentity)
	return found
}

// Normalize sorts Acked and drops what MarkDelete covers or is listed twice.
func (s *SubState) Normalize() {
	slices.SortFunc(s.Acked, compareIdentity)
	s.Acked = slices.CompactFunc(s.Acked, func(a, b Identity) bool { return compareIdentity(a, b) == 0 })
	s.Acked = slices.DeleteFunc(s.Acked, func(id Identity) bool {
		md, ok := s.MarkDelete[id.Origin]
		return ok && id.Pos.compare(md) <= 0
	})
	slices.SortStableFunc(s.Partial, func(a, b PartialAck) int { return compareIdentity(a.ID, b.ID) })
	s.Partial = slices.CompactFunc(s.Partial, func(a, b PartialAck) bool { return compareIdentity(a.ID, b.ID) == 0 })
	s.Partial = slices.DeleteFunc(s.Partial, func(p PartialAck) bool { return s.Covers(p.ID) })
}

func compareIdentity(a, b Identity) int {
	if c := strings.Compare(a.Origin, b.Origin); c != 0 {
		return c
	}
	return a.Pos.compare(b.Pos)
}

// Compare orders positions: -1, 0 or 1 as p is before, at or after q.
func (p Position) Compare(q Position) int { return p.compare(q) }

func (p Position) compare(q Position) int {
	switch {
	case p.Ledger != q.Ledger:
		if p.Ledger < q.Ledger {
			return -1
		}
		return 1
	case p.Entry != q.Entry:
		if p.Entry < q.Entry {
			return -1
		}
		return 1
	}
	return 0
}

// FrontierTracker builds a region's mark-delete frontier: fed the
// identities of the log's messages in log order, it knows for each origin
// the last of its messages seen. Up to a mark-delete position, that is
// the frontier that position acknowledges.
type FrontierTracker struct {
	last map[string]Position
}

// See records the next message of the log.
func (f *FrontierTracker) See(id Identity) {
	if f.last == nil {
		f.last = map[string]Position{}
	}
	if cur, ok := f.last[id.Origin]; !ok || id.Pos.compare(cur) > 0 {
		f.last[id.Origin] = id.Pos
	}
}

// Frontier returns a copy of what was seen.
func (f *FrontierTracker) Frontier() map[string]Position {
	out := make(map[string]Position, len(f.last))
	for k, v := range f.last {
		out[k] = v
	}
	return out
}

// AckedIn returns the indexes of log, a region's messages after its own
// mark-delete in log order, that s acknowledges.
func (s *SubState) AckedIn(log []Identity) []int {
	var out []int
	for i, id := range log {
		if s.Covers(id) {
			out = append(out, i)
		}
	}
	return out
}

// ErrBadSubState wraps every reason DecodeSubState refuses a record.
var ErrBadSubState = errors.New("replication: bad subscription state")

// EncodeSubState encodes s (normalized) for the replication stream.
func EncodeSubState(s SubState) ([]byte, error) {
	s.Acked = slices.Clone(s.Acked)
	s.Partial = slices.Clone(s.Partial)
	s.Normalize()
	if err := s.check(); err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

// DecodeSubState decodes and checks a record from another region.
func DecodeSubState(b []byte) (SubState, error) {
	var s SubState
	if len(b) > maxSubStateBytes {
		return s, fmt.Errorf("%w: %d bytes, at most %d", ErrBadSubState, len(b), maxSubStateBytes)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return SubState{}, fmt.Errorf("%w: %v", ErrBadSubState, err)
	}
	if err := s.check(); err != nil {
		return SubState{}, err
	}
	s.Normalize()
	return s, nil
}

func (s *SubState) check() error {
	var errs []error
	if s.Subscription == "" || len(s.Subscription) > 1024 {
		errs = append(errs, fmt.Errorf("subscription name of %d bytes", len(s.Subscription)))
	}
	if len(s.MarkDelete) > MaxSubStateOrigins {
		errs = append(errs, fmt.Errorf("%d origins, at most %d", len(s.MarkDelete), MaxSubStateOrigins))
	}
	for o, p := range s.MarkDelete {
		if o == "" || len(o) > 256 || p.Ledger < -1 || p.Entry < -1 {
			errs = append(errs, fmt.Errorf("mark-delete %q at %v", o, p))
			break
		}
	}
	if len(s.Acked) > MaxSubStateAcked {
		errs = append(errs, fmt.Errorf("%d acknowledged messages, at most %d", len(s.Acked), MaxSubStateAcked))
	}
	for _, id := range s.Acked {
		if id.Origin == "" || len(id.Origin) > 256 || id.Pos.Ledger < 0 || id.Pos.Entry < 0 {
			errs = append(errs, fmt.Errorf("acknowledged message %q at %v", id.Origin, id.Pos))
			break
		}
	}
	if len(s.Partial) > MaxSubStateAcked {
		errs = append(errs, fmt.Errorf("%d partly acknowledged messages, at most %d", len(s.Partial), MaxSubStateAcked))
	}
	for _, p := range s.Partial {
		id := p.ID
		if id.Origin == "" || len(id.Origin) > 256 || id.Pos.Ledger < 0 || id.Pos.Entry < 0 || len(p.Remaining) == 0 || len(p.Remaining) > MaxAckSetWords {
			errs = append(errs, fmt.Errorf("partly acknowledged message %q at %v with an ack set of %d words", id.Origin, id.Pos, len(p.Remaining)))
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrBadSubState, err)
	}
	return nil
}

// SubStateProperty marks a subscription-state record in the replication
// stream (its value is the subscription's name; the payload is
// EncodeSubState's). The source broker sends such records to the active
// consumer of a replication cursor as MESSAGE commands with ControlID as
// their message id, outside flow control and never stored; the replicator
// worker carries them to the remote region and writes them through its
// replicator producer, whose broker applies them instead of storing them.
const SubStateProperty = "__ISOBAR_SUBSTATE"

// ControlID is the message id (ledger and entry both all ones on the
// wire, -1 as int64) of a record that is not an entry of the topic; it
// is never acknowledged.
const ControlID = -1

// StateBuilder computes a subscription's state in the region that takes
// its acknowledgements: from its mark-delete position and the messages
// after it, seen in log order. The mark-delete position stands for every
// message of this region's origin up to it and, for each other origin,
// every message of that origin before the first one after it; an origin
// none of whose messages follows it has everything stored from it before
// it. The messages acknowledged after it are listed.
type StateBuilder struct {
	st     SubState
	local  string
	stored map[string]Position
	first  map[string]Position
	prev   map[string]Position
}

// NewStateBuilder starts the state of subscription sub of region local
// at mark-delete position md. stored is, for each other origin, the
// highest position stored from it, and for local the position of its last
// own message when known (so the frontier names no message that does not
// exist), read before the walk; prev is the
// mark-delete frontier last computed (nil: none), a bound that holds
// while the mark-delete position only moves forward.
func NewStateBuilder(sub, local string, md Position, stored, prev map[string]Position) *StateBuilder {
	if own, ok := stored[local]; ok && own.compare(md) < 0 {
		md = own
	}
	return &StateBuilder{
		st:     SubState{Subscription: sub, MarkDelete: map[string]Position{local: md}},
		local:  local,
		stored: stored,
		first:  map[string]Position{},
		prev:   prev,
	}
}

// See takes the next message after the mark-delete position and whether
// it is acknowledged.
func (b *StateBuilder) See(id Identity, acked bool) {
	if id.Origin != b.local {
		if _, ok := b.first[id.Origin]; !ok {
			b.first[id.Origin] = id.Pos
		}
	}
	if acked && len(b.st.Acked) < MaxSubStateAcked {
		b.st.Acked = append(b.st.Acked, id)
	}
}

// SeePartial takes a message after the mark-delete position that is
// acknowledged in part: remaining is its ack set.
func (b *StateBuilder) SeePartial(id Identity, remaining []int64) {
	if len(b.st.Partial) < MaxSubStateAcked && len(remaining) <= MaxAckSetWords {
		b.st.Partial = append(b.st.Partial, PartialAck{ID: id, Remaining: slices.Clone(remaining)})
	}
}

// NeedsMore reports whether an origin stored here has no message seen yet
// (walking on finds the first one, or the end of the log).
func (b *StateBuilder) NeedsMore() bool {
	for o := range b.stored {
		if _, ok := b.first[o]; !ok && o != b.local {
			return true
		}
	}
	return false
}

// State returns the state; atEnd says the walk saw every message after
// the mark-delete position. Without it, an origin with no message seen
// keeps its previous frontier, or none.
func (b *StateBuilder) State(atEnd bool) SubState {
	st := b.st
	for o, f := range b.first {
		st.MarkDelete[o] = Position{Ledger: f.Ledger, Entry: f.Entry - 1}
	}
	for o, s := range b.stored {
		if _, ok := b.first[o]; ok || o == b.local {
			continue
		}
		if atEnd {
			st.MarkDelete[o] = s
		} else if p, ok := b.prev[o]; ok {
			st.MarkDelete[o] = p
		}
	}
	return st
}

// Applier says which of a region's messages after its own mark-delete
// position, seen in log order, a state from another region acknowledges.
type Applier struct {
	st     *SubState
	maxCov map[string]Position // the last message covered, per origin
	passed map[string]bool     // a message after it was seen
}

// NewApplier starts applying st.
func NewApplier(st *SubState) *Applier {
	a := &Applier{st: st, maxCov: map[string]Position{}, passed: map[string]bool{}}
	for o, p := range st.MarkDelete {
		a.maxCov[o] = p
	}
	for _, id := range st.Acked {
		if p, ok := a.maxCov[id.Origin]; !ok || id.Pos.compare(p) > 0 {
			a.maxCov[id.Origin] = id.Pos
		}
	}
	for _, pa := range st.Partial {
		if p, ok := a.maxCov[pa.ID.Origin]; !ok || pa.ID.Pos.compare(p) > 0 {
			a.maxCov[pa.ID.Origin] = pa.ID.Pos
		}
	}
	return a
}

// Partial returns the ack set of a message the state acknowledges in
// part (nil when it does not).
func (a *Applier) Partial(id Identity) []int64 { return a.st.PartialOf(id) }

// See takes the next message and reports whether the state acknowledges it.
func (a *Applier) See(id Identity) bool {
	if a.st.Covers(id) {
		return true
	}
	if mc, ok := a.maxCov[id.Origin]; ok && id.Pos.compare(mc) > 0 {
		a.passed[id.Origin] = true
	}
	return false
}

// Done reports whether no later message can be acknowledged: one after
// the last covered message of every origin was seen.
func (a *Applier) Done() bool { return len(a.passed) == len(a.maxCov) }

// Waiting reports whether the state covers messages of another origin than
// local beyond what is stored from it (stored: the highest position stored
// per origin), so it must be applied again as they arrive.
func (a *Applier) Waiting(local string, stored map[string]Position) bool {
	for o, p := range a.maxCov {
		if o == local {
			continue // every message of this region's origin is here
		}
		if s, ok := stored[o]; !ok || p.compare(s) > 0 {
			return true
		}
	}
	return false
}
