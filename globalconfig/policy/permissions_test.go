package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
)

func TestValidRole(t *testing.T) {
	for _, tt := range []struct {
		role string
		ok   bool
	}{
		{"alice", true},
		{"my.role.*", true},
		{"CN=client,O=acme", true},
		{"user name", true},
		{"rôle", true},
		{strings.Repeat("r", policy.MaxRoleLen), true},
		{"", false},
		{strings.Repeat("r", policy.MaxRoleLen+1), false},
		{"a\nb", false},
		{"a\x00b", false},
		{"a\u200bb", false}, // zero-width space: not printable
		{"\xff", false},
	} {
		err := policy.ValidRole(tt.role)
		if (err == nil) != tt.ok {
			t.Errorf("ValidRole(%q) = %v, want ok=%v", tt.role, err, tt.ok)
		}
		if err != nil && errkind.HTTPStatusOf(err) != 400 {
			t.Errorf("ValidRole(%q): status %d, want 400", tt.role, errkind.HTTPStatusOf(err))
		}
	}
}

// decodeTests are bodies of POST .../permissions/{role}.
var decodeTests = []struct {
	body string
	want []string
}{
	{`["produce","consume"]`, []string{"consume", "produce"}},
	{` ["consume","consume","produce","consume"] `, []string{"consume", "produce"}},
	{`["functions","sources","sinks","packages"]`, []string{"functions", "packages", "sinks", "sources"}},
	{`[]`, nil},
	{`null`, nil},
	{``, nil},
	{`["Produce"]`, nil},
	{`["superuser"]`, nil},
	{`["produce"] x`, nil},
	{`"produce"`, nil},
	{`[1]`, nil},
	{`{"produce":true}`, nil},
}

