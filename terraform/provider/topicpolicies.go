package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/float64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/isobar-mq/isobar/terraform/provider/client"
)

// topicPolicies are a topic's own policies (docs/admin.md, "Topic
// policies"), those of the global scope, which every region applies. A
// null attribute is a policy the topic leaves to its namespace (and the
// namespace to the broker). The policies local to one region
// (isGlobal=false, `isobar admin topics set-... ` without --global) take
// precedence in that region and are not managed here.
type topicPolicies struct {
	MessageTTLSeconds                    types.Int64                  `tfsdk:"message_ttl_seconds"`
	Retention                            *retentionModel              `tfsdk:"retention"`
	BacklogQuota                         map[string]backlogQuotaModel `tfsdk:"backlog_quota"`
	Deduplication                        types.Bool                   `tfsdk:"deduplication"`
	DeduplicationSnapshotIntervalSeconds types.Int64                  `tfsdk:"deduplication_snapshot_interval_seconds"`
	SyncReplication                      *syncReplicationModel        `tfsdk:"sync_replication"`
	MaxProducers                         types.Int64                  `tfsdk:"max_producers"`
	MaxConsumers                         types.Int64                  `tfsdk:"max_consumers"`
	MaxConsumersPerSubscription          types.Int64                  `tfsdk:"max_consumers_per_subscription"`
	MaxSubscriptions                     types.Int64                  `tfsdk:"max_subscriptions"`
	MaxUnackedMessagesPerConsumer        types.Int64                  `tfsdk:"max_unacked_messages_per_consumer"`
	MaxUnackedMessagesPerSubscription    types.Int64                  `tfsdk:"max_unacked_messages_per_subscription"`
	MaxMessageSizeBytes                  types.Int64                  `tfsdk:"max_message_size_bytes"`
	CompactionThresholdBytes             types.Int64                  `tfsdk:"compaction_threshold_bytes"`
	Persistence                          *persistenceModel            `tfsdk:"persistence"`
	DelayedDelivery                      *delayedDeliveryModel        `tfsdk:"delayed_delivery"`
	InactiveTopicPolicies                *inactiveTopicModel          `tfsdk:"inactive_topic_policies"`
	SchemaCompatibilityStrategy          types.String                 `tfsdk:"schema_compatibility_strategy"`
	SchemaValidationEnforced             types.Bool                   `tfsdk:"schema_validation_enforced"`
	AutoSubscriptionCreation             types.Bool                   `tfsdk:"auto_subscription_creation"`
	PublishRate                          *publishRateModel            `tfsdk:"publish_rate"`
	DispatchRate                         *dispatchRateModel           `tfsdk:"dispatch_rate"`
	SubscriptionDispatchRate             *dispatchRateModel           `tfsdk:"subscription_dispatch_rate"`
	ReplicatorDispatchRate               *dispatchRateModel           `tfsdk:"replicator_dispatch_rate"`
	SubscribeRate                        *subscribeRateModel          `tfsdk:"subscribe_rate"`
}

type persistenceModel struct {
	Ensemble       types.Int64   `tfsdk:"bookkeeper_ensemble"`
	WriteQuorum    types.Int64   `tfsdk:"bookkeeper_write_quorum"`
	AckQuorum      types.Int64   `tfsdk:"bookkeeper_ack_quorum"`
	MarkDeleteRate types.Float64 `tfsdk:"managed_ledger_max_mark_delete_rate"`
}

type delayedDeliveryModel struct {
	Active     types.Bool  `tfsdk:"active"`
	TickTimeMS types.Int64 `tfsdk:"tick_time_ms"`
	MaxDelayMS types.Int64 `tfsdk:"max_delay_ms"`
}

type inactiveTopicModel struct {
	DeleteWhileInactive types.Bool   `tfsdk:"delete_while_inactive"`
	MaxInactiveSeconds  types.Int64  `tfsdk:"max_inactive_duration_seconds"`
	DeleteMode          types.String `tfsdk:"delete_mode"`
}

type publishRateModel struct {
	Messages types.Int64 `tfsdk:"messages"`
	Bytes    types.Int64 `tfsdk:"bytes"`
}

