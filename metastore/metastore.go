// Package metastore is the metadata store every Isobar component uses: a thin
// wrapper over an etcd client offering versioned reads, compare-and-swap
// writes, leases and watches, plus the embedded etcd server used by default.
// It is a leaf: it imports no other Isobar package.
package metastore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Errors returned by the store.
var (
	ErrNotFound = errors.New("metastore: key not found")
	ErrConflict = errors.New("metastore: version conflict")
	ErrExists   = errors.New("metastore: key already exists")
	ErrClosed   = errors.New("metastore: closed")
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
	return errors.Join(errs...)
}

// KV is a key with its value and versions. Rev is the revision of the last
// change to the key (etcd's ModRevision); pass it to CAS.
type KV struct {
	Key   string
	Value []byte
	Rev   int64
}

// Store is a connection to the metadata store. It is safe for concurrent use.
type Store struct {
	cli *clientv3.Client
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
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
		Context:              context.Background(),
	})
	if err != nil {
		return nil, fmt.Errorf("metastore: connect %v: %w", cfg.Endpoints, err)
	}
	return &Store{cli: cli}, nil
}

// Client exposes the etcd client for the few callers that need more.
func (s *Store) Client() *clientv3.Client { return s.cli }

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
	kv := resp.Kvs[0]
	return KV{Key: string(kv.Key), Value: kv.Value, Rev: kv.ModRevision}, nil
}

// List reads every key under prefix, in key order.
func (s *Store) List(ctx context.Context, prefix string) ([]KV, error) {
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("metastore: list %s: %w", prefix, err)
	}
	out := make([]KV, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, KV{Key: string(kv.Key), Value: kv.Value, Rev: kv.ModRevision})
	}
	return out, nil
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

// Update reads key, applies fn to its value (nil when absent) and writes the
// result with compare-and-swap, retrying on conflict until ctx ends. fn may be
// called several times and must be pure. It returns the value written.
func (s *Store) Update(ctx context.Context, key string, fn func(old []byte) ([]byte, error)) ([]byte, int64, error) {
	for {
		var old []byte
		var rev int64
		kv, err := s.Get(ctx, key)
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
		newRev, err := s.CAS(ctx, key, val, rev)
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

// NextID atomically increments the counter at key and returns the new value
// (the first call returns 1). IDs are never reused.
func (s *Store) NextID(ctx context.Context, key string) (uint64, error) {
	var id uint64
	_, _, err := s.Update(ctx, key, func(old []byte) ([]byte, error) {
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
