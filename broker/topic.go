package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/broker/txn"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Topic is a loaded topic: its managed ledger (nil for a non-persistent
// topic), producers and subscriptions.
type Topic struct {
	b    *Broker
	name topic.Name
	ml   *mledger.ManagedLedger
	// policy is shared with the namespace's other topics that have the
	// same (Broker.sharedPolicy) and never changed: setPolicy replaces it
	// whole. t.mu guards the pointer once the topic is loaded.
	policy *NamespacePolicy
	// flags are the topic's atomic flags (topicFlag).
	flags atomic.Uint32
	// closed and isGone are guarded by mu (here to share a word with
	// flags). isGone: unloaded and forgotten (markGone; two
	// unloads may race, a fenced topic's own and a bundle's); gone is
	// closed then, made when someone waits for it (goneCh).
	closed bool
	isGone bool
	// dedupOn: producers are de-duplicated (policy at load; t.mu
	// guards it, as the rest of dedup).
	dedupOn bool
	// mxFlags are the flags of its metrics share (mx; metricsindex.go).
	mxFlags uint8

	// mu guards the fields below.
	mu        sync.Mutex
	producers map[string]*producer     // by producer name (nil until one)
	waiting   []*producer              // WaitForExclusive producers, in arrival order
	subs      map[string]*subscription // nil until one
	gone      chan struct{}
	// dd is the de-duplication state (dedup.go), made when first used
	// (dedupState): an idle topic keeps none.
	dd atomic.Pointer[dedup]
	// rx is the replication and failover state, made when first used
	// (rs).
	rx *topicRepl
	// subActive is when each subscription last had a consumer come or
	// go (subscription expiration, maintenance.go); nil until one did.
	subActive atomic.Pointer[subActivity]

	// io counts messages received and dispatched (load reports, stats);
	// nil until the first (loadindex.go).
	io             atomic.Pointer[topicIO]
	lastPublish    atomic.Int64                    // when an entry was last stored, Unix ms (0: not since loaded)
	activeAt       atomic.Int64                    // when a producer or consumer last came or went, Unix ns (inactive.go)
	maxMessageSize atomic.Int64                    // NamespacePolicy.MaxMessageSize, read on every SEND
	maxUnacked     atomic.Int64                    // NamespacePolicy.MaxUnackedPerConsumer, read on every dispatch
	maxUnackedSub  atomic.Int64                    // NamespacePolicy.MaxUnackedPerSubscription, likewise
	delay          atomic.Pointer[delayPolicy]     // Broker.delayPolicyOf, read on every SEND and dispatch round
	rl             atomic.Pointer[topicRates]      // NamespacePolicy.Rates and their limiters (rates.go); nil until it has some
	sync           atomic.Pointer[subSync]         // subscription state across regions (substate.go); nil until used
	cmp            atomic.Pointer[topicCompaction] // compaction and the compacted view (compaction.go); nil until used
	srepl          atomic.Pointer[syncRepl]        // synchronous replication (syncrepl.go); nil unless the policy asks for it
	tx             atomic.Pointer[topicTxn]        // the transaction buffer (transactions.go); nil until a transactional entry
	attrs          metric.MeasurementOption        // of its metrics
	created        int64                           // when loaded here, Unix ns (loadedAt)
	hash           uint32                          // topic.Hash of its name: its bundle (loadindex.go)
	// mx is its share in the metrics index's sums, with mxFlags
	// (metricsindex.go; Broker.metricsIdx.mu guards both).
	mx topicShare
}

func newTopic(b *Broker, name topic.Name, ml *mledger.ManagedLedger, pol NamespacePolicy) *Topic {
	t := &Topic{
		b: b, name: name, ml: ml, policy: b.sharedPolicy(name.NamespaceName(), pol),
		created: b.deps.Now().UnixNano(),
		hash:    topic.Hash(name),
	}
	t.storeLimits(pol)
	t.setRates(pol.Rates)
	t.attrs = b.topicAttrs(t)
	return t
}

// topicFlag is a bit of Topic.flags.
type topicFlag uint32

