// Package metastore is the metadata store every Isobar component uses: a thin
// wrapper over an etcd client offering versioned reads, compare-and-swap
// writes, small transactions, leases, registrations under a lease
// (Register) and watches, plus the embedded etcd server used by default.
// Components hold the Meta interface, which *Store implements, so that
// tests can put a fault-injecting wrapper (package metastore/metafault)
// in its place. It is a leaf: it imports no other Isobar package, and it
// is the only package that talks to etcd.
package metastore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/isobar-mq/isobar/internal/tlsfiles"
)

// Errors returned by the store.
var (
	ErrNotFound = errors.New("metastore: key not found")
	ErrConflict = errors.New("metastore: version conflict")
	ErrExists   = errors.New("metastore: key already exists")
	ErrClosed   = errors.New("metastore: closed")
	// ErrNoLease: a write under a lease that has expired or was revoked.
	ErrNoLease = errors.New("metastore: lease not found (expired or revoked)")
	// ErrCompacted: a watch needs revisions the store has discarded.
	ErrCompacted = errors.New("metastore: required revision has been compacted")
)

// RegionPrefix is the key prefix of a region's local metadata.
func RegionPrefix(region string) string { return "/isobar/" + region + "/" }

// Config says how to reach etcd.
type Config struct {
	// Endpoints are etcd client URLs or host:port pairs. Required.
	Endpoints []string `yaml:"endpoints"`
	// DialTimeout bounds the first connection; zero means 5s.
	DialTimeout time.Duration `yaml:"dialTimeout"`
	// StartupTimeout is how long a component retries its first
	// connection at start-up before it gives up with an error; zero means
	// 30s.
	StartupTimeout time.Duration `yaml:"startupTimeout"`
	// TLS connects over TLS (endpoints are then https:// URLs or
	// host:port pairs): the CAs etcd's certificate must chain to and the
	// client certificate a member with requireClientCert asks for. The
	// certificate is read again when its files change.
	TLS tlsfiles.ClientConfig `yaml:"tls"`
}

// Validate reports every problem with the config at once.
func (c Config) Validate() error {
	var errs []error
	if len(c.Endpoints) == 0 {
		errs = append(errs, errors.New("metastore.endpoints: at least one etcd endpoint is required"))
	}
	for i, e := range c.Endpoints {
		if strings.TrimSpace(e) == "" {
			errs = append(errs, fmt.Errorf("metastore.endpoints[%d]: empty", i))
		}
	}
	if c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("metastore.dialTimeout: %v is negative", c.DialTimeout))
	}
	if c.StartupTimeout < 0 {
		errs = append(errs, fmt.Errorf("metastore.startupTimeout: %v is negative", c.StartupTimeout))
	}
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("metastore.tls: %w", err))
	}
	for i, e := range c.Endpoints {
		if strings.HasPrefix(e, "https://") && !c.TLS.Enabled() || strings.HasPrefix(e, "http://") && c.TLS.Enabled() {
			errs = append(errs, fmt.Errorf("metastore.endpoints[%d]: %q does not match tls (https:// goes with tls settings, http:// without)", i, e))
		}
	}
	return errors.Join(errs...)
}

// KV is a key with its value and versions. Rev is the revision of the last
// change to the key (etcd's ModRevision); pass it to CAS. Lease is the id
// of the lease the key is attached to (0: none).
type KV struct {
	Key   string
	Value []byte
	Rev   int64
	Lease int64
}

// Listing is a prefix read at one revision of the store.
type Listing struct {
	// KVs are the keys under the prefix, in key order.
	KVs []KV
	// Rev is the store's revision when it was read: every change up to
	// Rev is reflected (watch from Rev+1 to follow it).
	Rev int64
	// ClusterID identifies the etcd cluster that answered.
	ClusterID uint64
}

// Store is a connection to the metadata store. It is safe for concurrent use.
type Store struct {
	cli *clientv3.Client
	tls *tls.Config // nil: plaintext
}

// Connect dials etcd and checks it answers.
func Connect(ctx context.Context, cfg Config) (*Store, error) {
	s, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	timeout := cfg.DialTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := s.cli.Get(pctx, "/isobar-ping"); err != nil {
		s.cli.Close()
		if why := tlsDiagnosis(cfg.Endpoints[0], s.tls); why != "" {
			return nil, fmt.Errorf("metastore: etcd at %v does not answer: %w (%s)", cfg.Endpoints, err, why)
		}
		return nil, fmt.Errorf("metastore: etcd at %v does not answer: %w", cfg.Endpoints, err)
	}
	return s, nil
}

// Open returns a store for etcd at cfg.Endpoints without checking that it
// answers: the client connects in the background and every call waits
// for it (up to the call's context). For a store that may be down at
// start, like the global configuration store.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	tc, err := cfg.TLS.Client()
	if err != nil {
		return nil, fmt.Errorf("metastore.tls: %w", err)
	}
	cli, err := clientv3.New(clientv3.Config{
		TLS:                  tc,
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
		Context:              context.Background(),
		DialOptions:          []grpc.DialOption{grpc.WithConnectParams(reconnect)},
	})
	if err != nil {
		return nil, fmt.Errorf("metastore: connect %v: %w", cfg.Endpoints, err)
	}
	return &Store{cli: cli, tls: tc}, nil
}

