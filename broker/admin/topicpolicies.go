package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
)

// unackedDefault is a broker limit on unacknowledged messages as the
// admin API answers it: def when zero, 0 (no limit) when negative.
func unackedDefault(n, def int) any {
	switch {
	case n < 0:
		return 0
	case n == 0:
		return def
	}
	return n
}

func maxMessageSize(d adminapi.TopicDefaults) int {
	if d.MaxMessageSize <= 0 {
		return wire.MaxMessageSize
	}
	return d.MaxMessageSize
}

// topicPolicy is one of a topic's own policies, served at
// .../{topic}/{path}: GET (?applied=true for the value in force), POST
// (PUT for some) and DELETE, each with ?isGlobal=true for the global
// scope (policy.TopicScope).
type topicPolicy struct {
	path string
	// setMethod is POST unless set.
	setMethod string
	// globalOnly: the policy has no local scope; isGlobal is ignored.
	globalOnly bool
	// get returns the topic's own value, nil when unset.
	get func(tp *policy.TopicPolicies) any
	// set decodes a request into tp; check, if any, then checks the
	// result against the broker's configuration.
	set   func(r *http.Request, body []byte, tp *policy.TopicPolicies) error
	check func(s *Server, tp *policy.TopicPolicies) error
	// remove unsets the value; removeFor, when set, instead unsets the
	// part the request names (a backlog quota's type).
	remove    func(tp *policy.TopicPolicies)
	removeFor func(r *http.Request, tp *policy.TopicPolicies) error
	// nsField is the namespace's field of the same policy (Pulsar's JSON
	// name; "" for none), perCluster when the namespace keeps one value
	// per cluster; def is the broker's value (nil, or nil returned:
	// none).
	nsField    string
	perCluster bool
	def        func(s *Server) any
}

// ptrPolicy is a policy held in one pointer field of TopicPolicies and
// sent as JSON of type T.
func ptrPolicy[T any](path string, field func(*policy.TopicPolicies) **T, nsField string, def func(*Server) any) topicPolicy {
	return topicPolicy{
		path: path,
		get: func(tp *policy.TopicPolicies) any {
			if v := *field(tp); v != nil {
				return *v
			}
			return nil
		},
		set: func(_ *http.Request, body []byte, tp *policy.TopicPolicies) error {
			var v T
			if err := decodeValue(body, &v); err != nil {
				return err
			}
			*field(tp) = &v
			return nil
		},
		remove:  func(tp *policy.TopicPolicies) { *field(tp) = nil },
		nsField: nsField,
		def:     def,
	}
}

// decodeValue is decodeStrict refusing null too: a policy is removed
// with DELETE.
func decodeValue(body []byte, v any) error {
	if string(bytes.TrimSpace(body)) == "null" {
		return badRequestf("body: null (remove a policy with DELETE)")
	}
	return decodeStrict(body, v)
}

func constant(v any) func(*Server) any { return func(*Server) any { return v } }

// validated makes p refuse, with 400 as Pulsar does for persistence, a
// body that decodes but that valid rejects (the store would refuse it
// too, with 412).
func validated(p topicPolicy, valid func(*policy.TopicPolicies) error) topicPolicy {
	set := p.set
	p.set = func(r *http.Request, body []byte, tp *policy.TopicPolicies) error {
		if err := set(r, body, tp); err != nil {
			return err
		}
		if err := valid(tp); err != nil {
			return badRequest(fmt.Errorf("%s: %w", p.path, err))
		}
		return nil
	}
	return p
}

// perCluster marks p's namespace field as a map by cluster.
func perCluster(p topicPolicy) topicPolicy {
	p.perCluster = true
	return p
}

var noDispatchLimit = policy.DispatchRate{RatePeriodInSecond: 1}

