package metastore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Meta is the metadata store as components use it: every operation they
// perform on it. *Store implements it over etcd; package
// metastore/metafault wraps any Meta to fail chosen operations, which is
// how tests reach the error paths of the components above (the seam is
// the counterpart of bookie/vfs for the disk).
//
// Errors wrap the package's sentinels (ErrNotFound, ErrConflict,
// ErrExists, ErrNoLease, ErrCompacted) where one applies; anything else is
// a failure to reach the store, after which the operation may or may not
// have happened (re-read before acting on it).
//
// Read-modify-write helpers (Update, NextID) and registrations (Register)
// are functions over a Meta, so that a wrapper sees, and can fail, each of
// the reads and writes they are made of.
type Meta interface {
	// Get reads one key; ErrNotFound when it is absent.
	Get(ctx context.Context, key string) (KV, error)
	// List reads every key under prefix, in key order.
	List(ctx context.Context, prefix string) ([]KV, error)
	// ListKeys reads the keys under prefix, in key order, without values.
	ListKeys(ctx context.Context, prefix string) ([]string, error)
	// ListRev reads every key under prefix with the revision it was read at.
	ListRev(ctx context.Context, prefix string) (Listing, error)
	// Count counts the keys under prefix and returns the store's revision.
	Count(ctx context.Context, prefix string) (n, rev int64, err error)

	// Put writes key unconditionally and returns the new revision.
	Put(ctx context.Context, key string, value []byte) (int64, error)
	// Create writes key only if it is absent; ErrExists otherwise.
	Create(ctx context.Context, key string, value []byte) (int64, error)
	// CAS writes key only if its revision is still rev (0: absent);
	// ErrConflict otherwise.
	CAS(ctx context.Context, key string, value []byte, rev int64) (int64, error)
	// Delete removes key; an absent key is not an error.
	Delete(ctx context.Context, key string) error
	// DeleteIf removes key only if its revision is still rev; ErrConflict
	// otherwise.
	DeleteIf(ctx context.Context, key string, rev int64) error
	// DeleteExisting removes key and reports whether it existed.
	DeleteExisting(ctx context.Context, key string) (existed bool, rev int64, err error)
	// Txn applies ops atomically if every condition holds; ok reports
	// whether they held (and the ops were applied). rev is the store's
	// revision after the transaction.
	Txn(ctx context.Context, conds []Cmp, ops []Op) (ok bool, rev int64, err error)

	// Grant creates a lease with the given TTL (at least 1s) and keeps it
	// alive in the background; see Lease.
	Grant(ctx context.Context, ttl time.Duration) (*Lease, error)
	// PutLeased is Put with key attached to lease; ErrNoLease when the
	// lease has expired or was revoked.
	PutLeased(ctx context.Context, key string, value []byte, lease int64) (int64, error)
	// CreateLeased is Create with key attached to lease.
	CreateLeased(ctx context.Context, key string, value []byte, lease int64) (int64, error)
	// RevokeLease ends lease id, which need not be one of this process:
	// every key attached to it is deleted at once. A lease that no longer
	// exists is not an error.
	RevokeLease(ctx context.Context, id int64) error
	// LeaseLeft reads how long lease id, which need not be one of this
	// process, has left at the store, in whole seconds rounded down (as
	// etcd keeps it), and the TTL it was granted; ErrNoLease when it has
	// ended. A holder renews its lease well within the TTL, so a lease
	// with a second or more missing has not been renewed for a second.
	LeaseLeft(ctx context.Context, id int64) (left, granted time.Duration, err error)

	// Watch streams changes under prefix after revision rev (0: from now)
	// until ctx ends, resuming by itself when the watch breaks; see
	// Store.Watch.
	Watch(ctx context.Context, prefix string, rev int64) <-chan Event
	// WatchProgress opens a watch that does not resume by itself and
	// delivers whole batches and progress notifications; see ProgressWatch.
	WatchProgress(ctx context.Context, prefix string, rev int64) ProgressWatch
}

var _ Meta = (*Store)(nil)

// Update reads key, applies fn to its value (nil when absent) and writes
// the result with compare-and-swap, retrying on conflict until ctx ends. fn
// may be called several times and must be pure. It returns the value
// written and its revision.
func Update(ctx context.Context, m Meta, key string, fn func(old []byte) ([]byte, error)) ([]byte, int64, error) {
	for {
		var old []byte
		var rev int64
		kv, err := m.Get(ctx, key)
		switch {
		case err == nil:
			old, rev = kv.Value, kv.Rev
		case errors.Is(err, ErrNotFound):
		default:
			return nil, 0, err
		}
		val, err := fn(old)
		if err != nil {
			return nil, 0, err
		}
		newRev, err := m.CAS(ctx, key, val, rev)
		if err == nil {
			return val, newRev, nil
		}
		if !errors.Is(err, ErrConflict) {
			return nil, 0, err
		}
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
	}
}

// NextID atomically increments the counter at key and returns the new
// value (the first call returns 1). IDs are never reused.
func NextID(ctx context.Context, m Meta, key string) (uint64, error) {
	var id uint64
	_, _, err := Update(ctx, m, key, func(old []byte) ([]byte, error) {
		cur := uint64(0)
		if old != nil {
			v, err := strconv.ParseUint(string(old), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("metastore: counter %s holds %q, not a number", key, old)
			}
			cur = v
		}
		id = cur + 1
		return []byte(strconv.FormatUint(id, 10)), nil
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}
