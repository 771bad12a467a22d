package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

const (
	topicPoliciesPrefix      = Root + "topic-policies/"
	localTopicPoliciesPrefix = Root + "topic-policies-local/"
)

// TopicPoliciesKey is the key of a topic's own global policies (those
// that apply in every cluster). A partition shares its partitioned
// topic's.
func TopicPoliciesKey(n topic.Name) string {
	b := n.Base()
	return topicPoliciesPrefix + b.Tenant + "/" + b.Namespace + "/" + string(b.Domain) + "/" + b.Local
}

// LocalTopicPoliciesKey is the key of a topic's own policies local to
// cluster: they apply there only, and take precedence over the topic's
// global ones.
func LocalTopicPoliciesKey(n topic.Name, cluster string) string {
	b := n.Base()
	return localTopicPoliciesPrefix + b.Tenant + "/" + b.Namespace + "/" + string(b.Domain) + "/" + b.Local + "/" + cluster
}

// TopicScope says which of a topic's own policies a read or write is
// about: Pulsar's isGlobal query parameter.
type TopicScope bool

const (
	// LocalScope: the policies of the store's LocalCluster, which apply
	// in that cluster only (Pulsar's default, isGlobal=false).
	LocalScope TopicScope = false
	// GlobalScope: the policies every cluster applies (isGlobal=true).
	GlobalScope TopicScope = true
)

func (sc TopicScope) String() string {
	if sc == GlobalScope {
		return "global"
	}
	return "local"
}

// TopicPolicies are the policies a topic sets for itself, overriding its
// namespace's, in Pulsar's TopicPolicies field names. A nil (or empty)
// field is unset: the topic follows its namespace, then the broker. A
// topic's policies in force are its local ones over its global ones,
// field by field (EffectiveTopicPolicies).
type TopicPolicies struct {
	// ReplicationClusters, when set, replace the namespace's replication
	// clusters for this topic; global scope only.
	ReplicationClusters []string `json:"replication_clusters,omitempty"`

	MessageTTLInSeconds *int               `json:"messageTTLInSeconds,omitempty"`
	RetentionPolicies   *RetentionPolicies `json:"retentionPolicies,omitempty"`
	// Limits; 0 is no limit.
	MaxProducers                     *int `json:"maxProducerPerTopic,omitempty"`
	MaxConsumers                     *int `json:"maxConsumerPerTopic,omitempty"`
	MaxConsumersPerSubscription      *int `json:"maxConsumersPerSubscription,omitempty"`
	MaxUnackedMessagesOnConsumer     *int `json:"maxUnackedMessagesOnConsumer,omitempty"`
	MaxUnackedMessagesOnSubscription *int `json:"maxUnackedMessagesOnSubscription,omitempty"`
	MaxSubscriptionsPerTopic         *int `json:"maxSubscriptionsPerTopic,omitempty"`
	// MaxMessageSize in bytes; 0 is the broker's.
	MaxMessageSize                       *int  `json:"maxMessageSize,omitempty"`
	DeduplicationSnapshotIntervalSeconds *int  `json:"deduplicationSnapshotIntervalSeconds,omitempty"`
	SchemaValidationEnforced             *bool `json:"schemaValidationEnforced,omitempty"`
	// SchemaCompatibilityStrategy is one of SchemaCompatibilityStrategies
	// but UNDEFINED (which is unset).
	SchemaCompatibilityStrategy string                    `json:"schemaCompatibilityStrategy,omitempty"`
	DispatchRate                *DispatchRate             `json:"dispatchRate,omitempty"`
	SubscriptionDispatchRate    *DispatchRate             `json:"subscriptionDispatchRate,omitempty"`
	ReplicatorDispatchRate      *DispatchRate             `json:"replicatorDispatchRate,omitempty"`
	PublishRate                 *PublishRate              `json:"publishRate,omitempty"`
	SubscribeRate               *SubscribeRate            `json:"subscribeRate,omitempty"`
	Persistence                 *PersistencePolicies      `json:"persistence,omitempty"`
	DelayedDelivery             *DelayedDeliveryPolicies  `json:"delayedDelivery,omitempty"`
	AutoSubscriptionCreation    *AutoSubscriptionCreation `json:"autoSubscriptionCreationOverride,omitempty"`
	InactiveTopicPolicies       *InactiveTopicPolicies    `json:"inactiveTopicPolicies,omitempty"`
	// SyncReplication, when set, replaces the namespace's.
	SyncReplication *SyncReplication `json:"syncReplication,omitempty"`
	// DeduplicationEnabled, when set, replaces the namespace's
	// deduplicationEnabled for this topic.
	DeduplicationEnabled *bool `json:"deduplicationEnabled,omitempty"`
	// BackLogQuotaMap holds the topic's own backlog quotas by type
	// (DestinationStorage, MessageAge), each replacing the namespace's of
	// that type (Pulsar's spelling of the field).
	BackLogQuotaMap map[string]BacklogQuota `json:"backLogQuotaMap,omitempty"`
	// CompactionThreshold compacts the topic once its compactor's
	// backlog exceeds this many bytes; 0 never does.
	CompactionThreshold *int64 `json:"compactionThreshold,omitempty"`
	// OffloadPolicies are kept as the JSON object given (Isobar does not
	// offload).
	OffloadPolicies json.RawMessage `json:"offloadPolicies,omitempty"`
}

