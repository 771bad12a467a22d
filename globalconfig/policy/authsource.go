package policy

import (
	"context"
	"errors"

	"github.com/isobar-mq/isobar/topic"
)

// AuthSource answers authorization's questions (auth.PolicySource) from
// the store: tenants' admin roles and the grants in namespaces' policies.
// An unknown tenant or namespace has no admins and grants nothing.
type AuthSource struct{ Store *Store }

// TenantAdminRoles are the tenant's adminRoles.
func (a AuthSource) TenantAdminRoles(ctx context.Context, tenant string) ([]string, error) {
	ti, err := a.Store.Tenant(ctx, tenant)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return ti.AdminRoles, err
}

func (a AuthSource) policies(ctx context.Context, namespace string) (*Policies, error) {
	p, err := a.Store.Namespace(ctx, namespace)
	if errors.Is(err, ErrNotFound) {
		return &Policies{}, nil
	}
	return p, err
}

// NamespacePermissions are the namespace's grants, role → actions.
func (a AuthSource) NamespacePermissions(ctx context.Context, namespace string) (map[string][]string, error) {
	p, err := a.policies(ctx, namespace)
	if err != nil {
		return nil, err
	}
	return NamespacePermissions(p), nil
}

// TopicPermissions are the grants on a topic: its namespace's merged with
// its own (and, for a partition, its partitioned topic's).
func (a AuthSource) TopicPermissions(ctx context.Context, t topic.Name) (map[string][]string, error) {
	p, err := a.policies(ctx, t.NamespaceName())
	if err != nil {
		return nil, err
	}
	return TopicPermissions(p, t), nil
}

// SubscriptionAuthMode is the namespace's subscription auth mode ("None"
// when not set).
func (a AuthSource) SubscriptionAuthMode(ctx context.Context, namespace string) (string, error) {
	p, err := a.policies(ctx, namespace)
	if err != nil {
		return "", err
	}
	return p.AuthMode(), nil
}

// SubscriptionRoles are the roles a namespace allows on a subscription,
// when it restricts it.
func (a AuthSource) SubscriptionRoles(ctx context.Context, namespace, subscription string) ([]string, bool, error) {
	p, err := a.policies(ctx, namespace)
	if err != nil {
		return nil, false, err
	}
	roles, ok := SubscriptionPermissions(p)[subscription]
	return roles, ok, nil
}
