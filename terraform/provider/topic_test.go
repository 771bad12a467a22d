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
)

const topicBase = `
resource "isobar_tenant" "t" {
  name             = "tf-topic"
  allowed_clusters = ["us-east", "eu-west", "ap-south"]
}
resource "isobar_namespace" "ns" {
  tenant               = isobar_tenant.t.name
  name                 = "ns"
  replication_clusters = ["us-east", "eu-west", "ap-south"]
}
`

func topics(events int, plain string) string {
	return topicBase + fmt.Sprintf(`
resource "isobar_topic" "events" {
  tenant     = isobar_namespace.ns.tenant
  namespace  = isobar_namespace.ns.name
  name       = "events"
  partitions = %d
}
resource "isobar_topic" "plain" {
  tenant    = isobar_namespace.ns.tenant
  namespace = isobar_namespace.ns.name
  name      = "plain"
  %s
}
`, events, plain)
}

func TestAccTopic(t *testing.T) {
	f := accTest(t)
	c := admin(t, f, 1)
	p := providerBlock(f, "5s")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			var names []string
			err := c.Get(context.Background(), "/admin/v2/persistent/tf-topic/ns/partitioned", &names)
			if err == nil && len(names) > 0 {
				return fmt.Errorf("partitioned topics after destroy: %v", names)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: p + topics(2, `replication_clusters = ["eu-west", "us-east"]
  primary_region = "us-east"`) + `
data "isobar_topic" "plain" {
  tenant    = isobar_topic.plain.tenant
  namespace = isobar_topic.plain.namespace
  name      = isobar_topic.plain.name
}`,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_topic.events", "id", "persistent://tf-topic/ns/events"),
					resource.TestCheckResourceAttr("isobar_topic.events", "partitions", "2"),
					resource.TestCheckResourceAttr("isobar_topic.plain", "partitions", "0"),
					resource.TestCheckResourceAttr("data.isobar_topic.plain", "primary_region", "us-east"),
					resource.TestCheckResourceAttr("data.isobar_topic.plain", "replication_clusters.#", "2"),
				),
			},
			{ResourceName: "isobar_topic.events", ImportState: true, ImportStateId: "persistent://tf-topic/ns/events", ImportStateVerify: true},
			{ResourceName: "isobar_topic.plain", ImportState: true, ImportStateId: "persistent://tf-topic/ns/plain", ImportStateVerify: true},
			{
				// More partitions in place; the topic fails over to ap-south,
				// which it did not replicate to.
				Config: p + topics(4, `replication_clusters = ["eu-west", "ap-south"]
  primary_region = "ap-south"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_topic.events", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("isobar_topic.plain", plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_topic.events", "partitions", "4"),
					resource.TestCheckResourceAttr("isobar_topic.plain", "primary_region", "ap-south"),
				),
			},
			{
				// Drift: its own policies removed out of band.
				PreConfig: func() {
					do(t, c, http.MethodDelete, "/admin/v2/persistent/tf-topic/ns/plain/primary", nil)
					do(t, c, http.MethodDelete, "/admin/v2/persistent/tf-topic/ns/plain/replication", nil)
				},
				Config: p + topics(4, `replication_clusters = ["eu-west", "ap-south"]
  primary_region = "ap-south"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_topic.plain", plancheck.ResourceActionUpdate),
				}},
				Check: resource.TestCheckResourceAttr("isobar_topic.plain", "replication_clusters.#", "2"),
			},
			{
				// Its own active-active mode, clusters dropped.
				Config: p + topics(4, `active_active = true`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_topic.plain", "active_active", "true"),
					resource.TestCheckNoResourceAttr("isobar_topic.plain", "primary_region"),
					resource.TestCheckNoResourceAttr("isobar_topic.plain", "replication_clusters.#"),
				),
			},
			{ResourceName: "isobar_topic.plain", ImportState: true, ImportStateId: "persistent://tf-topic/ns/plain", ImportStateVerify: true},
			{
				// Fewer partitions replace the topic; "plain" follows its
				// namespace again.
				Config: p + topics(1, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_topic.events", plancheck.ResourceActionReplace),
					plancheck.ExpectResourceAction("isobar_topic.plain", plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_topic.events", "partitions", "1"),
					resource.TestCheckNoResourceAttr("isobar_topic.plain", "primary_region"),
					resource.TestCheckResourceAttr("isobar_topic.plain", "active_active", "false"),
					resource.TestCheckNoResourceAttr("isobar_topic.plain", "replication_clusters.#"),
				),
			},
			{
				Config: p + topics(1, `active_active = true
  primary_region = "eu-west"`),
				ExpectError: regexp.MustCompile(`Conflicting modes`),
			},
			{
				Config:      p + topics(1, `replication_clusters = []`),
				ExpectError: regexp.MustCompile(`No replication clusters`),
			},
			{
				Config: p + topicBase + `
resource "isobar_topic" "bad" {
  tenant    = "tf-topic"
  namespace = "ns"
  name      = "x-partition-3"
}`,
				ExpectError: regexp.MustCompile(`is a partition's name`),
			},
			{
				// The server refuses the clusters; the topic it had made is
				// removed again.
				Config: p + topics(1, "") + `
resource "isobar_topic" "bad" {
  tenant               = isobar_namespace.ns.tenant
  namespace            = isobar_namespace.ns.name
  name                 = "elsewhere"
  replication_clusters = ["nowhere"]
}`,
				ExpectError: regexp.MustCompile(`(?s)Cannot create the topic.*412.*nowhere`),
			},
			{
				PreConfig: func() {
					var names []string
					if err := c.Get(context.Background(), "/admin/v2/persistent/tf-topic/ns", &names); err != nil {
						t.Fatal(err)
					}
					for _, n := range names {
						if n == "persistent://tf-topic/ns/elsewhere" {
							t.Errorf("topic %s left after a failed create", n)
						}
					}
				},
				Config: p + topics(1, ""),
			},
		},
	})
}