// reconnect is how the client reconnects to etcd after losing its
// connection. gRPC's default waits 1 s after the first failed attempt,
// then 1.6 times longer after each, up to 2 minutes: after a 3 s cut
// the client was still not connected 0.85 s after the link was back, by
// when a 5 s lease had lapsed, and after a 20 s cut 6.8 s
// (TestPromptReconnectAfterALongOutage). Here attempts come at most about
// 0.3 s apart (MaxDelay with its jitter), so a client is back within that
// of a heal, at the price of a few attempts a second against a store that
// is down; and an attempt that has not connected within MinConnectTimeout
// (a handshake lost in a partition) is given up for a fresh one rather
// than waiting on TCP's retransmissions (docs/decisions.md, "Fence lease
// renewal").
var reconnect = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  100 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   250 * time.Millisecond,
	},
	MinConnectTimeout: 2 * time.Second,
}

// Close closes the connection.
func (s *Store) Close() error { return s.cli.Close() }

// Get reads one key; ErrNotFound when it is absent.
func (s *Store) Get(ctx context.Context, key string) (KV, error) {
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return KV{}, fmt.Errorf("metastore: get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return KV{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return kvOf(resp.Kvs[0]), nil
}

func kvOf(kv *mvccpb.KeyValue) KV {
	return KV{Key: string(kv.Key), Value: kv.Value, Rev: kv.ModRevision, Lease: kv.Lease}
}

// List reads every key under prefix, in key order.
func (s *Store) List(ctx context.Context, prefix string) ([]KV, error) {
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("metastore: list %s: %w", prefix, err)
	}
	out := make([]KV, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, kvOf(kv))
	}
	return out, nil
}

// ListKeys reads the keys under prefix, in key order, without their
// values, a page of listPage keys at a time, every page read at the first
// page's revision (one consistent listing, however many keys).
func (s *Store) ListKeys(ctx context.Context, prefix string) ([]string, error) {
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	var rev int64
	var out []string
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(listPage),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, fmt.Errorf("metastore: list keys %s: %w", prefix, err)
		}
		rev = resp.Header.Revision
		for _, kv := range resp.Kvs {
			out = append(out, string(kv.Key))
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// listPage is how many keys one read of ListKeys returns.
const listPage = 1000

// ListRev reads every key under prefix, in key order, with the revision
// of the store it was read at.
func (s *Store) ListRev(ctx context.Context, prefix string) (Listing, error) {
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return Listing{}, fmt.Errorf("metastore: list %s: %w", prefix, err)
	}
	l := Listing{KVs: make([]KV, 0, len(resp.Kvs)), Rev: resp.Header.Revision, ClusterID: resp.Header.ClusterId}
	for _, kv := range resp.Kvs {
		l.KVs = append(l.KVs, kvOf(kv))
	}
	return l, nil
}

// Count returns how many keys there are under prefix and the store's
// revision, without reading them. Count of any prefix is the cheap way to
// learn the current revision.
func (s *Store) Count(ctx context.Context, prefix string) (n, rev int64, err error) {
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, 0, fmt.Errorf("metastore: count %s: %w", prefix, err)
	}
	return resp.Count, resp.Header.Revision, nil
}

// Put writes key unconditionally and returns its new revision.
func (s *Store) Put(ctx context.Context, key string, value []byte) (int64, error) {
	resp, err := s.cli.Put(ctx, key, string(value))
	if err != nil {
		return 0, fmt.Errorf("metastore: put %s: %w", key, err)
	}
	return resp.Header.Revision, nil
}

// Create writes key only if it does not exist; ErrExists otherwise.
func (s *Store) Create(ctx context.Context, key string, value []byte) (int64, error) {
	rev, err := s.CAS(ctx, key, value, 0)
	if errors.Is(err, ErrConflict) {
		return 0, fmt.Errorf("%w: %s", ErrExists, key)
	}
	return rev, err
}

// CAS writes key only if its revision is still rev (0: only if absent) and
// returns the new revision; ErrConflict when someone else wrote it first.
func (s *Store) CAS(ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(value))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("metastore: cas %s: %w", key, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: %s changed since revision %d", ErrConflict, key, rev)
	}
	return resp.Header.Revision, nil
}

// Delete removes key (absent keys are not an error).
func (s *Store) Delete(ctx context.Context, key string) error {
	if _, err := s.cli.Delete(ctx, key); err != nil {
		return fmt.Errorf("metastore: delete %s: %w", key, err)
	}
	return nil
}

// DeleteExisting removes key and reports whether it existed, with the
// store's revision after the delete.
func (s *Store) DeleteExisting(ctx context.Context, key string) (existed bool, rev int64, err error) {
	resp, err := s.cli.Delete(ctx, key)
	if err != nil {
		return false, 0, fmt.Errorf("metastore: delete %s: %w", key, err)
	}
	return resp.Deleted > 0, resp.Header.Revision, nil
}

// DeleteIf removes key only if its revision is still rev; ErrConflict otherwise.
func (s *Store) DeleteIf(ctx context.Context, key string, rev int64) error {
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return fmt.Errorf("metastore: delete %s: %w", key, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %s changed since revision %d", ErrConflict, key, rev)
	}
	return nil
}

// Compact discards the store's history before revision rev (an
// administrative operation: watches that need older revisions get
// ErrCompacted). Tests use it to provoke compaction.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	if _, err := s.cli.Compact(ctx, rev); err != nil {
		return fmt.Errorf("metastore: compact at %d: %w", rev, err)
	}
	return nil
}
