package broker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/broker/dynconfig"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

func inactivePolicies(mode string, secs int, on bool) *policy.InactiveTopicPolicies {
	return &policy.InactiveTopicPolicies{InactiveTopicDeleteMode: mode, MaxInactiveDurationSeconds: secs, DeleteWhileInactive: on}
}

// stored reports which of locals are topics of ns stored in the region.
func stored(t *testing.T, e *env, ns string, locals ...string) map[string]bool {
	t.Helper()
	names, err := e.b.AdminAPI().Topics.ListTopics(context.Background(), ns, topic.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range locals {
		out[l] = slices.Contains(names, "persistent://"+ns+"/"+l)
	}
	return out
}

func wantStored(t *testing.T, e *env, ns string, want map[string]bool) {
	t.Helper()
	var locals []string
	for l := range want {
		locals = append(locals, l)
	}
	got := stored(t, e, ns, locals...)
	for l, w := range want {
		if got[l] != w {
			t.Fatalf("%s/%s stored: %v, want %v (all: %v)", ns, l, got[l], w, got)
		}
	}
}

// TestInactiveTopicsDeleted: with a namespace's inactive topic policy on,
// the maintenance round deletes a topic that has had no producer, no
// consumer and no message for longer than the policy's duration and has
// no subscription; a topic with a producer, a subscription (in
// delete_when_no_subscriptions mode), recent activity, unlimited
// retention or a policy of its own that says no is kept. In
// delete_when_subscriptions_caught_up mode a subscription with a backlog
// keeps its topic until the backlog is gone.
func TestInactiveTopicsDeleted(t *testing.T) {
	const ns = "public/idle"
	e, clk := policyEnv(t, ns, &policy.Policies{InactiveTopicPolicies: inactivePolicies(policy.DeleteWhenNoSubscriptions, 60, true)})
	ctx := context.Background()
	adm := e.b.AdminAPI().Topics
	name := func(l string) topic.Name { n, _ := topic.Parse("persistent://" + ns + "/" + l); return n }
	for _, l := range []string{"unused", "subscribed", "recent", "own-policy"} {
		if err := adm.CreateTopic(ctx, name(l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := adm.CreateSubscription(ctx, name("subscribed"), "s", &adminapi.Earliest); err != nil {
		t.Fatal(err)
	}
	setTopicPolicies(t, e, "persistent://"+ns+"/own-policy", policy.LocalScope, func(p *policy.TopicPolicies) {
		p.InactiveTopicPolicies = inactivePolicies("", 60, false)
	})
	c := e.client()
	busy, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://" + ns + "/busy"})
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	clk.advance(40 * time.Second)
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://" + ns + "/recent", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	produce(t, p, "m", 1, nil)
	p.Close()
	e.b.MaintainOnce(ctx)
	wantStored(t, e, ns, map[string]bool{"unused": true, "subscribed": true, "recent": true, "own-policy": true, "busy": true})

	clk.advance(30 * time.Second) // 70 s since the topics were loaded, 30 s since "recent" was used
	e.b.MaintainOnce(ctx)
	wantStored(t, e, ns, map[string]bool{"unused": false, "subscribed": true, "recent": true, "own-policy": true, "busy": true})
	if _, err := adm.Stats(ctx, name("unused")); err == nil {
		t.Fatal("the deleted topic still has stats")
	}
	clk.advance(31 * time.Second)
	e.b.MaintainOnce(ctx)
	wantStored(t, e, ns, map[string]bool{"recent": false, "subscribed": true, "own-policy": true, "busy": true})

	// Caught-up mode: the subscription's backlog keeps the topic until it
	// is skipped.
	prod, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://" + ns + "/subscribed", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	produce(t, prod, "m", 2, nil)
	prod.Close()
	if _, err := e.pol.UpdateNamespace(ctx, ns, func(p *policy.Policies) error {
		p.InactiveTopicPolicies = inactivePolicies(policy.DeleteWhenSubscriptionsCaughtUp, 60, true)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	clk.advance(2 * time.Minute)
	e.b.MaintainOnce(ctx)
	wantStored(t, e, ns, map[string]bool{"subscribed": true})
	if err := adm.Skip(ctx, name("subscribed"), "s", -1); err != nil {
		t.Fatal(err)
	}
	e.b.MaintainOnce(ctx)
	wantStored(t, e, ns, map[string]bool{"subscribed": false, "own-policy": true, "busy": true})

	// Unlimited retention keeps an inactive topic.
	if _, err := e.pol.UpdateNamespace(ctx, ns, func(p *policy.Policies) error {
		p.RetentionPolicies = &policy.RetentionPolicies{RetentionTimeInMinutes: -1, RetentionSizeInMB: -1}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := adm.CreateTopic(ctx, name("retained")); err != nil {
		t.Fatal(err)
	}
	clk.advance(2 * time.Minute)
	e.b.MaintainOnce(ctx)
	wantStored(t, e, ns, map[string]bool{"retained": true, "own-policy": true, "busy": true})
}

// TestInactiveTopicsBrokerDefault: without policies of their own, topics
// follow the region's dynamic settings, off by default; turned on, the
// duration and mode of the settings apply.
func TestInactiveTopicsBrokerDefault(t *testing.T) {
	const ns = "public/plain"
	e, clk := policyEnv(t, ns, nil)
	ctx := context.Background()
	n, _ := topic.Parse("persistent://" + ns + "/t")
	if err := e.b.AdminAPI().Topics.CreateTopic(ctx, n); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Hour)
	e.b.MaintainOnce(ctx)
	wantStored(t, e, ns, map[string]bool{"t": true})

	br := e.b.AdminAPI().Brokers
	for k, v := range map[string]string{dynconfig.DeleteInactiveTopicsEnabled: "true", dynconfig.DeleteInactiveTopicsMaxInactiveSeconds: "7200"} {
		if err := br.SetDynamicConfig(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := br.SetDynamicConfig(ctx, dynconfig.DeleteInactiveTopicsMode, "sometimes"); err == nil {
		t.Fatal("an unknown mode was accepted")
	}
	e.b.MaintainOnce(ctx)
	wantStored(t, e, ns, map[string]bool{"t": true}) // an hour is not two
	clk.advance(time.Hour + time.Second)
	e.b.MaintainOnce(ctx)
	wantStored(t, e, ns, map[string]bool{"t": false})
}

// TestInactivePartitionedTopic: a partitioned topic's partitions go only
// together, once every one is inactive, and its record with them.
func TestInactivePartitionedTopic(t *testing.T) {
	const ns = "public/parts"
	e, clk := policyEnv(t, ns, &policy.Policies{InactiveTopicPolicies: inactivePolicies("", 60, true)})
	ctx := context.Background()
	base, _ := topic.Parse("persistent://" + ns + "/pt")
	if err := e.pol.CreatePartitioned(ctx, base, 3); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := e.b.AdminAPI().Topics.CreateTopic(ctx, base.Partitioned(i)); err != nil {
			t.Fatal(err)
		}
	}
	c := e.client()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: base.Partitioned(1).String()})
	if err != nil {
		t.Fatal(err)
	}
	clk.advance(2 * time.Minute)
	e.b.MaintainOnce(ctx)
	wantStored(t, e, ns, map[string]bool{"pt-partition-0": true, "pt-partition-1": true, "pt-partition-2": true})
	p.Close()
	clk.advance(30 * time.Second)
	e.b.MaintainOnce(ctx)
	wantStored(t, e, ns, map[string]bool{"pt-partition-0": true, "pt-partition-1": true, "pt-partition-2": true})
	clk.advance(31 * time.Second)
	e.b.MaintainOnce(ctx)
	wantStored(t, e, ns, map[string]bool{"pt-partition-0": false, "pt-partition-1": false, "pt-partition-2": false})
	if _, ok, err := e.pol.Partitions(ctx, base); err != nil || ok {
		t.Fatalf("the partitioned topic's record: ok %v, %v", ok, err)
	}
}

// TestInactiveReplicatedTopicKept: a topic replicated to another region
// is never deleted for inactivity (docs/decisions.md).
func TestInactiveReplicatedTopicKept(t *testing.T) {
	e, clk := policyEnv(t, "public/solo", nil)
	ctx := context.Background()
	if err := e.pol.CreateCluster(ctx, "other", policy.ClusterData{ServiceURL: "http://127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	if err := e.pol.UpdateTenant(ctx, "public", policy.TenantInfo{AllowedClusters: []string{"test", "other"}}); err != nil {
		t.Fatal(err)
	}
	const ns = "public/geo"
	if err := e.pol.CreateNamespace(ctx, ns, &policy.Policies{ReplicationClusters: []string{"test", "other"},
		InactiveTopicPolicies: inactivePolicies("", 60, true)}); err != nil {
		t.Fatal(err)
	}
	n, _ := topic.Parse("persistent://" + ns + "/t")
	if err := e.b.AdminAPI().Topics.CreateTopic(ctx, n); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Hour)
	e.b.MaintainOnce(ctx)
	wantStored(t, e, ns, map[string]bool{"t": true})
}
