package broker

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/broker/compactor"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/broker/ratelimit"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Position is an entry's position in a topic's log.
type Position = mledger.Position

// ReservedPrefix starts the names of the broker's own cursors
// (de-duplication, replication); clients cannot subscribe with it.
const ReservedPrefix = replication.ReservedPrefix

// maxReadBatch bounds the entries one dispatch round reads.
const maxReadBatch = 100

// maxReadBytes bounds the bytes one dispatch round reads (Pulsar's
// dispatcherMaxReadSizeBytes), counted at the mean size of the entries
// the round before sent: a catch-up read of a backlog of large batches
// then holds the bookies, the broker's memory and its CPU for a few
// MB at a time, not maxReadBatch of them at once.
const maxReadBytes = 5 << 20

// maxReplay bounds the entries waiting for redelivery before the
// dispatcher stops reading new ones (Key_Shared with a stuck consumer).
const maxReplay = 10000

// subscription is a durable cursor (or, for readers and non-persistent
// topics, an in-memory position) and the consumers attached to it. Its
// dispatcher goroutine runs while it has consumers.
type subscription struct {
	t       *Topic
	name    string
	durable bool
	cursor  *mledger.Cursor // nil unless durable on a persistent topic

	// sendMu orders the dispatcher's sends with consumers being detached:
	// nothing is sent to a consumer after removeConsumer returned.
	sendMu sync.Mutex

	// mu guards everything below and the consumers' permits and pending.
	mu            sync.Mutex
	subType       pb.CommandSubscribe_SubType
	consumers     []*consumer
	readPos       Position
	startPos      Position // a reader's start (or last seek) position
	keep          bool     // a reader's subscription outlives its consumers until they resubscribe (seek)
	epoch         uint64   // bumped by seek: reads begun before are dropped
	replay        []Position
	replaySet     map[Position]struct{}
	replayBlocked bool // the last round could send none of replay
	pending       map[Position]*consumer
	redeliveries  map[Position]uint32
	delayed       delayHeap
	keyRanges     []keyRange // Key_Shared auto-split assignment
	rr            int
	closed        bool
	running       bool
	wake          chan struct{}
	stop          chan struct{}
	done          chan struct{}
	msgOut        int64
	// When a consumer last sent a FLOW, was last sent an entry and last
	// acknowledged, Unix ms (0: not since loaded).
	lastFlow, lastConsumed, lastAcked atomic.Int64
	// rl is the subscription's dispatch limiter (rates.go).
	rl subRates
}

func newSubscription(t *Topic, name string, st pb.CommandSubscribe_SubType, durable bool) *subscription {
	return &subscription{
		t: t, name: name, subType: st, durable: durable,
		replaySet:    map[Position]struct{}{},
		pending:      map[Position]*consumer{},
		redeliveries: map[Position]uint32{},
		wake:         make(chan struct{}, 1),
	}
}

// subscribe attaches k to the subscription cmd names, creating it.
func (t *Topic) subscribe(ctx context.Context, cmd *pb.CommandSubscribe, k *consumer) error {
	name := cmd.GetSubscription()
	if strings.HasPrefix(name, replication.Prefix) {
		if err := t.checkReplSubscribe(ctx, name, cmd.GetSubType()); err != nil {
			return err
		}
	} else if strings.HasPrefix(name, ReservedPrefix) {
		return fmt.Errorf("%w: subscription names starting with %q are reserved", ErrInvalidArgument, ReservedPrefix)
	} else if name == compactor.CursorName {
		return fmt.Errorf("%w: subscription name %s is reserved for compaction", ErrInvalidArgument, name)
	}
	if err := t.checkReadCompacted(cmd); err != nil {
		return err
	}
	k.compacted = cmd.GetReadCompacted()
	durable := cmd.Durable == nil || cmd.GetDurable()
	if t.ml == nil {
		durable = false
	}
	st := cmd.GetSubType()
	user := !strings.HasPrefix(name, ReservedPrefix) && !strings.HasPrefix(name, replication.Prefix)
	autoSub := t.autoSubscriptionAllowed() // (t.mu is held while a subscription is made)
	s, err := t.subscription(name, func() (*subscription, error) {
		s := newSubscription(t, name, st, durable)
		if t.ml == nil {
			return s, nil
		}
		if durable && user && !autoSub && !slices.Contains(t.ml.Cursors(), name) {
			return nil, fmt.Errorf("%w: %s on %s (auto subscription creation is off)", ErrNoAutoSubscription, name, t.name)
		}
		if durable {
			initial := mledger.Latest
			if cmd.GetInitialPosition() == pb.CommandSubscribe_Earliest {
				initial = mledger.Earliest
			}
			cur, err := t.ml.OpenCursor(ctx, name, initial)
			if err != nil {
				return nil, err
			}
			s.cursor = cur
			md := cur.MarkDelete()
			s.readPos = Position{Ledger: md.Ledger, Entry: md.Entry + 1}
			if k.compacted && md.Entry == -1 {
				// Nothing consumed (created at Earliest, or reset there):
				// the compacted view's entries before the log are unread.
				s.readPos = t.compactedStart(ctx, Position{}, s.readPos)
			}
			t.subChanged(name) // it exists in every region of the namespace
			return s, nil
		}
		s.readPos = t.startPosition(cmd.GetStartMessageId(), cmd.GetInitialPosition())
		if d := cmd.GetStartMessageRollbackDurationSec(); d > 0 {
			if p, err := t.findByTime(ctx, rollback(t.b.deps.Now(), d)); err == nil {
				s.readPos = p
			}
		}
		if k.compacted {
			want := s.readPos
			if startsEarliest(cmd.GetStartMessageId(), cmd.GetInitialPosition()) {
				want = Position{}
			}
			s.readPos = t.compactedStart(ctx, want, s.readPos)
		}
		s.startPos = s.readPos
		return s, nil
	})
	if err != nil {
		return err
	}
	return s.addConsumer(k, st)
}

