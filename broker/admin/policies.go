package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ---- clusters

func (s *Server) listClusters(w http.ResponseWriter, r *http.Request) error {
	cs, err := s.cfg.Policies.Clusters(r.Context())
	if err != nil {
		return err
	}
	return ok(w, nonNil(cs))
}

func (s *Server) getCluster(w http.ResponseWriter, r *http.Request) error {
	d, err := s.cfg.Policies.Cluster(r.Context(), r.PathValue("cluster"))
	if err != nil {
		return err
	}
	return ok(w, d)
}

func (s *Server) createCluster(w http.ResponseWriter, r *http.Request) error {
	var d policy.ClusterData
	if _, err := decodeBody(w, r, &d); err != nil {
		return err
	}
	if err := s.cfg.Policies.CreateCluster(r.Context(), r.PathValue("cluster"), d); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) updateCluster(w http.ResponseWriter, r *http.Request) error {
	var d policy.ClusterData
	if _, err := decodeBody(w, r, &d); err != nil {
		return err
	}
	if err := s.cfg.Policies.UpdateCluster(r.Context(), r.PathValue("cluster"), d); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) deleteCluster(w http.ResponseWriter, r *http.Request) error {
	err := s.cfg.Policies.DeleteCluster(r.Context(), r.PathValue("cluster"))
	if errors.Is(err, policy.ErrNotEmpty) {
		// Pulsar answers 412 "Cluster not empty" here (409 for a tenant
		// or namespace that is not empty).
		return fmt.Errorf("%w: %w", adminapi.ErrPreconditionFailed, err)
	}
	if err != nil {
		return err
	}
	return noContent(w)
}

// ---- tenants

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) error {
	ts, err := s.cfg.Policies.Tenants(r.Context())
	if err != nil {
		return err
	}
	return ok(w, nonNil(ts))
}

func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) error {
	ti, err := s.cfg.Policies.Tenant(r.Context(), r.PathValue("tenant"))
	if err != nil {
		return err
	}
	ti.AdminRoles, ti.AllowedClusters = nonNil(ti.AdminRoles), nonNil(ti.AllowedClusters)
	return ok(w, ti)
}

func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) error {
	var ti policy.TenantInfo
	if _, err := decodeBody(w, r, &ti); err != nil {
		return err
	}
	if err := s.cfg.Policies.CreateTenant(r.Context(), r.PathValue("tenant"), ti); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) updateTenant(w http.ResponseWriter, r *http.Request) error {
	var ti policy.TenantInfo
	if _, err := decodeBody(w, r, &ti); err != nil {
		return err
	}
	if err := s.cfg.Policies.UpdateTenant(r.Context(), r.PathValue("tenant"), ti); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) deleteTenant(w http.ResponseWriter, r *http.Request) error {
	ctx, tenant := r.Context(), r.PathValue("tenant")
	if fd := s.cfg.Broker.Deletes; fd != nil && boolParam(r, "force") {
		// Pulsar's deleteTenant(force): every namespace with force first,
		// each in every region.
		nss, err := s.cfg.Policies.Namespaces(ctx, tenant)
		if err != nil {
			return err
		}
		for _, ns := range nss {
			if _, err := fd.DeleteNamespaceEverywhere(ctx, ns, true); err != nil && !errors.Is(err, policy.ErrNotFound) && !isKind(err, errkind.ErrNotFound) {
				return fmt.Errorf("namespace %s: %w", ns, err)
			}
		}
	}
	if err := s.cfg.Policies.DeleteTenant(ctx, tenant); err != nil {
		return err
	}
	return noContent(w)
}

// ---- namespaces

func nsName(r *http.Request) (string, error) {
	ns := r.PathValue("tenant") + "/" + r.PathValue("namespace")
	if _, _, err := topic.ParseNamespace(ns); err != nil {
		return "", err
	}
	return ns, nil
}

