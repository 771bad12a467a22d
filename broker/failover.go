package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/broker/primary"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Active-standby namespaces (docs/failover.md): lookups from clients go to
// the primary region, and publishes and acknowledgements are accepted only
// while Deps.Primary allows them. Replicator workers are exempt: their
// producers write the standby copies and their cursors read in whichever
// region is primary. Every refusal is ServiceNotReady, which pulsar-client-go
// retries with a new lookup; it never sees TopicNotFound, TopicTerminated or
// ProducerFenced, on which it would give up.

// redirectToPrimary says whether a lookup of a topic of a namespace with
// policy pol, asked by a client (a replicator worker when replicator),
// goes to the primary region, and to which broker URL ("" when the
// primary has none).
func (b *Broker) redirectToPrimary(pol NamespacePolicy, replicator bool) (string, bool) {
	f := pol.Failover
	if f.Mode != policy.ActiveStandby || f.Primary == b.cfg.Cluster || replicator {
		return "", false
	}
	return pol.PrimaryServiceURL, true
}

// lapsedPrimary is the error a lookup gets from a broker of the primary
// region whose fence lease lapsed: it is cut off from the global store
// and another region may have been promoted, so it does not name itself.
// The client retries the lookup, on the next host of a multi-host service
// URL, instead of connecting here again and again to be refused.
func (b *Broker) lapsedPrimary(pol NamespacePolicy, name topic.Name, replicator bool) error {
	if pol.Failover.Mode != policy.ActiveStandby || replicator {
		return nil
	}
	if err := b.checkPrimary(name); errors.Is(err, primary.ErrLapsed) {
		// Held while the broker takes its fence again after a short cut.
		if err := b.holdPrimary(name); errors.Is(err, primary.ErrLapsed) {
			return err
		}
	}
	return nil
}

// primaryHold bounds how long a client's request waits for the gate to
// settle (a fence being taken again after a short cut of the global
// store, primary.Config.Hold, ends well before it).
const primaryHold = 5 * time.Second

// holdPrimary is checkPrimary, but waits (up to primaryHold) while the
// gate may soon allow writes: a publish or acknowledgement arriving while
// the broker takes its fence again after a short cut of the global
// store, or takes it as a newly promoted primary, is delayed, not
// refused. So is one arriving while the gate has not yet seen a
// promotion of this region that the namespace policies already show (the
// client was sent here by a lookup that read them).
func (b *Broker) holdPrimary(name topic.Name) error {
	err := b.checkPrimary(name)
	if err == nil || !errors.Is(err, primary.ErrFenced) && !b.promotedHere(name, err) {
		return err
	}
	ctx, cancel := context.WithTimeout(b.ctx, primaryHold)
	defer cancel()
	return b.waitPrimary(ctx, name)
}

// promotedHere reports whether err is the gate's "not primary" at an
// epoch older than the namespace policies' (the broker's cache of the
// global store), which name this region the primary.
func (b *Broker) promotedHere(name topic.Name, err error) bool {
	var np *primary.NotPrimaryError
	if b.deps.Namespaces == nil || !errors.As(err, &np) {
		return false
	}
	pol, perr := b.deps.Namespaces.Policy(b.ctx, name.NamespaceName())
	if perr != nil {
		return false
	}
	f := pol.ForTopic(name).Failover
	return f.Primary == b.cfg.Cluster && f.Epoch > np.Epoch
}

