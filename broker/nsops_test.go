package broker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/topic"
)

// nsOpsEnv is a broker with namespace public/ops holding topics t0..t7,
// each with subscriptions a and b (from the earliest message) and three
// messages, served through the admin API and pulsaradmin.
func nsOpsEnv(t *testing.T) (*env, pulsaradmin.Client, string, []topic.Name) {
	t.Helper()
	e := startEnv(t, nil)
	ctx := context.Background()
	if err := e.pol.CreateNamespace(ctx, "public/ops", nil); err != nil {
		t.Fatal(err)
	}
	srv := e.adminServer()
	c, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	adm := e.b.AdminAPI().Topics
	cl := e.client()
	var names []topic.Name
	for i := range 8 {
		name, _ := topic.Parse(fmt.Sprintf("persistent://public/ops/t%d", i))
		names = append(names, name)
		if err := adm.CreateTopic(ctx, name); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"a", "b"} {
			if err := adm.CreateSubscription(ctx, name, s, &adminapi.Earliest); err != nil {
				t.Fatal(err)
			}
		}
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: name.String(), DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		produce(t, p, "m", 3, nil)
		p.Close()
	}
	return e, c, srv.URL, names
}

// backlogs maps "topic/sub" to the subscription's backlog, for the
// subscriptions that exist.
func backlogs(t *testing.T, e *env, names []topic.Name) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, n := range names {
		st, err := e.b.AdminAPI().Topics.Stats(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		for s, ss := range st.Subscriptions {
			out[n.Local+"/"+s] = ss.MsgBacklog
		}
	}
	return out
}

func bundleOf(n topic.Name) topic.Bundle {
	return topic.BundleFor(n, topic.Bundles(topic.DefaultBundles))
}

// TestNamespaceClearBacklog clears backlogs with pulsaradmin: one
// subscription on the whole namespace, every subscription of one bundle,
// then everything; each moves exactly the subscriptions it names to the
// end of their topics.
func TestNamespaceClearBacklog(t *testing.T) {
	e, c, _, names := nsOpsEnv(t)
	ns, _ := utils.GetNamespaceName("public/ops")

	if err := c.Namespaces().ClearNamespaceBacklogForSubscription(*ns, "a"); err != nil {
		t.Fatal(err)
	}
	for k, v := range backlogs(t, e, names) {
		if want := map[bool]int64{true: 0, false: 3}[strings.HasSuffix(k, "/a")]; v != want {
			t.Fatalf("after clearing a: backlog of %s = %d, want %d", k, v, want)
		}
	}
	b := bundleOf(names[0])
	if err := c.Namespaces().ClearNamespaceBundleBacklog(*ns, b.String()); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		want := int64(3)
		if bundleOf(n) == b {
			want = 0
		}
		if got := backlogs(t, e, []topic.Name{n})[n.Local+"/b"]; got != want {
			t.Fatalf("after clearing bundle %s: backlog of %s/b = %d, want %d", b, n, got, want)
		}
	}
	// One subscription of one bundle: the pulsaradmin call pairs it with
	// the bundle.
	other := names[slices.IndexFunc(names, func(n topic.Name) bool { return bundleOf(n) != b })]
	if err := c.Namespaces().ClearNamespaceBundleBacklogForSubscription(*ns, bundleOf(other).String(), "b"); err != nil {
		t.Fatal(err)
	}
	if got := backlogs(t, e, []topic.Name{other})[other.Local+"/b"]; got != 0 {
		t.Fatalf("after clearing b of bundle %s: backlog of %s/b = %d", bundleOf(other), other, got)
	}
	if err := c.Namespaces().ClearNamespaceBacklog(*ns); err != nil {
		t.Fatal(err)
	}
	for k, v := range backlogs(t, e, names) {
		if v != 0 {
			t.Fatalf("after clearing the namespace: backlog of %s = %d", k, v)
		}
	}
}

