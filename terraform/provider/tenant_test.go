package provider

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/isobar-mq/isobar/terraform/provider/client"
)

func TestAccTenant(t *testing.T) {
	f := accTest(t)
	c := admin(t, f, 1)
	p := providerBlock(f, "5s")
	cfg := func(body string) string { return p + body }
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			err := c.Get(context.Background(), "/admin/v2/tenants/tf-tenant", nil)
			if !client.IsNotFound(err) {
				return fmt.Errorf("tenant tf-tenant after destroy: %v, want not found", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				// Roles in another order than the server keeps them: a
				// set, so no diff.
				Config: cfg(`
resource "isobar_tenant" "t" {
  name             = "tf-tenant"
  admin_roles      = ["zed", "alice"]
  allowed_clusters = ["eu-west", "us-east"]
}
data "isobar_tenant" "t" {
  name = isobar_tenant.t.name
}`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_tenant.t", "id", "tf-tenant"),
					resource.TestCheckTypeSetElemAttr("isobar_tenant.t", "admin_roles.*", "alice"),
					resource.TestCheckTypeSetElemAttr("isobar_tenant.t", "admin_roles.*", "zed"),
					resource.TestCheckResourceAttr("isobar_tenant.t", "allowed_clusters.#", "2"),
					resource.TestCheckResourceAttr("data.isobar_tenant.t", "allowed_clusters.#", "2"),
					resource.TestCheckTypeSetElemAttr("data.isobar_tenant.t", "admin_roles.*", "zed"),
				),
			},
			{
				ResourceName:      "isobar_tenant.t",
				ImportState:       true,
				ImportStateId:     "tf-tenant",
				ImportStateVerify: true,
			},
			{
				// Update in place.
				Config: cfg(`
resource "isobar_tenant" "t" {
  name             = "tf-tenant"
  admin_roles      = ["alice"]
  allowed_clusters = ["us-east", "eu-west", "ap-south"]
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_tenant.t", plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_tenant.t", "admin_roles.#", "1"),
					resource.TestCheckResourceAttr("isobar_tenant.t", "allowed_clusters.#", "3"),
				),
			},
			{
				// Drift: a role added out of band is planned away.
				PreConfig: func() {
					do(t, c, http.MethodPost, "/admin/v2/tenants/tf-tenant", map[string]any{
						"adminRoles": []string{"alice", "mallory"}, "allowedClusters": []string{"ap-south", "eu-west", "us-east"}})
				},
				Config: cfg(`
resource "isobar_tenant" "t" {
  name             = "tf-tenant"
  admin_roles      = ["alice"]
  allowed_clusters = ["us-east", "eu-west", "ap-south"]
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_tenant.t", plancheck.ResourceActionUpdate),
				}},
				Check: resource.TestCheckResourceAttr("isobar_tenant.t", "admin_roles.#", "1"),
			},
			{
				// Deleted out of band: planned again.
				PreConfig: func() { do(t, c, http.MethodDelete, "/admin/v2/tenants/tf-tenant", nil) },
				Config: cfg(`
resource "isobar_tenant" "t" {
  name             = "tf-tenant"
  admin_roles      = ["alice"]
  allowed_clusters = ["us-east", "eu-west", "ap-south"]
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_tenant.t", plancheck.ResourceActionCreate),
				}},
			},
		},
	})
}

// Bad input: an invalid name is refused at plan time; an unknown cluster
// by the server, with its reason, and nothing is left behind.
func TestAccTenantBadInput(t *testing.T) {
	f := accTest(t)
	c := admin(t, f, 0)
	p := providerBlock(f, "5s")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config:      p + `resource "isobar_tenant" "t" { name = "bad/name" }`,
				ExpectError: regexp.MustCompile(`(?s)Invalid tenant name.*bad character '/'`),
			},
			{
				Config: p + `
resource "isobar_tenant" "t" {
  name             = "tf-bad"
  allowed_clusters = ["nowhere"]
}`,
				ExpectError: regexp.MustCompile(`(?s)Cannot create the tenant.*412.*nowhere`),
			},
			{
				// No partial state: the tenant does not exist.
				PreConfig: func() {
					if err := c.Get(context.Background(), "/admin/v2/tenants/tf-bad", nil); !client.IsNotFound(err) {
						t.Errorf("tenant tf-bad after a failed create: %v, want not found", err)
					}
				},
				Config: p + `resource "isobar_tenant" "t" { name = "tf-bad" }`,
			},
		},
	})
}
