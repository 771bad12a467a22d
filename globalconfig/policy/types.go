package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/isobar-mq/isobar/topic"
)

// ClusterData describes a cluster, in Pulsar's JSON field names.
type ClusterData struct {
	ServiceURL                     string   `json:"serviceUrl"`
	ServiceURLTLS                  string   `json:"serviceUrlTls"`
	BrokerServiceURL               string   `json:"brokerServiceUrl"`
	BrokerServiceURLTLS            string   `json:"brokerServiceUrlTls"`
	PeerClusterNames               []string `json:"peerClusterNames"`
	AuthenticationPlugin           string   `json:"authenticationPlugin,omitempty"`
	AuthenticationParameters       string   `json:"authenticationParameters,omitempty"`
	BrokerClientTrustCertsFilePath string   `json:"brokerClientTrustCertsFilePath,omitempty"`
	BrokerClientTLSEnabled         bool     `json:"brokerClientTlsEnabled,omitempty"`
	// NATSURL is the region's NATS server for replication (an Isobar
	// extension; Pulsar clients ignore it).
	NATSURL string `json:"natsUrl,omitempty"`
}

// TenantInfo describes a tenant, in Pulsar's JSON field names. An empty
// AllowedClusters puts no limit on its namespaces' replication clusters.
type TenantInfo struct {
	AdminRoles      []string `json:"adminRoles"`
	AllowedClusters []string `json:"allowedClusters"`
}

// RetentionPolicies say how long acknowledged messages are kept; -1 means
// unlimited, 0 means none.
type RetentionPolicies struct {
	RetentionTimeInMinutes int   `json:"retentionTimeInMinutes"`
	RetentionSizeInMB      int64 `json:"retentionSizeInMB"`
}

// Backlog quota types (keys of Policies.BacklogQuotaMap).
const (
	DestinationStorage = "destination_storage"
	MessageAge         = "message_age"
)

// Backlog quota retention policies.
const (
	ProducerRequestHold     = "producer_request_hold"
	ProducerException       = "producer_exception"
	ConsumerBacklogEviction = "consumer_backlog_eviction"
)

// BacklogQuota limits a subscription backlog by size (bytes) and/or age
// (seconds); -1 or 0 mean no limit of that kind.
type BacklogQuota struct {
	LimitSize int64  `json:"limitSize"`
	LimitTime int64  `json:"limitTime"`
	Policy    string `json:"policy"`
}