func TestDecodeActions(t *testing.T) {
	for _, tt := range decodeTests {
		got, err := policy.DecodeActions([]byte(tt.body))
		if tt.want == nil {
			if err == nil || !errors.Is(err, policy.ErrBadGrant) {
				t.Errorf("DecodeActions(%q) = %v, %v; want ErrBadGrant", tt.body, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("DecodeActions(%q) = %v, %v; want %v", tt.body, got, err, tt.want)
		}
	}
	roles, err := policy.DecodeRoles([]byte(`["bob","alice","bob"]`))
	if err != nil || !slices.Equal(roles, []string{"alice", "bob"}) {
		t.Errorf("DecodeRoles = %v, %v", roles, err)
	}
	for _, bad := range []string{`[]`, `[""]`, `["a\u0001"]`, `null`, `["a"]]`} {
		if _, err := policy.DecodeRoles([]byte(bad)); !errors.Is(err, policy.ErrBadGrant) {
			t.Errorf("DecodeRoles(%q) = %v, want ErrBadGrant", bad, err)
		}
	}
}

// FuzzDecodePermissions checks the decoders of grant bodies: what they
// accept is canonical (sorted, no duplicates, at least one), every action
// known and every role valid; what they refuse is a 400.
func FuzzDecodePermissions(f *testing.F) {
	for _, tt := range decodeTests {
		f.Add([]byte(tt.body))
	}
	f.Add([]byte(`["alice","my.role.*"]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(name string, got []string, err error, valid func(string) bool) {
			if err != nil {
				if errkind.HTTPStatusOf(err) != 400 && errkind.HTTPStatusOf(err) != 412 {
					t.Fatalf("%s(%q): %v: status %d", name, b, err, errkind.HTTPStatusOf(err))
				}
				return
			}
			if len(got) == 0 || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
				t.Fatalf("%s(%q) = %q: not canonical", name, b, got)
			}
			for _, s := range got {
				if !valid(s) {
					t.Fatalf("%s(%q) = %q: %q is not valid", name, b, got, s)
				}
			}
		}
		as, err := policy.DecodeActions(b)
		check("DecodeActions", as, err, func(s string) bool { return slices.Contains(policy.AuthActions, s) })
		rs, err := policy.DecodeRoles(b)
		check("DecodeRoles", rs, err, func(s string) bool { return policy.ValidRole(s) == nil })
	})
}

func TestPermissionsPure(t *testing.T) {
	p := &policy.Policies{}
	must(t, policy.GrantNamespacePermission(p, "ns-reader", []string{"consume"}))
	must(t, policy.GrantNamespacePermission(p, "both", []string{"consume"}))
	orders := mustName(t, "persistent://acme/app/orders")
	part := mustName(t, "persistent://acme/app/orders-partition-1")
	other := mustName(t, "persistent://acme/app/other")
	must(t, policy.GrantTopicPermission(p, "acme/app", orders, "both", []string{"produce", "produce"}))
	must(t, policy.GrantTopicPermission(p, "acme/app", orders, "writer", []string{"produce"}))
	must(t, policy.GrantTopicPermission(p, "acme/app", part, "part-only", []string{"consume"}))

	want := map[string][]string{"ns-reader": {"consume"}, "both": {"consume", "produce"}, "writer": {"produce"}}
	if got := policy.TopicPermissions(p, orders); !reflect.DeepEqual(got, want) {
		t.Errorf("TopicPermissions(orders) = %v, want %v", got, want)
	}
	want["part-only"] = []string{"consume"}
	if got := policy.TopicPermissions(p, part); !reflect.DeepEqual(got, want) {
		t.Errorf("TopicPermissions(partition) = %v, want %v", got, want)
	}
	if got := policy.TopicPermissions(p, other); !reflect.DeepEqual(got, map[string][]string{"ns-reader": {"consume"}, "both": {"consume"}}) {
		t.Errorf("TopicPermissions(other) = %v", got)
	}
	if !policy.Permitted(p, part, "writer", "produce") || policy.Permitted(p, other, "writer", "produce") {
		t.Error("Permitted: the partition inherits its topic's grant, another topic does not")
	}
	// The lookup's answer is the caller's.
	policy.TopicPermissions(p, orders)["both"][0] = "x"
	if policy.NamespacePermissions(p)["both"][0] != "consume" {
		t.Error("TopicPermissions shares its slices with the policies")
	}

	// Grants replace the role's actions; errors change nothing.
	before := p.Clone()
	for _, bad := range []error{
		policy.GrantNamespacePermission(p, "", []string{"consume"}),
		policy.GrantNamespacePermission(p, "x", nil),
		policy.GrantNamespacePermission(p, "both", []string{"admin"}),
		policy.GrantTopicPermission(p, "acme/other", orders, "x", []string{"produce"}),
		policy.GrantSubscriptionPermission(p, "a/b", []string{"x"}),
		policy.GrantSubscriptionPermission(p, "sub", nil),
	} {
		if bad == nil {
			t.Fatal("a bad grant was accepted")
		}
	}
	if !reflect.DeepEqual(p, before) {
		t.Fatalf("refused grants changed the policies:\n%+v\n%+v", p.AuthPolicies, before.AuthPolicies)
	}

	// Revoking: a topic grant on the partitioned topic goes from its
	// partitions too; one that was never made is ErrNotGranted.
	must(t, policy.GrantTopicPermission(p, "acme/app", part, "writer", []string{"consume"}))
	must(t, policy.RevokeTopicPermission(p, "acme/app", orders, "writer"))
	if got := policy.TopicPermissions(p, part)["writer"]; got != nil {
		t.Errorf("writer on the partition after revoking on the topic: %v", got)
	}
	err := policy.RevokeTopicPermission(p, "acme/app", orders, "ns-reader")
	if !errors.Is(err, policy.ErrNotGranted) || errkind.HTTPStatusOf(err) != 412 {
		t.Errorf("revoke a namespace grant on a topic: %v", err)
	}
	if !policy.RevokeNamespacePermission(p, "ns-reader") || policy.RevokeNamespacePermission(p, "ns-reader") {
		t.Error("RevokeNamespacePermission: want true, then false")
	}

	must(t, policy.GrantSubscriptionPermission(p, "audit", []string{"b", "a", "b"}))
	if got := policy.SubscriptionPermissions(p); !reflect.DeepEqual(got, map[string][]string{"audit": {"a", "b"}}) {
		t.Errorf("SubscriptionPermissions = %v", got)
	}
	must(t, policy.RevokeSubscriptionPermission(p, "audit", "a"))
	must(t, policy.RevokeSubscriptionPermission(p, "audit", "nobody"))
	must(t, policy.RevokeSubscriptionPermission(p, "audit", "b"))
	if err := policy.RevokeSubscriptionPermission(p, "audit", "b"); !errors.Is(err, policy.ErrNoSubscriptionGrant) || errkind.HTTPStatusOf(err) != 404 {
		t.Errorf("revoke on a subscription without roles: %v", err)
	}

	// Revoking everything leaves no auth_policies behind.
	policy.RevokeNamespacePermission(p, "both")
	must(t, policy.RevokeTopicPermission(p, "acme/app", orders, "both"))
	must(t, policy.RevokeTopicPermission(p, "acme/app", part, "part-only"))
	if p.AuthPolicies != nil {
		t.Errorf("after revoking every grant: %+v", p.AuthPolicies)
	}
}

func TestPermissionLimits(t *testing.T) {
	p := &policy.Policies{}
	for i := range policy.MaxGrantRoles {
		must(t, policy.GrantNamespacePermission(p, fmt.Sprint("r", i), []string{"consume"}))
	}
	must(t, policy.GrantNamespacePermission(p, "r0", []string{"produce"})) // a role that has one: replaced
	err := policy.GrantNamespacePermission(p, "one-more", []string{"consume"})
	if !errors.Is(err, policy.ErrInvalid) || !strings.Contains(err.Error(), "1000 roles") {
		t.Errorf("role 1001: %v", err)
	}
	q := &policy.Policies{}
	for i := range policy.MaxGrantTopics {
		must(t, policy.GrantTopicPermission(q, "a/b", mustName(t, fmt.Sprint("persistent://a/b/t", i)), "r", []string{"consume"}))
	}
	err = policy.GrantTopicPermission(q, "a/b", mustName(t, "persistent://a/b/more"), "r", []string{"consume"})
	if !errors.Is(err, policy.ErrInvalid) || !strings.Contains(err.Error(), "10000 topics") {
		t.Errorf("topic 10001: %v", err)
	}
}

// A namespace body may carry auth_policies: they are checked and stored
// canonically; bad ones are refused with the rest of the body.
func TestAuthPoliciesInBody(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, policy.Config{LocalCluster: "c"})
	must(t, s.CreateCluster(ctx, "c", policy.ClusterData{}))
	must(t, s.CreateTenant(ctx, "acme", policy.TenantInfo{}))
	var p policy.Policies
	must(t, json.Unmarshal([]byte(`{"auth_policies":{"namespace_auth":{"r":["produce","consume","produce"]},
		"destination_auth":{"persistent://acme/app/t":{"w":["produce"]}},"subscription_auth_roles":{"s":["b","a"],"open":[]}}}`), &p))
	must(t, s.CreateNamespace(ctx, "acme/app", &p))
	got, err := s.Namespace(ctx, "acme/app")
	must(t, err)
	b, _ := json.Marshal(got.AuthPolicies)
	if want := `{"namespace_auth":{"r":["consume","produce"]},"destination_auth":{"persistent://acme/app/t":{"w":["produce"]}},"subscription_auth_roles":{"s":["a","b"]}}`; string(b) != want {
		t.Errorf("stored auth_policies:\n%s\nwant\n%s", b, want)
	}
	for _, bad := range []string{
		`{"auth_policies":{"namespace_auth":{"r":["root"]}}}`,
		`{"auth_policies":{"namespace_auth":{"":["produce"]}}}`,
		`{"auth_policies":{"destination_auth":{"persistent://acme/other/t":{"w":["produce"]}}}}`,
		`{"auth_policies":{"destination_auth":{"t":{"w":["produce"]}}}}`,
		`{"auth_policies":{"subscription_auth_roles":{"a/b":["x"]}}}`,
	} {
		var p policy.Policies
		must(t, json.Unmarshal([]byte(bad), &p))
		wantErr(t, s.CreateNamespace(ctx, "acme/bad", &p), policy.ErrInvalid)
	}
	if _, err := s.Namespace(ctx, "acme/bad"); !errors.Is(err, policy.ErrNotFound) {
		t.Errorf("a refused namespace was stored: %v", err)
	}
}

// The store's grant operations go through the namespace's
// compare-and-swap update: concurrent grants of different roles all
// land, and a refused grant stores nothing.
func TestPermissionsStore(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, policy.Config{LocalCluster: "c"})
	must(t, s.CreateCluster(ctx, "c", policy.ClusterData{}))
	must(t, s.CreateTenant(ctx, "acme", policy.TenantInfo{}))
	must(t, s.CreateNamespace(ctx, "acme/app", nil))

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.GrantNamespacePermission(ctx, "acme/app", fmt.Sprint("role-", i), []string{"consume", "produce"})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	p, err := s.Namespace(ctx, "acme/app")
	must(t, err)
	if got := slices.Sorted(maps.Keys(policy.NamespacePermissions(p))); len(got) != 8 {
		t.Fatalf("after 8 concurrent grants: %v", got)
	}

	orders := mustName(t, "persistent://acme/app/orders")
	must(t, s.GrantTopicPermission(ctx, orders, "role-0", []string{"functions"}))
	must(t, s.GrantSubscriptionPermission(ctx, "acme/app", "audit", []string{"role-1"}))
	wantErr(t, s.GrantTopicPermission(ctx, orders, "role-0", []string{"nope"}), policy.ErrBadGrant)
	wantErr(t, s.GrantNamespacePermission(ctx, "acme/none", "r", []string{"consume"}), policy.ErrNotFound)
	wantErr(t, s.RevokeTopicPermission(ctx, orders, "role-1"), policy.ErrNotGranted)
	wantErr(t, s.RevokeSubscriptionPermission(ctx, "acme/app", "other", "role-1"), policy.ErrNoSubscriptionGrant)
	p2, err := s.Namespace(ctx, "acme/app")
	must(t, err)
	if got := policy.TopicPermissions(p2, orders)["role-0"]; !slices.Equal(got, []string{"consume", "functions", "produce"}) {
		t.Errorf("role-0 on orders: %v", got)
	}
	must(t, s.RevokeNamespacePermission(ctx, "acme/app", "role-0"))
	must(t, s.RevokeNamespacePermission(ctx, "acme/app", "role-0"))
	must(t, s.RevokeTopicPermission(ctx, orders, "role-0"))
	must(t, s.RevokeSubscriptionPermission(ctx, "acme/app", "audit", "role-1"))
	p3, err := s.Namespace(ctx, "acme/app")
	must(t, err)
	if _, ok := policy.TopicPermissions(p3, orders)["role-0"]; ok || len(policy.SubscriptionPermissions(p3)) != 0 {
		t.Errorf("after revoking: %+v", p3.AuthPolicies)
	}
}
