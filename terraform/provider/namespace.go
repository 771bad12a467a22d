package provider

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/isobar-mq/isobar/terraform/provider/client"
	"github.com/isobar-mq/isobar/topic"
)

type namespaceModel struct {
	ID                       types.String                 `tfsdk:"id"`
	Tenant                   types.String                 `tfsdk:"tenant"`
	Name                     types.String                 `tfsdk:"name"`
	ReplicationClusters      types.Set                    `tfsdk:"replication_clusters"`
	PrimaryRegion            types.String                 `tfsdk:"primary_region"`
	AutoFailoverAfterSeconds types.Int64                  `tfsdk:"auto_failover_after_seconds"`
	Retention                *retentionModel              `tfsdk:"retention"`
	MessageTTLSeconds        types.Int64                  `tfsdk:"message_ttl_seconds"`
	BacklogQuota             map[string]backlogQuotaModel `tfsdk:"backlog_quota"`
	Deduplication            types.Bool                   `tfsdk:"deduplication"`
	AutoTopicCreation        *autoTopicCreationModel      `tfsdk:"auto_topic_creation"`
	SyncReplication          *syncReplicationModel        `tfsdk:"sync_replication"`
}

type retentionModel struct {
	TimeInMinutes types.Int64 `tfsdk:"time_in_minutes"`
	SizeInMB      types.Int64 `tfsdk:"size_in_mb"`
}

type backlogQuotaModel struct {
	LimitSize types.Int64  `tfsdk:"limit_size"`
	LimitTime types.Int64  `tfsdk:"limit_time"`
	Policy    types.String `tfsdk:"policy"`
}

type autoTopicCreationModel struct {
	Allow      types.Bool   `tfsdk:"allow"`
	Type       types.String `tfsdk:"type"`
	Partitions types.Int64  `tfsdk:"partitions"`
}

type syncReplicationModel struct {
	Regions              types.Int64 `tfsdk:"regions"`
	FallbackAfterSeconds types.Int64 `tfsdk:"fallback_after_seconds"`
}

// The bounds of a namespace's syncReplication, as the server checks them
// (docs/admin.md; the provider links no server code to share them).
const (
	maxSyncRegions         = 64
	maxSyncFallbackSeconds = 3600
)

// Bounds of policy values, as the server checks them (docs/limits.md,
// "Policy values").
const (
	maxInt32            = math.MaxInt32 // Pulsar's int: TTLs, limits, durations
	maxRetentionMinutes = math.MaxInt64 / int64(time.Minute)
	maxRetentionSizeMB  = math.MaxInt64 >> 20
)

// The policies a namespace and a topic both have, with the same
// attributes; desc says what the policy is to its owner.

func retentionAttribute(desc string) schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional:            true,
		MarkdownDescription: desc,
		Attributes: map[string]schema.Attribute{
			"time_in_minutes": schema.Int64Attribute{Required: true, MarkdownDescription: "Minutes; -1 unlimited, 0 none.",
				Validators: []validator.Int64{int64Range{-1, maxRetentionMinutes}}},
			"size_in_mb": schema.Int64Attribute{Required: true, MarkdownDescription: "Megabytes; -1 unlimited, 0 none.",
				Validators: []validator.Int64{int64Range{-1, maxRetentionSizeMB}}},
		},
	}
}

func messageTTLAttribute(desc string) schema.Int64Attribute {
	return schema.Int64Attribute{Optional: true, MarkdownDescription: desc, Validators: []validator.Int64{int64Range{0, maxInt32}}}
}

func backlogQuotaAttribute(desc string) schema.MapNestedAttribute {
	return schema.MapNestedAttribute{
		Optional:            true,
		MarkdownDescription: desc,
		Validators: []validator.Map{keysOneOf{"destination_storage", "message_age"},
			notEmptyMap{"backlog_quota = {} sets no quota: leave backlog_quota out to set none"}},
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"limit_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(-1),
				MarkdownDescription: "Bytes; -1 (the default) no limit.", Validators: []validator.Int64{atLeast(-1)}},
			"limit_time": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(-1),
				MarkdownDescription: "Seconds; -1 (the default) no limit.", Validators: []validator.Int64{int64Range{-1, maxInt32}}},
			"policy": schema.StringAttribute{Required: true,
				MarkdownDescription: "What the broker does at the limit: `producer_request_hold`, `producer_exception` or `consumer_backlog_eviction`.",
				Validators:          []validator.String{oneOf{"producer_request_hold", "producer_exception", "consumer_backlog_eviction"}}},
		}},
	}
}

