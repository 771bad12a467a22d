package broker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

// TestMaintenanceVisitsOnlyWhatNeedsIt: a maintenance pass visits a
// topic once after its load, and again only when something can act on
// it: a publish lists it for the next pass, a backlog under a message TTL
// keeps it listed, a change of its namespace's policies visits every
// topic of the namespace, and an inactive-deletion candidate waits in
// the due queue until it may qualify. Idle topics without such policies
// are in neither.
func TestMaintenanceVisitsOnlyWhatNeedsIt(t *testing.T) {
	const ns = "public/quiet"
	e, clk := policyEnv(t, ns, &policy.Policies{})
	ctx := context.Background()
	adm := e.b.AdminAPI().Topics
	name := func(l string) topic.Name { n, _ := topic.Parse("persistent://" + ns + "/" + l); return n }
	for _, l := range []string{"a", "b", "c"} {
		if err := adm.CreateTopic(ctx, name(l)); err != nil {
			t.Fatal(err)
		}
		if err := adm.CreateSubscription(ctx, name(l), "s", &adminapi.Earliest); err != nil {
			t.Fatal(err)
		}
	}
	listed := func(want ...string) {
		t.Helper()
		got, due := e.b.MaintenanceListed()
		var locals []string
		for _, g := range got {
			n, _ := topic.Parse(g)
			locals = append(locals, n.Local)
		}
		slices.Sort(locals)
		if !slices.Equal(locals, want) || due != 0 {
			t.Fatalf("listed %v (%d due), want %v (none due)", locals, due, want)
		}
	}
	listed("a", "b", "c") // loaded: each visited once
	e.b.MaintainOnce(ctx)
	listed()
	e.b.MaintainOnce(ctx)
	listed()

	// A publish lists its topic; without TTL or quotas its backlog keeps
	// it no longer.
	p, err := e.client().CreateProducer(pulsar.ProducerOptions{Topic: name("a").String()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	listed("a")
	e.b.MaintainOnce(ctx)
	listed()

	// A message TTL: the namespace's topics are all visited; the one
	// with a backlog stays listed, and its backlog expires.
	if _, err := e.pol.UpdateNamespace(ctx, ns, func(p *policy.Policies) error {
		p.MessageTTLInSeconds = intp(60)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.b.MaintainOnce(ctx)
		if got, _ := e.b.MaintenanceListed(); len(got) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the topic with a backlog under a message TTL is not kept listed")
		}
	}
	listed("a")
	clk.advance(2 * time.Minute)
	e.b.MaintainOnce(ctx)
	if n := backlog(t, e, name("a").String(), "s"); n != 0 {
		t.Fatalf("backlog %d after the TTL, want 0", n)
	}
	e.b.MaintainOnce(ctx)
	listed() // no backlog left: nothing for the TTL to act on

	// Inactive topic deletion on: the topics are candidates, due when
	// they may qualify; the one without a subscription goes then.
	if err := adm.DeleteSubscription(ctx, name("c"), "s", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pol.UpdateNamespace(ctx, ns, func(p *policy.Policies) error {
		p.InactiveTopicPolicies = inactivePolicies(policy.DeleteWhenNoSubscriptions, 300, true)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		e.b.MaintainOnce(ctx)
		if _, due := e.b.MaintenanceListed(); due > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no inactive-deletion candidate after the policy")
		}
	}
	wantStored(t, e, ns, map[string]bool{"c": true})
	clk.advance(6 * time.Minute)
	e.b.MaintainOnce(ctx)
	wantStored(t, e, ns, map[string]bool{"a": true, "b": true, "c": false})
}