const (
	flFenceUnload   topicFlag = 1 << iota // a fenced add asked for the unload
	flReported                            // this broker reported the partition idle (inactive.go)
	flReportCleared                       // a report of the partition was cleared since the load (inactive.go)
	flEncryption                          // NamespacePolicy.EncryptionRequired, read on every SEND
	flQuotaExceeded                       // a backlog is over its quota (producer policies)
	flTrafficListed                       // in the broker's traffic list (loadindex.go)
	flMaintListed                         // listed for the next maintenance pass (maintindex.go)
)

// flag reports whether f is set.
func (t *Topic) flag(f topicFlag) bool { return topicFlag(t.flags.Load())&f != 0 }

// setFlag sets f to v.
func (t *Topic) setFlag(f topicFlag, v bool) { t.swapFlag(f, v) }

// swapFlag sets f to v and reports whether it was set.
func (t *Topic) swapFlag(f topicFlag, v bool) bool {
	var old uint32
	if v {
		old = t.flags.Or(uint32(f))
	} else {
		old = t.flags.And(^uint32(f))
	}
	return topicFlag(old)&f != 0
}

// npLast is the id of the last message of a non-persistent topic, -1
// before the first.
func (t *Topic) npLast() int64 {
	if c := t.io.Load(); c != nil {
		return c.npIDs.Load() - 1
	}
	return -1
}

// topicRepl is a topic's replication and failover state (t.mu guards
// it).
type topicRepl struct {
	replIn  map[string]*replIn  // by source cluster (nil until one)
	replOut map[string]*replOut // by remote cluster (nil until one)
	lastOwn Position            // this region's last own entry (noPosition: not known)
	epochs  epochFirsts         // per producer, its first sequence id stored here as the primary of the last epoch (epochfirst.go)
}

// rs returns t's replication and failover state, making it when the
// topic has none yet: an idle topic keeps none. t.mu held.
func (t *Topic) rs() *topicRepl {
	if t.rx == nil {
		t.rx = &topicRepl{lastOwn: noPosition}
	}
	return t.rx
}

// goneCh returns a channel closed once t is unloaded and forgotten.
func (t *Topic) goneCh() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone == nil {
		t.gone = make(chan struct{})
		if t.isGone {
			close(t.gone)
		}
	}
	return t.gone
}

// markGone records that t is unloaded and forgotten (goneCh).
func (t *Topic) markGone() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.isGone {
		return
	}
	t.isGone = true
	if t.gone != nil {
		close(t.gone)
	}
}

// loadedAt is when the topic was loaded here.
func (t *Topic) loadedAt() time.Time { return time.Unix(0, t.created) }

// storeLimits keeps the values of pol that sends and dispatch read
// without t.mu.
func (t *Topic) storeLimits(pol NamespacePolicy) {
	t.maxMessageSize.Store(int64(pol.MaxMessageSize))
	t.maxUnacked.Store(int64(pol.MaxUnackedPerConsumer))
	t.maxUnackedSub.Store(int64(pol.MaxUnackedPerSubscription))
	t.delay.Store(t.b.delayPolicyOf(pol))
	t.setFlag(flEncryption, pol.EncryptionRequired)
}

// Name is the topic's name.
func (t *Topic) Name() topic.Name { return t.name }

func (t *Topic) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// load sets the retention, restores the de-duplication state when
// de-duplication is on or the namespace is replicated (replicated entries
// are always de-duplicated by source position), and creates the
// replication cursors.
func (t *Topic) load(ctx context.Context) error {
	t.ml.SetRetention(t.policy.Retention)
	t.ml.SetAffinity(t.policy.Affinity)
	t.ml.SetMarkDeleteRate(markDeleteRate(*t.policy))
	// Active-standby namespaces always de-duplicate: producers resend
	// across a failover (docs/failover.md).
	t.dedupOn = t.policy.Deduplication || t.policy.Failover.Mode == policy.ActiveStandby
	if t.dedupOn || len(t.remotes()) > 0 {
		if err := t.dedupState().ensureLoaded(ctx); err != nil {
			return err
		}
	}
	if err := t.syncReplCursors(ctx); err != nil {
		return err
	}
	if err := t.loadTxnBuffer(ctx); err != nil {
		return err
	}
	t.applySyncPolicy(ctx)
	return nil
}

