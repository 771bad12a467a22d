package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/isobar-mq/isobar/terraform/provider/client"
	"github.com/isobar-mq/isobar/topic"
)

type topicModel struct {
	ID                  types.String `tfsdk:"id"`
	Tenant              types.String `tfsdk:"tenant"`
	Namespace           types.String `tfsdk:"namespace"`
	Name                types.String `tfsdk:"name"`
	Partitions          types.Int64  `tfsdk:"partitions"`
	ReplicationClusters types.Set    `tfsdk:"replication_clusters"`
	PrimaryRegion       types.String `tfsdk:"primary_region"`
	ActiveActive        types.Bool   `tfsdk:"active_active"`
	ForceDelete         types.Bool   `tfsdk:"force_delete"`
	topicPolicies                    // topicpolicies.go
}

// topicName is the persistent topic m names.
func topicName(m topicModel) (topic.Name, error) {
	return topic.Parse("persistent://" + m.Tenant.ValueString() + "/" + m.Namespace.ValueString() + "/" + m.Name.ValueString())
}

func topicPath(n topic.Name) string {
	return "/admin/v2/persistent/" + esc(n.Tenant) + "/" + esc(n.Namespace) + "/" + esc(n.Local)
}

// validTopicLocal checks a topic's name within its namespace.
var validTopicLocal = nameValidator{"topic", func(s string) error {
	if strings.Contains(s, "/") {
		return fmt.Errorf("topic %q: a topic's name may not contain '/' (give tenant and namespace apart)", s)
	}
	n, err := topic.Parse("persistent://t/ns/" + s)
	if err == nil && n.Partition() >= 0 {
		return fmt.Errorf("topic %q is a partition's name", s)
	}
	if err != nil {
		// (Checked under a stand-in namespace, which the message must
		// not show as the configuration's.)
		return errors.New(strings.ReplaceAll(err.Error(), "persistent://t/ns/"+s, s))
	}
	return nil
}}

