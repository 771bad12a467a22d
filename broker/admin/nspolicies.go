package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// reasonError is a refusal answered with exactly its reason: Pulsar's
// wording, which clients (pulsaradmin's tests among them) compare. Kind
// decides the status.
type reasonError struct {
	kind   *errkind.Error
	reason string
}

func (e *reasonError) Error() string { return e.reason }
func (e *reasonError) Unwrap() error { return e.kind }

// refuse returns a refusal of kind with exactly reason as its message.
func refuse(kind *errkind.Error, reason string) error {
	return &reasonError{kind: kind, reason: reason}
}

// bare returns the refusal inside err, if there is one, without the
// context the store wrapped around it ("namespace t/ns: ...").
func bare(err error) error {
	var re *reasonError
	if errors.As(err, &re) {
		return re
	}
	return err
}

// limitPolicy is a namespace limit of Pulsar's: an integer of at least
// min (Pulsar answers 412 with reason below it) and at most max, stored
// in the field field returns. GET answers unset when it is not set (nil:
// 204 No Content, which pulsaradmin reads as -1).
func limitPolicy[T int | int64](path, method string, field func(*policy.Policies) **T, min, max T, reason string, unset any) nsPolicy {
	return nsPolicy{
		path:      path,
		setMethod: method,
		get: func(p *policy.Policies) any {
			if v := *field(p); v != nil {
				return *v
			}
			return unset
		},
		set: func(_ *http.Request, body []byte, p *policy.Policies) error {
			var v T
			if err := decodeStrict(body, &v); err != nil {
				return err
			}
			if v < min {
				return refuse(errkind.ErrPreconditionFailed, reason)
			}
			if v > max {
				return refuse(errkind.ErrPreconditionFailed, fmt.Sprintf("%s must be at most %d", path, max))
			}
			*field(p) = &v
			return nil
		},
		remove: func(_ *http.Request, p *policy.Policies) { *field(p) = nil },
	}
}

// mustBe0OrMore is Pulsar's reason for a negative limit.
func mustBe0OrMore(name string) string { return name + " must be 0 or more" }

// autoCreationReason is Pulsar's reason for refusing an auto topic
// creation override ("" for a valid one).
func autoCreationReason(a policy.AutoTopicCreation) string {
	if !a.AllowAutoTopicCreation {
		return ""
	}
	var detail string
	switch a.TopicType {
	case policy.TopicTypePartitioned:
		switch {
		case a.DefaultNumPartitions == nil:
			detail = "[defaultNumPartitions] cannot be null when the type is partitioned."
		case *a.DefaultNumPartitions < 1:
			detail = "[defaultNumPartitions] cannot be less than 1 for partition type."
		case *a.DefaultNumPartitions > math.MaxInt32:
			detail = fmt.Sprintf("[defaultNumPartitions] cannot be more than %d.", math.MaxInt32)
		}
	case policy.TopicTypeNonPartitioned:
		if a.DefaultNumPartitions != nil && *a.DefaultNumPartitions != 0 {
			detail = "[defaultNumPartitions] is not allowed to be set when the type is non-partition."
		}
	default:
		detail = fmt.Sprintf("[topicType] must be %s or %s.", policy.TopicTypePartitioned, policy.TopicTypeNonPartitioned)
	}
	if detail == "" {
		return ""
	}
	return "Invalid configuration for autoTopicCreationOverride. the detail is " + detail
}