// checkConsumerLimitsLocked refuses one more consumer on s beyond the
// topic's maxConsumers or maxConsumersPerSubscription (s.mu held).
// Consumers of the broker's own subscriptions are not limited.
func (s *subscription) checkConsumerLimitsLocked(maxTopic, maxSub, onOthers int) error {
	if strings.HasPrefix(s.name, ReservedPrefix) {
		return nil
	}
	if maxSub > 0 && len(s.consumers) >= maxSub {
		return fmt.Errorf("%w: subscription %s of topic %s has reached its limit of %d consumers (maxConsumersPerSubscription)", ErrTooManySubConsumers, s.name, s.t.name, maxSub)
	}
	if maxTopic > 0 && onOthers+len(s.consumers) >= maxTopic {
		return fmt.Errorf("%w: topic %s has reached its limit of %d consumers (maxConsumers)", ErrTooManyConsumers, s.t.name, maxTopic)
	}
	return nil
}

// endPosition is the position just after the last entry.
func (t *Topic) endPosition() Position {
	last := t.ml.LastConfirmed()
	return Position{Ledger: last.Ledger, Entry: last.Entry + 1}
}

// startPosition resolves a reader's start message id: earliest, latest or
// the given entry (the client filters inside a batch), clamped to the log.
func (t *Topic) startPosition(id *pb.MessageIdData, initial pb.CommandSubscribe_InitialPosition) Position {
	if id == nil {
		if initial == pb.CommandSubscribe_Earliest {
			p, _ := t.ml.FirstPosition()
			return p
		}
		return t.endPosition()
	}
	l, e := int64(id.GetLedgerId()), int64(id.GetEntryId())
	switch {
	case l < 0 || e < 0 && l <= 0:
		p, _ := t.ml.FirstPosition()
		return p
	case l == math.MaxInt64:
		return t.endPosition()
	}
	p := Position{Ledger: l, Entry: max(e, 0)}
	if end := t.endPosition(); p.Compare(end) > 0 {
		return end
	}
	if first, ok := t.ml.FirstPosition(); ok && p.Compare(first) < 0 {
		return first
	}
	return p
}

// findByTime returns the first entry published at or after ts (the end
// of the log if none), by binary search over the entries.
func (t *Topic) findByTime(ctx context.Context, ts time.Time) (Position, error) {
	type span struct {
		id, n int64
	}
	var spans []span
	var total int64
	for _, l := range t.ml.Ledgers() {
		if l.Entries > 0 {
			spans = append(spans, span{l.ID, l.Entries})
			total += l.Entries
		}
	}
	at := func(i int64) Position {
		for _, s := range spans {
			if i < s.n {
				return Position{Ledger: s.id, Entry: i}
			}
			i -= s.n
		}
		return t.endPosition()
	}
	ms := uint64(max(0, ts.UnixMilli())) // before the epoch: the first entry
	var ferr error
	i := sort.Search(int(total), func(i int) bool {
		if ferr != nil {
			return true
		}
		es, _, err := t.ml.Read(ctx, at(int64(i)), 1)
		if err != nil || len(es) == 0 {
			ferr = err
			return true
		}
		meta, _, err := wire.DecodeEntry(es[0].Data)
		if err != nil {
			return false
		}
		return meta.GetPublishTime() >= ms
	})
	if ferr != nil {
		return Position{}, ferr
	}
	return at(int64(i)), nil
}

// addConsumer attaches k, enforcing the subscription type's rules.
func (s *subscription) addConsumer(k *consumer, st pb.CommandSubscribe_SubType) error {
	maxTopic, maxSub, onOthers := s.t.consumerLimits(s)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("%w: subscription %s is closing", ErrNotOwner, s.name)
	}
	if err := s.checkConsumerLimitsLocked(maxTopic, maxSub, onOthers); err != nil {
		return err
	}
	if err := s.checkRangesLocked(k, st); err != nil {
		return err
	}
	if len(s.consumers) > 0 {
		if st != s.subType {
			return fmt.Errorf("%w: subscription %s is %v, consumer asks for %v", ErrBusy, s.name, s.subType, st)
		}
		if st == pb.CommandSubscribe_Exclusive {
			return fmt.Errorf("%w: exclusive consumer is already connected to subscription %s", ErrBusy, s.name)
		}
	}
	s.subType = st
	s.keep = false
	k.sub = s
	s.consumers = append(s.consumers, k)
	s.t.touchSub(s.name)
	s.keyAddLocked(k)
	if !s.running {
		s.running = true
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go s.run(s.stop, s.done)
	}
	return nil
}

