// Package globalconfig owns a region's watched, cached view of the global
// configuration store (the keys under /isobar-global/): it loads a snapshot,
// follows it with an etcd watch, keeps serving reads from memory when the
// global store is unreachable, converges when it returns, and can keep a
// local copy on disk for restarts during an outage.
package globalconfig

import (
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/metric"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/internal/atomicfile"
	"github.com/isobar-mq/isobar/metastore"
)

// Errors, checked with errors.Is.
var (
	ErrClosed      = errors.New("globalconfig: closed")
	ErrBadSnapshot = errors.New("globalconfig: bad persisted snapshot")
)

// KV is a cached key with its value and the revision of its last change
// (etcd's ModRevision, usable for CAS against the global store).
type KV = metastore.KV

// Event is a change delivered to a subscriber. A Resync event (Key empty,
// Resync true) means events were dropped because the subscriber fell behind:
// the subscriber must re-read its prefix with List; Rev is the cache
// revision when the events were dropped.
type Event struct {
	Key     string
	Value   []byte
	Rev     int64
	Deleted bool
	Resync  bool
}

// Stats are counters of the cache since Start.
type Stats struct {
	// WatchRestarts counts watches that ended (compaction, error, closed
	// channel) and were replaced by a re-list and a new watch.
	WatchRestarts int64
	// Resyncs counts re-lists swapped in after the first load.
	Resyncs int64
	// Events counts watch events applied.
	Events int64
	// Overflows counts Resync events sent to subscribers that fell behind.
	Overflows int64
	// LastError is the most recent list, watch or persist error, nil if
	// none happened; LastErrorAt is when it happened.
	LastError   error
	LastErrorAt time.Time
}

type entry struct {
	value []byte
	rev   int64
}

type subscriber struct {
	prefix string
	ch     chan Event
}

// snapshot is a full listing of the prefix at one revision.
type snapshot struct {
	data      map[string]entry
	rev       int64
	clusterID uint64
}

// Cache is a region's cached view of the global configuration store. It is
// safe for concurrent use. Values returned by Get and List are shared with
// the cache and must not be modified.
type Cache struct {
	metricsReg metric.Registration

	meta metastore.Meta // the global store; not closed by the cache
	cfg  Config
	log  *slog.Logger

	nudge    chan struct{} // cap 1: ask for a progress notification now
	persistc chan struct{} // cap 1: the data changed, persist it

	stopRun     context.CancelFunc
	stopPersist context.CancelFunc
	runWG       sync.WaitGroup
	persistWG   sync.WaitGroup
	closeOnce   sync.Once

	// mu guards the fields below. Writers hold it while applying a whole
	// watch response or swapping a snapshot, so readers never see half of
	// either.
	mu          sync.RWMutex
	data        map[string]entry
	rev         int64
	revCh       chan struct{} // closed and replaced whenever rev grows
	clusterID   uint64
	lastConfirm time.Time
	broken      bool // the watch is down; cleared by the next confirmation
	listed      bool // a List from the store has been installed
	closed      bool
	subs        map[*subscriber]struct{}
	stats       Stats
	changes     uint64 // data changes so far, for persistence
}

