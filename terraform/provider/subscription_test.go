package provider

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
)

func TestAccSubscription(t *testing.T) {
	f := accTest(t)
	c := admin(t, f, 0)
	p := providerBlock(f, "5s")
	cfg := p + `
resource "isobar_tenant" "t" {
  name = "tf-sub"
}
resource "isobar_namespace" "ns" {
  tenant = isobar_tenant.t.name
  name   = "ns"
}
resource "isobar_topic" "t" {
  tenant     = isobar_namespace.ns.tenant
  namespace  = isobar_namespace.ns.name
  name       = "audit"
  partitions = 2
}
resource "isobar_subscription" "s" {
  topic            = isobar_topic.t.id
  name             = "auditor"
  initial_position = "earliest"
}
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config: p + `
resource "isobar_subscription" "bad" {
  topic = "tf-sub/ns/audit"
  name  = "x"
}`,
				ExpectError: regexp.MustCompile(`want a persistent topic's full name`),
			},
			{
				Config: cfg + `
data "isobar_subscription" "s" {
  topic = isobar_subscription.s.topic
  name  = isobar_subscription.s.name
}`,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_subscription.s", "id", "persistent://tf-sub/ns/audit/auditor"),
					resource.TestCheckResourceAttr("data.isobar_subscription.s", "name", "auditor"),
				),
			},
			{
				ResourceName: "isobar_subscription.s", ImportState: true, ImportStateId: "persistent://tf-sub/ns/audit/auditor",
				ImportStateVerify: true, ImportStateVerifyIgnore: []string{"initial_position"},
			},
			{
				// Deleted out of band: made again.
				PreConfig: func() {
					do(t, c, http.MethodDelete, "/admin/v2/persistent/tf-sub/ns/audit/subscription/auditor", nil)
				},
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_subscription.s", plancheck.ResourceActionCreate),
				}},
			},
		},
	})
}
