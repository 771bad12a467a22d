package broker

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Subscription state across regions (docs/failover.md, "Subscriptions
// follow the primary"). In an active-standby namespace brokers ship the
// acknowledgement state of every durable subscription their consumers
// acknowledge on (the primary's; an old primary's when it comes back),
// in message identities (origin region and position there; see
// replication.SubState), to the other regions of the namespace, at most
// every subSyncInterval per changed subscription. A state travels in the
// replication stream: the broker sends it to the active consumer of each
// replication cursor as a control message (message id
// replication.ControlID, outside flow control, never stored), the
// replicator worker carries it after the entries it had received before,
// and the remote region's replicator producer hands it to its broker,
// which applies it to its own copy of each message and stores nothing.
// A state that acknowledges messages not stored yet is kept and applied
// again as they arrive.

const (
	// subSyncInterval is how often changed subscriptions are shipped and
	// waiting states applied again.
	subSyncInterval = 100 * time.Millisecond
	// maxSubStateScan bounds the entries one computation or application
	// of a state walks after the subscription's mark-delete position.
	maxSubStateScan = 100000
	// maxIdentityIndex bounds the identities a topic keeps in memory.
	maxIdentityIndex = 200000
	// subStateProducer is the producer name on a state's control message.
	subStateProducer = replication.ReservedPrefix + "substate"
)

// subSync is a topic's part in shipping and applying subscription states.
type subSync struct {
	mu sync.Mutex
	// dirty are subscriptions changed since last shipped; all: ship every
	// one (a replication consumer became active).
	dirty map[string]bool
	all   bool
	// shipped is, per subscription, the remote-origin frontier last
	// shipped: a bound that stays true while the mark-delete position
	// only moves forward.
	shipped map[string]map[string]replication.Position
	// waiting are received states that acknowledge entries not stored
	// yet, per subscription and source region.
	waiting    map[string]map[string]replication.SubState
	hasWaiting atomic.Bool
	idx        identityIndex
}

// identityIndex caches the identities of a contiguous run of the log.
type identityIndex struct {
	ents []idEntry
	end  Position // where the log goes on after the last cached entry
}

type idEntry struct {
	pos Position
	id  replication.Identity
}

// subSyncLoop ships and applies subscription states until the broker stops.
func (b *Broker) subSyncLoop() {
	t := time.NewTicker(subSyncInterval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		b.syncMu.Lock()
		due := b.syncDue
		b.syncDue = map[*Topic]struct{}{}
		b.syncMu.Unlock()
		for t := range due {
			if b.ctx.Err() != nil {
				return
			}
			t.syncSubscriptions(b.ctx)
		}
	}
}

// subSync is the topic's subscription state shipping, made on first use
// (a million idle topics hold none).
func (t *Topic) subSync() *subSync {
	if s := t.sync.Load(); s != nil {
		return s
	}
	t.sync.CompareAndSwap(nil, &subSync{})
	return t.sync.Load()
}

// hasWaitingStates reports whether received states wait for entries.
func (t *Topic) hasWaitingStates() bool {
	s := t.sync.Load()
	return s != nil && s.hasWaiting.Load()
}

// subSyncDue has the topic's subscriptions looked at in the next round.
func (b *Broker) subSyncDue(t *Topic) {
	b.syncMu.Lock()
	b.syncDue[t] = struct{}{}
	b.syncMu.Unlock()
}

// subChanged notes that a durable subscription's acknowledgements changed.
func (t *Topic) subChanged(name string) {
	if t.ml == nil || ownCursor(name) {
		return
	}
	ss := t.subSync()
	ss.mu.Lock()
	if ss.dirty == nil {
		ss.dirty = map[string]bool{}
	}
	ss.dirty[name] = true
	ss.mu.Unlock()
	t.b.subSyncDue(t)
}

// subChangedAll has every subscription shipped again: a replication
// consumer became active, and states sent to an earlier one may not have
// gone further.
func (t *Topic) subChangedAll() {
	if t.ml == nil {
		return
	}
	ss := t.subSync()
	ss.mu.Lock()
	ss.all = true
	ss.mu.Unlock()
	t.b.subSyncDue(t)
}

// syncSubscriptions applies again the received states that wait for
// entries and, in the primary region of an active-standby namespace,
// ships the changed subscriptions' states (in an active-standby
// namespace).
func (t *Topic) syncSubscriptions(ctx context.Context) {
	ss := t.subSync()
	if t.hasWaitingStates() {
		t.applyWaiting(ctx)
	}
	ss.mu.Lock()
	names, all := ss.dirty, ss.all
	ss.dirty, ss.all = nil, false
	ss.mu.Unlock()
	if len(names) == 0 && !all {
		return
	}
	// Every region of an active-standby namespace ships what its own
	// consumers acknowledged: the primary continuously, an old primary
	// that comes back what its consumers acknowledged before it went
	// (its late tail's acknowledgements). A state applied from elsewhere
	// never marks a subscription changed, so nothing echoes back.
	if t.failover().Mode != policy.ActiveStandby {
		return
	}
	targets := t.replConsumers()
	if len(targets) == 0 {
		return // a replication consumer becoming active ships everything
	}
	if all {
		names = map[string]bool{}
		for _, n := range t.ml.Cursors() {
			if !ownCursor(n) {
				names[n] = true
			}
		}
	}
	for name := range names {
		frame, err := t.subStateMessage(ctx, name)
		if err != nil {
			t.b.log.Debug("subscription state not shipped", "topic", t.name.String(), "subscription", name, "err", err)
			continue
		}
		for _, k := range targets {
			k.sub.sendMu.Lock()
			if !k.detached {
				k.c.send(withConsumerID(frame, k.id))
			}
			k.sub.sendMu.Unlock()
		}
	}
}

// replConsumers are the active consumers of the topic's replication
// cursors (one per remote whose replicator is connected).
func (t *Topic) replConsumers() []*consumer {
	var out []*consumer
	for _, r := range t.remotes() {
		t.mu.Lock()
		s := t.subs[replication.CursorName(r)]
		t.mu.Unlock()
		if s == nil {
			continue
		}
		s.mu.Lock()
		for _, k := range s.consumers {
			if k.d.Active() && k.flowed {
				out = append(out, k)
			}
		}
		s.mu.Unlock()
	}
	return out
}

// subStateMessage is the control message carrying a subscription's state,
// without its consumer id (withConsumerID sets it).
type subStateMessage struct {
	entry []byte
}

func withConsumerID(m subStateMessage, id uint64) []byte {
	ctl := uint64(math.MaxUint64) // replication.ControlID on the wire
	cmd := &pb.BaseCommand{Type: pb.BaseCommand_MESSAGE.Enum(), Message: &pb.CommandMessage{
		ConsumerId: &id,
		MessageId:  &pb.MessageIdData{LedgerId: &ctl, EntryId: &ctl},
	}}
	f, err := wire.AppendEntryCommand(nil, cmd, nil, m.entry)
	if err != nil {
		return nil
	}
	return f
}

func (t *Topic) subStateMessage(ctx context.Context, name string) (subStateMessage, error) {
	if !slices.Contains(t.ml.Cursors(), name) {
		return subStateMessage{}, fmt.Errorf("no subscription %s", name)
	}
	st, err := t.subState(ctx, name)
	if err != nil {
		return subStateMessage{}, err
	}
	payload, err := replication.EncodeSubState(st)
	if err != nil {
		return subStateMessage{}, err
	}
	key, prod := replication.SubStateProperty, subStateProducer
	var seq uint64
	now := uint64(t.b.deps.Now().UnixMilli())
	meta := &pb.MessageMetadata{
		ProducerName: &prod, SequenceId: &seq, PublishTime: &now,
		Properties: []*pb.KeyValue{{Key: &key, Value: &name}},
	}
	entry, err := wire.AppendEntry(nil, meta, payload)
	if err != nil {
		return subStateMessage{}, err
	}
	return subStateMessage{entry: entry}, nil
}

// subState computes a subscription's state in identities: its
// mark-delete position stands for every message of this region's origin
// up to it and, for each other origin, every message of that origin
// before the first one after it; the entries acknowledged individually
// after it are listed.
func (t *Topic) subState(ctx context.Context, name string) (replication.SubState, error) {
	ss := t.subSync()
	if err := t.dedupState().ensureLoaded(ctx); err != nil {
		return replication.SubState{}, err
	}
	cur, err := t.ml.OpenCursor(ctx, name, mledger.Latest)
	if err != nil {
		return replication.SubState{}, err
	}
	// What is stored from each other origin, read before the walk: an
	// origin none of whose entries follows the mark-delete position has
	// all of these at or before it.
	stored := t.storedFrom()
	md := cur.MarkDelete()
	lastAcked := md
	if rs := cur.AckedRanges(); len(rs) > 0 {
		r := rs[len(rs)-1]
		lastAcked = Position{Ledger: r.Ledger, Entry: r.Last}
	}
	partial := cur.PartialBatches()
	for p := range partial {
		if p.Compare(lastAcked) > 0 {
			lastAcked = p
		}
	}
	ss.mu.Lock()
	prev := ss.shipped[name]
	ss.mu.Unlock()
	sb := replication.NewStateBuilder(name, t.b.cfg.Cluster, rpos(md), stored, prev)
	atEnd, err := t.walkIdentities(ctx, Position{Ledger: md.Ledger, Entry: md.Entry + 1}, maxSubStateScan, func(p Position, id replication.Identity) bool {
		sb.See(id, p.Compare(lastAcked) <= 0 && cur.IsAcked(p))
		if r, ok := partial[p]; ok {
			sb.SeePartial(id, r)
		}
		return p.Compare(lastAcked) < 0 || sb.NeedsMore()
	})
	if err != nil {
		return replication.SubState{}, err
	}
	st := sb.State(atEnd)
	if len(st.MarkDelete) > replication.MaxSubStateOrigins {
		return replication.SubState{}, fmt.Errorf("%d origins, at most %d", len(st.MarkDelete), replication.MaxSubStateOrigins)
	}
	ss.mu.Lock()
	if ss.shipped == nil {
		ss.shipped = map[string]map[string]replication.Position{}
	}
	ss.shipped[name] = st.MarkDelete
	ss.mu.Unlock()
	return st, nil
}

// storedFrom is, for each region the topic stores replicated entries
// from, the highest source position stored, and for this region the
// position of its last own entry, when known.
func (t *Topic) storedFrom() map[string]replication.Position {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]replication.Position{}
	for src, in := range t.rs().replIn {
		if in.confirmed != noPosition {
			out[src] = rpos(in.confirmed)
		}
	}
	if t.rs().lastOwn != noPosition {
		out[t.b.cfg.Cluster] = rpos(t.rs().lastOwn)
	}
	return out
}