// close closes the topic: producers and consumers are closed (told to
// reconnect when notify) and the managed ledger is closed.
func (t *Topic) close(ctx context.Context, notify bool) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	if d := t.dd.Load(); d != nil {
		d.stopTimerLocked()
	}
	t.stopSync()
	prods := make([]*producer, 0, len(t.producers)+len(t.waiting))
	for _, p := range t.producers {
		prods = append(prods, p)
	}
	prods = append(prods, t.waiting...)
	t.waiting = nil
	subs := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	for _, p := range prods {
		p.c.closeProducer(p, notify)
	}
	for _, s := range subs {
		s.closeAll(notify)
	}
	if t.ml == nil {
		return nil
	}
	t.stopCompaction()
	err := t.ml.Close(ctx)
	if errors.Is(err, mledger.ErrFenced) {
		err = nil // another owner took over: nothing of ours to close
	}
	return err
}

// addProducer registers p, enforcing unique names and access modes.
func (t *Topic) addProducer(p *producer) (lastSeq int64, err error) {
	defer t.b.listMetrics(t) // its producers are counted again (after t.mu)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, fmt.Errorf("%w: topic %s is closing", ErrNotOwner, t.name)
	}
	if t.ml != nil && t.ml.Terminated() {
		return 0, fmt.Errorf("%w: topic %s was terminated", errkind.ErrTopicTerminated, t.name)
	}
	if err := t.quotaErrLocked(); err != nil {
		return 0, err
	}
	if _, ok := t.producers[p.name]; ok {
		return 0, fmt.Errorf("%w: producer with name '%s' is already connected to topic %s", errkind.ErrProducerBusy, p.name, t.name)
	}
	for _, o := range t.producers {
		conflict := o.access != pb.ProducerAccessMode_Shared || p.access != pb.ProducerAccessMode_Shared
		switch {
		case conflict && p.access == pb.ProducerAccessMode_WaitForExclusive:
			// Queued: it gets the topic when the others are gone.
			t.waiting = append(t.waiting, p)
			return 0, errMustWait
		case !conflict || p.access == pb.ProducerAccessMode_ExclusiveWithFencing:
		case p.access == pb.ProducerAccessMode_Shared:
			// As Pulsar: a shared producer meets an exclusive one.
			return 0, fmt.Errorf("%w: topic %s has an exclusive producer %s; producer %s is shared",
				errkind.ErrProducerBusy, t.name, o.name, p.name)
		default:
			// An exclusive producer meets any other.
			return 0, fmt.Errorf("%w: topic %s already has producer %s (access mode %v); producer %s wants access mode %v",
				errkind.ErrProducerFenced, t.name, o.name, o.access, p.name, p.access)
		}
	}
	if p.access == pb.ProducerAccessMode_ExclusiveWithFencing {
		for name, o := range t.producers {
			delete(t.producers, name)
			go o.c.closeProducer(o, true)
		}
	}
	if max := t.maxProducersLocked(); max > 0 && p.replFrom == "" {
		// Other regions' replicators are not counted, nor limited.
		n := 0
		for _, o := range t.producers {
			if o.replFrom == "" {
				n++
			}
		}
		if n >= max {
			return 0, fmt.Errorf("%w: topic %s has reached its limit of %d producers (maxProducers)", ErrTooManyProducers, t.name, max)
		}
	}
	if t.producers == nil {
		t.producers = map[string]*producer{}
	}
	t.producers[p.name] = p
	lastSeq = -1
	if d := t.dd.Load(); t.dedupOn && d != nil && d.pushed != nil {
		if s, ok := d.pushed[p.name]; ok {
			lastSeq = s
		}
	}
	return lastSeq, nil
}

// hasProducer reports whether p is attached to t (not waiting, not
// removed).
func (t *Topic) hasProducer(p *producer) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.producers[p.name] == p
}

func (t *Topic) removeProducer(p *producer) {
	defer t.b.listMetrics(t) // its producers are counted again
	t.touch()
	t.mu.Lock()
	if t.producers[p.name] == p {
		delete(t.producers, p.name)
	}
	t.waiting = slices.DeleteFunc(t.waiting, func(w *producer) bool { return w == p })
	// The first producer waiting for exclusive access gets the topic once
	// no other producer is left.
	var next *producer
	if len(t.producers) == 0 && len(t.waiting) > 0 && !t.closed {
		next, t.waiting = t.waiting[0], t.waiting[1:]
		if t.producers == nil {
			t.producers = map[string]*producer{}
		}
		t.producers[next.name] = next
	}
	lastSeq := int64(-1)
	if d := t.dd.Load(); next != nil && t.dedupOn && d != nil && d.pushed != nil {
		if v, ok := d.pushed[next.name]; ok {
			lastSeq = v
		}
	}
	t.mu.Unlock()
	if next != nil {
		next.c.producerReady(next, lastSeq)
	}
}