// Start loads the prefix from the global store, reached through meta,
// and follows it until Close.
//
// If the store cannot be listed, Start retries with backoff until ctx ends
// and then returns an error, unless Config.Persist holds a usable copy: then
// the first failed attempt is enough, Start returns a cache serving the
// persisted copy (Synced false) and keeps trying in the background.
func Start(ctx context.Context, meta metastore.Meta, cfg Config) (*Cache, error) {
	if meta == nil {
		return nil, errors.New("globalconfig: no connection to the global store")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Cache{
		meta:     meta,
		cfg:      cfg,
		log:      cfg.Logger.With("prefix", cfg.Prefix),
		nudge:    make(chan struct{}, 1),
		persistc: make(chan struct{}, 1),
		data:     map[string]entry{},
		revCh:    make(chan struct{}),
		subs:     map[*subscriber]struct{}{},
		broken:   true,
	}
	loaded := false
	if cfg.Persist != "" {
		if err := os.MkdirAll(cfg.Persist, 0o700); err != nil {
			return nil, fmt.Errorf("globalconfig: persist dir: %w", err)
		}
		s, err := loadSnapshot(cfg.Persist, cfg.Prefix)
		switch {
		case err == nil:
			c.loadPersisted(s)
			loaded = true
			c.log.Info("loaded persisted global config", "revision", s.Revision, "keys", len(s.KVs), "syncedAt", s.SyncedAt)
		case errors.Is(err, fs.ErrNotExist):
		default:
			c.log.Warn("ignoring persisted global config", "err", err)
		}
	}

	backoff := c.minBackoff()
	for {
		s, err := c.list(ctx)
		if err == nil {
			c.install(s)
			break
		}
		c.recordError(err)
		if loaded {
			c.log.Warn("global config store unreachable; serving the persisted copy", "err", err)
			break
		}
		if !c.sleep(ctx, &backoff) {
			return nil, fmt.Errorf("globalconfig: initial load of %s: %w", cfg.Prefix, errors.Join(ctx.Err(), err))
		}
	}

	if cfg.MeterProvider != nil {
		reg, err := c.registerMetrics(cfg.MeterProvider)
		if err != nil {
			return nil, fmt.Errorf("globalconfig: metrics: %w", err)
		}
		c.metricsReg = reg
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	persistCtx, stopPersist := context.WithCancel(context.Background())
	c.stopRun, c.stopPersist = stopRun, stopPersist
	c.runWG.Add(1)
	go c.run(runCtx)
	if cfg.Persist != "" {
		c.persistWG.Add(1)
		go c.persistLoop(persistCtx)
		c.signalPersist()
	}
	return c, nil
}

// Close stops following the store, writes the persisted copy one last time
// (when Persist is set), closes every subscription channel and waits for the
// cache's goroutines. Reads keep answering from the last state.
func (c *Cache) Close() error {
	c.closeOnce.Do(func() {
		if c.metricsReg != nil {
			_ = c.metricsReg.Unregister()
		}
		c.stopRun()
		c.runWG.Wait()
		c.stopPersist()
		c.persistWG.Wait()
		c.mu.Lock()
		c.closed = true
		for s := range c.subs {
			close(s.ch)
		}
		clear(c.subs)
		close(c.revCh) // wake WaitRev callers; they see closed
		c.revCh = make(chan struct{})
		c.mu.Unlock()
	})
	return nil
}

// Get returns key's value and revision, and whether it is present.
func (c *Cache) Get(key string) ([]byte, int64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.data[key]
	return e.value, e.rev, ok
}

// List returns every cached key under prefix, sorted by key.
func (c *Cache) List(prefix string) []KV {
	c.mu.RLock()
	out := make([]KV, 0)
	for k, e := range c.data {
		if strings.HasPrefix(k, prefix) {
			out = append(out, KV{Key: k, Value: e.value, Rev: e.rev})
		}
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Rev is the store revision the cache reflects: every change to the prefix
// up to Rev has been applied. It only grows (see docs/globalconfig.md for
// the one exception: a store restored to an older revision).
func (c *Cache) Rev() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rev
}

// Age is the time since the cache last confirmed it was in sync with the
// store (a list, a watch event or a progress notification). For a cache
// started from its persisted copy it counts from when that copy was last
// in sync.
func (c *Cache) Age() time.Duration {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cfg.Now().Sub(c.lastConfirm)
}

// Synced reports whether the watch is up and confirmed in sync within the
// last Config.StaleAfter.
func (c *Cache) Synced() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return !c.broken && !c.closed && c.cfg.Now().Sub(c.lastConfirm) <= c.cfg.StaleAfter
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.stats
}

// WaitRev returns once the cache reflects at least revision rev (for
// example the revision a writer got back from a CAS on the global store), so
// that the writer reads its own write from the cache. It returns ctx's error
// if ctx ends first and ErrClosed once the cache is closed.
func (c *Cache) WaitRev(ctx context.Context, rev int64) error {
	asked := false
	for {
		c.mu.RLock()
		cur, ch, closed := c.rev, c.revCh, c.closed
		c.mu.RUnlock()
		if cur >= rev {
			return nil
		}
		if closed {
			return ErrClosed
		}
		if !asked {
			// The revision may belong to a key outside the prefix: a
			// progress notification moves the cache past it.
			asked = true
			select {
			case c.nudge <- struct{}{}:
			default:
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("globalconfig: wait for revision %d (at %d): %w", rev, cur, ctx.Err())
		}
	}
}

// Subscribe delivers the changes to keys under prefix, in revision order,
// until cancel is called or the cache is closed; then the channel is closed.
//
// The channel holds Config.SubscriberBuffer events. The cache never blocks
// on a subscriber: when only one slot is left it puts a single Resync event
// there and drops further events until the subscriber catches up. A
// subscriber that receives Resync must re-read List(prefix), which reflects
// every dropped event. When the cache re-lists the store (after compaction
// or an outage), subscribers get the differences as ordinary events.
func (c *Cache) Subscribe(prefix string) (<-chan Event, func()) {
	s := &subscriber{prefix: prefix, ch: make(chan Event, c.cfg.SubscriberBuffer)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		close(s.ch)
		return s.ch, func() {}
	}
	c.subs[s] = struct{}{}
	return s.ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.subs[s]; ok {
			delete(c.subs, s)
			close(s.ch)
		}
	}
}

// deliverLocked queues ev for every interested subscriber without blocking.
// c.mu must be held for writing: it makes this the only sender.
func (c *Cache) deliverLocked(ev Event) {
	for s := range c.subs {
		if !strings.HasPrefix(ev.Key, s.prefix) {
			continue
		}
		n, capacity := len(s.ch), cap(s.ch)
		switch {
		case n < capacity-1:
			s.ch <- ev
		case n == capacity-1:
			// The last slot takes a Resync; ev is already in the cache.
			s.ch <- Event{Resync: true, Rev: c.rev}
			c.stats.Overflows++
		default:
			// Full: the channel ends with an unread Resync that covers ev.
		}
	}
}

// loadPersisted installs a persisted copy at Start.
func (c *Cache) loadPersisted(s fileSnapshot) {
	data := make(map[string]entry, len(s.KVs))
	for _, kv := range s.KVs {
		data[kv.Key] = entry{value: kv.Value, rev: kv.Rev}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.data, c.rev, c.clusterID, c.lastConfirm = data, s.Revision, s.ClusterID, s.SyncedAt
}

// list reads the whole prefix and the revision it was read at.
func (c *Cache) list(ctx context.Context) (snapshot, error) {
	lctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	l, err := c.meta.ListRev(lctx, c.cfg.Prefix)
	if err != nil {
		return snapshot{}, fmt.Errorf("globalconfig: list %s: %w", c.cfg.Prefix, err)
	}
	s := snapshot{data: make(map[string]entry, len(l.KVs)), rev: l.Rev, clusterID: l.ClusterID}
	for _, kv := range l.KVs {
		s.data[kv.Key] = entry{value: kv.Value, rev: kv.Rev}
	}
	return s, nil
}

// install swaps in a fresh listing and tells subscribers what changed.
func (c *Cache) install(s snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clusterID != 0 && s.clusterID != c.clusterID {
		c.log.Warn("global config store is a different etcd cluster than before", "was", c.clusterID, "now", s.clusterID)
	}
	if s.rev < c.rev {
		c.log.Warn("global config store is at an older revision than the cache; adopting it", "cache", c.rev, "store", s.rev)
	}
	old := c.data
	c.data, c.clusterID = s.data, s.clusterID
	c.setRevLocked(s.rev, true)
	if c.listed {
		c.stats.Resyncs++
	}
	c.listed = true
	c.confirmLocked()
	changed := false
	for k := range old {
		if _, ok := s.data[k]; !ok {
			changed = true
			c.deliverLocked(Event{Key: k, Rev: s.rev, Deleted: true})
		}
	}
	keys := make([]string, 0, len(s.data))
	for k, e := range s.data {
		if o, ok := old[k]; !ok || o.rev != e.rev || string(o.value) != string(e.value) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		changed = true
		e := s.data[k]
		c.deliverLocked(Event{Key: k, Value: e.value, Rev: e.rev})
	}
	if changed || c.changes == 0 {
		c.changes++
		c.signalPersist()
	}
}

// apply applies one watch batch: all its events, atomically for readers.
func (c *Cache) apply(evs []metastore.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range evs {
		out := Event{Key: ev.Key, Rev: ev.Rev}
		if ev.Deleted {
			delete(c.data, ev.Key)
			out.Deleted = true
		} else {
			c.data[ev.Key] = entry{value: ev.Value, rev: ev.Rev}
			out.Value = ev.Value
		}
		c.stats.Events++
		c.setRevLocked(ev.Rev, false)
		c.deliverLocked(out)
	}
	c.confirmLocked()
	c.changes++
	c.signalPersist()
}

// confirm records a progress notification: every change up to rev has been
// delivered on the watch.
func (c *Cache) confirm(rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setRevLocked(rev, false)
	c.confirmLocked()
}

func (c *Cache) confirmLocked() {
	c.lastConfirm = c.cfg.Now()
	if c.broken {
		c.log.Info("global config cache in sync", "revision", c.rev)
	}
	c.broken = false
}

// setRevLocked moves the revision forward (or anywhere when force) and wakes
// WaitRev callers.
func (c *Cache) setRevLocked(rev int64, force bool) {
	if rev == c.rev || (rev < c.rev && !force) {
		return
	}
	c.rev = rev
	close(c.revCh)
	c.revCh = make(chan struct{})
}

func (c *Cache) recordError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.LastError, c.stats.LastErrorAt = err, c.cfg.Now()
}

// watchEnded records a watch that stopped.
func (c *Cache) watchEnded(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.WatchRestarts++
	c.stats.LastError, c.stats.LastErrorAt = err, c.cfg.Now()
	c.broken = true
	c.log.Warn("global config watch ended; re-listing", "revision", c.rev, "err", err)
}

func (c *Cache) minBackoff() time.Duration {
	return min(100*time.Millisecond, c.cfg.MaxBackoff)
}

// sleep waits *backoff (doubling it up to MaxBackoff); false if ctx ended.
func (c *Cache) sleep(ctx context.Context, backoff *time.Duration) bool {
	t := time.NewTimer(*backoff)
	defer t.Stop()
	*backoff = min(2**backoff, c.cfg.MaxBackoff)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// run follows the store: list when needed, watch from the listed revision,
// and on any end of the watch re-list and re-watch with backoff.
func (c *Cache) run(ctx context.Context) {
	defer c.runWG.Done()
	c.mu.RLock()
	needList := !c.listed
	c.mu.RUnlock()
	backoff := c.minBackoff()
	for ctx.Err() == nil {
		if needList {
			s, err := c.list(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				c.recordError(err)
				if !c.sleep(ctx, &backoff) {
					return
				}
				continue
			}
			c.install(s)
			needList = false
		}
		healthy, err := c.watch(ctx, c.Rev()+1)
		if ctx.Err() != nil {
			return
		}
		c.watchEnded(err)
		needList = true
		if healthy {
			backoff = c.minBackoff()
		}
		if !c.sleep(ctx, &backoff) {
			return
		}
	}
}

// watch applies changes after revision from-1 until the watch ends. healthy
// reports whether it delivered anything (so the backoff can start over).
func (c *Cache) watch(ctx context.Context, from int64) (healthy bool, err error) {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	w := c.meta.WatchProgress(wctx, c.cfg.Prefix, from)
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.requestProgress(wctx, w)
	}()
	for {
		b, err := w.Next(ctx)
		if err != nil {
			return healthy, fmt.Errorf("globalconfig: %w", err)
		}
		healthy = true
		if b.Progress {
			c.confirm(b.Rev)
			continue
		}
		c.apply(b.Events)
	}
}

// requestProgress asks the store, every ProgressInterval and when nudged,
// to confirm that watch w is in sync; the answer arrives on the watch as a
// progress notification. It runs until wctx ends.
func (c *Cache) requestProgress(wctx context.Context, w metastore.ProgressWatch) {
	t := time.NewTicker(c.cfg.ProgressInterval)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(wctx, c.cfg.RequestTimeout)
		err := w.RequestProgress(rctx)
		cancel()
		if err != nil && wctx.Err() == nil {
			c.log.Debug("progress request failed", "err", err)
		}
		select {
		case <-wctx.Done():
			return
		case <-t.C:
		case <-c.nudge:
		}
	}
}

func (c *Cache) signalPersist() {
	select {
	case c.persistc <- struct{}{}:
	default:
	}
}

// persistLoop writes the persisted copy at most once per PersistDelay after
// changes, and once more when ctx ends.
func (c *Cache) persistLoop(ctx context.Context) {
	defer c.persistWG.Done()
	var written uint64
	for {
		select {
		case <-ctx.Done():
			c.persist(&written)
			return
		case <-c.persistc:
		}
		t := time.NewTimer(c.cfg.PersistDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			c.persist(&written)
			return
		case <-t.C:
		}
		c.persist(&written)
	}
}

// persist writes the current state if it changed since *written.
func (c *Cache) persist(written *uint64) {
	c.mu.RLock()
	changes := c.changes
	if changes == *written {
		c.mu.RUnlock()
		return
	}
	s := fileSnapshot{Prefix: c.cfg.Prefix, ClusterID: c.clusterID, Revision: c.rev, SyncedAt: c.lastConfirm.UTC(), KVs: make([]fileKV, 0, len(c.data))}
	for k, e := range c.data {
		s.KVs = append(s.KVs, fileKV{Key: k, Value: e.value, Rev: e.rev})
	}
	c.mu.RUnlock()
	sort.Slice(s.KVs, func(i, j int) bool { return s.KVs[i].Key < s.KVs[j].Key })
	b, err := encodeSnapshot(s)
	if err == nil {
		err = atomicfile.Write(filepath.Join(c.cfg.Persist, SnapshotFile), b, 0o600)
	}
	if err != nil {
		err = fmt.Errorf("globalconfig: persist to %s: %w", c.cfg.Persist, err)
		c.recordError(err)
		c.log.Error("persisting global config failed", "err", err)
		return
	}
	*written = changes
}
