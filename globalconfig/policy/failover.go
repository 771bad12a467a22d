package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// Replication modes of a namespace.
const (
	// ActiveActive: every region of the namespace takes publishes and
	// acknowledgements (the default).
	ActiveActive = "active-active"
	// ActiveStandby: only the primary region does; the others hold
	// replicated copies and send clients to the primary.
	ActiveStandby = "active-standby"
)

// Failover is a namespace's replication mode and, in active-standby, its
// primary region. Epoch grows by one with every change of mode or primary,
// so a region, a broker or a replicated entry can tell which primary it
// acted for.
type Failover struct {
	Mode    string `json:"mode"`
	Primary string `json:"primary,omitempty"`
	Epoch   int64  `json:"epoch"`
	// AutoAfterSeconds, when positive, lets another region promote itself
	// once no broker of the primary region has been alive in the global
	// store for that long (active-standby only; 0: manual failover only).
	AutoAfterSeconds int `json:"autoFailoverAfterSeconds,omitempty"`
}

// MaxAutoFailoverSeconds bounds Failover.AutoAfterSeconds (an hour).
const MaxAutoFailoverSeconds = 3600

// FailoverOf returns p's failover policy; a namespace that never set one
// is active-active at epoch 0.
func FailoverOf(p *Policies) Failover {
	if p == nil || p.Failover == nil {
		return Failover{Mode: ActiveActive}
	}
	return *p.Failover
}

// SetFailover changes p's mode and primary; the epoch grows when either
// changes (setting what is already set changes nothing).
func SetFailover(p *Policies, mode, primary string) error {
	if mode == ActiveActive && primary != "" {
		return fmt.Errorf("%w: failover: an active-active namespace has no primary (got %q)", ErrInvalid, primary)
	}
	cur := FailoverOf(p)
	if cur.Mode == mode && cur.Primary == primary {
		return nil
	}
	auto := cur.AutoAfterSeconds
	if mode == ActiveActive {
		auto = 0
	}
	p.Failover = &Failover{Mode: mode, Primary: primary, Epoch: cur.Epoch + 1, AutoAfterSeconds: auto}
	return nil
}

// SetAutoFailover sets how long the primary must be gone before another
// region promotes itself (0: never); the epoch does not change.
func SetAutoFailover(p *Policies, seconds int) error {
	cur := FailoverOf(p)
	if seconds != 0 && cur.Mode != ActiveStandby {
		return fmt.Errorf("%w: failover.autoFailoverAfterSeconds: only an active-standby namespace fails over", ErrInvalid)
	}
	cur.AutoAfterSeconds = seconds
	p.Failover = &cur
	return nil
}

// validate checks f against the namespace's replication clusters.
func (f *Failover) validate(clusters []string) error {
	var errs []error
	switch f.Mode {
	case ActiveActive:
		if f.Primary != "" {
			errs = append(errs, fmt.Errorf("failover.primary: an active-active namespace has no primary (got %q)", f.Primary))
		}
	case ActiveStandby:
		if f.Primary == "" {
			errs = append(errs, errors.New("failover.primary: an active-standby namespace needs a primary region"))
		} else if !slices.Contains(clusters, f.Primary) {
			errs = append(errs, fmt.Errorf("failover.primary: %q is not one of the replication clusters %v", f.Primary, clusters))
		}
	default:
		errs = append(errs, fmt.Errorf("failover.mode: %q: want %q or %q", f.Mode, ActiveActive, ActiveStandby))
	}
	if f.AutoAfterSeconds < 0 || f.AutoAfterSeconds > MaxAutoFailoverSeconds {
		errs = append(errs, fmt.Errorf("failover.autoFailoverAfterSeconds: %d is not within 0..%d", f.AutoAfterSeconds, MaxAutoFailoverSeconds))
	} else if f.AutoAfterSeconds > 0 && f.Mode != ActiveStandby {
		errs = append(errs, errors.New("failover.autoFailoverAfterSeconds: only an active-standby namespace fails over"))
	}
	if f.Epoch < 0 {
		errs = append(errs, fmt.Errorf("failover.epoch: %d is negative", f.Epoch))
	}
	return errors.Join(errs...)
}

// NamespaceFailover is a namespace's failover policy and clusters.
type NamespaceFailover struct {
	Namespace string // "tenant/ns"
	Failover  Failover
	Clusters  []string
}

// AutoFailoverNamespaces lists the namespaces whose failover is automatic
// (from the cache when the store has one); records that do not decode are
// skipped.
func (s *Store) AutoFailoverNamespaces(ctx context.Context) ([]NamespaceFailover, error) {
	kvs, err := s.readList(ctx, namespacesPrefix)
	if err != nil {
		return nil, err
	}
	var out []NamespaceFailover
	for _, kv := range kvs {
		var p Policies
		if json.Unmarshal(kv.Value, &p) != nil || p.Failover == nil || p.Failover.AutoAfterSeconds <= 0 {
			continue
		}
		out = append(out, NamespaceFailover{Namespace: strings.TrimPrefix(kv.Key, namespacesPrefix), Failover: *p.Failover, Clusters: p.ReplicationClusters})
	}
	return out, nil
}