// errMustWait: a WaitForExclusive producer was queued.
var errMustWait = errors.New("broker: producer waits for exclusive access")

// publish appends one SEND's entry. done gets the position, or ok false
// with no error for a duplicate that was dropped.
func (t *Topic) publish(ctx context.Context, p *producer, seq, highest uint64, numMsgs int, dedupable bool, entry []byte, done func(mledger.Position, bool, error)) {
	t.countIn(int64(numMsgs), int64(len(entry)))
	if t.ml == nil {
		id := t.ioCounters().npIDs.Add(1) - 1
		pos := mledger.Position{Ledger: 0, Entry: id}
		t.dispatchNonPersistent(pos, entry)
		done(pos, true, nil)
		return
	}
	if err := t.quotaErr(false); err != nil {
		done(mledger.Position{}, false, err)
		return
	}
	top := int64(max(seq, highest))
	standby := t.dedupCrossRegion()
	t.mu.Lock()
	d := t.dd.Load()
	dedup := (t.dedupOn || standby) && d != nil && d.pushed != nil && dedupable
	t.mu.Unlock()
	if standby {
		if err := t.markEpoch(ctx); err != nil {
			done(mledger.Position{}, false, err)
			return
		}
	}
	if dedup {
		t.mu.Lock()
		last, ok := d.pushed[p.name]
		if ok && int64(seq) <= last {
			t.mu.Unlock()
			// Its first copy may still wait for the other regions.
			t.syncHold(mledger.Position{}, true, func() { done(mledger.Position{}, false, nil) })
			return
		}
		d.pushed[p.name] = top
		t.mu.Unlock()
	}
	if standby {
		// Before the add completes, so that a late copy of this message
		// from the old primary, arriving meanwhile, is dropped; should the
		// add fail, the producer resends it.
		t.noteOwnSeq(p.name, int64(seq))
	}
	t.ml.AddEntryAsync(ctx, entry, func(pos mledger.Position, err error) {
		if err == nil {
			t.noteOwn(pos)
		}
		if err == nil && dedup {
			d.confirmStored(p.name, top, pos)
		} else if dl := t.dd.Load(); err == nil && dl != nil && dl.loaded() {
			// Not de-duplicated, but counted: the snapshot cursor moves
			// on, so it never holds back retention.
			dl.stored(pos)
		}
		if err != nil && dedup {
			t.mu.Lock()
			if d.pushed[p.name] == top {
				d.pushed[p.name] = d.confirmed[p.name]
			}
			t.mu.Unlock()
		}
		t.addFailed(err)
		if err != nil {
			done(pos, true, err)
			return
		}
		t.syncHold(pos, false, func() { done(pos, true, nil) })
	})
}

// addFailed unloads the topic, in the background, when an add failed
// because its managed ledger was fenced: another broker opened it (it took
// the bundle over), so this one must stop serving it at once: its clients
// reconnect and find the owner. Left loaded, every later add would fail
// the same way, for good.
func (t *Topic) addFailed(err error) {
	if err == nil || !errors.Is(err, mledger.ErrFenced) || t.swapFlag(flFenceUnload, true) {
		return
	}
	t.b.log.Warn("topic fenced by another owner; unloading it", "topic", t.name.String(), "err", err)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		t.b.unloadTopic(ctx, t)
	}()
}

// subscription returns the named subscription, creating it with create.
func (t *Topic) subscription(name string, create func() (*subscription, error)) (*subscription, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fmt.Errorf("%w: topic %s is closing", ErrNotOwner, t.name)
	}
	if s := t.subs[name]; s != nil {
		return s, nil
	}
	if create == nil {
		return nil, fmt.Errorf("%w: %s on %s", ErrSubNotFound, name, t.name)
	}
	if max := t.policy.MaxSubscriptions; max > 0 && !strings.HasPrefix(name, ReservedPrefix) {
		n := 0
		for other := range t.subs {
			if !strings.HasPrefix(other, ReservedPrefix) {
				n++
			}
		}
		if n >= max {
			return nil, fmt.Errorf("%w: topic %s has reached its limit of %d subscriptions (maxSubscriptionsPerTopic)", ErrTooManySubscriptions, t.name, max)
		}
	}
	s, err := create()
	if err != nil {
		return nil, err
	}
	if t.subs == nil {
		t.subs = map[string]*subscription{}
	}
	t.subs[name] = s
	return s, nil
}