type dispatchRateModel struct {
	Messages              types.Int64 `tfsdk:"messages"`
	Bytes                 types.Int64 `tfsdk:"bytes"`
	PeriodSeconds         types.Int64 `tfsdk:"period_seconds"`
	RelativeToPublishRate types.Bool  `tfsdk:"relative_to_publish_rate"`
}

type subscribeRateModel struct {
	PerConsumer   types.Int64 `tfsdk:"per_consumer"`
	PeriodSeconds types.Int64 `tfsdk:"period_seconds"`
}

// The server's JSON of the policies namespace.go has no type for
// (docs/admin.md, "Topic policies").
type (
	persistenceJSON struct {
		Ensemble       int64   `json:"bookkeeperEnsemble"`
		WriteQuorum    int64   `json:"bookkeeperWriteQuorum"`
		AckQuorum      int64   `json:"bookkeeperAckQuorum"`
		MarkDeleteRate float64 `json:"managedLedgerMaxMarkDeleteRate"`
	}
	delayedDeliveryJSON struct {
		Active   bool  `json:"active"`
		TickTime int64 `json:"tickTime"`
		MaxDelay int64 `json:"maxDeliveryDelayInMillis"`
	}
	inactiveTopicJSON struct {
		Mode                string `json:"inactiveTopicDeleteMode,omitempty"`
		MaxInactiveSeconds  int64  `json:"maxInactiveDurationSeconds"`
		DeleteWhileInactive bool   `json:"deleteWhileInactive"`
	}
	publishRateJSON struct {
		Messages int64 `json:"publishThrottlingRateInMsg"`
		Bytes    int64 `json:"publishThrottlingRateInByte"`
	}
	dispatchRateJSON struct {
		Messages              int64 `json:"dispatchThrottlingRateInMsg"`
		Bytes                 int64 `json:"dispatchThrottlingRateInByte"`
		PeriodSeconds         int64 `json:"ratePeriodInSecond"`
		RelativeToPublishRate bool  `json:"relativeToPublishRate"`
	}
	subscribeRateJSON struct {
		PerConsumer   int64 `json:"subscribeThrottlingRatePerConsumer"`
		PeriodSeconds int64 `json:"ratePeriodInSecond"`
	}
	autoSubscriptionJSON struct {
		Allow bool `json:"allowAutoSubscriptionCreation"`
	}
)

// Bounds the server checks (docs/admin.md, "Topic policies").
const (
	maxEnsemble   = 100
	maxTickTimeMS = 24 * 60 * 60 * 1000
)

// schemaCompatibilityStrategies are Pulsar's strategies but UNDEFINED
// (which is "the namespace's": leave the attribute out).
var schemaCompatibilityStrategies = []string{
	"ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL",
	"BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE",
}

// ownPolicy is one of a topic's own policies: an attribute of
// isobar_topic and the admin API's .../{topic}/<path> behind it. The
// backlog quotas, set type by type, are apart (backlogQuotas).
type ownPolicy struct {
	attr, path string
	// put: set with PUT (as Pulsar), not POST.
	put       bool
	attribute schema.Attribute
	// body is the value m sets, in the server's JSON; nil when m leaves
	// the policy to the namespace.
	body func(m *topicPolicies) any
	// load sets m's attribute from the server's answer (empty: the topic
	// sets none).
	load func(m *topicPolicies, answer []byte) error
}

// policyOf is an ownPolicy held in one field of topicPolicies, of type A
// (types.Int64, *persistenceModel, ...), sent as JSON of type J; toJSON
// reports false for an unset value, fromJSON(nil) is the unset value.
func policyOf[A, J any](attr, path string, a schema.Attribute, field func(*topicPolicies) *A, toJSON func(A) (J, bool), fromJSON func(*J) A) ownPolicy {
	return ownPolicy{
		attr: attr, path: path, attribute: a,
		body: func(m *topicPolicies) any {
			if j, ok := toJSON(*field(m)); ok {
				return j
			}
			return nil
		},
		load: func(m *topicPolicies, answer []byte) error {
			if len(bytes.TrimSpace(answer)) == 0 {
				*field(m) = fromJSON(nil)
				return nil
			}
			var j J
			if err := json.Unmarshal(answer, &j); err != nil {
				return err
			}
			*field(m) = fromJSON(&j)
			return nil
		},
	}
}