// syncReplicationAttribute is sync_replication; regions says how many
// regions it may wait for.
func syncReplicationAttribute(regions, desc string) schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional:            true,
		MarkdownDescription: desc,
		Attributes: map[string]schema.Attribute{
			"regions": schema.Int64Attribute{Required: true, MarkdownDescription: regions,
				Validators: []validator.Int64{int64Range{1, maxSyncRegions}}},
			"fallback_after_seconds": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(0),
				MarkdownDescription: fmt.Sprintf("Once a message has waited this long (up to %d seconds), acknowledge it from the local copy "+
					"alone and stay asynchronous until the regions catch up. 0 (the default): never, publishes wait for the regions.", maxSyncFallbackSeconds),
				Validators: []validator.Int64{int64Range{0, maxSyncFallbackSeconds}}},
		},
	}
}

// The server's JSON (docs/admin.md).
type (
	nsPolicies struct {
		ReplicationClusters []string                  `json:"replication_clusters,omitempty"`
		Retention           *retentionJSON            `json:"retention_policies,omitempty"`
		MessageTTL          *int64                    `json:"message_ttl_in_seconds,omitempty"`
		BacklogQuotaMap     map[string]backlogQuotaJS `json:"backlog_quota_map,omitempty"`
		Deduplication       *bool                     `json:"deduplicationEnabled,omitempty"`
		AutoTopicCreation   *autoTopicJSON            `json:"autoTopicCreationOverride,omitempty"`
		SyncReplication     *syncReplicationJSON      `json:"syncReplication,omitempty"`
	}
	retentionJSON struct {
		Minutes int64 `json:"retentionTimeInMinutes"`
		SizeMB  int64 `json:"retentionSizeInMB"`
	}
	backlogQuotaJS struct {
		LimitSize int64  `json:"limitSize"`
		LimitTime int64  `json:"limitTime"`
		Policy    string `json:"policy"`
	}
	autoTopicJSON struct {
		Allow      bool   `json:"allowAutoTopicCreation"`
		Type       string `json:"topicType"`
		Partitions *int64 `json:"defaultNumPartitions,omitempty"`
	}
	syncReplicationJSON struct {
		Regions              int64 `json:"regions"`
		FallbackAfterSeconds int64 `json:"fallbackAfterSeconds"`
	}
	failoverJSON struct {
		Mode             string `json:"mode"`
		Primary          string `json:"primary,omitempty"`
		AutoAfterSeconds int64  `json:"autoFailoverAfterSeconds,omitempty"`
	}
)

const (
	activeActive  = "active-active"
	activeStandby = "active-standby"
)

