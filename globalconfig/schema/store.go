// Package schema owns the schema registry: every topic's ordered list of
// schema versions, kept in the global configuration store so that every
// region agrees on a topic's schema, and the namespace settings that
// govern it. Whether a version may be added is decided by package compat.
//
// # Keys
//
//	/isobar-global/schemas/<tenant>/<namespace>/<topic>/<version>   Version
//
// <topic> is the local name of the topic, a partitioned topic's for its
// partitions (as in Pulsar, persistent and non-persistent topics of the
// same name share a schema); <version> is the version number written
// with 20 digits so that keys sort in version order. Versions count from
// 0 and are never reused; a deletion adds a version marked deleted (a
// tombstone) and a forced deletion removes every key of the topic.
package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/globalconfig/schema/compat"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// Errors, checked with errors.Is; compat.ErrIncompatible and
// compat.ErrInvalid come through as they are.
var (
	// ErrNotFound: the topic has no schema, or not that version.
	ErrNotFound = errkind.Sentinel(errkind.ErrNotFound, "schema: not found") // 404
	// ErrTooLarge: a definition larger than MaxSchemaBytes.
	ErrTooLarge = errkind.Sentinel(errkind.ErrRequestTooLarge, "schema: too large") // 413
	// ErrConflict: concurrent writers kept changing the topic's schema.
	ErrConflict = errkind.Sentinel(errkind.ErrConcurrentModification, "schema: concurrent modification") // 409, retriable
	// ErrTooMany: a topic has MaxVersions versions, tombstones included.
	ErrTooMany = errkind.Sentinel(errkind.ErrPreconditionFailed, "schema: too many versions") // 412
	// ErrCorrupt: a stored version cannot be decoded.
	ErrCorrupt = errkind.Sentinel(errkind.ErrUnknown, "schema: corrupt record") // 500
)

// MaxSchemaBytes bounds a schema definition: each version is one key of
// the global store, whose requests etcd limits to 1.5 MiB.
const MaxSchemaBytes = 512 << 10

// MaxVersions bounds a topic's versions, tombstones included (a forced
// deletion starts over): every write reads them all.
const MaxVersions = 1000

// Prefix is the prefix of every key of the registry.
const Prefix = policy.Root + "schemas/"

// TopicPrefix is the prefix of a topic's versions.
func TopicPrefix(n topic.Name) string {
	b := n.Base()
	return Prefix + b.Tenant + "/" + b.Namespace + "/" + b.Local + "/"
}

// Key is the key of one version of a topic's schema.
func Key(n topic.Name, version int64) string {
	return TopicPrefix(n) + fmt.Sprintf("%020d", version)
}

// Info is a schema as clients give it.
type Info struct {
	// Type is the schema type in Pulsar's names (compat.Types).
	Type string `json:"type"`
	// Data is the definition: an Avro schema for AVRO and JSON, empty for
	// the primitive types.
	Data []byte `json:"data"`
	// Properties are the client's, kept as given.
	Properties map[string]string `json:"properties,omitempty"`
}

// Version is one stored version.
type Version struct {
	Version int64 `json:"version"`
	Info
	// Timestamp is when the version was added, in Unix milliseconds.
	Timestamp int64 `json:"timestamp"`
	// Deleted marks a tombstone: the schema was deleted; the versions
	// before it no longer count.
	Deleted bool `json:"deleted,omitempty"`
}

// Config configures a Store.
type Config struct {
	// Cache, when set, serves reads from a watched copy of the store
	// (globalconfig.Cache); writes go to the store and return once the cache
	// has them.
	Cache policy.Reader
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives reports of corrupt records; nil discards them.
	Logger *slog.Logger
}

// Store is the schema registry. It is safe for concurrent use.
type Store struct {
	meta metastore.Meta
	cfg  Config
	now  func() time.Time
	log  *slog.Logger
}

// New returns a store of the schemas kept in meta: the global
// configuration store (a region without one: its own metadata store).
func New(meta metastore.Meta, cfg Config) (*Store, error) {
	if meta == nil {
		return nil, errors.New("schema: no metadata store")
	}
	now, log := cfg.Now, cfg.Logger
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{meta: meta, cfg: cfg, now: now, log: log}, nil
}

func checkName(n topic.Name) error {
	if n.Tenant == "" || n.Namespace == "" || n.Local == "" {
		return fmt.Errorf("%w: topic %q is not a valid name", compat.ErrInvalid, n.String())
	}
	return nil
}

