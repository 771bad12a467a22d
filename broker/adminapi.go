package broker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/broker/compactor"
	"github.com/isobar-mq/isobar/broker/dispatch"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire/pb"
)

// AdminAPI returns the broker's side of the admin API: every part of
// adminapi.Broker, which region hands to the admin server.
func (b *Broker) AdminAPI() adminapi.Broker {
	t, br := adminTopics{b}, adminBrokers{b}
	return adminapi.Broker{
		Topics:                 t,
		Brokers:                br,
		LoadReporter:           br,
		Quota:                  t,
		SubscriptionProperties: t,
		Deletes:                t,
		Bundles:                t,
		Splitter:               t,
		Compactor:              t,
		PolicyRefresher:        t,
		Transactions:           adminTxns{b}, // transactions.go
	}
}

type adminTopics struct{ b *Broker }

// TopicDefaults are the broker's values of the topic policies it
// enforces, for the admin API's ?applied=true answers.
func (b *Broker) TopicDefaults() adminapi.TopicDefaults {
	lc := b.cfg.Ledger.WithDefaults()
	return adminapi.TopicDefaults{
		MaxMessageSize:                b.cfg.MaxMessageSize,
		MaxUnackedPerConsumer:         b.cfg.Limits.MaxUnackedPerConsumer,
		MaxUnackedPerSubscription:     b.cfg.Limits.MaxUnackedPerSubscription,
		DeduplicationSnapshotInterval: b.cfg.DeduplicationSnapshotInterval,
		MaxDeliveryDelay:              b.cfg.Limits.MaxDeliveryDelay,
		Persistence: &adminapi.LedgerShape{
			EnsembleSize: lc.EnsembleSize, WriteQuorum: lc.WriteQuorum, AckQuorum: lc.AckQuorum,
		},
	}
}

// RefreshTopicPolicies re-reads the policies of name (of a partitioned
// topic: of every partition) for the topics loaded on this broker, so a
// change to a topic's own policies is in force at once rather than at
// the next maintenance round (which is when other brokers apply it).
func (a adminTopics) RefreshTopicPolicies(ctx context.Context, name topic.Name) error {
	b, base := a.b, name.Base()
	var pol NamespacePolicy
	read := false
	for _, t := range b.loadedTopics() {
		if t.name.Base() != base {
			continue
		}
		if !read {
			p, err := b.deps.Namespaces.Policy(ctx, base.NamespaceName())
			if err != nil {
				return err
			}
			pol, read = p, true
		}
		t.setPolicy(b.withTopicPolicy(ctx, t.name, pol))
	}
	return nil
}

// BrokerLister is implemented by a Placement that knows the region's live
// brokers.
type BrokerLister interface {
	Brokers(ctx context.Context) ([]string, error)
}

// ownHere returns nil when this broker owns name's bundle or takes it
// now, else a *adminapi.NotOwnerError naming the owner.
func (a adminTopics) ownHere(ctx context.Context, name topic.Name) error {
	if a.b.deps.Placement.Owns(name) {
		return nil
	}
	// Redirected here by the broker that placed the bundle: take it
	// (Pulsar's authoritative lookup), not place it again.
	r, err := a.b.deps.Placement.Lookup(ctx, name, adminapi.Authoritative(ctx))
	if err != nil {
		return err
	}
	if !r.Self {
		return &adminapi.NotOwnerError{URL: r.HTTPURL, URLTLS: r.HTTPURLTLS, Placed: true}
	}
	return nil
}

// owned loads the topic here, or says who owns it.
func (a adminTopics) owned(ctx context.Context, name topic.Name, mode createMode) (*Topic, error) {
	if err := a.ownHere(ctx, name); err != nil {
		return nil, err
	}
	t, err := a.b.getTopic(ctx, name, mode)
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (a adminTopics) exists(ctx context.Context, name topic.Name) (bool, error) {
	if name.Domain == topic.NonPersistent {
		return a.b.loadedTopic(name) != nil, nil
	}
	_, err := a.b.deps.Meta.Get(ctx, mledger.TopicKey(a.b.cfg.Region, MLName(name)))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, metastore.ErrNotFound) {
		return false, nil
	}
	return false, err
}