// intPolicy, boolPolicy and stringPolicy are policies of one value.
func intPolicy(attr, path string, a schema.Int64Attribute, field func(*topicPolicies) *types.Int64) ownPolicy {
	return policyOf(attr, path, a, field,
		func(v types.Int64) (int64, bool) { return v.ValueInt64(), known(v) },
		types.Int64PointerValue)
}

func boolPolicy(attr, path string, a schema.BoolAttribute, field func(*topicPolicies) *types.Bool) ownPolicy {
	return policyOf(attr, path, a, field,
		func(v types.Bool) (bool, bool) { return v.ValueBool(), known(v) },
		types.BoolPointerValue)
}

// limit is an optional number from 0 to 2147483647, 0 meaning no limit.
func limit(desc string) schema.Int64Attribute {
	return schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64Range{0, maxInt32}},
		MarkdownDescription: desc + " (0 to 2147483647; 0: no limit). Left out: the namespace's, else the broker's."}
}

// rateAttribute is an optional rate that -1 (the default) or 0 leaves
// unlimited.
func rateAttribute(desc string) schema.Int64Attribute {
	return schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(-1),
		MarkdownDescription: desc + "; -1 (the default) or 0: no limit.", Validators: []validator.Int64{atLeast(-1)}}
}

// dispatchRateAttribute is a dispatch rate; limits says what it limits.
func dispatchRateAttribute(limits string) schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true,
		MarkdownDescription: "Limits " + limits + ", per `period_seconds` (docs/limits.md, \"Rates\"). " +
			"Left out: the namespace's rate for the region, else none.",
		Attributes: map[string]schema.Attribute{
			"messages": rateAttribute("Messages per period"),
			"bytes":    rateAttribute("Bytes per period"),
			"period_seconds": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1),
				MarkdownDescription: "The period in seconds, 0 to 2147483647 (1, the default; 0 counts as 1).", Validators: []validator.Int64{int64Range{0, maxInt32}}},
			"relative_to_publish_rate": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "Add the topic's publish rate to the limits, so consumers keep up with producers (false, the default: the limits alone)."},
		},
	}
}

func dispatchRatePolicy(attr, path, limits string, field func(*topicPolicies) **dispatchRateModel) ownPolicy {
	return policyOf(attr, path, dispatchRateAttribute(limits), field,
		func(m *dispatchRateModel) (dispatchRateJSON, bool) {
			if m == nil {
				return dispatchRateJSON{}, false
			}
			return dispatchRateJSON{m.Messages.ValueInt64(), m.Bytes.ValueInt64(), m.PeriodSeconds.ValueInt64(), m.RelativeToPublishRate.ValueBool()}, true
		},
		func(j *dispatchRateJSON) *dispatchRateModel {
			if j == nil {
				return nil
			}
			return &dispatchRateModel{types.Int64Value(j.Messages), types.Int64Value(j.Bytes), types.Int64Value(j.PeriodSeconds), types.BoolValue(j.RelativeToPublishRate)}
		})
}

