package provider

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/isobar-mq/isobar/terraform/provider/client"
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

// TestAccSubscriptionEveryRegion: on a topic replicated to every region,
// the subscription is made in each region (from its earliest message);
// importing it with the configuration's initial_position plans nothing;
// deleting it through another region's admin API is drift the next plan
// repairs; a destroy removes it everywhere.
func TestAccSubscriptionEveryRegion(t *testing.T) {
	f := accTest(t)
	p := providerBlock(f, "5s")
	var regions []string
	for _, r := range f.Regions {
		regions = append(regions, fmt.Sprintf("%q", r.Name()))
	}
	cfg := p + fmt.Sprintf(`
resource "isobar_tenant" "t" {
  name             = "tf-subs"
  allowed_clusters = [%[1]s]
}
resource "isobar_namespace" "ns" {
  tenant               = isobar_tenant.t.name
  name                 = "ns"
  replication_clusters = [%[1]s]
}
resource "isobar_topic" "t" {
  tenant    = isobar_namespace.ns.tenant
  namespace = isobar_namespace.ns.name
  name      = "audit"
}
resource "isobar_subscription" "s" {
  topic            = isobar_topic.t.id
  name             = "auditor"
  initial_position = "earliest"
}
`, strings.Join(regions, ", "))
	const subsPath = "/admin/v2/persistent/tf-subs/ns/audit/subscriptions"
	inEvery := func(want bool) func(*terraform.State) error {
		return func(*terraform.State) error {
			for i, r := range f.Regions {
				var subs []string
				err := admin(t, f, i).Get(context.Background(), subsPath, &subs)
				if err != nil && !(client.IsNotFound(err) && !want) {
					return fmt.Errorf("%s: %w", r.Name(), err)
				}
				if slices.Contains(subs, "auditor") != want {
					return fmt.Errorf("%s: subscriptions %v, want auditor there: %v", r.Name(), subs, want)
				}
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             inEvery(false),
		Steps: []resource.TestStep{
			{
				Config: cfg,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_subscription.s", "initial_position", "earliest"),
					inEvery(true),
				),
			},
			{
				// An import block with the configuration as it is: nothing
				// to do (the initial position is read back), no replacement.
				ResourceName: "isobar_subscription.s", ImportState: true, ImportStateKind: resource.ImportBlockWithID,
				ImportStateId: "persistent://tf-subs/ns/audit/auditor", Config: cfg,
			},
			{
				// Deleted through the last region: the plan makes it again.
				PreConfig: func() {
					do(t, admin(t, f, len(f.Regions)-1), http.MethodDelete, "/admin/v2/persistent/tf-subs/ns/audit/subscription/auditor", nil)
				},
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_subscription.s", plancheck.ResourceActionCreate),
				}},
				Check: inEvery(true),
			},
			{
				// A subscription a client made (no initial position kept):
				// imported, the configured position is taken in place,
				// without replacing (deleting) the subscription.
				PreConfig: func() {
					for i := range f.Regions {
						do(t, admin(t, f, i), http.MethodPut, "/admin/v2/persistent/tf-subs/ns/audit/subscription/client-made", nil)
					}
				},
				ResourceName: "isobar_subscription.c", ImportState: true, ImportStateId: "persistent://tf-subs/ns/audit/client-made",
				ImportStatePersist: true, Config: cfg + clientMade,
			},
			{
				Config: cfg + clientMade,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_subscription.c", plancheck.ResourceActionUpdate),
				}},
			},
		},
	})
}

const clientMade = `
resource "isobar_subscription" "c" {
  topic            = isobar_topic.t.id
  name             = "client-made"
  initial_position = "earliest"
}
`
