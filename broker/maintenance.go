package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/broker/compactor"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

// maintain runs the periodic work on loaded topics until the broker stops.
func (b *Broker) maintain() {
	t := time.NewTicker(b.cfg.MaintenanceInterval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		b.maintainOnce(b.ctx)
	}
}

// maintainOnce re-reads the namespace policies of the loaded topics and
// applies message TTL, backlog quotas, retention and the deletion of
// inactive topics once (the maintenance loop calls it every
// MaintenanceInterval; tests call it through export_test.go), visiting
// only the topics that need it (maintindex.go).
func (b *Broker) maintainOnce(ctx context.Context) {
	m := &b.maintIdx
	m.pass.Lock()
	defer m.pass.Unlock()
	pols := map[string]NamespacePolicy{}
	skip := map[string]bool{} // namespaces whose policies could not be read
	// The topics' own policies, read once per namespace when the
	// namespaces can (a pass over a million topics must not read each).
	tpols := map[string]func(topic.Name, NamespacePolicy) (NamespacePolicy, error){}
	ntp, batch := b.deps.Namespaces.(NamespaceTopicPolicies)
	ntd, digests := b.deps.Namespaces.(NamespaceTopicPoliciesDigest)
	dyn := b.dyn.Load()
	dynChanged := dyn != m.dyn
	m.dyn = dyn
	changed := map[string]bool{} // namespaces whose topics are all visited
	seenNS := map[string]bool{}
	for _, ns := range b.loadedNamespaces() {
		if ctx.Err() != nil {
			return
		}
		seenNS[ns] = true
		p, err := b.deps.Namespaces.Policy(ctx, ns)
		if err != nil {
			// Keep the policy the topic has: a namespace whose stored
			// policies cannot be used (a TTL that does not fit a
			// duration, say) must not have them applied.
			b.log.Warn("topic maintenance: namespace policies unavailable; topics keep their current ones", "namespace", ns, "err", err)
			skip[ns] = true
			continue
		}
		pols[ns] = p
		rec := nsMaintRecord{pol: p}
		switch {
		case digests:
			// On error: nil, and each topic's policies are read (and
			// their problem reported) one by one.
			var err error
			tpols[ns], rec.digest, err = ntd.TopicPoliciesDigestOf(ctx, ns)
			rec.digested = err == nil
		case batch:
			tpols[ns], _ = ntp.TopicPoliciesOf(ctx, ns)
		}
		if old, ok := m.ns[ns]; ok && (dynChanged || !old.sameAs(rec)) {
			// (A namespace not recorded had no topic loaded at the last
			// pass: every topic of it loaded since is listed.)
			changed[ns] = true
		}
		if m.ns == nil {
			m.ns = map[string]nsMaintRecord{}
		}
		m.ns[ns] = rec
	}
	for ns := range m.ns {
		if !seenNS[ns] {
			delete(m.ns, ns)
		}
	}
	visit := b.takeMaint()
	visit = append(visit, m.due.popDue(b.deps.Now().UnixNano())...)
	if len(changed) > 0 {
		visit = append(visit, b.loadedIn(changed)...)
	}
	var idle []*Topic // partitions that may be deleted as inactive (inactive.go)
	defer func() { b.deleteInactivePartitions(ctx, idle) }()
	defer b.sweepDeletedMarks(ctx) // deleted.go
	seen := make(map[*Topic]bool, len(visit))
	for i, t := range visit {
		if ctx.Err() != nil {
			for _, t := range visit[i:] {
				b.listMaint(t) // not visited: the next pass does
			}
			return
		}
		if seen[t] || t.isClosed() {
			continue
		}
		seen[t] = true
		ns := t.name.NamespaceName()
		pol, ok := pols[ns]
		if !ok {
			// Its namespace's policies could not be read, or it was
			// loaded after they were: the next pass.
			b.listMaint(t)
			continue
		}
		tpol := b.withTopicPolicyFrom(ctx, t.name, pol, tpols[ns])
		t.setPolicy(tpol)
		if t.ml == nil {
			continue
		}
		if err := t.maintain(ctx, tpol); err != nil && !errors.Is(err, mledger.ErrClosed) {
			b.log.Warn("topic maintenance", "topic", t.name.String(), "err", err)
		}
		reported := b.checkInactive(ctx, t, tpol)
		if reported {
			idle = append(idle, t)
		}
		switch at, ok := b.inactiveDue(t, tpol); {
		case reported || t.keepVisiting(tpol):
			b.listMaint(t)
		case ok:
			m.due.add(t, at.UnixNano())
		default:
			m.due.remove(t)
		}
	}
}