// noteOwn records the position of an entry written in this region.
func (t *Topic) noteOwn(p Position) {
	t.mu.Lock()
	if p.Compare(t.rs().lastOwn) > 0 {
		t.rs().lastOwn = p
	}
	t.mu.Unlock()
}

func rpos(p Position) replication.Position {
	return replication.Position{Ledger: p.Ledger, Entry: p.Entry}
}

// isSubState reports whether a message from a replicator producer is a
// subscription-state record: marked with replication.SubStateProperty and,
// unlike every replicated entry (an application may set any property),
// without a source position.
func isSubState(meta *pb.MessageMetadata) bool {
	marked := false
	for _, kv := range meta.GetProperties() {
		switch kv.GetKey() {
		case replication.SubStateProperty:
			marked = true
		case replication.SourcePositionProperty:
			return false
		}
	}
	return marked
}

// receiveSubState applies a subscription-state record that a replicator
// producer brought from region src.
func (t *Topic) receiveSubState(ctx context.Context, src string, meta *pb.MessageMetadata, payload []byte) error {
	ss := t.subSync()
	if t.ml == nil {
		return fmt.Errorf("%w: subscription state for non-persistent topic %s", ErrInvalidArgument, t.name)
	}
	st, err := replication.DecodeSubState(payload)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	for _, kv := range meta.GetProperties() {
		if kv.GetKey() == replication.SubStateProperty && kv.GetValue() != st.Subscription {
			return fmt.Errorf("%w: subscription state marked %q is for %q", ErrInvalidArgument, kv.GetValue(), st.Subscription)
		}
	}
	if err := ValidSubscriptionName(st.Subscription); err != nil {
		return err
	}
	if ownCursor(st.Subscription) {
		return fmt.Errorf("%w: subscription state for reserved subscription %s", ErrInvalidArgument, st.Subscription)
	}
	waiting, err := t.applySubState(ctx, st)
	ss.mu.Lock()
	if waiting {
		if ss.waiting == nil {
			ss.waiting = map[string]map[string]replication.SubState{}
		}
		if ss.waiting[st.Subscription] == nil {
			ss.waiting[st.Subscription] = map[string]replication.SubState{}
		}
		ss.waiting[st.Subscription][src] = st
	} else if w := ss.waiting[st.Subscription]; w != nil {
		delete(w, src)
		if len(w) == 0 {
			delete(ss.waiting, st.Subscription)
		}
	}
	ss.hasWaiting.Store(len(ss.waiting) > 0)
	ss.mu.Unlock()
	return err
}

