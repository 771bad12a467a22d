package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Geo-replication, broker side (docs/replication.md):
//
//   - Source: for every remote cluster in its namespace's replication
//     clusters, a topic has a cursor "isobar.repl.<cluster>", created at
//     the earliest entry, so retention keeps what the remote has not
//     confirmed. Replicator workers consume it as a Failover subscription
//     of that name over the Pulsar protocol and acknowledge cumulatively
//     once the remote has stored the entries.
//   - Sink: replicator workers produce with a producer named
//     "isobar.repl.<source>[.<worker>]". Each entry carries
//     replicated_from = <source> and the property
//     __MSG_PROP_REPL_SOURCE_POSITION = "<ledger>:<entry>" (its position in
//     the source region, as Pulsar's replicator writes it). The topic keeps
//     the highest source position stored per source cluster, recovered on
//     load from the de-duplication snapshot plus a replay of the entries
//     after it, and drops entries at or below it: each source entry is
//     stored once.

// ParseSourcePosition parses a replication.SourcePositionProperty value.
func ParseSourcePosition(s string) (mledger.Position, error) {
	p, err := replication.ParsePosition(s)
	return mledger.Position{Ledger: p.Ledger, Entry: p.Entry}, err
}

// FormatSourcePosition formats p as a replication.SourcePositionProperty value.
func FormatSourcePosition(p mledger.Position) string {
	return replication.Position{Ledger: p.Ledger, Entry: p.Entry}.String()
}

// sourcePosition returns an entry's replication source and position;
// ok is false for an entry that was not replicated.
func sourcePosition(meta *pb.MessageMetadata) (src string, pos mledger.Position, ok bool, err error) {
	src = meta.GetReplicatedFrom()
	if src == "" {
		return "", pos, false, nil
	}
	for _, kv := range meta.GetProperties() {
		if kv.GetKey() == replication.SourcePositionProperty {
			pos, err = ParseSourcePosition(kv.GetValue())
			return src, pos, err == nil, err
		}
	}
	return src, pos, false, fmt.Errorf("replicated entry from %s without a %s property", src, replication.SourcePositionProperty)
}

// replIn is what a topic knows of the entries it stored from one source
// cluster. Guarded by the topic's mu.
type replIn struct {
	pushed    mledger.Position // highest source position sent to the ledger
	confirmed mledger.Position // highest source position stored
	inflight  int
	chain     *mledger.Chain
	// chainFrom are the producers that sent adds of chain. When it
	// breaks, they are refused until they reconnect (stale): an entry of
	// theirs that arrives after the failed one, once the broken chain's
	// adds have all completed, must not be stored over the gap.
	chainFrom map[*producer]struct{}
	stale     map[*producer]struct{}
	// waiting are copies of entries pushed and not yet stored (a frame
	// sent again while the first copy is being stored), answered when
	// the first copy's add completes: stored already, or not stored.
	waiting []replWaiter
	msgIn   int64
	bytesIn int64
	last    time.Time // last entry stored
}

// replWaiter is a copy of a replicated entry at pos waiting for the
// outcome of the add of the first copy.
type replWaiter struct {
	pos  mledger.Position
	done func(mledger.Position, bool, error)
}

// settledLocked removes and returns the waiters the adds completed so
// far decide: those at or below the confirmed position were stored; once
// no add is in flight, the others were not (their adds failed), and are
// answered with a retriable error. t.mu held.
func (st *replIn) settledLocked() (stored, failed []replWaiter) {
	keep := st.waiting[:0]
	for _, w := range st.waiting {
		switch {
		case w.pos.Compare(st.confirmed) <= 0:
			stored = append(stored, w)
		case st.inflight == 0:
			failed = append(failed, w)
		default:
			keep = append(keep, w)
		}
	}
	clear(st.waiting[len(keep):])
	st.waiting = keep
	return stored, failed
}