// consumerReady runs after the client got SUCCESS for k: a Failover
// subscription tells every consumer whether it is the active one.
func (s *subscription) consumerReady(k *consumer) {
	s.notifyActive()
}

// notifyActive recomputes the Failover active consumer and sends
// ACTIVE_CONSUMER_CHANGE to every consumer.
func (s *subscription) notifyActive() {
	s.mu.Lock()
	if s.subType != pb.CommandSubscribe_Failover || len(s.consumers) == 0 {
		s.mu.Unlock()
		return
	}
	active := s.activeLocked()
	type note struct {
		k      *consumer
		active bool
	}
	var notes []note
	for _, c := range s.consumers {
		was := c.active
		if c == active && !c.active {
			// Entries the previous active one held go to the new one.
			for _, o := range s.consumers {
				if o != c && len(o.pending) > 0 {
					for p := range o.pending {
						delete(s.pending, p)
						s.addReplayLocked(p)
					}
					clear(o.pending)
				}
			}
		}
		c.active = c == active
		// The Go client registers a consumer only after it has read the
		// SUBSCRIBE reply, and drops notifications for unknown ids: tell a
		// consumer once it has sent its first FLOW (see flow), after that
		// on every change.
		if c.flowed && (c.active != was || c.told != c.active || !c.toldOnce) {
			c.told, c.toldOnce = c.active, true
			notes = append(notes, note{c, c.active})
		}
	}
	s.mu.Unlock()
	for _, n := range notes {
		id := n.k.id
		n.k.c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_ACTIVE_CONSUMER_CHANGE.Enum(), ActiveConsumerChange: &pb.CommandActiveConsumerChange{
			ConsumerId: &id, IsActive: boolp(n.active),
		}})
	}
	if len(notes) > 0 && strings.HasPrefix(s.name, replication.Prefix) {
		s.t.subChangedAll() // a replicator took over the stream
	}
	s.kick()
}

// activeLocked picks the Failover active consumer: consumers sorted by
// priority then name; index 0, or the partition index modulo the count on
// a partition of a partitioned topic (so N consumers of N partitions get
// one partition each).
func (s *subscription) activeLocked() *consumer {
	if len(s.consumers) == 0 {
		return nil
	}
	sorted := slices.Clone(s.consumers)
	slices.SortStableFunc(sorted, func(a, b *consumer) int {
		if c := cmp.Compare(a.priority, b.priority); c != 0 {
			return c // not a.priority-b.priority, which overflows int32
		}
		return strings.Compare(a.name, b.name)
	})
	i := 0
	if p := s.t.name.Partition(); p >= 0 {
		i = p % len(sorted)
	}
	return sorted[i]
}

// removeConsumer detaches k; what it held unacknowledged is redelivered
// to the others.
func (s *subscription) removeConsumer(k *consumer) {
	s.sendMu.Lock()
	k.detached = true
	s.sendMu.Unlock()
	s.mu.Lock()
	i := slices.Index(s.consumers, k)
	if i < 0 {
		s.mu.Unlock()
		return
	}
	s.consumers = slices.Delete(s.consumers, i, i+1)
	for p := range k.pending {
		delete(s.pending, p)
		s.redeliveries[p]++
		s.addReplayLocked(p)
	}
	clear(k.pending)
	s.keyRemoveLocked(k)
	empty := len(s.consumers) == 0
	var stop chan struct{}
	if empty && s.running {
		s.running = false
		stop = s.stop
	}
	failover := s.subType == pb.CommandSubscribe_Failover
	keep := s.keep
	s.mu.Unlock()
	if stop != nil {
		close(stop)
	}
	s.t.touchSub(s.name)
	if empty && !s.durable && !keep {
		s.t.removeSubscription(s)
	}
	if failover && !empty {
		s.notifyActive()
	}
	s.kick()
}

// closeAll detaches every consumer (telling clients to resubscribe when
// notify) and stops the dispatcher for good.
func (s *subscription) closeAll(notify bool) {
	s.mu.Lock()
	s.closed = true
	cons := slices.Clone(s.consumers)
	s.mu.Unlock()
	for _, k := range cons {
		s.removeConsumer(k)
		k.c.closeConsumer(k, notify)
	}
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// disconnectAll detaches every consumer and tells the clients to
// resubscribe (after a seek).
func (s *subscription) disconnectAll() {
	s.mu.Lock()
	// A reader resubscribes after a seek: keep its position for it.
	s.keep = true
	cons := slices.Clone(s.consumers)
	s.mu.Unlock()
	for _, k := range cons {
		s.removeConsumer(k)
		k.c.closeConsumer(k, true)
	}
}

func (s *subscription) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscription) flow(k *consumer, n int64) {
	now := s.t.b.deps.Now().UnixMilli()
	k.lastFlow.Store(now)
	s.lastFlow.Store(now)
	s.mu.Lock()
	// Permits only add up: a client sending FLOWs for ever saturates at
	// the most an int64 holds instead of wrapping to a negative count.
	if k.permits > math.MaxInt64-n {
		k.permits = math.MaxInt64
	} else {
		k.permits += n
	}
	s.replayBlocked = false
	first := !k.flowed
	k.flowed = true
	failover := s.subType == pb.CommandSubscribe_Failover
	s.mu.Unlock()
	if first && failover {
		if strings.HasPrefix(s.name, replication.Prefix) {
			// A replicator: the subscriptions' states go to it before any
			// entry can (it is not active yet), so the other region has
			// the acknowledgements of entries it is about to receive.
			s.t.shipAllTo(k)
		}
		s.notifyActive()
	}
	s.kick()
}