var topicPolicies = []topicPolicy{
	{
		// Pulsar takes the TTL as the query parameter messageTTL; a body
		// is accepted too.
		path: "messageTTL",
		get: func(tp *policy.TopicPolicies) any {
			if tp.MessageTTLInSeconds != nil {
				return *tp.MessageTTLInSeconds
			}
			return nil
		},
		set: func(r *http.Request, body []byte, tp *policy.TopicPolicies) error {
			var v int
			if q := r.URL.Query(); q.Has("messageTTL") {
				n, err := strconv.Atoi(q.Get("messageTTL"))
				if err != nil {
					return badRequestf("messageTTL %q is not an integer", q.Get("messageTTL"))
				}
				v = n
			} else if err := decodeValue(body, &v); err != nil {
				return err
			}
			tp.MessageTTLInSeconds = &v
			return nil
		},
		remove:  func(tp *policy.TopicPolicies) { tp.MessageTTLInSeconds = nil },
		nsField: "message_ttl_in_seconds",
		def:     constant(0),
	},
	ptrPolicy("retention", func(tp *policy.TopicPolicies) **policy.RetentionPolicies { return &tp.RetentionPolicies },
		"retention_policies", constant(policy.RetentionPolicies{})),
	ptrPolicy("maxProducers", func(tp *policy.TopicPolicies) **int { return &tp.MaxProducers }, "max_producers_per_topic", constant(0)),
	ptrPolicy("maxConsumers", func(tp *policy.TopicPolicies) **int { return &tp.MaxConsumers }, "max_consumers_per_topic", constant(0)),
	ptrPolicy("maxConsumersPerSubscription", func(tp *policy.TopicPolicies) **int { return &tp.MaxConsumersPerSubscription },
		"max_consumers_per_subscription", constant(0)),
	ptrPolicy("maxUnackedMessagesOnConsumer", func(tp *policy.TopicPolicies) **int { return &tp.MaxUnackedMessagesOnConsumer },
		"max_unacked_messages_per_consumer", func(s *Server) any {
			return unackedDefault(s.cfg.TopicDefaults.MaxUnackedPerConsumer, 50000)
		}),
	ptrPolicy("maxUnackedMessagesOnSubscription", func(tp *policy.TopicPolicies) **int { return &tp.MaxUnackedMessagesOnSubscription },
		"max_unacked_messages_per_subscription", func(s *Server) any {
			return unackedDefault(s.cfg.TopicDefaults.MaxUnackedPerSubscription, 200000)
		}),
	ptrPolicy("maxSubscriptionsPerTopic", func(tp *policy.TopicPolicies) **int { return &tp.MaxSubscriptionsPerTopic },
		"max_subscriptions_per_topic", constant(0)),
	func() topicPolicy {
		p := ptrPolicy("maxMessageSize", func(tp *policy.TopicPolicies) **int { return &tp.MaxMessageSize }, "",
			func(s *Server) any { return maxMessageSize(s.cfg.TopicDefaults) })
		p.check = func(s *Server, tp *policy.TopicPolicies) error {
			if v, most := tp.MaxMessageSize, maxMessageSize(s.cfg.TopicDefaults); v != nil && *v > most {
				return fmt.Errorf("%w: maxMessageSize %d is more than the broker's %d (broker.maxMessageSize)", policy.ErrInvalid, *v, most)
			}
			return nil
		}
		return p
	}(),
	ptrPolicy("deduplicationSnapshotInterval", func(tp *policy.TopicPolicies) **int { return &tp.DeduplicationSnapshotIntervalSeconds },
		"deduplicationSnapshotIntervalSeconds", func(s *Server) any {
			switch d := s.cfg.TopicDefaults.DeduplicationSnapshotInterval; {
			case d < 0:
				return 0
			case d == 0:
				return 120
			default:
				return int(d / time.Second)
			}
		}),
	ptrPolicy("schemaValidationEnforced", func(tp *policy.TopicPolicies) **bool { return &tp.SchemaValidationEnforced },
		"schema_validation_enforced", constant(false)),
	{
		// PUT, as Pulsar; the body is a JSON string ("BACKWARD") or the
		// bare name.
		path:      "schemaCompatibilityStrategy",
		setMethod: http.MethodPut,
		get: func(tp *policy.TopicPolicies) any {
			if tp.SchemaCompatibilityStrategy != "" {
				return tp.SchemaCompatibilityStrategy
			}
			return nil
		},
		set: func(_ *http.Request, body []byte, tp *policy.TopicPolicies) error {
			var v string
			if err := decodeValue(body, &v); err != nil {
				v = string(bytes.TrimSpace(body))
				if !slices.Contains(policy.SchemaCompatibilityStrategies, v) {
					return badRequestf("body: want a schema compatibility strategy, one of %v", policy.SchemaCompatibilityStrategies)
				}
			}
			v = strings.ToUpper(v)
			if v == "UNDEFINED" {
				v = "" // the namespace's
			}
			tp.SchemaCompatibilityStrategy = v
			return nil
		},
		remove:  func(tp *policy.TopicPolicies) { tp.SchemaCompatibilityStrategy = "" },
		nsField: "schema_compatibility_strategy",
		def:     constant("FULL"),
	},
	perCluster(ptrPolicy("dispatchRate", func(tp *policy.TopicPolicies) **policy.DispatchRate { return &tp.DispatchRate },
		"topicDispatchRate", constant(noDispatchLimit))),
	perCluster(ptrPolicy("subscriptionDispatchRate", func(tp *policy.TopicPolicies) **policy.DispatchRate { return &tp.SubscriptionDispatchRate },
		"subscriptionDispatchRate", constant(noDispatchLimit))),
	perCluster(ptrPolicy("replicatorDispatchRate", func(tp *policy.TopicPolicies) **policy.DispatchRate { return &tp.ReplicatorDispatchRate },
		"replicatorDispatchRate", constant(noDispatchLimit))),
	perCluster(ptrPolicy("publishRate", func(tp *policy.TopicPolicies) **policy.PublishRate { return &tp.PublishRate },
		"publishMaxMessageRate", constant(policy.PublishRate{}))),
	perCluster(ptrPolicy("subscribeRate", func(tp *policy.TopicPolicies) **policy.SubscribeRate { return &tp.SubscribeRate },
		"clusterSubscribeRate", constant(policy.SubscribeRate{RatePeriodInSecond: 30}))),
	validated(ptrPolicy("persistence", func(tp *policy.TopicPolicies) **policy.PersistencePolicies { return &tp.Persistence },
		"persistence", func(s *Server) any {
			if p := s.cfg.TopicDefaults.Persistence; p != nil {
				return policy.PersistencePolicies{BookkeeperEnsemble: p.EnsembleSize, BookkeeperWriteQuorum: p.WriteQuorum, BookkeeperAckQuorum: p.AckQuorum}
			}
			return nil
		}), func(tp *policy.TopicPolicies) error { return tp.Persistence.Validate() }),
	validated(ptrPolicy("delayedDelivery", func(tp *policy.TopicPolicies) **policy.DelayedDeliveryPolicies { return &tp.DelayedDelivery },
		"delayed_delivery_policies", func(s *Server) any {
			return policy.DelayedDeliveryPolicies{Active: true, MaxDelayInMillis: s.cfg.TopicDefaults.MaxDeliveryDelay.Milliseconds()}
		}), func(tp *policy.TopicPolicies) error { return tp.DelayedDelivery.Validate() }),
	// Isobar's synchronous replication (policy.SyncReplication); none
	// unless the topic or its namespace sets it.
	validated(ptrPolicy("syncReplication", func(tp *policy.TopicPolicies) **policy.SyncReplication { return &tp.SyncReplication },
		"syncReplication", nil), func(tp *policy.TopicPolicies) error { return tp.SyncReplication.Validate() }),
	ptrPolicy("deduplicationEnabled", func(tp *policy.TopicPolicies) **bool { return &tp.DeduplicationEnabled },
		"deduplicationEnabled", constant(false)),
	topicBacklogQuota,
	ptrPolicy("compactionThreshold", func(tp *policy.TopicPolicies) **int64 { return &tp.CompactionThreshold },
		"compaction_threshold", constant(0)),
	ptrPolicy("autoSubscriptionCreation", func(tp *policy.TopicPolicies) **policy.AutoSubscriptionCreation { return &tp.AutoSubscriptionCreation },
		"autoSubscriptionCreationOverride", constant(policy.AutoSubscriptionCreation{AllowAutoSubscriptionCreation: true})),
	inactiveTopicPolicy, // nsops.go
	{
		path: "offloadPolicies",
		get: func(tp *policy.TopicPolicies) any {
			if len(tp.OffloadPolicies) > 0 {
				return tp.OffloadPolicies
			}
			return nil
		},
		set: func(_ *http.Request, body []byte, tp *policy.TopicPolicies) error {
			var v map[string]json.RawMessage
			if err := decodeStrict(body, &v); err != nil {
				return err
			}
			if v == nil {
				return badRequestf("body: want a JSON object")
			}
			tp.OffloadPolicies = json.RawMessage(bytes.TrimSpace(body))
			return nil
		},
		remove:  func(tp *policy.TopicPolicies) { tp.OffloadPolicies = nil },
		nsField: "offload_policies",
	},
	{
		// Replication clusters apply in every cluster: always global.
		path:       "replication",
		globalOnly: true,
		get: func(tp *policy.TopicPolicies) any {
			if len(tp.ReplicationClusters) > 0 {
				return tp.ReplicationClusters
			}
			return nil
		},
		set: func(_ *http.Request, body []byte, tp *policy.TopicPolicies) error {
			var v []string
			if err := decodeStrict(body, &v); err != nil {
				return err
			}
			if len(v) == 0 {
				return fmt.Errorf("%w: replication clusters: at least one is required", policy.ErrInvalid)
			}
			tp.ReplicationClusters = v
			return nil
		},
		remove:  func(tp *policy.TopicPolicies) { tp.ReplicationClusters = nil },
		nsField: "replication_clusters",
	},
}

