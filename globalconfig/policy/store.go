package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// Errors, checked with errors.Is; they are wrapped with the name involved.
// Each is of one kind of errkind's table, which decides how a client is
// answered (HTTP status in the comment).
var (
	ErrNotFound = errkind.Sentinel(errkind.ErrNotFound, "policy: not found")                             // 404
	ErrExists   = errkind.Sentinel(errkind.ErrConflict, "policy: already exists")                        // 409
	ErrInvalid  = errkind.Sentinel(errkind.ErrPreconditionFailed, "policy: invalid")                     // 412
	ErrConflict = errkind.Sentinel(errkind.ErrConcurrentModification, "policy: concurrent modification") // 409, retriable
	ErrNotEmpty = errkind.Sentinel(errkind.ErrConflict, "policy: not empty")                             // 409
	// ErrCorrupt: a stored record cannot be used (undecodable, or a value
	// this store would refuse to write: beyond a range or a limit). It is
	// logged when first read and answered on that resource alone, never
	// acted on; the record can still be deleted.
	ErrCorrupt = errkind.Sentinel(errkind.ErrUnknown, "policy: corrupt record") // 500, not retriable
)

// Root is the prefix of every key of the store.
const Root = "/isobar-global/"

const (
	clustersPrefix    = Root + "clusters/"
	tenantsPrefix     = Root + "tenants/"
	namespacesPrefix  = Root + "namespaces/"
	partitionedPrefix = Root + "partitioned-topics/"
)

// Config configures a Store.
type Config struct {
	// LocalCluster becomes a new namespace's only replication cluster when
	// it names none, as in Pulsar; empty leaves the list empty.
	LocalCluster string
	// DefaultBundles is the number of bundles of a new namespace that
	// names none; zero means topic.DefaultBundles.
	DefaultBundles int
	// MaxPartitions bounds a partitioned topic's partitions (on create,
	// update and auto-creation, and when reading a stored record); zero
	// means DefaultMaxPartitions.
	MaxPartitions int
	// MaxBundles bounds a new namespace's bundles; zero means
	// DefaultMaxBundles.
	MaxBundles int
	// Logger receives reports of corrupt records (ErrCorrupt), once per
	// record version; nil discards them.
	Logger *slog.Logger
	// HasTopics reports whether a namespace ("tenant/ns") has topics the
	// broker knows about (beyond partitioned-topic metadata); a namespace
	// with topics cannot be deleted. Nil means it never has.
	HasTopics func(ctx context.Context, namespace string) (bool, error)
	// Cache, when set, serves the reads (Cluster, Clusters, Tenant,
	// Tenants, Namespace, Namespaces, PartitionedMetadata, Partitions,
	// ListPartitioned) from a local copy of the store, usually a
	// globalconfig.Cache over the global store, so they keep working while
	// the store is unreachable. Writes still go to Meta, read what they
	// change from Meta, and return once the cache has caught up with them.
	Cache Reader
	// MeterProvider receives the store's metrics (write conflicts); nil
	// means none.
	MeterProvider metric.MeterProvider
}

// MetricWriteConflicts counts compare-and-swap writes that lost to a
// concurrent change (retried or reported as ErrConflict).
const MetricWriteConflicts = "isobar.globalconfig.write.conflicts"

// Reader is a local, watched copy of the store (globalconfig.Cache).
type Reader interface {
	// Get returns a key's value and modification revision.
	Get(key string) ([]byte, int64, bool)
	// List returns the keys under prefix, sorted.
	List(prefix string) []metastore.KV
	// WaitRev returns once the copy reflects revision rev.
	WaitRev(ctx context.Context, rev int64) error
}

// Validate reports every problem with the config at once.
func (c Config) Validate() error {
	var errs []error
	if c.LocalCluster != "" {
		if err := validClusterName(c.LocalCluster); err != nil {
			errs = append(errs, fmt.Errorf("policy.localCluster: %w", err))
		}
	}
	if c.DefaultBundles < 0 || c.DefaultBundles > topic.MaxBundles {
		errs = append(errs, fmt.Errorf("policy.defaultBundles: %d is not in [0, %d]", c.DefaultBundles, topic.MaxBundles))
	}
	if c.MaxPartitions < 0 || c.MaxPartitions > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("policy.maxPartitions: %d is not in [0, %d]", c.MaxPartitions, math.MaxInt32))
	}
	if c.MaxBundles < 0 || c.MaxBundles > topic.MaxBundles {
		errs = append(errs, fmt.Errorf("policy.maxBundles: %d is not in [0, %d]", c.MaxBundles, topic.MaxBundles))
	}
	return errors.Join(errs...)
}