var noPosition = mledger.Position{Ledger: -1, Entry: -1}

// replOut tracks the progress of the replication cursor to one remote, so
// that a stream that stopped moving shows as stalled. Guarded by the
// topic's mu.
type replOut struct {
	md    mledger.Position
	since time.Time // md last changed (or the backlog was last empty)
}

// replStalled notes the replication cursor's position and reports whether
// it has a backlog and has not moved for the stall threshold.
func (t *Topic) replStalled(remote string, md mledger.Position, backlog int64) bool {
	now := t.b.deps.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.rs().replOut[remote]
	if o == nil {
		o = &replOut{md: md, since: now}
		if t.rs().replOut == nil {
			t.rs().replOut = map[string]*replOut{}
		}
		t.rs().replOut[remote] = o
	}
	if md != o.md || backlog == 0 {
		o.md, o.since = md, now
	}
	return backlog > 0 && now.Sub(o.since) >= t.b.cfg.ReplicationStallAfter
}

func newReplIn(hwm mledger.Position) *replIn {
	return &replIn{pushed: hwm, confirmed: hwm, chain: mledger.NewChain(), chainFrom: map[*producer]struct{}{}}
}

// TopicPolicies is implemented by Namespaces that know topics' own
// policies (PolicyNamespaces does).
type TopicPolicies interface {
	// TopicPolicy returns pol, the policy of the topic's namespace, with
	// the topic's own policies in force in this cluster applied.
	TopicPolicy(ctx context.Context, name topic.Name, pol NamespacePolicy) (NamespacePolicy, error)
}

// NamespaceTopicPolicies is implemented by a TopicPolicies that reads the
// own policies of every topic of a namespace at once: maintenance passes
// over the loaded topics with one read per namespace instead of one (or
// two) per topic.
type NamespaceTopicPolicies interface {
	// TopicPoliciesOf returns TopicPolicy for the topics of namespace ns
	// as they are now, without further reads.
	TopicPoliciesOf(ctx context.Context, ns string) (func(topic.Name, NamespacePolicy) (NamespacePolicy, error), error)
}

// withTopicPolicy applies the topic's own failover policy and its other
// own policies, if it has any, to its namespace's policy. On error the
// namespace's stay (logged).
func (b *Broker) withTopicPolicy(ctx context.Context, name topic.Name, pol NamespacePolicy) NamespacePolicy {
	return b.withTopicPolicyFrom(ctx, name, pol, nil)
}

// withTopicPolicyFrom is withTopicPolicy with the topic's own policies
// applied by apply (NamespaceTopicPolicies.TopicPoliciesOf of its
// namespace) instead of read, when apply is not nil.
func (b *Broker) withTopicPolicyFrom(ctx context.Context, name topic.Name, pol NamespacePolicy, apply func(topic.Name, NamespacePolicy) (NamespacePolicy, error)) NamespacePolicy {
	pol = pol.ForTopic(name)
	if apply == nil {
		tp, ok := b.deps.Namespaces.(TopicPolicies)
		if !ok {
			return pol
		}
		apply = func(n topic.Name, p NamespacePolicy) (NamespacePolicy, error) { return tp.TopicPolicy(ctx, n, p) }
	}
	out, err := apply(name, pol)
	if err != nil {
		b.log.Warn("topic policies unavailable; the topic follows its namespace", "topic", name.String(), "err", err)
		return pol
	}
	return out
}