// DispatchRate limits what a topic, a subscription or a replicator
// sends; -1 is no limit.
type DispatchRate struct {
	DispatchThrottlingRateInMsg  int64 `json:"dispatchThrottlingRateInMsg"`
	DispatchThrottlingRateInByte int64 `json:"dispatchThrottlingRateInByte"`
	RatePeriodInSecond           int64 `json:"ratePeriodInSecond"`
	RelativeToPublishRate        bool  `json:"relativeToPublishRate"`
}

// PublishRate limits what producers publish to a topic; -1 is no limit.
type PublishRate struct {
	PublishThrottlingRateInMsg  int64 `json:"publishThrottlingRateInMsg"`
	PublishThrottlingRateInByte int64 `json:"publishThrottlingRateInByte"`
}

// SubscribeRate limits the subscribe requests of each consumer.
type SubscribeRate struct {
	SubscribeThrottlingRatePerConsumer int `json:"subscribeThrottlingRatePerConsumer"`
	RatePeriodInSecond                 int `json:"ratePeriodInSecond"`
}

// DelayedDeliveryPolicies say whether delayed delivery is on (off:
// messages are delivered at once, whatever their deliver-at time), the
// granularity of its timer in milliseconds (0: none) and the longest
// delay a message may ask for in milliseconds (0: no limit).
type DelayedDeliveryPolicies struct {
	Active           bool  `json:"active"`
	TickTime         int64 `json:"tickTime"`
	MaxDelayInMillis int64 `json:"maxDeliveryDelayInMillis"`
}

// MaxTickTime bounds DelayedDeliveryPolicies.TickTime: a day, in
// milliseconds.
const MaxTickTime = 24 * 60 * 60 * 1000

// Validate checks a tick of 0 to MaxTickTime and a longest delay that
// is not negative.
func (d DelayedDeliveryPolicies) Validate() error {
	var errs []error
	if d.TickTime < 0 || d.TickTime > MaxTickTime {
		errs = append(errs, fmt.Errorf("tickTime %d is not within 0..%d ms", d.TickTime, MaxTickTime))
	}
	if d.MaxDelayInMillis < 0 {
		errs = append(errs, fmt.Errorf("maxDeliveryDelayInMillis %d is negative", d.MaxDelayInMillis))
	}
	return errors.Join(errs...)
}

