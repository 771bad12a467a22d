package broker

import (
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
	"github.com/isobar-mq/isobar/broker/dispatch"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/broker/ratelimit"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Position is an entry's position in a topic's log.
type Position = mledger.Position

// ReservedPrefix starts the names of the broker's own cursors
// (de-duplication, replication); clients cannot subscribe with it.
const ReservedPrefix = replication.ReservedPrefix

// maxReadBytes bounds the bytes one dispatch round reads (Pulsar's
// dispatcherMaxReadSizeBytes), counted at the mean size of the entries
// the round before sent: a catch-up read of a backlog of large batches
// then holds the bookies, the broker's memory and its CPU for a few
// MB at a time, not maxReadBatch of them at once.
const maxReadBytes = 5 << 20

// subscription is a durable cursor (or, for readers and non-persistent
// topics, an in-memory position) and the consumers attached to it. Its
// dispatcher goroutine runs while it has consumers: it drives the
// dispatch core (package dispatch), which decides who gets which entry,
// reading what the core plans and sending what it assigns.
type subscription struct {
	t       *Topic
	name    string
	durable bool
	cursor  *mledger.Cursor // nil unless durable on a persistent topic

	// sendMu orders the dispatcher's sends with consumers being detached:
	// nothing is sent to a consumer after removeConsumer returned.
	sendMu sync.Mutex

	// mu guards everything below and the consumers' dispatch state.
	mu sync.Mutex
	d  *dispatch.State
	// consumers are the attached consumers, in the core's order; of
	// maps the core's consumers to them.
	consumers []*consumer
	of        map[*dispatch.Consumer]*consumer
	startPos  Position // a reader's start (or last seek) position
	keep      bool     // a reader's subscription outlives its consumers until they resubscribe (seek)
	closed    bool
	running   bool
	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	msgOut    int64
	// When a consumer last sent a FLOW, was last sent an entry and last
	// acknowledged, Unix ms (0: not since loaded).
	lastFlow, lastConsumed, lastAcked atomic.Int64
	// rl is the subscription's dispatch limiter (rates.go).
	rl subRates
}

func newSubscription(t *Topic, name string, st pb.CommandSubscribe_SubType, durable bool) *subscription {
	return &subscription{
		t: t, name: name, durable: durable,
		d:    dispatch.New(kindOf(st), t.name.Partition(), Position{}),
		of:   map[*dispatch.Consumer]*consumer{},
		wake: make(chan struct{}, 1),
	}
}

// subTypes pairs the protocol's subscription types with the dispatch
// core's kinds.
var subTypes = [...]struct {
	pb   pb.CommandSubscribe_SubType
	kind dispatch.Kind
}{
	{pb.CommandSubscribe_Exclusive, dispatch.Exclusive},
	{pb.CommandSubscribe_Shared, dispatch.Shared},
	{pb.CommandSubscribe_Failover, dispatch.Failover},
	{pb.CommandSubscribe_Key_Shared, dispatch.KeyShared},
}

// kindOf is the dispatch core's kind of a subscription type.
func kindOf(st pb.CommandSubscribe_SubType) dispatch.Kind {
	for _, t := range subTypes {
		if t.pb == st {
			return t.kind
		}
	}
	return dispatch.Exclusive
}

// subTypeLocked is the subscription's type (s.mu held).
func (s *subscription) subTypeLocked() pb.CommandSubscribe_SubType {
	for _, t := range subTypes {
		if t.kind == s.d.Kind() {
			return t.pb
		}
	}
	return pb.CommandSubscribe_Exclusive
}

// subType is the subscription's type.
func (s *subscription) subType() pb.CommandSubscribe_SubType {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subTypeLocked()
}

// setStart sets where a new subscription starts reading (before it has
// consumers).
func (s *subscription) setStart(p Position) {
	s.mu.Lock()
	s.d.Seek(p)
	s.mu.Unlock()
}

// readPos is where the subscription reads new entries next.
func (s *subscription) readPos() Position {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d.ReadPos()
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
			start := Position{Ledger: md.Ledger, Entry: md.Entry + 1}
			if k.compacted && md.Entry == -1 {
				// Nothing consumed (created at Earliest, or reset there):
				// the compacted view's entries before the log are unread.
				start = t.compactedStart(ctx, Position{}, start)
			}
			s.setStart(start)
			t.subChanged(name) // it exists in every region of the namespace
			return s, nil
		}
		start := t.startPosition(cmd.GetStartMessageId(), cmd.GetInitialPosition())
		if d := cmd.GetStartMessageRollbackDurationSec(); d > 0 {
			if p, err := t.findByTime(ctx, rollback(t.b.deps.Now(), d)); err == nil {
				start = p
			}
		}
		if k.compacted {
			want := start
			if startsEarliest(cmd.GetStartMessageId(), cmd.GetInitialPosition()) {
				want = Position{}
			}
			start = t.compactedStart(ctx, want, start)
		}
		s.setStart(start)
		s.startPos = start
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
	defer s.t.b.listMetrics(s.t) // its consumers are counted again (after s.mu)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("%w: subscription %s is closing", ErrNotOwner, s.name)
	}
	if err := s.checkConsumerLimitsLocked(maxTopic, maxSub, onOthers); err != nil {
		return err
	}
	d := dispatch.NewConsumer(k.name, k.priority, k.ranges, k.compacted)
	switch err := s.d.Attach(d, kindOf(st)); {
	case errors.Is(err, dispatch.ErrRanges):
		return fmt.Errorf("%w: %w", errkind.ErrConsumerAssign, err)
	case errors.Is(err, dispatch.ErrKindMismatch):
		return fmt.Errorf("%w: subscription %s is %v, consumer asks for %v", ErrBusy, s.name, s.subTypeLocked(), st)
	case errors.Is(err, dispatch.ErrExclusive):
		return fmt.Errorf("%w: exclusive consumer is already connected to subscription %s", ErrBusy, s.name)
	case err != nil:
		return err
	}
	s.keep = false
	k.sub, k.d = s, d
	s.consumers = append(s.consumers, k)
	s.of[d] = k
	s.t.touchSub(s.name)
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
	if s.d.Kind() != dispatch.Failover || len(s.consumers) == 0 {
		s.mu.Unlock()
		return
	}
	was := make([]bool, len(s.consumers))
	for i, c := range s.consumers {
		was[i] = c.d.Active()
	}
	// (Entries the previous active one held go to the new one.)
	s.d.UpdateActive()
	type note struct {
		k      *consumer
		active bool
	}
	var notes []note
	for i, c := range s.consumers {
		active := c.d.Active()
		// The Go client registers a consumer only after it has read the
		// SUBSCRIBE reply, and drops notifications for unknown ids: tell a
		// consumer once it has sent its first FLOW (see flow), after that
		// on every change.
		if c.flowed && (active != was[i] || c.told != active || !c.toldOnce) {
			c.told, c.toldOnce = active, true
			notes = append(notes, note{c, active})
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
	delete(s.of, k.d)
	s.d.Detach(k.d)
	empty := len(s.consumers) == 0
	var stop chan struct{}
	if empty && s.running {
		s.running = false
		stop = s.stop
	}
	failover := s.d.Kind() == dispatch.Failover
	keep := s.keep
	s.mu.Unlock()
	if stop != nil {
		close(stop)
	}
	s.t.touchSub(s.name)
	s.t.b.listMetrics(s.t) // its consumers are counted again
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
	s.d.Flow(k.d, n)
	first := !k.flowed
	k.flowed = true
	failover := s.d.Kind() == dispatch.Failover
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
		if s.d.Delayable() { // Shared and Key_Shared
			s.mu.Unlock()
			return fmt.Errorf("%w: cumulative acknowledgement is not allowed on %v subscription %s", ErrInvalidArgument, s.subTypeLocked(), s.name)
		}
		upTo := ps[0]
		// On a replication cursor, the replicator acknowledges once the
		// remote region stored the entries: publishes waiting for it may
		// go (a no-op elsewhere).
		s.t.syncConfirmed(s.name, upTo)
		s.d.AckCumulative(upTo)
	} else {
		s.d.Ack(ps)
	}
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
	n := s.d.Redeliver(k.d, ps)
	s.mu.Unlock()
	k.redelivered.Add(int64(n))
	s.kick()
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
	s.startPos = p
	s.d.Seek(p)
	for _, k := range s.consumers {
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
		now := s.t.b.deps.Now()
		s.mu.Lock()
		dd := s.t.delayedDelivery()
		s.d.PromoteDelayed(now, dd.off)
		var notify <-chan struct{}
		if s.t.ml != nil {
			notify = s.t.ml.Notify()
		}
		pl, ok := s.planLocked()
		pl = limitPlan(pl, min(budget, s.readBytesCap()))
		wait := time.Hour
		if at, ok := s.d.NextDelayed(); ok {
			wait = max(time.Millisecond, dd.releaseAt(at).Sub(now))
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
		paced := s.pacedRead(pl)
		if paced {
			wait, maxBytes := s.t.b.backlog.reserve()
			if wait > 0 {
				timer.Reset(min(wait, ratelimit.MaxSleep))
				select {
				case <-stop:
					return
				case <-timer.C:
				}
				continue
			}
			if maxBytes < math.MaxInt64 {
				pl = limitPlan(pl, max(1, maxBytes/max(1, s.rl.avgEntry)))
			}
		}
		entries, masks, next, err := s.read(pl)
		if paced {
			var n int64
			for _, e := range entries {
				n += int64(len(e.Data))
			}
			s.t.b.backlog.charge(n)
		}
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

// pacedRead says whether the round pl reads a backlog that the broker
// paces (backlog.go): a read of the log from behind the topic's tail
// cache, for an application's subscription. Replays (redeliveries, read
// entry by entry), compacted reads and replication cursors are not
// paced: the replicators' catch-up after a cut is what bounds a
// failover's data loss (docs/failover.md).
func (s *subscription) pacedRead(pl dispatch.Plan) bool {
	if len(pl.Replay) > 0 || pl.Compacted || s.t.ml == nil || strings.HasPrefix(s.name, replication.Prefix) {
		return false
	}
	return !s.t.ml.InTail(pl.From)
}

// planLocked asks the core what the next round reads (s.mu held): false
// when nothing can be sent.
func (s *subscription) planLocked() (dispatch.Plan, bool) {
	if s.t.ml == nil {
		return dispatch.Plan{}, false
	}
	s.setLimitsLocked()
	log := dispatch.Log{LastConfirmed: s.t.ml.LastConfirmed()}
	log.Limit, log.HasLimit = s.syncLimit()
	return s.d.Plan(log, s.rl.avgMsgs)
}

// setLimitsLocked gives the core the topic's limits on unacknowledged
// entries, which its policies may have changed: once per round, when it
// is planned (the round's Assign goes by the same limits).
func (s *subscription) setLimitsLocked() {
	s.d.SetLimits(dispatch.Limits{PerConsumer: s.t.maxUnackedPerConsumer(), PerSubscription: s.t.maxUnackedPerSubscription()})
}

// syncLimit is the topic's dispatch limit for this subscription: none for
// a replication cursor.
func (s *subscription) syncLimit() (Position, bool) {
	// Open transactions hold every cursor, replication's too: only
	// committed messages are delivered or replicated (transactions.go).
	tl, tok := s.t.txnLimit()
	if strings.HasPrefix(s.name, replication.Prefix) {
		return tl, tok
	}
	l, ok := s.t.dispatchLimit()
	return minLimit(l, ok, tl, tok)
}

// read reads what pl names, outside the lock: from the topic, or, for a
// consumer reading compacted, from the compacted view up to its horizon.
// masks are the ack sets of compacted batches some of whose messages
// were removed (by position).
func (s *subscription) read(pl dispatch.Plan) (_ []mledger.Entry, masks map[Position][]int64, _ Position, _ error) {
	ctx, cancel := context.WithTimeout(s.t.b.ctx, 30*time.Second)
	defer cancel()
	var view *compactor.View
	if pl.Compacted {
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
	if len(pl.Replay) > 0 {
		var out []mledger.Entry
		for _, p := range pl.Replay {
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
	if inView(pl.From) {
		es, next, err := view.Read(ctx, pl.From, pl.N)
		out := make([]mledger.Entry, 0, len(es))
		for _, e := range es {
			out = append(out, keep(e))
		}
		return out, masks, next, err
	}
	es, next, err := s.t.ml.Read(ctx, pl.From, pl.N)
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

// assign hands the entries read to the core, which gives them to
// consumers, and builds their frames. covered are entries another
// region's state acknowledges (still waiting to be applied here): not
// sent, acknowledged by the caller.
func (s *subscription) assign(pl dispatch.Plan, entries []mledger.Entry, masks map[Position][]int64, next Position, advance bool) (out []outFrame, covered []Position) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil
	}
	keyed := s.d.Kind() == dispatch.KeyShared
	in := make([]dispatch.Entry, len(entries))
	metas := make([]*pb.MessageMetadata, len(entries))
	for i, e := range entries {
		p := e.Position
		in[i].Position = p
		if e.Data == nil {
			in[i].Gone = true
			continue
		}
		// (A compacted entry whose own is trimmed from the log is not
		// acknowledged by a mark-delete position past it.)
		if s.cursor != nil && s.cursor.IsAcked(p) && !(pl.Compacted && s.t.goneFromLog(p)) {
			in[i].Acked = true
			continue
		}
		meta, _, err := wire.DecodeEntry(e.Data)
		if err != nil {
			s.t.b.log.Error("undecodable entry skipped", "topic", s.t.name.String(), "position", p.String(), "err", err)
			in[i].Bad = true
			continue
		}
		metas[i] = meta
		if s.t.txnSkip(meta) {
			// A transaction's marker, or an entry of an aborted one:
			// never delivered; acknowledged on a durable subscription.
			in[i].Covered, in[i].Bad = s.cursor != nil, s.cursor == nil
			continue
		}
		in[i].Covered = s.cursor != nil && s.t.waitingCovers(s.name, p, meta)
		if keyed {
			in[i].Key = stickyKey(meta)
		}
		in[i].Messages = 1
		if meta.NumMessagesInBatch != nil {
			in[i].Messages = int64(max(1, meta.GetNumMessagesInBatch()))
		}
		if at := meta.GetDeliverAtTime(); at > 0 {
			in[i].DeliverAt = time.UnixMilli(at)
		}
	}
	now := s.t.b.deps.Now()
	ds, covered := s.d.Assign(pl, in, next, advance, now, !s.t.delayedDelivery().off)
	for _, d := range ds {
		e, k, n := entries[d.Index], s.of[d.Consumer], d.Messages
		f, err := s.messageFrame(k, e.Position, e.Data, masks[e.Position])
		if err != nil {
			continue
		}
		k.msgOut.Add(n)
		k.bytesOut.Add(int64(len(e.Data)))
		k.lastConsumed.Store(now.UnixMilli())
		s.lastConsumed.Store(now.UnixMilli())
		s.msgOut += n
		s.t.b.recordOut(s.t, n, int64(len(e.Data)))
		s.traceDeliver(metas[d.Index], k)
		out = append(out, outFrame{k, f, e.Data, n, int64(len(e.Data))})
	}
	return out, covered
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
	if rc := s.d.Redeliveries(p); rc > 0 {
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

// offerNonPersistent delivers a message of a non-persistent topic to a
// consumer with a permit, or drops it.
func (s *subscription) offerNonPersistent(p Position, entry []byte) {
	meta, _, err := wire.DecodeEntry(entry)
	if err != nil {
		return
	}
	s.mu.Lock()
	var key []byte
	if s.d.Kind() == dispatch.KeyShared {
		key = stickyKey(meta)
	}
	s.setLimitsLocked()
	d := s.d.Offer(key, int64(max(1, meta.GetNumMessagesInBatch())))
	if d == nil {
		s.mu.Unlock()
		return
	}
	k := s.of[d]
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

// reachedEndLocked returns the consumers to tell that they reached the end
// of a terminated topic: everything was read (nothing to redeliver either)
// and they were not told yet.
func (s *subscription) reachedEndLocked() []*consumer {
	if s.t.ml == nil || !s.t.ml.Terminated() || !s.d.Drained(s.t.ml.LastConfirmed()) {
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
