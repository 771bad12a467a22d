package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"

	"github.com/isobar-mq/isobar/terraform/provider/client"
)

// kindResource is the resource of a kind.
type kindResource[M any] struct {
	k *kind[M]
	c *client.Client
}

var (
	_ resource.ResourceWithConfigure      = (*kindResource[tenantModel])(nil)
	_ resource.ResourceWithImportState    = (*kindResource[tenantModel])(nil)
	_ resource.ResourceWithValidateConfig = (*kindResource[tenantModel])(nil)
	_ datasource.DataSourceWithConfigure  = (*kindDataSource[tenantModel])(nil)
)

func (r *kindResource[M]) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_" + r.k.name
}

func (r *kindResource[M]) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = r.k.resourceSchema()
}

func (r *kindResource[M]) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = configured(req.ProviderData, &resp.Diagnostics)
}

func (r *kindResource[M]) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	if r.k.validate == nil {
		return
	}
	resp.Diagnostics.Append(r.k.validate(ctx, req.Config)...)
}

func (r *kindResource[M]) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan M
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.k.create(ctx, r.c, plan); err != nil {
		failed(&resp.Diagnostics, "Cannot create the "+r.k.name, err)
		return
	}
	got, err := r.k.read(ctx, r.c, plan)
	if err != nil {
		failed(&resp.Diagnostics, "Created the "+r.k.name+" but cannot read it back", err)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, got)...)
}

func (r *kindResource[M]) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state M
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	got, err := r.k.read(ctx, r.c, state)
	if client.IsNotFound(err) {
		resp.State.RemoveResource(ctx) // deleted out of band: plan creates it again
		return
	}
	if err != nil {
		failed(&resp.Diagnostics, "Cannot read the "+r.k.name, err)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, got)...)
}

func (r *kindResource[M]) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state M
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	uerr := r.k.update(ctx, r.c, plan, state)
	// Whatever part of the update went through, the state says what the
	// server has now.
	got, err := r.k.read(ctx, r.c, plan)
	if uerr != nil {
		failed(&resp.Diagnostics, "Cannot update the "+r.k.name, uerr)
		if err == nil {
			resp.Diagnostics.Append(resp.State.Set(ctx, got)...)
		}
		return
	}
	if err != nil {
		failed(&resp.Diagnostics, "Updated the "+r.k.name+" but cannot read it back", err)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, got)...)
}

func (r *kindResource[M]) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state M
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.k.delete(ctx, r.c, state); err != nil && !client.IsNotFound(err) {
		failed(&resp.Diagnostics, "Cannot delete the "+r.k.name, err)
	}
}

func (r *kindResource[M]) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	m, err := r.k.fromID(req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Bad import ID for isobar_"+r.k.name, err.Error()+"; want "+r.k.importHelp)
		return
	}
	got, err := r.k.read(ctx, r.c, m)
	if err != nil {
		failed(&resp.Diagnostics, "Cannot import the "+r.k.name, err)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, got)...)
}

// kindDataSource is the data source of a kind.
type kindDataSource[M any] struct {
	k *kind[M]
	c *client.Client
}

func (d *kindDataSource[M]) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_" + d.k.name
}

func (d *kindDataSource[M]) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = d.k.dataSourceSchema()
}

func (d *kindDataSource[M]) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = configured(req.ProviderData, &resp.Diagnostics)
}

func (d *kindDataSource[M]) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m M
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	got, err := d.k.read(ctx, d.c, m)
	if err != nil {
		failed(&resp.Diagnostics, "Cannot read the "+d.k.name, err)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, got)...)
}

// dataSourceAttribute is a resource attribute as a data source has it:
// the keys required, everything else computed, with the same types and
// descriptions (validators kept on the keys).
func dataSourceAttribute(a rschema.Attribute, key bool) dschema.Attribute {
	desc := a.GetMarkdownDescription()
	if i := strings.Index(desc, " Changing it replaces"); i >= 0 {
		desc = desc[:i] // nothing to replace in a data source
	}
	switch a := a.(type) {
	case rschema.StringAttribute:
		if key {
			// A key the resource takes optionally (one of several ways to
			// name the object) is optional here too.
			return dschema.StringAttribute{Required: !a.Optional, Optional: a.Optional, MarkdownDescription: desc, Validators: a.Validators}
		}
		return dschema.StringAttribute{Computed: true, MarkdownDescription: desc}
	case rschema.Int64Attribute:
		return dschema.Int64Attribute{Computed: true, MarkdownDescription: desc}
	case rschema.Float64Attribute:
		return dschema.Float64Attribute{Computed: true, MarkdownDescription: desc}
	case rschema.BoolAttribute:
		return dschema.BoolAttribute{Computed: true, MarkdownDescription: desc}
	case rschema.SetAttribute:
		return dschema.SetAttribute{Computed: true, ElementType: a.ElementType, MarkdownDescription: desc}
	case rschema.ListAttribute:
		return dschema.ListAttribute{Computed: true, ElementType: a.ElementType, MarkdownDescription: desc}
	case rschema.MapAttribute:
		return dschema.MapAttribute{Computed: true, ElementType: a.ElementType, MarkdownDescription: desc}
	case rschema.SingleNestedAttribute:
		attrs := map[string]dschema.Attribute{}
		for n, na := range a.Attributes {
			attrs[n] = dataSourceAttribute(na, false)
		}
		return dschema.SingleNestedAttribute{Computed: true, Attributes: attrs, MarkdownDescription: desc}
	case rschema.MapNestedAttribute:
		attrs := map[string]dschema.Attribute{}
		for n, na := range a.NestedObject.Attributes {
			attrs[n] = dataSourceAttribute(na, false)
		}
		return dschema.MapNestedAttribute{Computed: true, NestedObject: dschema.NestedAttributeObject{Attributes: attrs}, MarkdownDescription: desc}
	}
	panic("provider: no data source form for attribute type " + a.GetType().String())
}
