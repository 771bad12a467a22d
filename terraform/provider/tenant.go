package provider

import (
	"context"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/isobar-mq/isobar/terraform/provider/client"
)

type tenantModel struct {
	ID              types.String `tfsdk:"id"`
	Name            types.String `tfsdk:"name"`
	AdminRoles      types.Set    `tfsdk:"admin_roles"`
	AllowedClusters types.Set    `tfsdk:"allowed_clusters"`
}

// tenantInfo is the server's TenantInfo.
type tenantInfo struct {
	AdminRoles      []string `json:"adminRoles"`
	AllowedClusters []string `json:"allowedClusters"`
}

var tenantKind = &kind[tenantModel]{
	name:        "tenant",
	description: "A tenant: its admin roles and the clusters its namespaces may replicate to.",
	keys:        []string{"name"},
	importHelp:  "the tenant's name",
	attributes: map[string]schema.Attribute{
		"id": idAttribute("The tenant's name."),
		"name": schema.StringAttribute{
			Required:            true,
			MarkdownDescription: "The tenant's name: letters, digits and `_-=:.`, at most 128 bytes. Changing it replaces the tenant.",
			Validators:          []validator.String{validTenant},
			PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
		"admin_roles": schema.SetAttribute{
			ElementType:         types.StringType,
			Optional:            true,
			Computed:            true,
			Default:             emptySet,
			MarkdownDescription: "Roles that administer the tenant. Default: none.",
		},
		"allowed_clusters": schema.SetAttribute{
			ElementType: types.StringType,
			Optional:    true,
			Computed:    true,
			Default:     emptySet,
			MarkdownDescription: "Clusters (regions) the tenant's namespaces may replicate to; each must exist. Empty (the default) puts no limit. " +
				"A cluster that one of the tenant's namespaces replicates to cannot be removed.",
		},
	},
	fromID: func(id string) (tenantModel, error) {
		if err := validTenant.check(id); err != nil {
			return tenantModel{}, err
		}
		return tenantModel{Name: types.StringValue(id)}, nil
	},
	read: func(ctx context.Context, c *client.Client, m tenantModel) (tenantModel, error) {
		name := m.Name.ValueString()
		var t tenantInfo
		if err := c.Get(ctx, "/admin/v2/tenants/"+esc(name), &t); err != nil {
			return m, err
		}
		return tenantModel{
			ID:              types.StringValue(name),
			Name:            types.StringValue(name),
			AdminRoles:      stringSet(t.AdminRoles),
			AllowedClusters: stringSet(t.AllowedClusters),
		}, nil
	},
	create: func(ctx context.Context, c *client.Client, m tenantModel) error {
		return c.Do(ctx, client.Request{Method: http.MethodPut, Path: "/admin/v2/tenants/" + esc(m.Name.ValueString()),
			Body: tenantBody(ctx, m), RetryIf: client.IsExists})
	},
	update: func(ctx context.Context, c *client.Client, plan, _ tenantModel) error {
		return c.Do(ctx, client.Request{Method: http.MethodPost, Path: "/admin/v2/tenants/" + esc(plan.Name.ValueString()),
			Body: tenantBody(ctx, plan)})
	},
	delete: func(ctx context.Context, c *client.Client, m tenantModel) error {
		return c.Do(ctx, client.Request{Method: http.MethodDelete, Path: "/admin/v2/tenants/" + esc(m.Name.ValueString()),
			RetryIf: client.IsNotEmpty})
	},
}

func tenantBody(ctx context.Context, m tenantModel) tenantInfo {
	return tenantInfo{AdminRoles: setStrings(ctx, m.AdminRoles), AllowedClusters: setStrings(ctx, m.AllowedClusters)}
}
