package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/isobar-mq/isobar/terraform/provider/client"
	"github.com/isobar-mq/isobar/topic"
)

type subscriptionModel struct {
	ID              types.String `tfsdk:"id"`
	Topic           types.String `tfsdk:"topic"`
	Name            types.String `tfsdk:"name"`
	InitialPosition types.String `tfsdk:"initial_position"`
}

// validTopicFull checks a persistent topic's full name.
var validTopicFull = nameValidator{"topic", func(s string) error {
	if !strings.HasPrefix(s, "persistent://") {
		return errors.New("topic " + s + ": want a persistent topic's full name, persistent://tenant/namespace/topic")
	}
	_, err := topic.Parse(s)
	return err
}}

var subscriptionKind = &kind[subscriptionModel]{
	name: "subscription",
	description: "A durable subscription on a topic (on every partition of a partitioned topic), made before any consumer so that " +
		"messages published from then on are kept for it.",
	keys:       []string{"topic", "name"},
	importHelp: "`persistent://tenant/namespace/topic/subscription` (the topic's full name, a slash, the subscription's name); `initial_position` is read back from the subscription's properties when this provider made it, and otherwise taken from the configuration without replacing the subscription",
	attributes: map[string]schema.Attribute{
		"id": idAttribute("`persistent://tenant/namespace/topic/subscription`."),
		"topic": schema.StringAttribute{Required: true, MarkdownDescription: "The topic's full name, `persistent://tenant/namespace/topic`; it must exist " +
			"(a missing topic is refused rather than created with the subscription). Changing it replaces the subscription.",
			Validators: []validator.String{validTopicFull}, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"name": schema.StringAttribute{Required: true, MarkdownDescription: "The subscription's name. Changing it replaces the subscription.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"initial_position": schema.StringAttribute{
			Optional: true, Computed: true,
			MarkdownDescription: "Where the subscription starts when it is made: `latest` (the default) or `earliest`. It is kept in the " +
				"subscription's properties (`" + initialPositionProperty + "`) and read back from there; changing it replaces the subscription. " +
				"A subscription imported without it (made by a client) takes the configured value without being replaced.",
			Validators:    []validator.String{oneOf{"latest", "earliest"}},
			PlanModifiers: []planmodifier.String{replaceIfPositionKnown, stringplanmodifier.UseStateForUnknown()},
		},
	},
	fromID: func(id string) (subscriptionModel, error) {
		const prefix = "persistent://"
		rest, ok := strings.CutPrefix(id, prefix)
		parts := strings.SplitN(rest, "/", 4)
		if !ok || len(parts) != 4 || parts[3] == "" {
			return subscriptionModel{}, errors.New("want persistent://tenant/namespace/topic/subscription")
		}
		t := prefix + strings.Join(parts[:3], "/")
		if err := validTopicFull.check(t); err != nil {
			return subscriptionModel{}, err
		}
		return subscriptionModel{Topic: types.StringValue(t), Name: types.StringValue(parts[3])}, nil
	},
	read: func(ctx context.Context, c *client.Client, m subscriptionModel) (subscriptionModel, error) {
		p, err := subscriptionTopicPath(m)
		if err != nil {
			return m, err
		}
		var subs []string
		if err := c.Get(ctx, p+"/subscriptions", &subs); err != nil {
			return m, err
		}
		if !slices.Contains(subs, m.Name.ValueString()) {
			return m, &client.Error{Method: http.MethodGet, Path: p + "/subscriptions", Status: http.StatusNotFound,
				Reason: "subscription " + m.Name.ValueString() + " does not exist on " + m.Topic.ValueString()}
		}
		// Every other region where the topic has a copy must have it too:
		// one deleted there is drift.
		others, err := topicRegions(ctx, c, m.Topic.ValueString())
		if err != nil {
			return m, err
		}
		for _, rc := range others {
			var subs []string
			err := rc.c.Get(ctx, p+"/subscriptions", &subs)
			switch {
			case err == nil && !slices.Contains(subs, m.Name.ValueString()):
				return m, &client.Error{Method: http.MethodGet, Path: p + "/subscriptions", Status: http.StatusNotFound,
					Reason: "subscription " + m.Name.ValueString() + " does not exist on " + m.Topic.ValueString() + " in region " + rc.name}
			case err != nil && !unreachable(err) && !client.IsNotFound(err):
				return m, fmt.Errorf("region %s: %w", rc.name, err)
			}
			// (A region with no copy of the topic, or out of reach, has
			// nothing to compare.)
		}
		pos := m.InitialPosition
		var props map[string]string
		if err := c.Get(ctx, p+"/subscription/"+esc(m.Name.ValueString())+"/properties", &props); err == nil {
			if v := props[initialPositionProperty]; v == "latest" || v == "earliest" {
				pos = types.StringValue(v)
			}
		}
		if !known(pos) {
			pos = types.StringNull() // not made here: the configuration says
		}
		return subscriptionModel{
			ID: types.StringValue(m.Topic.ValueString() + "/" + m.Name.ValueString()), Topic: m.Topic, Name: m.Name, InitialPosition: pos,
		}, nil
	},
	create: func(ctx context.Context, c *client.Client, m subscriptionModel) error {
		p, err := subscriptionTopicPath(m)
		if err != nil {
			return err
		}
		// The server would create a missing topic with the subscription,
		// and nothing would delete it again.
		n, _ := topic.Parse(m.Topic.ValueString())
		if _, err := topicPartitions(ctx, c, n); err != nil {
			if client.IsNotFound(err) {
				return fmt.Errorf("topic %s does not exist (create it first, e.g. with isobar_topic): %w", n, err)
			}
			return err
		}
		pos := m.InitialPosition.ValueString()
		if pos == "" {
			pos = "latest"
		}
		body := map[string]any{"properties": map[string]string{initialPositionProperty: pos}}
		if pos == "earliest" {
			body["ledgerId"], body["entryId"] = -1, -1
		}
		req := client.Request{Method: http.MethodPut, Path: p + "/subscription/" + esc(m.Name.ValueString()), Body: body}
		if err := c.Do(ctx, req); err != nil && !client.IsExists(err) {
			return err
		}
		// And in every other region of the topic's replication clusters,
		// so that it is there, with its backlog, after a failover.
		others, err := topicRegions(ctx, c, m.Topic.ValueString())
		if err != nil {
			return err
		}
		for _, rc := range others {
			if err := rc.c.Do(ctx, req); err != nil && !client.IsExists(err) && !unreachable(err) {
				return fmt.Errorf("region %s: %w", rc.name, err)
			}
		}
		return nil
	},
	update: func(context.Context, *client.Client, subscriptionModel, subscriptionModel) error {
		return nil // every attribute replaces the subscription
	},
	delete: func(ctx context.Context, c *client.Client, m subscriptionModel) error {
		p, err := subscriptionTopicPath(m)
		if err != nil {
			return err
		}
		req := client.Request{Method: http.MethodDelete, Path: p + "/subscription/" + esc(m.Name.ValueString())}
		if err := c.Do(ctx, req); err != nil && !client.IsNotFound(err) {
			return err
		}
		others, err := topicRegions(ctx, c, m.Topic.ValueString())
		if err != nil {
			return err
		}
		for _, rc := range others {
			if err := rc.c.Do(ctx, req); err != nil && !client.IsNotFound(err) && !unreachable(err) {
				return fmt.Errorf("region %s: %w", rc.name, err)
			}
		}
		return nil
	},
}

// initialPositionProperty is the subscription property that keeps where
// the provider made the subscription start.
const initialPositionProperty = "isobar.initialPosition"

// replaceIfPositionKnown replaces the subscription when its initial
// position changes, but not when the state has none (a subscription
// imported that a client made): the configured value is then taken as
// it is.
var replaceIfPositionKnown = stringplanmodifier.RequiresReplaceIf(
	func(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
		resp.RequiresReplace = !req.StateValue.IsNull() && !req.ConfigValue.IsNull() && !req.PlanValue.Equal(req.StateValue)
	},
	"Replaces the subscription when its initial position changes.",
	"Replaces the subscription when its initial position changes.",
)

// regionClient is a client for one other region's admin API.
type regionClient struct {
	name string
	c    *client.Client
}

// otherRegionRetry bounds the retries of a call to another region: one
// that is out of reach is skipped, not waited for.
const otherRegionRetry = 2 * time.Second

// topicRegions returns clients for the regions of topic's replication
// clusters (its own, else its namespace's) other than the one c talks
// to, by the web service URLs of their cluster records. A cluster without
// a URL for c's scheme is left out.
func topicRegions(ctx context.Context, c *client.Client, topicName string) ([]regionClient, error) {
	n, err := topic.Parse(topicName)
	if err != nil {
		return nil, err
	}
	var clusters []string
	if err := c.Get(ctx, topicPath(n)+"/replication", &clusters); err != nil && !client.IsNotFound(err) {
		return nil, err
	}
	if len(clusters) == 0 {
		if err := c.Get(ctx, "/admin/v2/namespaces/"+esc(n.Tenant)+"/"+esc(n.Namespace)+"/replication", &clusters); err != nil {
			return nil, err
		}
	}
	if len(clusters) < 2 {
		return nil, nil
	}
	self := c.Current()
	var out []regionClient
	for _, name := range clusters {
		var d clusterData
		if err := c.Get(ctx, "/admin/v2/clusters/"+esc(name), &d); err != nil {
			return nil, err
		}
		u := d.ServiceURL
		if c.TLS() {
			u = d.ServiceURLTLS
		}
		if u == "" || sameURL(u, self) {
			continue
		}
		rc, err := c.At(u, otherRegionRetry)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
		out = append(out, regionClient{name: name, c: rc})
	}
	return out, nil
}

// unreachable reports whether err is a failure to reach a region at all.
func unreachable(err error) bool {
	var e *client.Error
	return !errors.As(err, &e) || e.Status == http.StatusServiceUnavailable || e.Status == http.StatusBadGateway || e.Status == http.StatusGatewayTimeout
}

func sameURL(a, b string) bool { return strings.TrimRight(a, "/") == strings.TrimRight(b, "/") }

func subscriptionTopicPath(m subscriptionModel) (string, error) {
	n, err := topic.Parse(m.Topic.ValueString())
	if err != nil {
		return "", err
	}
	return topicPath(n), nil
}
