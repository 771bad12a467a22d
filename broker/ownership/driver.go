package ownership

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// retryDelay is how soon failed background work (a re-list after a watch
// reset, a load update) is tried again, and the first re-registration
// backoff.
const retryDelay = 200 * time.Millisecond

// pending is background work that failed and waits for the retry timer.
type pending struct {
	resyncOwned   bool
	relistBrokers bool
	publishLoad   bool
}

func (p pending) any() bool { return p.resyncOwned || p.relistBrokers || p.publishLoad }

// run is the registry's one goroutine: it applies watch events, publishes
// the load, notices lease loss, fires OnLost and re-registers.
func (r *Registry) run(ctx context.Context, ownCh, brkCh <-chan metastore.Event) {
	defer close(r.done)
	retry := time.NewTimer(retryDelay)
	retry.Stop()
	defer retry.Stop()
	var p pending
	work := func() {
		if p.resyncOwned {
			p.resyncOwned = !r.resyncOwned(ctx)
		}
		if p.relistBrokers {
			p.relistBrokers = r.relistBrokers(ctx)
		}
		if p.publishLoad {
			p.publishLoad = !r.publishLoad(ctx)
		}
		if p.any() {
			retry.Reset(retryDelay)
		}
	}
	for {
		r.mu.Lock()
		lease := r.lease
		r.mu.Unlock()
		var lost <-chan struct{}
		if lease != nil {
			lost = lease.Done()
		}
		select {
		case <-ctx.Done():
			return
		case <-lost:
			r.leaseLost(lease)
			r.reregister(ctx, lease)
		case ev, ok := <-ownCh:
			if !ok {
				return
			}
			if ev.Reset {
				p.resyncOwned = true
				work()
				continue
			}
			r.ownershipEvent(ev)
		case ev, ok := <-brkCh:
			if !ok {
				return
			}
			if ev.Reset {
				p.relistBrokers = true
				work()
				continue
			}
			r.brokerEvent(ev)
		case <-r.loadDirty:
			p.publishLoad = true
			work()
		case <-retry.C:
			work()
		}
	}
}

// leaseLost forgets every bundle held under lease and fires OnLost for the
// ones not being released.
func (r *Registry) leaseLost(lease *metastore.Lease) {
	r.mu.Lock()
	if r.lease != lease {
		r.mu.Unlock()
		return
	}
	r.lease = nil
	var lost []*owned
	for k, e := range r.owned {
		if e.lease == lease {
			delete(r.owned, k)
			if !e.releasing {
				lost = append(lost, e)
			}
		}
	}
	r.mu.Unlock()
	r.logger.Warn("lease lost; bundles lost, re-registering", "lease", lease.ID(), "bundles", len(lost))
	sort.Slice(lost, func(i, j int) bool {
		if lost[i].ns != lost[j].ns {
			return lost[i].ns < lost[j].ns
		}
		return lost[i].b.Lo < lost[j].b.Lo
	})
	for _, e := range lost {
		r.fireLost(e.ns, e.b)
	}
}

// reregister registers under a new lease, retrying with backoff until it
// succeeds or ctx ends. It first revokes the lost lease, because etcd may
// still hold keys under it (a restarted etcd extends leases by a TTL): our
// bundles are free for others at once rather than a TTL later.
func (r *Registry) reregister(ctx context.Context, old *metastore.Lease) {
	backoff := retryDelay
	revoked := false
	for ctx.Err() == nil {
		if !revoked {
			rctx, cancel := context.WithTimeout(ctx, r.ttl)
			revoked = old.Revoke(rctx) == nil
			cancel()
		}
		actx, cancel := context.WithTimeout(ctx, r.ttl)
		lease, err := r.register(actx, false)
		cancel()
		if err == nil {
			r.mu.Lock()
			closed := r.closed
			if !closed {
				r.lease = lease
			}
			r.mu.Unlock()
			if closed {
				rctx, cancel := context.WithTimeout(context.Background(), r.ttl)
				lease.Revoke(rctx)
				cancel()
				return
			}
			r.logger.Info("broker re-registered", "lease", lease.ID())
			return
		}
		r.logger.Warn("re-registration failed; retrying", "err", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, r.ttl)
	}
}

