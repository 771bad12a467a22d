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
}

func compareIdentity(a, b Identity) int {
	if c := strings.Compare(a.Origin, b.Origin); c != 0 {
		return c
	}
	return a.Pos.compare(b.Pos)
}

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
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrBadSubState, err)
	}
	return nil
}
