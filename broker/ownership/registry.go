package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// Errors returned by the registry. Those a client can meet are of one kind
// of errkind's table: ServiceNotReady (HTTP 503, retriable: look the
// topic up again), except ErrInvalidBundle (PreconditionFailed, 412).
// ErrIDInUse stops the broker's start and has no kind.
var (
	ErrClosed        = errkind.Sentinel(errkind.ErrServiceNotReady, "ownership: registry closed")
	ErrNotRegistered = errkind.Sentinel(errkind.ErrServiceNotReady, "ownership: broker not registered (lease lost; re-registering)")
	ErrNoBrokers     = errkind.Sentinel(errkind.ErrServiceNotReady, "ownership: no live broker to place the bundle on")
	ErrIDInUse       = errors.New("ownership: another live broker holds this id")
	ErrNotOwned      = errkind.Sentinel(errkind.ErrServiceNotReady, "ownership: bundle not owned by this broker")
	ErrInvalidBundle = errkind.Sentinel(errkind.ErrPreconditionFailed, "ownership: invalid bundle")
	ErrContended     = errkind.Sentinel(errkind.ErrServiceNotReady, "ownership: bundle ownership keeps changing")
)

// maxLookupTries bounds how often Lookup re-reads a bundle whose ownership
// changes under it (a lost race whose winner vanished at once).
const maxLookupTries = 8

// OwnedBundle is a bundle this broker owns.
type OwnedBundle struct {
	Namespace string
	Bundle    topic.Bundle
	Acquired  time.Time
}

// owned is the registry's record of one owned bundle.
type owned struct {
	ns       string
	b        topic.Bundle
	lease    *metastore.Lease // the lease the key was created under
	rev      int64            // the key's ModRevision when we created it
	acquired time.Time
	// releasing is set while Release deletes the key: Owns is false and
	// changes to the key are not losses.
	releasing bool
}

// Registry registers this broker in its region and tracks the bundles it
// owns. It is safe for concurrent use.
type Registry struct {
	meta      metastore.Meta
	logger    *slog.Logger
	now       func() time.Time
	onLost    func(ns string, b topic.Bundle)
	affinity  func(ctx context.Context, ns string) ([]string, error)
	ttl       time.Duration
	loadCfg   LoadReportConfig
	self      BrokerInfo // Started set, Load unused
	selfKey   string
	ownPrefix string
	brkPrefix string
	ordPrefix string

	cancel    context.CancelFunc
	done      chan struct{} // closed when run returns
	loadDirty chan struct{} // capacity 1: coalesced requests to publish the load
	fireMu    sync.Mutex    // OnLost calls, one at a time
	// Split's delayed deletions of parent bundle keys: stop closes
	// retireStop and waits for them.
	retireWG   sync.WaitGroup
	retireStop chan struct{}

	mu         sync.Mutex
	reg        *metastore.Registration // the broker's registration; its lease holds the ownership keys
	owned      map[string]*owned       // by ownership key
	brokers    map[string]BrokerInfo   // live brokers by id, kept by the watch
	brokersRev int64                   // watch events at or below it are already in brokers
	closed     bool
	loadSrc    func() LoadReport // SetLoadSource
	report     *LoadReport       // the last sample
	pub        *LoadReport       // the sample published in the registration
	pubAt      time.Time
}

// New builds a registry of the broker cfg.Self; Start registers it.
func New(cfg Config, deps Deps) (*Registry, error) {
	if err := errors.Join(cfg.Validate(), deps.validate()); err != nil {
		return nil, err
	}
	r := &Registry{
		meta:       deps.Meta,
		logger:     deps.Logger,
		now:        deps.Now,
		onLost:     deps.OnLost,
		affinity:   deps.AntiAffinity,
		ttl:        cfg.LeaseTTL,
		loadCfg:    cfg.LoadReports.withDefaults(),
		self:       cfg.Self,
		selfKey:    BrokerKey(cfg.Region, cfg.Self.ID),
		ownPrefix:  OwnershipPrefix(cfg.Region),
		brkPrefix:  BrokersPrefix(cfg.Region),
		ordPrefix:  OrdersPrefix(cfg.Region),
		done:       make(chan struct{}),
		loadDirty:  make(chan struct{}, 1),
		retireStop: make(chan struct{}),
		owned:      make(map[string]*owned),
		brokers:    make(map[string]BrokerInfo),
	}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.ttl == 0 {
		r.ttl = DefaultLeaseTTL
	}
	return r, nil
}

