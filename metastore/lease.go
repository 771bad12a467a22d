package metastore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Lease is an etcd lease kept alive in the background. Keys put with it
// vanish when it expires: when its holder dies or is cut off for longer than
// its TTL. Done is closed once the lease is lost, revoked or abandoned.
//
// A Lease's writes and its revocation go through the Meta it was granted
// by (a wrapper's Grant returns the inner store's lease rebound with Via),
// so a fault-injecting wrapper sees them.
type Lease struct {
	id   int64
	meta Meta
	core *leaseCore
}

// leaseCore is the keep-alive state shared by a lease and its rebindings.
type leaseCore struct {
	cancel context.CancelFunc // stops the keep-alive
	done   chan struct{}
	once   sync.Once
	// validUntil is when the lease can first have expired at the store,
	// as an offset from monoBase: the send time of the last keep-alive
	// the store answered, plus the TTL it granted.
	validUntil atomic.Int64
	// renewed is the send time of the last keep-alive the store answered
	// (or of the grant), as an offset from monoBase.
	renewed atomic.Int64
}

func (c *leaseCore) close() { c.once.Do(func() { close(c.done) }) }

// monoBase anchors lease validity times to the monotonic clock.
var monoBase = time.Now()

func (c *leaseCore) extend(sent time.Time, ttl time.Duration) {
	c.validUntil.Store(int64(sent.Add(ttl).Sub(monoBase)))
	c.renewed.Store(int64(sent.Sub(monoBase)))
}

func (c *leaseCore) valid() bool { return c.left() > 0 }

// left is how long the lease stays valid unless renewed.
func (c *leaseCore) left() time.Duration {
	return time.Duration(c.validUntil.Load() - int64(time.Since(monoBase)))
}

// Grant creates a lease with the given TTL and keeps it alive until Revoke,
// Abandon, or until keep-alives fail for longer than the TTL.
func (s *Store) Grant(ctx context.Context, ttl time.Duration) (*Lease, error) {
	secs := int64(ttl / time.Second)
	if secs < 1 {
		secs = 1
	}
	sent := time.Now()
	resp, err := s.cli.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("metastore: grant lease: %w", err)
	}
	kctx, cancel := context.WithCancel(context.Background())
	core := &leaseCore{cancel: cancel, done: make(chan struct{})}
	core.extend(sent, time.Duration(resp.TTL)*time.Second)
	go s.keepAlive(kctx, core, resp.ID, time.Duration(secs)*time.Second)
	return &Lease{id: int64(resp.ID), meta: s, core: core}, nil
}

// keepAlive renews the lease every RenewInterval(ttl), and every
// retryEvery after a failed renewal, recording when each renewal was
// sent, until ctx ends, the store says the lease is gone, or the lease's
// validity ran out with no renewal answered (Done then closes on time,
// not a renewal's timeout later). It measures validity itself rather than
// using clientv3's KeepAlive, which dates a renewal by when its answer
// arrived, later than the store dated it.
func (s *Store) keepAlive(ctx context.Context, core *leaseCore, id clientv3.LeaseID, ttl time.Duration) {
	defer core.close()
	wait := RenewInterval(ttl)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(wait, max(core.left(), 0))):
		}
		left := core.left()
		if left <= 0 {
			return
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, min(ttl/3, left))
		resp, err := s.cli.KeepAliveOnce(rctx, id)
		cancel()
		switch {
		case err == nil && resp.TTL > 0:
			core.extend(sent, time.Duration(resp.TTL)*time.Second)
			wait = max(0, RenewInterval(ttl)-time.Since(sent)) // renewals start RenewInterval apart
		case err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound):
			return // expired or revoked at the store
		default:
			// A try that failed fast (the store answered with an error)
			// is repeated no more often than a renewal would be; one
			// that waited for the connection until its timeout is
			// repeated at once, to be waiting when the link returns.
			wait = max(retryEvery, RenewInterval(ttl)-time.Since(sent))
		}
		if !core.valid() {
			return
		}
	}
}

// RenewInterval is how long after a successful renewal the next one is
// sent: an eighth of the TTL, and no more than maxRenewEvery. A holder
// cut off from the store keeps a valid lease for at least the TTL less
// this interval (and less a renewal's round trip) from the moment the cut
// begins, so the interval is what a cut costs the lease's margin; at the
// default fence TTL of 2 s that leaves 1.75 s, and reconnecting after
// the heal takes up to about 0.3 s (see reconnect). Renewals are cheap
// for etcd (its leader answers them without a raft proposal), so a few a
// second per lease is a small price for that margin (docs/decisions.md,
// "Fence lease renewal" and "Failover in under three seconds").
func RenewInterval(ttl time.Duration) time.Duration { return min(ttl/8, maxRenewEvery) }