// runtimePolicy is old with the fields of pol that follow the namespace's
// (and the topic's) policies at run time; the others keep what they were
// when the topic was loaded. sameRuntimePolicy compares these fields.
func runtimePolicy(old *NamespacePolicy, pol NamespacePolicy) NamespacePolicy {
	p := *old
	p.Retention, p.MessageTTL = pol.Retention, pol.MessageTTL
	p.BacklogLimit, p.BacklogPolicy = pol.BacklogLimit, pol.BacklogPolicy
	p.BacklogAge, p.BacklogAgePolicy = pol.BacklogAge, pol.BacklogAgePolicy
	p.ReplicationClusters = pol.ReplicationClusters
	p.Failover = pol.Failover
	p.MaxProducers, p.MaxConsumers = pol.MaxProducers, pol.MaxConsumers
	p.MaxConsumersPerSubscription, p.MaxSubscriptions = pol.MaxConsumersPerSubscription, pol.MaxSubscriptions
	p.MaxTopics = pol.MaxTopics
	p.AutoSubscriptionCreation = pol.AutoSubscriptionCreation
	p.Affinity = pol.Affinity
	p.MaxUnackedPerConsumer, p.MaxUnackedPerSubscription = pol.MaxUnackedPerConsumer, pol.MaxUnackedPerSubscription
	p.DedupSnapshotInterval, p.DelayedDelivery = pol.DedupSnapshotInterval, pol.DelayedDelivery
	p.Persistence = pol.Persistence
	p.CompactionThreshold = pol.CompactionThreshold
	p.SyncReplication = pol.SyncReplication
	return p
}

// sameRuntimePolicy reports whether a and b agree on every field
// runtimePolicy takes from a new policy (pointers by what they point at;
// TestRuntimePolicyFields keeps the two lists in step). It is what the
// maintenance pass asks of every loaded topic, so it compares without
// reflection.
func sameRuntimePolicy(a, b *NamespacePolicy) bool {
	return a.Retention == b.Retention && a.MessageTTL == b.MessageTTL &&
		a.BacklogLimit == b.BacklogLimit && a.BacklogPolicy == b.BacklogPolicy &&
		a.BacklogAge == b.BacklogAge && a.BacklogAgePolicy == b.BacklogAgePolicy &&
		sameSlice(a.ReplicationClusters, b.ReplicationClusters) &&
		a.Failover == b.Failover &&
		samePointee(a.MaxProducers, b.MaxProducers) && samePointee(a.MaxConsumers, b.MaxConsumers) &&
		samePointee(a.MaxConsumersPerSubscription, b.MaxConsumersPerSubscription) && a.MaxSubscriptions == b.MaxSubscriptions &&
		samePointee(a.MaxTopics, b.MaxTopics) &&
		samePointee(a.AutoSubscriptionCreation, b.AutoSubscriptionCreation) &&
		sameSlice(a.Affinity.Primary, b.Affinity.Primary) && sameSlice(a.Affinity.Secondary, b.Affinity.Secondary) &&
		a.MaxUnackedPerConsumer == b.MaxUnackedPerConsumer && a.MaxUnackedPerSubscription == b.MaxUnackedPerSubscription &&
		samePointee(a.DedupSnapshotInterval, b.DedupSnapshotInterval) && samePointee(a.DelayedDelivery, b.DelayedDelivery) &&
		samePointee(a.Persistence, b.Persistence) &&
		a.CompactionThreshold == b.CompactionThreshold &&
		samePointee(a.SyncReplication, b.SyncReplication)
}

// samePointee: both nil, or both pointing at equal values.
func samePointee[T comparable](a, b *T) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// sameSlice: equal elements, and both nil or neither.
func sameSlice[T comparable](a, b []T) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}

func (t *Topic) setPolicy(pol NamespacePolicy) {
	t.mu.Lock()
	if p := runtimePolicy(t.policy, pol); !sameRuntimePolicy(&p, t.policy) {
		t.policy = t.b.sharedPolicy(t.name.NamespaceName(), p)
	}
	if pol.Failover.Mode == policy.ActiveStandby {
		t.dedupOn = true
	}
	subs := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	t.storeLimits(pol)
	if d := t.dd.Load(); d != nil { // else made with t.policy's
		d.setInterval(t.b.dedupSnapshotInterval(pol))
	}
	if t.ml != nil {
		t.ml.SetRetention(pol.Retention)
		t.ml.SetAffinity(pol.Affinity)
		t.ml.SetMarkDeleteRate(markDeleteRate(pol))
		lc := ledgerConfig(t.b.cfg.Ledger, pol)
		if err := t.ml.SetQuorums(lc.EnsembleSize, lc.WriteQuorum, lc.AckQuorum); err != nil {
			t.b.log.Warn("persistence policy not applied; new ledgers keep the previous shape", "topic", t.name.String(), "err", err)
		}
	}
	t.setRates(pol.Rates)
	// Limits raised or removed: dispatchers held back by them go on.
	for _, s := range subs {
		s.kick()
	}
}

