package deletes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// maxPartitions bounds a record's partition count (far above any limit
// the admin API lets a topic have).
const maxPartitions = 1 << 16

// ErrCorrupt: a stored record cannot be decoded.
var ErrCorrupt = errkind.Sentinel(errkind.ErrUnknown, "deletes: corrupt record")

// Config configures a Store.
type Config struct {
	// Cache, when set, serves reads from a watched copy of the store;
	// writes go to the store and return once the cache has them.
	Cache policy.Reader
	// Region is this region. Required.
	Region string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Store reads and writes delete records. It is safe for concurrent use.
type Store struct {
	meta metastore.Meta
	cfg  Config
	now  func() time.Time
}

// New returns a store of the delete records kept in meta: the global
// configuration store (a region without one: its own metadata store).
func New(meta metastore.Meta, cfg Config) (*Store, error) {
	if meta == nil {
		return nil, errors.New("deletes: no metadata store")
	}
	if cfg.Region == "" {
		return nil, errors.New("deletes.region: required")
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Store{meta: meta, cfg: cfg, now: now}, nil
}

// Region is the region the store writes for.
func (s *Store) Region() string { return s.cfg.Region }

func decode(key string, rev int64, val []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(val, &r); err != nil {
		return Record{}, fmt.Errorf("%w at %s: %w", ErrCorrupt, key, err)
	}
	switch r.Kind {
	case Topic, Subscription:
		if _, err := topic.Parse(r.Name); err != nil {
			return Record{}, fmt.Errorf("%w at %s: %w", ErrCorrupt, key, err)
		}
	case Namespace:
		if _, _, err := topic.ParseNamespace(r.Name); err != nil {
			return Record{}, fmt.Errorf("%w at %s: %w", ErrCorrupt, key, err)
		}
	default:
		return Record{}, fmt.Errorf("%w at %s: kind %q", ErrCorrupt, key, r.Kind)
	}
	if r.Partitions < 0 || r.Partitions > maxPartitions {
		return Record{}, fmt.Errorf("%w at %s: %d partitions", ErrCorrupt, key, r.Partitions)
	}
	r.Key, r.Rev = key, rev
	return r, nil
}

// Get returns the record at key (from the cache when there is one); ok is
// false when there is none.
func (s *Store) Get(ctx context.Context, key string) (r Record, ok bool, err error) {
	return s.get(ctx, key, false)
}

func (s *Store) get(ctx context.Context, key string, fresh bool) (Record, bool, error) {
	if s.cfg.Cache != nil && !fresh {
		v, rev, ok := s.cfg.Cache.Get(key)
		if !ok {
			return Record{}, false, nil
		}
		r, err := decode(key, rev, v)
		return r, err == nil, err
	}
	kv, err := s.meta.Get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("delete record %s: %w", key, err)
	}
	r, err := decode(key, kv.Rev, kv.Value)
	return r, err == nil, err
}

// Covering returns the records that cover topic n: its own and its
// namespace's.
func (s *Store) Covering(ctx context.Context, n topic.Name) ([]Record, error) {
	var out []Record
	for _, k := range Keys(n) {
		r, ok, err := s.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		if ok && r.Covers(n) {
			out = append(out, r)
		}
	}
	return out, nil
}

// List returns every record; a corrupt one is skipped and reported in err
// beside the others.
func (s *Store) List(ctx context.Context) ([]Record, error) {
	var kvs []metastore.KV
	if s.cfg.Cache != nil {
		kvs = s.cfg.Cache.List(Prefix)
	} else {
		var err error
		if kvs, err = s.meta.List(ctx, Prefix); err != nil {
			return nil, fmt.Errorf("delete records: %w", err)
		}
	}
	var (
		out  []Record
		errs []error
	)
	for _, kv := range kvs {
		r, err := decode(kv.Key, kv.Rev, kv.Value)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// settle waits, at most policy.StoreTimeout, until the cache has the
// write at rev, so that a read after a write sees it.
func (s *Store) settle(ctx context.Context, rev int64) { policy.Settle(ctx, s.cfg.Cache, rev) }

// update applies fn to the record at key with compare-and-swap; fn gets
// ok false when there is none, and returns the record to write, or nil
// to delete it.
func (s *Store) update(ctx context.Context, key string, fn func(r Record, ok bool) (*Record, error)) (Record, error) {
	for {
		cur, ok, err := s.get(ctx, key, true)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return Record{}, err
		}
		next, err := fn(cur, ok)
		if err != nil {
			return Record{}, err
		}
		var rev int64
		if next == nil {
			if !ok {
				return Record{}, nil
			}
			err = s.meta.DeleteIf(ctx, key, cur.Rev)
			if err == nil {
				_, rev, _ = s.meta.Count(ctx, Prefix)
			}
		} else {
			var val []byte
			if val, err = json.Marshal(next); err != nil {
				return Record{}, err
			}
			rev, err = s.meta.CAS(ctx, key, val, cur.Rev)
		}
		if errors.Is(err, metastore.ErrConflict) && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return Record{}, fmt.Errorf("delete record %s: %w", key, err)
		}
		s.settle(ctx, rev)
		if next == nil {
			return Record{}, nil
		}
		next.Key, next.Rev = key, rev
		return *next, nil
	}
}

// Begin writes rec (a new delete, requested in this region now) at its
// key, unless a record that is not done is there: a retried delete joins
// that one, which Begin returns with joined set.
func (s *Store) Begin(ctx context.Context, rec Record) (r Record, joined bool, err error) {
	key := NamespaceKey(rec.Name)
	if rec.Kind != Namespace {
		n, err := topic.Parse(rec.Name)
		if err != nil {
			return Record{}, false, fmt.Errorf("delete of %q: %w", rec.Name, err)
		}
		key = TopicKey(n)
		if rec.Kind == Subscription {
			key = SubscriptionKey(n, rec.Subscription)
		}
	}
	rec.By, rec.At = s.cfg.Region, s.now().UTC()
	rec.Applied, rec.Refused, rec.Done = nil, nil, false
	r, err = s.update(ctx, key, func(cur Record, ok bool) (*Record, error) {
		joined = ok && !cur.Done
		if joined {
			return &cur, nil
		}
		return &rec, nil
	})
	return r, joined, err
}

// MarkApplied records that this region applied the record at key, with
// its ledger bound.
func (s *Store) MarkApplied(ctx context.Context, key string, bound uint64) (Record, error) {
	return s.update(ctx, key, func(cur Record, ok bool) (*Record, error) {
		if !ok {
			return nil, fmt.Errorf("delete record %s: %w", key, metastore.ErrNotFound)
		}
		if _, done := cur.Applied[s.cfg.Region]; done {
			return &cur, nil
		}
		if cur.Applied == nil {
			cur.Applied = map[string]Applied{}
		}
		cur.Applied[s.cfg.Region] = Applied{At: s.now().UTC(), LedgerBound: bound}
		return &cur, nil
	})
}

// MarkRefused records that this region refused an IfEmpty record, and
// why.
func (s *Store) MarkRefused(ctx context.Context, key, reason string) (Record, error) {
	return s.update(ctx, key, func(cur Record, ok bool) (*Record, error) {
		if !ok {
			return nil, fmt.Errorf("delete record %s: %w", key, metastore.ErrNotFound)
		}
		if cur.Refused == nil {
			cur.Refused = map[string]string{}
		}
		cur.Refused[s.cfg.Region] = reason
		return &cur, nil
	})
}

// Finish marks the record at key done, if its revision is still rev.
func (s *Store) Finish(ctx context.Context, key string) (Record, error) {
	return s.update(ctx, key, func(cur Record, ok bool) (*Record, error) {
		if !ok {
			return nil, fmt.Errorf("delete record %s: %w", key, metastore.ErrNotFound)
		}
		cur.Done = true
		return &cur, nil
	})
}

// Withdraw removes the record at key (a refused IfEmpty delete).
func (s *Store) Withdraw(ctx context.Context, key string) error {
	_, err := s.update(ctx, key, func(Record, bool) (*Record, error) { return nil, nil })
	return err
}

// Forget removes the records of namespace ns's topics and subscriptions
// (the namespace's own record, which covers them, is kept).
func (s *Store) Forget(ctx context.Context, ns string) error {
	if strings.Count(ns, "/") != 1 {
		return fmt.Errorf("deletes: %q is not tenant/namespace", ns)
	}
	keys, err := s.meta.ListKeys(ctx, topicsPrefix+ns+"/")
	if err != nil {
		return err
	}
	subs, err := s.meta.ListKeys(ctx, subscriptionsPrefix+ns+"/")
	if err != nil {
		return err
	}
	keys = append(keys, subs...)
	for _, k := range keys {
		if err := s.meta.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}