// Start registers the broker under a new lease and starts watching the
// region's brokers and this broker's ownership keys.
//
// A registration of the same id that is still in etcd is handled so:
// when it carries the same serviceUrl and httpUrl and started no later
// than this Registry, it is this broker's previous life (a crash leaves its
// lease running for up to a TTL), and Start revokes its lease at once,
// which also frees every bundle the previous life owned. Otherwise another
// broker holds the id and Start waits for that registration to go away, up
// to 2×LeaseTTL+5s or until ctx ends, and then fails with ErrIDInUse.
func (r *Registry) Start(ctx context.Context) error {
	r.self.Started = r.now()
	r.self.Load = 0

	reg, err := metastore.Register(ctx, r.meta, metastore.RegisterConfig{
		Key:      r.selfKey,
		Value:    r.registration,
		TTL:      r.ttl,
		Existing: r.judgeRegistration,
		Wait:     2*r.ttl + 5*time.Second,
		OnLost:   r.leaseLost,
		Logger:   r.logger,
	})
	if err != nil {
		return r.registerErr(err)
	}
	r.mu.Lock()
	r.reg = reg
	lease := r.leaseLocked()
	r.mu.Unlock()
	rev, err := r.listBrokers(ctx)
	if err != nil {
		rctx, cancel := context.WithTimeout(context.Background(), r.ttl)
		reg.Close(rctx)
		cancel()
		return err
	}
	dctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	ownCh := r.meta.Watch(dctx, r.ownPrefix, rev+1)
	brkCh := r.meta.Watch(dctx, r.brkPrefix, rev+1)
	go r.run(dctx, ownCh, brkCh)
	if lease != nil {
		r.logger.Info("broker registered", "lease", lease.ID(), "ttl", r.ttl)
	}
	return nil
}

// Self is this broker's registration as configured.
func (r *Registry) Self() BrokerInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.self
}

// registration is the broker's registration as it is now: its
// configuration, the draining mark and the number of bundles it owns.
func (r *Registry) registration() ([]byte, error) {
	r.mu.Lock()
	info := r.self
	info.Load = r.ownedCountLocked()
	info.Report = r.pub
	r.mu.Unlock()
	return json.Marshal(info)
}

// judgeRegistration decides about a live registration of this broker's
// id that this Registry did not make: this broker's previous life is
// taken over at once (see Start); any other is waited for.
func (r *Registry) judgeRegistration(value []byte) metastore.Verdict {
	var prev BrokerInfo
	if json.Unmarshal(value, &prev) == nil && r.previousLife(prev) {
		return metastore.TakeOver
	}
	return metastore.WaitGone
}

// registerErr turns a registration held by another broker into ErrIDInUse.
func (r *Registry) registerErr(err error) error {
	var taken *metastore.TakenError
	if !errors.As(err, &taken) {
		return fmt.Errorf("ownership: register %s: %w", r.self.ID, err)
	}
	var prev BrokerInfo
	json.Unmarshal(taken.Value, &prev)
	return fmt.Errorf("%w: %s is registered as %q: %w", ErrIDInUse, r.self.ID, prev.ServiceURL, err)
}

// previousLife reports whether prev, a registration under our id, is this
// broker's earlier incarnation.
func (r *Registry) previousLife(prev BrokerInfo) bool {
	return prev.ID == r.self.ID && prev.ServiceURL == r.self.ServiceURL &&
		prev.HTTPURL == r.self.HTTPURL && prev.ServiceURLTLS == r.self.ServiceURLTLS &&
		prev.HTTPURLTLS == r.self.HTTPURLTLS && !prev.Started.After(r.self.Started)
}

// leaseLocked is the lease of the registration now; nil while not
// registered. r.mu must be held.
func (r *Registry) leaseLocked() *metastore.Lease {
	if r.reg == nil || r.closed {
		return nil
	}
	return r.reg.Lease()
}