// remotes are the other clusters of the topic's replication clusters.
func (t *Topic) remotes() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, c := range t.policy.ReplicationClusters {
		if c != t.b.cfg.Cluster && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// syncReplCursors creates the replication cursors of the topic's remotes
// and deletes those of clusters no longer replicated to (their
// subscriptions are closed first). Deleting a cursor releases what
// retention kept for that cluster; nothing stored in any region is
// deleted.
func (t *Topic) syncReplCursors(ctx context.Context) error {
	if t.ml == nil {
		return nil
	}
	want := t.remotes()
	var errs []error
	for _, r := range want {
		c, err := t.ml.OpenCursor(ctx, replication.CursorName(r), mledger.Earliest)
		if err != nil {
			errs = append(errs, fmt.Errorf("replication cursor for %s: %w", r, err))
			continue
		}
		if t.replStalled(r, c.MarkDelete(), c.Backlog()) {
			t.b.log.Warn("replication stalled", "topic", t.name.String(), "remote", r, "backlog", c.Backlog(), "markDelete", c.MarkDelete())
		}
	}
	for _, name := range t.ml.Cursors() {
		r, ok := strings.CutPrefix(name, replication.Prefix)
		if !ok || slices.Contains(want, r) {
			continue
		}
		t.mu.Lock()
		s := t.subs[name]
		t.mu.Unlock()
		if s != nil {
			s.closeAll(true)
			t.removeSubscription(s)
		}
		t.mu.Lock()
		delete(t.rs().replOut, r)
		t.mu.Unlock()
		if err := t.ml.DeleteCursor(ctx, name); err != nil && !errors.Is(err, mledger.ErrNoCursor) {
			errs = append(errs, fmt.Errorf("replication cursor for %s: delete: %w", r, err))
		} else {
			t.b.log.Info("replication stopped", "topic", t.name.String(), "remote", r)
		}
	}
	return errors.Join(errs...)
}

// checkReplSubscribe allows a subscription to a replication cursor when
// its remote is one of the topic's remotes, re-reading the namespace's
// policy first so a cluster added a moment ago is known.
func (t *Topic) checkReplSubscribe(ctx context.Context, name string, st pb.CommandSubscribe_SubType) error {
	remote := strings.TrimPrefix(name, replication.Prefix)
	if st != pb.CommandSubscribe_Failover && st != pb.CommandSubscribe_Exclusive {
		return fmt.Errorf("%w: replication subscription %s must be Failover or Exclusive", ErrInvalidArgument, name)
	}
	if t.ml == nil {
		return fmt.Errorf("%w: non-persistent topic %s is not replicated", ErrInvalidArgument, t.name)
	}
	if pol, err := t.b.deps.Namespaces.Policy(ctx, t.name.NamespaceName()); err == nil {
		t.setPolicy(t.b.withTopicPolicy(ctx, t.name, pol))
	}
	if !slices.Contains(t.remotes(), remote) {
		return fmt.Errorf("%w: namespace %s does not replicate to cluster %q", ErrInvalidArgument, t.name.NamespaceName(), remote)
	}
	if err := t.syncReplCursors(ctx); err != nil {
		return err
	}
	return nil
}

// publishReplicated appends an entry that a replicator producer (from)
// brought from cluster src, unless an entry at or after its source
// position is already stored from src. done is as for publish.
//
// It answers "stored already" only for what is stored: a copy of an
// entry whose first copy is still being added waits for that add, and
// fails with it (the source then sends the entry again). After an add
// of src fails, the producers that sent adds after it are refused until
// they reconnect, so that none of their later entries is stored over
// the gap: the high-water mark must never pass an entry that is not
// stored, or the entry's next copy is dropped as stored and the source,
// told so, acknowledges it (docs/replication.md, "Exactly once").
func (t *Topic) publishReplicated(ctx context.Context, from *producer, src string, pos mledger.Position, origin originSeq, numMsgs int, entry []byte, done func(mledger.Position, bool, error)) {
	d := t.dedupState()
	if err := d.ensureLoaded(ctx); err != nil {
		done(mledger.Position{}, false, err)
		return
	}
	if err := t.quotaErr(false); err != nil {
		done(mledger.Position{}, false, err)
		return
	}
	t.mu.Lock()
	st := t.rs().replIn[src]
	if st == nil {
		st = newReplIn(noPosition)
		if t.rs().replIn == nil {
			t.rs().replIn = map[string]*replIn{}
		}
		t.rs().replIn[src] = st
	}
	if st.chain.Broken() {
		if st.inflight > 0 {
			t.mu.Unlock()
			done(mledger.Position{}, false, fmt.Errorf("%w: replicated entries from %s are being failed; retry", errkind.ErrServiceNotReady, src))
			return
		}
		// Every add of the broken chain has completed: start over from
		// what is stored, with the producers that sent to it refused.
		st.pushed, st.chain = st.confirmed, mledger.NewChain()
		st.stale, st.chainFrom = st.chainFrom, map[*producer]struct{}{}
	}
	if _, stale := st.stale[from]; stale && from != nil {
		t.mu.Unlock()
		done(mledger.Position{}, false, fmt.Errorf("%w: an earlier replicated entry of producer %s failed; reconnect and resend", errkind.ErrServiceNotReady, from.name))
		return
	}
	if pos.Compare(st.confirmed) <= 0 {
		t.mu.Unlock()
		done(mledger.Position{}, false, nil) // stored already
		return
	}
	if pos.Compare(st.pushed) <= 0 {
		// Its first copy is being added: the answer is that add's.
		if st.inflight == 0 {
			t.mu.Unlock()
			done(mledger.Position{}, false, fmt.Errorf("%w: replicated entry %s from %s is not stored; retry", errkind.ErrServiceNotReady, pos, src))
			return
		}
		st.waiting = append(st.waiting, replWaiter{pos: pos, done: done})
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	if t.late(src) && t.resentHere(origin, origin.first) {
		// The old primary stored it, the producer did not hear so and
		// resent it here after the failover: here already.
		done(mledger.Position{}, false, nil)
		return
	}
	dedupSeq := d.replica(src)
	t.mu.Lock()
	if pos.Compare(st.pushed) <= 0 || st.chain.Broken() {
		t.mu.Unlock()
		done(mledger.Position{}, false, fmt.Errorf("%w: replicated entries from %s changed meanwhile; retry", errkind.ErrServiceNotReady, src))
		return
	}
	// An entry of a producer whose sequence id this topic has stored
	// already is a copy of a message stored here: this region stored it
	// as the primary when it was cut off, and the producer, not told,
	// resent it to the new primary, which sends it back now.
	if dedupSeq && origin.producer != "" && d.pushed != nil {
		if last, ok := d.pushed[origin.producer]; ok && origin.first <= last {
			t.mu.Unlock()
			done(mledger.Position{}, false, nil)
			return
		}
	}
	st.pushed = pos
	st.inflight++
	chain := st.chain
	if from != nil {
		st.chainFrom[from] = struct{}{}
	}
	// Counted at once, as a producer's own send is: a resend of the same
	// message that arrives while this one is stored is dropped.
	pushedSeq := dedupSeq && origin.producer != "" && d.pushed != nil && origin.seq > d.pushed[origin.producer]
	if pushedSeq {
		d.pushed[origin.producer] = origin.seq
	}
	t.mu.Unlock()
	entry = t.markLate(src, entry, numMsgs)
	t.countIn(int64(numMsgs), int64(len(entry)))
	t.ml.AddEntryChainedAsync(ctx, chain, entry, func(p mledger.Position, err error) {
		t.mu.Lock()
		st.inflight--
		if err != nil && pushedSeq && d.pushed[origin.producer] == origin.seq {
			d.pushed[origin.producer] = d.confirmed[origin.producer]
		}
		if err == nil {
			if pos.Compare(st.confirmed) > 0 {
				st.confirmed = pos
			}
			st.msgIn += int64(numMsgs)
			st.bytesIn += int64(len(entry))
			st.last = t.b.deps.Now()
		}
		stored, failed := st.settledLocked()
		t.mu.Unlock()
		if err == nil {
			t.learnOrigin(origin)
			d.stored(p)
			t.noteReplicated()
		}
		t.addFailed(err)
		done(p, true, err)
		for _, w := range stored {
			w.done(mledger.Position{}, false, nil)
		}
		for _, w := range failed {
			w.done(mledger.Position{}, false, fmt.Errorf("%w: replicated entry %s from %s was not stored; retry", errkind.ErrServiceNotReady, w.pos, src))
		}
	})
}

// originSeq is the producer name and (highest) sequence id a replicated
// entry had in its source region.
type originSeq struct {
	producer string
	seq      int64 // the entry's highest sequence id
	first    int64 // its first (a batch's own sequence id)
}

// learnOrigin records a replicated entry's producer sequence id for
// de-duplication, in active-standby namespaces.
func (t *Topic) learnOrigin(o originSeq) {
	if o.producer == "" || !t.dedupCrossRegion() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.dd.Load()
	if d == nil || d.pushed == nil {
		return
	}
	if o.seq > d.pushed[o.producer] {
		d.pushed[o.producer] = o.seq
	}
	if o.seq > d.confirmed[o.producer] {
		d.confirmed[o.producer] = o.seq
	}
}

// oldestUnacked is the publish time of the first entry after c's
// mark-delete position; zero when there is none (or it cannot be read).
func (t *Topic) oldestUnacked(ctx context.Context, c *mledger.Cursor) time.Time {
	if c.Backlog() == 0 {
		return time.Time{}
	}
	md := c.MarkDelete()
	es, _, err := t.ml.Read(ctx, mledger.Position{Ledger: md.Ledger, Entry: md.Entry + 1}, 1)
	if err != nil || len(es) != 1 {
		return time.Time{}
	}
	return publishTime(es[0].Data)
}

// replicationStats fills the replication section of the topic's stats:
// per remote, the outbound backlog and rate from its replication cursor
// and subscription, and the inbound counters of what came from it.
func (t *Topic) replicationStats(subs []*subscription) map[string]adminapi.ReplicatorStats {
	out := map[string]adminapi.ReplicatorStats{}
	if t.ml == nil {
		return out
	}
	now := t.b.deps.Now()
	age := now.Sub(t.loadedAt()).Seconds()
	for _, r := range t.remotes() {
		rs := adminapi.ReplicatorStats{}
		ctx, cancel := context.WithTimeout(t.b.ctx, 5*time.Second)
		if c, err := t.ml.OpenCursor(ctx, replication.CursorName(r), mledger.Earliest); err == nil {
			rs.ReplicationBacklog = c.Backlog()
			_, _, avg := t.backlogBytes(c)
			rs.ReplicationBacklogBytes = rs.ReplicationBacklog * avg
			rs.Stalled = t.replStalled(r, c.MarkDelete(), rs.ReplicationBacklog)
			if pt := t.oldestUnacked(ctx, c); !pt.IsZero() {
				rs.ReplicationDelayInSeconds = max(0, int64(now.Sub(pt).Seconds()))
			}
		}
		cancel()
		for _, s := range subs {
			if s.name != replication.CursorName(r) {
				continue
			}
			ss := s.stats()
			for _, k := range ss.Consumers {
				rs.Connected = true
				rs.OutboundConnection = k.Address
				rs.OutboundConnectedSince = k.ConnectedSince
				rs.MsgThroughputOut += float64(k.BytesOutCounter) / max(age, 1)
			}
			rs.MsgRateOut = float64(ss.MsgOutCounter) / max(age, 1)
		}
		t.mu.Lock()
		if in := t.rs().replIn[r]; in != nil {
			rs.MsgRateIn = float64(in.msgIn) / max(age, 1)
			rs.MsgThroughputIn = float64(in.bytesIn) / max(age, 1)
			if !in.last.IsZero() {
				rs.InboundConnectedSince = in.last.UTC().Format(time.RFC3339Nano)
			}
		}
		t.mu.Unlock()
		out[r] = rs
	}
	return out
}