// settingsPolicies are the namespace limits and settings of
// globalconfig/policy/nspolicies.go, with Pulsar's paths, methods and
// reasons. Only the bookie affinity group depends on the server (it is
// kept per cluster).
func (s *Server) settingsPolicies() []nsPolicy {
	cluster := s.cfg.Cluster
	return []nsPolicy{
		limitPolicy("maxProducersPerTopic", http.MethodPost,
			func(p *policy.Policies) **int { return &p.MaxProducersPerTopic }, 0, math.MaxInt32, mustBe0OrMore("maxProducersPerTopic"), nil),
		limitPolicy("maxConsumersPerTopic", http.MethodPost,
			func(p *policy.Policies) **int { return &p.MaxConsumersPerTopic }, 0, math.MaxInt32, mustBe0OrMore("maxConsumersPerTopic"), nil),
		limitPolicy("maxConsumersPerSubscription", http.MethodPost,
			func(p *policy.Policies) **int { return &p.MaxConsumersPerSubscription }, 0, math.MaxInt32, mustBe0OrMore("maxConsumersPerSubscription"), nil),
		// Pulsar answers 0 (no limit) for an unset maxTopicsPerNamespace.
		limitPolicy("maxTopicsPerNamespace", http.MethodPost,
			func(p *policy.Policies) **int { return &p.MaxTopicsPerNamespace }, 0, math.MaxInt32, mustBe0OrMore("maxTopicsPerNamespace"), 0),
		limitPolicy("subscriptionExpirationTime", http.MethodPost,
			func(p *policy.Policies) **int { return &p.SubscriptionExpirationTime }, 0, math.MaxInt32, "Invalid value for subscription expiration time", nil),
		// Unacknowledged messages per consumer and per subscription (a
		// topic's own maxUnackedMessagesOn* win), the de-duplication
		// snapshot interval (seconds); all enforced by the broker.
		limitPolicy("maxUnackedMessagesPerConsumer", http.MethodPost,
			func(p *policy.Policies) **int { return &p.MaxUnackedMessagesPerConsumer }, 0, math.MaxInt32, mustBe0OrMore("maxUnackedMessagesPerConsumer"), nil),
		limitPolicy("maxUnackedMessagesPerSubscription", http.MethodPost,
			func(p *policy.Policies) **int { return &p.MaxUnackedMessagesPerSubscription }, 0, math.MaxInt32, mustBe0OrMore("maxUnackedMessagesPerSubscription"), nil),
		limitPolicy("deduplicationSnapshotInterval", http.MethodPost,
			func(p *policy.Policies) **int { return &p.DeduplicationSnapshotIntervalSeconds }, 0, math.MaxInt32, "interval must be 0 or more", nil),
		{
			// Pulsar's DelayedDeliveryPolicies; a topic's own
			// delayedDelivery wins.
			path: "delayedDelivery",
			get: func(p *policy.Policies) any {
				if p.DelayedDelivery == nil {
					return nil
				}
				return p.DelayedDelivery
			},
			set: func(_ *http.Request, body []byte, p *policy.Policies) error {
				var v policy.DelayedDeliveryPolicies
				if err := decodeValue(body, &v); err != nil {
					return err
				}
				if err := v.Validate(); err != nil {
					return badRequest(err)
				}
				p.DelayedDelivery = &v
				return nil
			},
			remove: func(_ *http.Request, p *policy.Policies) { p.DelayedDelivery = nil },
		},
		{
			// Isobar's synchronous replication (policy.SyncReplication);
			// a topic's own wins.
			path: "syncReplication",
			get: func(p *policy.Policies) any {
				if p.SyncReplication == nil {
					return nil
				}
				return p.SyncReplication
			},
			set: func(_ *http.Request, body []byte, p *policy.Policies) error {
				var v policy.SyncReplication
				if err := decodeValue(body, &v); err != nil {
					return err
				}
				if err := v.Validate(); err != nil {
					return badRequest(fmt.Errorf("syncReplication: %w", err))
				}
				if err := v.CheckClusters(p.ReplicationClusters); err != nil {
					return refuse(errkind.ErrPreconditionFailed, err.Error())
				}
				p.SyncReplication = &v
				return nil
			},
			remove: func(_ *http.Request, p *policy.Policies) { p.SyncReplication = nil },
		},
		limitPolicy("compactionThreshold", http.MethodPut,
			func(p *policy.Policies) **int64 { return &p.CompactionThreshold }, 0, math.MaxInt64, mustBe0OrMore("compactionThreshold"), nil),
		// Offloading: stored only (Isobar has no tiered storage). -1
		// (Pulsar's default, answered when unset) disables it.
		limitPolicy("offloadThreshold", http.MethodPut,
			func(p *policy.Policies) **int64 { return &p.OffloadThreshold }, -1, math.MaxInt64, "Invalid value for offloadThreshold", int64(-1)),
		limitPolicy("offloadThresholdInSeconds", http.MethodPut,
			func(p *policy.Policies) **int64 { return &p.OffloadThresholdInSeconds }, 0, math.MaxInt64, "Invalid value for offloadThresholdInSecond", int64(-1)),
		limitPolicy("offloadDeletionLagMs", http.MethodPut,
			func(p *policy.Policies) **int64 { return &p.OffloadDeletionLagMs }, 0, math.MaxInt64, mustBe0OrMore("offloadDeletionLagMs"), nil),
		{
			path:      "schemaCompatibilityStrategy",
			setMethod: http.MethodPut,
			get: func(p *policy.Policies) any {
				if p.SchemaCompatibilityStrategy == "" {
					return policy.SchemaCompatibilityUndefined
				}
				return p.SchemaCompatibilityStrategy
			},
			set: func(_ *http.Request, body []byte, p *policy.Policies) error {
				var name string
				if err := json.Unmarshal(body, &name); err != nil {
					name = strings.TrimSpace(string(body)) // a bare word, as curl sends it
				}
				v, err := policy.ParseSchemaCompatibility(name)
				if err != nil {
					return badRequest(err)
				}
				if v == policy.SchemaCompatibilityUndefined {
					v = ""
				}
				p.SchemaCompatibilityStrategy = v
				return nil
			},
		},
		{
			// PUT merges the properties given into the namespace's,
			// as Pulsar does; DELETE clears them all.
			path:      "properties",
			setMethod: http.MethodPut,
			get: func(p *policy.Policies) any {
				if p.Properties == nil {
					return map[string]string{}
				}
				return p.Properties
			},
			set: func(_ *http.Request, body []byte, p *policy.Policies) error {
				var m map[string]string
				if err := decodeStrict(body, &m); err != nil {
					return err
				}
				for k, v := range m {
					if err := policy.ValidProperty(k, v); err != nil {
						return badRequest(err)
					}
				}
				if p.Properties == nil && len(m) > 0 {
					p.Properties = make(map[string]string, len(m))
				}
				for k, v := range m {
					p.Properties[k] = v
				}
				return nil
			},
			remove: func(_ *http.Request, p *policy.Policies) { p.Properties = nil },
		},
		{
			// Ensemble, write and ack quorum of new ledgers (see
			// docs/admin.md for what the broker does with them).
			path: "persistence",
			get: func(p *policy.Policies) any {
				if p.Persistence == nil {
					return nil
				}
				return p.Persistence
			},
			set: func(_ *http.Request, body []byte, p *policy.Policies) error {
				var v policy.PersistencePolicies
				if err := decodeStrict(body, &v); err != nil {
					return err
				}
				if err := v.Validate(); err != nil {
					return badRequest(err)
				}
				p.Persistence = &v
				return nil
			},
			remove: func(_ *http.Request, p *policy.Policies) { p.Persistence = nil },
		},
		{
			// Kept per cluster, for this cluster; the broker confines
			// the namespace's new ledgers to the groups (docs/ledger.md).
			path: "persistence/bookieAffinity",
			get: func(p *policy.Policies) any {
				g, ok := p.BookieAffinityGroups[cluster]
				if !ok {
					return nil
				}
				return g
			},
			set: func(_ *http.Request, body []byte, p *policy.Policies) error {
				var g policy.BookieAffinityGroup
				if err := decodeStrict(body, &g); err != nil {
					return err
				}
				if err := g.Validate(); err != nil {
					return badRequest(err)
				}
				if p.BookieAffinityGroups == nil {
					p.BookieAffinityGroups = map[string]policy.BookieAffinityGroup{}
				}
				p.BookieAffinityGroups[cluster] = g
				return nil
			},
			remove: func(_ *http.Request, p *policy.Policies) {
				delete(p.BookieAffinityGroups, cluster)
				if len(p.BookieAffinityGroups) == 0 {
					p.BookieAffinityGroups = nil
				}
			},
		},
	}
}