// listBrokers replaces the broker cache with etcd's view and returns the
// revision it was read at.
func (r *Registry) listBrokers(ctx context.Context) (int64, error) {
	l, err := r.meta.ListRev(ctx, r.brkPrefix)
	if err != nil {
		return 0, fmt.Errorf("ownership: list brokers: %w", err)
	}
	m := make(map[string]BrokerInfo, len(l.KVs))
	for _, kv := range l.KVs {
		var info BrokerInfo
		if err := json.Unmarshal(kv.Value, &info); err != nil {
			r.logger.Warn("ignoring malformed broker registration", "key", kv.Key, "err", err)
			continue
		}
		m[strings.TrimPrefix(kv.Key, r.brkPrefix)] = info
	}
	r.mu.Lock()
	r.brokers, r.brokersRev = m, l.Rev
	r.mu.Unlock()
	return l.Rev, nil
}

// Lookup returns the owner of bundle b of namespace ns ("tenant/namespace").
// An unowned bundle is placed on a live broker by Place; when that is this
// broker, or authoritative is set (the client was redirected here by the
// broker placement chose), this broker acquires the bundle, and if another
// broker wins the race Lookup returns the winner. When placement chooses
// another broker and authoritative is not set, Lookup returns that broker
// without acquiring: the client will ask it with authoritative set.
func (r *Registry) Lookup(ctx context.Context, ns string, b topic.Bundle, authoritative bool) (BrokerInfo, error) {
	bk, err := bundleKey(ns, b)
	if err != nil {
		return BrokerInfo{}, err
	}
	key := r.ownPrefix + bk
	for try := 0; try < maxLookupTries; try++ {
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if closed {
			return BrokerInfo{}, ErrClosed
		}
		owner, found, err := r.readOwner(ctx, key, ns, b)
		if err != nil {
			return BrokerInfo{}, err
		}
		if found {
			return owner, nil
		}
		lease, cands := r.candidates()
		order, orderRev := r.readOrder(ctx, bk)
		id, cands := Destination(order, cands)
		ok := id != ""
		if !ok {
			r.countAntiAffinity(ctx, ns, cands)
			id, ok = Place(bk, cands)
		}
		if !ok {
			return BrokerInfo{}, fmt.Errorf("%w: %s", ErrNoBrokers, bk)
		}
		r.mu.Lock()
		draining := r.self.Draining
		r.mu.Unlock()
		if id != r.self.ID && (!authoritative || draining) {
			info, live, err := r.liveBroker(ctx, id)
			if err != nil {
				return BrokerInfo{}, err
			}
			if live {
				return info, nil
			}
			continue // it died: place again without it
		}
		if lease == nil {
			return BrokerInfo{}, fmt.Errorf("lookup %s: %w", bk, ErrNotRegistered)
		}
		won, err := r.acquire(ctx, lease, key, ns, b)
		if err != nil {
			return BrokerInfo{}, fmt.Errorf("lookup %s: %w", bk, err)
		}
		if won {
			if order != nil && order.Op == OrderUnload {
				// The move is done: the order has served.
				if err := r.meta.DeleteIf(ctx, r.ordPrefix+bk, orderRev); err != nil && !errors.Is(err, metastore.ErrConflict) {
					r.logger.Warn("deleting a served unload order failed; the leader deletes it later", "bundle", bk, "err", err)
				}
			}
			return r.self, nil
		}
	}
	return BrokerInfo{}, fmt.Errorf("%w: %s", ErrContended, bk)
}

// Owner returns the owner of bundle b of ns without placing it: found
// false when no broker owns it.
func (r *Registry) Owner(ctx context.Context, ns string, b topic.Bundle) (BrokerInfo, bool, error) {
	bk, err := bundleKey(ns, b)
	if err != nil {
		return BrokerInfo{}, false, err
	}
	return r.readOwner(ctx, r.ownPrefix+bk, ns, b)
}

