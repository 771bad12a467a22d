package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// retryDelay is how soon failed background work (a re-list after a watch
// reset, a load update) is tried again.
const retryDelay = 200 * time.Millisecond

// pending is background work that failed and waits for the retry timer.
type pending struct {
	resyncOwned   bool
	relistBrokers bool
	publishLoad   bool
}

func (p pending) any() bool { return p.resyncOwned || p.relistBrokers || p.publishLoad }

// run is the registry's goroutine: it applies watch events, samples and
// publishes the load and fires OnLost for bundles whose keys changed. (The registration
// notices a lost lease and registers again by itself; leaseLost handles
// the bundles.)
func (r *Registry) run(ctx context.Context, ownCh, brkCh <-chan metastore.Event) {
	defer close(r.done)
	retry := time.NewTimer(retryDelay)
	retry.Stop()
	defer retry.Stop()
	var p pending
	sample := time.NewTicker(r.loadCfg.Interval)
	defer sample.Stop()
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
		select {
		case <-ctx.Done():
			return
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
		case <-sample.C:
			if r.sampleLoad() {
				p.publishLoad = true
				work()
			}
		}
	}
}

// leaseLost forgets every bundle held under lease and fires OnLost for
// the ones not being released. The registration calls it (OnLost) when
// it loses the lease, before registering again.
func (r *Registry) leaseLost(lease *metastore.Lease) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
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
		kv, err := r.meta.Get(gctx, key)
		cancel()
		if err != nil && !errors.Is(err, metastore.ErrNotFound) {
			r.logger.Warn("ownership resync failed", "err", err)
			return false
		}
		if err == nil && kv.Rev == e.rev {
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

// publishLoad writes the owned bundle count (and the draining mark) into
// the registration; false when it must be tried again.
func (r *Registry) publishLoad(ctx context.Context) bool {
	pctx, cancel := context.WithTimeout(ctx, r.ttl)
	defer cancel()
	err := r.reg.Refresh(pctx)
	switch {
	case err == nil, errors.Is(err, metastore.ErrNotRegistered):
		return true // a new registration writes the state of its time
	case !r.Registered():
		return true
	}
	r.logger.Warn("load update failed", "err", err)
	return false
}

func (r *Registry) fireLost(ns string, b topic.Bundle) {
	if r.onLost != nil {
		r.fireMu.Lock()
		defer r.fireMu.Unlock()
		r.onLost(ns, b)
	}
}