// consumerLimits are the topic's limits on consumers: of the whole
// topic (the broker's own subscriptions not counted, nor consumers of
// subscription except), and of one subscription; the number of the
// former already attached.
func (t *Topic) consumerLimits(except *subscription) (maxTopic, maxSub, onTopic int) {
	t.mu.Lock()
	maxTopic, maxSub = t.maxConsumersLocked(), t.maxSubConsumersLocked()
	var subs []*subscription
	if maxTopic > 0 {
		for name, s := range t.subs {
			if s != except && !strings.HasPrefix(name, ReservedPrefix) {
				subs = append(subs, s)
			}
		}
	}
	t.mu.Unlock()
	for _, s := range subs {
		s.mu.Lock()
		onTopic += len(s.consumers)
		s.mu.Unlock()
	}
	return maxTopic, maxSub, onTopic
}

func (t *Topic) removeSubscription(s *subscription) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subs[s.name] == s {
		delete(t.subs, s.name)
	}
}

// dispatchNonPersistent hands a message of a non-persistent topic to one
// consumer of each subscription that has a permit; it is dropped for the
// others, as in Pulsar.
func (t *Topic) dispatchNonPersistent(pos mledger.Position, entry []byte) {
	t.mu.Lock()
	subs := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	for _, s := range subs {
		s.offerNonPersistent(pos, entry)
	}
}

// lastMarkersPassed bounds the transaction markers lastMessageID passes
// over at the end of the log.
const lastMarkersPassed = 256

// lastMessageID returns the last entry's position and, for a batch, the
// index of its last message (-1 otherwise). Transaction markers at the
// end of the log (up to lastMarkersPassed) are passed over, as Pulsar
// does: they are never delivered, and a reader told that one is the last
// would wait for it (HasNext true, Next never answered). A log of
// markers only is answered as an empty one.
func (t *Topic) lastMessageID(ctx context.Context) (mledger.Position, int32, error) {
	if t.ml == nil {
		return mledger.Position{Ledger: 0, Entry: t.npLast()}, -1, nil
	}
	last := t.ml.LastConfirmed()
	if last.Entry < 0 {
		return last, -1, nil
	}
	p := last
	for range lastMarkersPassed {
		es, _, err := t.ml.Read(ctx, p, 1)
		if err != nil || len(es) == 0 {
			return p, -1, err
		}
		meta, _, err := wire.DecodeEntry(es[0].Data)
		if err != nil {
			return p, -1, nil
		}
		if !txn.IsMarker(meta.GetMarkerType()) {
			if meta.NumMessagesInBatch != nil {
				return p, meta.GetNumMessagesInBatch() - 1, nil
			}
			return p, -1, nil
		}
		prev, ok := t.ml.Prev(p)
		if !ok {
			return mledger.Position{Ledger: p.Ledger, Entry: -1}, -1, nil
		}
		p = prev
	}
	return p, -1, nil
}

// terminate ends the topic (Pulsar's terminate): the messages already
// sent are stored, later ones refused; its producers are closed (they
// reconnect and are refused with TopicTerminatedError, so the client
// closes them), and consumers are told when they have read everything. It
// returns the last message's position.
func (t *Topic) terminate(ctx context.Context) (mledger.Position, error) {
	if t.ml == nil {
		return mledger.Position{}, fmt.Errorf("%w: a non-persistent topic cannot be terminated", errkind.ErrNotAllowed)
	}
	last, err := t.ml.Terminate(ctx)
	if err != nil {
		return mledger.Position{}, err
	}
	t.mu.Lock()
	prods := make([]*producer, 0, len(t.producers)+len(t.waiting))
	for _, p := range t.producers {
		prods = append(prods, p)
	}
	prods = append(prods, t.waiting...)
	subs := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	for _, p := range prods {
		p.c.closeProducer(p, true)
	}
	for _, s := range subs {
		s.kick() // a caught-up dispatcher tells its consumers the end
	}
	return last, nil
}
