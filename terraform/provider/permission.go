package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/isobar-mq/isobar/terraform/provider/client"
	"github.com/isobar-mq/isobar/topic"
)

type permissionGrantModel struct {
	ID        types.String `tfsdk:"id"`
	Namespace types.String `tfsdk:"namespace"`
	Topic     types.String `tfsdk:"topic"`
	Role      types.String `tfsdk:"role"`
	Actions   types.Set    `tfsdk:"actions"`
}

// authActions are the actions a role may be granted: Pulsar's AuthAction
// names, as the server's store (globalconfig/policy.AuthActions, which a
// test compares them with) accepts them.
var authActions = []string{"consume", "functions", "packages", "produce", "sinks", "sources"}

// maxRoleLen bounds a role's name, in bytes (policy.MaxRoleLen).
const maxRoleLen = 256

// validRole checks a role's name as the server does: 1 to 256 bytes of
// printable UTF-8.
var validRole = nameValidator{"role", func(s string) error {
	switch {
	case s == "":
		return errors.New("empty role")
	case len(s) > maxRoleLen:
		return fmt.Errorf("role of %d bytes, more than %d", len(s), maxRoleLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("role %q is not UTF-8", s)
	}
	for _, r := range s {
		if unicode.IsControl(r) || !unicode.IsPrint(r) && r != ' ' {
			return fmt.Errorf("role %q has a control or unprintable character", s)
		}
	}
	return nil
}}

// validNamespaceFull checks a namespace given as tenant/namespace.
var validNamespaceFull = nameValidator{"namespace", func(s string) error {
	_, _, err := topic.ParseNamespace(s)
	return err
}}

// validTopicAnyDomain checks a topic's full name, persistent or not.
var validTopicAnyDomain = nameValidator{"topic", func(s string) error {
	if !strings.HasPrefix(s, "persistent://") && !strings.HasPrefix(s, "non-persistent://") {
		return errors.New("topic " + s + ": want a topic's full name, persistent://tenant/namespace/topic (or non-persistent://...)")
	}
	n, err := topic.Parse(s)
	if err == nil && n.String() != s {
		return fmt.Errorf("topic %s: want its full name %s", s, n)
	}
	return err
}}

// actionsValidator checks a set of actions at plan time: at least one,
// each one of authActions.
type actionsValidator struct{}

func (actionsValidator) Description(context.Context) string {
	return "at least one of " + strings.Join(authActions, ", ")
}

func (v actionsValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (actionsValidator) ValidateSet(ctx context.Context, req validator.SetRequest, resp *validator.SetResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if len(req.ConfigValue.Elements()) == 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "No actions", "give at least one of "+strings.Join(authActions, ", ")+" (to grant nothing, remove the resource)")
		return
	}
	for _, e := range req.ConfigValue.Elements() {
		s, ok := e.(types.String)
		if !ok || !known(s) {
			continue
		}
		if !slices.Contains(authActions, s.ValueString()) {
			resp.Diagnostics.AddAttributeError(req.Path, "Invalid action", fmt.Sprintf("%q is not an action; want some of %s", s.ValueString(), strings.Join(authActions, ", ")))
		}
	}
}