var topicKind = &kind[topicModel]{
	name: "topic",
	description: "A persistent topic, partitioned or not, with its own replication clusters, primary region and policies (retention, " +
		"message TTL, backlog quotas, de-duplication, limits, rates, ...) where it should not follow its namespace's. A partitioned topic's " +
		"metadata is the federation's (global store); a non-partitioned topic is created, read and deleted in the region the provider " +
		"reaches (the first `web_service_url` that answers), and the other regions of its replication clusters get their copies as " +
		"messages replicate. Its policies are its global ones, which every region applies (`isGlobal=true` in the admin API; a partitioned " +
		"topic's apply to its partitions): each one left out follows the namespace, and removing one from the configuration removes the " +
		"topic's own. A policy set for one region only (`isobar admin topics set-...` without `--global`) wins in that region and is not " +
		"managed here.",
	keys:       []string{"tenant", "namespace", "name"},
	importHelp: "the topic's full name, `persistent://tenant/namespace/topic`",
	attributes: withTopicPolicies(map[string]schema.Attribute{
		"id": idAttribute("The full name, `persistent://tenant/namespace/topic`."),
		"tenant": schema.StringAttribute{Required: true, MarkdownDescription: "The tenant. Changing it replaces the topic.",
			Validators: []validator.String{validTenant}, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"namespace": schema.StringAttribute{Required: true, MarkdownDescription: "The namespace within the tenant. Changing it replaces the topic.",
			Validators: []validator.String{validNamespaceSegment}, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"name": schema.StringAttribute{Required: true, MarkdownDescription: "The topic's name within the namespace. Changing it replaces the topic.",
			Validators: []validator.String{validTopicLocal}, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"partitions": schema.Int64Attribute{
			Optional: true, Computed: true, Default: int64default.StaticInt64(0),
			MarkdownDescription: "Partitions; 0 (the default) is a non-partitioned topic. Raising the count adds partitions in place " +
				"(existing subscriptions start at the earliest message on them); lowering it, or changing between 0 and more, replaces the topic " +
				"and so deletes its messages.",
			PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.Int64Request, resp *int64planmodifier.RequiresReplaceIfFuncResponse) {
				if req.StateValue.IsNull() || req.PlanValue.IsUnknown() {
					return
				}
				old, new := req.StateValue.ValueInt64(), req.PlanValue.ValueInt64()
				resp.RequiresReplace = new < old || (old == 0) != (new == 0)
			}, "Lowering the partition count, or changing between 0 and more, replaces the topic.", "Lowering the partition count, or changing between 0 and more, replaces the topic.")},
		},
		"replication_clusters": schema.SetAttribute{
			ElementType: types.StringType, Optional: true,
			MarkdownDescription: "The topic's own replication clusters, overriding its namespace's (each must exist and be allowed by the tenant). " +
				"Left out: the namespace's.",
		},
		"primary_region": schema.StringAttribute{
			Optional: true,
			MarkdownDescription: "Makes the topic active-standby with its own primary region, whatever its namespace's mode (one of its replication " +
				"clusters; changing it fails the topic over). Left out: the namespace's mode and primary, unless `active_active` is set.",
		},
		"active_active": schema.BoolAttribute{
			Optional: true, Computed: true, Default: booldefault.StaticBool(false),
			MarkdownDescription: "Makes the topic active-active (every region takes writes) whatever its namespace's mode. False (the default) " +
				"with no `primary_region`: the namespace's mode. Conflicts with `primary_region`.",
		},
		"force_delete": schema.BoolAttribute{
			Optional: true, Computed: true, Default: booldefault.StaticBool(true),
			MarkdownDescription: "Delete the topic even while producers or consumers are connected (the default). Replicator workers keep " +
				"every replicated topic open, so a replicated topic can only be deleted this way; false refuses to delete a topic in use. " +
				"Not read from the server.",
		},
	}),
	fromID: func(id string) (topicModel, error) {
		n, err := topic.Parse(id)
		if err != nil {
			return topicModel{}, err
		}
		if n.Domain != topic.Persistent || !strings.HasPrefix(id, "persistent://") {
			return topicModel{}, errors.New("want a persistent topic's full name")
		}
		return topicModel{Tenant: types.StringValue(n.Tenant), Namespace: types.StringValue(n.Namespace), Name: types.StringValue(n.Local)}, nil
	},
	read:     readTopic,
	create:   createTopic,
	update:   updateTopic,
	delete:   deleteTopic,
	validate: validateTopic,
}

func readTopic(ctx context.Context, c *client.Client, m topicModel) (topicModel, error) {
	n, err := topicName(m)
	if err != nil {
		return m, err
	}
	p := topicPath(n)
	partitions, err := topicPartitions(ctx, c, n)
	if err != nil {
		return m, err
	}
	force := m.ForceDelete
	if !known(force) {
		force = types.BoolValue(true) // imported: the default
	}
	out, err := readOwn(ctx, c, p)
	if err != nil {
		return m, err
	}
	out.ID, out.Tenant, out.Namespace, out.Name, out.ForceDelete = types.StringValue(n.String()), m.Tenant, m.Namespace, m.Name, force
	out.Partitions = types.Int64Value(partitions)
	return out, nil
}

// readOwn reads what the topic at admin path p sets for itself rather
// than following its namespace: replication clusters, mode and primary,
// policies.
func readOwn(ctx context.Context, c *client.Client, p string) (topicModel, error) {
	out := topicModel{ReplicationClusters: types.SetNull(types.StringType), PrimaryRegion: types.StringNull()}
	var clusters []string
	if err := c.Get(ctx, p+"/replication", &clusters); err != nil {
		return out, err
	}
	if clusters != nil {
		out.ReplicationClusters = stringSet(clusters)
	}
	var fo failoverJSON
	if err := c.Get(ctx, p+"/primary", &fo); err != nil {
		return out, err
	}
	out.ActiveActive = types.BoolValue(fo.Mode == activeActive)
	if fo.Mode == activeStandby {
		out.PrimaryRegion = types.StringValue(fo.Primary)
	}
	pol, err := readOwnPolicies(ctx, c, p)
	if err != nil {
		return out, err
	}
	out.topicPolicies = pol
	return out, nil
}

