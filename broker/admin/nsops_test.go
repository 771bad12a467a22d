package admin_test

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// TestInactiveTopicPoliciesAndAntiAffinity sets, reads and removes a
// namespace's and a topic's inactive topic policies and a namespace's
// anti-affinity group with pulsaradmin, which decodes Pulsar's shapes,
// and lists a group's namespaces.
func TestInactiveTopicPoliciesAndAntiAffinity(t *testing.T) {
	e := start(t)
	c, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: e.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	ns, _ := utils.GetNamespaceName("public/default")

	got, err := c.Namespaces().GetInactiveTopicPolicies(*ns)
	check("get unset", err)
	if got != (utils.InactiveTopicPolicies{}) {
		t.Fatalf("unset inactive topic policies = %+v", got)
	}
	mode := utils.DeleteWhenSubscriptionsCaughtUp
	check("set", c.Namespaces().SetInactiveTopicPolicies(*ns, utils.NewInactiveTopicPolicies(&mode, 300, true)))
	got, err = c.Namespaces().GetInactiveTopicPolicies(*ns)
	check("get", err)
	if got.InactiveTopicDeleteMode == nil || *got.InactiveTopicDeleteMode != mode || got.MaxInactiveDurationSeconds != 300 || !got.DeleteWhileInactive {
		t.Fatalf("inactive topic policies = %+v", got)
	}
	e.run([]step{{"GET", "/admin/v2/namespaces/public/default", "", 200,
		`"inactive_topic_policies":{"inactiveTopicDeleteMode":"delete_when_subscriptions_caught_up","maxInactiveDurationSeconds":300,"deleteWhileInactive":true}`, ""}})
	check("remove", c.Namespaces().RemoveInactiveTopicPolicies(*ns))
	e.run([]step{{"GET", "/admin/v2/namespaces/public/default/inactiveTopicPolicies", "", 204, "", ""}})

	// A topic's own, local and global, and the value in force.
	tn, _ := utils.GetTopicName("persistent://public/default/idle")
	const tp = "/admin/v2/persistent/public/default/idle/inactiveTopicPolicies"
	check("topic set", c.Topics().SetInactiveTopicPolicies(*tn, utils.NewInactiveTopicPolicies(nil, 60, true)))
	tgot, err := c.Topics().GetInactiveTopicPolicies(*tn, false)
	check("topic get", err)
	if tgot.InactiveTopicDeleteMode != nil || tgot.MaxInactiveDurationSeconds != 60 || !tgot.DeleteWhileInactive {
		t.Fatalf("topic's inactive topic policies = %+v", tgot)
	}
	e.run([]step{
		{"POST", tp + "?isGlobal=true", `{"inactiveTopicDeleteMode":"delete_when_no_subscriptions","maxInactiveDurationSeconds":5,"deleteWhileInactive":false}`, 204, "", ""},
		{"GET", tp + "?isGlobal=true", "", 200, `"maxInactiveDurationSeconds":5`, ""},
		{"GET", tp + "?applied=true", "", 200, `"maxInactiveDurationSeconds":60`, ""}, // local over global
	})
	check("topic remove", c.Topics().RemoveInactiveTopicPolicies(*tn))
	e.run([]step{
		{"DELETE", tp + "?isGlobal=true", "", 204, "", ""},
		{"GET", tp, "", 204, "", ""},
		// Nothing set anywhere: the broker's (no Brokers here: Isobar's
		// defaults, deletion off).
		{"GET", tp + "?applied=true", "", 200, `{"inactiveTopicDeleteMode":"delete_when_no_subscriptions","maxInactiveDurationSeconds":60,"deleteWhileInactive":false}`, ""},
	})

	// Anti-affinity: pulsaradmin sends the group as a JSON string and
	// reads the bare name back.
	g, err := c.Namespaces().GetNamespaceAntiAffinityGroup("public/default")
	check("get unset group", err)
	if g != "" {
		t.Fatalf("unset group = %q", g)
	}
	check("set group", c.Namespaces().SetNamespaceAntiAffinityGroup("public/default", "group-a"))
	g, err = c.Namespaces().GetNamespaceAntiAffinityGroup("public/default")
	check("get group", err)
	if g != "group-a" {
		t.Fatalf("group = %q", g)
	}
	if err := e.store.CreateNamespace(context.Background(), "public/other", &policy.Policies{AntiAffinityGroup: "GROUP-A"}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.CreateNamespace(context.Background(), "public/third", &policy.Policies{AntiAffinityGroup: "group-b"}); err != nil {
		t.Fatal(err)
	}
	e.run([]step{{"POST", "/admin/v2/namespaces/public/third/antiAffinity", "group-b2", 204, "", ""}}) // a bare name, as curl sends it
	nss, err := c.Namespaces().GetAntiAffinityNamespaces("public", "standalone", "group-a")
	check("list group", err)
	if !slices.Equal(nss, []string{"public/default", "public/other"}) {
		t.Fatalf("group-a = %v", nss)
	}
	e.run([]step{
		{"GET", "/admin/v2/namespaces/public/third/antiAffinity", "", 200, "group-b2", ""},
		{"GET", "/admin/v2/namespaces/standalone/antiAffinity/none?property=public", "", 200, "[]", ""},
		{"GET", "/admin/v2/namespaces/public/default", "", 200, `"antiAffinityGroup":"group-a"`, ""},
	})
	check("delete group", c.Namespaces().DeleteNamespaceAntiAffinityGroup("public/default"))
	nss, err = c.Namespaces().GetAntiAffinityNamespaces("public", "standalone", "group-a")
	check("list group", err)
	if !slices.Equal(nss, []string{"public/other"}) {
		t.Fatalf("group-a after the delete = %v", nss)
	}
}

// TestNamespaceOpsBadInput: bad input to the new namespace endpoints is
// refused with a reason (Pulsar's where it has one) and changes nothing.
func TestNamespaceOpsBadInput(t *testing.T) {
	e := start(t)
	const ns = "/admin/v2/namespaces/public/default"
	e.run([]step{
		{"POST", ns + "/inactiveTopicPolicies", `{"inactiveTopicDeleteMode":"delete_when_no_subscriptions","maxInactiveDurationSeconds":30,"deleteWhileInactive":true}`, 204, "", ""},
		{"POST", ns + "/antiAffinity", `"keep"`, 204, "", ""},
	})
	const tp = "/admin/v2/persistent/public/default/t/inactiveTopicPolicies"
	bad := []step{
		{"POST", ns + "/inactiveTopicPolicies", `{"inactiveTopicDeleteMode":"delete_always","maxInactiveDurationSeconds":30,"deleteWhileInactive":true}`, 400, "delete_always", ""},
		{"POST", ns + "/inactiveTopicPolicies", `{"maxInactiveDurationSeconds":-1,"deleteWhileInactive":true}`, 412, "maxInactiveDurationSeconds", ""},
		{"POST", ns + "/inactiveTopicPolicies", `{"maxInactiveDurationSeconds":2147483648}`, 412, "maxInactiveDurationSeconds", ""},
		{"POST", ns + "/inactiveTopicPolicies", `{"maxInactiveDurationSeconds":"ten"}`, 400, "", ""},
		{"POST", ns + "/inactiveTopicPolicies", `[`, 400, "", ""},
		{"POST", ns + "/inactiveTopicPolicies", ``, 400, "empty body", ""},
		{"POST", ns + "/inactiveTopicPolicies", `null`, 400, "DELETE", ""},
		{"POST", tp, `{"inactiveTopicDeleteMode":"sometimes"}`, 400, "sometimes", ""},
		{"POST", tp, `{"maxInactiveDurationSeconds":-5}`, 412, "maxInactiveDurationSeconds", ""},
		{"POST", ns + "/antiAffinity", ``, 400, `"Anti-affinity group should not be null"`, ""},
		{"POST", ns + "/antiAffinity", `""`, 412, `"Anti-affinity group can't be empty"`, ""},
		{"POST", ns + "/antiAffinity", `"a\tb"`, 412, "control characters", ""},
		{"POST", ns + "/antiAffinity", `"unterminated`, 400, "", ""},
		{"GET", "/admin/v2/namespaces/standalone/antiAffinity/g", "", 400, `"Tenant should not be null"`, ""},
		{"GET", "/admin/v2/namespaces/nowhere/antiAffinity/g?property=public", "", 412, `"Cluster nowhere does not exist."`, ""},
		{"GET", "/admin/v2/namespaces/standalone/antiAffinity/g?property=nobody", "", 404, `"Tenant does not exist"`, ""},
		{"GET", "/admin/v2/namespaces/public/default/nothing-here", "", 404, "Not found", ""},
		{"POST", "/admin/v2/namespaces/public/nonexist/antiAffinity", `"g"`, 404, `"Namespace does not exist"`, ""},
		{"POST", "/admin/v2/namespaces/public/nonexist/inactiveTopicPolicies", `{}`, 404, `"Namespace does not exist"`, ""},
		// The broker's topics are not served (no Bundles): 503, after
		// the checks that need no broker.
		{"PUT", "/admin/v2/namespaces/public/nonexist/unload", "", 404, `"Namespace does not exist"`, ""},
		{"PUT", ns + "/unload", "", 503, "bundles", ""},
		{"POST", ns + "/clearBacklog", "", 503, "bundles", ""},
		{"POST", ns + "/somethingElse/x", "", 404, "Not found", ""},
		// The same checks on a whole policies document.
		{"PUT", "/admin/v2/namespaces/public/bad", `{"inactive_topic_policies":{"maxInactiveDurationSeconds":-1}}`, 412, "inactive_topic_policies", ""},
		{"PUT", "/admin/v2/namespaces/public/bad", `{"inactive_topic_policies":{"inactiveTopicDeleteMode":"never"}}`, 412, "inactiveTopicDeleteMode", ""},
		{"PUT", "/admin/v2/namespaces/public/bad", `{"antiAffinityGroup":"a\u0001b"}`, 412, "antiAffinityGroup", ""},
		{"GET", "/admin/v2/namespaces/public/bad", "", 404, "", ""},
	}
	_, before, _ := e.do("GET", ns, "")
	_, tBefore, _ := e.do("GET", tp, "")
	for _, s := range bad {
		e.run([]step{s})
		if _, after, _ := e.do("GET", ns, ""); after != before {
			t.Fatalf("%s %s %s changed the namespace:\nbefore %s\nafter  %s", s.method, s.path, s.body, before, after)
		}
		if _, after, _ := e.do("GET", tp, ""); after != tBefore {
			t.Fatalf("%s %s %s changed the topic's policies: %s", s.method, s.path, s.body, after)
		}
	}
	if calls := e.topics.Calls(); len(calls) > 0 {
		t.Fatalf("refused calls reached the broker: %v", calls)
	}
}