// maxRenewEvery bounds RenewInterval.
const maxRenewEvery = 500 * time.Millisecond

// retryEvery is how soon, at the least, a failed renewal is tried
// again. A try waits for the connection to the store (up to its timeout),
// so one is nearly always waiting while the store is unreachable, and it
// goes out as soon as the connection is back.
const retryEvery = 50 * time.Millisecond

// PutLeased writes key attached to lease id.
func (s *Store) PutLeased(ctx context.Context, key string, value []byte, lease int64) (int64, error) {
	resp, err := s.cli.Put(ctx, key, string(value), clientv3.WithLease(clientv3.LeaseID(lease)))
	if err != nil {
		return 0, fmt.Errorf("metastore: put %s with lease %x: %w", key, lease, leaseErr(err))
	}
	return resp.Header.Revision, nil
}

// CreateLeased writes key attached to lease id only if it is absent;
// ErrExists otherwise.
func (s *Store) CreateLeased(ctx context.Context, key string, value []byte, lease int64) (int64, error) {
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value), clientv3.WithLease(clientv3.LeaseID(lease)))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("metastore: create %s with lease %x: %w", key, lease, leaseErr(err))
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: %s", ErrExists, key)
	}
	return resp.Header.Revision, nil
}

// RevokeLease ends lease id and deletes its keys; a lease that is gone
// already is not an error.
func (s *Store) RevokeLease(ctx context.Context, id int64) error {
	if _, err := s.cli.Revoke(ctx, clientv3.LeaseID(id)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("metastore: revoke lease %x: %w", id, err)
	}
	return nil
}

// LeaseLeft reads lease id's time left and granted TTL at the store.
func (s *Store) LeaseLeft(ctx context.Context, id int64) (left, granted time.Duration, err error) {
	resp, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil {
		return 0, 0, fmt.Errorf("metastore: time to live of lease %x: %w", id, leaseErr(err))
	}
	if resp.TTL < 0 { // expired or revoked
		return 0, 0, fmt.Errorf("%w: lease %x has ended", ErrNoLease, id)
	}
	return time.Duration(resp.TTL) * time.Second, time.Duration(resp.GrantedTTL) * time.Second, nil
}

// leaseErr marks etcd's "lease not found" with ErrNoLease.
func leaseErr(err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("%w: %v", ErrNoLease, err)
	}
	return err
}

// Renewed is when the last renewal the store answered (or the grant) was
// sent: the holder reached the store then.
func (l *Lease) Renewed() time.Time { return monoBase.Add(time.Duration(l.core.renewed.Load())) }

// ID is the etcd lease id.
func (l *Lease) ID() int64 { return l.id }

// Done is closed when the lease is lost, revoked or abandoned.
func (l *Lease) Done() <-chan struct{} { return l.core.done }

// Valid reports whether the lease cannot have expired at the store yet:
// less than its TTL has passed since the store answered a keep-alive this
// process sent (measured from the sending, on the monotonic clock). Unlike
// Lost it turns false on time even while the store is unreachable, so a
// holder can stop acting on the lease before anyone else can take over.
func (l *Lease) Valid() bool { return !l.Lost() && l.core.valid() }

// Lost reports whether Done is closed.
func (l *Lease) Lost() bool {
	select {
	case <-l.core.done:
		return true
	default:
		return false
	}
}

// Via returns the lease with its writes and revocation going through m,
// a wrapper of the store that granted it; the keep-alive is shared.
func (l *Lease) Via(m Meta) *Lease { return &Lease{id: l.id, meta: m, core: l.core} }

// Put writes key attached to the lease.
func (l *Lease) Put(ctx context.Context, key string, value []byte) (int64, error) {
	return l.meta.PutLeased(ctx, key, value, l.id)
}

// Create writes key attached to the lease only if it does not exist;
// ErrExists otherwise.
func (l *Lease) Create(ctx context.Context, key string, value []byte) (int64, error) {
	return l.meta.CreateLeased(ctx, key, value, l.id)
}

// Revoke ends the lease and deletes its keys. Done is closed even when
// the store cannot be reached (the keys then expire with the TTL).
func (l *Lease) Revoke(ctx context.Context) error {
	l.core.cancel()
	err := l.meta.RevokeLease(ctx, l.id)
	l.core.close()
	return err
}

// Abandon stops keeping the lease alive without revoking it, as a crash
// would: its keys stay until its TTL runs out. Done is closed.
func (l *Lease) Abandon() {
	l.core.cancel()
	l.core.close()
}