// readOwner reads the ownership key. A key of ours under the current lease
// that the registry does not know (a Create whose answer was lost) is
// adopted; a key of ours under a lease we lost is deleted and reported as
// absent.
func (r *Registry) readOwner(ctx context.Context, key, ns string, b topic.Bundle) (BrokerInfo, bool, error) {
	kv, err := r.meta.Get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return BrokerInfo{}, false, nil
	}
	if err != nil {
		return BrokerInfo{}, false, fmt.Errorf("ownership: read %s: %w", key, err)
	}
	var o Ownership
	if err := json.Unmarshal(kv.Value, &o); err != nil {
		return BrokerInfo{}, false, fmt.Errorf("ownership: %s holds a malformed record: %w", key, err)
	}
	if o.Broker != r.self.ID {
		return BrokerInfo{ID: o.Broker, ServiceURL: o.ServiceURL, HTTPURL: o.HTTPURL, ServiceURLTLS: o.ServiceURLTLS, HTTPURLTLS: o.HTTPURLTLS}, true, nil
	}
	r.mu.Lock()
	cur := r.leaseLocked()
	if cur != nil && kv.Lease == cur.ID() {
		if _, ok := r.owned[key]; !ok {
			r.owned[key] = &owned{ns: ns, b: b, lease: cur, rev: kv.Rev, acquired: o.Acquired}
			r.markLoadDirty()
		}
		r.mu.Unlock()
		return r.self, true, nil
	}
	r.mu.Unlock()
	r.logger.Info("deleting stale ownership of a lost lease", "key", key, "lease", kv.Lease)
	if err := r.meta.DeleteIf(ctx, key, kv.Rev); err != nil && !errors.Is(err, metastore.ErrConflict) {
		return BrokerInfo{}, false, err
	}
	return BrokerInfo{}, false, nil
}

// candidates returns the current lease (nil when not registered) and the
// brokers placement may choose: the cached live brokers with their
// published load and, when registered, this broker with its exact bundle
// count and last sample. A candidate's Load is its placement score:
// owned bundles plus LoadReport.Usage.
func (r *Registry) candidates() (*metastore.Lease, []Candidate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lease := r.leaseLocked()
	cands := make([]Candidate, 0, len(r.brokers)+1)
	for id, info := range r.brokers {
		if id != r.self.ID && !info.Draining {
			cands = append(cands, Candidate{ID: id, Load: info.Load + info.Report.Usage()})
		}
	}
	if lease != nil && !r.self.Draining {
		cands = append(cands, Candidate{ID: r.self.ID, Load: r.ownedCountLocked() + r.report.Usage()})
	}
	return lease, cands
}

// countAntiAffinity sets each candidate's AntiAffinity: how many other
// namespaces of ns's anti-affinity group it owns bundles of, read from
// their ownership keys. When the group or the keys cannot be read the
// counts stay zero (placement by load alone) and the failure is logged:
// a lookup does not fail for a preference.
func (r *Registry) countAntiAffinity(ctx context.Context, ns string, cands []Candidate) {
	if r.affinity == nil {
		return
	}
	peers, err := r.affinity(ctx, ns)
	if err != nil {
		r.logger.Warn("anti-affinity group unknown; placing by load", "namespace", ns, "err", err)
		return
	}
	owned := map[string]map[string]bool{} // broker id -> namespaces of the group it owns bundles of
	for _, p := range peers {
		if p == ns {
			continue
		}
		kvs, err := r.meta.List(ctx, r.ownPrefix+p+"/")
		if err != nil {
			r.logger.Warn("anti-affinity: cannot read the owners of a namespace of the group; placing by load", "namespace", ns, "other", p, "err", err)
			return
		}
		for _, kv := range kvs {
			var o Ownership
			if json.Unmarshal(kv.Value, &o) != nil {
				continue
			}
			if owned[o.Broker] == nil {
				owned[o.Broker] = map[string]bool{}
			}
			owned[o.Broker][p] = true
		}
	}
	for i := range cands {
		cands[i].AntiAffinity = len(owned[cands[i].ID])
	}
}

// liveBroker confirms with etcd that broker id is registered (the cache
// may lag a death by a moment) and returns its registration; a dead broker
// is dropped from the cache.
func (r *Registry) liveBroker(ctx context.Context, id string) (BrokerInfo, bool, error) {
	kv, err := r.meta.Get(ctx, r.brkPrefix+id)
	if errors.Is(err, metastore.ErrNotFound) {
		r.mu.Lock()
		delete(r.brokers, id)
		r.mu.Unlock()
		return BrokerInfo{}, false, nil
	}
	if err != nil {
		return BrokerInfo{}, false, fmt.Errorf("ownership: read broker %s: %w", id, err)
	}
	var info BrokerInfo
	if err := json.Unmarshal(kv.Value, &info); err != nil {
		return BrokerInfo{}, false, fmt.Errorf("ownership: broker %s has a malformed registration: %w", id, err)
	}
	return info, true, nil
}

