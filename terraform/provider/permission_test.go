package provider

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// The provider's copies of the server's rules agree with the server's.
func TestPermissionRulesMatchServer(t *testing.T) {
	if !slices.Equal(authActions, policy.AuthActions) {
		t.Errorf("authActions %v, the server's %v", authActions, policy.AuthActions)
	}
	if maxRoleLen != policy.MaxRoleLen {
		t.Errorf("maxRoleLen %d, the server's %d", maxRoleLen, policy.MaxRoleLen)
	}
	for _, r := range []string{"alice", "a b", "CN=x,O=y", "", "a\x01", "a\u200b", string(make([]byte, 257))} {
		if got, want := validRole.check(r) == nil, policy.ValidRole(r) == nil; got != want {
			t.Errorf("role %q: provider %v, server %v", r, got, want)
		}
	}
}

func TestPermissionGrantFromID(t *testing.T) {
	for id, want := range map[string][3]string{
		"acme/app:billing":                           {"acme/app", "", "billing"},
		"acme/app:user:alice":                        {"acme/app", "", "user:alice"},
		"persistent://acme/app/orders:billing":       {"", "persistent://acme/app/orders", "billing"},
		"non-persistent://acme/app/orders:a/b:c":     {"", "non-persistent://acme/app/orders", "a/b:c"},
		"persistent://acme/app/orders-partition-1:r": {"", "persistent://acme/app/orders-partition-1", "r"},
	} {
		m, err := permissionGrantKind.fromID(id)
		if err != nil {
			t.Errorf("fromID(%q): %v", id, err)
			continue
		}
		if got := [3]string{m.Namespace.ValueString(), m.Topic.ValueString(), m.Role.ValueString()}; got != want {
			t.Errorf("fromID(%q) = %q, want %q", id, got, want)
		}
	}
	for _, bad := range []string{"", "acme/app", "acme/app:", "acme:r", "persistent://acme/app:r", "persistent://acme/app/orders", "persistent://acme/app/orders:", "pulsar://a/b/c:r"} {
		if m, err := permissionGrantKind.fromID(bad); err == nil {
			t.Errorf("fromID(%q) = %+v, want an error", bad, m)
		}
	}
}

func TestAccPermissionGrant(t *testing.T) {
	f := accTest(t)
	c := admin(t, f, 0)
	p := providerBlock(f, "5s")
	base := p + `
resource "isobar_tenant" "t" {
  name = "tf-perm"
}
resource "isobar_namespace" "ns" {
  tenant = isobar_tenant.t.name
  name   = "ns"
}
`
	cfg := func(nsActions, topicActions string) string {
		return base + `
resource "isobar_permission_grant" "ns" {
  namespace = isobar_namespace.ns.id
  role      = "reader"
  actions   = ` + nsActions + `
}
resource "isobar_permission_grant" "topic" {
  topic   = "persistent://${isobar_namespace.ns.id}/orders"
  role    = "reader"
  actions = ` + topicActions + `
}
`
	}
	nsPerms := func() map[string][]string {
		t.Helper()
		var m map[string][]string
		if err := c.Get(context.Background(), "/admin/v2/namespaces/tf-perm/ns/permissions", &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config: base + `
resource "isobar_permission_grant" "bad" {
  namespace = isobar_namespace.ns.id
  role      = "r"
  actions   = ["produce", "superuser"]
}`,
				ExpectError: regexp.MustCompile(`(?s)Invalid action.*"superuser" is not an action`),
			},
			{
				Config: base + `
resource "isobar_permission_grant" "bad" {
  namespace = isobar_namespace.ns.id
  topic     = "persistent://tf-perm/ns/t"
  role      = "r"
  actions   = ["produce"]
}`,
				ExpectError: regexp.MustCompile(`Give exactly one of namespace and topic`),
			},
			{
				// An unknown namespace: the server's reason, nothing stored.
				Config: base + `
resource "isobar_permission_grant" "bad" {
  namespace = "tf-perm/missing"
  role      = "r"
  actions   = ["produce"]
}`,
				ExpectError: regexp.MustCompile(`(?s)Cannot create the permission_grant.*404 Not Found.*tf-perm/missing`),
			},
			{
				PreConfig: func() {
					var pol map[string]any
					if err := c.Get(context.Background(), "/admin/v2/namespaces/tf-perm/missing", &pol); err == nil {
						t.Errorf("a refused grant created its namespace: %v", pol)
					}
					if m := nsPerms(); len(m) != 0 {
						t.Errorf("grants after refused ones: %v", m)
					}
				},
				Config: cfg(`["produce", "consume"]`, `["functions"]`) + `
data "isobar_permission_grant" "topic" {
  topic = isobar_permission_grant.topic.topic
  role  = "reader"
}`,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_permission_grant.ns", "id", "tf-perm/ns:reader"),
					resource.TestCheckResourceAttr("isobar_permission_grant.ns", "actions.#", "2"),
					resource.TestCheckResourceAttr("isobar_permission_grant.topic", "id", "persistent://tf-perm/ns/orders:reader"),
					resource.TestCheckTypeSetElemAttr("data.isobar_permission_grant.topic", "actions.*", "functions"),
					resource.TestCheckResourceAttr("data.isobar_permission_grant.topic", "actions.#", "1"),
				),
			},
			{
				// Order does not matter; another role's grant made out of
				// band is left alone.
				PreConfig: func() {
					do(t, c, http.MethodPost, "/admin/v2/namespaces/tf-perm/ns/permissions/other", []string{"produce"})
				},
				Config:           cfg(`["consume", "produce", "consume"]`, `["functions"]`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				Config: cfg(`["consume"]`, `["functions", "produce"]`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_permission_grant.ns", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("isobar_permission_grant.topic", plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_permission_grant.ns", "actions.#", "1"),
					resource.TestCheckResourceAttr("isobar_permission_grant.topic", "actions.#", "2"),
				),
			},
			{
				PreConfig: func() {
					if m := nsPerms(); !slices.Equal(m["other"], []string{"produce"}) {
						t.Errorf("the grant made out of band: %v", m)
					}
				},
				ResourceName: "isobar_permission_grant.ns", ImportState: true, ImportStateId: "tf-perm/ns:reader", ImportStateVerify: true,
			},
			{
				ResourceName: "isobar_permission_grant.topic", ImportState: true, ImportStateId: "persistent://tf-perm/ns/orders:reader", ImportStateVerify: true,
			},
			{
				ResourceName: "isobar_permission_grant.topic", ImportState: true, ImportStateId: "persistent://tf-perm/ns/orders:nobody",
				ExpectError: regexp.MustCompile(`(?s)Cannot import the permission_grant.*nobody has no grant\s+of its own`),
			},
			{
				// Changed out of band: the plan puts it back.
				PreConfig: func() {
					do(t, c, http.MethodPost, "/admin/v2/namespaces/tf-perm/ns/permissions/reader", []string{"sinks"})
				},
				Config: cfg(`["consume"]`, `["functions", "produce"]`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_permission_grant.ns", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("isobar_permission_grant.topic", plancheck.ResourceActionNoop),
				}},
			},
			{
				// Revoked out of band: made again.
				PreConfig: func() {
					do(t, c, http.MethodDelete, "/admin/v2/persistent/tf-perm/ns/orders/permissions/reader", nil)
				},
				Config: cfg(`["consume"]`, `["functions", "produce"]`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_permission_grant.topic", plancheck.ResourceActionCreate),
				}},
			},
		},
	})
}