// ack acknowledges ps for k (individually, or cumulatively up to ps[0])
// and persists the cursor.
func (s *subscription) ack(k *consumer, ps []Position, cumulative bool) error {
	if s.cursor != nil {
		// Ids a client got in another region before a failover moved it
		// here are translated, never applied to this region's entries.
		var foreign []Position
		if ps, foreign = s.t.splitForeign(ps); len(foreign) > 0 {
			s.t.translateAcks(k.c.ctx, s.name, foreign, cumulative)
			s.t.subChanged(s.name)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	s.acked(k)
	s.mu.Lock()
	if cumulative {
		if s.subType == pb.CommandSubscribe_Shared || s.subType == pb.CommandSubscribe_Key_Shared {
			s.mu.Unlock()
			return fmt.Errorf("%w: cumulative acknowledgement is not allowed on %v subscription %s", ErrInvalidArgument, s.subType, s.name)
		}
		upTo := ps[0]
		// On a replication cursor, the replicator acknowledges once the
		// remote region stored the entries: publishes waiting for it may
		// go (a no-op elsewhere).
		s.t.syncConfirmed(s.name, upTo)
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
	} else {
		s.forgetLocked(ps)
	}
	s.replayBlocked = false
	s.mu.Unlock()
	s.kick()
	if s.cursor == nil {
		return nil
	}
	// Positions at or before the mark-delete position are acknowledged
	// already (a consumer reading compacted gets entries of ledgers
	// trimmed since, which the cursor can no longer name).
	md := s.cursor.MarkDelete()
	ps = slices.DeleteFunc(slices.Clone(ps), func(p Position) bool { return p.Compare(md) <= 0 })
	if len(ps) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(k.c.ctx, 30*time.Second)
	defer cancel()
	var err error
	if cumulative {
		err = s.cursor.AckCumulative(ctx, ps[0])
	} else {
		err = s.cursor.AckMany(ctx, ps)
	}
	s.t.subChanged(s.name)
	return err
}

// acked notes that k acknowledged now.
func (s *subscription) acked(k *consumer) {
	now := s.t.b.deps.Now().UnixMilli()
	k.lastAcked.Store(now)
	s.lastAcked.Store(now)
}

// ackBatch acknowledges some messages of the batch entry at p: remaining
// is the client's ack set (bit i set: message i not acknowledged yet).
// The entry stays with its consumer until no message of it is left; when
// it is delivered again, its ack set goes with it so the client skips
// what was acknowledged. Ids from another region are not translated
// partially: the batch comes again whole.
func (s *subscription) ackBatch(k *consumer, p Position, remaining []int64) error {
	if s.cursor == nil {
		return nil
	}
	if _, foreign := s.t.splitForeign([]Position{p}); len(foreign) > 0 {
		return nil
	}
	s.acked(k)
	ctx, cancel := context.WithTimeout(k.c.ctx, 30*time.Second)
	defer cancel()
	err := s.cursor.AckBatch(ctx, p, remaining)
	if s.cursor.IsAcked(p) {
		s.forget([]Position{p})
	}
	s.t.subChanged(s.name)
	return err
}

// redeliver sends k's unacknowledged entries ps (all of them when ps is
// empty) again, each with its redelivery count raised by one.
func (s *subscription) redeliver(k *consumer, ps []Position) {
	s.mu.Lock()
	if len(ps) == 0 {
		for p := range k.pending {
			ps = append(ps, p)
		}
	}
	for _, p := range ps {
		if s.pending[p] != k {
			continue
		}
		delete(s.pending, p)
		delete(k.pending, p)
		s.redeliveries[p]++
		k.redelivered.Add(1)
		s.addReplayLocked(p)
	}
	s.replayBlocked = false
	s.mu.Unlock()
	s.kick()
}

func (s *subscription) addReplayLocked(p Position) {
	if _, ok := s.replaySet[p]; ok {
		return
	}
	s.replaySet[p] = struct{}{}
	i, _ := slices.BinarySearchFunc(s.replay, p, Position.Compare)
	s.replay = slices.Insert(s.replay, i, p)
}

// unsubscribe removes the subscription: only k may be attached unless
// force, in which case the others are disconnected.
func (s *subscription) unsubscribe(ctx context.Context, k *consumer, force bool) error {
	s.mu.Lock()
	others := len(s.consumers) > 1 || len(s.consumers) == 1 && s.consumers[0] != k
	s.mu.Unlock()
	if others && !force {
		return fmt.Errorf("%w: subscription %s has other consumers", ErrBusy, s.name)
	}
	if s.cursor != nil {
		if err := s.t.ml.DeleteCursor(ctx, s.name); err != nil && !errors.Is(err, mledger.ErrNoCursor) {
			return err
		}
	}
	s.t.removeSubscription(s)
	s.mu.Lock()
	s.closed = true
	cons := slices.Clone(s.consumers)
	s.mu.Unlock()
	for _, o := range cons {
		s.removeConsumer(o)
		if o != k {
			o.c.closeConsumer(o, true)
		}
	}
	return nil
}

// seek moves the subscription to p; consumers are then disconnected.
func (s *subscription) seek(ctx context.Context, p Position) error {
	if s.t.ml == nil {
		return fmt.Errorf("%w: seek on a non-persistent topic", ErrInvalidArgument)
	}
	id := &pb.MessageIdData{LedgerId: u64p(uint64(p.Ledger)), EntryId: u64p(uint64(p.Entry))}
	to := s.t.startPosition(id, pb.CommandSubscribe_Earliest)
	if s.cursor != nil {
		if err := s.cursor.ResetTo(ctx, to); err != nil {
			return err
		}
	}
	if s.readsCompacted() {
		to = s.t.compactedStart(ctx, p, to)
	}
	s.resetTo(to)
	return nil
}

func (s *subscription) seekTime(ctx context.Context, ts time.Time) error {
	if s.t.ml == nil {
		return fmt.Errorf("%w: seek on a non-persistent topic", ErrInvalidArgument)
	}
	p, err := s.t.findByTime(ctx, ts)
	if err != nil {
		return err
	}
	if s.cursor != nil {
		if err := s.cursor.ResetTo(ctx, p); err != nil {
			return err
		}
	}
	if first, ok := s.t.ml.FirstPosition(); ok && p == first && s.readsCompacted() {
		// Before the log's first entry: from the compacted view's first
		// (the view is not searched by time).
		p = s.t.compactedStart(ctx, Position{}, p)
	}
	s.resetTo(p)
	return nil
}

func (s *subscription) resetTo(p Position) {
	s.mu.Lock()
	s.readPos, s.startPos = p, p
	s.epoch++
	s.replay, s.replayBlocked = nil, false
	clear(s.replaySet)
	clear(s.pending)
	clear(s.redeliveries)
	s.delayed = nil
	for _, k := range s.consumers {
		clear(k.pending)
		k.toldEnd = false
	}
	s.mu.Unlock()
	s.kick()
}

// markDelete is the durable cursor's mark-delete position; for a reader,
// the position before where it started or last sought (the Go client's
// HasNext after a seek by time compares the last entry with it).
func (s *subscription) markDelete() (Position, bool) {
	if s.cursor == nil {
		if s.t.ml == nil {
			return Position{}, false
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return Position{Ledger: s.startPos.Ledger, Entry: s.startPos.Entry - 1}, true
	}
	return s.cursor.MarkDelete(), true
}

func (s *subscription) backlog() int64 {
	if s.cursor != nil {
		return s.cursor.Backlog()
	}
	return 0
}

// ---------------------------------------------------------------------------
// Dispatch

type plan struct {
	epoch  uint64
	replay []Position
	from   Position
	n      int
	// compacted: the consumer reads the compacted view (read_compacted).
	compacted bool
}

type outFrame struct {
	k *consumer
	// the MESSAGE frame: its head, then the entry (conn.sendEntry)
	head, entry []byte
	// n messages of bytes bytes, for the dispatch rates
	n, bytes int64
}

// run is the dispatcher: it reads entries for consumers with permits and
// sends them, until stop is closed.
func (s *subscription) run(stop, done chan struct{}) {
	defer close(done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		default:
		}
		budget, throttled := s.dispatchBudget()
		if throttled > 0 {
			timer.Reset(min(throttled, ratelimit.MaxSleep))
			select {
			case <-stop:
				return
			case <-timer.C:
			}
			continue
		}
		s.mu.Lock()
		s.promoteDelayedLocked()
		var notify <-chan struct{}
		if s.t.ml != nil {
			notify = s.t.ml.Notify()
		}
		pl, ok := s.planLocked()
		pl = pl.limit(min(budget, s.readBytesCap()))
		wait := time.Hour
		if len(s.delayed) > 0 {
			wait = max(time.Millisecond, time.Until(s.t.delayedDelivery().releaseAt(s.delayed[0].at)))
		}
		var ended []*consumer
		if !ok {
			ended = s.reachedEndLocked()
		}
		s.mu.Unlock()
		s.tellEnd(ended)
		if !ok {
			timer.Reset(wait)
			select {
			case <-stop:
				return
			case <-s.wake:
			case <-notify:
			case <-timer.C:
			}
			continue
		}
		entries, masks, next, err := s.read(pl)
		if err != nil {
			s.t.b.log.Warn("dispatch read failed", "topic", s.t.name.String(), "subscription", s.name, "err", err)
			timer.Reset(100 * time.Millisecond)
			select {
			case <-stop:
				return
			case <-timer.C:
			}
		}
		frames, covered := s.assign(pl, entries, masks, next, err == nil)
		if len(covered) > 0 {
			s.ackCovered(covered)
		}
		s.sendMu.Lock()
		for _, f := range frames {
			if !f.k.detached {
				f.k.c.sendEntry(f.head, f.entry)
			}
		}
		s.sendMu.Unlock()
		s.chargeDispatch(frames)
	}
}

// planLocked decides what the next round reads: entries to redeliver
// first, else new entries from readPos; false when nothing can be sent.
func (s *subscription) planLocked() (plan, bool) {
	// Permits count messages; a round reads entries, counted at the mean
	// messages per entry of the last round sent (as Pulsar does), so a
	// backlog of batches is read as the consumers make room, not in
	// rounds of many times their permits.
	per := max(1, s.rl.avgMsgs)
	var permits int64
	for _, k := range s.consumers {
		if s.eligibleLocked(k) && s.canTakeLocked(k) {
			permits += min(k.permits, maxReadBatch*per) // no overflow summing
		}
	}
	if permits <= 0 || s.t.ml == nil {
		return plan{}, false
	}
	n := int(min(max(1, permits/per), maxReadBatch, int64(s.unackedRoomLocked())))
	pl := plan{epoch: s.epoch}
	for _, k := range s.consumers {
		if k.compacted && s.eligibleLocked(k) {
			pl.compacted = true
		}
	}
	if len(s.replay) > 0 && !s.replayBlocked {
		cnt := min(n, len(s.replay))
		pl.replay = slices.Clone(s.replay[:cnt])
		return pl, true
	}
	if len(s.replay) >= maxReplay {
		return plan{}, false
	}
	if s.readPos.Compare(s.t.ml.LastConfirmed()) > 0 {
		return plan{}, false
	}
	if lim, ok := s.syncLimit(); ok && s.readPos.Compare(lim) > 0 {
		return plan{}, false // not confirmed by enough regions yet (syncrepl.go)
	}
	pl.from, pl.n = s.readPos, n
	return pl, true
}

// syncLimit is the topic's dispatch limit for this subscription: none for
// a replication cursor.
func (s *subscription) syncLimit() (Position, bool) {
	if strings.HasPrefix(s.name, replication.Prefix) {
		return Position{}, false
	}
	return s.t.dispatchLimit()
}

func (s *subscription) eligibleLocked(k *consumer) bool {
	switch s.subType {
	case pb.CommandSubscribe_Exclusive:
		return len(s.consumers) > 0 && s.consumers[0] == k
	case pb.CommandSubscribe_Failover:
		return k.active
	}
	return true
}

// read reads what pl names, outside the lock: from the topic, or, for a
// consumer reading compacted, from the compacted view up to its horizon.
// masks are the ack sets of compacted batches some of whose messages
// were removed (by position).
func (s *subscription) read(pl plan) (_ []mledger.Entry, masks map[Position][]int64, _ Position, _ error) {
	ctx, cancel := context.WithTimeout(s.t.b.ctx, 30*time.Second)
	defer cancel()
	var view *compactor.View
	if pl.compacted {
		v, err := s.t.compactedView(ctx)
		if err != nil {
			return nil, nil, Position{}, err
		}
		view = v
	}
	inView := func(p Position) bool { return view != nil && p.Compare(view.Horizon()) <= 0 }
	keep := func(e compactor.Entry) mledger.Entry {
		if e.AckSet != nil {
			if masks == nil {
				masks = map[Position][]int64{}
			}
			masks[e.Position] = e.AckSet
		}
		return mledger.Entry{Position: e.Position, Data: e.Data}
	}
	if len(pl.replay) > 0 {
		var out []mledger.Entry
		for _, p := range pl.replay {
			if inView(p) {
				e, ok, err := view.Find(ctx, p)
				if err != nil {
					return out, masks, Position{}, err
				}
				if !ok {
					out = append(out, mledger.Entry{Position: p}) // compacted away: dropped in assign
					continue
				}
				out = append(out, keep(e))
				continue
			}
			es, _, err := s.t.ml.Read(ctx, p, 1)
			if errors.Is(err, mledger.ErrInvalidPosition) || err == nil && (len(es) == 0 || es[0].Position != p) {
				out = append(out, mledger.Entry{Position: p}) // gone: dropped in assign
				continue
			}
			if err != nil {
				return out, masks, Position{}, err
			}
			out = append(out, es[0])
		}
		return out, masks, Position{}, nil
	}
	if inView(pl.from) {
		es, next, err := view.Read(ctx, pl.from, pl.n)
		out := make([]mledger.Entry, 0, len(es))
		for _, e := range es {
			out = append(out, keep(e))
		}
		return out, masks, next, err
	}
	es, next, err := s.t.ml.Read(ctx, pl.from, pl.n)
	if lim, ok := s.syncLimit(); ok && err == nil {
		for i, e := range es {
			if e.Position.Compare(lim) > 0 {
				es, next = es[:i], e.Position
				break
			}
		}
	}
	return es, nil, next, err
}

// assign hands the entries read to consumers and builds their frames.
// covered are entries another region's state acknowledges (still waiting
// to be applied here): not sent, acknowledged by the caller.
func (s *subscription) assign(pl plan, entries []mledger.Entry, masks map[Position][]int64, next Position, advance bool) (out []outFrame, covered []Position) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pl.epoch != s.epoch || s.closed {
		return nil, nil
	}
	isReplay := len(pl.replay) > 0
	if isReplay {
		for _, p := range pl.replay {
			if _, ok := s.replaySet[p]; ok {
				delete(s.replaySet, p)
			}
		}
		s.replay = slices.DeleteFunc(s.replay, func(p Position) bool {
			return slices.Contains(pl.replay, p)
		})
	} else if advance {
		s.readPos = next
	}
	blocked := map[*consumer]bool{}
	sentReplay := false
	now := s.t.b.deps.Now()
	delay := !s.t.delayedDelivery().off && s.delayable()
	for _, e := range entries {
		p := e.Position
		if e.Data == nil {
			delete(s.redeliveries, p)
			continue
		}
		if s.cursor != nil && s.cursor.IsAcked(p) && !(pl.compacted && s.t.goneFromLog(p)) || s.pending[p] != nil {
			// (A compacted entry whose own is trimmed from the log is not
			// acknowledged by a mark-delete position past it.)
			delete(s.redeliveries, p)
			continue
		}
		meta, _, err := wire.DecodeEntry(e.Data)
		if err != nil {
			s.t.b.log.Error("undecodable entry skipped", "topic", s.t.name.String(), "position", p.String(), "err", err)
			continue
		}
		if s.cursor != nil && s.t.waitingCovers(s.name, p, meta) {
			delete(s.redeliveries, p)
			covered = append(covered, p)
			continue
		}
		if at := meta.GetDeliverAtTime(); at > 0 && delay && !isReplay {
			if t := time.UnixMilli(at); t.After(now) {
				heap.Push(&s.delayed, delayed{at: t, p: p})
				continue
			}
		}
		k := s.pickLocked(meta, blocked)
		if k == nil {
			s.addReplayLocked(p)
			continue
		}
		n := int64(1)
		if meta.NumMessagesInBatch != nil {
			n = int64(max(1, meta.GetNumMessagesInBatch()))
		}
		k.permits -= n
		k.pending[p] = struct{}{}
		s.pending[p] = k
		if isReplay {
			sentReplay = true
		}
		f, err := s.messageFrame(k, p, e.Data, masks[p])
		if err != nil {
			continue
		}
		k.msgOut.Add(n)
		k.bytesOut.Add(int64(len(e.Data)))
		k.lastConsumed.Store(now.UnixMilli())
		s.lastConsumed.Store(now.UnixMilli())
		s.msgOut += n
		s.t.b.recordOut(s.t, n, int64(len(e.Data)))
		s.traceDeliver(meta, k)
		out = append(out, outFrame{k, f, e.Data, n, int64(len(e.Data))})
	}
	if isReplay && !sentReplay {
		s.replayBlocked = true
	}
	return out, covered
}

// delayable says whether deliver-at times are honoured, while the
// topic's delayed delivery is on: on Shared and Key_Shared
// subscriptions, as in Pulsar. (The limits on unacknowledged entries
// apply to the same subscriptions.)
func (s *subscription) delayable() bool {
	return s.subType == pb.CommandSubscribe_Shared || s.subType == pb.CommandSubscribe_Key_Shared
}

// messageFrame builds the head of the MESSAGE frame of the entry at p
// for k, which data then follows (conn.sendEntry). mask,
// when set, is the ack set of the messages a compacted batch kept.
func (s *subscription) messageFrame(k *consumer, p Position, data []byte, mask []int64) ([]byte, error) {
	part := int32(s.t.name.Partition())
	cmd := &pb.BaseCommand{Type: pb.BaseCommand_MESSAGE.Enum(), Message: &pb.CommandMessage{
		ConsumerId: &k.id,
		MessageId:  &pb.MessageIdData{LedgerId: u64p(uint64(p.Ledger)), EntryId: u64p(uint64(p.Entry)), Partition: &part},
	}}
	if rc := s.redeliveries[p]; rc > 0 {
		cmd.Message.RedeliveryCount = &rc
	}
	if s.cursor != nil {
		// A partly acknowledged batch: the client skips what was.
		cmd.Message.AckSet = s.cursor.BatchRemaining(p)
	}
	if mask != nil {
		// A compacted batch: the client skips what compaction removed.
		cmd.Message.AckSet = intersectAckSets(cmd.Message.AckSet, mask)
	}
	return wire.AppendEntryCommandHead(nil, cmd, nil, data)
}

// pickLocked chooses the consumer for an entry, nil if none can take it
// now. blocked records Key_Shared consumers that missed an entry this
// round, so that their later entries wait too (per-key order).
func (s *subscription) pickLocked(meta *pb.MessageMetadata, blocked map[*consumer]bool) *consumer {
	switch s.subType {
	case pb.CommandSubscribe_Exclusive, pb.CommandSubscribe_Failover:
		for _, k := range s.consumers {
			if s.eligibleLocked(k) && k.permits > 0 {
				return k
			}
		}
		return nil
	case pb.CommandSubscribe_Key_Shared:
		k := s.keyOwnerLocked(stickyKey(meta))
		if k == nil || blocked[k] || !s.canTakeLocked(k) {
			if k != nil {
				blocked[k] = true
			}
			return nil
		}
		return k
	default:
		// Shared: round robin over consumers with permits, the highest
		// priority level (lowest number) first.
		best := int32(math.MaxInt32)
		for _, k := range s.consumers {
			if s.canTakeLocked(k) && k.priority < best {
				best = k.priority
			}
		}
		for i := range s.consumers {
			k := s.consumers[(s.rr+i)%len(s.consumers)]
			if s.canTakeLocked(k) && k.priority == best {
				s.rr = (s.rr + i + 1) % len(s.consumers)
				return k
			}
		}
		return nil
	}
}

// offerNonPersistent delivers a message of a non-persistent topic to a
// consumer with a permit, or drops it.
func (s *subscription) offerNonPersistent(p Position, entry []byte) {
	s.mu.Lock()
	meta, _, err := wire.DecodeEntry(entry)
	if err != nil {
		s.mu.Unlock()
		return
	}
	k := s.pickLocked(meta, map[*consumer]bool{})
	if k == nil {
		s.mu.Unlock()
		return
	}
	k.permits -= int64(max(1, meta.GetNumMessagesInBatch()))
	f, err := s.messageFrame(k, p, entry, nil)
	s.mu.Unlock()
	if err == nil {
		s.sendMu.Lock()
		if !k.detached {
			k.c.sendEntry(f, entry)
		}
		s.sendMu.Unlock()
	}
}

// ---------------------------------------------------------------------------
// Key_Shared

// stickyKeyNone is the key of messages without one, as in Pulsar.
var stickyKeyNone = []byte("NONE_KEY")

func stickyKey(meta *pb.MessageMetadata) []byte {
	if k := meta.GetOrderingKey(); len(k) > 0 {
		return k
	}
	if meta.PartitionKey != nil {
		return []byte(meta.GetPartitionKey())
	}
	return stickyKeyNone
}

// keyHashRange is the size of Key_Shared's hash space.
const keyHashRange = 65536

func keyHash(key []byte) int32 {
	return int32((topic.Murmur3(key, 0) & 0x7fffffff) % keyHashRange)
}

// keyRange is one part of the auto-split hash space: the hashes after
// the previous range's end up to end (inclusive) belong to k.
type keyRange struct {
	end int32
	k   *consumer
}

// keyAddLocked gives a new AUTO_SPLIT consumer a range, as Pulsar's
// hash-range auto-split selector does: the first takes everything, each
// next one takes the upper half of the largest range, so keys already
// placed mostly stay where they are.
func (s *subscription) keyAddLocked(k *consumer) {
	if s.subType != pb.CommandSubscribe_Key_Shared || len(k.ranges) > 0 {
		return
	}
	if len(s.keyRanges) == 0 {
		s.keyRanges = []keyRange{{end: keyHashRange - 1, k: k}}
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
	s.keyRanges[best] = keyRange{end: mid, k: old.k}
	s.keyRanges = slices.Insert(s.keyRanges, best+1, keyRange{end: old.end, k: k})
}

// keyRemoveLocked gives a leaving consumer's ranges to the range after
// each (or before, for the last).
func (s *subscription) keyRemoveLocked(k *consumer) {
	for i := 0; i < len(s.keyRanges); {
		if s.keyRanges[i].k != k {
			i++
			continue
		}
		if i == len(s.keyRanges)-1 && i > 0 {
			s.keyRanges[i-1].end = s.keyRanges[i].end
		}
		s.keyRanges = slices.Delete(s.keyRanges, i, i+1)
	}
}

func (s *subscription) keyOwnerLocked(key []byte) *consumer {
	h := keyHash(key)
	for _, k := range s.consumers {
		for _, r := range k.ranges {
			if h >= r[0] && h <= r[1] {
				return k
			}
		}
	}
	i := sort.Search(len(s.keyRanges), func(i int) bool { return s.keyRanges[i].end >= h })
	if i == len(s.keyRanges) {
		return nil
	}
	return s.keyRanges[i].k
}

// ---------------------------------------------------------------------------
// Delayed delivery

type delayed struct {
	at time.Time
	p  Position
}

type delayHeap []delayed

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h delayHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *delayHeap) Push(x any)        { *h = append(*h, x.(delayed)) }
func (h *delayHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// promoteDelayedLocked moves delayed entries that are due to replay: all
// of them once the topic's delayed delivery is off.
func (s *subscription) promoteDelayedLocked() {
	now := s.t.b.deps.Now()
	off := s.t.delayedDelivery().off
	for len(s.delayed) > 0 && (off || !s.delayed[0].at.After(now)) {
		d := heap.Pop(&s.delayed).(delayed)
		s.addReplayLocked(d.p)
		s.replayBlocked = false
	}
}

// reachedEndLocked returns the consumers to tell that they reached the end
// of a terminated topic: everything was read (nothing to redeliver either)
// and they were not told yet.
func (s *subscription) reachedEndLocked() []*consumer {
	if s.t.ml == nil || !s.t.ml.Terminated() || len(s.replay) > 0 || s.readPos.Compare(s.t.ml.LastConfirmed()) <= 0 {
		return nil
	}
	var out []*consumer
	for _, k := range s.consumers {
		if !k.toldEnd {
			k.toldEnd = true
			out = append(out, k)
		}
	}
	return out
}

// tellEnd sends REACHED_END_OF_TOPIC to ks (pulsar-client-go's
// Consumer.HasReachedEndOfTopic, Reader.HasNext).
func (s *subscription) tellEnd(ks []*consumer) {
	for _, k := range ks {
		id := k.id
		k.c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_REACHED_END_OF_TOPIC.Enum(), ReachedEndOfTopic: &pb.CommandReachedEndOfTopic{ConsumerId: &id}})
	}
}