// TestNamespaceUnsubscribe deletes a subscription from every topic; a
// bundle where it has a consumer is refused with Pulsar's reason, and
// nothing in that bundle changes.
func TestNamespaceUnsubscribe(t *testing.T) {
	e, c, _, names := nsOpsEnv(t)
	ns, _ := utils.GetNamespaceName("public/ops")
	cons, err := e.client().Subscribe(pulsar.ConsumerOptions{Topic: names[0].String(), SubscriptionName: "b"})
	if err != nil {
		t.Fatal(err)
	}
	b := bundleOf(names[0])
	err = c.Namespaces().UnsubscribeNamespaceBundle(*ns, b.String(), "b")
	if err == nil || !strings.Contains(err.Error(), "Subscription has active connected consumers") || !strings.Contains(err.Error(), "412") {
		t.Fatalf("unsubscribe with a consumer: %v", err)
	}
	for _, n := range names {
		if _, ok := backlogs(t, e, []topic.Name{n})[n.Local+"/b"]; !ok {
			t.Fatalf("the refused unsubscribe deleted %s/b", n)
		}
	}
	cons.Close()
	if err := c.Namespaces().UnsubscribeNamespace(*ns, "b"); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		subs, err := e.b.AdminAPI().Topics.Subscriptions(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(subs, []string{"a"}) {
			t.Fatalf("subscriptions of %s after unsubscribing b: %v", n, subs)
		}
	}
	// One bundle.
	if err := c.Namespaces().UnsubscribeNamespaceBundle(*ns, b.String(), "a"); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		subs, _ := e.b.AdminAPI().Topics.Subscriptions(context.Background(), n)
		if want := bundleOf(n) != b; slices.Contains(subs, "a") != want {
			t.Fatalf("subscriptions of %s (bundle %s) after unsubscribing a from bundle %s: %v", n, bundleOf(n), b, subs)
		}
	}
}

// TestDeleteBundle: a bundle with topics is refused (409, Pulsar's
// reason) unless forced, which deletes its topics and no others; an
// empty bundle is deleted (unloaded) at once.
func TestDeleteBundle(t *testing.T) {
	e, c, url, names := nsOpsEnv(t)
	b := bundleOf(names[0])
	err := c.Namespaces().DeleteNamespaceBundle("public/ops", b.String())
	if err == nil || !strings.Contains(err.Error(), "Cannot delete non empty bundle") {
		t.Fatalf("delete a bundle with topics: %v", err)
	}
	if code, reason := httpDo(t, "DELETE", url+"/admin/v2/namespaces/public/ops/"+b.String()+"?force=true", ""); code != 204 {
		t.Fatalf("forced delete: %d %s", code, reason)
	}
	left, err := e.b.AdminAPI().Topics.ListTopics(context.Background(), "public/ops", topic.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if slices.Contains(left, n.String()) == (bundleOf(n) == b) {
			t.Fatalf("after deleting bundle %s: topics %v (%s is in bundle %s)", b, left, n, bundleOf(n))
		}
	}
	if err := c.Namespaces().DeleteNamespaceBundle("public/ops", b.String()); err != nil {
		t.Fatalf("delete the emptied bundle: %v", err)
	}
}

// TestNamespaceOpsBadBundles: bundles that are not the namespace's, bad
// subscription names and the broker's own cursors are refused with a
// reason, and nothing changes.
func TestNamespaceOpsBadBundles(t *testing.T) {
	e, _, url, names := nsOpsEnv(t)
	before := backlogs(t, e, names)
	const ns = "/admin/v2/namespaces/public/ops"
	for _, c := range []struct {
		method, path string
		status       int
		reason       string
	}{
		{"PUT", ns + "/0x00000000_0x20000000/unload", 412, "Invalid bundle range 0x00000000_0x20000000"},
		{"POST", ns + "/0x00000000_0x20000000/clearBacklog", 412, "not a bundle of namespace public/ops"},
		{"DELETE", ns + "/0x00000000_0x20000000?force=true", 412, "Invalid bundle range"},
		{"DELETE", ns + "/0x40000000_0x00000000", 412, "Invalid bundle range: 0x40000000_0x00000000"},
		{"DELETE", ns + "/0x00000000_0x40000000?force=maybe", 400, "force"},
		{"PUT", ns + "/0x00000000_0x40000000/unload?authoritative=yes", 400, "authoritative"},
		{"POST", ns + "/unsubscribe/a%20b", 400, "invalid subscription name"},
		{"POST", ns + "/unsubscribe/isobar.repl.west", 412, "Cannot unsubscribe a replication cursor"},
		{"POST", ns + "/clearBacklog/isobar.dedup", 412, "Cannot clear the backlog of isobar.dedup"},
		{"POST", ns + "/0x00000000_0x40000000/unsubscribe/isobar.x", 412, "Cannot unsubscribe a replication cursor"},
		{"POST", ns + "/0x00000000_0x40000000/frobnicate/a", 404, "Not found"},
		{"POST", "/admin/v2/namespaces/public/none/clearBacklog", 404, "Namespace does not exist"},
		{"PUT", "/admin/v2/namespaces/nobody/ops/unload", 404, "Tenant does not exist"},
	} {
		if code, reason := httpDo(t, c.method, url+c.path, ""); code != c.status || !strings.Contains(reason, c.reason) {
			t.Errorf("%s %s: %d %q, want %d with %q", c.method, c.path, code, reason, c.status, c.reason)
		}
	}
	if after := backlogs(t, e, names); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refused calls changed the subscriptions:\nbefore %v\nafter  %v", before, after)
	}
}
