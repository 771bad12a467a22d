package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
)

// The schemas are valid as the framework checks them (no tofu needed),
// and every kind has a resource and a data source.
func TestSchemas(t *testing.T) {
	srv := providerserver.NewProtocol6(New("test")())()
	resp, err := srv.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Errorf("%s: %s: %s", d.Severity, d.Summary, d.Detail)
	}
	for _, name := range []string{"isobar_tenant", "isobar_namespace", "isobar_cluster", "isobar_topic", "isobar_subscription"} {
		if resp.ResourceSchemas[name] == nil {
			t.Errorf("no resource %s", name)
		}
		if resp.DataSourceSchemas[name] == nil {
			t.Errorf("no data source %s", name)
		}
	}
}
