package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/topic"
)

// Permission grants, as Pulsar keeps them in a namespace's policies
// (auth_policies): actions granted to roles on the whole namespace, on
// single topics, and the roles allowed to use a subscription. They are
// stored whatever the brokers do; they are enforced only once
// authorization is on, as in Pulsar.

// Actions a role may be granted: Pulsar's AuthAction names.
const (
	ActionConsume   = "consume"
	ActionFunctions = "functions"
	ActionPackages  = "packages"
	ActionProduce   = "produce"
	ActionSinks     = "sinks"
	ActionSources   = "sources"
)

// AuthActions are the actions a role may be granted, sorted.
var AuthActions = []string{ActionConsume, ActionFunctions, ActionPackages, ActionProduce, ActionSinks, ActionSources}

// Bounds on a namespace's grants: every broker serving the namespace
// holds them, and the namespace's record (one etcd value) carries them.
const (
	// MaxRoleLen bounds a role's name, in bytes.
	MaxRoleLen = 256
	// MaxGrantRoles bounds the roles of one scope: the namespace, one
	// topic, or one subscription.
	MaxGrantRoles = 1000
	// MaxGrantTopics bounds the topics of a namespace with grants of
	// their own, and the subscriptions with roles of their own.
	MaxGrantTopics = 10000
)

// ErrBadGrant is an invalid role, action or subscription name in a grant:
// an error in the request (400).
var ErrBadGrant = errkind.Sentinel(errkind.ErrBadRequest, "policy: invalid permission")

// ErrNotGranted is the revocation of a topic grant that was never made
// (Pulsar: 412 "Permissions are not set at the topic level").
var ErrNotGranted = errkind.Sentinel(errkind.ErrPreconditionFailed, "policy: permissions are not set at the topic level")

// ErrNoSubscriptionGrant is the revocation of a role on a subscription
// that has no roles of its own (404).
var ErrNoSubscriptionGrant = errkind.Sentinel(errkind.ErrNotFound, "policy: the subscription has no permissions")

// AuthPolicies are a namespace's permission grants, in Pulsar's JSON
// names. Stored canonically: every action and role list sorted without
// duplicates, no empty list or map.
type AuthPolicies struct {
	// NamespaceAuth: role → actions on every topic of the namespace.
	NamespaceAuth map[string][]string `json:"namespace_auth,omitempty"`
	// DestinationAuth: full topic name → role → actions on that topic
	// (for a partitioned topic's name, on each of its partitions).
	DestinationAuth map[string]map[string][]string `json:"destination_auth,omitempty"`
	// SubscriptionAuthRoles: subscription name → the roles that may use
	// it (a subscription not listed: any role that may consume).
	SubscriptionAuthRoles map[string][]string `json:"subscription_auth_roles,omitempty"`
}

// ValidRole checks a role's name: 1 to MaxRoleLen bytes of printable
// UTF-8 (no control characters).
func ValidRole(role string) error {
	switch {
	case role == "":
		return fmt.Errorf("%w: empty role", ErrBadGrant)
	case len(role) > MaxRoleLen:
		return fmt.Errorf("%w: role of %d bytes, more than %d", ErrBadGrant, len(role), MaxRoleLen)
	case !utf8.ValidString(role):
		return fmt.Errorf("%w: role %q is not UTF-8", ErrBadGrant, role)
	}
	for _, r := range role {
		if unicode.IsControl(r) || !unicode.IsPrint(r) && r != ' ' {
			return fmt.Errorf("%w: role %q has a control or unprintable character", ErrBadGrant, role)
		}
	}
	return nil
}

// validGrantSubscription checks a subscription name with the rule of
// broker.ValidSubscriptionName (what a cursor can be named: 1 to 256
// bytes of UTF-8 without control or space characters or '/'); a test in
// package broker holds the two to the same answers.
func validGrantSubscription(sub string) error {
	switch {
	case sub == "":
		return fmt.Errorf("%w: empty subscription name", ErrBadGrant)
	case len(sub) > MaxRoleLen:
		return fmt.Errorf("%w: subscription name of %d bytes, more than %d", ErrBadGrant, len(sub), MaxRoleLen)
	case !utf8.ValidString(sub):
		return fmt.Errorf("%w: subscription name %q is not UTF-8", ErrBadGrant, sub)
	case strings.Contains(sub, "/"):
		return fmt.Errorf("%w: subscription name %q contains '/'", ErrBadGrant, sub)
	}
	for _, r := range sub {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%w: subscription name %q contains control or space characters", ErrBadGrant, sub)
		}
	}
	return nil
}

