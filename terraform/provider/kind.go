package provider

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"

	"github.com/isobar-mq/isobar/terraform/provider/client"
)

// kind is one type of object the provider manages: a resource and a
// data source that share a model (M, with tfsdk tags) and a schema (the
// data source's is the resource's with every attribute but the keys
// computed), and the REST calls behind them.
type kind[M any] struct {
	name        string // "tenant": the resource is isobar_tenant
	description string
	attributes  map[string]rschema.Attribute
	// keys name the object; a data source takes them.
	keys []string
	// importHelp says what an import ID looks like.
	importHelp string
	// fromID fills the keys of a model from an import ID.
	fromID func(id string) (M, error)
	// read returns the object the keys of m name; an error for which
	// client.IsNotFound holds means it does not exist.
	read func(ctx context.Context, c *client.Client, m M) (M, error)
	// create creates the object plan describes, and leaves nothing
	// behind when it fails.
	create func(ctx context.Context, c *client.Client, plan M) error
	// update changes the object from state to plan.
	update func(ctx context.Context, c *client.Client, plan, state M) error
	delete func(ctx context.Context, c *client.Client, state M) error
	// validate checks a configuration beyond single attributes (values
	// not yet known are skipped); nil checks nothing more.
	validate func(ctx context.Context, cfg tfsdk.Config) diag.Diagnostics
}

// registered is a kind with its type parameter hidden.
type registered struct {
	typeName   string // isobar_<kind name>
	resource   func() resource.Resource
	dataSource func() datasource.DataSource
}

func (k *kind[M]) register() registered {
	return registered{
		typeName:   "isobar_" + k.name,
		resource:   func() resource.Resource { return &kindResource[M]{k: k} },
		dataSource: func() datasource.DataSource { return &kindDataSource[M]{k: k} },
	}
}

func (k *kind[M]) resourceSchema() rschema.Schema {
	return rschema.Schema{MarkdownDescription: k.description + "\n\nImport ID: " + k.importHelp + ".", Attributes: k.attributes}
}

func (k *kind[M]) dataSourceSchema() dschema.Schema {
	attrs := map[string]dschema.Attribute{}
	for name, a := range k.attributes {
		attrs[name] = dataSourceAttribute(a, slices.Contains(k.keys, name))
	}
	return dschema.Schema{MarkdownDescription: "Reads " + lowerFirst(k.description), Attributes: attrs}
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]|0x20) + s[1:]
}

// configured returns the client the provider made, or adds an error.
func configured(data any, d *diag.Diagnostics) *client.Client {
	if data == nil {
		return nil // not configured yet (validation); the framework calls again
	}
	c, ok := data.(*client.Client)
	if !ok {
		d.AddError("Unexpected provider data", fmt.Sprintf("got %T, want *client.Client; this is a bug in the provider", data))
	}
	return c
}

// failed adds err as an error diagnostic: what was being done, then the
// server's reason (client.Error carries it).
func failed(d *diag.Diagnostics, what string, err error) {
	d.AddError(what, err.Error())
}

// idAttribute is the computed id every resource has.
func idAttribute(desc string) rschema.StringAttribute {
	return rschema.StringAttribute{
		Computed:            true,
		MarkdownDescription: desc,
		PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
	}
}

// kinds are every kind the provider serves, in the order the docs list them.
var kinds = []registered{
	tenantKind.register(),
	namespaceKind.register(),
	clusterKind.register(),
	topicKind.register(),
	subscriptionKind.register(),
	permissionGrantKind.register(),
	permissionsKind.register(),
}

// kindNames are the kinds' resource type names (isobar_tenant, ...), in
// the order of kinds.
func kindNames() []string {
	var out []string
	for _, k := range kinds {
		out = append(out, k.typeName)
	}
	return out
}