// UnmarshalJSON accepts Pulsar's current fields and the deprecated "limit"
// (same as limitSize); numbers may be JSON strings, as Jackson allows
// (the Pulsar client tests send {"limit": "10240", ...}).
func (q *BacklogQuota) UnmarshalJSON(b []byte) error {
	var raw struct {
		Limit     flexInt `json:"limit"`
		LimitSize flexInt `json:"limitSize"`
		LimitTime flexInt `json:"limitTime"`
		Policy    string  `json:"policy"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*q = BacklogQuota{LimitSize: raw.LimitSize.v, LimitTime: raw.LimitTime.v, Policy: raw.Policy}
	if !raw.LimitSize.set && raw.Limit.set {
		q.LimitSize = raw.Limit.v
	}
	return nil
}

// flexInt decodes a JSON number or a string holding one.
type flexInt struct {
	v   int64
	set bool
}

func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	if s == "null" {
		return nil
	}
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("want an integer, got %s", b)
	}
	f.v, f.set = v, true
	return nil
}

// Topic types for AutoTopicCreation.TopicType.
const (
	TopicTypePartitioned    = "partitioned"
	TopicTypeNonPartitioned = "non-partitioned"
)

// AutoTopicCreation overrides the broker's auto topic creation setting for
// a namespace.
type AutoTopicCreation struct {
	AllowAutoTopicCreation bool   `json:"allowAutoTopicCreation"`
	TopicType              string `json:"topicType"`
	DefaultNumPartitions   *int   `json:"defaultNumPartitions,omitempty"`
}

// BundlesData is a namespace's split of the hash space: NumBundles ranges
// between NumBundles+1 ascending boundaries ("0x00000000".."0xffffffff").
type BundlesData struct {
	Boundaries []string `json:"boundaries"`
	NumBundles int      `json:"numBundles"`
}

// Policies are a namespace's policies: the subset of Pulsar's namespace
// Policies Isobar understands, in Pulsar's JSON names, plus every other
// field of the document the namespace was created with (Extra), kept
// verbatim and served back.
type Policies struct {
	ReplicationClusters  []string                `json:"replication_clusters"`
	RetentionPolicies    *RetentionPolicies      `json:"retention_policies"`
	MessageTTLInSeconds  *int                    `json:"message_ttl_in_seconds"`
	BacklogQuotaMap      map[string]BacklogQuota `json:"backlog_quota_map"`
	DeduplicationEnabled *bool                   `json:"deduplicationEnabled"`
	AutoTopicCreation    *AutoTopicCreation      `json:"autoTopicCreationOverride"`
	Bundles              *BundlesData            `json:"bundles"`
	// NamespaceRates are the namespace's rate limits (nsrates.go).
	NamespaceRates
	// SchemaAndSecurity are its schema settings, subscription auth mode
	// and encryption requirement (nsschema.go).
	SchemaAndSecurity
	// Failover is the replication mode and primary region (an Isobar
	// extension; nil: active-active).
	Failover *Failover `json:"failover,omitempty"`
	// TopicFailover overrides Failover for single persistent topics, by
	// the local name of the topic (a partitioned topic's, for all its
	// partitions): an Isobar extension, set through
	// /admin/v2/persistent/{tenant}/{ns}/{topic}/primary.
	TopicFailover map[string]Failover `json:"topicFailover,omitempty"`
	// AuthPolicies are the namespace's permission grants, in Pulsar's
	// auth_policies shape (permissions.go); nil: none.
	AuthPolicies *AuthPolicies `json:"auth_policies,omitempty"`

	// Limits and settings of nspolicies.go, in Pulsar's names; nil (or
	// empty): not set, the broker's default applies.
	MaxProducersPerTopic        *int                 `json:"max_producers_per_topic,omitempty"`
	MaxConsumersPerTopic        *int                 `json:"max_consumers_per_topic,omitempty"`
	MaxConsumersPerSubscription *int                 `json:"max_consumers_per_subscription,omitempty"`
	MaxTopicsPerNamespace       *int                 `json:"max_topics_per_namespace,omitempty"`
	SubscriptionExpirationTime  *int                 `json:"subscription_expiration_time_minutes,omitempty"`
	CompactionThreshold         *int64               `json:"compaction_threshold,omitempty"`
	OffloadThreshold            *int64               `json:"offload_threshold,omitempty"`
	OffloadThresholdInSeconds   *int64               `json:"offload_threshold_in_seconds,omitempty"`
	OffloadDeletionLagMs        *int64               `json:"offload_deletion_lag_ms,omitempty"`
	SchemaCompatibilityStrategy string               `json:"schema_compatibility_strategy,omitempty"`
	Properties                  map[string]string    `json:"properties,omitempty"`
	Persistence                 *PersistencePolicies `json:"persistence,omitempty"`
	// MaxUnackedMessagesPerConsumer and MaxUnackedMessagesPerSubscription
	// bound the unacknowledged messages of a Shared or Key_Shared
	// consumer and subscription (0: no limit); a topic's own
	// maxUnackedMessagesOn* win over them.
	MaxUnackedMessagesPerConsumer     *int `json:"max_unacked_messages_per_consumer,omitempty"`
	MaxUnackedMessagesPerSubscription *int `json:"max_unacked_messages_per_subscription,omitempty"`
	// DeduplicationSnapshotIntervalSeconds is how often, at least, a
	// topic's de-duplication state is snapshotted while entries are
	// written (0: only every broker-configured number of entries).
	DeduplicationSnapshotIntervalSeconds *int `json:"deduplicationSnapshotIntervalSeconds,omitempty"`
	// DelayedDelivery turns delayed delivery on or off for the
	// namespace's topics, with its tick and longest delay.
	DelayedDelivery *DelayedDeliveryPolicies `json:"delayed_delivery_policies,omitempty"`
	// BookieAffinityGroups are the namespace's bookie affinity groups by
	// cluster (an Isobar extension: Pulsar keeps the group in each
	// cluster's local policies, since bookies belong to one cluster).
	BookieAffinityGroups map[string]BookieAffinityGroup `json:"bookieAffinityGroups,omitempty"`
	// AutoSubscriptionCreationOverride says whether consumers may create
	// subscriptions on the namespace's topics, over the broker's
	// allowAutoSubscriptionCreation (a topic's own override wins over it).
	AutoSubscriptionCreationOverride *AutoSubscriptionCreation `json:"autoSubscriptionCreationOverride,omitempty"`
	// InactiveTopicPolicies and AntiAffinityGroup: nsops.go.
	InactiveTopicPolicies *InactiveTopicPolicies `json:"inactive_topic_policies,omitempty"`
	AntiAffinityGroup     string                 `json:"antiAffinityGroup,omitempty"`
	// SyncReplication, when set, makes publishes wait for other regions
	// (syncrepl.go); a topic's own wins over it.
	SyncReplication *SyncReplication `json:"syncReplication,omitempty"`

	// Extra holds the fields this type does not model, by JSON name.
	Extra map[string]json.RawMessage `json:"-"`
}

type policiesJSON Policies

var knownPolicyFields = map[string]bool{
	"replication_clusters": true, "retention_policies": true, "message_ttl_in_seconds": true,
	"backlog_quota_map": true, "deduplicationEnabled": true, "autoTopicCreationOverride": true,
	"bundles": true, "failover": true, "topicFailover": true, "auth_policies": true,
	"max_producers_per_topic": true, "max_consumers_per_topic": true, "max_consumers_per_subscription": true,
	"max_topics_per_namespace": true, "subscription_expiration_time_minutes": true, "compaction_threshold": true,
	"offload_threshold": true, "offload_threshold_in_seconds": true, "offload_deletion_lag_ms": true,
	"schema_compatibility_strategy": true, "properties": true, "persistence": true, "bookieAffinityGroups": true,
	"autoSubscriptionCreationOverride": true, "max_unacked_messages_per_consumer": true,
	"max_unacked_messages_per_subscription": true, "deduplicationSnapshotIntervalSeconds": true,
	"delayed_delivery_policies": true,
	"inactive_topic_policies":   true, "antiAffinityGroup": true,
	"syncReplication": true,
}

// isKnownPolicyField matches k against the modelled fields the way
// encoding/json matches object keys to struct fields (case-insensitively).
func isKnownPolicyField(k string) bool {
	for f := range knownPolicyFields {
		if strings.EqualFold(f, k) {
			return true
		}
	}
	return false
}

// UnmarshalJSON decodes the known fields and keeps the others in Extra.
func (p *Policies) UnmarshalJSON(b []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	var known policiesJSON
	if err := json.Unmarshal(b, &known); err != nil {
		return err
	}
	*p = Policies(known)
	for k, v := range all {
		if isKnownPolicyField(k) {
			continue
		}
		if p.Extra == nil {
			p.Extra = make(map[string]json.RawMessage)
		}
		p.Extra[k] = v
	}
	return nil
}

// MarshalJSON writes the known fields and Extra, in key order.
func (p Policies) MarshalJSON() ([]byte, error) {
	known, err := json.Marshal(policiesJSON(p))
	if err != nil || len(p.Extra) == 0 {
		return known, err
	}
	all := make(map[string]json.RawMessage, len(p.Extra)+len(knownPolicyFields))
	for k, v := range p.Extra {
		if !isKnownPolicyField(k) && json.Valid(v) {
			all[k] = v
		}
	}
	if err := json.Unmarshal(known, &all); err != nil {
		return nil, err
	}
	return json.Marshal(all)
}

// Clone returns a deep copy of p.
func (p *Policies) Clone() *Policies {
	b, err := json.Marshal(p)
	if err != nil {
		panic(fmt.Sprintf("policy: marshal policies: %v", err))
	}
	var c Policies
	if err := json.Unmarshal(b, &c); err != nil {
		panic(fmt.Sprintf("policy: unmarshal policies: %v", err))
	}
	return &c
}

// PartitionedMetadata is the stored record of a partitioned topic.
type PartitionedMetadata struct {
	Partitions int               `json:"partitions"`
	Properties map[string]string `json:"properties,omitempty"`
}

// DefaultBundlesData returns n bundles (n <= 0: topic.DefaultBundles) with
// their boundaries.
func DefaultBundlesData(n int) *BundlesData {
	bs := topic.Bundles(n)
	b := &BundlesData{NumBundles: len(bs)}
	for _, x := range bs {
		b.Boundaries = append(b.Boundaries, fmt.Sprintf("0x%08x", x.Lo))
	}
	b.Boundaries = append(b.Boundaries, fmt.Sprintf("0x%08x", uint32(math.MaxUint32)))
	return b
}

// validate checks the fields that do not need the store and fills in
// bundle boundaries; it reports every problem at once.
func (p *Policies) validate(defaultBundles int) error {
	var errs []error
	seen := map[string]bool{}
	for _, c := range p.ReplicationClusters {
		if err := validClusterName(c); err != nil {
			errs = append(errs, fmt.Errorf("replication_clusters: %w", err))
		}
		if seen[c] {
			errs = append(errs, fmt.Errorf("replication_clusters: %q listed twice", c))
		}
		seen[c] = true
	}
	if r := p.RetentionPolicies; r != nil {
		if r.RetentionTimeInMinutes < -1 {
			errs = append(errs, fmt.Errorf("retention_policies.retentionTimeInMinutes: %d is less than -1", r.RetentionTimeInMinutes))
		} else if int64(r.RetentionTimeInMinutes) > MaxRetentionMinutes {
			errs = append(errs, fmt.Errorf("retention_policies.retentionTimeInMinutes: %d is more than %d (292 years; -1 is unlimited)", r.RetentionTimeInMinutes, MaxRetentionMinutes))
		}
		if r.RetentionSizeInMB < -1 {
			errs = append(errs, fmt.Errorf("retention_policies.retentionSizeInMB: %d is less than -1", r.RetentionSizeInMB))
		} else if r.RetentionSizeInMB > MaxRetentionSizeMB {
			errs = append(errs, fmt.Errorf("retention_policies.retentionSizeInMB: %d is more than %d (8 EiB; -1 is unlimited)", r.RetentionSizeInMB, int64(MaxRetentionSizeMB)))
		}
	}
	if t := p.MessageTTLInSeconds; t != nil && *t < 0 {
		errs = append(errs, fmt.Errorf("message_ttl_in_seconds: %d is negative", *t))
	} else if t != nil && *t > MaxMessageTTLSeconds {
		errs = append(errs, fmt.Errorf("message_ttl_in_seconds: %d is more than %d (Pulsar's int)", *t, MaxMessageTTLSeconds))
	}
	for k, q := range p.BacklogQuotaMap {
		if k != DestinationStorage && k != MessageAge {
			errs = append(errs, fmt.Errorf("backlog_quota_map: unknown quota type %q (want %q or %q)", k, DestinationStorage, MessageAge))
		}
		if err := q.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("backlog_quota_map.%s: %w", k, err))
		}
	}
	if a := p.AutoTopicCreation; a != nil {
		if err := a.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("autoTopicCreationOverride: %w", err))
		}
	}
	if f := p.Failover; f != nil {
		if err := f.validate(p.ReplicationClusters); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, validateTopicFailover(p.TopicFailover, p.ReplicationClusters)...)
	errs = append(errs, p.validateSettings()...)
	errs = append(errs, p.validateOps()...)
	if p.AuthPolicies != nil {
		a, aerrs := p.AuthPolicies.normalized()
		errs = append(errs, aerrs...)
		p.AuthPolicies = a
	}
	errs = append(errs, p.validateRates()...)
	errs = append(errs, p.validateSchemaAndSecurity()...)
	if p.Bundles == nil {
		p.Bundles = DefaultBundlesData(defaultBundles)
	} else if err := p.Bundles.normalize(); err != nil {
		errs = append(errs, fmt.Errorf("bundles: %w", err))
	}
	return errors.Join(firstErrs(errs)...)
}

// maxReported bounds the problems one error reports: a body of many bad
// names gets a short answer.
const maxReported = 10

func firstErrs(errs []error) []error {
	if len(errs) <= maxReported {
		return errs
	}
	return append(errs[:maxReported:maxReported], fmt.Errorf("and %d more problems", len(errs)-maxReported))
}

// Validate checks a backlog quota.
func (q BacklogQuota) Validate() error {
	switch q.Policy {
	case ProducerRequestHold, ProducerException, ConsumerBacklogEviction:
	default:
		return fmt.Errorf("unknown policy %q (want %s, %s or %s)", q.Policy, ProducerRequestHold, ProducerException, ConsumerBacklogEviction)
	}
	if q.LimitSize < -1 || q.LimitTime < -1 {
		return fmt.Errorf("limits %d bytes, %d s: less than -1", q.LimitSize, q.LimitTime)
	}
	if q.LimitTime > MaxBacklogQuotaTimeSeconds {
		return fmt.Errorf("limitTime %d s is more than %d (Pulsar's int)", q.LimitTime, MaxBacklogQuotaTimeSeconds)
	}
	return nil
}

// Validate checks an auto topic creation override.
func (a AutoTopicCreation) Validate() error {
	if !a.AllowAutoTopicCreation {
		return nil
	}
	switch a.TopicType {
	case TopicTypeNonPartitioned:
		if a.DefaultNumPartitions != nil && *a.DefaultNumPartitions != 0 {
			return errors.New("defaultNumPartitions must be unset for non-partitioned topics")
		}
	case TopicTypePartitioned:
		if a.DefaultNumPartitions == nil || *a.DefaultNumPartitions <= 0 {
			return errors.New("defaultNumPartitions must be positive for partitioned topics")
		}
		if *a.DefaultNumPartitions > math.MaxInt32 {
			return fmt.Errorf("defaultNumPartitions %d is more than %d", *a.DefaultNumPartitions, math.MaxInt32)
		}
	default:
		return fmt.Errorf("topicType %q: want %q or %q", a.TopicType, TopicTypePartitioned, TopicTypeNonPartitioned)
	}
	return nil
}

func (b *BundlesData) normalize() error {
	if len(b.Boundaries) == 0 {
		if b.NumBundles <= 0 || b.NumBundles > topic.MaxBundles {
			return fmt.Errorf("numBundles %d: want 1 to %d", b.NumBundles, topic.MaxBundles)
		}
		*b = *DefaultBundlesData(b.NumBundles)
		return nil
	}
	if len(b.Boundaries) < 2 || len(b.Boundaries)-1 > topic.MaxBundles {
		return fmt.Errorf("%d boundaries: want 2 to %d", len(b.Boundaries), topic.MaxBundles+1)
	}
	if b.NumBundles != 0 && b.NumBundles != len(b.Boundaries)-1 {
		return fmt.Errorf("numBundles %d does not match %d boundaries", b.NumBundles, len(b.Boundaries))
	}
	var prev uint64
	for i, s := range b.Boundaries {
		v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(s), "0x"), 16, 32)
		if err != nil || !strings.HasPrefix(strings.ToLower(s), "0x") {
			return fmt.Errorf("boundary %d: %q is not a 32-bit hex number like 0x40000000", i, s)
		}
		switch {
		case i == 0 && v != 0:
			return fmt.Errorf("first boundary is %s, want 0x00000000", s)
		case i == len(b.Boundaries)-1 && v != math.MaxUint32:
			return fmt.Errorf("last boundary is %s, want 0xffffffff", s)
		case i > 0 && v <= prev:
			return fmt.Errorf("boundary %d (%s) is not above the previous one", i, s)
		}
		prev = v
		b.Boundaries[i] = fmt.Sprintf("0x%08x", v)
	}
	b.NumBundles = len(b.Boundaries) - 1
	return nil
}

// validClusterName checks a cluster name with the tenant rule (letters,
// digits, _-=:.).
func validClusterName(s string) error {
	if err := topic.ValidTenant(s); err != nil {
		return fmt.Errorf("cluster %q is not a valid name", s)
	}
	return nil
}