// ValidGrantSubscription is the check of subscription names in grants
// (exported for the test that compares it with the broker's rule).
func ValidGrantSubscription(sub string) error { return validGrantSubscription(sub) }

// NormalizeActions checks actions (at least one, each an AuthActions
// name) and returns them sorted without duplicates.
func NormalizeActions(actions []string) ([]string, error) {
	if len(actions) == 0 {
		return nil, fmt.Errorf("%w: no actions (want some of %s)", ErrBadGrant, strings.Join(AuthActions, ", "))
	}
	out := make([]string, 0, len(actions))
	for _, a := range actions {
		if !slices.Contains(AuthActions, a) {
			return nil, fmt.Errorf("%w: unknown action %q (want %s)", ErrBadGrant, a, strings.Join(AuthActions, ", "))
		}
		out = append(out, a)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// normalizeRoles checks roles (at least one, each ValidRole, at most
// MaxGrantRoles) and returns them sorted without duplicates.
func normalizeRoles(roles []string) ([]string, error) {
	if len(roles) == 0 {
		return nil, fmt.Errorf("%w: no roles", ErrBadGrant)
	}
	out := make([]string, 0, len(roles))
	for _, r := range roles {
		if err := ValidRole(r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxGrantRoles {
		return nil, fmt.Errorf("%w: %d roles, more than %d", ErrInvalid, len(out), MaxGrantRoles)
	}
	return out, nil
}

// DecodeActions decodes the body of a grant on a namespace or a topic: a
// JSON array of action names (["produce","consume"]), checked and
// returned sorted without duplicates. Anything else is ErrBadGrant.
func DecodeActions(body []byte) ([]string, error) {
	v, err := decodeStrings(body, "actions")
	if err != nil {
		return nil, err
	}
	return NormalizeActions(v)
}

// DecodeRoles decodes the body of a grant on a subscription: a JSON
// array of role names, checked and returned sorted without duplicates.
func DecodeRoles(body []byte) ([]string, error) {
	v, err := decodeStrings(body, "roles")
	if err != nil {
		return nil, err
	}
	return normalizeRoles(v)
}

func decodeStrings(body []byte, what string) ([]string, error) {
	var v []string
	if err := json.Unmarshal(bytes.TrimSpace(body), &v); err != nil {
		return nil, fmt.Errorf("%w: %s: want a JSON array of strings: %v", ErrBadGrant, what, err)
	}
	if v == nil {
		return nil, fmt.Errorf("%w: %s: want a JSON array of strings, got null", ErrBadGrant, what)
	}
	return v, nil
}

// grantScope sets role's actions in one scope (a role → actions map),
// replacing what the role had there, as Pulsar does.
func grantScope(m map[string][]string, scope, role string, actions []string) (map[string][]string, error) {
	if err := ValidRole(role); err != nil {
		return m, err
	}
	as, err := NormalizeActions(actions)
	if err != nil {
		return m, err
	}
	if _, had := m[role]; !had && len(m) >= MaxGrantRoles {
		return m, fmt.Errorf("%w: %s: %d roles have grants, the most there may be", ErrInvalid, scope, MaxGrantRoles)
	}
	if m == nil {
		m = map[string][]string{}
	}
	m[role] = as
	return m, nil
}

func (p *Policies) auth() *AuthPolicies {
	if p.AuthPolicies == nil {
		p.AuthPolicies = &AuthPolicies{}
	}
	return p.AuthPolicies
}

// tidyAuth drops empty maps, and the whole of p's grants when none is left.
func (p *Policies) tidyAuth() {
	a := p.AuthPolicies
	if a == nil {
		return
	}
	if len(a.NamespaceAuth) == 0 {
		a.NamespaceAuth = nil
	}
	if len(a.DestinationAuth) == 0 {
		a.DestinationAuth = nil
	}
	if len(a.SubscriptionAuthRoles) == 0 {
		a.SubscriptionAuthRoles = nil
	}
	if a.NamespaceAuth == nil && a.DestinationAuth == nil && a.SubscriptionAuthRoles == nil {
		p.AuthPolicies = nil
	}
}

// GrantNamespacePermission grants role actions on every topic of the
// namespace whose policies p are, replacing what the role had there.
func GrantNamespacePermission(p *Policies, role string, actions []string) error {
	defer p.tidyAuth()
	a := p.auth()
	m, err := grantScope(a.NamespaceAuth, "namespace_auth", role, actions)
	a.NamespaceAuth = m
	return err
}

// RevokeNamespacePermission removes role's grant on the namespace; it
// reports whether there was one (Pulsar answers success either way).
func RevokeNamespacePermission(p *Policies, role string) bool {
	if p.AuthPolicies == nil {
		return false
	}
	_, had := p.AuthPolicies.NamespaceAuth[role]
	delete(p.AuthPolicies.NamespaceAuth, role)
	p.tidyAuth()
	return had
}

// NamespacePermissions returns the namespace's grants, role → actions (a
// copy, never nil).
func NamespacePermissions(p *Policies) map[string][]string {
	out := map[string][]string{}
	if p != nil && p.AuthPolicies != nil {
		for r, as := range p.AuthPolicies.NamespaceAuth {
			out[r] = slices.Clone(as)
		}
	}
	return out
}

// checkTopic checks that name is a topic of namespace.
func checkTopic(namespace string, name topic.Name) error {
	if name.NamespaceName() != namespace {
		return fmt.Errorf("%w: topic %s is not in namespace %s", ErrInvalid, name, namespace)
	}
	return nil
}

// GrantTopicPermission grants role actions on topic name of namespace
// ("tenant/ns", whose policies p are), replacing what the role had on
// it. A partitioned topic's name covers its partitions. The topic need
// not exist.
func GrantTopicPermission(p *Policies, namespace string, name topic.Name, role string, actions []string) error {
	if err := checkTopic(namespace, name); err != nil {
		return err
	}
	defer p.tidyAuth()
	a := p.auth()
	key := name.String()
	cur, had := a.DestinationAuth[key]
	if !had && len(a.DestinationAuth) >= MaxGrantTopics {
		return fmt.Errorf("%w: destination_auth: %d topics have grants, the most there may be", ErrInvalid, MaxGrantTopics)
	}
	m, err := grantScope(maps.Clone(cur), "destination_auth."+key, role, actions)
	if err != nil {
		return err
	}
	if a.DestinationAuth == nil {
		a.DestinationAuth = map[string]map[string][]string{}
	}
	a.DestinationAuth[key] = m
	return nil
}

// RevokeTopicPermission removes role's grant on topic name (and, as
// Pulsar does, on the partitions of a partitioned topic of that name).
// ErrNotGranted when name itself has no grant for role: a grant on the
// namespace is revoked there.
func RevokeTopicPermission(p *Policies, namespace string, name topic.Name, role string) error {
	if err := checkTopic(namespace, name); err != nil {
		return err
	}
	a := p.AuthPolicies
	key := name.String()
	if a == nil || a.DestinationAuth[key] == nil || a.DestinationAuth[key][role] == nil {
		return fmt.Errorf("%w: role %q on %s", ErrNotGranted, role, key)
	}
	for k, roles := range a.DestinationAuth {
		if k != key {
			n, err := topic.Parse(k)
			if err != nil || n.Partition() < 0 || n.Base() != name {
				continue
			}
		}
		delete(roles, role)
		if len(roles) == 0 {
			delete(a.DestinationAuth, k)
		}
	}
	p.tidyAuth()
	return nil
}

// TopicPermissions is the lookup of who may do what on topic name in
// namespace policies p: role → actions, the union of the namespace's
// grants, the topic's own and, for a partition, its partitioned topic's
// (Pulsar's GET .../permissions answers the first two; its authorization
// checks all three). Actions are sorted without duplicates; the map is
// the caller's. It is pure: it reads p and nothing else, so an
// authorization layer can call it on every request with policies from
// the cache. Wildcard roles are kept as they were granted; matching them
// is the caller's business.
func TopicPermissions(p *Policies, name topic.Name) map[string][]string {
	out := NamespacePermissions(p)
	if p == nil || p.AuthPolicies == nil {
		return out
	}
	add := func(m map[string][]string) {
		for r, as := range m {
			u := append(out[r], as...)
			slices.Sort(u)
			out[r] = slices.Compact(u)
		}
	}
	add(p.AuthPolicies.DestinationAuth[name.String()])
	if name.Partition() >= 0 {
		add(p.AuthPolicies.DestinationAuth[name.Base().String()])
	}
	return out
}

// Permitted reports whether role may do action on topic name, by the
// grants in p alone (TopicPermissions; exact role names).
func Permitted(p *Policies, name topic.Name, role, action string) bool {
	return slices.Contains(TopicPermissions(p, name)[role], action)
}

// GrantSubscriptionPermission sets the roles that may use subscription
// sub (on every topic of the namespace), replacing the ones it had, as
// Pulsar does.
func GrantSubscriptionPermission(p *Policies, sub string, roles []string) error {
	if err := validGrantSubscription(sub); err != nil {
		return err
	}
	rs, err := normalizeRoles(roles)
	if err != nil {
		return err
	}
	defer p.tidyAuth()
	a := p.auth()
	if _, had := a.SubscriptionAuthRoles[sub]; !had && len(a.SubscriptionAuthRoles) >= MaxGrantTopics {
		return fmt.Errorf("%w: subscription_auth_roles: %d subscriptions have roles, the most there may be", ErrInvalid, MaxGrantTopics)
	}
	if a.SubscriptionAuthRoles == nil {
		a.SubscriptionAuthRoles = map[string][]string{}
	}
	a.SubscriptionAuthRoles[sub] = rs
	return nil
}

// RevokeSubscriptionPermission removes role from the roles of
// subscription sub (a role it does not list is no error);
// ErrNoSubscriptionGrant when sub has none. A subscription left without
// roles is open to every role that may consume again.
func RevokeSubscriptionPermission(p *Policies, sub, role string) error {
	if err := validGrantSubscription(sub); err != nil {
		return err
	}
	a := p.AuthPolicies
	if a == nil || a.SubscriptionAuthRoles[sub] == nil {
		return fmt.Errorf("%w: subscription %q", ErrNoSubscriptionGrant, sub)
	}
	rs := slices.DeleteFunc(slices.Clone(a.SubscriptionAuthRoles[sub]), func(r string) bool { return r == role })
	if len(rs) == 0 {
		delete(a.SubscriptionAuthRoles, sub)
	} else {
		a.SubscriptionAuthRoles[sub] = rs
	}
	p.tidyAuth()
	return nil
}

// SubscriptionPermissions returns subscription → roles (a copy, never
// nil).
func SubscriptionPermissions(p *Policies) map[string][]string {
	out := map[string][]string{}
	if p != nil && p.AuthPolicies != nil {
		for s, rs := range p.AuthPolicies.SubscriptionAuthRoles {
			out[s] = slices.Clone(rs)
		}
	}
	return out
}

// normalized checks a's grants (as a namespace create or update body may
// carry them) and returns them in canonical form, nil when empty; the
// problems are reported in key order, at most maxReported of them.
func (a *AuthPolicies) normalized() (*AuthPolicies, []error) {
	var errs []error
	out := &AuthPolicies{}
	scope := func(what string, m map[string][]string) map[string][]string {
		if len(m) > MaxGrantRoles {
			errs = append(errs, fmt.Errorf("auth_policies.%s: %d roles, more than %d", what, len(m), MaxGrantRoles))
		}
		var res map[string][]string
		for _, r := range slices.Sorted(maps.Keys(m)) {
			if err := ValidRole(r); err != nil {
				errs = append(errs, fmt.Errorf("auth_policies.%s: %w", what, err))
				continue
			}
			as, err := NormalizeActions(m[r])
			if err != nil {
				errs = append(errs, fmt.Errorf("auth_policies.%s.%s: %w", what, r, err))
				continue
			}
			if res == nil {
				res = map[string][]string{}
			}
			res[r] = as
		}
		return res
	}
	out.NamespaceAuth = scope("namespace_auth", a.NamespaceAuth)
	if len(a.DestinationAuth) > MaxGrantTopics {
		errs = append(errs, fmt.Errorf("auth_policies.destination_auth: %d topics, more than %d", len(a.DestinationAuth), MaxGrantTopics))
	}
	for _, t := range slices.Sorted(maps.Keys(a.DestinationAuth)) {
		n, err := topic.Parse(t)
		if err != nil || n.String() != t {
			errs = append(errs, fmt.Errorf("auth_policies.destination_auth: %q is not a full topic name", t))
			continue
		}
		if m := scope("destination_auth."+t, a.DestinationAuth[t]); m != nil {
			if out.DestinationAuth == nil {
				out.DestinationAuth = map[string]map[string][]string{}
			}
			out.DestinationAuth[t] = m
		}
		if len(errs) > maxReported {
			break
		}
	}
	if len(a.SubscriptionAuthRoles) > MaxGrantTopics {
		errs = append(errs, fmt.Errorf("auth_policies.subscription_auth_roles: %d subscriptions, more than %d", len(a.SubscriptionAuthRoles), MaxGrantTopics))
	}
	for _, s := range slices.Sorted(maps.Keys(a.SubscriptionAuthRoles)) {
		if err := validGrantSubscription(s); err != nil {
			errs = append(errs, fmt.Errorf("auth_policies.subscription_auth_roles: %w", err))
			continue
		}
		rs := a.SubscriptionAuthRoles[s]
		if len(rs) == 0 {
			continue // no roles: open, as if not listed
		}
		n, err := normalizeRoles(rs)
		if err != nil {
			errs = append(errs, fmt.Errorf("auth_policies.subscription_auth_roles.%s: %w", s, err))
			continue
		}
		if out.SubscriptionAuthRoles == nil {
			out.SubscriptionAuthRoles = map[string][]string{}
		}
		out.SubscriptionAuthRoles[s] = n
		if len(errs) > maxReported {
			break
		}
	}
	if out.NamespaceAuth == nil && out.DestinationAuth == nil && out.SubscriptionAuthRoles == nil {
		out = nil
	}
	return out, errs
}

// checkNamespace checks, for a namespace's policies, that every topic
// with grants is in it.
func (a *AuthPolicies) checkNamespace(namespace string) error {
	if a == nil {
		return nil
	}
	var errs []error
	for _, t := range slices.Sorted(maps.Keys(a.DestinationAuth)) {
		if n, err := topic.Parse(t); err == nil && n.NamespaceName() != namespace {
			errs = append(errs, fmt.Errorf("auth_policies.destination_auth: topic %s is not in namespace %s", t, namespace))
		}
	}
	return errors.Join(firstErrs(errs)...)
}

// ---- store operations: each one compare-and-swap update of the
// namespace's policies (UpdateNamespace), so concurrent grants never
// lose one another.

// GrantNamespacePermission grants role actions on namespace ("tenant/ns").
func (s *Store) GrantNamespacePermission(ctx context.Context, namespace, role string, actions []string) error {
	_, err := s.UpdateNamespace(ctx, namespace, func(p *Policies) error {
		return GrantNamespacePermission(p, role, actions)
	})
	return err
}

// RevokeNamespacePermission removes role's grant on namespace; a role
// without one is no error.
func (s *Store) RevokeNamespacePermission(ctx context.Context, namespace, role string) error {
	_, err := s.UpdateNamespace(ctx, namespace, func(p *Policies) error {
		RevokeNamespacePermission(p, role)
		return nil
	})
	return err
}

// GrantTopicPermission grants role actions on topic name.
func (s *Store) GrantTopicPermission(ctx context.Context, name topic.Name, role string, actions []string) error {
	_, err := s.UpdateNamespace(ctx, name.NamespaceName(), func(p *Policies) error {
		return GrantTopicPermission(p, name.NamespaceName(), name, role, actions)
	})
	return err
}

// RevokeTopicPermission removes role's grant on topic name;
// ErrNotGranted when it has none there.
func (s *Store) RevokeTopicPermission(ctx context.Context, name topic.Name, role string) error {
	_, err := s.UpdateNamespace(ctx, name.NamespaceName(), func(p *Policies) error {
		return RevokeTopicPermission(p, name.NamespaceName(), name, role)
	})
	return err
}

// GrantSubscriptionPermission sets the roles that may use subscription
// sub in namespace.
func (s *Store) GrantSubscriptionPermission(ctx context.Context, namespace, sub string, roles []string) error {
	_, err := s.UpdateNamespace(ctx, namespace, func(p *Policies) error {
		return GrantSubscriptionPermission(p, sub, roles)
	})
	return err
}

// RevokeSubscriptionPermission removes role from subscription sub's
// roles in namespace.
func (s *Store) RevokeSubscriptionPermission(ctx context.Context, namespace, sub, role string) error {
	_, err := s.UpdateNamespace(ctx, namespace, func(p *Policies) error {
		return RevokeSubscriptionPermission(p, sub, role)
	})
	return err
}
