package auth

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/topic"
)

// Actions a role may be granted on a namespace or a topic (Pulsar's
// AuthAction names).
const (
	ActionProduce = "produce"
	ActionConsume = "consume"
)

// PolicySource is what authorization reads from the configuration store.
type PolicySource interface {
	// TenantAdminRoles are a tenant's admin roles (its adminRoles); an
	// unknown tenant has none.
	TenantAdminRoles(ctx context.Context, tenant string) ([]string, error)
	// TopicPermissions are the actions granted per role on a topic: its
	// namespace's grants merged with the topic's own.
	TopicPermissions(ctx context.Context, t topic.Name) (map[string][]string, error)
	// NamespacePermissions are the actions granted per role on a
	// namespace ("tenant/namespace").
	NamespacePermissions(ctx context.Context, namespace string) (map[string][]string, error)
	// SubscriptionRoles are the roles allowed on a subscription of a
	// namespace, when the namespace restricts it (ok false: any role with
	// consume permission may use it).
	SubscriptionRoles(ctx context.Context, namespace, subscription string) (roles []string, ok bool, err error)
	// SubscriptionAuthMode is a namespace's subscription auth mode:
	// SubscriptionAuthPrefix requires a role's subscription names to start
	// with the role; anything else ("None", "") puts no rule on them.
	SubscriptionAuthMode(ctx context.Context, namespace string) (string, error)
}

// SubscriptionAuthPrefix is the subscription auth mode that requires
// subscription names to start with the role (Pulsar's Prefix).
const SubscriptionAuthPrefix = "Prefix"

// Authorizer decides what an authenticated role may do, as Pulsar's
// default authorization provider does: superusers may do anything, a
// tenant's admin roles anything within it, and other roles what they
// were granted on a namespace or topic. A nil *Authorizer, or one whose
// server has authorization off, allows everything.
type Authorizer struct {
	srv *Server
	src PolicySource
}

// NewAuthorizer checks roles against src with srv's superusers.
func NewAuthorizer(srv *Server, src PolicySource) *Authorizer {
	return &Authorizer{srv: srv, src: src}
}

// Enabled reports whether operations are checked.
func (a *Authorizer) Enabled() bool { return a != nil && a.srv.AuthorizationEnabled() }

// refuse is the error of a refused operation.
func refuse(role, what string) error {
	if role == "" {
		return fmt.Errorf("%w: anonymous peer may not %s", errkind.ErrAuthorization, what)
	}
	return fmt.Errorf("%w: role %q may not %s", errkind.ErrAuthorization, role, what)
}

// SuperUser allows only superusers.
func (a *Authorizer) SuperUser(role, what string) error {
	if !a.Enabled() || a.srv.IsSuperUser(role) {
		return nil
	}
	return refuse(role, what+" (superusers only)")
}

// TenantAdmin allows superusers and the tenant's admin roles.
func (a *Authorizer) TenantAdmin(ctx context.Context, role, tenant, what string) error {
	if !a.Enabled() || a.srv.IsSuperUser(role) {
		return nil
	}
	ok, err := a.isTenantAdmin(ctx, role, tenant)
	if err != nil {
		return err
	}
	if !ok {
		return refuse(role, fmt.Sprintf("%s (tenant %s's admin roles and superusers only)", what, tenant))
	}
	return nil
}

func (a *Authorizer) isTenantAdmin(ctx context.Context, role, tenant string) (bool, error) {
	roles, err := a.src.TenantAdminRoles(ctx, tenant)
	if err != nil {
		return false, err
	}
	return role != "" && slices.Contains(roles, role), nil
}

// has reports whether role holds action on t (superusers and tenant
// admins hold every action).
func (a *Authorizer) has(ctx context.Context, role string, t topic.Name, action string) (bool, error) {
	if a.srv.IsSuperUser(role) {
		return true, nil
	}
	if ok, err := a.isTenantAdmin(ctx, role, t.Tenant); err != nil || ok {
		return ok, err
	}
	if role == "" {
		return false, nil
	}
	// A partition has its partitioned topic's grants.
	perms, err := a.src.TopicPermissions(ctx, t.Base())
	if err != nil {
		return false, err
	}
	return slices.Contains(perms[role], action), nil
}

// Produce allows publishing to t.
func (a *Authorizer) Produce(ctx context.Context, role string, t topic.Name) error {
	if !a.Enabled() {
		return nil
	}
	ok, err := a.has(ctx, role, t, ActionProduce)
	if err != nil {
		return err
	}
	if !ok {
		return refuse(role, "produce to "+t.String())
	}
	return nil
}

// Consume allows subscribing to t as subscription (empty: any
// subscription, e.g. for reading stats); a namespace may restrict a
// subscription to some roles (Pulsar's subscription permissions), and,
// with the subscription auth mode Prefix, requires every role but the
// superusers (tenant admins included, as in Pulsar) to use subscription
// names starting with the role.
func (a *Authorizer) Consume(ctx context.Context, role string, t topic.Name, subscription string) error {
	if !a.Enabled() {
		return nil
	}
	if subscription != "" && !a.srv.IsSuperUser(role) && !strings.HasPrefix(subscription, role) {
		mode, err := a.src.SubscriptionAuthMode(ctx, t.NamespaceName())
		if err != nil {
			return err
		}
		if mode == SubscriptionAuthPrefix {
			// Pulsar's message; its check, too, is a plain prefix.
			return fmt.Errorf("%w: Failed to create consumer - The subscription name needs to be prefixed by the authentication role, like %s-xxxx for topic: %s", errkind.ErrAuthorization, role, t)
		}
	}
	ok, err := a.has(ctx, role, t, ActionConsume)
	if err != nil {
		return err
	}
	if !ok {
		return refuse(role, "consume from "+t.String())
	}
	if subscription == "" || a.srv.IsSuperUser(role) {
		return nil
	}
	if admin, err := a.isTenantAdmin(ctx, role, t.Tenant); err != nil || admin {
		return err
	}
	roles, restricted, err := a.src.SubscriptionRoles(ctx, t.NamespaceName(), subscription)
	if err != nil {
		return err
	}
	if restricted && !slices.Contains(roles, role) {
		return refuse(role, fmt.Sprintf("use subscription %q of %s (its namespace limits it to other roles)", subscription, t))
	}
	return nil
}

// Lookup allows looking t up (and reading its partitioned metadata): any
// role that may produce to it or consume from it.
func (a *Authorizer) Lookup(ctx context.Context, role string, t topic.Name) error {
	if !a.Enabled() {
		return nil
	}
	for _, action := range []string{ActionProduce, ActionConsume} {
		ok, err := a.has(ctx, role, t, action)
		if err != nil || ok {
			return err
		}
	}
	return refuse(role, "look up "+t.String()+" (needs produce or consume permission)")
}

// ListTopics allows listing a namespace's topics (pattern consumers do):
// tenant admins, and roles granted consume on the namespace itself.
func (a *Authorizer) ListTopics(ctx context.Context, role, tenant, namespace string) error {
	if !a.Enabled() || a.srv.IsSuperUser(role) {
		return nil
	}
	if ok, err := a.isTenantAdmin(ctx, role, tenant); err != nil || ok {
		return err
	}
	perms, err := a.src.NamespacePermissions(ctx, tenant+"/"+namespace)
	if err != nil {
		return err
	}
	if role != "" && slices.Contains(perms[role], ActionConsume) {
		return nil
	}
	return refuse(role, "list the topics of "+tenant+"/"+namespace+" (needs consume permission on the namespace)")
}