// topicPartitions returns the partitions of topic n (0: not
// partitioned), or a 404 error when there is no such topic in the region
// the client reaches.
func topicPartitions(ctx context.Context, c *client.Client, n topic.Name) (int64, error) {
	p := topicPath(n)
	var meta struct {
		Partitions int64 `json:"partitions"`
	}
	if err := c.Get(ctx, p+"/partitions", &meta); err != nil {
		return 0, err
	}
	if meta.Partitions > 0 {
		return meta.Partitions, nil
	}
	var names []string
	if err := c.Get(ctx, "/admin/v2/persistent/"+esc(n.Tenant)+"/"+esc(n.Namespace), &names); err != nil {
		return 0, err
	}
	if !slices.Contains(names, n.String()) {
		return 0, &client.Error{Method: http.MethodGet, Path: p, Status: http.StatusNotFound, Reason: "topic " + n.String() + " does not exist"}
	}
	return 0, nil
}

func createTopic(ctx context.Context, c *client.Client, m topicModel) error {
	n, err := topicName(m)
	if err != nil {
		return err
	}
	p := topicPath(n)
	if k := m.Partitions.ValueInt64(); k > 0 {
		err = c.Do(ctx, client.Request{Method: http.MethodPut, Path: p + "/partitions", Body: k, RetryIf: client.IsExists})
	} else {
		err = c.Do(ctx, client.Request{Method: http.MethodPut, Path: p, RetryIf: client.IsExists})
	}
	if err != nil {
		return err
	}
	// A topic's own settings outlive it and may be made before it: what
	// the server holds for the name already is moved to the plan.
	have, err := readOwn(ctx, c, p)
	if err == nil {
		err = setTopicPolicies(ctx, c, p, m, have)
	}
	if err != nil {
		if derr := deleteTopic(ctx, c, m); derr != nil {
			return fmt.Errorf("%w (and removing the topic again failed: %v)", err, derr)
		}
		return err
	}
	return nil
}

// setTopicPolicies moves the topic's own replication clusters, primary
// and policies from have to want, the first two in an order the server
// accepts (the primary must be one of the clusters).
func setTopicPolicies(ctx context.Context, c *client.Client, p string, want, have topicModel) error {
	wantC, haveC := setStrings(ctx, want.ReplicationClusters), setStrings(ctx, have.ReplicationClusters)
	clustersChange := want.ReplicationClusters.IsNull() != have.ReplicationClusters.IsNull() || !slices.Equal(wantC, haveC)
	wantF, haveF := topicFailover(want), topicFailover(have)
	primaryChange := wantF != haveF
	setClusters := func() error {
		if !clustersChange {
			return nil
		}
		if want.ReplicationClusters.IsNull() {
			return c.Do(ctx, client.Request{Method: http.MethodDelete, Path: p + "/replication"})
		}
		return c.Do(ctx, client.Request{Method: http.MethodPost, Path: p + "/replication", Body: wantC})
	}
	setPrimary := func() error {
		if !primaryChange {
			return nil
		}
		if wantF == (failoverJSON{}) {
			return c.Do(ctx, client.Request{Method: http.MethodDelete, Path: p + "/primary"})
		}
		return c.Do(ctx, client.Request{Method: http.MethodPost, Path: p + "/primary", Body: wantF})
	}
	// The primary first when it is being removed or is one of the
	// clusters the topic has now; else the clusters first (the new
	// clusters hold the new primary: validateTopic checks it).
	first, second := setClusters, setPrimary
	if want.PrimaryRegion.IsNull() || (!have.ReplicationClusters.IsNull() && slices.Contains(haveC, want.PrimaryRegion.ValueString())) {
		first, second = setPrimary, setClusters
	}
	if err := first(); err != nil {
		return err
	}
	if err := second(); err != nil {
		return err
	}
	return setOwnPolicies(ctx, c, p, &want.topicPolicies, &have.topicPolicies)
}

