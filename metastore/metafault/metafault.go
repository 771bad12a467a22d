// Package metafault is the metadata store's fault-injection seam for
// tests, the counterpart of bookie/vfs's ErrorFS: Wrap puts a Meta in
// front of any metastore.Meta that consults an Injector before every
// operation and, when it returns an error, fails the operation without
// performing it. It also counts the operations by kind.
//
// Components hold a metastore.Meta (bookie.Deps.Meta, ledger.Config.Meta,
// mledger.Deps.Meta, broker.Deps.Meta, ownership.Deps.Meta,
// policy.Config.Meta, replicator.Deps.Meta, globalconfig.Config.Meta), so
// a test hands them a wrapper instead of the store:
//
//	fm := metafault.Wrap(cluster.Meta, nil)
//	rule := metafault.Always("/isobar/test/topics/", metafault.OpCAS)
//	fm.Set(rule) // from now on every CAS under topics/ fails
//	...
//	fm.Set(nil)  // the fault clears
//
// Leases granted through the wrapper write and revoke through it too
// (metastore.Lease.Via), so keys put under a lease, and registrations
// (metastore.Register), can be failed like any other write.
package metafault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/internal/faultrule"
	"github.com/isobar-mq/isobar/metastore"
)

// ErrInjected is the error a Rule injects by default.
var ErrInjected = errors.New("metafault: injected error")

// Op is the kind of an operation, as seen by an Injector.
type Op uint8

// Operation kinds, with the key an Injector sees.
const (
	OpGet       Op = iota + 1 // Get: the key
	OpList                    // List, ListKeys, ListRev, Count: the prefix
	OpPut                     // Put, PutLeased (Lease.Put): the key
	OpCreate                  // Create, CreateLeased (Lease.Create): the key
	OpCAS                     // CAS: the key
	OpDelete                  // Delete, DeleteIf, DeleteExisting: the key
	OpTxn                     // Txn: the first key it writes, else the first it compares
	OpGrant                   // Grant: ""
	OpRevoke                  // RevokeLease, Lease.Revoke: ""
	OpWatch                   // each ProgressWatch.Next: the prefix (an error ends the watch)
	OpProgress                // ProgressWatch.RequestProgress: the prefix
	OpLeaseLeft               // LeaseLeft: ""
	// Watch (the resuming watch) is counted under OpWatch when opened but
	// never failed: it has no error to report and resumes by itself.
	numOps
)

var opNames = [...]string{
	OpGet: "get", OpList: "list", OpPut: "put", OpCreate: "create", OpCAS: "cas", OpDelete: "delete",
	OpTxn: "txn", OpGrant: "grant", OpRevoke: "revoke", OpWatch: "watch", OpProgress: "progress",
	OpLeaseLeft: "lease-left",
}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return "op?"
}

// Injector decides, for every operation of a wrapped Meta, whether it
// fails. It is called before the operation reaches the inner Meta, from
// whatever goroutine performs it; it may also block (to stall an
// operation) or record something.
type Injector interface {
	MaybeError(op Op, key string) error
}

// InjectorFunc adapts a function to an Injector.
type InjectorFunc func(op Op, key string) error

// MaybeError calls f.
func (f InjectorFunc) MaybeError(op Op, key string) error { return f(op, key) }

// Rule fails the Nth operation (1-based) among those that match it: of a
// kind in Ops (empty: any) on a key starting with Prefix (empty: any). It
// counts the matching operations. Set the exported fields before first
// use.
type Rule struct {
	N      int64  // which matching operation fails; <= 0: none, only count
	Ops    []Op   // kinds that match; empty: all
	Prefix string // keys that match; empty: all
	Err    error  // nil: ErrInjected
	Sticky bool   // after the Nth, every later matching operation fails too (until Clear)

	faultrule.Counter // Count, Fired, Clear
}

// OnNth returns a Rule failing the nth matching operation.
func OnNth(n int64, prefix string, ops ...Op) *Rule { return &Rule{N: n, Ops: ops, Prefix: prefix} }

