package dispatch

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/isobar-mq/isobar/topic"
)

// selector is one round's rule for choosing the consumer of an entry,
// by the subscription's type.
type selector interface {
	// pick is the consumer for a message with sticky key key, nil if
	// none can take it now.
	pick(key []byte) *Consumer
}

// selector is the rule of s's type for one round.
func (s *State) selector() selector {
	switch s.kind {
	case Exclusive, Failover:
		return single{s}
	case KeyShared:
		return &keyed{s: s, blocked: map[*Consumer]bool{}}
	}
	return roundRobin{s}
}

// single delivers to the one eligible consumer (Exclusive's first,
// Failover's active), while it has permits.
type single struct{ s *State }

func (r single) pick([]byte) *Consumer {
	for _, c := range r.s.consumers {
		if r.s.Eligible(c) && c.permits > 0 {
			return c
		}
	}
	return nil
}

// roundRobin (Shared) delivers round robin over the consumers with room,
// those of the highest priority level (lowest number) first.
type roundRobin struct{ s *State }

func (r roundRobin) pick([]byte) *Consumer {
	s := r.s
	best := int32(math.MaxInt32)
	for _, c := range s.consumers {
		if s.canTake(c) && c.priority < best {
			best = c.priority
		}
	}
	for i := range s.consumers {
		c := s.consumers[(s.rr+i)%len(s.consumers)]
		if s.canTake(c) && c.priority == best {
			s.rr = (s.rr + i + 1) % len(s.consumers)
			return c
		}
	}
	return nil
}

// keyed (Key_Shared) delivers each message to the owner of its key's
// hash. blocked are the consumers that missed an entry this round: their
// later entries wait too, so each key's messages stay in order.
type keyed struct {
	s       *State
	blocked map[*Consumer]bool
}

func (r *keyed) pick(key []byte) *Consumer {
	c := r.s.keyOwner(key)
	if c == nil || r.blocked[c] || !r.s.canTake(c) {
		if c != nil {
			r.blocked[c] = true
		}
		return nil
	}
	return c
}

// KeyHash is the Key_Shared hash of a message's sticky key.
func KeyHash(key []byte) int32 {
	return int32((topic.Murmur3(key, 0) & 0x7fffffff) % KeyHashRange)
}

// keyRange is one part of the auto-split hash space: the hashes after
// the previous range's end up to end (inclusive) belong to c.
type keyRange struct {
	end int32
	c   *Consumer
}

// keyAdd gives a new Key_Shared consumer without ranges of its own a
// part of the hash space, as Pulsar's hash-range auto-split selector
// does: the first takes everything, each next one the upper half of the
// largest range, so keys already placed mostly stay where they are.
func (s *State) keyAdd(c *Consumer) {
	if s.kind != KeyShared || len(c.ranges) > 0 {
		return
	}
	if len(s.keyRanges) == 0 {
		s.keyRanges = []keyRange{{end: KeyHashRange - 1, c: c}}
		return
	}
	best, bestSize, start := 0, int32(-1), int32(0)
	for i, r := range s.keyRanges {
		if size := r.end - start + 1; size > bestSize {
			best, bestSize = i, size
		}
		start = r.end + 1
	}
	if bestSize < 2 {
		return // no room: it gets no keys
	}
	lo := int32(0)
	if best > 0 {
		lo = s.keyRanges[best-1].end + 1
	}
	mid := lo + bestSize/2 - 1
	old := s.keyRanges[best]
	s.keyRanges[best] = keyRange{end: mid, c: old.c}
	s.keyRanges = slices.Insert(s.keyRanges, best+1, keyRange{end: old.end, c: c})
}

// keyRemove gives a leaving consumer's ranges to the range after each
// (or before, for the last).
func (s *State) keyRemove(c *Consumer) {
	for i := 0; i < len(s.keyRanges); {
		if s.keyRanges[i].c != c {
			i++
			continue
		}
		if i == len(s.keyRanges)-1 && i > 0 {
			s.keyRanges[i-1].end = s.keyRanges[i].end
		}
		s.keyRanges = slices.Delete(s.keyRanges, i, i+1)
	}
}

// keyOwner is the consumer whose sticky ranges, or else whose part of
// the auto-split space, hold key's hash.
func (s *State) keyOwner(key []byte) *Consumer {
	h := KeyHash(key)
	for _, c := range s.consumers {
		for _, r := range c.ranges {
			if h >= r[0] && h <= r[1] {
				return c
			}
		}
	}
	i := sort.Search(len(s.keyRanges), func(i int) bool { return s.keyRanges[i].end >= h })
	if i == len(s.keyRanges) {
		return nil
	}
	return s.keyRanges[i].c
}

// KeyOwnerName is the name of the consumer key's messages go to ("" if
// none): for stats and tests.
func (s *State) KeyOwnerName(key []byte) string {
	if c := s.keyOwner(key); c != nil {
		return c.name
	}
	return ""
}

// checkRanges checks a Key_Shared consumer's sticky hash ranges (numbers
// a client sent): each within [0, KeyHashRange), start at most end, none
// overlapping another of its own or of the other consumers', as Pulsar's
// sticky selector requires. So at most KeyHashRange ranges ever take
// part in choosing a consumer.
func (s *State) checkRanges(c *Consumer) error {
	if len(c.ranges) == 0 {
		return nil
	}
	if len(c.ranges) > KeyHashRange {
		return fmt.Errorf("%w: %d hash ranges, more than the %d hashes", ErrRanges, len(c.ranges), KeyHashRange)
	}
	type span struct{ lo, hi int32 }
	all := make([]span, 0, len(c.ranges))
	for _, r := range c.ranges {
		if r[0] < 0 || r[1] >= KeyHashRange || r[0] > r[1] {
			return fmt.Errorf("%w: hash range [%d, %d] is not within [0, %d] with start <= end", ErrRanges, r[0], r[1], KeyHashRange-1)
		}
		all = append(all, span{r[0], r[1]})
	}
	for _, o := range s.consumers {
		for _, r := range o.ranges {
			all = append(all, span{r[0], r[1]})
		}
	}
	slices.SortFunc(all, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	reach := 0 // the span reaching furthest so far
	for i := 1; i < len(all); i++ {
		if all[i].lo <= all[reach].hi {
			return fmt.Errorf("%w: hash range [%d, %d] overlaps [%d, %d]", ErrRanges, all[i].lo, all[i].hi, all[reach].lo, all[reach].hi)
		}
		if all[i].hi > all[reach].hi {
			reach = i
		}
	}
	return nil
}