// versions decodes a topic's keys, in version order.
func (s *Store) versions(n topic.Name, kvs []metastore.KV) ([]Version, error) {
	out := make([]Version, 0, len(kvs))
	for _, kv := range kvs {
		var v Version
		err := json.Unmarshal(kv.Value, &v)
		if k, kerr := strconv.ParseInt(strings.TrimPrefix(kv.Key, TopicPrefix(n)), 10, 64); err == nil && (kerr != nil || k != v.Version) {
			err = fmt.Errorf("version %d stored under another key", v.Version)
		}
		if err != nil {
			s.log.Error("corrupt schema version in the configuration store: not used", "key", kv.Key, "revision", kv.Rev, "problem", err.Error())
			return nil, fmt.Errorf("schema of %s: %w at %s: %w", n.Base(), ErrCorrupt, kv.Key, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// read lists a topic's versions: from the cache when there is one, or
// from the store itself when fresh is set (writes).
func (s *Store) read(ctx context.Context, n topic.Name, fresh bool) ([]Version, error) {
	if err := checkName(n); err != nil {
		return nil, err
	}
	var kvs []metastore.KV
	if s.cfg.Cache != nil && !fresh {
		kvs = s.cfg.Cache.List(TopicPrefix(n))
	} else {
		var err error
		if kvs, err = s.meta.List(ctx, TopicPrefix(n)); err != nil {
			return nil, fmt.Errorf("schema of %s: %w", n.Base(), err)
		}
	}
	return s.versions(n, kvs)
}

// live returns the versions after the last tombstone.
func live(vs []Version) []Version {
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].Deleted {
			return vs[i+1:]
		}
	}
	return vs
}

// All returns a topic's versions since its last deletion, oldest first;
// empty when it has no schema.
func (s *Store) All(ctx context.Context, n topic.Name) ([]Version, error) {
	vs, err := s.read(ctx, n, false)
	return live(vs), err
}

// Latest returns a topic's current schema; ErrNotFound when it has none.
func (s *Store) Latest(ctx context.Context, n topic.Name) (Version, error) {
	vs, err := s.All(ctx, n)
	if err != nil {
		return Version{}, err
	}
	if len(vs) == 0 {
		return Version{}, fmt.Errorf("schema of %s: %w", n.Base(), ErrNotFound)
	}
	return vs[len(vs)-1], nil
}

// Get returns one version of a topic's schema; ErrNotFound when there is
// no such version or it was deleted (a deletion hides every version
// before it, as in Pulsar).
func (s *Store) Get(ctx context.Context, n topic.Name, version int64) (Version, error) {
	vs, err := s.All(ctx, n)
	if err != nil {
		return Version{}, err
	}
	for _, v := range vs {
		if v.Version == version {
			return v, nil
		}
	}
	return Version{}, fmt.Errorf("schema of %s, version %d: %w", n.Base(), version, ErrNotFound)
}

// same reports whether a stored version holds the schema info describes
// (type and definition, as Pulsar's schema hash compares them).
func same(v Version, info Info) bool {
	return !v.Deleted && v.Type == info.Type && bytes.Equal(v.Data, info.Data)
}

// Find returns the version of a topic's current schemas that holds info;
// ErrNotFound when none does.
func (s *Store) Find(ctx context.Context, n topic.Name, info Info) (int64, error) {
	vs, err := s.All(ctx, n)
	if err != nil {
		return 0, err
	}
	for _, v := range vs {
		if same(v, info) {
			return v.Version, nil
		}
	}
	return 0, fmt.Errorf("schema of %s: %w: no version holds this schema", n.Base(), ErrNotFound)
}

func schemas(vs []Version) []compat.Schema {
	out := make([]compat.Schema, len(vs))
	for i, v := range vs {
		out[i] = compat.Schema{Type: v.Type, Data: v.Data}
	}
	return out
}

// Check reports whether info could be added to a topic's schema under
// st: nil, or an error wrapping compat.ErrIncompatible or
// compat.ErrInvalid. A schema the topic already holds is compatible.
func (s *Store) Check(ctx context.Context, n topic.Name, st compat.Strategy, info Info) error {
	if err := checkInfo(info); err != nil {
		return err
	}
	vs, err := s.All(ctx, n)
	if err != nil {
		return err
	}
	for _, v := range vs {
		if same(v, info) {
			return nil
		}
	}
	return compat.Check(st, schemas(vs), compat.Schema{Type: info.Type, Data: info.Data})
}

func checkInfo(info Info) error {
	if len(info.Data) > MaxSchemaBytes {
		return fmt.Errorf("%w: a definition of %d bytes, more than %d", ErrTooLarge, len(info.Data), MaxSchemaBytes)
	}
	return compat.Validate(compat.Schema{Type: info.Type, Data: info.Data})
}

// maxAttempts bounds the compare-and-swap retries of one write.
const maxAttempts = 10

// Add returns the version of a topic's current schemas that holds info,
// or adds info as a new version if st allows it after them. created
// reports whether it added one.
func (s *Store) Add(ctx context.Context, n topic.Name, st compat.Strategy, info Info) (version int64, created bool, err error) {
	if err := checkName(n); err != nil {
		return 0, false, err
	}
	if err := checkInfo(info); err != nil {
		return 0, false, err
	}
	info.Properties = maps.Clone(info.Properties)
	// A schema the topic holds is found in the local copy, so producers
	// and consumers that bring one keep working while the global store
	// cannot be reached.
	if s.cfg.Cache != nil {
		if v, err := s.Find(ctx, n, info); err == nil {
			return v, false, nil
		}
	}
	for range maxAttempts {
		all, err := s.read(ctx, n, true)
		if err != nil {
			return 0, false, err
		}
		vs := live(all)
		for _, v := range vs {
			if same(v, info) {
				return v.Version, false, nil
			}
		}
		if err := compat.Check(st, schemas(vs), compat.Schema{Type: info.Type, Data: info.Data}); err != nil {
			return 0, false, fmt.Errorf("schema of %s: %w", n.Base(), err)
		}
		if err := checkRoom(n, all); err != nil {
			return 0, false, err
		}
		v := Version{Version: next(all), Info: info, Timestamp: s.now().UnixMilli()}
		ok, err := s.append(ctx, n, v)
		if err != nil {
			return 0, false, err
		}
		if ok {
			return v.Version, true, nil
		}
	}
	return 0, false, fmt.Errorf("schema of %s: %w", n.Base(), ErrConflict)
}

func next(all []Version) int64 {
	if len(all) == 0 {
		return 0
	}
	return all[len(all)-1].Version + 1
}

func checkRoom(n topic.Name, all []Version) error {
	if len(all) >= MaxVersions {
		return fmt.Errorf("schema of %s: %w: %d versions, the maximum (a forced deletion starts over)", n.Base(), ErrTooMany, len(all))
	}
	return nil
}

// append writes v if its key is still free; ok false when another writer
// took it.
func (s *Store) append(ctx context.Context, n topic.Name, v Version) (bool, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return false, err
	}
	key := Key(n, v.Version)
	ok, rev, err := s.meta.Txn(ctx, []metastore.Cmp{metastore.Absent(key)}, []metastore.Op{metastore.PutOp(key, b)})
	if err != nil {
		return false, fmt.Errorf("schema of %s: %w", n.Base(), err)
	}
	if ok {
		s.settle(ctx, rev)
	}
	return ok, nil
}

// settle waits, at most policy.StoreTimeout, until the cache has the
// write at rev, so that a read after a write sees it.
func (s *Store) settle(ctx context.Context, rev int64) { policy.Settle(ctx, s.cfg.Cache, rev) }

// Delete deletes a topic's schema by adding a tombstone; it returns the
// tombstone's version. ErrNotFound when the topic has no schema.
func (s *Store) Delete(ctx context.Context, n topic.Name) (int64, error) {
	if err := checkName(n); err != nil {
		return 0, err
	}
	for range maxAttempts {
		all, err := s.read(ctx, n, true)
		if err != nil {
			return 0, err
		}
		if len(live(all)) == 0 {
			return 0, fmt.Errorf("schema of %s: %w", n.Base(), ErrNotFound)
		}
		if err := checkRoom(n, all); err != nil {
			return 0, err
		}
		v := Version{Version: next(all), Timestamp: s.now().UnixMilli(), Deleted: true}
		v.Type = "NONE"
		ok, err := s.append(ctx, n, v)
		if err != nil {
			return 0, err
		}
		if ok {
			return v.Version, nil
		}
	}
	return 0, fmt.Errorf("schema of %s: %w", n.Base(), ErrConflict)
}

// ForceDelete removes every version of a topic's schema, tombstones
// included: version numbers start from 0 again. ErrNotFound when the
// topic has none.
func (s *Store) ForceDelete(ctx context.Context, n topic.Name) error {
	if err := checkName(n); err != nil {
		return err
	}
	keys, err := s.meta.ListKeys(ctx, TopicPrefix(n))
	if err != nil {
		return fmt.Errorf("schema of %s: %w", n.Base(), err)
	}
	if len(keys) == 0 {
		return fmt.Errorf("schema of %s: %w", n.Base(), ErrNotFound)
	}
	if err := s.deleteKeys(ctx, keys); err != nil {
		return fmt.Errorf("schema of %s: %w", n.Base(), err)
	}
	return nil
}

// DeleteNamespace removes the schemas of every topic of a namespace
// ("tenant/ns"), which is being deleted.
func (s *Store) DeleteNamespace(ctx context.Context, namespace string) error {
	tenant, ns, ok := strings.Cut(namespace, "/")
	if !ok || tenant == "" || ns == "" || strings.Contains(ns, "/") {
		return fmt.Errorf("%w: namespace %q is not tenant/namespace", compat.ErrInvalid, namespace)
	}
	keys, err := s.meta.ListKeys(ctx, Prefix+tenant+"/"+ns+"/")
	if err == nil {
		err = s.deleteKeys(ctx, keys)
	}
	if err != nil {
		return fmt.Errorf("schemas of namespace %s: %w", namespace, err)
	}
	return nil
}

// deleteKeys deletes keys in transactions of at most 100 operations
// (etcd allows 128 by default), then waits for the local copy.
func (s *Store) deleteKeys(ctx context.Context, keys []string) error {
	var rev int64
	for len(keys) > 0 {
		k := min(len(keys), 100)
		ops := make([]metastore.Op, 0, k)
		for _, key := range keys[:k] {
			ops = append(ops, metastore.DeleteOp(key))
		}
		_, r, err := s.meta.Txn(ctx, nil, ops)
		if err != nil {
			return err
		}
		rev, keys = r, keys[k:]
	}
	if rev > 0 {
		s.settle(ctx, rev)
	}
	return nil
}