// ownershipEvent notices that someone else deleted or overwrote a key we
// own (our own Create is at e.rev; we never write the key again).
func (r *Registry) ownershipEvent(ev metastore.Event) {
	r.mu.Lock()
	e := r.owned[ev.Key]
	if e == nil || ev.Rev <= e.rev {
		r.mu.Unlock()
		return
	}
	delete(r.owned, ev.Key)
	r.mu.Unlock()
	r.markLoadDirty()
	if e.releasing {
		return
	}
	how := "overwritten"
	if ev.Deleted {
		how = "deleted"
	}
	r.logger.Warn("bundle lost: ownership key "+how, "namespace", e.ns, "bundle", e.b.String(), "rev", ev.Rev)
	r.fireLost(e.ns, e.b)
}

// resyncOwned checks after a watch reset that every key we own is still the
// one we created; false when etcd could not be read.
func (r *Registry) resyncOwned(ctx context.Context) bool {
	r.mu.Lock()
	snap := make(map[string]*owned, len(r.owned))
	for k, e := range r.owned {
		snap[k] = e
	}
	r.mu.Unlock()
	for key, e := range snap {
		gctx, cancel := context.WithTimeout(ctx, r.ttl)
		resp, err := r.meta.Client().Get(gctx, key)
		cancel()
		if err != nil {
			r.logger.Warn("ownership resync failed", "err", err)
			return false
		}
		if len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision == e.rev {
			continue
		}
		r.mu.Lock()
		still := r.owned[key] == e
		if still {
			delete(r.owned, key)
		}
		r.mu.Unlock()
		if still && !e.releasing {
			r.markLoadDirty()
			r.logger.Warn("bundle lost: ownership key changed while the watch was down", "namespace", e.ns, "bundle", e.b.String())
			r.fireLost(e.ns, e.b)
		}
	}
	return true
}

// relistBrokers re-reads the broker list after a watch reset; it returns
// whether it must be tried again.
func (r *Registry) relistBrokers(ctx context.Context) bool {
	lctx, cancel := context.WithTimeout(ctx, r.ttl)
	defer cancel()
	if _, err := r.listBrokers(lctx); err != nil {
		r.logger.Warn("broker re-list failed", "err", err)
		return true
	}
	return false
}

// brokerEvent applies one change of a broker registration to the cache.
func (r *Registry) brokerEvent(ev metastore.Event) {
	id := strings.TrimPrefix(ev.Key, r.brkPrefix)
	var info BrokerInfo
	if !ev.Deleted {
		if err := json.Unmarshal(ev.Value, &info); err != nil {
			r.logger.Warn("ignoring malformed broker registration", "key", ev.Key, "err", err)
			return
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Rev <= r.brokersRev {
		return // already in the list we read
	}
	if ev.Deleted {
		delete(r.brokers, id)
	} else {
		r.brokers[id] = info
	}
}

// publishLoad writes the owned bundle count into the registration; false
// when it must be tried again.
func (r *Registry) publishLoad(ctx context.Context) bool {
	r.mu.Lock()
	lease := r.lease
	info := r.self
	info.Load = r.ownedCountLocked()
	r.mu.Unlock()
	if lease == nil || leaseDone(lease) {
		return true // a new registration starts at load 0 with no bundles
	}
	val, _ := json.Marshal(info)
	pctx, cancel := context.WithTimeout(ctx, r.ttl)
	defer cancel()
	if _, err := lease.Put(pctx, r.selfKey, val); err != nil {
		r.logger.Warn("load update failed", "err", err)
		return leaseDone(lease)
	}
	return true
}

func (r *Registry) fireLost(ns string, b topic.Bundle) {
	if r.onLost != nil {
		r.onLost(ns, b)
	}
}