// ownPolicies are the topic's own policies but its backlog quotas, in
// the order they are set.
var ownPolicies = []ownPolicy{
	intPolicy("message_ttl_seconds", "messageTTL",
		messageTTLAttribute("Unacknowledged messages older than this are acknowledged by the broker (0 to 2147483647 seconds; 0: never), "+
			"replacing the namespace's TTL. Left out: the namespace's."),
		func(m *topicPolicies) *types.Int64 { return &m.MessageTTLSeconds }),
	policyOf("retention", "retention",
		retentionAttribute("How long acknowledged messages are kept, replacing the namespace's retention. Left out: the namespace's."),
		func(m *topicPolicies) **retentionModel { return &m.Retention },
		func(r *retentionModel) (retentionJSON, bool) {
			if r == nil {
				return retentionJSON{}, false
			}
			return retentionJSON{Minutes: r.TimeInMinutes.ValueInt64(), SizeMB: r.SizeInMB.ValueInt64()}, true
		},
		func(j *retentionJSON) *retentionModel {
			if j == nil {
				return nil
			}
			return &retentionModel{TimeInMinutes: types.Int64Value(j.Minutes), SizeInMB: types.Int64Value(j.SizeMB)}
		}),
	boolPolicy("deduplication", "deduplicationEnabled",
		schema.BoolAttribute{Optional: true, MarkdownDescription: "Drop messages a producer resends (by producer name and sequence id), " +
			"or not, whatever the namespace says; applies when the topic next loads. Left out: the namespace's."},
		func(m *topicPolicies) *types.Bool { return &m.Deduplication }),
	intPolicy("deduplication_snapshot_interval_seconds", "deduplicationSnapshotInterval",
		schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64Range{0, maxInt32}},
			MarkdownDescription: "A de-duplicated topic snapshots its producers' sequence ids at least this often while it is written " +
				"(0 to 2147483647 seconds; 0: only every 1000 entries). Left out: the namespace's, else the broker's (120)."},
		func(m *topicPolicies) *types.Int64 { return &m.DeduplicationSnapshotIntervalSeconds }),
	policyOf("sync_replication", "syncReplication",
		syncReplicationAttribute(fmt.Sprintf("How many other regions must hold a message (1 to %d; all the other replication clusters when they are fewer).", maxSyncRegions),
			"Makes publishes to the topic synchronous across regions, replacing the namespace's `sync_replication`: a message is acknowledged "+
				"to its producer only once `regions` other regions of the topic's replication clusters hold it too (docs/failover.md). "+
				"Left out: the namespace's."),
		func(m *topicPolicies) **syncReplicationModel { return &m.SyncReplication },
		func(s *syncReplicationModel) (syncReplicationJSON, bool) {
			if s == nil {
				return syncReplicationJSON{}, false
			}
			return syncReplicationJSON{Regions: s.Regions.ValueInt64(), FallbackAfterSeconds: s.FallbackAfterSeconds.ValueInt64()}, true
		},
		func(j *syncReplicationJSON) *syncReplicationModel {
			if j == nil {
				return nil
			}
			return &syncReplicationModel{Regions: types.Int64Value(j.Regions), FallbackAfterSeconds: types.Int64Value(j.FallbackAfterSeconds)}
		}),
	intPolicy("max_producers", "maxProducers", limit("How many producers the topic (each partition of a partitioned topic) takes at once"),
		func(m *topicPolicies) *types.Int64 { return &m.MaxProducers }),
	intPolicy("max_consumers", "maxConsumers", limit("How many consumers the topic (each partition of a partitioned topic) takes at once"),
		func(m *topicPolicies) *types.Int64 { return &m.MaxConsumers }),
	intPolicy("max_consumers_per_subscription", "maxConsumersPerSubscription", limit("How many consumers one subscription takes at once"),
		func(m *topicPolicies) *types.Int64 { return &m.MaxConsumersPerSubscription }),
	intPolicy("max_subscriptions", "maxSubscriptionsPerTopic", limit("How many subscriptions the topic may have"),
		func(m *topicPolicies) *types.Int64 { return &m.MaxSubscriptions }),
	intPolicy("max_unacked_messages_per_consumer", "maxUnackedMessagesOnConsumer",
		limit("Unacknowledged messages a Shared or Key_Shared consumer may hold before the broker sends it no more"),
		func(m *topicPolicies) *types.Int64 { return &m.MaxUnackedMessagesPerConsumer }),
	intPolicy("max_unacked_messages_per_subscription", "maxUnackedMessagesOnSubscription",
		limit("Unacknowledged messages a Shared or Key_Shared subscription may hold before the broker dispatches no more to it"),
		func(m *topicPolicies) *types.Int64 { return &m.MaxUnackedMessagesPerSubscription }),
	intPolicy("max_message_size_bytes", "maxMessageSize",
		schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64Range{0, maxInt32}},
			MarkdownDescription: "The largest message the topic takes, in bytes (0: the broker's); the server refuses more than the " +
				"broker's `maxMessageSize`. Left out: the broker's."},
		func(m *topicPolicies) *types.Int64 { return &m.MaxMessageSizeBytes }),
	intPolicy("compaction_threshold_bytes", "compactionThreshold",
		schema.Int64Attribute{Optional: true, Validators: []validator.Int64{atLeast(0)},
			MarkdownDescription: "Compact the topic once its compactor's backlog exceeds this many bytes (0: never; docs/compaction.md). " +
				"Left out: the namespace's."},
		func(m *topicPolicies) *types.Int64 { return &m.CompactionThresholdBytes }),
	policyOf("persistence", "persistence",
		schema.SingleNestedAttribute{
			Optional: true,
			MarkdownDescription: "The shape of the topic's new ledgers (from its next ledger on) and how often subscriptions' positions are " +
				"written. Left out: the namespace's `persistence`, else the broker's ledger settings.",
			Attributes: map[string]schema.Attribute{
				"bookkeeper_ensemble": schema.Int64Attribute{Required: true, Validators: []validator.Int64{int64Range{1, maxEnsemble}},
					MarkdownDescription: fmt.Sprintf("Bookies each ledger is striped over (1 to %d, at least `bookkeeper_write_quorum`).", maxEnsemble)},
				"bookkeeper_write_quorum": schema.Int64Attribute{Required: true, Validators: []validator.Int64{int64Range{1, maxEnsemble}},
					MarkdownDescription: "Bookies each entry is written to (at least `bookkeeper_ack_quorum`)."},
				"bookkeeper_ack_quorum": schema.Int64Attribute{Required: true, Validators: []validator.Int64{int64Range{1, maxEnsemble}},
					MarkdownDescription: "Bookies that must acknowledge an entry before it is acknowledged (1 or more)."},
				"managed_ledger_max_mark_delete_rate": schema.Float64Attribute{Optional: true, Computed: true, Default: float64default.StaticFloat64(0),
					Validators: []validator.Float64{float64AtLeast(0)},
					MarkdownDescription: "Writes of each subscription's acknowledgements per second at most; those in between are written at the " +
						"next allowed moment, so a crash may deliver them again. 0 (the default): every acknowledgement is written before it is answered."},
			},
		},
		func(m *topicPolicies) **persistenceModel { return &m.Persistence },
		func(p *persistenceModel) (persistenceJSON, bool) {
			if p == nil {
				return persistenceJSON{}, false
			}
			return persistenceJSON{p.Ensemble.ValueInt64(), p.WriteQuorum.ValueInt64(), p.AckQuorum.ValueInt64(), p.MarkDeleteRate.ValueFloat64()}, true
		},
		func(j *persistenceJSON) *persistenceModel {
			if j == nil {
				return nil
			}
			return &persistenceModel{types.Int64Value(j.Ensemble), types.Int64Value(j.WriteQuorum), types.Int64Value(j.AckQuorum), types.Float64Value(j.MarkDeleteRate)}
		}),
	policyOf("delayed_delivery", "delayedDelivery",
		schema.SingleNestedAttribute{
			Optional:            true,
			MarkdownDescription: "Delayed delivery of messages that carry a deliver-at time. Left out: the namespace's, else on with the broker's longest delay.",
			Attributes: map[string]schema.Attribute{
				"active": schema.BoolAttribute{Required: true,
					MarkdownDescription: "Whether messages wait for their deliver-at time; false delivers them at once."},
				"tick_time_ms": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(0),
					Validators: []validator.Int64{int64Range{0, maxTickTimeMS}},
					MarkdownDescription: fmt.Sprintf("The timer's granularity in milliseconds: a waiting message is released at the first multiple "+
						"of the tick at or after its time (0, the default, to %d: a day).", maxTickTimeMS)},
				"max_delay_ms": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(0),
					Validators:          []validator.Int64{atLeast(0)},
					MarkdownDescription: "The longest delay a message may ask for, in milliseconds; 0 (the default): no limit."},
			},
		},
		func(m *topicPolicies) **delayedDeliveryModel { return &m.DelayedDelivery },
		func(d *delayedDeliveryModel) (delayedDeliveryJSON, bool) {
			if d == nil {
				return delayedDeliveryJSON{}, false
			}
			return delayedDeliveryJSON{d.Active.ValueBool(), d.TickTimeMS.ValueInt64(), d.MaxDelayMS.ValueInt64()}, true
		},
		func(j *delayedDeliveryJSON) *delayedDeliveryModel {
			if j == nil {
				return nil
			}
			return &delayedDeliveryModel{types.BoolValue(j.Active), types.Int64Value(j.TickTime), types.Int64Value(j.MaxDelay)}
		}),
	policyOf("inactive_topic_policies", "inactiveTopicPolicies",
		schema.SingleNestedAttribute{
			Optional: true,
			MarkdownDescription: "Whether and when the topic is deleted once nobody uses it (docs/admin.md, \"Inactive topics\"). " +
				"Left out: the namespace's, else the broker's `brokerDeleteInactiveTopics*` settings.",
			Attributes: map[string]schema.Attribute{
				"delete_while_inactive": schema.BoolAttribute{Required: true, MarkdownDescription: "Whether an inactive topic is deleted."},
				"max_inactive_duration_seconds": schema.Int64Attribute{Required: true, Validators: []validator.Int64{int64Range{0, maxInt32}},
					MarkdownDescription: "How long the topic must have had no producer, no consumer and no message (0 to 2147483647 seconds)."},
				"delete_mode": schema.StringAttribute{Optional: true,
					Validators: []validator.String{oneOf{"delete_when_no_subscriptions", "delete_when_subscriptions_caught_up"}},
					MarkdownDescription: "`delete_when_no_subscriptions` or `delete_when_subscriptions_caught_up`. Left out: the broker's " +
						"`brokerDeleteInactiveTopicsMode`."},
			},
		},
		func(m *topicPolicies) **inactiveTopicModel { return &m.InactiveTopicPolicies },
		func(p *inactiveTopicModel) (inactiveTopicJSON, bool) {
			if p == nil {
				return inactiveTopicJSON{}, false
			}
			return inactiveTopicJSON{p.DeleteMode.ValueString(), p.MaxInactiveSeconds.ValueInt64(), p.DeleteWhileInactive.ValueBool()}, true
		},
		func(j *inactiveTopicJSON) *inactiveTopicModel {
			if j == nil {
				return nil
			}
			mode := types.StringNull()
			if j.Mode != "" {
				mode = types.StringValue(j.Mode)
			}
			return &inactiveTopicModel{types.BoolValue(j.DeleteWhileInactive), types.Int64Value(j.MaxInactiveSeconds), mode}
		}),
	func() ownPolicy {
		p := policyOf("schema_compatibility_strategy", "schemaCompatibilityStrategy",
			schema.StringAttribute{Optional: true, Validators: []validator.String{oneOf(schemaCompatibilityStrategies)},
				MarkdownDescription: "How a new schema version must relate to the existing ones (docs/schemas.md): one of `" +
					joinCode(schemaCompatibilityStrategies) + "`. Left out: the namespace's, else `FULL`."},
			func(m *topicPolicies) *types.String { return &m.SchemaCompatibilityStrategy },
			func(v types.String) (string, bool) { return v.ValueString(), known(v) },
			types.StringPointerValue)
		p.put = true
		return p
	}(),
	boolPolicy("schema_validation_enforced", "schemaValidationEnforced",
		schema.BoolAttribute{Optional: true, MarkdownDescription: "Refuse producers that have no schema when the topic has one " +
			"(docs/schemas.md). Left out: the namespace's, else false."},
		func(m *topicPolicies) *types.Bool { return &m.SchemaValidationEnforced }),
	policyOf("auto_subscription_creation", "autoSubscriptionCreation",
		schema.BoolAttribute{Optional: true, MarkdownDescription: "Whether consumers may create subscriptions by subscribing. " +
			"Left out: the namespace's override, else the broker's setting."},
		func(m *topicPolicies) *types.Bool { return &m.AutoSubscriptionCreation },
		func(v types.Bool) (autoSubscriptionJSON, bool) { return autoSubscriptionJSON{v.ValueBool()}, known(v) },
		func(j *autoSubscriptionJSON) types.Bool {
			if j == nil {
				return types.BoolNull()
			}
			return types.BoolValue(j.Allow)
		}),
	policyOf("publish_rate", "publishRate",
		schema.SingleNestedAttribute{
			Optional: true,
			MarkdownDescription: "Limits what producers publish to the topic, per second (each partition of a partitioned topic); " +
				"replicated messages are exempt. Left out: the namespace's rate for the region, else none.",
			Attributes: map[string]schema.Attribute{
				"messages": rateAttribute("Messages per second"),
				"bytes":    rateAttribute("Bytes per second"),
			},
		},
		func(m *topicPolicies) **publishRateModel { return &m.PublishRate },
		func(r *publishRateModel) (publishRateJSON, bool) {
			if r == nil {
				return publishRateJSON{}, false
			}
			return publishRateJSON{r.Messages.ValueInt64(), r.Bytes.ValueInt64()}, true
		},
		func(j *publishRateJSON) *publishRateModel {
			if j == nil {
				return nil
			}
			return &publishRateModel{types.Int64Value(j.Messages), types.Int64Value(j.Bytes)}
		}),
	dispatchRatePolicy("dispatch_rate", "dispatchRate", "what the topic's subscriptions dispatch to their consumers, together",
		func(m *topicPolicies) **dispatchRateModel { return &m.DispatchRate }),
	dispatchRatePolicy("subscription_dispatch_rate", "subscriptionDispatchRate", "what each subscription of the topic dispatches to its consumers",
		func(m *topicPolicies) **dispatchRateModel { return &m.SubscriptionDispatchRate }),
	dispatchRatePolicy("replicator_dispatch_rate", "replicatorDispatchRate", "what each replication cursor of the topic (one per other region) sends to the replicator",
		func(m *topicPolicies) **dispatchRateModel { return &m.ReplicatorDispatchRate }),
	policyOf("subscribe_rate", "subscribeRate",
		schema.SingleNestedAttribute{
			Optional: true,
			MarkdownDescription: "Limits how often one consumer (its client's host and consumer name) may subscribe; one beyond the rate " +
				"is refused with a retriable error. Left out: the namespace's rate for the region, else none.",
			Attributes: map[string]schema.Attribute{
				"per_consumer": schema.Int64Attribute{Required: true, Validators: []validator.Int64{int64Range{-1, maxInt32}},
					MarkdownDescription: "Subscribes per period and consumer; -1 or 0: no limit."},
				"period_seconds": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(30),
					Validators:          []validator.Int64{int64Range{0, maxInt32}},
					MarkdownDescription: "The period in seconds, 0 to 2147483647 (30, the default; 0 counts as 30)."},
			},
		},
		func(m *topicPolicies) **subscribeRateModel { return &m.SubscribeRate },
		func(r *subscribeRateModel) (subscribeRateJSON, bool) {
			if r == nil {
				return subscribeRateJSON{}, false
			}
			return subscribeRateJSON{r.PerConsumer.ValueInt64(), r.PeriodSeconds.ValueInt64()}, true
		},
		func(j *subscribeRateJSON) *subscribeRateModel {
			if j == nil {
				return nil
			}
			return &subscribeRateModel{types.Int64Value(j.PerConsumer), types.Int64Value(j.PeriodSeconds)}
		}),
}