func (s *Server) topicPolicyRoutes(t string, d topic.Domain) {
	for _, p := range topicPolicies {
		set := p.setMethod
		if set == "" {
			set = http.MethodPost
		}
		s.handle("GET "+t+"/"+p.path, s.permissionTopic(d, s.getTopicPolicy(p)))
		s.handle(set+" "+t+"/"+p.path, s.permissionTopic(d, s.setTopicPolicy(p)))
		s.handle("DELETE "+t+"/"+p.path, s.permissionTopic(d, s.removeTopicPolicy(p)))
	}
	// Pulsar reads a topic's backlog quotas at .../backlogQuotaMap and
	// sets them at .../backlogQuota.
	s.handle("GET "+t+"/backlogQuotaMap", s.permissionTopic(d, s.getTopicPolicy(topicBacklogQuota)))
}

// strictBool reads a boolean query parameter: absent is false, anything
// but true or false is a 400.
func strictBool(r *http.Request, name string) (bool, error) {
	q := r.URL.Query()
	if !q.Has(name) {
		return false, nil
	}
	v, err := strconv.ParseBool(q.Get(name))
	if err != nil {
		return false, badRequestf("%s %q: want true or false", name, q.Get(name))
	}
	return v, nil
}

func topicScope(r *http.Request, p topicPolicy) (policy.TopicScope, error) {
	global, err := strictBool(r, "isGlobal")
	if err != nil {
		return policy.LocalScope, err
	}
	if global || p.globalOnly {
		return policy.GlobalScope, nil
	}
	return policy.LocalScope, nil
}