// applyWaiting applies again the states waiting for entries.
func (t *Topic) applyWaiting(ctx context.Context) {
	ss := t.subSync()
	ss.mu.Lock()
	var todo []replication.SubState
	var srcs []string
	for _, bySrc := range ss.waiting {
		for src, st := range bySrc {
			todo, srcs = append(todo, st), append(srcs, src)
		}
	}
	ss.mu.Unlock()
	for i, st := range todo {
		waiting, err := t.applySubState(ctx, st)
		if err != nil {
			t.b.log.Debug("subscription state not applied", "topic", t.name.String(), "subscription", st.Subscription, "err", err)
			continue
		}
		if waiting {
			continue
		}
		ss.mu.Lock()
		if w := ss.waiting[st.Subscription]; w != nil {
			if cur, ok := w[srcs[i]]; ok && cur.Subscription == st.Subscription && sameState(cur, st) {
				delete(w, srcs[i])
			}
			if len(w) == 0 {
				delete(ss.waiting, st.Subscription)
			}
		}
		ss.hasWaiting.Store(len(ss.waiting) > 0)
		ss.mu.Unlock()
	}
}

func sameState(a, b replication.SubState) bool {
	if len(a.MarkDelete) != len(b.MarkDelete) || len(a.Acked) != len(b.Acked) {
		return false
	}
	for o, p := range a.MarkDelete {
		if b.MarkDelete[o] != p {
			return false
		}
	}
	return slices.Equal(a.Acked, b.Acked)
}

