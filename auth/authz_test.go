package auth

import (
	"context"
	"errors"
	"testing"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/topic"
)

// grants is an in-memory PolicySource for the decision table.
type grants struct {
	admins map[string][]string            // tenant -> admin roles
	ns     map[string]map[string][]string // namespace -> role -> actions
	topics map[string]map[string][]string // topic -> role -> actions
	subs   map[string][]string            // "ns/sub" -> roles
	modes  map[string]string              // namespace -> subscription auth mode
}

func (g grants) TenantAdminRoles(_ context.Context, tenant string) ([]string, error) {
	return g.admins[tenant], nil
}

func (g grants) NamespacePermissions(_ context.Context, ns string) (map[string][]string, error) {
	return g.ns[ns], nil
}

func (g grants) TopicPermissions(_ context.Context, t topic.Name) (map[string][]string, error) {
	out := map[string][]string{}
	for r, a := range g.ns[t.NamespaceName()] {
		out[r] = append(out[r], a...)
	}
	for r, a := range g.topics[t.String()] {
		out[r] = append(out[r], a...)
	}
	return out, nil
}

func (g grants) SubscriptionRoles(_ context.Context, ns, sub string) ([]string, bool, error) {
	r, ok := g.subs[ns+"/"+sub]
	return r, ok, nil
}

func (g grants) SubscriptionAuthMode(_ context.Context, ns string) (string, error) {
	return g.modes[ns], nil
}

// TestAuthorizationTable decides every operation for every kind of role.
func TestAuthorizationTable(t *testing.T) {
	srv, err := NewServer(Config{AuthenticationEnabled: true, AuthorizationEnabled: true,
		Token: TokenConfig{SecretKey: "data:;base64,AAAA"}, SuperUserRoles: []string{"root"}})
	if err != nil {
		t.Fatal(err)
	}
	src := grants{
		admins: map[string][]string{"acme": {"acme-admin"}, "other": {"other-admin"}},
		ns:     map[string]map[string][]string{"acme/app": {"writer": {"produce"}, "reader": {"consume"}}},
		topics: map[string]map[string][]string{"persistent://acme/app/special": {"special": {"produce", "consume"}}},
		subs:   map[string][]string{"acme/app/locked": {"reader2"}},
	}
	src.ns["acme/app"]["reader2"] = []string{"consume"}
	a := NewAuthorizer(srv, src)
	ctx := context.Background()
	tp, _ := topic.Parse("persistent://acme/app/orders")
	part, _ := topic.Parse("persistent://acme/app/special-partition-3")
	special, _ := topic.Parse("persistent://acme/app/special")

	type op struct {
		name string
		do   func(role string) error
	}
	ops := []op{
		{"produce", func(r string) error { return a.Produce(ctx, r, tp) }},
		{"consume", func(r string) error { return a.Consume(ctx, r, tp, "s") }},
		{"consume locked", func(r string) error { return a.Consume(ctx, r, tp, "locked") }},
		{"lookup", func(r string) error { return a.Lookup(ctx, r, tp) }},
		{"produce special partition", func(r string) error { return a.Produce(ctx, r, part) }},
		{"consume special", func(r string) error { return a.Consume(ctx, r, special, "s") }},
		{"list topics", func(r string) error { return a.ListTopics(ctx, r, "acme", "app") }},
		{"tenant admin", func(r string) error { return a.TenantAdmin(ctx, r, "acme", "manage") }},
		{"superuser", func(r string) error { return a.SuperUser(r, "create tenants") }},
	}
	// allowed[role] lists the operations the role may do; every other is refused.
	allowed := map[string][]string{
		"":            nil,
		"nobody":      nil,
		"root":        {"produce", "consume", "consume locked", "lookup", "produce special partition", "consume special", "list topics", "tenant admin", "superuser"},
		"acme-admin":  {"produce", "consume", "consume locked", "lookup", "produce special partition", "consume special", "list topics", "tenant admin"},
		"other-admin": nil,
		"writer":      {"produce", "lookup", "produce special partition"},
		"reader":      {"consume", "lookup", "consume special", "list topics"},
		"reader2":     {"consume", "consume locked", "lookup", "consume special", "list topics"},
		"special":     {"produce special partition", "consume special"},
	}
	for role, ok := range allowed {
		for _, o := range ops {
			err := o.do(role)
			want := false
			for _, n := range ok {
				want = want || n == o.name
			}
			if want && err != nil {
				t.Errorf("role %q %s: refused: %v", role, o.name, err)
			}
			if !want && !errors.Is(err, errkind.ErrAuthorization) {
				t.Errorf("role %q %s: %v, want AuthorizationError", role, o.name, err)
			}
		}
	}
	// With authorization off, everything is allowed.
	off, _ := NewServer(Config{})
	b := NewAuthorizer(off, src)
	if b.Produce(ctx, "", tp) != nil || b.SuperUser("", "x") != nil || b.ListTopics(ctx, "", "acme", "app") != nil {
		t.Fatal("authorization off refused something")
	}
}
