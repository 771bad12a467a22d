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

func TestAccCluster(t *testing.T) {
	f := accTest(t)
	c := admin(t, f, 0)
	p := providerBlock(f, "5s")
	cluster := func(nats string) string {
		return fmt.Sprintf(`
resource "isobar_cluster" "c" {
  name               = "tf-extra"
  service_url        = "http://extra.example:8080"
  broker_service_url = "pulsar://extra-a.example:6650,extra-b.example:6650"
  nats_url           = %q
  peer_cluster_names = ["eu-west", "us-east"]
}
resource "isobar_tenant" "t" {
  name             = "tf-cl"
  allowed_clusters = [isobar_cluster.c.name]
}
`, nats)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			if err := c.Get(context.Background(), "/admin/v2/clusters/tf-extra", nil); !client.IsNotFound(err) {
				return fmt.Errorf("cluster after destroy: %v, want not found", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: p + cluster("nats://extra.example:4222") + `
data "isobar_cluster" "us_east" { name = "us-east" }`,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_cluster.c", "nats_url", "nats://extra.example:4222"),
					resource.TestCheckResourceAttr("isobar_cluster.c", "service_url_tls", ""),
					resource.TestCheckResourceAttr("isobar_cluster.c", "peer_cluster_names.#", "2"),
					// The region registered its own cluster when it started.
					resource.TestCheckResourceAttr("data.isobar_cluster.us_east", "service_url", f.Regions[0].Endpoints().WebServiceURL),
					resource.TestCheckResourceAttr("data.isobar_cluster.us_east", "nats_url", f.Regions[0].Endpoints().NATSURL),
				),
			},
			{ResourceName: "isobar_cluster.c", ImportState: true, ImportStateId: "tf-extra", ImportStateVerify: true},
			{
				Config: p + cluster("nats://extra.example:5222"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_cluster.c", plancheck.ResourceActionUpdate),
				}},
				Check: resource.TestCheckResourceAttr("isobar_cluster.c", "nats_url", "nats://extra.example:5222"),
			},
			{
				// Drift: the URL changed out of band.
				PreConfig: func() {
					do(t, c, http.MethodPost, "/admin/v2/clusters/tf-extra", map[string]any{"serviceUrl": "http://moved.example:8080"})
				},
				Config: p + cluster("nats://extra.example:5222"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_cluster.c", plancheck.ResourceActionUpdate),
				}},
				Check: resource.TestCheckResourceAttr("isobar_cluster.c", "service_url", "http://extra.example:8080"),
			},
			{
				Config:      p + `resource "isobar_cluster" "bad" { name = "no/slash" }`,
				ExpectError: regexp.MustCompile(`Invalid cluster name`),
			},
			{
				// A tenant made out of band still allows the cluster: it is
				// not deleted, and the server says why.
				PreConfig: func() {
					do(t, c, http.MethodPut, "/admin/v2/tenants/tf-cl-oob", map[string]any{"allowedClusters": []string{"tf-extra"}})
				},
				Config:      p,
				ExpectError: regexp.MustCompile(`(?s)Cannot delete the cluster.*412`),
			},
			{
				PreConfig: func() { do(t, c, http.MethodDelete, "/admin/v2/tenants/tf-cl-oob", nil) },
				Config:    p,
			},
		},
	})
}
