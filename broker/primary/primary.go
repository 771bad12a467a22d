// Package primary fences the primary region of active-standby namespaces
// on one broker (docs/failover.md).
//
// A broker may accept publishes and acknowledgements for a topic of an
// active-standby namespace only while its region is the namespace's
// primary and the broker holds a fence key for it in the global store:
// /isobar-global/fence/<tenant>/<ns>/<region>/<broker>, attached to the
// broker's own lease. The key is created by one transaction that also
// checks that the namespace's policy is still the one naming this region
// primary and that no broker of another region holds a fence key for the
// namespace that was put before that policy: every holder confirms its key
// (puts it again) once it has acted on each new revision of the policy. A
// topic with its own failover policy (policy.Policies.TopicFailover) has a
// gate and fence keys of its own, ordered against the same revisions. So:
//
//   - after a change of primary, no broker of the old primary creates a key
//     again (its transaction pins the old policy revision);
//   - the new primary's brokers wait until every key of the old one is
//     gone: deleted at once by a reachable broker that saw the change, or
//     expired with its lease when the broker died or was cut off;
//   - a broker cut off from the global store stops accepting as soon as its
//     lease may have expired at the store (metastore.Lease.Valid), which is
//     never later than the store deletes its key.
//
// Two regions therefore never accept writes for one namespace, or topic,
// at once. Active-active namespaces need no fence: Check answers nil for
// them.
package primary

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/metastore"
)

// ErrNotPrimary is why a region that is not a namespace's primary refuses
// its publishes and acknowledgements (a *NotPrimaryError names the
// primary).
var ErrNotPrimary = errors.New("not the namespace's primary region")

// ErrFenced is why a primary region's broker refuses them while it does
// not hold the namespace's fence: while the old primary's fence has not
// ended yet, or after the broker's own lease lapsed.
var ErrFenced = errors.New("primary fence not held")

// ErrLapsed is why a primary's broker refuses them after its own lease
// lapsed (cut off from the global store: another region may be promoted
// by now). It comes with ErrFenced.
var ErrLapsed = errors.New("this broker's fence lease lapsed")

// NotPrimaryError says which region is a namespace's, or a topic's,
// primary.
type NotPrimaryError struct {
	Namespace string
	// Topic is the local name of a topic with its own failover policy
	// ("" for the namespace's).
	Topic   string
	Primary string
	Epoch   int64
}

func (e *NotPrimaryError) Error() string {
	if e.Topic != "" {
		return fmt.Sprintf("topic %s of namespace %s is active-standby and its primary region is %s (epoch %d)", e.Topic, e.Namespace, e.Primary, e.Epoch)
	}
	return fmt.Sprintf("namespace %s is active-standby and its primary region is %s (epoch %d)", e.Namespace, e.Primary, e.Epoch)
}

// Is makes a *NotPrimaryError match ErrNotPrimary.
func (e *NotPrimaryError) Is(target error) bool { return target == ErrNotPrimary }

// PresencePrefix is the prefix of the presence keys of a region's
// brokers: each broker keeps one under its fence lease, so a region with
// none has been gone (dead or cut off) for at least the lease TTL.
func PresencePrefix(region string) string { return policy.Root + "presence/" + region + "/" }

// FencePrefix is the prefix of every fence key of namespace ns
// ("tenant/ns").
func FencePrefix(ns string) string { return policy.Root + "fence/" + ns + "/" }

// FenceKey is the fence key of a broker of a region for namespace ns.
func FenceKey(ns, region, broker string) string { return FencePrefix(ns) + region + "/" + broker }

// TopicFenceKey is the fence key of a broker of a region for the topic
// of namespace ns named local, when the topic has its own failover
// policy: under the region's prefix, as the namespace's fences are.
func TopicFenceKey(ns, local, region, broker string) string {
	return FenceKey(ns, region, broker) + "/topic/" + local
}

// Config configures the gates of one broker.
type Config struct {
	// Region is the broker's region (its cluster name). Required.
	Region string
	// Broker identifies the broker within its region. Required.
	Broker string
	// TTL is the broker's fence lease (0: DefaultTTL). A dead or cut-off
	// primary's namespaces fail over no sooner than this.
	TTL time.Duration
	// Hold is how long, once its lease lapsed, the broker tries to take
	// its fences again on a new lease before it gives its clients up
	// (0: DefaultHold; negative: not at all). Meanwhile Wait holds
	// writers rather than refusing them, so a cut of the global store
	// that heals in time costs them a delay only. A cut-off primary's
	// clients move to a new primary this much later.
	Hold time.Duration
	// DrainTimeout bounds a planned demotion's wait for replication to
	// the new primary (0: 30s).
	DrainTimeout time.Duration
}

// DefaultTTL and DefaultHold are the fence lease's defaults
// (docs/decisions.md, "Failover in under three seconds"): a dead
// primary's fences end within the TTL of its last renewal, and a cut of
// the global store that heals within the TTL costs its clients nothing.
const (
	DefaultTTL  = 2 * time.Second
	DefaultHold = 750 * time.Millisecond
)

