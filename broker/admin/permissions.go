package admin

import (
	"net/http"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

// Permission grants (Pulsar's auth_policies, kept in the namespace's
// policies by globalconfig/policy). Each change is one compare-and-swap
// update of the namespace's policies, so a refused request stores
// nothing. The grants are stored whether or not the brokers enforce
// them (docs/admin.md).

// namespacePermissions serves GET .../namespaces/{t}/{ns}/permissions:
// role → actions.
func (s *Server) namespacePermissions(w http.ResponseWriter, r *http.Request) error {
	ns, err := nsName(r)
	if err != nil {
		return err
	}
	p, err := s.cfg.Policies.Namespace(r.Context(), ns)
	if err != nil {
		return err
	}
	return ok(w, policy.NamespacePermissions(p))
}

// grantNamespacePermission serves POST .../permissions/{role}: the body
// is a JSON array of actions, which replace the role's.
func (s *Server) grantNamespacePermission(w http.ResponseWriter, r *http.Request) error {
	ns, err := nsName(r)
	if err != nil {
		return err
	}
	role, actions, err := grantRequest(w, r)
	if err != nil {
		return err
	}
	if err := s.cfg.Policies.GrantNamespacePermission(r.Context(), ns, role, actions); err != nil {
		return err
	}
	return noContent(w)
}

// revokeNamespacePermission serves DELETE .../permissions/{role}; a role
// without a grant is no error (as in Pulsar).
func (s *Server) revokeNamespacePermission(w http.ResponseWriter, r *http.Request) error {
	ns, err := nsName(r)
	if err != nil {
		return err
	}
	role := r.PathValue("role")
	if err := policy.ValidRole(role); err != nil {
		return err
	}
	if err := s.cfg.Policies.RevokeNamespacePermission(r.Context(), ns, role); err != nil {
		return err
	}
	return noContent(w)
}

// subscriptionPermissions serves GET .../permissions/subscription:
// subscription → roles.
func (s *Server) subscriptionPermissions(w http.ResponseWriter, r *http.Request) error {
	ns, err := nsName(r)
	if err != nil {
		return err
	}
	p, err := s.cfg.Policies.Namespace(r.Context(), ns)
	if err != nil {
		return err
	}
	return ok(w, policy.SubscriptionPermissions(p))
}

// grantSubscriptionPermission serves POST
// .../permissions/subscription/{subscription}: the body is a JSON array
// of roles, which replace the subscription's.
func (s *Server) grantSubscriptionPermission(w http.ResponseWriter, r *http.Request) error {
	ns, err := nsName(r)
	if err != nil {
		return err
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	roles, err := policy.DecodeRoles(body)
	if err != nil {
		return err
	}
	if err := s.cfg.Policies.GrantSubscriptionPermission(r.Context(), ns, r.PathValue("subscription"), roles); err != nil {
		return err
	}
	return noContent(w)
}

// revokeSubscriptionPermission serves DELETE
// .../permissions/{subscription}/{role}; 404 when the subscription has
// no roles.
func (s *Server) revokeSubscriptionPermission(w http.ResponseWriter, r *http.Request) error {
	ns, err := nsName(r)
	if err != nil {
		return err
	}
	role := r.PathValue("role")
	if err := policy.ValidRole(role); err != nil {
		return err
	}
	if err := s.cfg.Policies.RevokeSubscriptionPermission(r.Context(), ns, r.PathValue("subscription"), role); err != nil {
		return err
	}
	return noContent(w)
}

// permissionTopic parses {tenant}/{namespace}/{topic} in domain d, like
// topicHandler, for the permission endpoints, which need the
// configuration store only (not the broker's topics).
func (s *Server) permissionTopic(d topic.Domain, h topicHandlerFunc) handlerFunc {
	if s.cfg.Policies == nil {
		return absent(errNoPolicies)
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		name, err := topic.Parse(string(d) + "://" + r.PathValue("tenant") + "/" + r.PathValue("namespace") + "/" + r.PathValue("topic"))
		if err != nil {
			return err
		}
		return h(w, r, name)
	}
}

// topicPermissions serves GET .../{topic}/permissions: the union of the
// namespace's grants and the topic's own (policy.TopicPermissions).
func (s *Server) topicPermissions(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	p, err := s.cfg.Policies.Namespace(r.Context(), name.NamespaceName())
	if err != nil {
		return err
	}
	return ok(w, policy.TopicPermissions(p, name))
}

// grantTopicPermission serves POST .../{topic}/permissions/{role}. The
// topic need not exist (as with Pulsar's allowAclChangesOnNonExistentTopics),
// so grants can be made before the topic is.
func (s *Server) grantTopicPermission(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	role, actions, err := grantRequest(w, r)
	if err != nil {
		return err
	}
	if err := s.cfg.Policies.GrantTopicPermission(r.Context(), name, role, actions); err != nil {
		return err
	}
	return noContent(w)
}

// revokeTopicPermission serves DELETE .../{topic}/permissions/{role}; 412
// when the topic itself has no grant for the role (Pulsar: "Permissions
// are not set at the topic level").
func (s *Server) revokeTopicPermission(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	role := r.PathValue("role")
	if err := policy.ValidRole(role); err != nil {
		return err
	}
	if err := s.cfg.Policies.RevokeTopicPermission(r.Context(), name, role); err != nil {
		return err
	}
	return noContent(w)
}

// grantRequest reads the role from the path and the actions from the
// body of a grant; both are checked before anything is stored.
func grantRequest(w http.ResponseWriter, r *http.Request) (string, []string, error) {
	role := r.PathValue("role")
	if err := policy.ValidRole(role); err != nil {
		return "", nil, err
	}
	body, err := readBody(w, r)
	if err != nil {
		return "", nil, err
	}
	actions, err := policy.DecodeActions(body)
	if err != nil {
		return "", nil, err
	}
	return role, actions, nil
}