// noteReplicated runs after an entry from another region is stored: states
// waiting for entries are applied again in the next round.
func (t *Topic) noteReplicated() {
	if t.hasWaitingStates() {
		t.b.subSyncDue(t)
	}
}

// applySubState acknowledges, on this region's copy of the subscription
// (created at the earliest entry if missing), every entry st covers. It
// reports whether st covers entries not stored here yet.
func (t *Topic) applySubState(ctx context.Context, st replication.SubState) (waiting bool, err error) {
	if err := t.dedupState().ensureLoaded(ctx); err != nil {
		return true, err
	}
	if t.b.subDeleting(ctx, t.name, st.Subscription) { // fedelete.go
		return false, nil // being deleted everywhere: not made again
	}
	cur, err := t.ml.OpenCursor(ctx, st.Subscription, mledger.Earliest)
	if err != nil {
		return true, err
	}
	a := replication.NewApplier(&st)
	waiting = a.Waiting(t.b.cfg.Cluster, t.storedFrom())
	md := cur.MarkDelete()
	var acks []Position
	partial := map[Position][]int64{}
	_, err = t.walkIdentities(ctx, Position{Ledger: md.Ledger, Entry: md.Entry + 1}, maxSubStateScan, func(p Position, id replication.Identity) bool {
		if a.See(id) {
			if !cur.IsAcked(p) {
				acks = append(acks, p)
			}
		} else if r := a.Partial(id); r != nil {
			partial[p] = r
		}
		return !a.Done()
	})
	if err != nil {
		return true, err
	}
	for p, r := range partial {
		if err := cur.AckBatch(ctx, p, r); err != nil {
			return true, err
		}
	}
	if len(acks) == 0 {
		return waiting, nil
	}
	t.mu.Lock()
	s := t.subs[st.Subscription]
	t.mu.Unlock()
	if s != nil {
		s.forget(acks)
	}
	for chunk := range slices.Chunk(acks, 1000) {
		if err := cur.AckMany(ctx, chunk); err != nil {
			return true, err
		}
	}
	return waiting, nil
}