// getTopicPolicy answers the topic's own value in the scope asked (204
// when unset, as Pulsar answers an empty Optional). With ?applied=true
// it answers the value in force instead: the topic's own (for the local
// scope, its local value over its global one), else its namespace's,
// else the broker's (204 when there is none).
func (s *Server) getTopicPolicy(p topicPolicy) topicHandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, name topic.Name) error {
		sc, err := topicScope(r, p)
		if err != nil {
			return err
		}
		applied, err := strictBool(r, "applied")
		if err != nil {
			return err
		}
		ctx := r.Context()
		ns, err := s.cfg.Policies.Namespace(ctx, name.NamespaceName())
		if err != nil {
			return err
		}
		var tp policy.TopicPolicies
		if applied && sc == policy.LocalScope {
			tp, err = s.cfg.Policies.EffectiveTopicPolicies(ctx, name)
		} else {
			tp, _, err = s.cfg.Policies.TopicPoliciesIn(ctx, name, sc)
		}
		if err != nil {
			return err
		}
		if v := p.get(&tp); v != nil {
			return ok(w, v)
		}
		if !applied {
			return noContent(w)
		}
		if v := namespaceValue(ns, p, s.cfg.Cluster); v != nil {
			return ok(w, v)
		}
		if p.def != nil {
			if v := p.def(s); v != nil {
				return ok(w, v)
			}
		}
		return noContent(w)
	}
}