// acquire creates the ownership key under lease; false when it exists.
func (r *Registry) acquire(ctx context.Context, lease *metastore.Lease, key, ns string, b topic.Bundle) (bool, error) {
	now := r.now()
	val, _ := json.Marshal(Ownership{Broker: r.self.ID, ServiceURL: r.self.ServiceURL, HTTPURL: r.self.HTTPURL,
		ServiceURLTLS: r.self.ServiceURLTLS, HTTPURLTLS: r.self.HTTPURLTLS, Acquired: now})
	rev, err := lease.Create(ctx, key, val)
	if errors.Is(err, metastore.ErrExists) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return false, ErrClosed // the key goes with the lease Close revokes
	case r.leaseLocked() != lease:
		return false, ErrNotRegistered // the key goes with the lost lease
	}
	if _, ok := r.owned[key]; !ok {
		r.owned[key] = &owned{ns: ns, b: b, lease: lease, rev: rev, acquired: now}
	}
	r.markLoadDirty()
	r.logger.Info("bundle acquired", "namespace", ns, "bundle", b.String(), "rev", rev)
	return true, nil
}

// Owns reports whether this broker owns bundle b of ns: it acquired it, has
// not released or lost it, and its lease has not ended. It does not touch
// etcd.
func (r *Registry) Owns(ns string, b topic.Bundle) bool {
	bk, err := bundleKey(ns, b)
	if err != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.validLocked(r.owned[r.ownPrefix+bk])
}

// OwnedEpoch identifies this broker's current ownership of bundle b of
// ns: the revision of the ownership key it created, which is new each
// time the bundle is acquired again. ok is false when the bundle is not
// owned now.
func (r *Registry) OwnedEpoch(ns string, b topic.Bundle) (epoch int64, ok bool) {
	bk, err := bundleKey(ns, b)
	if err != nil {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.owned[r.ownPrefix+bk]
	if !r.validLocked(e) {
		return 0, false
	}
	return e.rev, true
}

// validLocked reports whether e is a bundle we own right now.
func (r *Registry) validLocked(e *owned) bool {
	return e != nil && !e.releasing && e.lease == r.leaseLocked()
}

func (r *Registry) ownedCountLocked() int {
	n := 0
	for _, e := range r.owned {
		if r.validLocked(e) {
			n++
		}
	}
	return n
}

// Owned lists the bundles this broker owns, by namespace and range.
func (r *Registry) Owned() []OwnedBundle {
	r.mu.Lock()
	out := make([]OwnedBundle, 0, len(r.owned))
	for _, e := range r.owned {
		if r.validLocked(e) {
			out = append(out, OwnedBundle{Namespace: e.ns, Bundle: e.b, Acquired: e.acquired})
		}
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Bundle.Lo < out[j].Bundle.Lo
	})
	return out
}

// Release gives up bundle b of ns (an unload): Owns turns false at once and
// the ownership key is deleted if it is still ours. The caller stops
// serving the bundle's topics first. ErrNotOwned when we do not own it.
func (r *Registry) Release(ctx context.Context, ns string, b topic.Bundle) error {
	return r.Unload(ctx, ns, b, nil)
}

