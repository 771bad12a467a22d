package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

// PolicyNamespaces answers the broker's namespace questions from the
// policy store.
type PolicyNamespaces struct {
	Store *policy.Store
	// Default is the auto topic creation of namespaces without an
	// override (the broker-level setting).
	Default policy.AutoTopicCreation
}

// Policy implements Namespaces.
func (p PolicyNamespaces) Policy(ctx context.Context, ns string) (NamespacePolicy, error) {
	pol, err := p.Store.Namespace(ctx, ns)
	if errors.Is(err, policy.ErrNotFound) {
		return NamespacePolicy{}, p.missing(ctx, ns)
	}
	if errors.Is(err, policy.ErrInvalid) {
		return NamespacePolicy{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if err != nil {
		return NamespacePolicy{}, err
	}
	ac := p.Default
	if pol.AutoTopicCreation != nil {
		ac = *pol.AutoTopicCreation
	}
	out := NamespacePolicy{AutoCreate: ac.AllowAutoTopicCreation}
	if ac.TopicType == policy.TopicTypePartitioned {
		out.AutoCreatePartitions = 1
		if ac.DefaultNumPartitions != nil && *ac.DefaultNumPartitions > 0 {
			out.AutoCreatePartitions = *ac.DefaultNumPartitions
		}
	}
	out.Rates = namespaceRates(pol.NamespaceRates, p.Store.LocalCluster())
	out.ReplicationClusters = pol.ReplicationClusters
	out.Failover = policy.FailoverOf(pol)
	if f := out.Failover; f.Mode == policy.ActiveStandby && f.Primary != p.Store.LocalCluster() {
		if cd, err := p.Store.Cluster(ctx, f.Primary); err == nil {
			out.PrimaryServiceURL, out.PrimaryWebServiceURL = cd.BrokerServiceURL, cd.ServiceURL
			out.PrimaryServiceURLTLS, out.PrimaryWebServiceURLTLS = cd.BrokerServiceURLTLS, cd.ServiceURLTLS
		}
	}
	out.TopicFailover = pol.TopicFailover
	for _, f := range pol.TopicFailover {
		if _, ok := out.TopicPrimaryURLs[f.Primary]; ok || f.Mode != policy.ActiveStandby || f.Primary == p.Store.LocalCluster() {
			continue
		}
		if cd, err := p.Store.Cluster(ctx, f.Primary); err == nil {
			if out.TopicPrimaryURLs == nil {
				out.TopicPrimaryURLs = map[string][4]string{}
			}
			out.TopicPrimaryURLs[f.Primary] = [4]string{cd.BrokerServiceURL, cd.ServiceURL, cd.BrokerServiceURLTLS, cd.ServiceURLTLS}
		}
	}
	out.Deduplication = pol.DeduplicationEnabled != nil && *pol.DeduplicationEnabled
	out.MaxProducers, out.MaxConsumers = pol.MaxProducersPerTopic, pol.MaxConsumersPerTopic
	out.MaxConsumersPerSubscription, out.MaxTopics = pol.MaxConsumersPerSubscription, pol.MaxTopicsPerNamespace
	out.Persistence = pol.Persistence
	if g, ok := pol.BookieAffinityGroups[p.Store.LocalCluster()]; ok {
		out.Affinity = ledger.Affinity{Primary: splitGroups(g.Primary), Secondary: splitGroups(g.Secondary)}
	}
	out.EncryptionRequired = pol.EncryptionRequired
	out.MaxUnackedPerConsumer = unackedPolicy(pol.MaxUnackedMessagesPerConsumer)
	out.MaxUnackedPerSubscription = unackedPolicy(pol.MaxUnackedMessagesPerSubscription)
	out.DedupSnapshotInterval = pol.DeduplicationSnapshotIntervalSeconds
	out.DelayedDelivery = pol.DelayedDelivery
	out.SyncReplication = pol.SyncReplication
	out.Inactive = pol.InactiveTopicPolicies
	if v := pol.CompactionThreshold; v != nil {
		out.CompactionThreshold = *v
	}
	if a := pol.AutoSubscriptionCreationOverride; a != nil {
		out.AutoSubscriptionCreation = &a.AllowAutoSubscriptionCreation
	}
	if m := pol.SubscriptionExpirationTime; m != nil && *m > 0 {
		out.SubscriptionExpiration = time.Duration(*m) * time.Minute
	}
	// The store refuses values these conversions cannot represent, on
	// write and on read; they still fail rather than wrap.
	if r := pol.RetentionPolicies; r != nil {
		rt, err1 := policy.RetentionTime(r.RetentionTimeInMinutes)
		rs, err2 := policy.RetentionSize(r.RetentionSizeInMB)
		if err := errors.Join(err1, err2); err != nil {
			return NamespacePolicy{}, fmt.Errorf("namespace %s: %w", ns, err)
		}
		out.Retention = mledger.Retention{Time: rt, Size: rs, Set: true}
	}
	if pol.MessageTTLInSeconds != nil {
		ttl, err := policy.MessageTTL(*pol.MessageTTLInSeconds)
		if err != nil {
			return NamespacePolicy{}, fmt.Errorf("namespace %s: %w", ns, err)
		}
		out.MessageTTL = ttl
	}
	out.setBacklogQuotas(pol.BacklogQuotaMap)
	return out, nil
}

// missing is the error for namespace ns, which does not exist: it says
// whether its tenant does not exist either, as the admin API does.
func (p PolicyNamespaces) missing(ctx context.Context, ns string) error {
	tenant, _, _ := strings.Cut(ns, "/")
	if _, err := p.Store.Tenant(ctx, tenant); errors.Is(err, policy.ErrNotFound) {
		return missingError(fmt.Sprintf("tenant %q does not exist", tenant))
	}
	return missingError(fmt.Sprintf("namespace %q does not exist", ns))
}

// missingError is ErrNamespace with what is missing, the tenant or the
// namespace, in words a client is shown as they are.
type missingError string

func (e missingError) Error() string { return string(e) }
func (e missingError) Unwrap() error { return ErrNamespace }

// setBacklogQuotas applies the quotas of m (a namespace's or a topic's
// backlog quota map) by type: each type m holds replaces pol's.
func (pol *NamespacePolicy) setBacklogQuotas(m map[string]policy.BacklogQuota) {
	if q, ok := m[policy.DestinationStorage]; ok {
		pol.BacklogLimit, pol.BacklogPolicy = 0, BacklogProducerException
		if q.LimitSize > 0 {
			pol.BacklogLimit, pol.BacklogPolicy = q.LimitSize, backlogPolicyOf(q.Policy)
		}
	}
	if q, ok := m[policy.MessageAge]; ok {
		pol.BacklogAge, pol.BacklogAgePolicy = 0, BacklogProducerException
		if q.LimitTime > 0 {
			pol.BacklogAge, pol.BacklogAgePolicy = time.Duration(q.LimitTime)*time.Second, backlogPolicyOf(q.Policy)
		}
	}
}

// backlogPolicyOf is the broker's reading of a backlog quota's policy
// name (producer_exception when not set, as Pulsar).
func backlogPolicyOf(name string) BacklogPolicy {
	switch name {
	case policy.ConsumerBacklogEviction:
		return BacklogConsumerEviction
	case policy.ProducerRequestHold:
		return BacklogProducerHold
	default:
		return BacklogProducerException
	}
}

// splitGroups reads a bookie affinity group as Pulsar does: one or more
// group names separated by commas.
func splitGroups(s string) []string {
	var out []string
	for _, g := range strings.Split(s, ",") {
		if g = strings.TrimSpace(g); g != "" {
			out = append(out, g)
		}
	}
	return out
}

// TopicPolicy implements TopicPolicies: the topic's own policies in
// force in this cluster (local over global) replace its namespace's
// replication clusters, retention, message TTL, limits (unacknowledged
// messages per consumer and per subscription among them), rates,
// de-duplication snapshot interval, delayed delivery, persistence and
// compaction threshold. Its offload policies are stored only.
func (p PolicyNamespaces) TopicPolicy(ctx context.Context, name topic.Name, pol NamespacePolicy) (NamespacePolicy, error) {
	tp, err := p.Store.EffectiveTopicPolicies(ctx, name)
	if err != nil {
		return pol, err
	}
	return applyTopicPolicies(name, pol, tp)
}

// TopicPoliciesOf implements NamespaceTopicPolicies with one list of the
// namespace's topic policies (each scope).
func (p PolicyNamespaces) TopicPoliciesOf(ctx context.Context, ns string) (func(topic.Name, NamespacePolicy) (NamespacePolicy, error), error) {
	apply, _, err := p.TopicPoliciesDigestOf(ctx, ns)
	return apply, err
}

// applyTopicPolicies is TopicPolicy with the topic's policies read.
func applyTopicPolicies(name topic.Name, pol NamespacePolicy, tp policy.TopicPolicies) (NamespacePolicy, error) {
	if len(tp.ReplicationClusters) > 0 {
		pol.ReplicationClusters = tp.ReplicationClusters
	}
	if r := tp.RetentionPolicies; r != nil {
		rt, err1 := policy.RetentionTime(r.RetentionTimeInMinutes)
		rs, err2 := policy.RetentionSize(r.RetentionSizeInMB)
		if err := errors.Join(err1, err2); err != nil {
			return pol, fmt.Errorf("topic %s: %w", name.Base(), err)
		}
		pol.Retention = mledger.Retention{Time: rt, Size: rs, Set: true}
	}
	if tp.MessageTTLInSeconds != nil {
		ttl, err := policy.MessageTTL(*tp.MessageTTLInSeconds)
		if err != nil {
			return pol, fmt.Errorf("topic %s: %w", name.Base(), err)
		}
		pol.MessageTTL = ttl
	}
	if a := tp.AutoSubscriptionCreation; a != nil {
		allow := a.AllowAutoSubscriptionCreation
		pol.AutoSubscriptionCreation = &allow
	}
	if tp.InactiveTopicPolicies != nil {
		pol.Inactive = tp.InactiveTopicPolicies
	}
	// The topic's own limits win over the namespace's.
	for _, l := range []struct {
		v   *int
		dst **int
	}{
		{tp.MaxProducers, &pol.MaxProducers},
		{tp.MaxConsumers, &pol.MaxConsumers},
		{tp.MaxConsumersPerSubscription, &pol.MaxConsumersPerSubscription},
	} {
		if l.v != nil {
			v := *l.v
			*l.dst = &v
		}
	}
	for _, l := range []struct {
		v   *int
		dst *int
	}{
		{tp.MaxSubscriptionsPerTopic, &pol.MaxSubscriptions},
		{tp.MaxMessageSize, &pol.MaxMessageSize},
	} {
		if l.v != nil {
			*l.dst = *l.v
		}
	}
	pol.Rates = pol.Rates.withTopic(tp)
	if v := tp.CompactionThreshold; v != nil {
		pol.CompactionThreshold = *v
	}
	if v := tp.MaxUnackedMessagesOnConsumer; v != nil {
		pol.MaxUnackedPerConsumer = unackedPolicy(v)
	}
	if v := tp.MaxUnackedMessagesOnSubscription; v != nil {
		pol.MaxUnackedPerSubscription = unackedPolicy(v)
	}
	if v := tp.DeduplicationSnapshotIntervalSeconds; v != nil {
		pol.DedupSnapshotInterval = v
	}
	if d := tp.DelayedDelivery; d != nil {
		pol.DelayedDelivery = d
	}
	if sr := tp.SyncReplication; sr != nil {
		pol.SyncReplication = sr
	}
	if p := tp.Persistence; p != nil {
		pol.Persistence = p
	}
	if v := tp.DeduplicationEnabled; v != nil {
		pol.Deduplication = *v
	}
	pol.setBacklogQuotas(tp.BackLogQuotaMap)
	return pol, nil
}

// Partitions implements Namespaces.
func (p PolicyNamespaces) Partitions(ctx context.Context, name topic.Name) (int, bool, error) {
	return p.Store.Partitions(ctx, name)
}

// CreatePartitioned implements Namespaces.
func (p PolicyNamespaces) CreatePartitioned(ctx context.Context, name topic.Name, n int) error {
	return p.Store.CreatePartitioned(ctx, name, n)
}

// ListPartitioned implements PartitionedLister.
func (p PolicyNamespaces) ListPartitioned(ctx context.Context, ns string) ([]PartitionedTopic, error) {
	names, err := p.Store.ListPartitioned(ctx, ns, "")
	if err != nil {
		return nil, err
	}
	out := make([]PartitionedTopic, 0, len(names))
	for _, n := range names {
		cnt, ok, err := p.Store.Partitions(ctx, n)
		if errors.Is(err, policy.ErrCorrupt) {
			out = append(out, PartitionedTopic{Name: n, Err: err})
			continue
		}
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, PartitionedTopic{Name: n, Partitions: cnt})
		}
	}
	return out, nil
}