func (s *Server) listNamespaces(w http.ResponseWriter, r *http.Request) error {
	nss, err := s.cfg.Policies.Namespaces(r.Context(), r.PathValue("tenant"))
	if err != nil {
		return err
	}
	return ok(w, nonNil(nss))
}

func (s *Server) getNamespace(w http.ResponseWriter, r *http.Request) error {
	ns, err := nsName(r)
	if err != nil {
		return err
	}
	p, err := s.cfg.Policies.Namespace(r.Context(), ns)
	if err != nil {
		return err
	}
	p.SubscriptionAuthMode = p.AuthMode() // "None" when not set, as Pulsar
	return ok(w, p)
}

func (s *Server) createNamespace(w http.ResponseWriter, r *http.Request) error {
	ns, err := nsName(r)
	if err != nil {
		return err
	}
	var p policy.Policies
	has, err := decodeBody(w, r, &p)
	if err != nil {
		return err
	}
	var pp *policy.Policies
	if has {
		pp = &p
	}
	if err := s.cfg.Policies.CreateNamespace(r.Context(), ns, pp); err != nil {
		return err
	}
	return noContent(w)
}

// deleteNamespace deletes a namespace; with ?force=true it first deletes
// every topic and partitioned topic in it.
func (s *Server) deleteNamespace(w http.ResponseWriter, r *http.Request) error {
	ns, err := nsName(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if fd := s.cfg.Broker.Deletes; fd != nil {
		force := boolParam(r, "force")
		if !force {
			// Partitioned topics are the federation's: the store knows.
			pts, err := s.cfg.Policies.ListPartitioned(ctx, ns, "")
			if err != nil {
				return err
			}
			if len(pts) > 0 {
				return fmt.Errorf("%w: namespace %s has partitioned topics (%s); delete them first, or the namespace with force", adminapi.ErrConflict, ns, pts[0])
			}
		}
		if handled, err := fd.DeleteNamespaceEverywhere(ctx, ns, force); handled {
			if err != nil {
				return err
			}
			return noContent(w)
		}
	}
	if boolParam(r, "force") {
		if _, err := s.cfg.Policies.Namespace(ctx, ns); err != nil {
			return err
		}
		if s.topics != nil {
			for _, d := range []topic.Domain{topic.Persistent, topic.NonPersistent} {
				names, err := s.topics.ListTopics(ctx, ns, d)
				if err != nil {
					return err
				}
				for _, n := range names {
					tn, err := topic.Parse(n)
					if err != nil {
						return err
					}
					if err := s.topics.DeleteTopic(ctx, tn, true); err != nil && !isKind(err, errkind.ErrTopicNotFound) {
						return err
					}
				}
			}
		}
		pts, err := s.cfg.Policies.ListPartitioned(ctx, ns, "")
		if err != nil {
			return err
		}
		for _, pt := range pts {
			if err := s.cfg.Policies.DeletePartitioned(ctx, pt); err != nil && !errors.Is(err, policy.ErrNotFound) {
				return err
			}
		}
	}
	if err := s.cfg.Policies.DeleteNamespace(ctx, ns); err != nil {
		return err
	}
	s.deleteNamespaceSchemas(ctx, ns)
	return noContent(w)
}

// namespaceTopics serves GET /admin/v2/namespaces/{t}/{ns}/topics?mode=.
func (s *Server) namespaceTopics(w http.ResponseWriter, r *http.Request) error {
	ns, err := nsName(r)
	if err != nil {
		return err
	}
	var domains []topic.Domain
	switch mode := strings.ToUpper(r.URL.Query().Get("mode")); mode {
	case "", "PERSISTENT":
		domains = []topic.Domain{topic.Persistent}
	case "NON_PERSISTENT":
		domains = []topic.Domain{topic.NonPersistent}
	case "ALL":
		domains = []topic.Domain{topic.Persistent, topic.NonPersistent}
	default:
		return badRequestf("mode %q: want PERSISTENT, NON_PERSISTENT or ALL", mode)
	}
	if _, err := s.cfg.Policies.Namespace(r.Context(), ns); err != nil {
		return err
	}
	if s.topics == nil {
		return errNoTopics
	}
	out := []string{}
	for _, d := range domains {
		names, err := s.topics.ListTopics(r.Context(), ns, d)
		if err != nil {
			return err
		}
		out = append(out, names...)
	}
	return ok(w, out)
}

// ---- namespace policy sub-resources

// nsPolicy is one sub-resource of a namespace's policies.
type nsPolicy struct {
	path string
	// get answers the policy; nil (untyped) when it is not set, which is
	// answered 204 No Content, as Pulsar answers null.
	get       func(p *policy.Policies) any
	set       func(r *http.Request, body []byte, p *policy.Policies) error // nil: read-only
	setMethod string                                                       // "": POST
	remove    func(r *http.Request, p *policy.Policies)                    // nil: no DELETE
}

func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequestf("empty body")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return badRequest(fmt.Errorf("body: %w", err))
	}
	return nil
}