// withTopicPolicies adds the attributes of the topic's own policies to
// attrs.
func withTopicPolicies(attrs map[string]schema.Attribute) map[string]schema.Attribute {
	attrs["backlog_quota"] = backlogQuotaAttribute("The topic's own backlog quotas by type, `destination_storage` (size) and `message_age` " +
		"(time), each replacing the namespace's quota of its type. Left out (or a type left out): the namespace's.")
	for _, p := range ownPolicies {
		if _, ok := attrs[p.attr]; ok {
			panic("provider: isobar_topic has two attributes " + p.attr)
		}
		attrs[p.attr] = p.attribute
	}
	return attrs
}

// global is the query that makes a request about a topic's global
// policies.
const global = "isGlobal=true"

// readOwnPolicies reads the topic's own global policies; p is the
// topic's admin path.
func readOwnPolicies(ctx context.Context, c *client.Client, p string) (topicPolicies, error) {
	var out topicPolicies
	for _, pol := range ownPolicies {
		var answer json.RawMessage
		if err := c.Get(ctx, p+"/"+pol.path+"?"+global, &answer); err != nil {
			return out, err
		}
		if err := pol.load(&out, answer); err != nil {
			return out, fmt.Errorf("GET %s/%s: decode answer: %w", p, pol.path, err)
		}
	}
	var quotas map[string]backlogQuotaJS
	if err := c.Get(ctx, p+"/backlogQuotaMap?"+global, &quotas); err != nil {
		return out, err
	}
	out.BacklogQuota = backlogQuotaModels(quotas)
	return out, nil
}