// awaitPrimaryBack holds a client's lookup, at a region that is not the
// primary of name, while the primary region is gone from the global
// store (every broker of it dead or cut off for a lease TTL) or going
// (present, but none has renewed its lease for over a second), and for up
// to unreachableHold while its service URL refuses connections from here
// (a crashed broker does at once, before the store can tell): a failover
// is coming, by hand or automatically, or the primary comes back.
// Sending the client to a dead primary would cost it a failed
// connection, and its reconnection backoff would grow with every one,
// so that once a region takes over the client comes seconds late. It
// returns, true, once the policy names another primary (as this broker's
// gates see it) or the primary is present, renewing and reachable again;
// false at once when the primary is none of those, and after lookupHold
// or ctx when nothing changed.
func (b *Broker) awaitPrimaryBack(ctx context.Context, name topic.Name, pol NamespacePolicy, url string) bool {
	if b.deps.Primary == nil || b.deps.Namespaces == nil || name.Domain != topic.Persistent {
		return false
	}
	start := time.Now()
	gone := func() bool {
		p := pol.Failover.Primary
		if b.deps.Primary.Absent(p) || b.deps.Primary.Unrenewed(p) {
			return true
		}
		// Unreachable from here only: a hint, which the store confirms
		// (unrenewed) within the hold if the primary is dead; if it is
		// not, the client may reach it where this broker cannot.
		return time.Since(start) < unreachableHold && b.refused.refuses(url)
	}
	if !gone() {
		return false
	}
	ns, local := name.NamespaceName(), name.Base().Local
	_ = b.deps.Primary.Check(ns, local) // track the policy from now on
	ctx, cancel := context.WithTimeout(ctx, lookupHold)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		// A failover, as the namespace policies show it (the lookup
		// decides on them next).
		if cur, err := b.deps.Namespaces.Policy(ctx, ns); err == nil && cur.ForTopic(name).Failover.Epoch > pol.Failover.Epoch {
			return true
		}
		if !gone() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// unreachableHold bounds how long awaitPrimaryBack holds a lookup only
// because the primary's service URL refuses connections from here: about
// the fence lease's TTL, within which a dead primary is seen unrenewed.
const unreachableHold = 2 * time.Second

// refusals remembers, per host, whether connecting to it was refused or
// timed out (refusedFor), so that many lookups held at once cost one
// connection attempt.
type refusals struct {
	mu sync.Mutex
	m  map[string]refusal
}

type refusal struct {
	yes bool
	at  time.Time
}

const (
	refusedFor  = 100 * time.Millisecond
	dialTimeout = 250 * time.Millisecond
)

// refuses reports whether a TCP connection to the host of a broker
// service URL (pulsar:// or pulsar+ssl://, one host) fails now; false
// when the URL names no single host.
func (r *refusals) refuses(serviceURL string) bool {
	u, err := url.Parse(serviceURL)
	if err != nil || u.Host == "" || strings.Contains(u.Host, ",") {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.m[u.Host]; ok && time.Since(a.at) < refusedFor {
		return a.yes
	}
	c, err := net.DialTimeout("tcp", u.Host, dialTimeout)
	if err == nil {
		c.Close()
	}
	if r.m == nil {
		r.m = map[string]refusal{}
	}
	r.m[u.Host] = refusal{yes: err != nil, at: time.Now()}
	return err != nil
}

// lookupHold bounds awaitPrimaryBack: well within a client's operation
// timeout (30 s in pulsar-client-go).
const lookupHold = 10 * time.Second

// waitPrimary waits (within ctx) until this broker may write for name's
// namespace, also while its gate has not yet seen a promotion of this
// region that the namespace policies show (promotedHere); the error is
// ServiceNotReady saying why not.
func (b *Broker) waitPrimary(ctx context.Context, name topic.Name) error {
	if b.deps.Primary == nil || name.Domain != topic.Persistent {
		return nil
	}
	for {
		err := b.deps.Primary.Wait(ctx, name.NamespaceName(), name.Base().Local)
		if err == nil {
			return nil
		}
		if !b.promotedHere(name, err) {
			return fmt.Errorf("%w: %w", errkind.ErrServiceNotReady, err)
		}
		// The gate has not seen this region's promotion yet.
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", errkind.ErrServiceNotReady, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// countRefused counts a client request of operation op refused by the
// primary gate (MetricPrimaryRefused): an operator sees a primary that
// turns its own clients away, and a standby that clients still reach.
func (b *Broker) countRefused(op string) {
	b.metrics.primaryRefused.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("isobar.cluster", b.cfg.Cluster), attribute.String("isobar.operation", op)))
}

// checkPrimary is waitPrimary without waiting.
func (b *Broker) checkPrimary(name topic.Name) error {
	if b.deps.Primary == nil || name.Domain != topic.Persistent {
		return nil
	}
	if err := b.deps.Primary.Check(name.NamespaceName(), name.Base().Local); err != nil {
		return fmt.Errorf("%w: %w", errkind.ErrServiceNotReady, err)
	}
	return nil
}

// Demote sends the clients of namespace ns away from this broker (its
// producers and consumers are closed and reconnect through a new lookup,
// which leads to the primary) and, when to names the new primary, waits
// until every loaded topic of ns has replicated everything to it (within
// ctx). local, when not empty, limits it to the topic of ns with that base
// local name (all partitions of a partitioned topic). Replicator producers
// and replication cursors stay. Brokers call it through package primary
// when they stop writing for ns, or for one of its topics with its own
// failover policy.
func (b *Broker) Demote(ctx context.Context, ns, local, to string) {
	var topics []*Topic
	for _, t := range b.loadedTopics() {
		if t.name.NamespaceName() != ns || local != "" && (t.name.Domain != topic.Persistent || t.name.Base().Local != local) {
			continue
		}
		topics = append(topics, t)
		t.mu.Lock()
		var prods []*producer
		for _, p := range t.producers {
			if p.replFrom == "" {
				prods = append(prods, p)
			}
		}
		var subs []*subscription
		for name, s := range t.subs {
			if !strings.HasPrefix(name, replication.Prefix) {
				subs = append(subs, s)
			}
		}
		t.mu.Unlock()
		for _, p := range prods {
			p.c.closeProducer(p, true)
		}
		for _, s := range subs {
			s.disconnectAll()
		}
	}
	if to == "" {
		return
	}
	for _, t := range topics {
		if t.ml == nil || !slices.Contains(t.remotes(), to) {
			continue
		}
		for {
			c, err := t.ml.OpenCursor(ctx, replication.CursorName(to), mledger.Earliest)
			if err == nil && c.Backlog() == 0 {
				break
			}
			select {
			case <-ctx.Done():
				b.log.Warn("demoted topic not fully replicated to the new primary; its tail arrives late", "topic", t.name.String(), "primary", to)
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// LateProperty marks a message of an active-standby namespace that
// reached this region from a former primary after this region took over
// as primary: the old primary acknowledged it but had not replicated it
// when it failed. Its value is the epoch of the failover it arrived after.
// It is stored (late, never dropped) and counted (isobar.replication.late).
const LateProperty = "__ISOBAR_LATE_EPOCH"

// markEpoch records, durably, that this region stores own entries as
// the primary of the current epoch from the log's end on (epochFirsts),
// before the first of them is added: a restart then still knows which
// sequence ids each producer stored here in the epoch. Once per epoch
// and topic; nothing for an active-active topic or a standby.
func (t *Topic) markEpoch(ctx context.Context) error {
	f := t.failover()
	if f.Mode != policy.ActiveStandby || f.Primary != t.b.cfg.Cluster || f.Epoch <= 0 || t.ml == nil {
		return nil
	}
	t.mu.Lock()
	done, d := t.rs().epochs.marked(f.Epoch), t.dd.Load()
	var cur *mledger.Cursor
	if d != nil {
		cur = d.cur
	}
	t.mu.Unlock()
	if done || cur == nil {
		return nil
	}
	// Under dedupWrite, so a snapshot written meanwhile keeps the mark
	// (dedup.writeSnapshot puts the current one in).
	d.write.Lock()
	defer d.write.Unlock()
	t.mu.Lock()
	done = t.rs().epochs.marked(f.Epoch)
	t.mu.Unlock()
	if done {
		return nil
	}
	m := epochFirsts{mark: epochMark{epoch: f.Epoch, after: t.ml.LastConfirmed()}}
	props := cur.Properties()
	if props == nil {
		props = map[string]string{}
	}
	m.appendProps(props)
	if err := cur.SetProperties(ctx, props); err != nil {
		return fmt.Errorf("%w: topic %s: recording epoch %d in the de-duplication state: %w", errkind.ErrServiceNotReady, t.name, f.Epoch, err)
	}
	t.mu.Lock()
	t.rs().epochs.setMark(m.mark)
	t.mu.Unlock()
	return nil
}

// noteOwnSeq records, for an active-standby namespace's primary, the first
// sequence id a producer stored here in the current epoch: after an
// unplanned failover the producer resent from there what it had pending,
// so the old primary's late copies of those messages are duplicates.
// markEpoch ran before.
func (t *Topic) noteOwnSeq(producer string, seq int64) {
	f := t.failover()
	if f.Primary != t.b.cfg.Cluster {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rs().epochs.marked(f.Epoch) {
		t.rs().epochs.note(producer, seq)
	}
}

// resentHere reports whether a late entry of the old primary (first
// sequence id seq of producer) is one the producer also resent here after
// the failover: at or after the first sequence id it stored here in this
// epoch. Such an entry is dropped, not stored twice.
func (t *Topic) resentHere(o originSeq, first int64) bool {
	if o.producer == "" {
		return false
	}
	f := t.failover()
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.rs().epochs.firstIn(o.producer, f.Epoch)
	return ok && first >= s
}

// late says whether an entry replicated from src arrives late: this broker
// writes for its namespace as the primary of an epoch in which src is not
// the primary.
func (t *Topic) late(src string) bool {
	f := t.failover()
	return f.Mode == policy.ActiveStandby && src != f.Primary && f.Primary == t.b.cfg.Cluster && t.b.checkPrimary(t.name) == nil
}

// markLate returns entry, replicated from src, marked late when this
// broker writes for its namespace as the primary of an epoch in which src
// is not the primary.
func (t *Topic) markLate(src string, entry []byte, numMsgs int) []byte {
	if !t.late(src) {
		return entry
	}
	f := t.failover()
	meta, payload, err := wire.DecodeEntry(entry)
	if err != nil {
		return entry
	}
	k, v := LateProperty, strconv.FormatInt(f.Epoch, 10)
	meta.Properties = append(meta.Properties, &pb.KeyValue{Key: &k, Value: &v})
	// Clients read a batched message's properties from its own metadata
	// in the batch: mark each (an uncompressed batch; a compressed one
	// keeps the mark on the entry only, as the broker has no codecs).
	if meta.NumMessagesInBatch != nil && meta.GetCompression() == pb.CompressionType_NONE {
		if msgs, err := wire.DecodeBatch(payload, int(meta.GetNumMessagesInBatch())); err == nil {
			var nb []byte
			for _, m := range msgs {
				m.Metadata.Properties = append(m.Metadata.Properties, &pb.KeyValue{Key: &k, Value: &v})
				if nb, err = wire.AppendBatchMessage(nb, m.Metadata, m.Payload); err != nil {
					break
				}
			}
			if err == nil {
				payload = nb
				if meta.UncompressedSize != nil {
					meta.UncompressedSize = u32p(uint32(len(nb)))
				}
			}
		}
	}
	marked, err := wire.AppendEntry(nil, meta, payload)
	if err != nil {
		return entry
	}
	t.b.metrics.replLate.Add(context.Background(), int64(numMsgs), metric.WithAttributes(attribute.String("isobar.cluster", t.b.cfg.Cluster), attribute.String("isobar.source", src)))
	return marked
}

// failover is the topic's replication mode (its own, else its
// namespace's): as the fences last saw it, else as the policy said when
// the topic loaded.
func (t *Topic) failover() policy.Failover {
	if t.b.deps.Primary != nil {
		if f, ok := t.b.deps.Primary.Failover(t.name.NamespaceName(), t.name.Base().Local); ok {
			return f
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.policy.Failover
}

func u32p(v uint32) *uint32 { return &v }