func (a adminTopics) CreateTopic(ctx context.Context, name topic.Name) error {
	ok, err := a.exists(ctx, name)
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("%w: topic %s", adminapi.ErrConflict, name)
	}
	_, err = a.owned(ctx, name, create)
	return err
}

func (a adminTopics) DeleteTopic(ctx context.Context, name topic.Name, force bool) error {
	return a.deleteLocal(ctx, name, force, true)
}

// deleteLocal deletes this region's copy of name, which this broker must
// own; with mark, a replicated topic is marked deleted here (deleted.go).
func (a adminTopics) deleteLocal(ctx context.Context, name topic.Name, force, mark bool) error {
	ok, err := a.exists(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s", adminapi.ErrTopicNotFound, name)
	}
	t, err := a.owned(ctx, name, mustExist)
	if err != nil {
		return err
	}
	if !force {
		t.mu.Lock()
		busy := len(t.producers) > 0
		for _, s := range t.subs {
			s.mu.Lock()
			busy = busy || len(s.consumers) > 0
			s.mu.Unlock()
		}
		t.mu.Unlock()
		if busy {
			return fmt.Errorf("%w: topic %s has active producers or consumers", adminapi.ErrPreconditionFailed, name)
		}
	}
	cst, _ := t.compactionState(ctx) // (a state that cannot be read leaves its ledger, if any)
	if err := a.b.unloadTopic(ctx, t); err != nil || t.ml == nil {
		return err
	}
	// Closed by the unload; Delete removes the metadata and the ledgers.
	if err := t.ml.Delete(ctx); err != nil {
		return err
	}
	t.deleteCompactedLedger(cst) // the compacted ledger is the topic's too
	if mark {
		a.b.markDeleted(ctx, t) // deleted.go
	}
	if t.flag(flReported) {
		_ = a.b.deps.Meta.Delete(ctx, inactivePartitionKey(a.b.cfg.Region, name)) // inactive.go
	}
	return nil
}

// CheckTopicQuota implements adminapi.TopicQuota.
func (a adminTopics) CheckTopicQuota(ctx context.Context, ns string, adding int) error {
	return a.b.CheckTopicQuota(ctx, ns, adding)
}

func (a adminTopics) ListTopics(ctx context.Context, ns string, domain topic.Domain) ([]string, error) {
	if domain == topic.NonPersistent {
		var out []string
		for _, t := range a.b.loadedTopics() {
			if t.name.Domain == topic.NonPersistent && t.name.NamespaceName() == ns {
				out = append(out, t.name.String())
			}
		}
		return out, nil
	}
	return a.b.PersistentTopics(ctx, ns)
}

func (a adminTopics) Stats(ctx context.Context, name topic.Name) (*adminapi.TopicStats, error) {
	t, err := a.owned(ctx, name, mustExist)
	if err != nil {
		return nil, err
	}
	return t.stats(), nil
}