func quotaType(r *http.Request) (string, error) {
	t := r.URL.Query().Get("backlogQuotaType")
	switch t {
	case "":
		return policy.DestinationStorage, nil
	case policy.DestinationStorage, policy.MessageAge:
		return t, nil
	}
	return "", badRequestf("backlogQuotaType %q: want %s or %s", t, policy.DestinationStorage, policy.MessageAge)
}

var backlogQuotaPolicy = nsPolicy{
	path: "backlogQuota",
	get: func(p *policy.Policies) any {
		if p.BacklogQuotaMap == nil {
			return map[string]policy.BacklogQuota{}
		}
		return p.BacklogQuotaMap
	},
	set: func(r *http.Request, body []byte, p *policy.Policies) error {
		t, err := quotaType(r)
		if err != nil {
			return err
		}
		var q policy.BacklogQuota
		if err := decodeStrict(body, &q); err != nil {
			return err
		}
		if p.BacklogQuotaMap == nil {
			p.BacklogQuotaMap = map[string]policy.BacklogQuota{}
		}
		p.BacklogQuotaMap[t] = q
		return nil
	},
	remove: func(r *http.Request, p *policy.Policies) {
		t, err := quotaType(r)
		if err == nil {
			delete(p.BacklogQuotaMap, t)
		}
	},
}