// setOwnPolicies changes the topic's own global policies from have to
// want, sending only what differs: a policy want leaves out is removed
// (the topic follows its namespace again).
func setOwnPolicies(ctx context.Context, c *client.Client, p string, want, have *topicPolicies) error {
	for _, pol := range ownPolicies {
		w, h := pol.body(want), pol.body(have)
		if sameJSON(w, h) {
			continue
		}
		r := client.Request{Method: http.MethodPost, Path: p + "/" + pol.path + "?" + global, Body: w}
		switch {
		case w == nil:
			r.Method = http.MethodDelete
		case pol.put:
			r.Method = http.MethodPut
		}
		if err := c.Do(ctx, r); err != nil {
			return err
		}
	}
	wantQ, haveQ := backlogQuotaJSON(want.BacklogQuota), backlogQuotaJSON(have.BacklogQuota)
	for _, typ := range slices.Sorted(maps.Keys(haveQ)) {
		if _, ok := wantQ[typ]; !ok {
			if err := c.Do(ctx, client.Request{Method: http.MethodDelete, Path: p + "/backlogQuota?backlogQuotaType=" + esc(typ) + "&" + global}); err != nil {
				return err
			}
		}
	}
	for _, typ := range slices.Sorted(maps.Keys(wantQ)) {
		if q, ok := haveQ[typ]; ok && q == wantQ[typ] {
			continue
		}
		if err := c.Do(ctx, client.Request{Method: http.MethodPost, Path: p + "/backlogQuota?backlogQuotaType=" + esc(typ) + "&" + global, Body: wantQ[typ]}); err != nil {
			return err
		}
	}
	return nil
}

