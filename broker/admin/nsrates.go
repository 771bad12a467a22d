package admin

import (
	"net/http"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// nsRateRoutes serves a namespace's rates, Pulsar's
// /admin/v2/namespaces/{tenant}/{namespace}/{publishRate, dispatchRate,
// subscriptionDispatchRate, replicatorDispatchRate, subscribeRate}: GET
// answers the rate of this server's cluster (null when unset), POST sets
// it, DELETE removes it. They are kept by cluster in the namespace's
// policies (policy.NamespaceRates), so each region has its own.
func (s *Server) nsRateRoutes(ns string) {
	for _, p := range s.nsRatePolicies() {
		s.handle("GET "+ns+"/"+p.path, s.getNSPolicy(p))
		s.handle("POST "+ns+"/"+p.path, s.setNSPolicy(p))
		s.handle("DELETE "+ns+"/"+p.path, s.removeNSPolicy(p))
	}
}

// rateOf is the nsPolicy of one per-cluster rate map of the namespace's
// policies.
func rateOf[T any](path, cluster string, field func(*policy.Policies) *map[string]T, check func(T) error) nsPolicy {
	return nsPolicy{
		path: path,
		get:  func(p *policy.Policies) any { return policy.RateIn(*field(p), cluster) },
		set: func(_ *http.Request, body []byte, p *policy.Policies) error {
			var v T
			if err := decodeStrict(body, &v); err != nil {
				return err
			}
			if err := check(v); err != nil {
				return badRequestf("%s: %v", path, err)
			}
			m := field(p)
			if *m == nil {
				*m = map[string]T{}
			}
			(*m)[cluster] = v
			return nil
		},
		remove: func(_ *http.Request, p *policy.Policies) { delete(*field(p), cluster) },
	}
}

func (s *Server) nsRatePolicies() []nsPolicy {
	c := s.cfg.Cluster
	dispatch := rateOf("dispatchRate", c, func(p *policy.Policies) *map[string]policy.DispatchRate { return &p.TopicDispatchRate }, policy.ValidateDispatchRate)
	// Pulsar reads the older clusterDispatchRate when topicDispatchRate
	// has no entry, and removes both.
	dispatch.get = func(p *policy.Policies) any { return p.DispatchRateIn(c) }
	remove := dispatch.remove
	dispatch.remove = func(r *http.Request, p *policy.Policies) {
		remove(r, p)
		delete(p.ClusterDispatchRate, c)
	}
	return []nsPolicy{
		rateOf("publishRate", c, func(p *policy.Policies) *map[string]policy.PublishRate { return &p.PublishMaxMessageRate }, policy.ValidatePublishRate),
		dispatch,
		rateOf("subscriptionDispatchRate", c, func(p *policy.Policies) *map[string]policy.DispatchRate { return &p.SubscriptionDispatchRate }, policy.ValidateDispatchRate),
		rateOf("replicatorDispatchRate", c, func(p *policy.Policies) *map[string]policy.DispatchRate { return &p.ReplicatorDispatchRate }, policy.ValidateDispatchRate),
		rateOf("subscribeRate", c, func(p *policy.Policies) *map[string]policy.SubscribeRate { return &p.ClusterSubscribeRate }, policy.ValidateSubscribeRate),
	}
}
