package provider

import (
	"context"
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
				// A subscription on a topic that does not exist is refused
				// (the server would make the topic, which nothing deletes).
				Config: p + `
resource "isobar_tenant" "t" {
  name = "tf-sub"
}
resource "isobar_namespace" "ns" {
  tenant = isobar_tenant.t.name
  name   = "ns"
}
resource "isobar_subscription" "s" {
  topic = "persistent://${isobar_namespace.ns.id}/missing"
  name  = "auditor"
}`,
				ExpectError: regexp.MustCompile(`(?s)Cannot create the subscription.*missing does not exist`),
			},
			{
				PreConfig: func() {
					var names []string
					if err := c.Get(context.Background(), "/admin/v2/persistent/tf-sub/ns", &names); err != nil || len(names) != 0 {
						t.Errorf("topics after a refused subscription: %v (%v), want none", names, err)
					}
				},
				Config: p + `
resource "isobar_tenant" "t" {
  name = "tf-sub"
}
data "isobar_namespace" "none" {
  tenant = isobar_tenant.t.name
  name   = "none"
}`,
				ExpectError: regexp.MustCompile(`(?s)Cannot read the namespace.*404 Not Found`),
			},
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
				ResourceName: "isobar_subscription.s", ImportState: true, ImportStateId: "persistent://tf-sub/ns/audit/nobody",
				ExpectError: regexp.MustCompile(`(?s)Cannot import the subscription.*nobody does not exist`),
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
