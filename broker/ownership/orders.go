package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// StoredOrder is an Order as read from the metadata store: its bundle
// and the key's revision (for DeleteOrder).
type StoredOrder struct {
	Namespace string
	Bundle    topic.Bundle
	Order     Order
	Rev       int64
}

// IssueOrder writes order o for bundle b of ns under this broker's lease
// (the load manager on the leader calls it), replacing an older order of
// the bundle.
func (r *Registry) IssueOrder(ctx context.Context, ns string, b topic.Bundle, o Order) error {
	bk, err := bundleKey(ns, b)
	if err != nil {
		return err
	}
	r.mu.Lock()
	lease := r.leaseLocked()
	r.mu.Unlock()
	if lease == nil {
		return ErrNotRegistered
	}
	val, _ := json.Marshal(o)
	if _, err := lease.Put(ctx, r.ordPrefix+bk, val); err != nil {
		return fmt.Errorf("ownership: order %s %s: %w", o.Op, bk, err)
	}
	return nil
}

// Orders lists the region's load balancing orders and the revision they
// were read at; malformed ones are skipped.
func (r *Registry) Orders(ctx context.Context) ([]StoredOrder, int64, error) {
	l, err := r.meta.ListRev(ctx, r.ordPrefix)
	if err != nil {
		return nil, 0, fmt.Errorf("ownership: list orders: %w", err)
	}
	out := make([]StoredOrder, 0, len(l.KVs))
	for _, kv := range l.KVs {
		if so, ok := r.parseOrder(kv.Key, kv.Value, kv.Rev); ok {
			out = append(out, so)
		}
	}
	return out, l.Rev, nil
}

// WatchOrders streams the changes of the region's orders after revision
// rev (see metastore.Meta.Watch).
func (r *Registry) WatchOrders(ctx context.Context, rev int64) <-chan metastore.Event {
	return r.meta.Watch(ctx, r.ordPrefix, rev)
}

// ParseOrderEvent reads a watch event of WatchOrders; false for a
// deletion, a reset or a malformed order.
func (r *Registry) ParseOrderEvent(ev metastore.Event) (StoredOrder, bool) {
	if ev.Deleted || ev.Reset {
		return StoredOrder{}, false
	}
	return r.parseOrder(ev.Key, ev.Value, ev.Rev)
}

func (r *Registry) parseOrder(key string, val []byte, rev int64) (StoredOrder, bool) {
	var o Order
	if err := json.Unmarshal(val, &o); err != nil {
		r.logger.Warn("ignoring malformed load balancing order", "key", key, "err", err)
		return StoredOrder{}, false
	}
	ns, b, err := ParseBundleKey(strings.TrimPrefix(key, r.ordPrefix))
	if err != nil {
		r.logger.Warn("ignoring load balancing order of a malformed key", "key", key, "err", err)
		return StoredOrder{}, false
	}
	return StoredOrder{Namespace: ns, Bundle: b, Order: o, Rev: rev}, true
}

// DeleteOrder deletes an order if it is still the one read (rev); a
// newer order of the bundle is kept.
func (r *Registry) DeleteOrder(ctx context.Context, so StoredOrder) error {
	bk, err := bundleKey(so.Namespace, so.Bundle)
	if err != nil {
		return err
	}
	err = r.meta.DeleteIf(ctx, r.ordPrefix+bk, so.Rev)
	if err != nil && !errors.Is(err, metastore.ErrConflict) && !errors.Is(err, metastore.ErrNotFound) {
		return fmt.Errorf("ownership: delete order %s: %w", bk, err)
	}
	return nil
}

// readOrder reads the order of the bundle whose ownership key suffix is
// bk; nil when there is none or it cannot be read (placement then goes
// without it).
func (r *Registry) readOrder(ctx context.Context, bk string) (*Order, int64) {
	kv, err := r.meta.Get(ctx, r.ordPrefix+bk)
	if err != nil {
		if !errors.Is(err, metastore.ErrNotFound) {
			r.logger.Warn("reading the bundle's load balancing order failed; placing without it", "bundle", bk, "err", err)
		}
		return nil, 0
	}
	var o Order
	if json.Unmarshal(kv.Value, &o) != nil {
		return nil, 0
	}
	return &o, kv.Rev
}
