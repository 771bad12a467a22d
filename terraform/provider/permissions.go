package provider

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/isobar-mq/isobar/terraform/provider/client"
)

// permissionsModel is a namespace's or topic's whole access list.
type permissionsModel struct {
	ID        types.String `tfsdk:"id"`
	Namespace types.String `tfsdk:"namespace"`
	Topic     types.String `tfsdk:"topic"`
	Grants    types.Map    `tfsdk:"grants"`
}

var actionSetType = types.SetType{ElemType: types.StringType}

// grantsValidator checks each role and each action of a grants map.
type grantsValidator struct{}

func (grantsValidator) Description(context.Context) string {
	return "roles of printable UTF-8, actions among " + strings.Join(authActions, ", ")
}
func (v grantsValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (grantsValidator) ValidateMap(ctx context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for role, v := range req.ConfigValue.Elements() {
		if err := validRole.check(role); err != nil {
			resp.Diagnostics.AddAttributeError(req.Path, "Invalid role", err.Error())
		}
		set, ok := v.(types.Set)
		if !ok || set.IsUnknown() || set.IsNull() {
			continue
		}
		for _, a := range setStrings(ctx, set) {
			if !slices.Contains(authActions, a) {
				resp.Diagnostics.AddAttributeError(req.Path, "Invalid action",
					fmt.Sprintf("role %q: %q is not an action; want some of %s", role, a, strings.Join(authActions, ", ")))
			}
		}
	}
}

var permissionsKind = &kind[permissionsModel]{
	name: "permissions",
	description: "The whole access list of a namespace (every topic in it) or of one topic: exactly these roles, with these actions. " +
		"A role granted out of band (admin REST, `isobar admin`) shows as drift and the next apply revokes it. Use it or " +
		"`isobar_permission_grant` on a namespace or topic, not both.",
	keys:       []string{"namespace", "topic"},
	importHelp: "`tenant/namespace` for a namespace's list, `persistent://tenant/namespace/topic` for a topic's own",
	attributes: map[string]schema.Attribute{
		"id": idAttribute("`tenant/namespace` or `persistent://tenant/namespace/topic`."),
		"namespace": schema.StringAttribute{Optional: true, MarkdownDescription: "The namespace, `tenant/namespace`; exactly one of " +
			"`namespace` and `topic` is given. Changing it replaces the resource.",
			Validators: []validator.String{validNamespaceFull}, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"topic": schema.StringAttribute{Optional: true, MarkdownDescription: "The topic's full name: its own grants (the namespace's, " +
			"which it inherits, are the namespace's resource's). Changing it replaces the resource.",
			Validators: []validator.String{validTopicAnyDomain}, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"grants": schema.MapAttribute{ElementType: actionSetType, Required: true,
			MarkdownDescription: "Role to the actions it may take (some of `" + strings.Join(authActions, "`, `") + "`). Every other " +
				"role's grant there is revoked. `{}` grants nothing to anyone.",
			Validators: []validator.Map{grantsValidator{}}},
	},
	validate: namespaceOrTopic("an access list is a namespace's (namespace = \"tenant/namespace\") or one topic's (topic = \"persistent://tenant/namespace/topic\")"),
	fromID: func(id string) (permissionsModel, error) {
		m := permissionsModel{Namespace: types.StringNull(), Topic: types.StringNull()}
		if strings.Contains(id, "://") {
			if err := validTopicAnyDomain.check(id); err != nil {
				return m, err
			}
			m.Topic = types.StringValue(id)
			return m, nil
		}
		if err := validNamespaceFull.check(id); err != nil {
			return m, err
		}
		m.Namespace = types.StringValue(id)
		return m, nil
	},
	read: func(ctx context.Context, c *client.Client, m permissionsModel) (permissionsModel, error) {
		own, err := ownGrants(ctx, c, m)
		if err != nil {
			return m, err
		}
		elems := map[string]attr.Value{}
		for role, actions := range own {
			slices.Sort(actions)
			elems[role] = stringSet(actions)
		}
		out := permissionsModel{ID: m.ID, Namespace: m.Namespace, Topic: m.Topic, Grants: types.MapValueMust(actionSetType, elems)}
		if known(m.Topic) && m.Topic.ValueString() != "" {
			out.ID, out.Namespace = m.Topic, types.StringNull()
		} else {
			out.ID, out.Topic = m.Namespace, types.StringNull()
		}
		return out, nil
	},
	create: func(ctx context.Context, c *client.Client, plan permissionsModel) error {
		return applyGrants(ctx, c, plan, wantedGrants(ctx, plan))
	},
	update: func(ctx context.Context, c *client.Client, plan, _ permissionsModel) error {
		return applyGrants(ctx, c, plan, wantedGrants(ctx, plan))
	},
	delete: func(ctx context.Context, c *client.Client, state permissionsModel) error {
		err := applyGrants(ctx, c, state, map[string][]string{})
		if client.IsNotFound(err) {
			return nil // the namespace is gone, and its grants with it
		}
		return err
	},
}

// asGrant is m's target as a single grant's model (for grantTarget and
// grantPath).
func asGrant(m permissionsModel, role string) permissionGrantModel {
	return permissionGrantModel{Namespace: m.Namespace, Topic: m.Topic, Role: types.StringValue(role)}
}

// ownGrants reads the namespace's grants, or the topic's own, from the
// namespace's policies.
func ownGrants(ctx context.Context, c *client.Client, m permissionsModel) (map[string][]string, error) {
	ns, t, err := grantTarget(asGrant(m, ""))
	if err != nil {
		return nil, err
	}
	tenant, name, _ := strings.Cut(ns, "/")
	var pol struct {
		Auth struct {
			NamespaceAuth   map[string][]string            `json:"namespace_auth"`
			DestinationAuth map[string]map[string][]string `json:"destination_auth"`
		} `json:"auth_policies"`
	}
	if err := c.Get(ctx, "/admin/v2/namespaces/"+esc(tenant)+"/"+esc(name), &pol); err != nil {
		return nil, err
	}
	grants := pol.Auth.NamespaceAuth
	if t != nil {
		grants = pol.Auth.DestinationAuth[t.String()]
	}
	if grants == nil {
		grants = map[string][]string{}
	}
	return grants, nil
}

// wantedGrants are the grants plan asks for.
func wantedGrants(ctx context.Context, plan permissionsModel) map[string][]string {
	out := map[string][]string{}
	for role, v := range plan.Grants.Elements() {
		if s, ok := v.(types.Set); ok {
			out[role] = setStrings(ctx, s)
		}
	}
	return out
}

// applyGrants makes m's target's own grants exactly want: grants what
// differs, revokes the roles want leaves out.
func applyGrants(ctx context.Context, c *client.Client, m permissionsModel, want map[string][]string) error {
	have, err := ownGrants(ctx, c, m)
	if err != nil {
		return err
	}
	roles := make([]string, 0, len(want))
	for role := range want {
		roles = append(roles, role)
	}
	slices.Sort(roles)
	for _, role := range roles {
		cur := slices.Clone(have[role])
		slices.Sort(cur)
		if _, ok := have[role]; ok && slices.Equal(cur, want[role]) {
			continue
		}
		p, err := grantPath(asGrant(m, role))
		if err != nil {
			return err
		}
		if err := c.Do(ctx, client.Request{Method: http.MethodPost, Path: p, Body: want[role]}); err != nil {
			return fmt.Errorf("grant %s: %w", role, err)
		}
	}
	for role := range have {
		if _, ok := want[role]; ok {
			continue
		}
		p, err := grantPath(asGrant(m, role))
		if err != nil {
			return err
		}
		if err := c.Do(ctx, client.Request{Method: http.MethodDelete, Path: p}); err != nil {
			return fmt.Errorf("revoke %s: %w", role, err)
		}
	}
	return nil
}