// Once returns a Rule failing the first matching operation.
func Once(prefix string, ops ...Op) *Rule { return OnNth(1, prefix, ops...) }

// Always returns a Rule failing every matching operation until Clear.
func Always(prefix string, ops ...Op) *Rule {
	return &Rule{N: 1, Ops: ops, Prefix: prefix, Sticky: true}
}

// MaybeError implements Injector.
func (r *Rule) MaybeError(op Op, key string) error {
	if len(r.Ops) > 0 && !slices.Contains(r.Ops, op) || !strings.HasPrefix(key, r.Prefix) {
		return nil
	}
	if !r.Fail(r.N, r.Sticky) {
		return nil
	}
	if r.Err != nil {
		return r.Err
	}
	return ErrInjected
}

// Rules combines injectors: every one sees every operation (so each
// counts on its own) and the first error wins.
func Rules(injs ...Injector) Injector {
	return InjectorFunc(func(op Op, key string) error {
		var first error
		for _, i := range injs {
			if err := i.MaybeError(op, key); err != nil && first == nil {
				first = err
			}
		}
		return first
	})
}

// Meta is a metastore.Meta that consults an Injector before every
// operation of the one it wraps.
type Meta struct {
	inner  metastore.Meta
	inj    atomic.Pointer[Injector]
	counts [numOps]atomic.Int64
}

var _ metastore.Meta = (*Meta)(nil)

// Wrap returns inner with inj consulted before every operation; inj may
// be nil (none fails until Set).
func Wrap(inner metastore.Meta, inj Injector) *Meta {
	m := &Meta{inner: inner}
	m.Set(inj)
	return m
}

// Set replaces the injector; nil lets every operation through.
func (m *Meta) Set(inj Injector) {
	if inj == nil {
		m.inj.Store(nil)
		return
	}
	m.inj.Store(&inj)
}

// Inner is the wrapped Meta.
func (m *Meta) Inner() metastore.Meta { return m.inner }

// Calls is the number of operations of kind op attempted so far, failed
// ones included.
func (m *Meta) Calls(op Op) int64 {
	if op == 0 || op >= numOps {
		return 0
	}
	return m.counts[op].Load()
}

// check counts the operation and asks the injector.
func (m *Meta) check(op Op, key string) error {
	m.counts[op].Add(1)
	p := m.inj.Load()
	if p == nil {
		return nil
	}
	if err := (*p).MaybeError(op, key); err != nil {
		return fmt.Errorf("%s %s: %w", op, key, err)
	}
	return nil
}

func (m *Meta) Get(ctx context.Context, key string) (metastore.KV, error) {
	if err := m.check(OpGet, key); err != nil {
		return metastore.KV{}, err
	}
	return m.inner.Get(ctx, key)
}

func (m *Meta) List(ctx context.Context, prefix string) ([]metastore.KV, error) {
	if err := m.check(OpList, prefix); err != nil {
		return nil, err
	}
	return m.inner.List(ctx, prefix)
}

func (m *Meta) ListKeys(ctx context.Context, prefix string) ([]string, error) {
	if err := m.check(OpList, prefix); err != nil {
		return nil, err
	}
	return m.inner.ListKeys(ctx, prefix)
}

func (m *Meta) ListRev(ctx context.Context, prefix string) (metastore.Listing, error) {
	if err := m.check(OpList, prefix); err != nil {
		return metastore.Listing{}, err
	}
	return m.inner.ListRev(ctx, prefix)
}

func (m *Meta) Count(ctx context.Context, prefix string) (int64, int64, error) {
	if err := m.check(OpList, prefix); err != nil {
		return 0, 0, err
	}
	return m.inner.Count(ctx, prefix)
}

func (m *Meta) Put(ctx context.Context, key string, value []byte) (int64, error) {
	if err := m.check(OpPut, key); err != nil {
		return 0, err
	}
	return m.inner.Put(ctx, key, value)
}