// userCursors opens the cursors that policies act on: subscriptions, not
// the broker's own (de-duplication, compaction: its position is the
// compaction horizon, which only the compactor moves).
func (t *Topic) userCursors(ctx context.Context) []*mledger.Cursor {
	var out []*mledger.Cursor
	for _, name := range t.ml.Cursors() {
		if name == dedupCursor || name == compactor.CursorName || name == txnCursor {
			continue
		}
		if c, err := t.ml.OpenCursor(ctx, name, mledger.Latest); err == nil {
			out = append(out, c)
		}
	}
	return out
}

func (t *Topic) maintain(ctx context.Context, pol NamespacePolicy) error {
	var errs []error
	if pol.MessageTTL > 0 {
		errs = append(errs, t.expire(ctx, t.b.deps.Now().Add(-pol.MessageTTL)))
	}
	if pol.BacklogLimit > 0 || pol.BacklogAge > 0 {
		errs = append(errs, t.checkBacklog(ctx, pol))
	} else {
		t.setFlag(flQuotaExceeded, false)
	}
	if pol.SubscriptionExpiration > 0 {
		errs = append(errs, t.expireSubscriptions(ctx, pol.SubscriptionExpiration))
	}
	errs = append(errs, t.syncReplCursors(ctx))
	t.applySyncPolicy(ctx)
	errs = append(errs, t.maybeCompact(ctx, pol.CompactionThreshold))
	errs = append(errs, t.snapshotTxnBuffer(ctx)) // transactions.go
	errs = append(errs, t.ml.Trim(ctx))
	return errors.Join(errs...)
}

// touchSub records that subscription name had a consumer now (one came
// or went): its expiration counts from the last such moment.
func (t *Topic) touchSub(name string) {
	a := t.subActive.Load()
	if a == nil {
		t.subActive.CompareAndSwap(nil, &subActivity{at: map[string]time.Time{}})
		a = t.subActive.Load()
	}
	a.mu.Lock()
	a.at[name] = t.b.deps.Now()
	a.mu.Unlock()
	t.touch()
}

// subActivity is when each subscription of a topic last had a consumer
// come or go.
type subActivity struct {
	mu sync.Mutex
	at map[string]time.Time
}