// stats builds Pulsar's TopicStats for the topic.
func (t *Topic) stats() *adminapi.TopicStats {
	st := &adminapi.TopicStats{
		MsgCounterIn:           t.counters().msgIn,
		Publishers:             []adminapi.PublisherStats{},
		Subscriptions:          map[string]adminapi.SubscriptionStats{},
		Replication:            map[string]adminapi.ReplicatorStats{},
		DeDuplicationStatus:    "Disabled",
		TopicCreationTimeStamp: t.loadedAt().UnixMilli(),
		LastPublishTimestamp:   t.lastPublish.Load(),
	}
	t.mu.Lock()
	dedup := t.policy.Deduplication
	t.mu.Unlock()
	if dedup {
		st.DeDuplicationStatus = "Enabled"
	}
	if t.ml != nil {
		for _, l := range t.ml.Ledgers() {
			st.StorageSize += l.Size
		}
	}
	t.mu.Lock()
	prods := make([]*producer, 0, len(t.producers))
	for _, p := range t.producers {
		prods = append(prods, p)
	}
	subs := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	slices.SortFunc(prods, func(a, b *producer) int { return strings.Compare(a.name, b.name) })
	for _, p := range prods {
		st.Publishers = append(st.Publishers, adminapi.PublisherStats{
			AccessMode: p.access.String(), ProducerID: int64(p.id), ProducerName: p.name,
			Address: p.c.nc.RemoteAddr().String(), ConnectedSince: p.since.UTC().Format(time.RFC3339Nano),
			ClientVersion: p.c.clientVersion, Metadata: nonNil(p.metadata),
			IsSupportsPartialProducer: p.c.partialProducer,
		})
	}
	loaded := map[string]bool{}
	st.Replication = t.replicationStats(subs)
	st.SyncReplication = t.syncStats()
	for _, s := range subs {
		loaded[s.name] = true
		if strings.HasPrefix(s.name, ReservedPrefix) {
			continue
		}
		ss := s.stats()
		st.Subscriptions[s.name] = ss
		st.MsgCounterOut += ss.MsgOutCounter
	}
	if t.ml != nil {
		for _, name := range t.ml.Cursors() {
			if loaded[name] || strings.HasPrefix(name, ReservedPrefix) {
				continue
			}
			// A stored subscription nobody consumes now: its cursor still
			// knows the backlog.
			ss := adminapi.SubscriptionStats{SubType: "Exclusive", IsDurable: true, Consumers: []adminapi.ConsumerStats{},
				ConsumersAfterMarkDeletePosition: map[string]string{}, SubscriptionProperties: map[string]string{}}
			ctx, cancel := context.WithTimeout(t.b.ctx, 5*time.Second)
			if c, err := t.ml.OpenCursor(ctx, name, mledger.Latest); err == nil {
				if p := c.Properties(); p != nil {
					ss.SubscriptionProperties = p
				}
				ss.MsgBacklog = c.Backlog()
				ss.MsgBacklogNoDelayed = ss.MsgBacklog
			}
			cancel()
			st.Subscriptions[name] = ss
		}
		// Backlog bytes, estimated from the average entry size.
		var entries int64
		for _, l := range t.ml.Ledgers() {
			entries += l.Entries
		}
		for name, ss := range st.Subscriptions {
			if entries > 0 {
				ss.BacklogSize = ss.MsgBacklog * st.StorageSize / entries
				st.Subscriptions[name] = ss
			}
			st.BacklogSize = max(st.BacklogSize, ss.BacklogSize)
		}
	}
	return st
}

func (s *subscription) stats() adminapi.SubscriptionStats {
	s.mu.Lock()
	cons := slices.Clone(s.consumers)
	ss := adminapi.SubscriptionStats{
		SubType: subTypeName(s.subTypeLocked()), IsDurable: s.durable, MsgOutCounter: s.msgOut,
		Consumers: []adminapi.ConsumerStats{}, ConsumersAfterMarkDeletePosition: map[string]string{},
		SubscriptionProperties: s.properties(), MsgDelayed: int64(s.d.Delayed()),
		LastConsumedFlowTimestamp: s.lastFlow.Load(), LastConsumedTimestamp: s.lastConsumed.Load(),
		LastAckedTimestamp: s.lastAcked.Load(),
	}
	for _, k := range cons {
		if kind := s.d.Kind(); kind == dispatch.Failover && k.d.Active() || kind == dispatch.Exclusive {
			ss.ActiveConsumerName = k.name
		}
		ss.UnAckedMessages += int64(k.d.Unacked())
		ss.Consumers = append(ss.Consumers, adminapi.ConsumerStats{
			AvailablePermits: int(k.d.Permits()), UnAckedMessages: k.d.Unacked(), ConsumerName: k.name,
			BytesOutCounter: k.bytesOut.Load(), MsgOutCounter: k.msgOut.Load(),
			Address: k.c.nc.RemoteAddr().String(), ConnectedSince: k.since.UTC().Format(time.RFC3339Nano),
			ClientVersion: k.c.clientVersion, Metadata: nonNil(k.metadata),
			LastConsumedFlowTimestamp: k.lastFlow.Load(), LastConsumedTimestamp: k.lastConsumed.Load(),
			LastAckedTimestamp: k.lastAcked.Load(),
		})
	}
	s.mu.Unlock()
	ss.MsgBacklog = s.backlog()
	ss.MsgBacklogNoDelayed = ss.MsgBacklog - ss.MsgDelayed
	return ss
}