// Unload gives up bundle b of ns in the order an unload wants: Owns turns
// false at once, so none of the bundle's topics can be loaded here any
// more; then stop (when not nil) closes the ones that are, telling their
// clients to reconnect; then the ownership key is deleted if it is still
// ours, and the clients' next lookup places the bundle afresh. Lookups
// meanwhile still name this broker, which refuses the topics (a
// retriable error) until the key is gone. ErrNotOwned when we do not own
// the bundle; stop's error is returned once the key is deleted.
func (r *Registry) Unload(ctx context.Context, ns string, b topic.Bundle, stop func(context.Context) error) error {
	bk, err := bundleKey(ns, b)
	if err != nil {
		return err
	}
	key := r.ownPrefix + bk
	r.mu.Lock()
	e := r.owned[key]
	if !r.validLocked(e) {
		r.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNotOwned, bk)
	}
	e.releasing = true
	r.mu.Unlock()

	var stopErr error
	if stop != nil {
		stopErr = stop(ctx)
	}
	err = r.meta.DeleteIf(ctx, key, e.rev)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owned[key] != e {
		return stopErr // lost or closed meanwhile: not ours either way
	}
	if err != nil && !errors.Is(err, metastore.ErrConflict) {
		e.releasing = false
		return errors.Join(fmt.Errorf("ownership: release %s: %w", bk, err), stopErr)
	}
	delete(r.owned, key)
	r.markLoadDirty()
	r.logger.Info("bundle released", "namespace", ns, "bundle", b.String())
	return stopErr
}

// Registered reports whether the broker's registration is live (its lease
// held and the registry not closed).
func (r *Registry) Registered() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leaseLocked() != nil
}

// Drain marks this broker as draining: from now on no bundle is placed on
// it, here or by the other brokers (the mark is published in its
// registration). It keeps the bundles it owns until they are released.
func (r *Registry) Drain(ctx context.Context) error {
	r.mu.Lock()
	r.self.Draining = true
	r.mu.Unlock()
	if !r.publishLoad(ctx) {
		return fmt.Errorf("ownership: drain %s: could not publish the mark", r.self.ID)
	}
	r.logger.Info("broker draining: no bundle is placed on it any more")
	return nil
}

// Brokers reads the live brokers from etcd, by id.
func (r *Registry) Brokers(ctx context.Context) ([]BrokerInfo, error) {
	kvs, err := r.meta.List(ctx, r.brkPrefix)
	if err != nil {
		return nil, err
	}
	out := make([]BrokerInfo, 0, len(kvs))
	for _, kv := range kvs {
		var info BrokerInfo
		if err := json.Unmarshal(kv.Value, &info); err != nil {
			r.logger.Warn("ignoring malformed broker registration", "key", kv.Key, "err", err)
			continue
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Close gives up every bundle and the registration by revoking the lease,
// which deletes all of the broker's keys in one etcd operation, so clients
// fail over at once. OnLost is not called. When etcd cannot be reached the
// keys expire with the lease instead and Close returns the error. Calls
// after the first (or after Abort) return nil.
func (r *Registry) Close(ctx context.Context) error {
	if !r.stop() {
		return nil
	}
	if err := r.reg.Close(ctx); err != nil {
		return fmt.Errorf("ownership: close (keys expire with the lease): %w", err)
	}
	r.logger.Info("broker unregistered")
	return nil
}

// Abort stops the registry as a crash would: the lease is no longer kept
// alive, so the registration and the ownership keys stay until it
// expires. OnLost is not called.
func (r *Registry) Abort() {
	if r.stop() {
		r.reg.Abort()
	}
}

// stop marks the registry closed and stops its goroutine; false if it was
// already.
func (r *Registry) stop() bool {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	r.closed = true
	r.owned = make(map[string]*owned)
	r.mu.Unlock()
	r.cancel()
	<-r.done
	close(r.retireStop)
	r.retireWG.Wait()
	return true
}

func (r *Registry) markLoadDirty() {
	select {
	case r.loadDirty <- struct{}{}:
	default:
	}
}

// Leader picks the region's leader among the live brokers: the one
// registered longest (earliest Started, then lowest id), preferring
// brokers that are not draining. Every broker reading the same
// registrations picks the same one, and the choice stays while that
// broker lives. false when there is no broker.
func Leader(brokers []BrokerInfo) (BrokerInfo, bool) {
	var best BrokerInfo
	found := false
	for _, b := range brokers {
		if !found || leaderBefore(b, best) {
			best, found = b, true
		}
	}
	return best, found
}

func leaderBefore(a, b BrokerInfo) bool {
	if a.Draining != b.Draining {
		return !a.Draining
	}
	if !a.Started.Equal(b.Started) {
		return a.Started.Before(b.Started)
	}
	return a.ID < b.ID
}