var namespaceKind = &kind[namespaceModel]{
	name: "namespace",
	description: "A namespace: where its topics replicate, its primary region (active-standby failover) and its policies " +
		"(retention, message TTL, backlog quotas, de-duplication, auto topic creation, synchronous replication). Every policy left out is the broker's default.",
	keys:       []string{"tenant", "name"},
	importHelp: "`tenant/namespace`",
	attributes: map[string]schema.Attribute{
		"id": idAttribute("`tenant/namespace`."),
		"tenant": schema.StringAttribute{
			Required:            true,
			MarkdownDescription: "The tenant. Changing it replaces the namespace.",
			Validators:          []validator.String{validTenant},
			PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
		"name": schema.StringAttribute{
			Required:            true,
			MarkdownDescription: "The namespace's name within its tenant (letters, digits and `_-=:.`). Changing it replaces the namespace.",
			Validators:          []validator.String{validNamespaceSegment},
			PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
		"replication_clusters": schema.SetAttribute{
			ElementType: types.StringType,
			Optional:    true,
			Computed:    true,
			MarkdownDescription: "Clusters (regions) the namespace's topics replicate to; each must exist and be allowed by the tenant. " +
				"Left out, the server picks the cluster of the region the request reached (as Pulsar does) and keeps it.",
			PlanModifiers: []planmodifier.Set{setplanmodifier.UseStateForUnknown()},
		},
		"primary_region": schema.StringAttribute{
			Optional: true,
			MarkdownDescription: "Makes the namespace active-standby with this primary region (one of `replication_clusters`): only the primary takes " +
				"publishes and acknowledgements, and changing it fails over (docs/failover.md). Left out: active-active, every region takes writes.",
		},
		"auto_failover_after_seconds": schema.Int64Attribute{
			Optional:            true,
			MarkdownDescription: "With `primary_region`: fail over automatically when the primary has been unreachable this long. Left out: manual failover only.",
		},
		"retention":           retentionAttribute("How long acknowledged messages are kept."),
		"message_ttl_seconds": messageTTLAttribute("Unacknowledged messages older than this are acknowledged by the broker (0 to 2147483647 seconds)."),
		"backlog_quota":       backlogQuotaAttribute("Backlog quotas by type: `destination_storage` (size) and `message_age` (time)."),
		"deduplication": schema.BoolAttribute{
			Optional:            true,
			MarkdownDescription: "Drop messages a producer resends (by producer name and sequence id). Left out: the broker's default.",
		},
		"auto_topic_creation": schema.SingleNestedAttribute{
			Optional:            true,
			MarkdownDescription: "Overrides the broker's auto topic creation for this namespace.",
			Attributes: map[string]schema.Attribute{
				"allow": schema.BoolAttribute{Required: true, MarkdownDescription: "Whether topics are created on first use."},
				"type": schema.StringAttribute{Required: true, MarkdownDescription: "`partitioned` or `non-partitioned`.",
					Validators: []validator.String{oneOf{"partitioned", "non-partitioned"}}},
				"partitions": schema.Int64Attribute{Optional: true, MarkdownDescription: "Partitions of a topic created as `partitioned` (required then)."},
			},
		},
		"sync_replication": syncReplicationAttribute(fmt.Sprintf("How many other regions must hold a message (1 to %d, and fewer than `replication_clusters`).", maxSyncRegions),
			"Makes publishes synchronous across regions: a message is acknowledged to its producer only once `regions` other "+
				"regions of `replication_clusters` hold it too, so failing over to one of them loses nothing acknowledged (docs/failover.md). "+
				"A topic's own setting wins. Left out: asynchronous replication."),
	},
	fromID: func(id string) (namespaceModel, error) {
		t, ns, err := topic.ParseNamespace(id)
		if err != nil {
			return namespaceModel{}, err
		}
		return namespaceModel{Tenant: types.StringValue(t), Name: types.StringValue(ns)}, nil
	},
	read:     readNamespace,
	create:   createNamespace,
	update:   updateNamespace,
	delete:   deleteNamespace,
	validate: validateNamespace,
}

func nsPath(m namespaceModel) string {
	return "/admin/v2/namespaces/" + esc(m.Tenant.ValueString()) + "/" + esc(m.Name.ValueString())
}

func readNamespace(ctx context.Context, c *client.Client, m namespaceModel) (namespaceModel, error) {
	var p nsPolicies
	if err := c.Get(ctx, nsPath(m), &p); err != nil {
		return m, err
	}
	var fo failoverJSON
	if err := c.Get(ctx, nsPath(m)+"/primary", &fo); err != nil {
		return m, err
	}
	out := namespaceModel{
		ID:                       types.StringValue(m.Tenant.ValueString() + "/" + m.Name.ValueString()),
		Tenant:                   m.Tenant,
		Name:                     m.Name,
		ReplicationClusters:      stringSet(p.ReplicationClusters),
		PrimaryRegion:            types.StringNull(),
		MessageTTLSeconds:        types.Int64PointerValue(p.MessageTTL),
		Deduplication:            types.BoolPointerValue(p.Deduplication),
		AutoFailoverAfterSeconds: types.Int64Null(),
	}
	if fo.Mode == activeStandby {
		out.PrimaryRegion = types.StringValue(fo.Primary)
		if fo.AutoAfterSeconds > 0 {
			out.AutoFailoverAfterSeconds = types.Int64Value(fo.AutoAfterSeconds)
		}
	}
	if r := p.Retention; r != nil {
		out.Retention = &retentionModel{TimeInMinutes: types.Int64Value(r.Minutes), SizeInMB: types.Int64Value(r.SizeMB)}
	}
	out.BacklogQuota = backlogQuotaModels(p.BacklogQuotaMap)
	if a := p.AutoTopicCreation; a != nil {
		out.AutoTopicCreation = &autoTopicCreationModel{Allow: types.BoolValue(a.Allow), Type: types.StringValue(a.Type), Partitions: types.Int64PointerValue(a.Partitions)}
	}
	if sr := p.SyncReplication; sr != nil {
		out.SyncReplication = &syncReplicationModel{Regions: types.Int64Value(sr.Regions), FallbackAfterSeconds: types.Int64Value(sr.FallbackAfterSeconds)}
	}
	return out, nil
}

// policiesOf is the policies m asks for, in the server's JSON.
func policiesOf(ctx context.Context, m namespaceModel) nsPolicies {
	var p nsPolicies
	if known(m.ReplicationClusters) {
		p.ReplicationClusters = setStrings(ctx, m.ReplicationClusters)
	}
	if r := m.Retention; r != nil {
		p.Retention = &retentionJSON{Minutes: r.TimeInMinutes.ValueInt64(), SizeMB: r.SizeInMB.ValueInt64()}
	}
	p.MessageTTL = m.MessageTTLSeconds.ValueInt64Pointer()
	p.BacklogQuotaMap = backlogQuotaJSON(m.BacklogQuota)
	p.Deduplication = m.Deduplication.ValueBoolPointer()
	if a := m.AutoTopicCreation; a != nil {
		p.AutoTopicCreation = &autoTopicJSON{Allow: a.Allow.ValueBool(), Type: a.Type.ValueString(), Partitions: a.Partitions.ValueInt64Pointer()}
	}
	if sr := m.SyncReplication; sr != nil {
		p.SyncReplication = &syncReplicationJSON{Regions: sr.Regions.ValueInt64(), FallbackAfterSeconds: sr.FallbackAfterSeconds.ValueInt64()}
	}
	return p
}

// backlogQuotaModels are the quotas of the server's map; none is nil
// (the attribute is null).
func backlogQuotaModels(qs map[string]backlogQuotaJS) map[string]backlogQuotaModel {
	if len(qs) == 0 {
		return nil
	}
	out := map[string]backlogQuotaModel{}
	for k, q := range qs {
		out[k] = backlogQuotaModel{LimitSize: types.Int64Value(q.LimitSize), LimitTime: types.Int64Value(q.LimitTime), Policy: types.StringValue(q.Policy)}
	}
	return out
}

// backlogQuotaJSON is backlogQuotaModels the other way round.
func backlogQuotaJSON(qs map[string]backlogQuotaModel) map[string]backlogQuotaJS {
	if len(qs) == 0 {
		return nil
	}
	out := map[string]backlogQuotaJS{}
	for k, q := range qs {
		out[k] = backlogQuotaJS{LimitSize: q.LimitSize.ValueInt64(), LimitTime: q.LimitTime.ValueInt64(), Policy: q.Policy.ValueString()}
	}
	return out
}

func failoverOf(m namespaceModel) failoverJSON {
	if m.PrimaryRegion.IsNull() {
		return failoverJSON{Mode: activeActive}
	}
	return failoverJSON{Mode: activeStandby, Primary: m.PrimaryRegion.ValueString(), AutoAfterSeconds: m.AutoFailoverAfterSeconds.ValueInt64()}
}

// setFailover sets the mode and primary f says.
func setFailover(ctx context.Context, c *client.Client, path string, f failoverJSON) error {
	if f.Mode == activeActive {
		return c.Do(ctx, client.Request{Method: http.MethodDelete, Path: path + "/primary"})
	}
	// The delay is always sent: left out, the server would keep the one
	// it has.
	body := struct {
		Mode             string `json:"mode"`
		Primary          string `json:"primary"`
		AutoAfterSeconds int64  `json:"autoFailoverAfterSeconds"`
	}{f.Mode, f.Primary, f.AutoAfterSeconds}
	return c.Do(ctx, client.Request{Method: http.MethodPost, Path: path + "/primary", Body: body})
}

// createNamespace creates the namespace with its policies in one request,
// then sets its primary; when that fails the namespace is deleted again.
func createNamespace(ctx context.Context, c *client.Client, m namespaceModel) error {
	p := nsPath(m)
	if err := c.Do(ctx, client.Request{Method: http.MethodPut, Path: p, Body: policiesOf(ctx, m), RetryIf: client.IsExists}); err != nil {
		return err
	}
	if f := failoverOf(m); f.Mode == activeStandby {
		if err := setFailover(ctx, c, p, f); err != nil {
			if derr := c.Do(ctx, client.Request{Method: http.MethodDelete, Path: p}); derr != nil {
				return fmt.Errorf("%w (and removing the namespace again failed: %v)", err, derr)
			}
			return err
		}
	}
	return nil
}

// updateNamespace changes only what differs. Replication clusters, the
// primary and synchronous replication move in an order the server accepts
// whatever the change (it refuses to drop the primary from the clusters,
// and to leave fewer other clusters than synchronous replication waits
// for): first the union of the old and new clusters, then the primary and
// synchronous replication, then the new clusters.
func updateNamespace(ctx context.Context, c *client.Client, plan, state namespaceModel) error {
	p := nsPath(plan)
	want, have := policiesOf(ctx, plan), policiesOf(ctx, state)
	post := func(sub string, body any) error {
		return c.Do(ctx, client.Request{Method: http.MethodPost, Path: p + "/" + sub, Body: body})
	}
	del := func(sub string) error {
		return c.Do(ctx, client.Request{Method: http.MethodDelete, Path: p + "/" + sub})
	}

	wantF, haveF := failoverOf(plan), failoverOf(state)
	clusters := want.ReplicationClusters
	changeClusters := clusters != nil && !slices.Equal(clusters, have.ReplicationClusters)
	if changeClusters {
		union := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(have.ReplicationClusters), clusters...))))
		if !slices.Equal(union, have.ReplicationClusters) {
			if err := post("replication", union); err != nil {
				return err
			}
		}
	}
	if wantF != haveF {
		if err := setFailover(ctx, c, p, wantF); err != nil {
			return err
		}
	}
	if !reflect.DeepEqual(want.SyncReplication, have.SyncReplication) {
		var err error
		if want.SyncReplication == nil {
			err = del("syncReplication")
		} else {
			err = post("syncReplication", want.SyncReplication)
		}
		if err != nil {
			return err
		}
	}
	if changeClusters {
		if err := post("replication", clusters); err != nil {
			return err
		}
	}

	steps := []struct {
		sub        string
		want, have any
		null       bool
	}{
		{"retention", want.Retention, have.Retention, want.Retention == nil},
		{"messageTTL", want.MessageTTL, have.MessageTTL, want.MessageTTL == nil},
		{"deduplication", want.Deduplication, have.Deduplication, want.Deduplication == nil},
		{"autoTopicCreation", want.AutoTopicCreation, have.AutoTopicCreation, want.AutoTopicCreation == nil},
	}
	for _, s := range steps {
		if reflect.DeepEqual(s.want, s.have) {
			continue
		}
		var err error
		if s.null {
			err = del(s.sub)
		} else {
			err = post(s.sub, s.want)
		}
		if err != nil {
			return err
		}
	}
	for _, typ := range slices.Sorted(func(yield func(string) bool) {
		for k := range have.BacklogQuotaMap {
			if !yield(k) {
				return
			}
		}
	}) {
		if _, ok := want.BacklogQuotaMap[typ]; !ok {
			if err := del("backlogQuota?backlogQuotaType=" + esc(typ)); err != nil {
				return err
			}
		}
	}
	for typ, q := range want.BacklogQuotaMap {
		if h, ok := have.BacklogQuotaMap[typ]; ok && h == q {
			continue
		}
		if err := post("backlogQuota?backlogQuotaType="+esc(typ), q); err != nil {
			return err
		}
	}
	return nil
}

