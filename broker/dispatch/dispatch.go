// Package dispatch is the subscription dispatcher's core: which consumer
// gets which entry, and what is owed to whom. Events go in (a consumer
// attached or detached, a FLOW, an acknowledgement, a redelivery request,
// a seek, the clock), and each round's reads come out as a Plan and its
// entries as Deliveries. It holds no lock, does no I/O and reads no
// clock: the broker's subscription drives it under its own lock, reads
// what a Plan names, sends what Assign returns and passes the time in.
//
// The rule of each subscription type is a selector (selector.go):
// Exclusive and Failover deliver to one consumer (the first, or the
// active one), Shared round-robin over the consumers of the highest
// priority with room, Key_Shared by the hash of each message's key, over
// ranges the consumers name (sticky) or the core splits (auto split).
package dispatch

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/isobar-mq/isobar/broker/mledger/ackset"
)

// Position is an entry's position in a topic's log.
type Position = ackset.Position

// Kind is a subscription type.
type Kind int

// The subscription types, as Pulsar names them.
const (
	Exclusive Kind = iota
	Shared
	Failover
	KeyShared
)

func (k Kind) String() string {
	switch k {
	case Exclusive:
		return "Exclusive"
	case Shared:
		return "Shared"
	case Failover:
		return "Failover"
	case KeyShared:
		return "Key_Shared"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// MaxReadBatch bounds the entries one round reads.
const MaxReadBatch = 100

// MaxReplay bounds the entries waiting for redelivery before the
// dispatcher stops reading new ones (Key_Shared with a stuck consumer).
const MaxReplay = 10000

// KeyHashRange is the size of Key_Shared's hash space.
const KeyHashRange = 65536

// Errors of Attach. The broker maps them to the protocol's kinds.
var (
	// ErrKindMismatch: the subscription has consumers of another type.
	ErrKindMismatch = errors.New("dispatch: subscription type differs")
	// ErrExclusive: an Exclusive subscription has its consumer already.
	ErrExclusive = errors.New("dispatch: exclusive consumer already attached")
	// ErrRanges: a Key_Shared consumer's hash ranges are invalid or
	// overlap another's.
	ErrRanges = errors.New("invalid hash ranges")
)

// Consumer is what the core knows of one consumer. The driver makes it
// (NewConsumer) and keeps it with its own consumer; the core changes
// it only through State's methods.
type Consumer struct {
	name     string
	priority int32
	ranges   [][2]int32 // Key_Shared sticky hash ranges (inclusive)
	// compacted: it reads the compacted view (read_compacted).
	compacted bool

	permits int64
	pending map[Position]struct{}
	active  bool // Failover: this consumer receives
}

// NewConsumer is a consumer named name of priority priority (lower is
// first), with the Key_Shared hash ranges it asked for (none: the core
// assigns it a part of the hash space), reading the compacted view when
// compacted.
func NewConsumer(name string, priority int32, ranges [][2]int32, compacted bool) *Consumer {
	return &Consumer{name: name, priority: priority, ranges: slices.Clone(ranges), compacted: compacted, pending: map[Position]struct{}{}}
}

// Name is the consumer's name.
func (c *Consumer) Name() string { return c.name }

// Permits are the messages the consumer may be sent now.
func (c *Consumer) Permits() int64 { return c.permits }

// Unacked is how many entries the consumer holds unacknowledged.
func (c *Consumer) Unacked() int { return len(c.pending) }

// Active says whether a Failover subscription delivers to it.
func (c *Consumer) Active() bool { return c.active }

// Compacted says whether it reads the compacted view.
func (c *Consumer) Compacted() bool { return c.compacted }

// Ranges are the hash ranges it asked for.
func (c *Consumer) Ranges() [][2]int32 { return c.ranges }

// Limits bound the entries a Shared or Key_Shared subscription leaves
// unacknowledged (0: no limit). Other types ignore them.
type Limits struct {
	PerConsumer, PerSubscription int
}

// State is one subscription's dispatch state.
type State struct {
	kind      Kind
	partition int // the topic's partition index, -1 if not partitioned
	consumers []*Consumer
	limits    Limits

	readPos       Position
	epoch         uint64 // bumped by Seek: rounds planned before are dropped
	replay        []Position
	replaySet     map[Position]struct{}
	replayBlocked bool // the last round could send none of replay
	pending       map[Position]*Consumer
	redeliveries  map[Position]uint32
	delayed       delayHeap
	keyRanges     []keyRange // Key_Shared auto-split assignment
	rr            int
}

// New is the state of a subscription of kind on a topic partition
// (-1: not partitioned), reading from readPos.
func New(kind Kind, partition int, readPos Position) *State {
	return &State{
		kind: kind, partition: partition, readPos: readPos,
		replaySet:    map[Position]struct{}{},
		pending:      map[Position]*Consumer{},
		redeliveries: map[Position]uint32{},
	}
}

// Kind is the subscription's type: that of its consumers, or of the
// last one attached.
func (s *State) Kind() Kind { return s.kind }

// Consumers are the attached consumers, in the order they attached.
func (s *State) Consumers() []*Consumer { return s.consumers }

// ReadPos is where the next new entries are read from.
func (s *State) ReadPos() Position { return s.readPos }

// Delayed is how many entries wait for their delivery time.
func (s *State) Delayed() int { return len(s.delayed) }

// Redeliveries is how often the entry at p was delivered before.
func (s *State) Redeliveries(p Position) uint32 { return s.redeliveries[p] }

// SetLimits sets the unacknowledged-entry limits (the topic's policy,
// which may change at any time).
func (s *State) SetLimits(l Limits) { s.limits = l }

// Delayable says whether deliver-at times are honoured and the limits
// on unacknowledged entries apply: on Shared and Key_Shared
// subscriptions, as in Pulsar.
func (s *State) Delayable() bool { return s.kind == Shared || s.kind == KeyShared }

// Attach adds c as a consumer of kind. A subscription with consumers
// takes only more of its own type, and an Exclusive one none; a
// Key_Shared consumer's sticky ranges must lie in the hash space and not
// overlap another's.
func (s *State) Attach(c *Consumer, kind Kind) error {
	if kind == KeyShared {
		if err := s.checkRanges(c); err != nil {
			return err
		}
	}
	if len(s.consumers) > 0 {
		if kind != s.kind {
			return fmt.Errorf("%w: subscription is %v, consumer asks for %v", ErrKindMismatch, s.kind, kind)
		}
		if kind == Exclusive {
			return ErrExclusive
		}
	}
	s.kind = kind
	s.consumers = append(s.consumers, c)
	s.keyAdd(c)
	return nil
}

// Detach removes c; what it held unacknowledged is to be delivered
// again (to the others), each entry's redelivery count raised by one.
// It reports whether c was attached.
func (s *State) Detach(c *Consumer) bool {
	i := slices.Index(s.consumers, c)
	if i < 0 {
		return false
	}
	s.consumers = slices.Delete(s.consumers, i, i+1)
	for p := range c.pending {
		delete(s.pending, p)
		s.redeliveries[p]++
		s.addReplay(p)
	}
	clear(c.pending)
	s.keyRemove(c)
	return true
}

// Flow gives c n more permits (they saturate rather than wrap).
func (s *State) Flow(c *Consumer, n int64) {
	if c.permits > math.MaxInt64-n {
		c.permits = math.MaxInt64
	} else {
		c.permits += n
	}
	s.replayBlocked = false
}

// Ack forgets the entries at ps: acknowledged, they are owed to no one.
func (s *State) Ack(ps []Position) {
	for _, p := range ps {
		if o := s.pending[p]; o != nil {
			delete(s.pending, p)
			delete(o.pending, p)
		}
		delete(s.redeliveries, p)
		if _, ok := s.replaySet[p]; ok {
			delete(s.replaySet, p)
			if i, found := slices.BinarySearchFunc(s.replay, p, Position.Compare); found {
				s.replay = slices.Delete(s.replay, i, i+1)
			}
		}
	}
	s.replayBlocked = false
}

// AckCumulative forgets every entry up to upTo.
func (s *State) AckCumulative(upTo Position) {
	for p, o := range s.pending {
		if p.Compare(upTo) <= 0 {
			delete(s.pending, p)
			delete(o.pending, p)
			delete(s.redeliveries, p)
		}
	}
	s.replay = slices.DeleteFunc(s.replay, func(p Position) bool {
		if p.Compare(upTo) <= 0 {
			delete(s.replaySet, p)
			return true
		}
		return false
	})
	s.replayBlocked = false
}

// Redeliver delivers again the entries at ps that c holds (all it holds
// when ps is empty), each with its redelivery count raised by one, and
// returns how many.
func (s *State) Redeliver(c *Consumer, ps []Position) int {
	if len(ps) == 0 {
		for p := range c.pending {
			ps = append(ps, p)
		}
	}
	n := 0
	for _, p := range ps {
		if s.pending[p] != c {
			continue
		}
		delete(s.pending, p)
		delete(c.pending, p)
		s.redeliveries[p]++
		s.addReplay(p)
		n++
	}
	s.replayBlocked = false
	return n
}

// Seek moves the subscription to p: nothing is owed any more, nothing
// waits, and a round planned before (its Plan's epoch) is dropped.
func (s *State) Seek(p Position) {
	s.readPos = p
	s.epoch++
	s.replay, s.replayBlocked = nil, false
	clear(s.replaySet)
	clear(s.pending)
	clear(s.redeliveries)
	s.delayed = nil
	for _, c := range s.consumers {
		clear(c.pending)
	}
}

// UpdateActive chooses a Failover subscription's active consumer:
// consumers sorted by priority then name, the first, or on a partition
// of a partitioned topic the partition's index modulo their number (so
// N consumers of N partitions get one partition each). When another
// consumer becomes active, what the others hold is delivered to it
// again. It returns the active consumer (nil: not Failover, or none).
func (s *State) UpdateActive() *Consumer {
	if s.kind != Failover || len(s.consumers) == 0 {
		return nil
	}
	sorted := slices.Clone(s.consumers)
	slices.SortStableFunc(sorted, func(a, b *Consumer) int {
		if a.priority != b.priority {
			if a.priority < b.priority {
				return -1
			}
			return 1
		}
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	i := 0
	if s.partition >= 0 {
		i = s.partition % len(sorted)
	}
	active := sorted[i]
	if !active.active {
		for _, o := range s.consumers {
			if o == active {
				continue
			}
			for p := range o.pending {
				delete(s.pending, p)
				s.addReplay(p)
			}
			clear(o.pending)
		}
	}
	for _, c := range s.consumers {
		c.active = c == active
	}
	return active
}

// Eligible says whether c may be sent anything by its subscription's
// type: an Exclusive subscription's first consumer, a Failover one's
// active consumer, any consumer otherwise.
func (s *State) Eligible(c *Consumer) bool {
	switch s.kind {
	case Exclusive:
		return len(s.consumers) > 0 && s.consumers[0] == c
	case Failover:
		return c.active
	}
	return true
}

// canTake says whether c may be sent an entry now: it has permits and,
// on Shared and Key_Shared, room under the unacknowledged limits.
func (s *State) canTake(c *Consumer) bool {
	if c.permits <= 0 {
		return false
	}
	if !s.Delayable() {
		return true
	}
	if s.limits.PerConsumer > 0 && len(c.pending) >= s.limits.PerConsumer {
		return false
	}
	return s.unackedRoom() > 0
}

// unackedRoom is how many more entries a Shared or Key_Shared
// subscription may leave unacknowledged (math.MaxInt without a limit).
func (s *State) unackedRoom() int {
	if s.limits.PerSubscription <= 0 || !s.Delayable() {
		return math.MaxInt
	}
	return s.limits.PerSubscription - len(s.pending)
}

func (s *State) addReplay(p Position) {
	if _, ok := s.replaySet[p]; ok {
		return
	}
	s.replaySet[p] = struct{}{}
	i, _ := slices.BinarySearchFunc(s.replay, p, Position.Compare)
	s.replay = slices.Insert(s.replay, i, p)
}

// ---------------------------------------------------------------------------
// Rounds

// Plan is what one round reads: the entries to deliver again (Replay),
// or N new entries from From.
type Plan struct {
	Epoch  uint64
	Replay []Position
	From   Position
	N      int
	// Compacted: an eligible consumer reads the compacted view.
	Compacted bool
}

// Log is what a round needs to know of the topic's log.
type Log struct {
	// LastConfirmed is the position of the last entry written.
	LastConfirmed Position
	// Limit, when HasLimit, is the last entry that may be dispatched yet
	// (synchronous replication: confirmed by enough regions).
	Limit    Position
	HasLimit bool
}

// Plan decides what the next round reads: entries to deliver again
// first, else new entries from ReadPos; false when nothing can be sent
// (no consumer can take anything, or nothing is to be read). Permits
// count messages and a round reads entries, counted at avgMsgs messages
// per entry (the mean of the last round sent, as Pulsar does), so a
// backlog of batches is read as the consumers make room.
func (s *State) Plan(log Log, avgMsgs int64) (Plan, bool) {
	per := max(1, avgMsgs)
	var permits int64
	for _, c := range s.consumers {
		if s.Eligible(c) && s.canTake(c) {
			permits += min(c.permits, MaxReadBatch*per) // no overflow summing
		}
	}
	if permits <= 0 {
		return Plan{}, false
	}
	n := int(min(max(1, permits/per), MaxReadBatch, int64(s.unackedRoom())))
	pl := Plan{Epoch: s.epoch}
	for _, c := range s.consumers {
		if c.compacted && s.Eligible(c) {
			pl.Compacted = true
		}
	}
	if len(s.replay) > 0 && !s.replayBlocked {
		pl.Replay = slices.Clone(s.replay[:min(n, len(s.replay))])
		return pl, true
	}
	if len(s.replay) >= MaxReplay {
		return Plan{}, false
	}
	if s.readPos.Compare(log.LastConfirmed) > 0 {
		return Plan{}, false
	}
	if log.HasLimit && s.readPos.Compare(log.Limit) > 0 {
		return Plan{}, false
	}
	pl.From, pl.N = s.readPos, n
	return pl, true
}

// Drained says whether everything up to lastConfirmed was read and
// nothing waits to be delivered again.
func (s *State) Drained(lastConfirmed Position) bool {
	return len(s.replay) == 0 && s.readPos.Compare(lastConfirmed) > 0
}

// Entry is an entry a round read, as the driver found it.
type Entry struct {
	Position Position
	// Gone: it is no longer in the log (trimmed, compacted away).
	Gone bool
	// Acked: the subscription's cursor acknowledged it already.
	Acked bool
	// Bad: its metadata could not be decoded (it is skipped).
	Bad bool
	// Covered: another region's state of the subscription acknowledges
	// it (not delivered; the driver acknowledges it).
	Covered bool
	// Key is the message's sticky key (Key_Shared: its ordering key, or
	// partition key, or Pulsar's NONE_KEY), Messages the number
	// of messages it holds (1 unless a batch), DeliverAt its
	// deliver-at time (zero: none).
	Key       []byte
	Messages  int64
	DeliverAt time.Time
}

// Delivery is an entry given to a consumer: entries[Index] of Assign's.
type Delivery struct {
	Consumer *Consumer
	Index    int
	Messages int64
}

// Assign hands the entries a round read (for pl) to consumers, in order,
// and returns the deliveries; next is where new entries continue (when
// pl read new entries and advance says the read succeeded). covered are
// the Covered entries, for the driver to acknowledge. An entry no
// consumer can take now waits to be delivered again. An entry with a
// deliver-at time after now waits for it when delay is on (the topic's
// delayed delivery) and the type honours it, unless it is delivered
// again. A round planned before a Seek hands out nothing.
func (s *State) Assign(pl Plan, entries []Entry, next Position, advance bool, now time.Time, delay bool) (out []Delivery, covered []Position) {
	if pl.Epoch != s.epoch {
		return nil, nil
	}
	isReplay := len(pl.Replay) > 0
	if isReplay {
		for _, p := range pl.Replay {
			delete(s.replaySet, p)
		}
		s.replay = slices.DeleteFunc(s.replay, func(p Position) bool { return slices.Contains(pl.Replay, p) })
	} else if advance {
		s.readPos = next
	}
	sel := s.selector()
	sentReplay := false
	delay = delay && s.Delayable() && !isReplay
	for i, e := range entries {
		p := e.Position
		switch {
		case e.Gone, e.Acked, s.pending[p] != nil:
			delete(s.redeliveries, p)
			continue
		case e.Bad:
			continue
		case e.Covered:
			delete(s.redeliveries, p)
			covered = append(covered, p)
			continue
		case delay && !e.DeliverAt.IsZero() && e.DeliverAt.After(now):
			heap.Push(&s.delayed, delayedEntry{at: e.DeliverAt, p: p})
			continue
		}
		c := sel.pick(e.Key)
		if c == nil {
			s.addReplay(p)
			continue
		}
		n := max(1, e.Messages)
		c.permits -= n
		c.pending[p] = struct{}{}
		s.pending[p] = c
		sentReplay = sentReplay || isReplay
		out = append(out, Delivery{Consumer: c, Index: i, Messages: n})
	}
	if isReplay && !sentReplay {
		s.replayBlocked = true
	}
	return out, covered
}

// Offer hands one message of a non-persistent topic to a consumer that
// can take it now, or to none (it is dropped): nothing is owed for it.
func (s *State) Offer(key []byte, messages int64) *Consumer {
	c := s.selector().pick(key)
	if c != nil {
		c.permits -= max(1, messages)
	}
	return c
}

// ---------------------------------------------------------------------------
// Delayed delivery

type delayedEntry struct {
	at time.Time
	p  Position
}

type delayHeap []delayedEntry

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h delayHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *delayHeap) Push(x any)        { *h = append(*h, x.(delayedEntry)) }
func (h *delayHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// PromoteDelayed makes the delayed entries that are due at now (all of
// them when off: the topic's delayed delivery was turned off) wait for
// delivery again like any other.
func (s *State) PromoteDelayed(now time.Time, off bool) {
	for len(s.delayed) > 0 && (off || !s.delayed[0].at.After(now)) {
		d := heap.Pop(&s.delayed).(delayedEntry)
		s.addReplay(d.p)
		s.replayBlocked = false
	}
}

// NextDelayed is the earliest deliver-at time waited for.
func (s *State) NextDelayed() (time.Time, bool) {
	if len(s.delayed) == 0 {
		return time.Time{}, false
	}
	return s.delayed[0].at, true
}
