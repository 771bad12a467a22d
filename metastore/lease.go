package metastore

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Lease is an etcd lease kept alive in the background. Keys put with it
// vanish when it expires: when its holder dies or is cut off for longer than
// its TTL. Done is closed once the lease is lost or revoked.
type Lease struct {
	s      *Store
	id     clientv3.LeaseID
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Grant creates a lease with the given TTL and keeps it alive until Revoke
// or until keep-alives fail for longer than the TTL.
func (s *Store) Grant(ctx context.Context, ttl time.Duration) (*Lease, error) {
	secs := int64(ttl / time.Second)
	if secs < 1 {
		secs = 1
	}
	resp, err := s.cli.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("metastore: grant lease: %w", err)
	}
	kctx, cancel := context.WithCancel(context.Background())
	ch, err := s.cli.KeepAlive(kctx, resp.ID)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("metastore: keep lease alive: %w", err)
	}
	l := &Lease{s: s, id: resp.ID, cancel: cancel, done: make(chan struct{})}
	go func() {
		for range ch {
		}
		l.once.Do(func() { close(l.done) })
	}()
	return l, nil
}

// ID is the etcd lease id.
func (l *Lease) ID() int64 { return int64(l.id) }

// Done is closed when the lease is lost or revoked.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Put writes key attached to the lease.
func (l *Lease) Put(ctx context.Context, key string, value []byte) (int64, error) {
	resp, err := l.s.cli.Put(ctx, key, string(value), clientv3.WithLease(l.id))
	if err != nil {
		return 0, fmt.Errorf("metastore: put %s with lease: %w", key, err)
	}
	return resp.Header.Revision, nil
}

// Create writes key attached to the lease only if it does not exist.
func (l *Lease) Create(ctx context.Context, key string, value []byte) (int64, error) {
	resp, err := l.s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value), clientv3.WithLease(l.id))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("metastore: create %s with lease: %w", key, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: %s", ErrExists, key)
	}
	return resp.Header.Revision, nil
}

// Revoke ends the lease and deletes its keys.
func (l *Lease) Revoke(ctx context.Context) error {
	l.cancel()
	_, err := l.s.cli.Revoke(ctx, l.id)
	l.once.Do(func() { close(l.done) })
	if err != nil {
		return fmt.Errorf("metastore: revoke lease: %w", err)
	}
	return nil
}