// walkIdentities calls fn with each entry's position and identity from
// from on, in log order, until fn returns false, limit entries were seen
// or the log ends (atEnd).
func (t *Topic) walkIdentities(ctx context.Context, from Position, limit int, fn func(Position, replication.Identity) bool) (atEnd bool, err error) {
	for n := 0; n < limit; {
		batch, next, err := t.identities(ctx, from, min(256, limit-n))
		if err != nil {
			return false, err
		}
		if len(batch) == 0 {
			return true, nil
		}
		for _, e := range batch {
			n++
			if !fn(e.pos, e.id) {
				return false, nil
			}
		}
		from = next
	}
	return false, nil
}

// identities returns up to n entries' identities from from on, and where
// to go on: from the index when it holds them, else read from the log
// (and added to the index when they extend it).
func (t *Topic) identities(ctx context.Context, from Position, n int) ([]idEntry, Position, error) {
	ss := t.subSync()
	ss.mu.Lock()
	ix := &ss.idx
	if len(ix.ents) > 0 && from.Compare(ix.ents[0].pos) >= 0 && from.Compare(ix.end) < 0 {
		i, _ := slices.BinarySearchFunc(ix.ents, from, func(e idEntry, p Position) int { return e.pos.Compare(p) })
		if i < len(ix.ents) {
			j := min(len(ix.ents), i+n)
			out := slices.Clone(ix.ents[i:j])
			next := ix.end
			if j < len(ix.ents) {
				next = ix.ents[j].pos
			}
			ss.mu.Unlock()
			return out, next, nil
		}
	}
	ss.mu.Unlock()
	es, next, err := t.ml.Read(ctx, from, n)
	if err != nil {
		return nil, from, err
	}
	out := make([]idEntry, len(es))
	for i, e := range es {
		out[i] = idEntry{pos: e.Position, id: t.identity(e)}
	}
	if len(out) == 0 {
		return nil, next, nil
	}
	ss.mu.Lock()
	switch {
	case len(ix.ents) > 0 && from.Compare(ix.end) == 0:
		ix.ents = append(ix.ents, out...)
	default:
		ix.ents = slices.Clone(out)
	}
	ix.end = next
	if len(ix.ents) > maxIdentityIndex {
		ix.ents = slices.Clone(ix.ents[len(ix.ents)-maxIdentityIndex/2:])
	}
	ss.mu.Unlock()
	return out, next, nil
}

// identity is an entry's identity: its source region and position there
// for a replicated entry, this region and its position here otherwise.
func (t *Topic) identity(e mledger.Entry) replication.Identity {
	if meta, _, err := wire.DecodeEntry(e.Data); err == nil {
		if src, pos, ok, _ := sourcePosition(meta); ok {
			return replication.Identity{Origin: t.b.internOrigin(src), Pos: rpos(pos)}
		}
	}
	return replication.Identity{Origin: t.b.cfg.Cluster, Pos: rpos(e.Position)}
}

// internOrigin returns one copy of each region name, so the identity index
// does not hold a string per entry.
func (b *Broker) internOrigin(s string) string {
	if v, ok := b.origins.Load(s); ok {
		return v.(string)
	}
	v, _ := b.origins.LoadOrStore(s, s)
	return v.(string)
}

// forget drops acknowledged entries from the dispatcher's bookkeeping, as
// an acknowledgement from a consumer does.
func (s *subscription) forget(ps []Position) {
	s.mu.Lock()
	s.d.Ack(ps)
	s.mu.Unlock()
	s.kick()
}

