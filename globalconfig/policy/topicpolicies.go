package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

const topicPoliciesPrefix = Root + "topic-policies/"

// TopicPoliciesKey is the key of a topic's own policies. A partition
// shares its partitioned topic's.
func TopicPoliciesKey(n topic.Name) string {
	b := n.Base()
	return topicPoliciesPrefix + b.Tenant + "/" + b.Namespace + "/" + string(b.Domain) + "/" + b.Local
}

// TopicPolicies are the policies a topic sets for itself, overriding its
// namespace's.
type TopicPolicies struct {
	// ReplicationClusters, when set, replace the namespace's replication
	// clusters for this topic.
	ReplicationClusters []string `json:"replication_clusters,omitempty"`
}

// TopicPolicies reads a topic's own policies (ok false when it has none).
func (s *Store) TopicPolicies(ctx context.Context, name topic.Name) (TopicPolicies, bool, error) {
	var tp TopicPolicies
	if name.Tenant == "" || name.Namespace == "" || name.Local == "" {
		return tp, false, fmt.Errorf("%w: topic %q is not a valid name", ErrInvalid, name.String())
	}
	_, err := s.readJSON(ctx, TopicPoliciesKey(name), "topic policies of "+name.Base().String(), &tp)
	if errors.Is(err, ErrNotFound) {
		return TopicPolicies{}, false, nil
	}
	return tp, err == nil, err
}

// ReplicationClusters returns the clusters a topic replicates across: its
// own override, else its namespace's.
func (s *Store) ReplicationClusters(ctx context.Context, name topic.Name) ([]string, error) {
	tp, ok, err := s.TopicPolicies(ctx, name)
	if err != nil {
		return nil, err
	}
	if ok && len(tp.ReplicationClusters) > 0 {
		return tp.ReplicationClusters, nil
	}
	p, err := s.Namespace(ctx, name.NamespaceName())
	if err != nil {
		return nil, err
	}
	return p.ReplicationClusters, nil
}

// SetTopicReplication sets a topic's replication clusters, which must
// exist and be allowed by its tenant; its namespace must exist.
func (s *Store) SetTopicReplication(ctx context.Context, name topic.Name, clusters []string) (err error) {
	defer s.settle(ctx, &err)
	what := "topic policies of " + name.Base().String()
	if len(clusters) == 0 {
		return fmt.Errorf("%s: %w: replication clusters: at least one is required", what, ErrInvalid)
	}
	var ti TenantInfo
	trev, err := s.getJSON(ctx, TenantKey(name.Tenant), "tenant "+name.Tenant, &ti)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := s.checkReplication(ctx, ti, clusters); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	nsKey := NamespaceKey(name.Tenant, name.Namespace)
	kv, err := s.meta.Get(ctx, nsKey)
	if err != nil {
		return fmt.Errorf("%s: namespace %s: %w", what, name.NamespaceName(), mapNotFound(err))
	}
	b, err := json.Marshal(TopicPolicies{ReplicationClusters: clusters})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	ok, err := s.txn(ctx, what, []metastore.Cmp{metastore.AtRev(TenantKey(name.Tenant), trev), metastore.AtRev(nsKey, kv.Rev)}, metastore.PutOp(TopicPoliciesKey(name), b))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s: %w: tenant or namespace changed", what, ErrConflict)
	}
	return nil
}

// RemoveTopicReplication removes a topic's replication override: it
// follows its namespace again.
func (s *Store) RemoveTopicReplication(ctx context.Context, name topic.Name) (err error) {
	defer s.settle(ctx, &err)
	if err := s.meta.Delete(ctx, TopicPoliciesKey(name)); err != nil {
		return fmt.Errorf("topic policies of %s: %w", name.Base(), err)
	}
	return nil
}

func mapNotFound(err error) error {
	if errors.Is(err, metastore.ErrNotFound) {
		return ErrNotFound
	}
	return err
}