// topicFailover is the topic's own mode and primary m asks for; the zero
// value means it follows its namespace.
func topicFailover(m topicModel) failoverJSON {
	switch {
	case known(m.PrimaryRegion):
		return failoverJSON{Mode: activeStandby, Primary: m.PrimaryRegion.ValueString()}
	case m.ActiveActive.ValueBool():
		return failoverJSON{Mode: activeActive}
	}
	return failoverJSON{}
}

func updateTopic(ctx context.Context, c *client.Client, plan, state topicModel) error {
	n, err := topicName(plan)
	if err != nil {
		return err
	}
	p := topicPath(n)
	if k := plan.Partitions.ValueInt64(); k > state.Partitions.ValueInt64() {
		if err := c.Do(ctx, client.Request{Method: http.MethodPost, Path: p + "/partitions", Body: k}); err != nil {
			return err
		}
	}
	return setTopicPolicies(ctx, c, p, plan, state)
}

// deleteTopic removes the topic (in every region of its replication
// clusters), then its own replication clusters and primary and the
// policies m says it has (so a topic of the same name made later starts
// from its namespace's); a topic that is gone already has its policies
// removed all the same.
func deleteTopic(ctx context.Context, c *client.Client, m topicModel) error {
	n, err := topicName(m)
	if err != nil {
		return err
	}
	p := topicPath(n)
	force := ""
	if m.ForceDelete.IsNull() || m.ForceDelete.ValueBool() {
		force = "?force=true"
	}
	if m.Partitions.ValueInt64() > 0 {
		err = c.Do(ctx, client.Request{Method: http.MethodDelete, Path: p + "/partitions" + force})
	} else {
		err = c.Do(ctx, client.Request{Method: http.MethodDelete, Path: p + force})
	}
	if err != nil && !client.IsNotFound(err) {
		return err
	}
	// Only now its own clusters and primary: the delete reaches every
	// region of the topic's replication clusters as they are when it is
	// asked.
	for _, sub := range []string{"/primary", "/replication"} {
		if err := c.Do(ctx, client.Request{Method: http.MethodDelete, Path: p + sub}); err != nil && !client.IsNotFound(err) {
			return err
		}
	}
	if perr := setOwnPolicies(ctx, c, p, &topicPolicies{}, &m.topicPolicies); perr != nil {
		return perr
	}
	return err
}

func validateTopic(ctx context.Context, cfg tfsdk.Config) diag.Diagnostics {
	var d diag.Diagnostics
	var primary types.String
	var clusters types.Set
	var parts types.Int64
	var aa types.Bool
	d.Append(cfg.GetAttribute(ctx, path.Root("active_active"), &aa)...)
	d.Append(cfg.GetAttribute(ctx, path.Root("primary_region"), &primary)...)
	d.Append(cfg.GetAttribute(ctx, path.Root("replication_clusters"), &clusters)...)
	d.Append(cfg.GetAttribute(ctx, path.Root("partitions"), &parts)...)
	if d.HasError() {
		return d
	}
	if known(clusters) && len(clusters.Elements()) == 0 {
		d.AddAttributeError(path.Root("replication_clusters"), "No replication clusters",
			"replication_clusters needs at least one cluster; leave it out to follow the namespace's")
	}
	if known(primary) && known(clusters) && !slices.Contains(setStrings(ctx, clusters), primary.ValueString()) {
		d.AddAttributeError(path.Root("primary_region"), "Primary region not replicated to",
			fmt.Sprintf("primary_region %q is not one of replication_clusters [%s]", primary.ValueString(), strings.Join(setStrings(ctx, clusters), ", ")))
	}
	if known(aa) && aa.ValueBool() && !primary.IsNull() {
		d.AddAttributeError(path.Root("active_active"), "Conflicting modes",
			"active_active and primary_region cannot both be set: an active-active topic has no primary")
	}
	if known(parts) && parts.ValueInt64() < 0 {
		d.AddAttributeError(path.Root("partitions"), "Negative partition count", "partitions must be 0 (non-partitioned) or more")
	}
	d.Append(validateTopicPolicies(ctx, cfg)...)
	return d
}