// ErrPrimaryChanged is why Promote did nothing: the namespace's primary
// is no longer the one the caller saw gone.
var ErrPrimaryChanged = errors.New("policy: the primary changed meanwhile")

// Promote makes to the primary of an active-standby namespace, only if
// from still is (the epoch grows by one). It is an automatic failover's
// one write, so it takes two round trips to the store (read, then
// compare-and-swap on the namespace's revision) rather than
// UpdateNamespace's checks of the tenant and clusters, which a change of
// primary among the namespace's own clusters cannot break, and it does
// not wait for this process's cache: the brokers follow the change by
// their watch.
func (s *Store) Promote(ctx context.Context, namespace, from, to string) error {
	what := "namespace " + namespace
	tenant, ns, err := parseNS(namespace)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	key := NamespaceKey(tenant, ns)
	for {
		p, rev, err := s.namespace(ctx, namespace, s.getJSON)
		if err != nil {
			return err
		}
		if cur := FailoverOf(p); cur.Mode != ActiveStandby || cur.Primary != from {
			return fmt.Errorf("%s: %w: it is %s with primary %q, not %q", what, ErrPrimaryChanged, cur.Mode, cur.Primary, from)
		}
		if err := SetFailover(p, ActiveStandby, to); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := p.validate(s.cfg.DefaultBundles); err != nil {
			return invalid(what, err)
		}
		b, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		ok, err := s.txn(ctx, what, []metastore.Cmp{metastore.AtRev(key, rev)}, metastore.PutOp(key, b))
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		s.conflicts.Add(ctx, 1)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w: %w", what, ErrConflict, err)
		}
	}
}

// MaxTopicFailovers bounds the topics of one namespace with their own
// failover policy (Policies.TopicFailover): every broker of the namespace
// tracks each of them.
const MaxTopicFailovers = 1000

// TopicFailoverOf returns the failover policy of the persistent topic
// named local (a partitioned topic's base name) in namespace policies p:
// its own when it has one, else its namespace's.
func TopicFailoverOf(p *Policies, local string) Failover {
	if p != nil {
		if f, ok := p.TopicFailover[local]; ok {
			return f
		}
	}
	return FailoverOf(p)
}

// SetTopicFailover gives the persistent topic named local (a partitioned
// topic's base name) its own mode and primary. Its epoch is one more than
// every epoch the namespace holds (its own and every topic's), so a topic
// that follows its own policy never goes back to an epoch it had; setting
// what is already set changes nothing. Topics fail over manually only.
func SetTopicFailover(p *Policies, local, mode, primary string) error {
	if mode == ActiveActive && primary != "" {
		return fmt.Errorf("%w: topicFailover.%s: an active-active topic has no primary (got %q)", ErrInvalid, local, primary)
	}
	if cur, ok := p.TopicFailover[local]; ok && cur.Mode == mode && cur.Primary == primary {
		return nil
	}
	epoch := FailoverOf(p).Epoch
	for _, f := range p.TopicFailover {
		epoch = max(epoch, f.Epoch)
	}
	if p.TopicFailover == nil {
		p.TopicFailover = map[string]Failover{}
	}
	p.TopicFailover[local] = Failover{Mode: mode, Primary: primary, Epoch: epoch + 1}
	return nil
}

// RemoveTopicFailover makes the topic follow its namespace's failover
// policy again; it reports whether the topic had its own.
func RemoveTopicFailover(p *Policies, local string) bool {
	if _, ok := p.TopicFailover[local]; !ok {
		return false
	}
	delete(p.TopicFailover, local)
	if len(p.TopicFailover) == 0 {
		p.TopicFailover = nil
	}
	return true
}

// validateTopicFailover checks the topics' own failover policies against
// the namespace's replication clusters.
func validateTopicFailover(m map[string]Failover, clusters []string) []error {
	var errs []error
	if len(m) > MaxTopicFailovers {
		errs = append(errs, fmt.Errorf("topicFailover: %d topics, more than %d", len(m), MaxTopicFailovers))
	}
	locals := slices.Sorted(maps.Keys(m))
	for _, local := range locals {
		f := m[local]
		if n, err := topic.Parse("persistent://t/n/" + local); err != nil || n.Partition() >= 0 {
			errs = append(errs, fmt.Errorf("topicFailover: %q is not the local name of a (partitioned) topic", local))
			continue
		}
		if err := f.validate(clusters); err != nil {
			errs = append(errs, fmt.Errorf("topicFailover.%s: %w", local, err))
		}
		if f.AutoAfterSeconds != 0 {
			errs = append(errs, fmt.Errorf("topicFailover.%s.autoFailoverAfterSeconds: a topic fails over manually only", local))
		}
	}
	return errs
}