// namespaceValue is the namespace's value of p as stored (in Pulsar's
// JSON), nil when it sets none.
func namespaceValue(ns *policy.Policies, p topicPolicy, cluster string) json.RawMessage {
	if p.nsField == "" {
		return nil
	}
	b, err := json.Marshal(ns)
	if err != nil {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return nil
	}
	v := fields[p.nsField]
	if p.perCluster {
		var byCluster map[string]json.RawMessage
		if json.Unmarshal(v, &byCluster) != nil {
			return nil
		}
		v = byCluster[cluster]
	}
	if t := bytes.TrimSpace(v); len(t) == 0 || string(t) == "null" || string(t) == `"UNDEFINED"` {
		return nil
	}
	if p.nsField == "replication_clusters" && string(bytes.TrimSpace(v)) == "[]" {
		return nil
	}
	return v
}

// setTopicPolicy sets the topic's own value in the scope asked; the
// topic need not exist, its namespace must. A refused value stores
// nothing.
func (s *Server) setTopicPolicy(p topicPolicy) topicHandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, name topic.Name) error {
		sc, err := topicScope(r, p)
		if err != nil {
			return err
		}
		body, err := readBody(w, r)
		if err != nil {
			return err
		}
		// Decode once before touching the store, so a malformed body is a
		// 400 whatever the state of the topic.
		var probe policy.TopicPolicies
		if err := p.set(r, body, &probe); err != nil {
			return err
		}
		if err := s.cfg.Policies.UpdateTopicPolicies(r.Context(), name, sc, func(tp *policy.TopicPolicies) error {
			if err := p.set(r, body, tp); err != nil {
				return err
			}
			if p.check != nil {
				return p.check(s, tp)
			}
			return nil
		}); err != nil {
			return err
		}
		s.refreshTopicPolicies(r, name)
		return noContent(w)
	}
}

// removeTopicPolicy unsets the topic's own value in the scope asked (an
// unset value is not an error).
func (s *Server) removeTopicPolicy(p topicPolicy) topicHandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, name topic.Name) error {
		sc, err := topicScope(r, p)
		if err != nil {
			return err
		}
		if p.removeFor != nil {
			// Check the request before touching the store.
			if err := p.removeFor(r, &policy.TopicPolicies{}); err != nil {
				return err
			}
		}
		if err := s.cfg.Policies.UpdateTopicPolicies(r.Context(), name, sc, func(tp *policy.TopicPolicies) error {
			if p.removeFor != nil {
				return p.removeFor(r, tp)
			}
			p.remove(tp)
			return nil
		}); err != nil {
			return err
		}
		s.refreshTopicPolicies(r, name)
		return noContent(w)
	}
}

// refreshTopicPolicies tells the broker that name's policies changed;
// the change is stored whatever it answers.
func (s *Server) refreshTopicPolicies(r *http.Request, name topic.Name) {
	rf := s.cfg.Broker.PolicyRefresher
	if rf == nil {
		return
	}
	if err := rf.RefreshTopicPolicies(r.Context(), name); err != nil {
		s.log.Warn("topic policies stored but not applied at once; the next maintenance round applies them", "topic", name.String(), "err", err)
	}
}