// sameJSON reports whether a and b are sent as the same JSON.
func sameJSON(a, b any) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}

// validateTopicPolicies checks what single attributes cannot: the
// quorums of persistence.
func validateTopicPolicies(ctx context.Context, cfg tfsdk.Config) diag.Diagnostics {
	var d diag.Diagnostics
	var e, w, a types.Int64
	at := path.Root("persistence")
	d.Append(cfg.GetAttribute(ctx, at.AtName("bookkeeper_ensemble"), &e)...)
	d.Append(cfg.GetAttribute(ctx, at.AtName("bookkeeper_write_quorum"), &w)...)
	d.Append(cfg.GetAttribute(ctx, at.AtName("bookkeeper_ack_quorum"), &a)...)
	if d.HasError() {
		return d
	}
	if known(e) && known(w) && w.ValueInt64() > e.ValueInt64() {
		d.AddAttributeError(at.AtName("bookkeeper_write_quorum"), "Write quorum larger than the ensemble",
			fmt.Sprintf("bookkeeper_write_quorum %d is more than bookkeeper_ensemble %d: an entry cannot be written to more bookies than the ledger has", w.ValueInt64(), e.ValueInt64()))
	}
	if known(w) && known(a) && a.ValueInt64() > w.ValueInt64() {
		d.AddAttributeError(at.AtName("bookkeeper_ack_quorum"), "Ack quorum larger than the write quorum",
			fmt.Sprintf("bookkeeper_ack_quorum %d is more than bookkeeper_write_quorum %d: an entry cannot be acknowledged by more bookies than it is written to", a.ValueInt64(), w.ValueInt64()))
	}
	return d
}