// splitForeign separates acknowledged positions in this region's log from
// positions a client got in another region of the topic (ledger ids carry
// their region's tag: ledger.RegionTag), before a failover moved it here.
func (t *Topic) splitForeign(ps []Position) (local []Position, foreign []Position) {
	// This region's ledgers carry its tag: such an ack needs no look-up
	// (the ledger list is copied only for an id of another tag).
	mine := ledger.RegionTag(t.b.cfg.Region) // the ledger client tags by the region name
	var ls []mledger.LedgerInfo
	for _, p := range ps {
		if ledger.TagOf(p.Ledger) == mine {
			local = append(local, p)
			continue
		}
		if ls == nil {
			ls = t.ml.Ledgers()
		}
		if _, ok := slices.BinarySearchFunc(ls, p.Ledger, func(l mledger.LedgerInfo, id int64) int { return cmp.Compare(l.ID, id) }); ok {
			local = append(local, p)
		} else if t.regionOfLedger(p.Ledger) != "" {
			foreign = append(foreign, p)
		} else {
			local = append(local, p) // refused by the cursor as naming no entry
		}
	}
	return local, foreign
}

// regionOfLedger names the other region of the topic whose tag the ledger
// id carries; empty when none does.
func (t *Topic) regionOfLedger(id int64) string {
	tag := ledger.TagOf(id)
	if tag == 0 {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.policy.ReplicationClusters {
		if c != t.b.cfg.Cluster && ledger.RegionTag(c) == tag {
			return c
		}
	}
	return ""
}

// translateAcks applies acknowledgements of messages by the ids they had
// in another region: each names a message of that region's origin by its
// position there, found here by identity; a cumulative one acknowledges
// every message of that origin up to it. A message of a third origin that
// the id named in that region is not recognised, and not acknowledged
// (it is delivered again); no other entry is ever acknowledged instead.
func (t *Topic) translateAcks(ctx context.Context, sub string, foreign []Position, cumulative bool) {
	st := replication.SubState{Subscription: sub, MarkDelete: map[string]replication.Position{}}
	for _, p := range foreign {
		r := t.regionOfLedger(p.Ledger)
		if cumulative {
			if cur, ok := st.MarkDelete[r]; !ok || rpos(p).Compare(cur) > 0 {
				st.MarkDelete[r] = rpos(p)
			}
		} else {
			st.Acked = append(st.Acked, replication.Identity{Origin: r, Pos: rpos(p)})
		}
	}
	st.Normalize()
	if _, err := t.applySubState(ctx, st); err != nil {
		t.b.log.Debug("acknowledgements from another region not applied", "topic", t.name.String(), "subscription", sub, "err", err)
	}
}

// waitingCovers reports whether a state from another region that waits
// for entries acknowledges the entry at p of subscription sub: the
// dispatcher does not send it (its acknowledgement, made in the other
// region, arrived before it; the old primary's late tail after a
// partition is the common case).
func (t *Topic) waitingCovers(sub string, p Position, meta *pb.MessageMetadata) bool {
	if !t.hasWaitingStates() {
		return false
	}
	ss := t.subSync()
	id := replication.Identity{Origin: t.b.cfg.Cluster, Pos: rpos(p)}
	if src, pos, ok, _ := sourcePosition(meta); ok {
		id = replication.Identity{Origin: src, Pos: rpos(pos)}
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, st := range ss.waiting[sub] {
		if st.Covers(id) {
			return true
		}
	}
	return false
}

// ackCovered acknowledges entries the dispatcher held back as covered by
// another region's state.
func (s *subscription) ackCovered(ps []Position) {
	ctx, cancel := context.WithTimeout(s.t.b.ctx, 30*time.Second)
	defer cancel()
	if err := s.cursor.AckMany(ctx, ps); err != nil {
		s.t.b.log.Debug("acknowledgements from another region not stored", "topic", s.t.name.String(), "subscription", s.name, "err", err)
	}
}

// shipAllTo sends every subscription's state to k, a replicator's
// consumer of a replication cursor that is about to become active.
func (t *Topic) shipAllTo(k *consumer) {
	if t.ml == nil || t.failover().Mode != policy.ActiveStandby {
		return
	}
	ctx, cancel := context.WithTimeout(t.b.ctx, 10*time.Second)
	defer cancel()
	for _, name := range t.ml.Cursors() {
		if ownCursor(name) {
			continue
		}
		m, err := t.subStateMessage(ctx, name)
		if err != nil {
			t.b.log.Debug("subscription state not shipped", "topic", t.name.String(), "subscription", name, "err", err)
			continue
		}
		k.sub.sendMu.Lock()
		if !k.detached {
			k.c.send(withConsumerID(m, k.id))
		}
		k.sub.sendMu.Unlock()
	}
}