// Store is the typed configuration store. It is safe for concurrent use.
type Store struct {
	cfg       Config
	meta      metastore.Meta
	conflicts metric.Int64Counter
	log       *slog.Logger
	reported  sync.Map // key -> revision of the corrupt record reported
}

// New returns a store of the configuration kept in meta (the global
// configuration store, or the region's metadata store without one).
func New(meta metastore.Meta, cfg Config) (*Store, error) {
	if meta == nil {
		return nil, errors.New("policy: no metadata store")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mp := cfg.MeterProvider
	if mp == nil {
		mp = noopmetric.NewMeterProvider()
	}
	conflicts, err := mp.Meter("github.com/isobar-mq/isobar/globalconfig/policy").Int64Counter(MetricWriteConflicts,
		metric.WithUnit("{conflict}"), metric.WithDescription("Writes to the configuration store that lost a compare-and-swap to a concurrent change."))
	if err != nil {
		return nil, err
	}
	conflicts.Add(context.Background(), 0) // exported before the first conflict
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{cfg: cfg, meta: meta, conflicts: conflicts, log: log}, nil
}

// LocalCluster is the configured local cluster name.
func (s *Store) LocalCluster() string { return s.cfg.LocalCluster }

// ClusterKey, TenantKey, NamespaceKey and PartitionedKey are the keys of
// the records.
func ClusterKey(name string) string         { return clustersPrefix + name }
func TenantKey(name string) string          { return tenantsPrefix + name }
func NamespaceKey(tenant, ns string) string { return namespacesPrefix + tenant + "/" + ns }
func PartitionedKey(n topic.Name) string {
	return partitionedPrefix + n.Tenant + "/" + n.Namespace + "/" + string(n.Domain) + "/" + n.Local
}

func namespaceTopicsPrefix(tenant, ns string) string {
	return partitionedPrefix + tenant + "/" + ns + "/"
}

// ---- generic helpers

// settle waits, after a successful write, until the cache has caught up
// with the store, so a read that follows a write sees it.
func (s *Store) settle(ctx context.Context, err *error) {
	if errors.Is(*err, ErrConflict) {
		s.conflicts.Add(ctx, 1)
	}
	if *err != nil || s.cfg.Cache == nil {
		return
	}
	_, rev, gerr := s.meta.Count(ctx, Root)
	if gerr != nil {
		return // written; the cache catches up on its own
	}
	Settle(ctx, s.cfg.Cache, rev)
}

// readJSON is getJSON for reads: from the cache when there is one.
func (s *Store) readJSON(ctx context.Context, key, what string, v any) (int64, error) {
	if s.cfg.Cache == nil {
		return s.getJSON(ctx, key, what, v)
	}
	b, rev, ok := s.cfg.Cache.Get(key)
	if !ok {
		return 0, fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return 0, s.corrupt(what, key, rev, err)
	}
	return rev, nil
}

// readList lists prefix for reads: from the cache when there is one.
func (s *Store) readList(ctx context.Context, prefix string) ([]metastore.KV, error) {
	if s.cfg.Cache == nil {
		return s.meta.List(ctx, prefix)
	}
	return s.cfg.Cache.List(prefix), nil
}

func (s *Store) readExists(ctx context.Context, key string) (bool, error) {
	if s.cfg.Cache == nil {
		return s.exists(ctx, key)
	}
	_, _, ok := s.cfg.Cache.Get(key)
	return ok, nil
}

func (s *Store) getJSON(ctx context.Context, key, what string, v any) (int64, error) {
	kv, err := s.meta.Get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return 0, fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if err := json.Unmarshal(kv.Value, v); err != nil {
		return 0, s.corrupt(what, key, kv.Rev, err)
	}
	return kv.Rev, nil
}

// create stores v, as JSON, as the new record at key: ErrExists when
// there is one. Every record type is created, replaced and removed
// through create, replace and remove, and read through getJSON or
// readJSON.
func (s *Store) create(ctx context.Context, key, what string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, err := s.meta.Create(ctx, key, b); err != nil {
		if errors.Is(err, metastore.ErrExists) {
			return fmt.Errorf("%s: %w", what, ErrExists)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// replace stores v, as JSON, over the record at key if it is still at
// revision rev: ErrConflict when it changed meanwhile.
func (s *Store) replace(ctx context.Context, key, what string, rev int64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, err := s.meta.CAS(ctx, key, b, rev); err != nil {
		if errors.Is(err, metastore.ErrConflict) {
			return fmt.Errorf("%s: %w", what, ErrConflict)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// remove deletes the record at key if it is still at revision rev:
// ErrConflict when it changed meanwhile.
func (s *Store) remove(ctx context.Context, key, what string, rev int64) error {
	if err := s.meta.DeleteIf(ctx, key, rev); err != nil {
		if errors.Is(err, metastore.ErrConflict) {
			return fmt.Errorf("%s: %w", what, ErrConflict)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// txn commits ops if every comparison holds; it reports whether it did.
func (s *Store) txn(ctx context.Context, what string, cmps []metastore.Cmp, ops ...metastore.Op) (bool, error) {
	ok, _, err := s.meta.Txn(ctx, cmps, ops)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	return ok, nil
}

func (s *Store) exists(ctx context.Context, key string) (bool, error) {
	_, err := s.meta.Get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func lastSegments(kvs []metastore.KV, prefix string) []string {
	out := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, strings.TrimPrefix(kv.Key, prefix))
	}
	return out
}

// corrupt reports the record at key (revision rev) as unusable: logged
// the first time this revision is met, and an ErrCorrupt error naming the
// record and the problem.
func (s *Store) corrupt(what, key string, rev int64, problem error) error {
	if old, loaded := s.reported.Swap(key, rev); !loaded || old.(int64) != rev {
		s.log.Error("corrupt record in the configuration store: not used", "key", key, "revision", rev, "problem", problem.Error())
	}
	return fmt.Errorf("%s: %w at %s: %w", what, ErrCorrupt, key, problem)
}

func invalid(what string, err error) error {
	return fmt.Errorf("%s: %w: %w", what, ErrInvalid, err)
}

// ---- clusters

// CreateCluster records a new cluster; ErrExists if it is known.
func (s *Store) CreateCluster(ctx context.Context, name string, d ClusterData) (err error) {
	defer s.settle(ctx, &err)
	what := "cluster " + name
	if err := validClusterName(name); err != nil {
		return invalid(what, err)
	}
	return s.create(ctx, ClusterKey(name), what, d)
}

// Cluster reads a cluster.
func (s *Store) Cluster(ctx context.Context, name string) (ClusterData, error) {
	var d ClusterData
	if err := validClusterName(name); err != nil {
		return d, invalid("cluster "+name, err)
	}
	_, err := s.readJSON(ctx, ClusterKey(name), "cluster "+name, &d)
	return d, err
}

// Clusters lists the cluster names in order.
func (s *Store) Clusters(ctx context.Context) ([]string, error) {
	kvs, err := s.readList(ctx, clustersPrefix)
	if err != nil {
		return nil, fmt.Errorf("clusters: %w", err)
	}
	return lastSegments(kvs, clustersPrefix), nil
}

// UpdateCluster replaces a cluster's data; ErrNotFound if it is unknown.
func (s *Store) UpdateCluster(ctx context.Context, name string, d ClusterData) (err error) {
	defer s.settle(ctx, &err)
	what := "cluster " + name
	var old ClusterData
	rev, err := s.getJSON(ctx, ClusterKey(name), what, &old)
	if err != nil {
		return err
	}
	return s.replace(ctx, ClusterKey(name), what, rev, d)
}

// DeleteCluster removes a cluster; ErrNotEmpty while a tenant allows it or
// a namespace replicates to it.
func (s *Store) DeleteCluster(ctx context.Context, name string) (err error) {
	defer s.settle(ctx, &err)
	what := "cluster " + name
	kv, err := s.meta.Get(ctx, ClusterKey(name))
	if errors.Is(err, metastore.ErrNotFound) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	tenants, err := s.meta.List(ctx, tenantsPrefix)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, t := range tenants {
		var ti TenantInfo
		if json.Unmarshal(t.Value, &ti) == nil && slices.Contains(ti.AllowedClusters, name) {
			return fmt.Errorf("%s: %w: tenant %s allows it", what, ErrNotEmpty, strings.TrimPrefix(t.Key, tenantsPrefix))
		}
	}
	nss, err := s.meta.List(ctx, namespacesPrefix)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, n := range nss {
		var p Policies
		if json.Unmarshal(n.Value, &p) == nil && slices.Contains(p.ReplicationClusters, name) {
			return fmt.Errorf("%s: %w: namespace %s replicates to it", what, ErrNotEmpty, strings.TrimPrefix(n.Key, namespacesPrefix))
		}
	}
	tps, err := s.meta.List(ctx, topicPoliciesPrefix)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, n := range tps {
		var tp TopicPolicies
		if json.Unmarshal(n.Value, &tp) == nil && slices.Contains(tp.ReplicationClusters, name) {
			return fmt.Errorf("%s: %w: topic %s replicates to it", what, ErrNotEmpty, strings.TrimPrefix(n.Key, topicPoliciesPrefix))
		}
	}
	return s.remove(ctx, ClusterKey(name), what, kv.Rev)
}

// checkClustersExist checks that every cluster named exists, with one
// read of the cluster list whatever the number of names (a request body
// may name many).
func (s *Store) checkClustersExist(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	kvs, err := s.meta.List(ctx, clustersPrefix)
	if err != nil {
		return err
	}
	known := make(map[string]bool, len(kvs))
	for _, c := range lastSegments(kvs, clustersPrefix) {
		known[c] = true
	}
	var errs []error
	for _, c := range names {
		if err := validClusterName(c); err != nil {
			errs = append(errs, err)
			continue
		}
		if !known[c] {
			errs = append(errs, fmt.Errorf("cluster %q does not exist", c))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(firstErrs(errs)...))
	}
	return nil
}

// ---- tenants

// CreateTenant records a new tenant; its allowed clusters must exist.
func (s *Store) CreateTenant(ctx context.Context, name string, info TenantInfo) (err error) {
	defer s.settle(ctx, &err)
	what := "tenant " + name
	if err := topic.ValidTenant(name); err != nil {
		return invalid(what, err)
	}
	if err := s.checkClustersExist(ctx, info.AllowedClusters); err != nil {
		return fmt.Errorf("%s: allowedClusters: %w", what, err)
	}
	return s.create(ctx, TenantKey(name), what, info)
}

// Tenant reads a tenant.
func (s *Store) Tenant(ctx context.Context, name string) (TenantInfo, error) {
	var ti TenantInfo
	if err := topic.ValidTenant(name); err != nil {
		return ti, invalid("tenant "+name, err)
	}
	_, err := s.readJSON(ctx, TenantKey(name), "tenant "+name, &ti)
	return ti, err
}

// Tenants lists the tenant names in order.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	kvs, err := s.readList(ctx, tenantsPrefix)
	if err != nil {
		return nil, fmt.Errorf("tenants: %w", err)
	}
	return lastSegments(kvs, tenantsPrefix), nil
}

// UpdateTenant replaces a tenant's info. Its allowed clusters must exist,
// and a cluster one of its namespaces replicates to cannot be removed.
func (s *Store) UpdateTenant(ctx context.Context, name string, info TenantInfo) (err error) {
	defer s.settle(ctx, &err)
	what := "tenant " + name
	if err := topic.ValidTenant(name); err != nil {
		return invalid(what, err)
	}
	var old TenantInfo
	rev, err := s.getJSON(ctx, TenantKey(name), what, &old)
	if err != nil {
		return err
	}
	if err := s.checkClustersExist(ctx, info.AllowedClusters); err != nil {
		return fmt.Errorf("%s: allowedClusters: %w", what, err)
	}
	if len(info.AllowedClusters) > 0 {
		nss, err := s.meta.List(ctx, namespacesPrefix+name+"/")
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		for _, n := range nss {
			var p Policies
			if json.Unmarshal(n.Value, &p) != nil {
				continue
			}
			for _, c := range p.ReplicationClusters {
				if !slices.Contains(info.AllowedClusters, c) {
					return fmt.Errorf("%s: %w: namespace %s replicates to cluster %s", what, ErrInvalid, strings.TrimPrefix(n.Key, namespacesPrefix), c)
				}
			}
		}
	}
	return s.replace(ctx, TenantKey(name), what, rev, info)
}

// DeleteTenant removes a tenant; ErrNotEmpty while it has namespaces.
func (s *Store) DeleteTenant(ctx context.Context, name string) (err error) {
	defer s.settle(ctx, &err)
	what := "tenant " + name
	if err := topic.ValidTenant(name); err != nil {
		return invalid(what, err)
	}
	kv, err := s.meta.Get(ctx, TenantKey(name))
	if errors.Is(err, metastore.ErrNotFound) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	nsPrefix := namespacesPrefix + name + "/"
	ok, err := s.txn(ctx, what, []metastore.Cmp{metastore.AtRev(kv.Key, kv.Rev), metastore.NoneUnder(nsPrefix)}, metastore.DeleteOp(kv.Key))
	if err != nil || ok {
		return err
	}
	nss, err := s.meta.List(ctx, nsPrefix)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if len(nss) > 0 {
		return fmt.Errorf("%s: %w: it has %d namespaces", what, ErrNotEmpty, len(nss))
	}
	return fmt.Errorf("%s: %w", what, ErrConflict)
}

// ---- namespaces

func parseNS(namespace string) (tenant, ns string, err error) {
	tenant, ns, err = topic.ParseNamespace(namespace)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return tenant, ns, nil
}

// checkReplication checks that the clusters exist and are allowed by the
// tenant.
func (s *Store) checkReplication(ctx context.Context, ti TenantInfo, clusters []string) error {
	if err := s.checkClustersExist(ctx, clusters); err != nil {
		return fmt.Errorf("replication_clusters: %w", err)
	}
	if len(ti.AllowedClusters) == 0 {
		return nil
	}
	for _, c := range clusters {
		if !slices.Contains(ti.AllowedClusters, c) {
			return fmt.Errorf("replication_clusters: %w: cluster %s is not in the tenant's allowed clusters %v", ErrInvalid, c, ti.AllowedClusters)
		}
	}
	return nil
}

// CreateNamespace records a new namespace ("tenant/ns") with policies p
// (nil: defaults). Its tenant must exist; with no replication clusters
// it gets the local cluster; bundles default to Config.DefaultBundles.
func (s *Store) CreateNamespace(ctx context.Context, namespace string, p *Policies) (err error) {
	defer s.settle(ctx, &err)
	what := "namespace " + namespace
	tenant, ns, err := parseNS(namespace)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if p == nil {
		p = &Policies{}
	} else {
		p = p.Clone()
	}
	if len(p.ReplicationClusters) == 0 && s.cfg.LocalCluster != "" {
		p.ReplicationClusters = []string{s.cfg.LocalCluster}
	}
	if err := p.validate(s.cfg.DefaultBundles); err != nil {
		return invalid(what, err)
	}
	if err := p.AuthPolicies.checkNamespace(tenant + "/" + ns); err != nil {
		return invalid(what, err)
	}
	if err := p.checkLimits(s.limits(), nil); err != nil {
		return invalid(what, err)
	}
	var ti TenantInfo
	trev, err := s.getJSON(ctx, TenantKey(tenant), "tenant "+tenant, &ti)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := s.checkReplication(ctx, ti, p.ReplicationClusters); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	key := NamespaceKey(tenant, ns)
	ok, err := s.txn(ctx, what, []metastore.Cmp{metastore.AtRev(TenantKey(tenant), trev), metastore.Absent(key)}, metastore.PutOp(key, b))
	if err != nil || ok {
		return err
	}
	if ok, err := s.exists(ctx, key); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	} else if ok {
		return fmt.Errorf("%s: %w", what, ErrExists)
	}
	return fmt.Errorf("%s: %w: tenant %s changed", what, ErrConflict, tenant)
}

// Namespace reads a namespace's policies. A stored record with a value
// the store would refuse to write (written by an older version, or by
// hand) is ErrCorrupt: its values are never used (a message TTL that
// does not fit a duration would expire every message). Updating the
// offending field, or deleting the namespace, still works.
func (s *Store) Namespace(ctx context.Context, namespace string) (*Policies, error) {
	p, rev, err := s.namespace(ctx, namespace, s.readJSON)
	if err != nil {
		return nil, err
	}
	if err := p.checkStored(); err != nil {
		tenant, ns, _ := parseNS(namespace)
		return nil, s.corrupt("namespace "+namespace, NamespaceKey(tenant, ns), rev, err)
	}
	return p, nil
}

func (s *Store) namespace(ctx context.Context, namespace string, get func(ctx context.Context, key, what string, v any) (int64, error)) (*Policies, int64, error) {
	what := "namespace " + namespace
	tenant, ns, err := parseNS(namespace)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", what, err)
	}
	var p Policies
	rev, err := get(ctx, NamespaceKey(tenant, ns), what, &p)
	if err != nil {
		return nil, 0, err
	}
	return &p, rev, nil
}

// Namespaces lists a tenant's namespaces as "tenant/ns", in order;
// ErrNotFound if the tenant does not exist.
func (s *Store) Namespaces(ctx context.Context, tenant string) ([]string, error) {
	what := "tenant " + tenant
	if err := topic.ValidTenant(tenant); err != nil {
		return nil, invalid(what, err)
	}
	if ok, err := s.readExists(ctx, TenantKey(tenant)); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	} else if !ok {
		return nil, fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	kvs, err := s.readList(ctx, namespacesPrefix+tenant+"/")
	if err != nil {
		return nil, fmt.Errorf("%s: namespaces: %w", what, err)
	}
	out := lastSegments(kvs, namespacesPrefix)
	return out, nil
}

// UpdateNamespace applies fn to a copy of a namespace's policies and
// writes the result with compare-and-swap, retrying on conflict; fn may
// run several times. The result is validated as on create.
func (s *Store) UpdateNamespace(ctx context.Context, namespace string, fn func(*Policies) error) (_ *Policies, err error) {
	defer s.settle(ctx, &err)
	what := "namespace " + namespace
	tenant, ns, err := parseNS(namespace)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	key := NamespaceKey(tenant, ns)
	for {
		p, rev, err := s.namespace(ctx, namespace, s.getJSON)
		if err != nil {
			return nil, err
		}
		old := p.Clone()
		if err := fn(p); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if err := p.validate(s.cfg.DefaultBundles); err != nil {
			return nil, invalid(what, err)
		}
		if err := p.AuthPolicies.checkNamespace(tenant + "/" + ns); err != nil {
			return nil, invalid(what, err)
		}
		if err := p.checkLimits(s.limits(), old); err != nil {
			return nil, invalid(what, err)
		}
		var ti TenantInfo
		trev, err := s.getJSON(ctx, TenantKey(tenant), "tenant "+tenant, &ti)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if err := s.checkReplication(ctx, ti, p.ReplicationClusters); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		b, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		ok, err := s.txn(ctx, what, []metastore.Cmp{metastore.AtRev(key, rev), metastore.AtRev(TenantKey(tenant), trev)}, metastore.PutOp(key, b))
		if err != nil {
			return nil, err
		}
		if ok {
			return p, nil
		}
		s.conflicts.Add(ctx, 1)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w: %w", what, ErrConflict, err)
		}
	}
}

// DeleteNamespace removes a namespace; ErrNotEmpty while it has
// partitioned topics or Config.HasTopics says it has topics.
func (s *Store) DeleteNamespace(ctx context.Context, namespace string) (err error) {
	defer s.settle(ctx, &err)
	what := "namespace " + namespace
	tenant, ns, err := parseNS(namespace)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	key := NamespaceKey(tenant, ns)
	kv, err := s.meta.Get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if s.cfg.HasTopics != nil {
		has, err := s.cfg.HasTopics(ctx, tenant+"/"+ns)
		if err != nil {
			return fmt.Errorf("%s: topics: %w", what, err)
		}
		if has {
			return fmt.Errorf("%s: %w: it has topics", what, ErrNotEmpty)
		}
	}
	tp := namespaceTopicsPrefix(tenant, ns)
	ok, err := s.txn(ctx, what, []metastore.Cmp{metastore.AtRev(key, kv.Rev), metastore.NoneUnder(tp)}, metastore.DeleteOp(key))
	if err != nil {
		return err
	}
	if ok {
		s.deleteTopicPoliciesUnder(ctx, tenant, ns)
		return nil
	}
	kvs, err := s.meta.List(ctx, tp)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if len(kvs) > 0 {
		return fmt.Errorf("%s: %w: it has %d partitioned topics", what, ErrNotEmpty, len(kvs))
	}
	return fmt.Errorf("%s: %w", what, ErrConflict)
}

// ---- partitioned topics

func checkBase(n topic.Name) error {
	if n.Domain == "" || n.Tenant == "" || n.Namespace == "" || n.Local == "" {
		return fmt.Errorf("%w: topic %q is not a valid name", ErrInvalid, n.String())
	}
	if n.Partition() >= 0 {
		return fmt.Errorf("%w: %s is a partition name; a partitioned topic cannot end in %s<n>", ErrInvalid, n, topic.PartitionSuffix)
	}
	return nil
}

// CreatePartitioned records partitioned topic name with n partitions (n
// at least 1); ErrExists if it is already partitioned, ErrNotFound if its
// namespace does not exist.
func (s *Store) CreatePartitioned(ctx context.Context, name topic.Name, n int) error {
	return s.CreatePartitionedWithProperties(ctx, name, n, nil)
}

// CreatePartitionedWithProperties is CreatePartitioned with topic
// properties stored alongside.
func (s *Store) CreatePartitionedWithProperties(ctx context.Context, name topic.Name, n int, props map[string]string) (err error) {
	defer s.settle(ctx, &err)
	what := "partitioned topic " + name.String()
	if err := checkBase(name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := s.checkPartitions(name, n); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	nsKey := NamespaceKey(name.Tenant, name.Namespace)
	kv, err := s.meta.Get(ctx, nsKey)
	if errors.Is(err, metastore.ErrNotFound) {
		return fmt.Errorf("%s: namespace %s: %w", what, name.NamespaceName(), ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	b, err := json.Marshal(PartitionedMetadata{Partitions: n, Properties: props})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	key := PartitionedKey(name)
	ok, err := s.txn(ctx, what, []metastore.Cmp{metastore.AtRev(nsKey, kv.Rev), metastore.Absent(key)}, metastore.PutOp(key, b))
	if err != nil || ok {
		return err
	}
	if ok, err := s.exists(ctx, key); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	} else if ok {
		return fmt.Errorf("%s: %w", what, ErrExists)
	}
	return fmt.Errorf("%s: %w: namespace changed", what, ErrConflict)
}

// checkPartitions checks a partition count for name: at least 1, at most
// the limit, and every partition's name one storage can hold (else the
// error is topic.ErrInvalidName's: InvalidTopicName, 412).
func (s *Store) checkPartitions(name topic.Name, n int) error {
	if n < 1 {
		return fmt.Errorf("%w: %d partitions, want at least 1", ErrInvalid, n)
	}
	if max := s.maxPartitions(); n > max {
		return fmt.Errorf("%w: %d partitions, more than the maximum %d (broker.limits.maxPartitionsPerTopic)", ErrInvalid, n, max)
	}
	return name.ValidPartitions(n)
}

// Partitions returns the partition count of a partitioned topic; ok is
// false (and n 0) when name is not a partitioned topic. A partition name
// is never a partitioned topic.
func (s *Store) Partitions(ctx context.Context, name topic.Name) (n int, ok bool, err error) {
	m, ok, err := s.PartitionedMetadata(ctx, name)
	return m.Partitions, ok, err
}

// PartitionedMetadata returns the stored record of a partitioned topic;
// ok is false when name is not one.
func (s *Store) PartitionedMetadata(ctx context.Context, name topic.Name) (PartitionedMetadata, bool, error) {
	var m PartitionedMetadata
	if name.Partition() >= 0 {
		return m, false, nil
	}
	if err := checkBase(name); err != nil {
		return m, false, err
	}
	what := "partitioned topic " + name.String()
	rev, err := s.readJSON(ctx, PartitionedKey(name), what, &m)
	if errors.Is(err, ErrNotFound) {
		return PartitionedMetadata{}, false, nil
	}
	if err != nil {
		return PartitionedMetadata{}, false, err
	}
	if err := checkPartitionedRecord(name, m, s.maxPartitions()); err != nil {
		return PartitionedMetadata{}, false, s.corrupt(what, PartitionedKey(name), rev, err)
	}
	return m, true, nil
}

// UpdatePartitions raises a partitioned topic's partition count to n;
// ErrInvalid if n is lower than the current count (equal is a no-op),
// ErrNotFound if the topic is not partitioned.
func (s *Store) UpdatePartitions(ctx context.Context, name topic.Name, n int) (err error) {
	defer s.settle(ctx, &err)
	what := "partitioned topic " + name.String()
	if err := checkBase(name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := s.checkPartitions(name, n); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for {
		var m PartitionedMetadata
		rev, err := s.getJSON(ctx, PartitionedKey(name), what, &m)
		if err != nil {
			return err
		}
		if err := checkPartitionedRecord(name, m, s.maxPartitions()); err != nil {
			return s.corrupt(what, PartitionedKey(name), rev, err)
		}
		if n < m.Partitions {
			return fmt.Errorf("%s: %w: cannot lower the partitions from %d to %d", what, ErrInvalid, m.Partitions, n)
		}
		if n == m.Partitions {
			return nil
		}
		m.Partitions = n
		err = s.replace(ctx, PartitionedKey(name), what, rev, m)
		if !errors.Is(err, ErrConflict) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w: %w", what, ErrConflict, err)
		}
	}
}

// DeletePartitioned removes a partitioned topic's record; ErrNotFound if
// there is none. Deleting the partitions themselves is the caller's job.
func (s *Store) DeletePartitioned(ctx context.Context, name topic.Name) (err error) {
	defer s.settle(ctx, &err)
	what := "partitioned topic " + name.String()
	if err := checkBase(name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	existed, _, err := s.meta.DeleteExisting(ctx, PartitionedKey(name))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !existed {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return nil
}

// ListPartitioned lists a namespace's partitioned topics of a domain
// (empty: both domains), in key order. It does not check that the
// namespace exists.
func (s *Store) ListPartitioned(ctx context.Context, namespace string, domain topic.Domain) ([]topic.Name, error) {
	what := "namespace " + namespace
	tenant, ns, err := parseNS(namespace)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	prefix := namespaceTopicsPrefix(tenant, ns)
	if domain != "" {
		prefix += string(domain) + "/"
	}
	kvs, err := s.readList(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("%s: partitioned topics: %w", what, err)
	}
	out := make([]topic.Name, 0, len(kvs))
	for _, kv := range kvs {
		d, local, ok := strings.Cut(strings.TrimPrefix(kv.Key, namespaceTopicsPrefix(tenant, ns)), "/")
		if !ok {
			continue
		}
		out = append(out, topic.Name{Domain: topic.Domain(d), Tenant: tenant, Namespace: ns, Local: local})
	}
	return out, nil
}

// ---- bootstrap

// EnsureStandalone creates, if absent, cluster `cluster` with data d,
// tenant "public" allowing it, and namespace "public/default". It is
// idempotent and leaves existing records alone.
func (s *Store) EnsureStandalone(ctx context.Context, cluster string, d ClusterData) error {
	if err := s.CreateCluster(ctx, cluster, d); err != nil && !errors.Is(err, ErrExists) {
		return err
	}
	if err := s.CreateTenant(ctx, topic.DefaultTenant, TenantInfo{AdminRoles: []string{}, AllowedClusters: []string{cluster}}); err != nil && !errors.Is(err, ErrExists) {
		return err
	}
	p := &Policies{ReplicationClusters: []string{cluster}}
	if err := s.CreateNamespace(ctx, topic.DefaultTenant+"/"+topic.DefaultNamespace, p); err != nil && !errors.Is(err, ErrExists) {
		return err
	}
	return nil
}
