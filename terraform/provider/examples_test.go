package provider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// example reads an example file of the docs (examples/...).
func example(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("examples", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// importExample is the resource address and ID of a resource's
// import.sh ("tofu import ADDRESS ID").
func importExample(t *testing.T, name string) (address, id string) {
	t.Helper()
	f := strings.Fields(example(t, "resources/"+name+"/import.sh"))
	if len(f) != 4 || f[0] != "tofu" || f[1] != "import" {
		t.Fatalf("examples/resources/%s/import.sh: want one line \"tofu import ADDRESS ID\", got %q", name, f)
	}
	return f[2], f[3]
}

// TestAccDocExamples applies every resource example of the docs together,
// imports each resource by its import.sh's ID, then reads every data
// source example: the docs show configurations that work.
func TestAccDocExamples(t *testing.T) {
	f := accTest(t)
	// 30 s of retries, as the provider's default.
	p := providerBlock(f, "30s")
	var resources, dataSources strings.Builder
	for _, name := range kindNames() {
		resources.WriteString(example(t, "resources/"+name+"/resource.tf") + "\n")
		dataSources.WriteString(example(t, "data-sources/"+name+"/data-source.tf") + "\n")
	}
	steps := []resource.TestStep{{Config: p + resources.String()}}
	for _, name := range kindNames() {
		address, id := importExample(t, name)
		steps = append(steps, resource.TestStep{
			Config: p + resources.String(), ResourceName: address, ImportState: true, ImportStateId: id, ImportStateVerify: true,
			ImportStateVerifyIgnore: []string{"initial_position"}, // not kept by the server
		})
	}
	steps = append(steps, resource.TestStep{
		Config: p + resources.String() + dataSources.String(),
		Check: resource.ComposeAggregateTestCheckFunc(
			resource.TestCheckResourceAttr("data.isobar_namespace.payments", "primary_region", "us-east"),
			resource.TestCheckResourceAttr("data.isobar_namespace.payments", "sync_replication.fallback_after_seconds", "30"),
			resource.TestCheckResourceAttr("data.isobar_topic.invoices", "partitions", "4"),
			resource.TestCheckResourceAttr("data.isobar_topic.invoices", "max_producers", "50"),
			resource.TestCheckResourceAttr("data.isobar_topic.invoices", "retention.time_in_minutes", "43200"),
			resource.TestCheckResourceAttr("data.isobar_tenant.acme", "admin_roles.#", "1"),
			resource.TestCheckResourceAttr("data.isobar_subscription.billing", "id", "persistent://acme/payments/invoices/billing"),
			resource.TestCheckResourceAttr("data.isobar_permission_grant.billing_writes_invoices", "actions.0", "produce"),
		),
	})
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: factories, Steps: steps})
}