// subLastActive is when subscription name last had a consumer come or
// go; false if never since the load.
func (t *Topic) subLastActive(name string) (time.Time, bool) {
	a := t.subActive.Load()
	if a == nil {
		return time.Time{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.at[name]
	return at, ok
}

// expireSubscriptions deletes the durable subscriptions that have had no
// consumer for longer than after (Pulsar's subscription expiration):
// their cursors and backlogs go, as by the admin API's delete. Idle time
// counts from the subscription's last consumer, or from when the topic
// was loaded here. The broker's own cursors and the replication cursors
// never expire.
func (t *Topic) expireSubscriptions(ctx context.Context, after time.Duration) error {
	now := t.b.deps.Now()
	var errs []error
	for _, name := range t.ml.Cursors() {
		if strings.HasPrefix(name, ReservedPrefix) || name == compactor.CursorName {
			continue
		}
		t.mu.Lock()
		s := t.subs[name]
		t.mu.Unlock()
		if s != nil {
			s.mu.Lock()
			busy := len(s.consumers) > 0
			s.mu.Unlock()
			if busy {
				t.touchSub(name)
				continue
			}
		}
		last, ok := t.subLastActive(name)
		if !ok {
			last = t.loadedAt()
		}
		if now.Sub(last) < after {
			continue
		}
		if s != nil {
			t.removeSubscription(s)
			s.closeAll(true)
		}
		if err := t.ml.DeleteCursor(ctx, name); err != nil && !errors.Is(err, mledger.ErrNoCursor) {
			errs = append(errs, fmt.Errorf("expire subscription %s: %w", name, err))
			continue
		}
		if a := t.subActive.Load(); a != nil {
			a.mu.Lock()
			delete(a.at, name)
			a.mu.Unlock()
		}
		t.b.log.Info("subscription expired", "topic", t.name.String(), "subscription", name, "idle", now.Sub(last).Round(time.Second))
	}
	return errors.Join(errs...)
}

// expire acknowledges, on every subscription, the messages published
// before cutoff.
func (t *Topic) expire(ctx context.Context, cutoff time.Time) error {
	first, err := t.findByTime(ctx, cutoff)
	if err != nil {
		return fmt.Errorf("message TTL: %w", err)
	}
	last, ok := t.ml.Prev(first) // the newest expired entry
	if !ok {
		return nil
	}
	var errs []error
	for _, c := range t.userCursors(ctx) {
		if c.MarkDelete().Compare(last) < 0 {
			errs = append(errs, c.AckCumulative(ctx, last))
		}
	}
	return errors.Join(errs...)
}

// backlogBytes estimates a cursor's backlog in bytes from the average
// entry size.
func (t *Topic) backlogBytes(c *mledger.Cursor) (entries, bytes, avg int64) {
	var n, size int64
	for _, l := range t.ml.Ledgers() {
		n += l.Entries
		size += l.Size
	}
	if n == 0 {
		return 0, 0, 0
	}
	avg = max(1, size/n)
	entries = c.Backlog()
	return entries, entries * avg, avg
}

// checkBacklog applies the backlog quotas, by size and by age: eviction
// moves subscriptions over one forward; the other policies flag the
// topic so producers are refused until the backlog shrinks.
func (t *Topic) checkBacklog(ctx context.Context, pol NamespacePolicy) error {
	exceeded := false
	var errs []error
	cursors := t.userCursors(ctx)
	if pol.BacklogLimit > 0 {
		for _, c := range cursors {
			_, bytes, avg := t.backlogBytes(c)
			if bytes <= pol.BacklogLimit {
				continue
			}
			if pol.BacklogPolicy != BacklogConsumerEviction {
				exceeded = true
				continue
			}
			drop := (bytes - pol.BacklogLimit + avg - 1) / avg
			target := t.ml.Skip(c.MarkDelete(), drop)
			t.b.log.Info("backlog quota: evicting the oldest entries", "topic", t.name.String(), "subscription", c.Name(), "entries", drop)
			errs = append(errs, c.AckCumulative(ctx, target))
		}
	}
	if pol.BacklogAge > 0 && len(cursors) > 0 {
		over, err := t.checkBacklogAge(ctx, cursors, pol)
		exceeded = exceeded || over
		errs = append(errs, err)
	}
	t.setFlag(flQuotaExceeded, exceeded)
	return errors.Join(errs...)
}

// checkBacklogAge applies the message_age quota, as Pulsar's precise
// time-based check: a subscription whose oldest unacknowledged message
// was published more than pol.BacklogAge ago is over it. Eviction
// acknowledges the messages older than that; the other policies report
// the topic over its quota.
func (t *Topic) checkBacklogAge(ctx context.Context, cursors []*mledger.Cursor, pol NamespacePolicy) (bool, error) {
	first, err := t.findByTime(ctx, t.b.deps.Now().Add(-pol.BacklogAge))
	if err != nil {
		return false, fmt.Errorf("backlog quota by age: %w", err)
	}
	last, ok := t.ml.Prev(first) // the newest message over the age
	if !ok {
		return false, nil
	}
	over := false
	var errs []error
	for _, c := range cursors {
		if c.MarkDelete().Compare(last) >= 0 {
			continue
		}
		if pol.BacklogAgePolicy != BacklogConsumerEviction {
			over = true
			continue
		}
		t.b.log.Info("backlog quota: evicting messages older than the age limit", "topic", t.name.String(), "subscription", c.Name(), "limit", pol.BacklogAge)
		errs = append(errs, c.AckCumulative(ctx, last))
	}
	return over, errors.Join(errs...)
}

// quotaErr is the error for a producer or a send while the backlog quota
// is exceeded.
func (t *Topic) quotaErr(creating bool) error {
	if !t.flag(flQuotaExceeded) {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.quotaErrOf(creating)
}

// quotaErrLocked is quotaErr for a new producer, t.mu held.
func (t *Topic) quotaErrLocked() error {
	if !t.flag(flQuotaExceeded) {
		return nil
	}
	return t.quotaErrOf(true)
}

func (t *Topic) quotaErrOf(creating bool) error {
	var quota []string
	if t.policy.BacklogLimit > 0 {
		quota = append(quota, fmt.Sprintf("%d bytes", t.policy.BacklogLimit))
	}
	if t.policy.BacklogAge > 0 {
		quota = append(quota, fmt.Sprintf("messages %s old", t.policy.BacklogAge))
	}
	e := errkind.ErrProducerBlockedQuotaExceeded
	if creating {
		e = errkind.ErrProducerBlockedQuotaExceededException
	}
	return fmt.Errorf("%w: topic %s has a subscription backlog over its quota of %s", e, t.name, strings.Join(quota, " or "))
}
