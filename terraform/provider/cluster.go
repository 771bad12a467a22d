package provider

import (
	"context"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/isobar-mq/isobar/terraform/provider/client"
)

type clusterModel struct {
	ID                  types.String `tfsdk:"id"`
	Name                types.String `tfsdk:"name"`
	ServiceURL          types.String `tfsdk:"service_url"`
	ServiceURLTLS       types.String `tfsdk:"service_url_tls"`
	BrokerServiceURL    types.String `tfsdk:"broker_service_url"`
	BrokerServiceURLTLS types.String `tfsdk:"broker_service_url_tls"`
	NATSURL             types.String `tfsdk:"nats_url"`
	PeerClusterNames    types.Set    `tfsdk:"peer_cluster_names"`
}

// clusterData is the server's ClusterData (the fields the provider
// manages; the server keeps the others).
type clusterData struct {
	ServiceURL          string   `json:"serviceUrl"`
	ServiceURLTLS       string   `json:"serviceUrlTls"`
	BrokerServiceURL    string   `json:"brokerServiceUrl"`
	BrokerServiceURLTLS string   `json:"brokerServiceUrlTls"`
	PeerClusterNames    []string `json:"peerClusterNames"`
	NATSURL             string   `json:"natsUrl,omitempty"`
}

// optionalString is a string attribute whose absence is "" (as the
// server answers an unset URL).
func optionalString(desc string) schema.StringAttribute {
	return schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(""), MarkdownDescription: desc}
}

var clusterKind = &kind[clusterModel]{
	name: "cluster",
	description: "A cluster: one region of the federation as the others reach it (its brokers' URLs and its NATS server, " +
		"which replication connects to). Declare a region here before it runs, or one whose processes do not register it. " +
		"A region run by `isobar region` or `isobar dev` writes its own record (its brokers' and NATS server's URLs) each time " +
		"it starts: give the same URLs here, or the next plan after a restart shows the difference.",
	keys:       []string{"name"},
	importHelp: "the cluster's name",
	attributes: map[string]schema.Attribute{
		"id": idAttribute("The cluster's name."),
		"name": schema.StringAttribute{
			Required:            true,
			MarkdownDescription: "The cluster's (region's) name: letters, digits and `_-=:.`. Changing it replaces the cluster.",
			Validators:          []validator.String{validCluster},
			PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
		"service_url":            optionalString("The region's admin REST (web service) URL, `http://host:8080`."),
		"service_url_tls":        optionalString("The same over TLS, `https://host:8443`."),
		"broker_service_url":     optionalString("The region's brokers for Pulsar clients, `pulsar://host1:6650,host2:6650`."),
		"broker_service_url_tls": optionalString("The same over TLS, `pulsar+ssl://host:6651`."),
		"nats_url":               optionalString("The region's NATS server, `nats://host:4222`, that replication from other regions publishes to."),
		"peer_cluster_names": schema.SetAttribute{
			ElementType: types.StringType, Optional: true, Computed: true, Default: emptySet,
			MarkdownDescription: "Pulsar's peer clusters (kept for compatibility; Isobar's replication does not use them).",
		},
	},
	fromID: func(id string) (clusterModel, error) {
		if err := validCluster.check(id); err != nil {
			return clusterModel{}, err
		}
		return clusterModel{Name: types.StringValue(id)}, nil
	},
	read: func(ctx context.Context, c *client.Client, m clusterModel) (clusterModel, error) {
		name := m.Name.ValueString()
		var d clusterData
		if err := c.Get(ctx, "/admin/v2/clusters/"+esc(name), &d); err != nil {
			return m, err
		}
		return clusterModel{
			ID: types.StringValue(name), Name: types.StringValue(name),
			ServiceURL: types.StringValue(d.ServiceURL), ServiceURLTLS: types.StringValue(d.ServiceURLTLS),
			BrokerServiceURL: types.StringValue(d.BrokerServiceURL), BrokerServiceURLTLS: types.StringValue(d.BrokerServiceURLTLS),
			NATSURL: types.StringValue(d.NATSURL), PeerClusterNames: stringSet(d.PeerClusterNames),
		}, nil
	},
	create: func(ctx context.Context, c *client.Client, m clusterModel) error {
		return c.Do(ctx, client.Request{Method: http.MethodPut, Path: "/admin/v2/clusters/" + esc(m.Name.ValueString()),
			Body: clusterBody(ctx, m), RetryIf: client.IsExists})
	},
	update: func(ctx context.Context, c *client.Client, plan, _ clusterModel) error {
		return c.Do(ctx, client.Request{Method: http.MethodPost, Path: "/admin/v2/clusters/" + esc(plan.Name.ValueString()),
			Body: clusterBody(ctx, plan)})
	},
	delete: func(ctx context.Context, c *client.Client, m clusterModel) error {
		return c.Do(ctx, client.Request{Method: http.MethodDelete, Path: "/admin/v2/clusters/" + esc(m.Name.ValueString()),
			RetryIf: client.IsNotEmpty})
	},
}

func clusterBody(ctx context.Context, m clusterModel) clusterData {
	return clusterData{
		ServiceURL: m.ServiceURL.ValueString(), ServiceURLTLS: m.ServiceURLTLS.ValueString(),
		BrokerServiceURL: m.BrokerServiceURL.ValueString(), BrokerServiceURLTLS: m.BrokerServiceURLTLS.ValueString(),
		NATSURL: m.NATSURL.ValueString(), PeerClusterNames: setStrings(ctx, m.PeerClusterNames),
	}
}