var namespacePolicies = []nsPolicy{
	{
		path: "retention",
		get:  func(p *policy.Policies) any { return p.RetentionPolicies },
		set: func(_ *http.Request, body []byte, p *policy.Policies) error {
			var v policy.RetentionPolicies
			if err := decodeStrict(body, &v); err != nil {
				return err
			}
			p.RetentionPolicies = &v
			return nil
		},
		remove: func(_ *http.Request, p *policy.Policies) { p.RetentionPolicies = nil },
	},
	{
		path: "messageTTL",
		get:  func(p *policy.Policies) any { return p.MessageTTLInSeconds },
		set: func(_ *http.Request, body []byte, p *policy.Policies) error {
			var v int
			if err := decodeStrict(body, &v); err != nil {
				return err
			}
			p.MessageTTLInSeconds = &v
			return nil
		},
		remove: func(_ *http.Request, p *policy.Policies) { p.MessageTTLInSeconds = nil },
	},
	backlogQuotaPolicy,
	{
		path: "deduplication",
		get:  func(p *policy.Policies) any { return p.DeduplicationEnabled },
		set: func(_ *http.Request, body []byte, p *policy.Policies) error {
			var v bool
			if err := decodeStrict(body, &v); err != nil {
				return err
			}
			p.DeduplicationEnabled = &v
			return nil
		},
		remove: func(_ *http.Request, p *policy.Policies) { p.DeduplicationEnabled = nil },
	},
	{
		// Pulsar's AutoSubscriptionCreationOverride: the broker's
		// allowAutoSubscriptionCreation for the namespace's topics.
		path: "autoSubscriptionCreation",
		get: func(p *policy.Policies) any {
			if p.AutoSubscriptionCreationOverride == nil {
				return nil
			}
			return p.AutoSubscriptionCreationOverride
		},
		set: func(_ *http.Request, body []byte, p *policy.Policies) error {
			var v policy.AutoSubscriptionCreation
			if err := decodeStrict(body, &v); err != nil {
				return err
			}
			p.AutoSubscriptionCreationOverride = &v
			return nil
		},
		remove: func(_ *http.Request, p *policy.Policies) { p.AutoSubscriptionCreationOverride = nil },
	},
	{
		path: "autoTopicCreation",
		get: func(p *policy.Policies) any {
			if p.AutoTopicCreation == nil {
				return nil
			}
			return p.AutoTopicCreation
		},
		set: func(_ *http.Request, body []byte, p *policy.Policies) error {
			var v policy.AutoTopicCreation
			if err := decodeStrict(body, &v); err != nil {
				return err
			}
			if reason := autoCreationReason(v); reason != "" {
				return refuse(errkind.ErrPreconditionFailed, reason)
			}
			p.AutoTopicCreation = &v
			return nil
		},
		remove: func(_ *http.Request, p *policy.Policies) { p.AutoTopicCreation = nil },
	},
	{
		// Isobar's replication mode and primary region: GET answers
		// {"mode","primary","epoch","autoFailoverAfterSeconds"}; POST
		// takes {"mode","primary","autoFailoverAfterSeconds"} or a bare
		// region name (active-standby with that primary); DELETE makes
		// the namespace active-active. See docs/failover.md.
		path: "primary",
		get:  func(p *policy.Policies) any { return policy.FailoverOf(p) },
		set: func(_ *http.Request, body []byte, p *policy.Policies) error {
			var v struct {
				Mode    string `json:"mode"`
				Primary string `json:"primary"`
				Auto    *int   `json:"autoFailoverAfterSeconds"`
			}
			var name string
			if json.Unmarshal(body, &name) == nil {
				v.Mode, v.Primary = policy.ActiveStandby, name
			} else if err := decodeStrict(body, &v); err != nil {
				return err
			}
			if v.Mode == "" {
				v.Mode = policy.ActiveStandby
			}
			if err := policy.SetFailover(p, v.Mode, v.Primary); err != nil {
				return err
			}
			if v.Auto != nil {
				return policy.SetAutoFailover(p, *v.Auto)
			}
			return nil
		},
		remove: func(_ *http.Request, p *policy.Policies) { _ = policy.SetFailover(p, policy.ActiveActive, "") },
	},
	{
		path: "replication",
		get:  func(p *policy.Policies) any { return nonNil(p.ReplicationClusters) },
		set: func(_ *http.Request, body []byte, p *policy.Policies) error {
			var v []string
			if err := decodeStrict(body, &v); err != nil {
				return err
			}
			if len(v) == 0 {
				return fmt.Errorf("%w: replication clusters: at least one is required", policy.ErrInvalid)
			}
			p.ReplicationClusters = v
			return nil
		},
	},
}

func (s *Server) getNSPolicy(p nsPolicy) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var v any
		if err := s.readNamespace(r, func(pol *policy.Policies) { v = p.get(pol) }); err != nil {
			return err
		}
		if v == nil {
			return noContent(w)
		}
		return ok(w, v)
	}
}

func (s *Server) setNSPolicy(p nsPolicy) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		body, err := readBody(w, r)
		if err != nil {
			return err
		}
		return s.updateNamespace(w, r, func(pol *policy.Policies) error {
			return p.set(r, body, pol)
		})
	}
}

func (s *Server) removeNSPolicy(p nsPolicy) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if p.path == "backlogQuota" {
			if _, err := quotaType(r); err != nil {
				return err
			}
		}
		return s.updateNamespace(w, r, func(pol *policy.Policies) error {
			p.remove(r, pol)
			return nil
		})
	}
}