// ---- single properties: /property/{key}[/{value}]

func (s *Server) getNamespaceProperty(w http.ResponseWriter, r *http.Request) error {
	var v string
	var found bool
	err := s.readNamespace(r, func(p *policy.Policies) { v, found = p.Properties[r.PathValue("key")] })
	if err != nil {
		return err
	}
	if !found {
		return noContent(w)
	}
	return ok(w, v)
}

func (s *Server) setNamespaceProperty(w http.ResponseWriter, r *http.Request) error {
	k, v := r.PathValue("key"), r.PathValue("value")
	if err := policy.ValidProperty(k, v); err != nil {
		return badRequest(err)
	}
	return s.updateNamespace(w, r, func(p *policy.Policies) error {
		if p.Properties == nil {
			p.Properties = map[string]string{}
		}
		p.Properties[k] = v
		return nil
	})
}

func (s *Server) removeNamespaceProperty(w http.ResponseWriter, r *http.Request) error {
	return s.updateNamespace(w, r, func(p *policy.Policies) error {
		delete(p.Properties, r.PathValue("key"))
		if len(p.Properties) == 0 {
			p.Properties = nil
		}
		return nil
	})
}

// ---- shared by the namespace policy handlers

// readNamespace reads the request's namespace's policies and hands them
// to fn; a namespace or tenant that does not exist is answered with
// Pulsar's reasons.
func (s *Server) readNamespace(r *http.Request, fn func(p *policy.Policies)) error {
	if s.cfg.Policies == nil {
		return errNoPolicies
	}
	ns, err := nsName(r)
	if err != nil {
		return err
	}
	pol, err := s.cfg.Policies.Namespace(r.Context(), ns)
	if err != nil {
		return s.namespaceErr(r, err)
	}
	fn(pol)
	return nil
}

// updateNamespace changes the request's namespace's policies with fn and
// answers 204; a refusal fn returns is answered as it is.
func (s *Server) updateNamespace(w http.ResponseWriter, r *http.Request, fn func(p *policy.Policies) error) error {
	if s.cfg.Policies == nil {
		return errNoPolicies
	}
	ns, err := nsName(r)
	if err != nil {
		return err
	}
	if _, err := s.cfg.Policies.UpdateNamespace(r.Context(), ns, fn); err != nil {
		return s.namespaceErr(r, bare(err))
	}
	return noContent(w)
}

// namespaceErr answers a namespace that is not there as Pulsar does:
// "Tenant does not exist" or "Namespace does not exist" (404).
func (s *Server) namespaceErr(r *http.Request, err error) error {
	if !errors.Is(err, policy.ErrNotFound) {
		return err
	}
	ctx := r.Context()
	if _, terr := s.cfg.Policies.Tenant(ctx, r.PathValue("tenant")); errors.Is(terr, policy.ErrNotFound) {
		return refuse(errkind.ErrNotFound, "Tenant does not exist")
	}
	ns := r.PathValue("tenant") + "/" + r.PathValue("namespace")
	if _, nerr := s.cfg.Policies.Namespace(ctx, ns); errors.Is(nerr, policy.ErrNotFound) {
		return refuse(errkind.ErrNotFound, "Namespace does not exist")
	}
	return err
}
