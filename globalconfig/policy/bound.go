package policy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/metastore"
)

// StoreTimeout bounds each request the configuration stores (this
// package, globalconfig/schema, globalconfig/deletes) make of the global
// configuration store through Bound, and the wait for the cache after a
// write (Settle). A write makes a few requests (read what it checks,
// commit, read the revision), each one round trip to the store's leader
// in a healthy store; while the store is unreachable the first of them
// gives up after StoreTimeout, so an admin write is answered 503 within
// it instead of waiting for the store to return (docs/globalconfig.md,
// "Writes while the global store is unreachable").
const StoreTimeout = 4 * time.Second

// ErrUnreachable: the global configuration store gave no answer within
// StoreTimeout (cut off, stalled, down or without a quorum). Whether a
// write that failed with it was applied is unknown: the request may have
// reached the store before the answer was lost. Reads are served from the
// region's cache meanwhile.
var ErrUnreachable = errkind.Sentinel(errkind.ErrServiceNotReady, "policy: global configuration store unreachable") // 503, retriable

// Bound returns the global configuration store m with every request
// (reads, writes, transactions, leases granted and revoked) bounded by
// timeout: when a request gets no answer in time while its caller's
// context is still live, it fails with an error wrapping ErrUnreachable
// (and context.DeadlineExceeded). Watches are passed through unbounded:
// they are meant to outlive an outage.
func Bound(m metastore.Meta, timeout time.Duration) metastore.Meta {
	return &bounded{m: m, timeout: timeout}
}

type bounded struct {
	m       metastore.Meta
	timeout time.Duration
}

var _ metastore.Meta = (*bounded)(nil)

// call runs op under the bound and names the store when the bound, not
// the caller, ended it.
func call[T any](b *bounded, ctx context.Context, op func(ctx context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	v, err := op(cctx)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%w (no answer within %v): %w", ErrUnreachable, b.timeout, err)
	}
	return v, err
}

// call2 is call for an operation with two results.
func call2[T, U any](b *bounded, ctx context.Context, op func(ctx context.Context) (T, U, error)) (T, U, error) {
	type pair struct {
		t T
		u U
	}
	p, err := call(b, ctx, func(ctx context.Context) (pair, error) {
		t, u, err := op(ctx)
		return pair{t, u}, err
	})
	return p.t, p.u, err
}

func (b *bounded) Get(ctx context.Context, key string) (metastore.KV, error) {
	return call(b, ctx, func(ctx context.Context) (metastore.KV, error) { return b.m.Get(ctx, key) })
}

func (b *bounded) List(ctx context.Context, prefix string) ([]metastore.KV, error) {
	return call(b, ctx, func(ctx context.Context) ([]metastore.KV, error) { return b.m.List(ctx, prefix) })
}

func (b *bounded) ListKeys(ctx context.Context, prefix string) ([]string, error) {
	return call(b, ctx, func(ctx context.Context) ([]string, error) { return b.m.ListKeys(ctx, prefix) })
}

func (b *bounded) ListRev(ctx context.Context, prefix string) (metastore.Listing, error) {
	return call(b, ctx, func(ctx context.Context) (metastore.Listing, error) { return b.m.ListRev(ctx, prefix) })
}

func (b *bounded) Count(ctx context.Context, prefix string) (n, rev int64, err error) {
	return call2(b, ctx, func(ctx context.Context) (int64, int64, error) { return b.m.Count(ctx, prefix) })
}

func (b *bounded) Put(ctx context.Context, key string, value []byte) (int64, error) {
	return call(b, ctx, func(ctx context.Context) (int64, error) { return b.m.Put(ctx, key, value) })
}

func (b *bounded) Create(ctx context.Context, key string, value []byte) (int64, error) {
	return call(b, ctx, func(ctx context.Context) (int64, error) { return b.m.Create(ctx, key, value) })
}

func (b *bounded) CAS(ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	return call(b, ctx, func(ctx context.Context) (int64, error) { return b.m.CAS(ctx, key, value, rev) })
}

func (b *bounded) Delete(ctx context.Context, key string) error {
	_, err := call(b, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, b.m.Delete(ctx, key) })
	return err
}

func (b *bounded) DeleteIf(ctx context.Context, key string, rev int64) error {
	_, err := call(b, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, b.m.DeleteIf(ctx, key, rev) })
	return err
}

func (b *bounded) DeleteExisting(ctx context.Context, key string) (bool, int64, error) {
	return call2(b, ctx, func(ctx context.Context) (bool, int64, error) { return b.m.DeleteExisting(ctx, key) })
}

func (b *bounded) Txn(ctx context.Context, conds []metastore.Cmp, ops []metastore.Op) (bool, int64, error) {
	return call2(b, ctx, func(ctx context.Context) (bool, int64, error) { return b.m.Txn(ctx, conds, ops) })
}

// Grant bounds the request that creates the lease; the lease's keys are
// written through b (metastore.Lease.Via), its renewals are the store's.
func (b *bounded) Grant(ctx context.Context, ttl time.Duration) (*metastore.Lease, error) {
	l, err := call(b, ctx, func(ctx context.Context) (*metastore.Lease, error) { return b.m.Grant(ctx, ttl) })
	if err != nil {
		return nil, err
	}
	return l.Via(b), nil
}

func (b *bounded) PutLeased(ctx context.Context, key string, value []byte, lease int64) (int64, error) {
	return call(b, ctx, func(ctx context.Context) (int64, error) { return b.m.PutLeased(ctx, key, value, lease) })
}

func (b *bounded) CreateLeased(ctx context.Context, key string, value []byte, lease int64) (int64, error) {
	return call(b, ctx, func(ctx context.Context) (int64, error) { return b.m.CreateLeased(ctx, key, value, lease) })
}

func (b *bounded) RevokeLease(ctx context.Context, id int64) error {
	_, err := call(b, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, b.m.RevokeLease(ctx, id) })
	return err
}

func (b *bounded) LeaseLeft(ctx context.Context, id int64) (left, granted time.Duration, err error) {
	return call2(b, ctx, func(ctx context.Context) (time.Duration, time.Duration, error) { return b.m.LeaseLeft(ctx, id) })
}

func (b *bounded) Watch(ctx context.Context, prefix string, rev int64) <-chan metastore.Event {
	return b.m.Watch(ctx, prefix, rev)
}

func (b *bounded) WatchProgress(ctx context.Context, prefix string, rev int64) metastore.ProgressWatch {
	return b.m.WatchProgress(ctx, prefix, rev)
}

// Settle waits until cache reflects revision rev, the revision of a write
// the store has answered, so that a read that follows the write sees it;
// at most StoreTimeout, since the write is done either way and a cache
// that is behind catches up by itself. A nil cache: nothing to wait for.
func Settle(ctx context.Context, cache Reader, rev int64) {
	if cache == nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, StoreTimeout)
	defer cancel()
	_ = cache.WaitRev(wctx, rev)
}