// Deps are the gates' live dependencies.
type Deps struct {
	// Global is the global configuration store. Required.
	Global metastore.Meta
	// Demote runs when the broker stops being allowed to write for a
	// namespace it wrote for (writes are refused already): it sends the
	// namespace's clients away (they reconnect to the primary) and, when
	// to names the new primary (a planned change, the store reachable),
	// returns once this broker's topics of the namespace have replicated
	// everything to it, so the new primary starts with the old one's
	// whole log. The fence ends when it returns, or after DrainTimeout.
	// topic, when not empty, limits it to the topic of ns with that local
	// name (a partitioned topic's: all its partitions).
	Demote func(ctx context.Context, ns, topic, to string)
	// Cached, when set, reads a key from a local copy of the global store
	// (globalconfig.Cache.Get): a namespace's policy is read from it when
	// the store cannot be reached, so active-active namespaces keep
	// taking writes through an outage of the global store.
	Cached func(key string) (value []byte, rev int64, ok bool)
	// AutoNamespaces lists the namespaces that fail over by themselves
	// (policy.Failover.AutoAfterSeconds > 0), usually from the region's
	// cached copy of the store; nil: no automatic failover from here.
	AutoNamespaces func() []AutoNamespace
	// Promote makes this region the primary of ns, only if from still
	// is (a compare-and-swap on the policy; the epoch grows).
	Promote func(ctx context.Context, ns, from string) error
	// Logger receives fence changes; nil discards.
	Logger *slog.Logger
}

// AutoNamespace is a namespace with automatic failover.
type AutoNamespace struct {
	Name     string
	Failover policy.Failover
	Clusters []string
}

// Gates tracks the namespaces, and the topics with their own failover
// policy, a broker writes for.
type Gates struct {
	cfg  Config
	deps Deps
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	gates map[scope]*gate
	lease *metastore.Lease

	// presence is, per region, how many of its brokers have a presence
	// key (watchPresence); nil until first read.
	presMu   sync.Mutex
	presence map[string]map[string]bool
	// absentSince is, per region absent now, when this broker first saw
	// it absent.
	absentSince map[string]time.Time
	// gone wakes keepPresent when a presence key ends, so that an
	// automatic failover does not wait for its next round.
	gone chan struct{}

	// unrenewed caches Unrenewed's answers, per region.
	unrenewedMu sync.Mutex
	unrenewed   map[string]unrenewedAnswer
}

type unrenewedAnswer struct {
	yes bool
	at  time.Time
}

// unrenewedFor is how long an answer of Unrenewed is kept: the lookups
// held meanwhile (awaitPrimaryBack polls) cost one read of the store.
const unrenewedFor = 100 * time.Millisecond

// scope is what a gate fences: a namespace ("tenant/ns"), or one of its
// topics (the local name of a topic, or a partitioned topic's base name).
type scope struct {
	ns    string
	topic string // "": the namespace
}

func (s scope) String() string {
	if s.topic == "" {
		return s.ns
	}
	return s.ns + " topic " + s.topic
}

