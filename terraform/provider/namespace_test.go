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

const nsTenant = `
resource "isobar_tenant" "t" {
  name             = "tf-ns"
  allowed_clusters = ["us-east", "eu-west", "ap-south"]
}
`

func TestAccNamespace(t *testing.T) {
	f := accTest(t)
	c := admin(t, f, 2)
	cfg := func(ns string) string { return providerBlock(f, "5s") + nsTenant + ns }
	full := cfg(`
resource "isobar_namespace" "ns" {
  tenant               = isobar_tenant.t.name
  name                 = "orders"
  replication_clusters = ["ap-south", "us-east"]
  primary_region       = "us-east"
  auto_failover_after_seconds = 30
  retention = {
    time_in_minutes = 60
    size_in_mb      = 100
  }
  message_ttl_seconds = 3600
  backlog_quota = {
    destination_storage = { limit_size = 1048576, policy = "producer_exception" }
  }
  deduplication = true
  auto_topic_creation = {
    allow      = true
    type       = "partitioned"
    partitions = 3
  }
}
data "isobar_namespace" "ns" {
  tenant = isobar_namespace.ns.tenant
  name   = isobar_namespace.ns.name
}`)
	updated := cfg(`
resource "isobar_namespace" "ns" {
  tenant               = isobar_tenant.t.name
  name                 = "orders"
  replication_clusters = ["eu-west", "ap-south"]
  primary_region       = "eu-west"
  message_ttl_seconds  = 60
  backlog_quota = {
    message_age = { limit_time = 600, policy = "consumer_backlog_eviction" }
  }
}`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			if err := c.Get(context.Background(), "/admin/v2/namespaces/tf-ns/orders", nil); !client.IsNotFound(err) {
				return fmt.Errorf("namespace after destroy: %v, want not found", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: full,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_namespace.ns", "id", "tf-ns/orders"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "replication_clusters.#", "2"),
					resource.TestCheckTypeSetElemAttr("isobar_namespace.ns", "replication_clusters.*", "ap-south"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "primary_region", "us-east"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "auto_failover_after_seconds", "30"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "retention.size_in_mb", "100"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "backlog_quota.destination_storage.limit_size", "1048576"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "backlog_quota.destination_storage.limit_time", "-1"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "auto_topic_creation.partitions", "3"),
					resource.TestCheckResourceAttr("data.isobar_namespace.ns", "primary_region", "us-east"),
					resource.TestCheckResourceAttr("data.isobar_namespace.ns", "message_ttl_seconds", "3600"),
					resource.TestCheckResourceAttr("data.isobar_namespace.ns", "deduplication", "true"),
				),
			},
			{ResourceName: "isobar_namespace.ns", ImportState: true, ImportStateId: "tf-ns/orders", ImportStateVerify: true},
			{
				// Fail over to eu-west while us-east leaves the clusters; drop some
				// policies, change others.
				Config: updated,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_namespace.ns", plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_namespace.ns", "primary_region", "eu-west"),
					resource.TestCheckNoResourceAttr("isobar_namespace.ns", "retention"),
					resource.TestCheckNoResourceAttr("isobar_namespace.ns", "deduplication"),
					resource.TestCheckNoResourceAttr("isobar_namespace.ns", "backlog_quota.destination_storage"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "backlog_quota.message_age.limit_time", "600"),
				),
			},
			{
				// Drift: the TTL and the primary changed out of band.
				PreConfig: func() {
					do(t, c, http.MethodPost, "/admin/v2/namespaces/tf-ns/orders/messageTTL", 5)
					do(t, c, http.MethodPost, "/admin/v2/namespaces/tf-ns/orders/primary", "ap-south")
				},
				Config: updated,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_namespace.ns", plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_namespace.ns", "primary_region", "eu-west"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "message_ttl_seconds", "60"),
				),
			},
			{
				// Back to active-active.
				Config: cfg(`
resource "isobar_namespace" "ns" {
  tenant               = isobar_tenant.t.name
  name                 = "orders"
  replication_clusters = ["us-east", "eu-west", "ap-south"]
}`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckNoResourceAttr("isobar_namespace.ns", "primary_region"),
					resource.TestCheckNoResourceAttr("isobar_namespace.ns", "message_ttl_seconds"),
					resource.TestCheckNoResourceAttr("isobar_namespace.ns", "backlog_quota.%"),
				),
			},
		},
	})
}