var permissionGrantKind = &kind[permissionGrantModel]{
	name: "permission_grant",
	description: "A role's permission grant on a namespace (every topic in it) or on one topic: the actions the role may take there, " +
		"as Pulsar's `grant-permission` makes them. Each resource manages one role's grant on one namespace or topic and leaves " +
		"the other roles' grants alone. Grants are stored now and enforced once the brokers' authorization is on, as in Pulsar.",
	keys: []string{"namespace", "topic", "role"},
	importHelp: "`tenant/namespace:role` for a namespace's grant, `persistent://tenant/namespace/topic:role` for a topic's " +
		"(split at the first `:` after the namespace's or topic's name: a role may contain `:`, a name to import may not)",
	attributes: map[string]schema.Attribute{
		"id": idAttribute("`tenant/namespace:role` or `persistent://tenant/namespace/topic:role`."),
		"namespace": schema.StringAttribute{Optional: true, MarkdownDescription: "The namespace, `tenant/namespace`, whose every topic " +
			"the grant covers; exactly one of `namespace` and `topic` is given. Changing it replaces the grant.",
			Validators: []validator.String{validNamespaceFull}, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"topic": schema.StringAttribute{Optional: true, MarkdownDescription: "The topic's full name, `persistent://tenant/namespace/topic` " +
			"(or `non-persistent://...`); a partitioned topic's grant covers its partitions. The topic need not exist yet. Changing it replaces the grant.",
			Validators: []validator.String{validTopicAnyDomain}, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"role": schema.StringAttribute{Required: true, MarkdownDescription: "The role granted (up to 256 bytes, printable). Changing it replaces the grant.",
			Validators: []validator.String{validRole}, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"actions": schema.SetAttribute{ElementType: types.StringType, Required: true,
			MarkdownDescription: "What the role may do: some of `" + strings.Join(authActions, "`, `") + "`. " +
				"A change is made in place; the order does not matter.",
			Validators: []validator.Set{actionsValidator{}}},
	},
	validate: namespaceOrTopic("a grant is on a namespace (namespace = \"tenant/namespace\") or on one topic (topic = \"persistent://tenant/namespace/topic\")"),
	fromID: func(id string) (permissionGrantModel, error) {
		m := permissionGrantModel{Namespace: types.StringNull(), Topic: types.StringNull()}
		if d, rest, ok := strings.Cut(id, "://"); ok && (d == "persistent" || d == "non-persistent") {
			parts := strings.SplitN(rest, "/", 3)
			if len(parts) != 3 {
				return m, errors.New("want persistent://tenant/namespace/topic:role")
			}
			local, role, ok := strings.Cut(parts[2], ":")
			if !ok || role == "" {
				return m, errors.New("no role after the topic's name")
			}
			t := d + "://" + parts[0] + "/" + parts[1] + "/" + local
			if err := validTopicAnyDomain.check(t); err != nil {
				return m, err
			}
			m.Topic, m.Role = types.StringValue(t), types.StringValue(role)
			return m, nil
		}
		tenant, rest, _ := strings.Cut(id, "/")
		ns, role, ok := strings.Cut(rest, ":")
		if !ok || role == "" {
			return m, errors.New("want tenant/namespace:role")
		}
		if err := validNamespaceFull.check(tenant + "/" + ns); err != nil {
			return m, err
		}
		m.Namespace, m.Role = types.StringValue(tenant+"/"+ns), types.StringValue(role)
		return m, nil
	},
	read:   readPermissionGrant,
	create: putPermissionGrant,
	update: func(ctx context.Context, c *client.Client, plan, _ permissionGrantModel) error {
		return putPermissionGrant(ctx, c, plan) // a grant replaces the role's actions
	},
	delete: func(ctx context.Context, c *client.Client, m permissionGrantModel) error {
		p, err := grantPath(m)
		if err != nil {
			return err
		}
		err = c.Do(ctx, client.Request{Method: http.MethodDelete, Path: p})
		var e *client.Error
		if errors.As(err, &e) && e.Status == http.StatusPreconditionFailed && strings.Contains(e.Reason, "not set at the topic level") {
			return nil // revoked out of band already
		}
		return err
	},
}

// namespaceOrTopic is a validate func requiring exactly one of the
// attributes namespace and topic (values not yet known are skipped);
// detail says what each means.
func namespaceOrTopic(detail string) func(context.Context, tfsdk.Config) diag.Diagnostics {
	return func(ctx context.Context, cfg tfsdk.Config) diag.Diagnostics {
		var d diag.Diagnostics
		var ns, tp types.String
		d.Append(cfg.GetAttribute(ctx, path.Root("namespace"), &ns)...)
		d.Append(cfg.GetAttribute(ctx, path.Root("topic"), &tp)...)
		if d.HasError() || ns.IsUnknown() || tp.IsUnknown() {
			return d
		}
		if ns.IsNull() == tp.IsNull() {
			d.AddAttributeError(path.Root("namespace"), "Give exactly one of namespace and topic", detail)
		}
		return d
	}
}

// grantTarget returns the namespace ("tenant/namespace") of m's grant
// and, for a topic's grant, the topic; exactly one of namespace and
// topic must be set.
func grantTarget(m permissionGrantModel) (string, *topic.Name, error) {
	hasNS, hasTopic := known(m.Namespace) && m.Namespace.ValueString() != "", known(m.Topic) && m.Topic.ValueString() != ""
	switch {
	case hasNS == hasTopic:
		return "", nil, errors.New("give exactly one of namespace and topic")
	case hasNS:
		t, n, err := topic.ParseNamespace(m.Namespace.ValueString())
		if err != nil {
			return "", nil, err
		}
		return t + "/" + n, nil, nil
	}
	if err := validTopicAnyDomain.check(m.Topic.ValueString()); err != nil {
		return "", nil, err
	}
	n, _ := topic.Parse(m.Topic.ValueString())
	return n.NamespaceName(), &n, nil
}

// grantPath is the REST path of m's grant (POST and DELETE).
func grantPath(m permissionGrantModel) (string, error) {
	ns, t, err := grantTarget(m)
	if err != nil {
		return "", err
	}
	role := "/permissions/" + esc(m.Role.ValueString())
	if t == nil {
		tenant, name, _ := strings.Cut(ns, "/")
		return "/admin/v2/namespaces/" + esc(tenant) + "/" + esc(name) + role, nil
	}
	return "/admin/v2/" + string(t.Domain) + "/" + esc(t.Tenant) + "/" + esc(t.Namespace) + "/" + esc(t.Local) + role, nil
}

func putPermissionGrant(ctx context.Context, c *client.Client, m permissionGrantModel) error {
	p, err := grantPath(m)
	if err != nil {
		return err
	}
	return c.Do(ctx, client.Request{Method: http.MethodPost, Path: p, Body: setStrings(ctx, m.Actions)})
}

// readPermissionGrant reads the role's own grant on the namespace or the
// topic from the namespace's policies (auth_policies): for a topic, only
// the topic's own grant, not the namespace's it inherits, so that a
// namespace grant of the same role never shows as drift here.
func readPermissionGrant(ctx context.Context, c *client.Client, m permissionGrantModel) (permissionGrantModel, error) {
	ns, t, err := grantTarget(m)
	if err != nil {
		return m, err
	}
	tenant, name, _ := strings.Cut(ns, "/")
	nsp := "/admin/v2/namespaces/" + esc(tenant) + "/" + esc(name)
	var pol struct {
		Auth struct {
			NamespaceAuth   map[string][]string            `json:"namespace_auth"`
			DestinationAuth map[string]map[string][]string `json:"destination_auth"`
		} `json:"auth_policies"`
	}
	if err := c.Get(ctx, nsp, &pol); err != nil {
		return m, err
	}
	role := m.Role.ValueString()
	grants, on, id := pol.Auth.NamespaceAuth, "namespace "+ns, ns+":"+role
	if t != nil {
		grants, on, id = pol.Auth.DestinationAuth[t.String()], "topic "+t.String(), t.String()+":"+role
	}
	actions, ok := grants[role]
	if !ok {
		return m, &client.Error{Method: http.MethodGet, Path: nsp, Status: http.StatusNotFound,
			Reason: "role " + role + " has no grant of its own on " + on}
	}
	out := permissionGrantModel{ID: types.StringValue(id), Namespace: types.StringNull(), Topic: types.StringNull(),
		Role: types.StringValue(role), Actions: stringSet(actions)}
	if t == nil {
		out.Namespace = types.StringValue(ns)
	} else {
		out.Topic = types.StringValue(t.String())
	}
	return out, nil
}