// New returns the gates of a broker; Start starts them and Close stops
// them.
func New(cfg Config, deps Deps) (*Gates, error) {
	var errs []error
	if cfg.Region == "" {
		errs = append(errs, errors.New("primary: region required"))
	}
	if cfg.Broker == "" || strings.Contains(cfg.Broker, "/") {
		errs = append(errs, fmt.Errorf("primary: broker id %q: required, without '/'", cfg.Broker))
	}
	if deps.Global == nil {
		errs = append(errs, errors.New("primary: global store required"))
	}
	if cfg.TTL < 0 {
		errs = append(errs, fmt.Errorf("primary: ttl %v is negative", cfg.TTL))
	}
	if cfg.DrainTimeout < 0 {
		errs = append(errs, fmt.Errorf("primary: drain timeout %v is negative", cfg.DrainTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Hold == 0 {
		cfg.Hold = DefaultHold
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 30 * time.Second
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Gates{cfg: cfg, deps: deps, log: deps.Logger, ctx: ctx, cancel: cancel, gates: map[scope]*gate{}, gone: make(chan struct{}, 1)}, nil
}

// Start starts keeping the broker's presence in the global store and
// following every region's (for Absent); call it once. Close and Abort
// stop it.
func (gs *Gates) Start() {
	gs.wg.Add(2)
	go gs.keepPresent()
	go gs.watchPresence()
}

// watchPresence follows every region's presence keys, for Absent.
func (gs *Gates) watchPresence() {
	defer gs.wg.Done()
	prefix := policy.Root + "presence/"
	for gs.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(gs.ctx, storeTimeout)
		l, err := gs.deps.Global.ListRev(ctx, prefix)
		cancel()
		if err != nil {
			select {
			case <-gs.ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		pres := map[string]map[string]bool{}
		set := func(key string, present bool) {
			region, broker, ok := strings.Cut(strings.TrimPrefix(key, prefix), "/")
			if !ok {
				return
			}
			if pres[region] == nil {
				pres[region] = map[string]bool{}
			}
			if present {
				pres[region][broker] = true
			} else {
				delete(pres[region], broker)
			}
		}
		for _, kv := range l.KVs {
			set(kv.Key, true)
		}
		gs.setPresence(pres)
		for ev := range gs.deps.Global.Watch(gs.ctx, prefix, l.Rev+1) {
			if ev.Reset {
				break // read it all again
			}
			set(ev.Key, !ev.Deleted)
			gs.setPresence(pres)
			if ev.Deleted {
				select {
				case gs.gone <- struct{}{}:
				default:
				}
			}
		}
	}
}

func (gs *Gates) setPresence(pres map[string]map[string]bool) {
	cp := make(map[string]map[string]bool, len(pres))
	for r, bs := range pres {
		cp[r] = maps.Clone(bs)
	}
	now := time.Now()
	gs.presMu.Lock()
	gs.presence = cp
	for r, bs := range cp {
		if len(bs) > 0 {
			delete(gs.absentSince, r)
		} else if _, ok := gs.absentSince[r]; !ok {
			if gs.absentSince == nil {
				gs.absentSince = map[string]time.Time{}
			}
			gs.absentSince[r] = now
		}
	}
	gs.presMu.Unlock()
}

// GoneSince reports since when region has been unreachable as far as
// the global store shows: absent (Absent), from a lease TTL before this
// broker first saw it absent, when its brokers last reached the store at
// the latest (taking their TTL to be this broker's); ok false while it
// is not absent.
func (gs *Gates) GoneSince(region string) (time.Time, bool) {
	if !gs.Absent(region) {
		return time.Time{}, false
	}
	gs.presMu.Lock()
	defer gs.presMu.Unlock()
	since, ok := gs.absentSince[region]
	if !ok { // never present since this broker started
		if gs.absentSince == nil {
			gs.absentSince = map[string]time.Time{}
		}
		since = time.Now()
		gs.absentSince[region] = since
	}
	return since.Add(-gs.cfg.TTL), true
}

// Absent reports whether region has no broker present in the global
// store (every broker of it dead, or cut off from the store for a lease
// TTL), as this broker last saw it; false while it does not know (it
// cannot reach the store itself, or has not read it yet).
func (gs *Gates) Absent(region string) bool {
	if !gs.ReachedSince(time.Time{}) {
		return false // cut off ourselves: we know nothing
	}
	gs.presMu.Lock()
	defer gs.presMu.Unlock()
	return gs.presence != nil && len(gs.presence[region]) == 0
}

// Unrenewed reports whether no broker of region has renewed its lease
// in the global store for over a second, as a read of the store shows
// now: its presence keys are still there but each lease has a second or
// more missing (each broker renews several times a second;
// metastore.RenewInterval), or there are none. The region is most likely
// dead or cut off, and a present one's presence ends within the lease
// TTL. A lookup that would send a client to it can hold the client
// instead, so that its reconnection backoff does not grow while a
// failover is coming. It answers from the store, not from the watched
// presence (Absent), so that it never calls the region back in the
// moment between its keys ending and the watch event. False while this
// broker cannot reach the store, and for leases under 2 s (etcd keeps
// what is left in whole seconds). An answer is kept for unrenewedFor.
func (gs *Gates) Unrenewed(region string) bool {
	gs.unrenewedMu.Lock()
	defer gs.unrenewedMu.Unlock()
	if a, ok := gs.unrenewed[region]; ok && time.Since(a.at) < unrenewedFor {
		return a.yes
	}
	yes := gs.readUnrenewed(region)
	if gs.unrenewed == nil {
		gs.unrenewed = map[string]unrenewedAnswer{}
	}
	gs.unrenewed[region] = unrenewedAnswer{yes: yes, at: time.Now()}
	return yes
}

// readUnrenewed reads the region's presence keys and their leases (in
// parallel: two round trips to the store, bounded by half a second).
func (gs *Gates) readUnrenewed(region string) bool {
	if !gs.ReachedSince(time.Time{}) {
		return false
	}
	ctx, cancel := context.WithTimeout(gs.ctx, 500*time.Millisecond)
	defer cancel()
	kvs, err := gs.deps.Global.List(ctx, PresencePrefix(region))
	if err != nil {
		return false
	}
	if len(kvs) == 0 {
		return true // nobody there to renew
	}
	renewing := make([]bool, len(kvs))
	var wg sync.WaitGroup
	for i, kv := range kvs {
		wg.Go(func() {
			left, granted, err := gs.deps.Global.LeaseLeft(ctx, kv.Lease)
			switch {
			case errors.Is(err, metastore.ErrNoLease):
				// ended since the listing: not renewing either
			case err != nil, granted < 2*time.Second, left >= granted-time.Second:
				renewing[i] = true // cannot tell, or renewed within the last second
			}
		})
	}
	wg.Wait()
	return !slices.Contains(renewing, true)
}

// keepPresent holds the broker's lease, and with it its presence key,
// from the start (not only once it writes for a namespace), and runs the
// automatic failover checks.
func (gs *Gates) keepPresent() {
	defer gs.wg.Done()
	gone := map[string]time.Time{} // namespace -> when its primary was first seen gone
	for {
		if _, err := gs.leaseFor(gs.ctx); err != nil && gs.ctx.Err() == nil {
			gs.log.Debug("presence in the global store not registered", "err", err)
		}
		gs.autoFailover(gone)
		select {
		case <-gs.ctx.Done():
			return
		case <-gs.gone:
		case <-time.After(min(gs.cfg.TTL/8, 250*time.Millisecond)):
		}
	}
}

// autoFailover promotes this region for each namespace with automatic
// failover whose primary region has been unreachable for its delay (its
// last broker's presence ended a lease TTL after it last reached the
// store), when this region is the first present one of the namespace's
// clusters
// (in their listed order). Only a region that reaches the global store can
// see that and promote itself; the promotion is a compare-and-swap, so at
// most one region wins an epoch.
func (gs *Gates) autoFailover(gone map[string]time.Time) {
	if gs.deps.AutoNamespaces == nil || gs.deps.Promote == nil {
		return
	}
	// From the watched presence keys (watchPresence): a region is gone
	// only when this broker reaches the store and sees none of its
	// brokers; cut off itself, it sees every region present.
	presentIn := func(region string) (bool, error) {
		if !gs.ReachedSince(time.Time{}) {
			return false, errors.New("the global store cannot be reached")
		}
		return !gs.Absent(region), nil
	}
	seen := map[string]bool{}
	for _, ns := range gs.deps.AutoNamespaces() {
		f := ns.Failover
		if f.Mode != policy.ActiveStandby || f.AutoAfterSeconds <= 0 || f.Primary == gs.cfg.Region || !slices.Contains(ns.Clusters, gs.cfg.Region) {
			continue
		}
		seen[ns.Name] = true
		up, err := presentIn(f.Primary)
		if err != nil || up {
			delete(gone, ns.Name) // cut off ourselves, or the primary is there
			continue
		}
		since, ok := gone[ns.Name]
		if !ok {
			since = time.Now()
			gone[ns.Name] = since
			gs.log.Warn("primary region of namespace is gone", "namespace", ns.Name, "primary", f.Primary, "failoverAfter", time.Duration(f.AutoAfterSeconds)*time.Second)
		}
		// Its presence keys ended a lease TTL after its brokers last
		// reached the store: it has been unreachable that much longer
		// (taking the primary's brokers' TTL to be this broker's).
		if time.Since(since)+gs.cfg.TTL < time.Duration(f.AutoAfterSeconds)*time.Second {
			continue
		}
		var candidate string
		for _, c := range ns.Clusters {
			if c == f.Primary {
				continue
			}
			if ok, err := presentIn(c); err == nil && ok {
				candidate = c
				break
			}
		}
		if candidate != gs.cfg.Region {
			continue
		}
		ctx, cancel := context.WithTimeout(gs.ctx, storeTimeout)
		err = gs.deps.Promote(ctx, ns.Name, f.Primary)
		cancel()
		if err != nil {
			gs.log.Warn("automatic failover failed", "namespace", ns.Name, "from", f.Primary, "err", err)
			continue
		}
		gs.log.Warn("automatic failover: this region is now the primary", "namespace", ns.Name, "from", f.Primary, "goneFor", time.Since(since).Round(time.Millisecond))
		delete(gone, ns.Name)
	}
	for ns := range gone {
		if !seen[ns] {
			delete(gone, ns)
		}
	}
}

// state is what a gate knows of its scope.
type state struct {
	failover policy.Failover
	lease    *metastore.Lease // held fence (active-standby primary only)
	err      error            // why not writable (nil: writable)
	pending  bool             // err may clear soon (reading the policy, waiting for another region's fence)
	// retaking: the lease lapsed while writing and the fence is being
	// taken again (retake); writers are held, and demoted if it fails.
	retaking bool
}

type gate struct {
	scope
	st      atomic.Pointer[state]
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every state change
}

func (g *gate) set(st *state) {
	g.st.Store(st)
	g.mu.Lock()
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

func (st *state) check() error {
	if st.err != nil {
		return st.err
	}
	if st.lease != nil && !st.lease.Valid() {
		return fmt.Errorf("%w: %w (the global store is unreachable)", ErrFenced, ErrLapsed)
	}
	return nil
}

// Check reports whether the broker may accept publishes and
// acknowledgements for the topic of namespace ns named local (a
// partitioned topic's base name; "" asks for the namespace) now: nil, an
// error matching ErrNotPrimary (naming the primary), or one matching
// ErrFenced. The first call for a namespace starts tracking it and
// answers ErrFenced until its policy is read. It does not block.
//
// A topic with its own failover policy has its own gate; the namespace's
// gate creates it before it publishes a state that knows of the policy,
// so a check that read that state finds the topic's gate on its second
// look.
func (gs *Gates) Check(ns, local string) error {
	for {
		g := gs.route(ns, local)
		err := g.st.Load().check()
		if gs.route(ns, local) == g {
			return err
		}
	}
}

// Wait waits while the broker may soon be allowed to write (the policy is
// being read, another region's fence is about to end, or this broker's
// lease lapsed a moment ago and it is taking its fence again, for at most
// Config.Hold): it returns Check's answer once that is settled or ctx
// ends. A broker cut off from the global store for longer is answered at
// once (ErrFenced): its clients are better off trying another region.
func (gs *Gates) Wait(ctx context.Context, ns, local string) error {
	for {
		g := gs.route(ns, local)
		ch := g.wait()
		st := g.st.Load()
		err := st.check()
		if gs.route(ns, local) != g {
			continue
		}
		// A lease that just ran out on a writable state: the retake
		// starts at once (track sees the lease end).
		lapsing := st.err == nil && st.lease != nil && gs.cfg.Hold > 0
		if err == nil || errors.Is(err, ErrNotPrimary) || !st.pending && !lapsing {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return err
		case <-gs.ctx.Done():
			return err
		}
	}
}

// ReachedSince reports whether this broker reached the global store
// after t and still does: its lease's last answered renewal was sent
// after t, and within two renewal intervals of now (a broker cut off
// from the store stops answering yes within that).
func (gs *Gates) ReachedSince(t time.Time) bool {
	gs.mu.Lock()
	l := gs.lease
	gs.mu.Unlock()
	if l == nil || l.Lost() {
		return false
	}
	r := l.Renewed()
	return r.After(t) && time.Since(r) <= 2*metastore.RenewInterval(gs.cfg.TTL)+100*time.Millisecond
}

// Failover returns what the gate of the topic of ns named local (or of
// ns, when it has none of its own) last read of its policy (false when it
// is not tracked yet).
func (gs *Gates) Failover(ns, local string) (policy.Failover, bool) {
	gs.mu.Lock()
	g := gs.gates[scope{ns, local}]
	if g == nil {
		g = gs.gates[scope{ns: ns}]
	}
	gs.mu.Unlock()
	if g == nil {
		return policy.Failover{}, false
	}
	f := g.st.Load().failover
	return f, f.Mode != ""
}

// route is the gate that decides for the topic of ns named local: its
// own, when it has one, else the namespace's (tracked from now on).
func (gs *Gates) route(ns, local string) *gate {
	if local != "" {
		gs.mu.Lock()
		g := gs.gates[scope{ns, local}]
		gs.mu.Unlock()
		if g != nil {
			return g
		}
	}
	return gs.get(scope{ns: ns})
}

func (gs *Gates) get(sc scope) *gate {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.gates[sc]
	if g == nil {
		g = &gate{scope: sc, changed: make(chan struct{})}
		g.st.Store(&state{err: fmt.Errorf("%w: reading the replication mode of %s", ErrFenced, sc), pending: true})
		gs.gates[sc] = g
		if gs.ctx.Err() == nil {
			gs.wg.Add(1)
			go gs.track(g)
		}
	}
	return g
}

// Close stops tracking and gives up every fence (deleting this broker's
// keys so another region can take over at once). When the global store
// cannot be reached the keys end with the lease's TTL instead, as a
// crashed broker's would; that is not an error.
func (gs *Gates) Close(ctx context.Context) error {
	gs.cancel()
	gs.wg.Wait()
	gs.mu.Lock()
	l := gs.lease
	gs.lease = nil
	gs.mu.Unlock()
	if l != nil {
		ctx, cancel := context.WithTimeout(ctx, storeTimeout)
		defer cancel()
		if err := l.Revoke(ctx); err != nil {
			gs.log.Warn("fences and presence not released; they end with the lease", "ttl", gs.cfg.TTL, "err", err)
		}
	}
	return nil
}

// Abort stops tracking as a crash would: the fences stay until the lease
// expires.
func (gs *Gates) Abort() {
	gs.cancel()
	gs.wg.Wait()
	gs.mu.Lock()
	if gs.lease != nil {
		gs.lease.Abandon()
		gs.lease = nil
	}
	gs.mu.Unlock()
}

// leaseFor returns the broker's live fence lease, granting a new one when
// there is none or it was lost.
func (gs *Gates) leaseFor(ctx context.Context) (*metastore.Lease, error) {
	gs.mu.Lock()
	l := gs.lease
	gs.mu.Unlock()
	if l != nil && l.Valid() {
		return l, nil
	}
	gctx, cancel := context.WithTimeout(ctx, storeTimeout)
	nl, err := gs.deps.Global.Grant(gctx, gs.cfg.TTL)
	cancel()
	if err != nil {
		return nil, err
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.lease != nil && gs.lease != l && gs.lease.Valid() {
		nl.Abandon() // another namespace renewed it first
		go gs.deps.Global.RevokeLease(context.Background(), nl.ID())
		return gs.lease, nil
	}
	if gs.lease != nil {
		gs.lease.Abandon()
	}
	pctx, pcancel := context.WithTimeout(ctx, storeTimeout)
	_, err = nl.Put(pctx, PresencePrefix(gs.cfg.Region)+gs.cfg.Broker, []byte(`{}`))
	pcancel()
	if err != nil {
		nl.Abandon()
		go gs.deps.Global.RevokeLease(context.Background(), nl.ID())
		return nil, fmt.Errorf("presence: %w", err)
	}
	gs.lease = nl
	return nl, nil
}

// track follows one scope's policy and holds or gives up its fence. The
// namespace's policy record holds its topics' own failover policies too,
// so a namespace's gate and its topics' gates follow the same key and
// every fence is taken and confirmed against one revision of it. The
// policy is read first from the local copy (Deps.Cached) when there is
// one, then taken from the watch's events; the store is read directly
// when there is no copy and whenever taking the fence found the policy
// changed.
func (gs *Gates) track(g *gate) {
	defer gs.wg.Done()
	key := nsKey(g.ns)
	var held *metastore.Lease
	backoff := 100 * time.Millisecond
	var kv *metastore.KV                 // the policy to act on (nil: read it; Value nil: absent)
	var from int64                       // watch changes from this revision on (0: from now, then read)
	var acted map[string]policy.Failover // a namespace's gate: the topics' own policies it acted on
	if gs.deps.Cached != nil {
		if v, rev, ok := gs.deps.Cached(key); ok {
			kv, from = &metastore.KV{Key: key, Value: v, Rev: rev}, rev+1
		}
	}
	// Nothing after the version acted on is missed: the watch starts
	// there (a compacted start sends Reset, and the store is read).
	events := gs.deps.Global.Watch(gs.ctx, key, from)
	for gs.ctx.Err() == nil {
		if kv == nil {
			gctx, cancel := context.WithTimeout(gs.ctx, storeTimeout)
			got, err := gs.deps.Global.Get(gctx, key)
			cancel()
			switch {
			case errors.Is(err, metastore.ErrNotFound):
				kv = &metastore.KV{Key: key}
			case err == nil:
				kv = &got
			default:
				if gs.deps.Cached != nil {
					if v, rev, ok := gs.deps.Cached(key); ok {
						kv = &metastore.KV{Key: key, Value: v, Rev: rev}
						break
					}
				}
				// Unreachable: what was held stays held while its lease
				// is valid (check() turns false on time).
				if st := g.st.Load(); st.pending {
					g.set(&state{failover: st.failover, err: fmt.Errorf("%w: the global store cannot be reached: %v", ErrFenced, err)})
				}
				select {
				case <-gs.ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 2*time.Second)
				continue
			}
		}
		backoff = 100 * time.Millisecond
		cur := *kv
		var p policy.Policies
		switch {
		case cur.Value == nil:
			held = gs.release(g, held, &state{failover: policy.Failover{Mode: policy.ActiveActive}, err: fmt.Errorf("%w: namespace %s does not exist", ErrFenced, g.ns)})
		case json.Unmarshal(cur.Value, &p) != nil:
			held = gs.release(g, held, &state{err: fmt.Errorf("%w: namespace %s: unreadable policies", ErrFenced, g.ns)})
		default:
			if g.topic == "" {
				acted = gs.topicsChanged(g, held, acted, p.TopicFailover)
			}
			f := policy.TopicFailoverOf(&p, g.topic)
			switch {
			case f.Mode != policy.ActiveStandby:
				held = gs.release(g, held, &state{failover: f})
			case f.Primary != gs.cfg.Region:
				held = gs.release(g, held, &state{failover: f, err: &NotPrimaryError{Namespace: g.ns, Topic: g.topic, Primary: f.Primary, Epoch: f.Epoch}})
			default:
				var reread bool
				held, reread = gs.acquire(g, held, f, cur.Rev, p.ReplicationClusters, events)
				if reread {
					kv = nil
					continue
				}
			}
		}
		var ok bool
		if kv, ok = gs.next(events, held, kv); !ok {
			return
		}
	}
}

// topicsChanged readies a namespace's gate g for a policy whose topics'
// own failover policies are now. It creates the gate of every topic that
// has one, or had one when g last acted (from then on that gate decides
// for the topic: Check and Wait look for it after reading g's state), and,
// while g lets this broker write, demotes each topic whose new policy
// names another primary, draining it there, before g confirms its fence
// for the new policy. It returns what g acted on.
func (gs *Gates) topicsChanged(g *gate, held *metastore.Lease, acted, now map[string]policy.Failover) map[string]policy.Failover {
	for local := range now {
		gs.get(scope{g.ns, local})
	}
	for local := range acted {
		gs.get(scope{g.ns, local})
	}
	if held == nil || g.st.Load().err != nil || gs.deps.Demote == nil {
		return maps.Clone(now)
	}
	for _, local := range slices.Sorted(maps.Keys(now)) {
		f := now[local]
		if prev, ok := acted[local]; ok && prev == f || f.Mode != policy.ActiveStandby || f.Primary == gs.cfg.Region {
			continue
		}
		ctx, cancel := context.WithTimeout(gs.ctx, gs.cfg.DrainTimeout)
		start := time.Now()
		gs.deps.Demote(ctx, g.ns, local, f.Primary)
		gs.log.Info("topic with its own primary drained to it", "namespace", g.ns, "topic", local, "primary", f.Primary, "took", time.Since(start), "timedOut", ctx.Err() != nil)
		cancel()
	}
	return maps.Clone(now)
}

// next waits for a change of the policy (returning the changed value) or
// the loss of the held lease (returning kv as it was); false when the
// gates stop.
func (gs *Gates) next(events <-chan metastore.Event, held *metastore.Lease, kv *metastore.KV) (*metastore.KV, bool) {
	var lost <-chan struct{}
	if held != nil {
		lost = held.Done()
	}
	select {
	case <-gs.ctx.Done():
		return nil, false
	case ev, ok := <-events:
		if !ok {
			return nil, false
		}
		if ev.Reset {
			return nil, true // read it again
		}
		if ev.Deleted {
			return &metastore.KV{Key: ev.Key, Rev: ev.Rev}, true
		}
		return &metastore.KV{Key: ev.Key, Value: ev.Value, Rev: ev.Rev}, true
	case <-lost:
		return kv, true
	}
}

// fenceKey is this broker's fence key for g's scope.
func (gs *Gates) fenceKey(g *gate) string {
	if g.topic != "" {
		return TopicFenceKey(g.ns, g.topic, gs.cfg.Region, gs.cfg.Broker)
	}
	return FenceKey(g.ns, gs.cfg.Region, gs.cfg.Broker)
}

// release publishes st (refusing writes from now on when it does), lets
// the broker demote the scope when writes were allowed before, and gives
// up the fence held (deleting the key when the store can be reached;
// otherwise it ends with the lease).
func (gs *Gates) release(g *gate, held *metastore.Lease, st *state) *metastore.Lease {
	cur := g.st.Load()
	was := cur.err == nil || cur.retaking
	g.set(st)
	if was && st.err != nil {
		gs.log.Info("no longer writing", "scope", g.scope.String(), "reason", st.err)
		if gs.deps.Demote != nil {
			var to string
			var np *NotPrimaryError
			if errors.As(st.err, &np) && held != nil {
				to = np.Primary
			}
			ctx, cancel := context.WithTimeout(gs.ctx, gs.cfg.DrainTimeout)
			start := time.Now()
			gs.deps.Demote(ctx, g.ns, g.topic, to)
			if to != "" {
				gs.log.Info("demoted scope drained to the new primary", "scope", g.scope.String(), "primary", to, "took", time.Since(start), "timedOut", ctx.Err() != nil)
			}
			cancel()
		}
	}
	if held != nil {
		ctx, cancel := context.WithTimeout(gs.ctx, 2*time.Second)
		if err := gs.deps.Global.Delete(ctx, gs.fenceKey(g)); err != nil {
			gs.log.Warn("fence not deleted; it ends with the lease", "scope", g.scope.String(), "err", err)
		}
		cancel()
	}
	return nil
}

// acquire takes g's fence for this broker (policy revision rev says this
// region is primary), waiting while a fence of another region may still
// cover the scope, or confirms the fence held for rev. It returns early,
// without the fence and with reread set, when the policy changes.
//
// Every holder confirms its fence (puts it again, on the condition that
// the policy is still at the revision it acted on) after acting on each
// new revision, demoting first what the revision took from it. A fence
// taken or confirmed while the policy is at rev was put by a broker that
// acts on rev, whose scope under rev does not overlap this one's; a fence
// put before rev may be a broker's that has not seen rev yet. So the
// fence is taken only while the policy is at rev and every other region's
// fence in the namespace is gone or was put after rev.
func (gs *Gates) acquire(g *gate, held *metastore.Lease, f policy.Failover, rev int64, clusters []string, events <-chan metastore.Event) (_ *metastore.Lease, reread bool) {
	val := fenceValue(f)
	// lapsed: this broker's lease ran out while it wrote (cut off from
	// the store); until it reaches the store again it says so (ErrLapsed),
	// so that lookups here send clients on to another region.
	lapsed := false
	if held != nil && !held.Valid() {
		lapsed = true
		if l, reread, ok := gs.retake(g, f, rev, clusters, events); ok || reread {
			if reread {
				held = gs.release(g, held, &state{failover: f, err: fmt.Errorf("%w: %w", ErrFenced, ErrLapsed)})
				return held, true
			}
			return l, false
		}
		held = gs.release(g, held, &state{failover: f, err: fmt.Errorf("%w: %w", ErrFenced, ErrLapsed)})
	}
	if held != nil {
		if cur := g.st.Load(); cur.failover == f && cur.lease == held {
			tctx, cancel := context.WithTimeout(gs.ctx, storeTimeout)
			ok, _, err := gs.deps.Global.Txn(tctx, []metastore.Cmp{metastore.AtRev(nsKey(g.ns), rev)}, []metastore.Op{metastore.PutLeasedOp(gs.fenceKey(g), val, held.ID())})
			cancel()
			switch {
			case err != nil:
				// Still held while the lease is valid; others wait for
				// the next confirmation, or for the lease to end.
				gs.log.Debug("fence not confirmed", "scope", g.scope.String(), "err", err)
			case !ok:
				return held, true // the policy changed again
			}
			return held, false
		}
	}
	waiting, unreachable := false, false
	unreachableErr := func(err error) error {
		if lapsed {
			return fmt.Errorf("%w: %w: the global store cannot be reached to take the fence: %v", ErrFenced, ErrLapsed, err)
		}
		return fmt.Errorf("%w: the global store cannot be reached to take the fence: %v", ErrFenced, err)
	}
	for gs.ctx.Err() == nil {
		l, err := gs.leaseFor(gs.ctx)
		if err != nil && !unreachable {
			unreachable, waiting = true, false
			g.set(&state{failover: f, err: unreachableErr(err)})
		}
		if err == nil {
			var conds []metastore.Cmp
			var others []string
			conds, others, err = gs.fenceConds(g, rev, clusters)
			ok := false
			if err == nil && len(others) == 0 {
				tctx, cancel := context.WithTimeout(gs.ctx, storeTimeout)
				ok, _, err = gs.deps.Global.Txn(tctx, conds, []metastore.Op{metastore.PutLeasedOp(gs.fenceKey(g), val, l.ID())})
				cancel()
			}
			if err != nil && !unreachable {
				unreachable, waiting = true, false
				g.set(&state{failover: f, err: unreachableErr(err)})
			}
			if err == nil && ok {
				g.set(&state{failover: f, lease: l})
				gs.log.Info("writing as the primary", "scope", g.scope.String(), "epoch", f.Epoch)
				return l, false
			}
			if err == nil {
				// The policy changed, or another region's fence may still
				// cover the scope: find out which.
				unreachable = false
				gctx, cancel := context.WithTimeout(gs.ctx, storeTimeout)
				kv, gerr := gs.deps.Global.Get(gctx, nsKey(g.ns))
				cancel()
				if gerr == nil && kv.Rev != rev {
					return nil, true
				}
				if !waiting {
					waiting = true
					g.set(&state{failover: f, err: fmt.Errorf("%w: waiting for the fence of %s to end", ErrFenced, strings.Join(others, ", ")), pending: true})
					gs.log.Info("primary waits for the previous primary's fence to end", "scope", g.scope.String(), "epoch", f.Epoch, "holders", others)
				}
			}
		}
		select {
		case <-gs.ctx.Done():
			return nil, false
		case _, ok := <-events:
			return nil, ok // the policy changed: start over
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, false
}

// retake tries, for Config.Hold after g's lease lapsed, to take g's
// fence again on a new lease, on the same conditions as any take (the
// policy still at rev, no other region's fence from before it): a cut of
// the global store that healed in time. Meanwhile the state is pending,
// so Wait holds writers instead of refusing them, and nothing is
// demoted. ok: taken again (writable); reread: the policy changed
// meanwhile (the caller releases and reads it). Neither: the hold ran
// out.
func (gs *Gates) retake(g *gate, f policy.Failover, rev int64, clusters []string, events <-chan metastore.Event) (l *metastore.Lease, reread, ok bool) {
	if gs.cfg.Hold <= 0 {
		return nil, false, false
	}
	deadline := time.Now().Add(gs.cfg.Hold)
	g.set(&state{failover: f, err: fmt.Errorf("%w: %w (taking the fence again)", ErrFenced, ErrLapsed), pending: true, retaking: true})
	gs.log.Info("fence lease lapsed; taking the fence again", "scope", g.scope.String(), "hold", gs.cfg.Hold)
	val := fenceValue(f)
	for gs.ctx.Err() == nil && time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(gs.ctx, deadline)
		nl, err := gs.leaseFor(ctx)
		if err == nil {
			var conds []metastore.Cmp
			var others []string
			conds, others, err = gs.fenceConds(g, rev, clusters)
			if err == nil && len(others) == 0 {
				var took bool
				took, _, err = gs.deps.Global.Txn(ctx, conds, []metastore.Op{metastore.PutLeasedOp(gs.fenceKey(g), val, nl.ID())})
				if err == nil && took {
					cancel()
					g.set(&state{failover: f, lease: nl})
					gs.log.Info("fence taken again after the lease lapsed; writing as the primary", "scope", g.scope.String(), "epoch", f.Epoch)
					return nl, false, true
				}
				if err == nil {
					cancel()
					return nil, true, false // the policy or the fences changed: read again
				}
			} else if err == nil {
				cancel()
				return nil, true, false // another region's fence: this one was replaced
			}
		}
		cancel()
		select {
		case <-gs.ctx.Done():
		case _, open := <-events:
			return nil, open, false // the policy changed
		case <-time.After(min(50*time.Millisecond, time.Until(deadline))):
		}
	}
	return nil, false, false
}

// fenceValue is what a fence key holds: the epoch it was taken for.
func fenceValue(f policy.Failover) []byte {
	val, _ := json.Marshal(struct {
		Epoch int64 `json:"epoch"`
	}{f.Epoch})
	return val
}

// fenceConds are the conditions on which this broker may take g's fence
// for revision rev of the namespace's policy (acquire): the policy is
// still at rev; in each region of clusters holding no fence of the
// namespace, none is taken meanwhile; in each other region holding some,
// every one was put after rev. others lists the other regions' fences put
// at or before rev, which must be confirmed or end first.
func (gs *Gates) fenceConds(g *gate, rev int64, clusters []string) (conds []metastore.Cmp, others []string, err error) {
	ctx, cancel := context.WithTimeout(gs.ctx, storeTimeout)
	kvs, err := gs.deps.Global.List(ctx, FencePrefix(g.ns))
	cancel()
	if err != nil {
		return nil, nil, err
	}
	conds = []metastore.Cmp{metastore.AtRev(nsKey(g.ns), rev)}
	holding := map[string]bool{}
	for _, kv := range kvs {
		rest := strings.TrimPrefix(kv.Key, FencePrefix(g.ns))
		region, _, _ := strings.Cut(rest, "/")
		if region == gs.cfg.Region {
			continue
		}
		if kv.Rev <= rev {
			others = append(others, rest)
		}
		if !holding[region] {
			holding[region] = true
			conds = append(conds, metastore.AllChangedAfter(FencePrefix(g.ns)+region+"/", rev))
		}
	}
	for _, c := range clusters {
		if c != gs.cfg.Region && !holding[c] {
			conds = append(conds, metastore.NoneUnder(FencePrefix(g.ns)+c+"/"))
		}
	}
	return conds, others, nil
}

// storeTimeout bounds one request to the global store.
const storeTimeout = 2 * time.Second

func nsKey(ns string) string {
	t, n, _ := strings.Cut(ns, "/")
	return policy.NamespaceKey(t, n)
}