// A namespace without replication clusters gets the server's choice
// (the cluster of the region asked), and no diff follows; bad input
// gives a diagnostic and leaves nothing behind; a namespace that still
// has topics is not destroyed.
func TestAccNamespaceNormalisedAndBadInput(t *testing.T) {
	f := accTest(t)
	c := admin(t, f, 0)
	p := providerBlock(f, "5s")
	tenant := `
resource "isobar_tenant" "t" {
  name             = "tf-ns-bad"
  allowed_clusters = ["us-east", "eu-west"]
}
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config: p + tenant + `
resource "isobar_namespace" "ns" {
  tenant = isobar_tenant.t.name
  name   = "plain"
}`,
				// The test framework's plan after apply must be empty.
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_namespace.ns", "replication_clusters.#", "1"),
					resource.TestCheckTypeSetElemAttr("isobar_namespace.ns", "replication_clusters.*", "us-east"),
				),
			},
			{
				// Zero values are values, not "unset": kept and read back
				// as they are.
				Config: p + tenant + `
resource "isobar_namespace" "ns" {
  tenant              = isobar_tenant.t.name
  name                = "plain"
  message_ttl_seconds = 0
  retention           = { time_in_minutes = 0, size_in_mb = 0 }
  deduplication       = false
  auto_topic_creation = { allow = false, type = "non-partitioned" }
  backlog_quota       = { message_age = { limit_time = 10, policy = "producer_exception" } }
}`,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_namespace.ns", "message_ttl_seconds", "0"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "deduplication", "false"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "backlog_quota.message_age.limit_size", "-1"),
				),
			},
			{
				Config: p + tenant + `
resource "isobar_namespace" "bad" {
  tenant = isobar_tenant.t.name
  name   = "bad/name"
}`,
				ExpectError: regexp.MustCompile(`Invalid namespace name`),
			},
			{
				// The message names the namespace as configured, not with a
				// stand-in tenant.
				Config: p + tenant + `
resource "isobar_namespace" "bad" {
  tenant = isobar_tenant.t.name
  name   = "bad name"
}`,
				ExpectError: regexp.MustCompile(`namespace\s+"bad\s+name"`),
			},
			{
				Config: p + tenant + `
resource "isobar_namespace" "bad" {
  tenant               = isobar_tenant.t.name
  name                 = "none"
  replication_clusters = []
}`,
				ExpectError: regexp.MustCompile(`No replication clusters`),
			},
			{
				Config: p + tenant + `
resource "isobar_namespace" "bad" {
  tenant              = isobar_tenant.t.name
  name                = "auto"
  auto_topic_creation = { allow = true, type = "non-partitioned", partitions = 3 }
}`,
				ExpectError: regexp.MustCompile(`Partitions of a non-partitioned topic`),
			},
			{
				Config: p + tenant + `
resource "isobar_namespace" "bad" {
  tenant              = isobar_tenant.t.name
  name                = "auto"
  auto_topic_creation = { allow = true, type = "partitioned" }
}`,
				ExpectError: regexp.MustCompile(`Partitions needed`),
			},
			{
				Config: p + tenant + `
resource "isobar_namespace" "bad" {
  tenant               = isobar_tenant.t.name
  name                 = "standby"
  replication_clusters = ["us-east"]
  primary_region       = "eu-west"
}`,
				ExpectError: regexp.MustCompile(`primary_region "eu-west" is not one of replication_clusters`),
			},
			{
				// Policies out of range, refused at plan time.
				Config: p + tenant + `
resource "isobar_namespace" "bad" {
  tenant              = isobar_tenant.t.name
  name                = "limits"
  message_ttl_seconds = -1
  retention           = { time_in_minutes = -2, size_in_mb = 0 }
  backlog_quota       = { size = { limit_size = 1, policy = "producer_exception" } }
}`,
				// Every problem, in no particular order.
				ExpectError: regexp.MustCompile(`(?s)(Value out of range|Invalid key).*(Value out of range|Invalid key).*(Value out of range|Invalid key)`),
			},
			{
				Config: p + tenant + `
resource "isobar_namespace" "bad" {
  tenant        = isobar_tenant.t.name
  name          = "limits"
  backlog_quota = {}
}`,
				ExpectError: regexp.MustCompile(`(?s)Empty map.*sets\s+no\s+quota`),
			},
			{
				// ap-south exists but the tenant does not allow it: the server says so.
				Config: p + tenant + `
resource "isobar_namespace" "ns" {
  tenant = isobar_tenant.t.name
  name   = "plain"
}
resource "isobar_namespace" "bad" {
  tenant               = isobar_tenant.t.name
  name                 = "elsewhere"
  replication_clusters = ["us-east", "ap-south", "nowhere"]
}`,
				ExpectError: regexp.MustCompile(`(?s)Cannot create the namespace.*412`),
			},
			{
				// Nothing left of it; and a topic appears in "plain".
				PreConfig: func() {
					if err := c.Get(context.Background(), "/admin/v2/namespaces/tf-ns-bad/elsewhere", nil); !client.IsNotFound(err) {
						t.Errorf("namespace after a failed create: %v, want not found", err)
					}
					do(t, c, http.MethodPut, "/admin/v2/persistent/tf-ns-bad/plain/keep", nil)
				},
				Config:      p + tenant,
				ExpectError: regexp.MustCompile(`(?s)Cannot delete the namespace.*409`),
			},
			{
				PreConfig: func() { do(t, c, http.MethodDelete, "/admin/v2/persistent/tf-ns-bad/plain/keep", nil) },
				Config:    p + tenant,
			},
		},
	})
}

// A namespace's synchronous replication: created with the namespace,
// imported, changed together with the replication clusters in both
// directions (more clusters and more regions waited for, then fewer of
// both, then asynchronous on one cluster), put back after out-of-band
// changes, and refused at plan time when out of range or when the
// clusters leave too few other regions.
func TestAccNamespaceSyncReplication(t *testing.T) {
	f := accTest(t)
	c := admin(t, f, 1)
	p := providerBlock(f, "5s")
	tenant := `
resource "isobar_tenant" "t" {
  name             = "tf-ns-sync"
  allowed_clusters = ["us-east", "eu-west", "ap-south"]
}
`
	ns := func(clusters, sync string) string {
		return p + tenant + fmt.Sprintf(`
resource "isobar_namespace" "ns" {
  tenant               = isobar_tenant.t.name
  name                 = "sync"
  replication_clusters = %s
  %s
}`, clusters, sync)
	}
	two, three := `["us-east", "eu-west"]`, `["us-east", "eu-west", "ap-south"]`
	const path = "/admin/v2/namespaces/tf-ns-sync/sync/syncReplication"
	// server checks what the server holds (nil: none).
	server := func(want *syncReplicationJSON) resource.TestCheckFunc {
		return func(*terraform.State) error {
			var got *syncReplicationJSON
			if err := c.Get(context.Background(), path, &got); err != nil {
				return err
			}
			if (got == nil) != (want == nil) || got != nil && *got != *want {
				return fmt.Errorf("server's syncReplication %+v, want %+v", got, want)
			}
			return nil
		}
	}
	update := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
		plancheck.ExpectResourceAction("isobar_namespace.ns", plancheck.ResourceActionUpdate),
	}}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			if err := c.Get(context.Background(), "/admin/v2/namespaces/tf-ns-sync/sync", nil); !client.IsNotFound(err) {
				return fmt.Errorf("namespace after destroy: %v, want not found", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config:      ns(two, `sync_replication = { regions = 0 }`),
				ExpectError: regexp.MustCompile(`(?s)Value out of range.*0 is not from 1\s+to\s+64`),
			},
			{
				Config:      ns(two, `sync_replication = { regions = 1, fallback_after_seconds = 3601 }`),
				ExpectError: regexp.MustCompile(`(?s)Value out of range.*3601 is not from 0\s+to\s+3600`),
			},
			{
				Config:      ns(two, `sync_replication = { regions = 1, fallback_after_seconds = -1 }`),
				ExpectError: regexp.MustCompile(`Value out of range`),
			},
			{
				Config:      ns(two, `sync_replication = { regions = 2 }`),
				ExpectError: regexp.MustCompile(`(?s)Too few replication clusters.*needs\s+at\s+least\s+3`),
			},
			{
				// Left out, the clusters are the one the server picks.
				Config: p + tenant + `
resource "isobar_namespace" "ns" {
  tenant           = isobar_tenant.t.name
  name             = "sync"
  sync_replication = { regions = 1 }
}`,
				ExpectError: regexp.MustCompile(`(?s)Too few replication clusters.*without\s+replication_clusters`),
			},
			{
				Config: ns(two, `sync_replication = { regions = 1 }`) + `
data "isobar_namespace" "ns" {
  tenant = isobar_namespace.ns.tenant
  name   = isobar_namespace.ns.name
}`,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_namespace.ns", "sync_replication.regions", "1"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "sync_replication.fallback_after_seconds", "0"),
					resource.TestCheckResourceAttr("data.isobar_namespace.ns", "sync_replication.regions", "1"),
					server(&syncReplicationJSON{Regions: 1}),
				),
			},
			{ResourceName: "isobar_namespace.ns", ImportState: true, ImportStateId: "tf-ns-sync/sync", ImportStateVerify: true},
			{
				// More clusters and more regions waited for, in one apply.
				Config:           ns(three, `sync_replication = { regions = 2, fallback_after_seconds = 30 }`),
				ConfigPlanChecks: update,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_namespace.ns", "replication_clusters.#", "3"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "sync_replication.regions", "2"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "sync_replication.fallback_after_seconds", "30"),
					server(&syncReplicationJSON{Regions: 2, FallbackAfterSeconds: 30}),
				),
			},
			{
				// Drift: changed out of band, put back.
				PreConfig: func() {
					do(t, c, http.MethodPost, path, syncReplicationJSON{Regions: 1})
				},
				Config:           ns(three, `sync_replication = { regions = 2, fallback_after_seconds = 30 }`),
				ConfigPlanChecks: update,
				Check:            server(&syncReplicationJSON{Regions: 2, FallbackAfterSeconds: 30}),
			},
			{
				// Drift: removed out of band, put back.
				PreConfig:        func() { do(t, c, http.MethodDelete, path, nil) },
				Config:           ns(three, `sync_replication = { regions = 2, fallback_after_seconds = 30 }`),
				ConfigPlanChecks: update,
				Check:            server(&syncReplicationJSON{Regions: 2, FallbackAfterSeconds: 30}),
			},
			{
				// Fewer clusters and fewer regions waited for, in one apply.
				Config:           ns(two, `sync_replication = { regions = 1, fallback_after_seconds = 3600 }`),
				ConfigPlanChecks: update,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_namespace.ns", "replication_clusters.#", "2"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "sync_replication.fallback_after_seconds", "3600"),
					server(&syncReplicationJSON{Regions: 1, FallbackAfterSeconds: 3600}),
				),
			},
			{
				// Asynchronous again, on one cluster, in one apply.
				Config:           ns(`["us-east"]`, ``),
				ConfigPlanChecks: update,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckNoResourceAttr("isobar_namespace.ns", "sync_replication"),
					resource.TestCheckResourceAttr("isobar_namespace.ns", "replication_clusters.#", "1"),
					server(nil),
				),
			},
		},
	})
}
