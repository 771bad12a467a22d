package provider

import (
	"context"
	"net/http"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// TestAccPermissions: isobar_permissions owns a namespace's and a topic's
// whole access list: created, read back, a role granted out of band shows
// as drift and is revoked by the next apply, a role revoked out of band
// is granted again; import plans nothing; bad roles and actions are
// refused at plan time; destroy revokes every grant.
func TestAccPermissions(t *testing.T) {
	f := accTest(t)
	c := admin(t, f, 0)
	p := providerBlock(f, "5s")
	base := p + `
resource "isobar_tenant" "t" {
  name = "tf-perms"
}
resource "isobar_namespace" "ns" {
  tenant = isobar_tenant.t.name
  name   = "ns"
}
`
	cfg := base + `
resource "isobar_permissions" "ns" {
  namespace = isobar_namespace.ns.id
  grants = {
    "app"     = ["produce", "consume"]
    "auditor" = ["consume"]
  }
}
resource "isobar_permissions" "topic" {
  topic  = "persistent://${isobar_namespace.ns.id}/orders"
  grants = { "billing" = ["consume"] }
}
`
	grants := func(path string) map[string][]string {
		t.Helper()
		var out map[string][]string
		if err := c.Get(context.Background(), path, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config: base + `
resource "isobar_permissions" "bad" {
  namespace = isobar_namespace.ns.id
  grants    = { "app" = ["publish"] }
}`,
				ExpectError: regexp.MustCompile(`(?s)Invalid action.*"publish" is not an action`),
			},
			{
				Config: cfg,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_permissions.ns", "id", "tf-perms/ns"),
					resource.TestCheckResourceAttr("isobar_permissions.ns", "grants.app.#", "2"),
					func(*terraform.State) error {
						if g := grants("/admin/v2/namespaces/tf-perms/ns/permissions"); len(g) != 2 || len(g["app"]) != 2 || len(g["auditor"]) != 1 {
							t.Errorf("namespace grants %v", g)
						}
						return nil
					},
				),
			},
			{
				ResourceName: "isobar_permissions.ns", ImportState: true, ImportStateKind: resource.ImportBlockWithID,
				ImportStateId: "tf-perms/ns", Config: cfg,
			},
			{
				ResourceName: "isobar_permissions.topic", ImportState: true, ImportStateKind: resource.ImportBlockWithID,
				ImportStateId: "persistent://tf-perms/ns/orders", Config: cfg,
			},
			{
				// A role granted out of band, another revoked: drift, and
				// the apply makes the list exactly the configuration's.
				PreConfig: func() {
					do(t, admin(t, f, 1), http.MethodPost, "/admin/v2/namespaces/tf-perms/ns/permissions/intruder", []string{"produce"})
					do(t, c, http.MethodDelete, "/admin/v2/namespaces/tf-perms/ns/permissions/auditor", nil)
				},
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_permissions.ns", plancheck.ResourceActionUpdate),
				}},
				Check: func(*terraform.State) error {
					g := grants("/admin/v2/namespaces/tf-perms/ns/permissions")
					if _, ok := g["intruder"]; ok || len(g["auditor"]) != 1 || len(g) != 2 {
						t.Errorf("namespace grants after the apply: %v", g)
					}
					return nil
				},
			},
			{
				// Removing the resources revokes their grants.
				Config: base,
				Check: func(*terraform.State) error {
					if g := grants("/admin/v2/namespaces/tf-perms/ns/permissions"); len(g) != 0 {
						t.Errorf("namespace grants after the resource went: %v", g)
					}
					return nil
				},
			},
		},
	})
}