// UnmarshalJSON accepts the longest delay as Pulsar's
// maxDeliveryDelayInMillis and as pulsaradmin's maxDelayInMillis.
func (d *DelayedDeliveryPolicies) UnmarshalJSON(b []byte) error {
	var raw struct {
		Active   bool   `json:"active"`
		TickTime int64  `json:"tickTime"`
		Max      *int64 `json:"maxDeliveryDelayInMillis"`
		MaxAlias *int64 `json:"maxDelayInMillis"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*d = DelayedDeliveryPolicies{Active: raw.Active, TickTime: raw.TickTime}
	if raw.Max != nil {
		d.MaxDelayInMillis = *raw.Max
	} else if raw.MaxAlias != nil {
		d.MaxDelayInMillis = *raw.MaxAlias
	}
	return nil
}

// MarshalJSON writes the longest delay under both names.
func (d DelayedDeliveryPolicies) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Active   bool  `json:"active"`
		TickTime int64 `json:"tickTime"`
		Max      int64 `json:"maxDeliveryDelayInMillis"`
		MaxAlias int64 `json:"maxDelayInMillis"`
	}{d.Active, d.TickTime, d.MaxDelayInMillis, d.MaxDelayInMillis})
}

// AutoSubscriptionCreation overrides whether consumers may create
// subscriptions.
type AutoSubscriptionCreation struct {
	AllowAutoSubscriptionCreation bool `json:"allowAutoSubscriptionCreation"`
}

// IsZero reports whether tp sets nothing.
func (tp TopicPolicies) IsZero() bool {
	return reflect.ValueOf(tp).IsZero()
}

// Over returns tp with every field it leaves unset taken from under:
// local policies over global ones.
func (tp TopicPolicies) Over(under TopicPolicies) TopicPolicies {
	out := tp
	o, u := reflect.ValueOf(&out).Elem(), reflect.ValueOf(under)
	for i := range o.NumField() {
		if o.Field(i).IsZero() {
			o.Field(i).Set(u.Field(i))
		}
	}
	return out
}

// validate checks every field and reports every problem at once.
func (tp *TopicPolicies) validate() error {
	var errs []error
	nonNegative := func(name string, v *int) {
		if v != nil && (*v < 0 || *v > math.MaxInt32) {
			errs = append(errs, fmt.Errorf("%s: %d is not within 0..%d", name, *v, math.MaxInt32))
		}
	}
	seen := map[string]bool{}
	for _, c := range tp.ReplicationClusters {
		if err := validClusterName(c); err != nil {
			errs = append(errs, fmt.Errorf("replication clusters: %w", err))
		}
		if seen[c] {
			errs = append(errs, fmt.Errorf("replication clusters: %q listed twice", c))
		}
		seen[c] = true
	}
	nonNegative("messageTTL", tp.MessageTTLInSeconds)
	if r := tp.RetentionPolicies; r != nil {
		q := Policies{RetentionPolicies: r}
		if err := q.validate(0); err != nil {
			errs = append(errs, err)
		}
	}
	nonNegative("maxProducers", tp.MaxProducers)
	nonNegative("maxConsumers", tp.MaxConsumers)
	nonNegative("maxConsumersPerSubscription", tp.MaxConsumersPerSubscription)
	nonNegative("maxUnackedMessagesOnConsumer", tp.MaxUnackedMessagesOnConsumer)
	nonNegative("maxUnackedMessagesOnSubscription", tp.MaxUnackedMessagesOnSubscription)
	nonNegative("maxSubscriptionsPerTopic", tp.MaxSubscriptionsPerTopic)
	nonNegative("maxMessageSize", tp.MaxMessageSize)
	nonNegative("deduplicationSnapshotInterval", tp.DeduplicationSnapshotIntervalSeconds)
	if s := tp.SchemaCompatibilityStrategy; s != "" && (s == "UNDEFINED" || !slices.Contains(SchemaCompatibilityStrategies, s)) {
		errs = append(errs, fmt.Errorf("schemaCompatibilityStrategy: %q is not one of %v (UNDEFINED: remove it)", s, SchemaCompatibilityStrategies[1:]))
	}
	for name, d := range map[string]*DispatchRate{"dispatchRate": tp.DispatchRate, "subscriptionDispatchRate": tp.SubscriptionDispatchRate, "replicatorDispatchRate": tp.ReplicatorDispatchRate} {
		if d == nil {
			continue
		}
		if d.DispatchThrottlingRateInMsg < -1 || d.DispatchThrottlingRateInByte < -1 {
			errs = append(errs, fmt.Errorf("%s: rates %d msg, %d bytes: less than -1", name, d.DispatchThrottlingRateInMsg, d.DispatchThrottlingRateInByte))
		}
		if d.RatePeriodInSecond < 0 || d.RatePeriodInSecond > math.MaxInt32 {
			errs = append(errs, fmt.Errorf("%s: ratePeriodInSecond %d is not within 0..%d", name, d.RatePeriodInSecond, math.MaxInt32))
		}
	}
	if p := tp.PublishRate; p != nil && (p.PublishThrottlingRateInMsg < -1 || p.PublishThrottlingRateInByte < -1) {
		errs = append(errs, fmt.Errorf("publishRate: rates %d msg, %d bytes: less than -1", p.PublishThrottlingRateInMsg, p.PublishThrottlingRateInByte))
	}
	if s := tp.SubscribeRate; s != nil {
		if s.SubscribeThrottlingRatePerConsumer < -1 {
			errs = append(errs, fmt.Errorf("subscribeRate: subscribeThrottlingRatePerConsumer %d is less than -1", s.SubscribeThrottlingRatePerConsumer))
		}
		if s.RatePeriodInSecond < 0 || s.RatePeriodInSecond > math.MaxInt32 {
			errs = append(errs, fmt.Errorf("subscribeRate: ratePeriodInSecond %d is not within 0..%d", s.RatePeriodInSecond, math.MaxInt32))
		}
	}
	if p := tp.Persistence; p != nil {
		if err := p.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("persistence: %w", err))
		}
	}
	for k, q := range tp.BackLogQuotaMap {
		if k != DestinationStorage && k != MessageAge {
			errs = append(errs, fmt.Errorf("backLogQuotaMap: unknown quota type %q (want %q or %q)", k, DestinationStorage, MessageAge))
		} else if err := q.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("backLogQuotaMap[%s]: %w", k, err))
		}
	}
	if v := tp.CompactionThreshold; v != nil && *v < 0 {
		errs = append(errs, fmt.Errorf("compactionThreshold: %d is negative", *v))
	}
	if d := tp.DelayedDelivery; d != nil {
		if err := d.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("delayedDelivery: %w", err))
		}
	}
	if sr := tp.SyncReplication; sr != nil {
		if err := sr.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("syncReplication: %w", err))
		}
	}
	if ip := tp.InactiveTopicPolicies; ip != nil {
		if err := ip.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("inactiveTopicPolicies: %w", err))
		}
	}
	if o := tp.OffloadPolicies; len(o) > 0 {
		var m map[string]json.RawMessage
		if bytes.Equal(bytes.TrimSpace(o), []byte("null")) || json.Unmarshal(o, &m) != nil {
			errs = append(errs, errors.New("offloadPolicies: not a JSON object"))
		}
	}
	return errors.Join(firstErrs(errs)...)
}

func (sc TopicScope) key(name topic.Name, cluster string) string {
	if sc == GlobalScope {
		return TopicPoliciesKey(name)
	}
	return LocalTopicPoliciesKey(name, cluster)
}

func checkTopicName(name topic.Name) error {
	if name.Domain == "" || name.Tenant == "" || name.Namespace == "" || name.Local == "" {
		return fmt.Errorf("%w: topic %q is not a valid name", ErrInvalid, name.String())
	}
	return nil
}

func (s *Store) checkScope(sc TopicScope) error {
	if sc == LocalScope && s.cfg.LocalCluster == "" {
		return fmt.Errorf("%w: local topic policies: the store has no local cluster", ErrInvalid)
	}
	return nil
}

// TopicPolicies reads a topic's own global policies (ok false when it has
// none).
func (s *Store) TopicPolicies(ctx context.Context, name topic.Name) (TopicPolicies, bool, error) {
	return s.TopicPoliciesIn(ctx, name, GlobalScope)
}

// TopicPoliciesIn reads a topic's own policies of scope sc (ok false when
// it has none).
func (s *Store) TopicPoliciesIn(ctx context.Context, name topic.Name, sc TopicScope) (TopicPolicies, bool, error) {
	var tp TopicPolicies
	if err := checkTopicName(name); err != nil {
		return tp, false, err
	}
	if err := s.checkScope(sc); err != nil {
		return tp, false, err
	}
	key := sc.key(name, s.cfg.LocalCluster)
	rev, err := s.readJSON(ctx, key, sc.String()+" topic policies of "+name.Base().String(), &tp)
	if errors.Is(err, ErrNotFound) {
		return TopicPolicies{}, false, nil
	}
	if err != nil {
		return TopicPolicies{}, false, err
	}
	if err := tp.validate(); err != nil {
		return TopicPolicies{}, false, s.corrupt(sc.String()+" topic policies of "+name.Base().String(), key, rev, err)
	}
	return tp, true, nil
}

// EffectiveTopicPolicies are the topic's own policies in force in the
// local cluster: its local ones over its global ones, field by field.
func (s *Store) EffectiveTopicPolicies(ctx context.Context, name topic.Name) (TopicPolicies, error) {
	global, _, err := s.TopicPoliciesIn(ctx, name, GlobalScope)
	if err != nil || s.cfg.LocalCluster == "" {
		return global, err
	}
	local, _, err := s.TopicPoliciesIn(ctx, name, LocalScope)
	if err != nil {
		return TopicPolicies{}, err
	}
	return local.Over(global), nil
}

// EffectiveTopicPoliciesIn are EffectiveTopicPolicies for every topic of
// namespace ns ("tenant/ns") that has policies of its own, keyed by the
// topic's base name (topic.Name.String of its Base): two lists of the
// namespace's records instead of two reads per topic, for a pass over
// many topics. A record that is not valid fails the whole call (callers
// fall back to reading topic by topic, which reports it).
func (s *Store) EffectiveTopicPoliciesIn(ctx context.Context, ns string) (map[string]TopicPolicies, error) {
	tenant, local, err := parseNS(ns)
	if err != nil {
		return nil, err
	}
	under := tenant + "/" + local + "/"
	global, err := s.topicPoliciesUnder(ctx, topicPoliciesPrefix, under, "")
	if err != nil || s.cfg.LocalCluster == "" {
		return global, err
	}
	locals, err := s.topicPoliciesUnder(ctx, localTopicPoliciesPrefix, under, "/"+s.cfg.LocalCluster)
	if err != nil {
		return nil, err
	}
	for name, tp := range locals {
		global[name] = tp.Over(global[name])
	}
	return global, nil
}

// topicPoliciesUnder decodes the records under prefix+under whose key
// ends with suffix (a local record's cluster), keyed by topic name.
func (s *Store) topicPoliciesUnder(ctx context.Context, prefix, under, suffix string) (map[string]TopicPolicies, error) {
	kvs, err := s.readList(ctx, prefix+under)
	if err != nil {
		return nil, err
	}
	out := make(map[string]TopicPolicies, len(kvs))
	for _, kv := range kvs {
		rest, ok := strings.CutSuffix(strings.TrimPrefix(kv.Key, prefix+under), suffix)
		if !ok {
			continue // another cluster's local record
		}
		domain, local, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		name := domain + "://" + under + local
		var tp TopicPolicies
		if err := json.Unmarshal(kv.Value, &tp); err != nil {
			return nil, s.corrupt("topic policies of "+name, kv.Key, kv.Rev, err)
		}
		if err := tp.validate(); err != nil {
			return nil, s.corrupt("topic policies of "+name, kv.Key, kv.Rev, err)
		}
		out[name] = tp
	}
	return out, nil
}

// UpdateTopicPolicies applies fn to a copy of a topic's own policies of
// scope sc and writes the result with compare-and-swap, retrying on
// conflict (fn may run several times); a result that sets nothing
// deletes the record. The topic's namespace must exist (the topic need
// not); the result is validated, and replication clusters, which only
// the global scope may set, must exist and be allowed by the tenant when
// they change. A refused result writes nothing.
func (s *Store) UpdateTopicPolicies(ctx context.Context, name topic.Name, sc TopicScope, fn func(*TopicPolicies) error) (err error) {
	defer s.settle(ctx, &err)
	if err := checkTopicName(name); err != nil {
		return err
	}
	if err := s.checkScope(sc); err != nil {
		return err
	}
	what := sc.String() + " topic policies of " + name.Base().String()
	key := sc.key(name, s.cfg.LocalCluster)
	nsKey := NamespaceKey(name.Tenant, name.Namespace)
	for {
		var tp TopicPolicies
		rev, err := s.getJSON(ctx, key, what, &tp)
		if errors.Is(err, ErrNotFound) {
			rev, tp = 0, TopicPolicies{}
		} else if err != nil {
			return err
		}
		oldClusters := slices.Clone(tp.ReplicationClusters)
		if err := fn(&tp); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if len(tp.ReplicationClusters) == 0 {
			tp.ReplicationClusters = nil
		}
		if len(tp.OffloadPolicies) == 0 {
			tp.OffloadPolicies = nil
		}
		if err := tp.validate(); err != nil {
			return invalid(what, err)
		}
		if sc == LocalScope && tp.ReplicationClusters != nil {
			return invalid(what, errors.New("replication clusters are a global topic policy"))
		}
		nskv, err := s.meta.Get(ctx, nsKey)
		if err != nil {
			return fmt.Errorf("%s: namespace %s: %w", what, name.NamespaceName(), mapNotFound(err))
		}
		cmps := []metastore.Cmp{metastore.AtRev(nsKey, nskv.Rev)}
		if rev == 0 {
			cmps = append(cmps, metastore.Absent(key))
		} else {
			cmps = append(cmps, metastore.AtRev(key, rev))
		}
		if tp.ReplicationClusters != nil && !slices.Equal(oldClusters, tp.ReplicationClusters) {
			var ti TenantInfo
			trev, err := s.getJSON(ctx, TenantKey(name.Tenant), "tenant "+name.Tenant, &ti)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if err := s.checkReplication(ctx, ti, tp.ReplicationClusters); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			cmps = append(cmps, metastore.AtRev(TenantKey(name.Tenant), trev))
		}
		var op metastore.Op
		if tp.IsZero() {
			if rev == 0 {
				return nil
			}
			op = metastore.DeleteOp(key)
		} else {
			b, err := json.Marshal(tp)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			op = metastore.PutOp(key, b)
		}
		ok, err := s.txn(ctx, what, cmps, op)
		if err != nil || ok {
			return err
		}
		s.conflicts.Add(ctx, 1)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w: %w", what, ErrConflict, err)
		}
	}
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
func (s *Store) SetTopicReplication(ctx context.Context, name topic.Name, clusters []string) error {
	if len(clusters) == 0 {
		return fmt.Errorf("topic policies of %s: %w: replication clusters: at least one is required", name.Base(), ErrInvalid)
	}
	return s.UpdateTopicPolicies(ctx, name, GlobalScope, func(tp *TopicPolicies) error {
		tp.ReplicationClusters = slices.Clone(clusters)
		return nil
	})
}

// deleteTopicPoliciesUnder deletes the topic policies, global and local,
// of the topics of a namespace just deleted, so a namespace created again
// under the name does not inherit them. Best effort: a record left behind
// (the store failing meanwhile) is logged; a topic policy update needs
// the namespace, so none is written meanwhile.
func (s *Store) deleteTopicPoliciesUnder(ctx context.Context, tenant, ns string) {
	for _, prefix := range []string{topicPoliciesPrefix, localTopicPoliciesPrefix} {
		keys, err := s.meta.ListKeys(ctx, prefix+tenant+"/"+ns+"/")
		for _, k := range keys {
			if err == nil {
				err = s.meta.Delete(ctx, k)
			}
		}
		if err != nil {
			s.log.Warn("deleting the topic policies of a deleted namespace", "namespace", tenant+"/"+ns, "err", err)
		}
	}
}

func mapNotFound(err error) error {
	if errors.Is(err, metastore.ErrNotFound) {
		return ErrNotFound
	}
	return err
}
