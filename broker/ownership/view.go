package ownership

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/metastore"
)

// View is a read-only copy of a region's broker registrations, kept up
// to date by a watch, for processes that need the live brokers without
// being one (the proxy). It is safe for concurrent use.
type View struct {
	meta   metastore.Meta
	prefix string
	logger *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	brokers map[string]BrokerInfo // by id
	rev     int64                 // watch events at or below it are already in brokers
}

// WatchBrokers lists the brokers of region and watches their
// registrations until Close. It fails when the first listing does.
func WatchBrokers(ctx context.Context, meta metastore.Meta, region string, logger *slog.Logger) (*View, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	v := &View{meta: meta, prefix: BrokersPrefix(region), logger: logger, done: make(chan struct{})}
	if err := v.list(ctx); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	v.cancel = cancel
	ch := meta.Watch(wctx, v.prefix, v.rev+1)
	go v.run(wctx, ch)
	return v, nil
}

// list replaces the copy with the store's.
func (v *View) list(ctx context.Context) error {
	l, err := v.meta.ListRev(ctx, v.prefix)
	if err != nil {
		return fmt.Errorf("ownership: list brokers: %w", err)
	}
	m := make(map[string]BrokerInfo, len(l.KVs))
	for _, kv := range l.KVs {
		var info BrokerInfo
		if err := json.Unmarshal(kv.Value, &info); err != nil {
			v.logger.Warn("ignoring malformed broker registration", "key", kv.Key, "err", err)
			continue
		}
		m[strings.TrimPrefix(kv.Key, v.prefix)] = info
	}
	v.mu.Lock()
	v.brokers, v.rev = m, l.Rev
	v.mu.Unlock()
	return nil
}

// run applies the watch's events; after a reset it lists again, retrying
// until it succeeds.
func (v *View) run(ctx context.Context, ch <-chan metastore.Event) {
	defer close(v.done)
	for ev := range ch {
		if !ev.Reset {
			v.apply(ev)
			continue
		}
		for ctx.Err() == nil {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := v.list(lctx)
			cancel()
			if err == nil {
				break
			}
			v.logger.Warn("broker re-list failed", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(retryDelay):
			}
		}
	}
}

func (v *View) apply(ev metastore.Event) {
	id := strings.TrimPrefix(ev.Key, v.prefix)
	var info BrokerInfo
	if !ev.Deleted {
		if err := json.Unmarshal(ev.Value, &info); err != nil {
			v.logger.Warn("ignoring malformed broker registration", "key", ev.Key, "err", err)
			return
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if ev.Rev <= v.rev {
		return
	}
	if ev.Deleted {
		delete(v.brokers, id)
	} else {
		v.brokers[id] = info
	}
}

// Brokers returns the live brokers, by id.
func (v *View) Brokers() []BrokerInfo {
	v.mu.Lock()
	out := make([]BrokerInfo, 0, len(v.brokers))
	for _, b := range v.brokers {
		out = append(out, b)
	}
	v.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Close stops the watch.
func (v *View) Close() {
	v.cancel()
	<-v.done
}