// deleteNamespace deletes the namespace; one whose topics are still going
// away is retried (a namespace that keeps its topics is not deleted, and
// the server's reason says why).
func deleteNamespace(ctx context.Context, c *client.Client, m namespaceModel) error {
	return c.Do(ctx, client.Request{Method: http.MethodDelete, Path: nsPath(m), RetryIf: client.IsNotEmpty})
}

func validateNamespace(ctx context.Context, cfg tfsdk.Config) diag.Diagnostics {
	var d diag.Diagnostics
	var primary types.String
	var clusters types.Set
	var auto types.Int64
	d.Append(cfg.GetAttribute(ctx, path.Root("primary_region"), &primary)...)
	d.Append(cfg.GetAttribute(ctx, path.Root("replication_clusters"), &clusters)...)
	d.Append(cfg.GetAttribute(ctx, path.Root("auto_failover_after_seconds"), &auto)...)
	if d.HasError() {
		return d
	}
	if known(clusters) && len(clusters.Elements()) == 0 {
		d.AddAttributeError(path.Root("replication_clusters"), "No replication clusters",
			"replication_clusters needs at least one cluster; leave it out to keep the one the server picks")
	}
	var topicType types.String
	var parts types.Int64
	d.Append(cfg.GetAttribute(ctx, path.Root("auto_topic_creation").AtName("type"), &topicType)...)
	d.Append(cfg.GetAttribute(ctx, path.Root("auto_topic_creation").AtName("partitions"), &parts)...)
	switch {
	case d.HasError():
		return d
	case topicType.ValueString() == "partitioned" && !parts.IsUnknown() && (parts.IsNull() || parts.ValueInt64() < 1):
		d.AddAttributeError(path.Root("auto_topic_creation").AtName("partitions"), "Partitions needed",
			"auto_topic_creation of type partitioned needs partitions (1 or more)")
	case topicType.ValueString() == "non-partitioned" && !parts.IsNull():
		d.AddAttributeError(path.Root("auto_topic_creation").AtName("partitions"), "Partitions of a non-partitioned topic",
			"auto_topic_creation of type non-partitioned takes no partitions")
	}
	if known(primary) && known(clusters) {
		cs := setStrings(ctx, clusters)
		if !slices.Contains(cs, primary.ValueString()) {
			d.AddAttributeError(path.Root("primary_region"), "Primary region not replicated to",
				fmt.Sprintf("primary_region %q is not one of replication_clusters [%s]", primary.ValueString(), strings.Join(cs, ", ")))
		}
	}
	if primary.IsNull() && !auto.IsNull() {
		d.AddAttributeError(path.Root("auto_failover_after_seconds"), "Automatic failover without a primary",
			"auto_failover_after_seconds needs primary_region (an active-active namespace has no primary to fail over from)")
	}
	var syncRegions types.Int64
	d.Append(cfg.GetAttribute(ctx, path.Root("sync_replication").AtName("regions"), &syncRegions)...)
	if d.HasError() || !known(syncRegions) || clusters.IsUnknown() {
		return d
	}
	r := syncRegions.ValueInt64()
	switch {
	case clusters.IsNull():
		// Left out, the server gives the namespace one cluster.
		d.AddAttributeError(path.Root("sync_replication").AtName("regions"), "Too few replication clusters for synchronous replication",
			fmt.Sprintf("sync_replication waits for %d other regions, but without replication_clusters the namespace gets one cluster: list at least %d", r, r+1))
	case r >= int64(len(clusters.Elements())):
		d.AddAttributeError(path.Root("sync_replication").AtName("regions"), "Too few replication clusters for synchronous replication",
			fmt.Sprintf("sync_replication waits for %d other regions, but replication_clusters has %d: it needs at least %d", r, len(clusters.Elements()), r+1))
	}
	return d
}