func subTypeName(t pb.CommandSubscribe_SubType) string {
	if t == pb.CommandSubscribe_Key_Shared {
		return "Key_Shared"
	}
	return t.String()
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func (a adminTopics) InternalStats(ctx context.Context, name topic.Name) (*adminapi.PersistentTopicInternalStats, error) {
	t, err := a.owned(ctx, name, mustExist)
	if err != nil {
		return nil, err
	}
	st := &adminapi.PersistentTopicInternalStats{Ledgers: []adminapi.LedgerInfo{}, Cursors: map[string]adminapi.CursorStats{}, SchemaLedgers: []adminapi.SchemaLedger{}, State: "Open"}
	if t.ml == nil {
		return st, nil
	}
	ls := t.ml.Ledgers()
	for i, l := range ls {
		st.Ledgers = append(st.Ledgers, adminapi.LedgerInfo{LedgerID: l.ID, Entries: l.Entries, Size: l.Size})
		st.NumberOfEntries += l.Entries
		st.TotalSize += l.Size
		if i == len(ls)-1 {
			st.CurrentLedgerEntries, st.CurrentLedgerSize = l.Entries, l.Size
		}
	}
	st.EntriesAddedCounter = st.NumberOfEntries
	st.LastConfirmedEntry = posString(t.ml.LastConfirmed())
	for _, name := range t.ml.Cursors() {
		c, err := t.ml.OpenCursor(ctx, name, mledger.Latest)
		if err != nil {
			continue
		}
		md := c.MarkDelete()
		var ranges []string
		for _, r := range c.AckedRanges() {
			ranges = append(ranges, fmt.Sprintf("(%d:%d..%d:%d]", r.Ledger, r.First-1, r.Ledger, r.Last))
		}
		cs := adminapi.CursorStats{
			MarkDeletePosition: posString(md), ReadPosition: posString(Position{Ledger: md.Ledger, Entry: md.Entry + 1}),
			CursorLedger: -1, CursorLedgerLastEntry: -1, State: "Open",
			IndividuallyDeletedMessages:            "[" + strings.Join(ranges, ",") + "]",
			TotalNonContiguousDeletedMessagesRange: len(ranges), Properties: map[string]int64{},
			NumberOfEntriesSinceFirstNotAckedMessage: c.Backlog(),
		}
		if name == compactor.CursorName {
			// Pulsar shows the compacted ledger in the cursor's properties.
			if cst, err := compactor.StateOf(c.Properties()); err == nil && cst.Valid() {
				cs.Properties[compactor.LedgerProperty] = cst.Ledger
			}
		}
		st.Cursors[name] = cs
	}
	st.CompactedLedger = adminapi.CompactedLedger{LedgerID: -1}
	if v, err := t.compactedView(ctx); err == nil && v != nil {
		st.CompactedLedger = adminapi.CompactedLedger{LedgerID: v.State().Ledger, Entries: v.Len(), Size: v.Size()}
	}
	return st, nil
}

func posString(p Position) string { return fmt.Sprintf("%d:%d", p.Ledger, p.Entry) }

func (a adminTopics) Subscriptions(ctx context.Context, name topic.Name) ([]string, error) {
	t, err := a.owned(ctx, name, mustExist)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	if t.ml != nil {
		for _, c := range t.ml.Cursors() {
			if !strings.HasPrefix(c, ReservedPrefix) {
				set[c] = true
			}
		}
	}
	t.mu.Lock()
	for n := range t.subs {
		set[n] = true
	}
	t.mu.Unlock()
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// durableSub returns the loaded subscription, or a detached one over the
// stored cursor (nil cursor error when it does not exist).
func (t *Topic) durableSub(ctx context.Context, sub string) (*subscription, error) {
	t.mu.Lock()
	s := t.subs[sub]
	t.mu.Unlock()
	if s != nil {
		return s, nil
	}
	if t.ml == nil || !slices.Contains(t.ml.Cursors(), sub) {
		return nil, fmt.Errorf("%w: %s on %s", ErrSubNotFound, sub, t.name)
	}
	return t.subscription(sub, func() (*subscription, error) {
		s := newSubscription(t, sub, pb.CommandSubscribe_Exclusive, true)
		cur, err := t.ml.OpenCursor(ctx, sub, mledger.Latest)
		if err != nil {
			return nil, err
		}
		s.cursor = cur
		md := cur.MarkDelete()
		s.setStart(Position{Ledger: md.Ledger, Entry: md.Entry + 1})
		return s, nil
	})
}

func (a adminTopics) CreateSubscription(ctx context.Context, name topic.Name, sub string, at *adminapi.MessageID) error {
	if err := ValidSubscriptionName(sub); err != nil {
		return err
	}
	if strings.HasPrefix(sub, ReservedPrefix) {
		return fmt.Errorf("%w: invalid subscription name %q: names starting with %q are reserved", adminapi.ErrBadRequest, sub, ReservedPrefix)
	}
	t, err := a.owned(ctx, name, autoCreate)
	if err != nil {
		return err
	}
	if t.ml == nil {
		return fmt.Errorf("%w: durable subscriptions on a non-persistent topic", adminapi.ErrNotAllowed)
	}
	if slices.Contains(t.ml.Cursors(), sub) {
		return fmt.Errorf("%w: subscription %s", adminapi.ErrConflict, sub)
	}
	initial := mledger.Latest
	if at != nil && at.LedgerID < 0 {
		initial = mledger.Earliest
	}
	c, err := t.ml.OpenCursor(ctx, sub, initial)
	if err != nil {
		return err
	}
	if at != nil && at.LedgerID >= 0 && at.LedgerID != adminapi.Latest.LedgerID {
		id := &pb.MessageIdData{LedgerId: u64p(uint64(at.LedgerID)), EntryId: u64p(uint64(at.EntryID))}
		return c.ResetTo(ctx, t.startPosition(id, pb.CommandSubscribe_Earliest))
	}
	return nil
}

// sub loads the topic here and returns its subscription sub (stored or
// loaded).
func (a adminTopics) sub(ctx context.Context, name topic.Name, sub string) (*Topic, *subscription, error) {
	if err := ValidSubscriptionName(sub); err != nil {
		return nil, nil, err
	}
	t, err := a.owned(ctx, name, mustExist)
	if err != nil {
		return nil, nil, err
	}
	s, err := t.durableSub(ctx, sub)
	if err != nil {
		return nil, nil, err
	}
	return t, s, nil
}

// properties are the subscription's properties (Pulsar's subscription
// properties: its cursor's), never nil. s.mu may be held.
func (s *subscription) properties() map[string]string {
	if s.cursor == nil {
		return map[string]string{}
	}
	p := s.cursor.Properties()
	if p == nil {
		p = map[string]string{}
	}
	return p
}

// SubscriptionProperties implements adminapi.SubscriptionProperties.
func (a adminTopics) SubscriptionProperties(ctx context.Context, name topic.Name, sub string) (map[string]string, error) {
	_, s, err := a.sub(ctx, name, sub)
	if err != nil {
		return nil, err
	}
	return s.properties(), nil
}

// SetSubscriptionProperties implements adminapi.SubscriptionProperties.
func (a adminTopics) SetSubscriptionProperties(ctx context.Context, name topic.Name, sub string, props map[string]string) error {
	if strings.HasPrefix(sub, ReservedPrefix) {
		return fmt.Errorf("%w: subscription %q is the broker's own", adminapi.ErrNotAllowed, sub)
	}
	_, s, err := a.sub(ctx, name, sub)
	if err != nil {
		return err
	}
	if s.cursor == nil {
		return fmt.Errorf("%w: subscription %s is not durable", adminapi.ErrNotAllowed, sub)
	}
	return s.cursor.SetProperties(ctx, props)
}

func (a adminTopics) DeleteSubscription(ctx context.Context, name topic.Name, sub string, force bool) error {
	t, s, err := a.sub(ctx, name, sub)
	if err != nil {
		return err
	}
	s.mu.Lock()
	n := len(s.consumers)
	s.mu.Unlock()
	if n > 0 && !force {
		return fmt.Errorf("%w: subscription %s has %d consumers", adminapi.ErrPreconditionFailed, sub, n)
	}
	t.removeSubscription(s)
	s.closeAll(true)
	if s.cursor != nil {
		if err := t.ml.DeleteCursor(ctx, sub); err != nil && !errors.Is(err, mledger.ErrNoCursor) {
			return err
		}
	}
	return nil
}

func (a adminTopics) Skip(ctx context.Context, name topic.Name, sub string, n int64) error {
	t, s, err := a.sub(ctx, name, sub)
	if err != nil {
		return err
	}
	if s.cursor == nil {
		return fmt.Errorf("%w: skip on a non-durable subscription", adminapi.ErrNotAllowed)
	}
	if n < 0 {
		return s.cursor.ResetTo(ctx, t.endPosition())
	}
	// n is the client's (up to 2^63-1): acknowledge a batch at a time, so
	// memory stays bounded whatever it asks; the log's end stops it.
	const batch = 1000
	ps := make([]Position, 0, min(n, batch))
	p := s.cursor.MarkDelete()
	for skipped := int64(0); skipped < n; {
		next, ok := t.ml.Next(p)
		if ok {
			p = next
			if !s.cursor.IsAcked(p) {
				ps = append(ps, p)
				skipped++
			}
		}
		if len(ps) > 0 && (!ok || len(ps) == batch || skipped == n) {
			if err := s.cursor.AckMany(ctx, ps); err != nil {
				return err
			}
			ps = ps[:0]
		}
		if !ok {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (a adminTopics) ResetCursor(ctx context.Context, name topic.Name, sub string, id adminapi.MessageID) error {
	_, s, err := a.sub(ctx, name, sub)
	if err != nil {
		return err
	}
	if err := s.seek(ctx, Position{Ledger: id.LedgerID, Entry: id.EntryID}); err != nil {
		return err
	}
	s.disconnectAll()
	return nil
}

func (a adminTopics) ResetCursorToTime(ctx context.Context, name topic.Name, sub string, ts time.Time) error {
	_, s, err := a.sub(ctx, name, sub)
	if err != nil {
		return err
	}
	if err := s.seekTime(ctx, ts); err != nil {
		return err
	}
	s.disconnectAll()
	return nil
}

func (a adminTopics) Unload(ctx context.Context, name topic.Name) error {
	if err := a.ownHere(ctx, name); err != nil {
		return err
	}
	return a.b.Unload(ctx, name)
}

func (a adminTopics) Terminate(ctx context.Context, name topic.Name) (adminapi.MessageID, error) {
	t, err := a.owned(ctx, name, mustExist)
	if err != nil {
		return adminapi.MessageID{}, err
	}
	p, err := t.terminate(ctx)
	if err != nil {
		return adminapi.MessageID{}, err
	}
	return adminapi.MessageID{LedgerID: p.Ledger, EntryID: p.Entry, PartitionIndex: name.Partition()}, nil
}

func (a adminTopics) LastMessageID(ctx context.Context, name topic.Name) (adminapi.MessageID, error) {
	t, err := a.owned(ctx, name, mustExist)
	if err != nil {
		return adminapi.MessageID{}, err
	}
	p, bi, err := t.lastMessageID(ctx)
	if err != nil {
		return adminapi.MessageID{}, err
	}
	return adminapi.MessageID{LedgerID: p.Ledger, EntryID: p.Entry, PartitionIndex: name.Partition(), BatchIndex: int(bi)}, nil
}

func (a adminTopics) Entry(ctx context.Context, name topic.Name, ledgerID, entry int64) ([]byte, error) {
	t, err := a.owned(ctx, name, mustExist)
	if err != nil {
		return nil, err
	}
	p := Position{Ledger: ledgerID, Entry: entry}
	if t.ml == nil {
		return nil, fmt.Errorf("%w: %s in %s", adminapi.ErrEntryNotFound, posString(p), name)
	}
	return t.readEntry(ctx, p)
}

func (a adminTopics) Lookup(ctx context.Context, name topic.Name) (adminapi.LookupData, error) {
	if a.b.deps.Namespaces != nil {
		pol, err := a.b.deps.Namespaces.Policy(ctx, name.NamespaceName())
		if err != nil {
			return adminapi.LookupData{}, err
		}
		pol = pol.ForTopic(name)
		if _, ok := a.b.redirectToPrimary(pol, false); ok {
			if pol.PrimaryWebServiceURL == "" {
				return adminapi.LookupData{}, fmt.Errorf("%w: topic %s is active-standby and its primary region %s has no web service URL", errkind.ErrServiceNotReady, name, pol.Failover.Primary)
			}
			return adminapi.LookupData{}, &adminapi.NotOwnerError{URL: strings.TrimRight(pol.PrimaryWebServiceURL, "/"), URLTLS: strings.TrimRight(pol.PrimaryWebServiceURLTLS, "/")}
		}
	}
	r, err := a.b.deps.Placement.Lookup(ctx, name, false)
	if err != nil {
		return adminapi.LookupData{}, err
	}
	return adminapi.LookupData{BrokerURL: r.ServiceURL, HTTPURL: r.HTTPURL, BrokerURLTLS: r.ServiceURLTLS, HTTPURLTLS: r.HTTPURLTLS}, nil
}

func (a adminTopics) Brokers(ctx context.Context) ([]string, error) {
	if l, ok := a.b.deps.Placement.(BrokerLister); ok {
		return l.Brokers(ctx)
	}
	u, err := url.Parse(a.b.cfg.HTTPURL)
	if err != nil || u.Host == "" {
		return []string{strings.TrimPrefix(a.b.cfg.ServiceURL, "pulsar://")}, nil
	}
	return []string{u.Host}, nil
}

// Compact implements adminapi.Compactor.
func (a adminTopics) Compact(ctx context.Context, name topic.Name) error {
	t, err := a.owned(ctx, name, mustExist)
	if err != nil {
		return err
	}
	return t.startCompaction()
}

// CompactionStatus implements adminapi.Compactor.
func (a adminTopics) CompactionStatus(ctx context.Context, name topic.Name) (adminapi.LongRunningProcessStatus, error) {
	t, err := a.owned(ctx, name, mustExist)
	if err != nil {
		return adminapi.LongRunningProcessStatus{}, err
	}
	st := t.compactionStatus()
	return adminapi.LongRunningProcessStatus{Status: st.Status, LastError: st.LastError}, nil
}