func (m *Meta) Create(ctx context.Context, key string, value []byte) (int64, error) {
	if err := m.check(OpCreate, key); err != nil {
		return 0, err
	}
	return m.inner.Create(ctx, key, value)
}

func (m *Meta) CAS(ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	if err := m.check(OpCAS, key); err != nil {
		return 0, err
	}
	return m.inner.CAS(ctx, key, value, rev)
}

func (m *Meta) Delete(ctx context.Context, key string) error {
	if err := m.check(OpDelete, key); err != nil {
		return err
	}
	return m.inner.Delete(ctx, key)
}

func (m *Meta) DeleteIf(ctx context.Context, key string, rev int64) error {
	if err := m.check(OpDelete, key); err != nil {
		return err
	}
	return m.inner.DeleteIf(ctx, key, rev)
}

func (m *Meta) DeleteExisting(ctx context.Context, key string) (bool, int64, error) {
	if err := m.check(OpDelete, key); err != nil {
		return false, 0, err
	}
	return m.inner.DeleteExisting(ctx, key)
}

func (m *Meta) Txn(ctx context.Context, conds []metastore.Cmp, ops []metastore.Op) (bool, int64, error) {
	key := ""
	switch {
	case len(ops) > 0:
		key = ops[0].Key
	case len(conds) > 0:
		key = conds[0].Key
	}
	if err := m.check(OpTxn, key); err != nil {
		return false, 0, err
	}
	return m.inner.Txn(ctx, conds, ops)
}

// Grant grants through the inner Meta and returns the lease rebound to
// this wrapper: its writes and its revocation are checked too.
func (m *Meta) Grant(ctx context.Context, ttl time.Duration) (*metastore.Lease, error) {
	if err := m.check(OpGrant, ""); err != nil {
		return nil, err
	}
	l, err := m.inner.Grant(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return l.Via(m), nil
}

func (m *Meta) PutLeased(ctx context.Context, key string, value []byte, lease int64) (int64, error) {
	if err := m.check(OpPut, key); err != nil {
		return 0, err
	}
	return m.inner.PutLeased(ctx, key, value, lease)
}

func (m *Meta) CreateLeased(ctx context.Context, key string, value []byte, lease int64) (int64, error) {
	if err := m.check(OpCreate, key); err != nil {
		return 0, err
	}
	return m.inner.CreateLeased(ctx, key, value, lease)
}

func (m *Meta) RevokeLease(ctx context.Context, id int64) error {
	if err := m.check(OpRevoke, ""); err != nil {
		return err
	}
	return m.inner.RevokeLease(ctx, id)
}

func (m *Meta) LeaseLeft(ctx context.Context, id int64) (left, granted time.Duration, err error) {
	if err := m.check(OpLeaseLeft, ""); err != nil {
		return 0, 0, err
	}
	return m.inner.LeaseLeft(ctx, id)
}

// Watch is counted (OpWatch) but never failed.
func (m *Meta) Watch(ctx context.Context, prefix string, rev int64) <-chan metastore.Event {
	m.counts[OpWatch].Add(1)
	return m.inner.Watch(ctx, prefix, rev)
}

func (m *Meta) WatchProgress(ctx context.Context, prefix string, rev int64) metastore.ProgressWatch {
	return &progressWatch{m: m, inner: m.inner.WatchProgress(ctx, prefix, rev), prefix: prefix}
}

type progressWatch struct {
	m      *Meta
	inner  metastore.ProgressWatch
	prefix string
	err    error // an injected end; sticky like a real one
}

func (w *progressWatch) Next(ctx context.Context) (metastore.WatchBatch, error) {
	if w.err != nil {
		return metastore.WatchBatch{}, w.err
	}
	if err := w.m.check(OpWatch, w.prefix); err != nil {
		w.err = err
		return metastore.WatchBatch{}, err
	}
	return w.inner.Next(ctx)
}

func (w *progressWatch) RequestProgress(ctx context.Context) error {
	if err := w.m.check(OpProgress, w.prefix); err != nil {
		return err
	}
	return w.inner.RequestProgress(ctx)
}
