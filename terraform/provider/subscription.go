package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

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
	importHelp: "`persistent://tenant/namespace/topic/subscription` (the topic's full name, a slash, the subscription's name); `initial_position` is then `latest`",
	attributes: map[string]schema.Attribute{
		"id": idAttribute("`persistent://tenant/namespace/topic/subscription`."),
		"topic": schema.StringAttribute{Required: true, MarkdownDescription: "The topic's full name, `persistent://tenant/namespace/topic`; it must exist " +
			"(a missing topic is refused rather than created with the subscription). Changing it replaces the subscription.",
			Validators: []validator.String{validTopicFull}, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"name": schema.StringAttribute{Required: true, MarkdownDescription: "The subscription's name. Changing it replaces the subscription.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"initial_position": schema.StringAttribute{
			Optional: true, Computed: true,
			MarkdownDescription: "Where the subscription starts when it is made: `latest` (the default) or `earliest`. The server does not keep it, " +
				"so it is not read back; changing it replaces the subscription.",
			Validators:    []validator.String{oneOf{"latest", "earliest"}},
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIfConfigured(), stringplanmodifier.UseStateForUnknown()},
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
		pos := m.InitialPosition
		if !known(pos) {
			pos = types.StringValue("latest")
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
		var body any
		if m.InitialPosition.ValueString() == "earliest" {
			body = map[string]int64{"ledgerId": -1, "entryId": -1}
		}
		return c.Do(ctx, client.Request{Method: http.MethodPut, Path: p + "/subscription/" + esc(m.Name.ValueString()), Body: body})
	},
	update: func(context.Context, *client.Client, subscriptionModel, subscriptionModel) error {
		return nil // every attribute replaces the subscription
	},
	delete: func(ctx context.Context, c *client.Client, m subscriptionModel) error {
		p, err := subscriptionTopicPath(m)
		if err != nil {
			return err
		}
		return c.Do(ctx, client.Request{Method: http.MethodDelete, Path: p + "/subscription/" + esc(m.Name.ValueString())})
	},
}

func subscriptionTopicPath(m subscriptionModel) (string, error) {
	n, err := topic.Parse(m.Topic.ValueString())
	if err != nil {
		return "", err
	}
	return topicPath(n), nil
}
