package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/topic"
)

// TestAdminNamespaceOps drives the namespace operations and policies of
// docs/admin.md ("Namespace operations", "Inactive topics") and the
// anti-affinity group through `isobar admin` against a region.
func TestAdminNamespaceOps(t *testing.T) {
	url, serviceURL, cluster := adminRegion(t)
	a := adminRunner{t, url}
	const ns = "public/cli-ops"
	const tp = "persistent://public/cli-ops/events"
	a.ok("namespaces", "create", ns)
	a.ok("topics", "create", tp)
	a.ok("topics", "create-subscription", tp, "-s", "audit", "--messageId", "earliest")
	a.ok("topics", "create-subscription", tp, "-s", "late", "--messageId", "earliest")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := run(ctx, "client", "produce", tp, "--service-url", serviceURL, "-m", "x", "-n", "4", "--log-level", "error"); err != nil {
		t.Fatalf("produce: %v\n%s", err, out)
	}
	backlog := func(sub string) int64 {
		t.Helper()
		var st struct {
			Subs map[string]struct {
				Backlog int64 `json:"msgBacklog"`
			} `json:"subscriptions"`
		}
		a.json(&st, "topics", "stats", tp)
		return st.Subs[sub].Backlog
	}
	if b := backlog("audit"); b != 4 {
		t.Fatalf("backlog of audit: %d", b)
	}
	a.ok("namespaces", "clear-backlog", ns, "-s", "audit")
	if b, l := backlog("audit"), backlog("late"); b != 0 || l != 4 {
		t.Fatalf("after clear-backlog -s audit: audit %d, late %d", b, l)
	}
	name, _ := topic.Parse(tp)
	bundle := topic.BundleFor(name, topic.Bundles(topic.DefaultBundles)).String()
	a.ok("namespaces", "clear-backlog", ns, "-b", bundle)
	if l := backlog("late"); l != 0 {
		t.Fatalf("after clear-backlog -b %s: late %d", bundle, l)
	}
	a.ok("namespaces", "unsubscribe", ns, "-s", "late")
	var subs []string
	a.json(&subs, "topics", "subscriptions", tp)
	if !slices.Equal(subs, []string{"audit"}) {
		t.Fatalf("subscriptions after unsubscribe: %v", subs)
	}
	a.ok("namespaces", "unload", ns)
	a.ok("namespaces", "unload", ns, "-b", bundle)
	a.fails(1, []string{"412", "Invalid bundle range"}, "namespaces", "unload", ns, "-b", "0x00000000_0x10000000")
	// Split a bundle other than tp's; it is gone afterwards.
	other := topic.Bundles(topic.DefaultBundles)[0].String()
	if other == bundle {
		other = topic.Bundles(topic.DefaultBundles)[1].String()
	}
	a.fails(1, []string{"412", "Unsupported split algorithm"}, "namespaces", "split-bundle", ns, "-b", other, "--split-algorithm-name", "bogus")
	a.fails(2, []string{"--bundle"}, "namespaces", "split-bundle", ns)
	a.ok("namespaces", "split-bundle", ns, "-b", other, "--unload")
	a.fails(1, []string{"412", "Invalid bundle range"}, "namespaces", "split-bundle", ns, "-b", other)
	a.fails(1, []string{"409", "Cannot delete non empty bundle"}, "namespaces", "delete-bundle", ns, "-b", bundle)
	a.ok("namespaces", "delete-bundle", ns, "-b", bundle, "--force")
	var topics []string
	a.json(&topics, "namespaces", "topics", ns)
	if slices.Contains(topics, tp) {
		t.Fatalf("topics after the forced bundle delete: %v", topics)
	}

	// Inactive topic policies, the namespace's and a topic's.
	if out := a.ok("namespaces", "get-inactive-topic-policies", ns); out != "not set\n" {
		t.Fatalf("unset: %q", out)
	}
	a.ok("namespaces", "set-inactive-topic-policies", ns, "-e", "-t", "10m", "-m", "delete_when_subscriptions_caught_up")
	var ip struct {
		Mode *string `json:"inactiveTopicDeleteMode"`
		Max  int     `json:"maxInactiveDurationSeconds"`
		On   bool    `json:"deleteWhileInactive"`
	}
	a.json(&ip, "namespaces", "get-inactive-topic-policies", ns)
	if ip.Mode == nil || *ip.Mode != "delete_when_subscriptions_caught_up" || ip.Max != 600 || !ip.On {
		t.Fatalf("inactive topic policies: %+v", ip)
	}
	a.ok("topics", "set-inactive-topic-policies", tp, "-d", "-t", "30")
	if out := a.ok("topics", "get-inactive-topic-policies", tp, "--applied"); !strings.Contains(out, "keep inactive topics (30s") {
		t.Fatalf("topic's applied inactive topic policies: %q", out)
	}
	a.ok("topics", "remove-inactive-topic-policies", tp)
	a.json(&ip, "topics", "get-inactive-topic-policies", tp, "--applied")
	if ip.Max != 600 || !ip.On {
		t.Fatalf("the namespace's in force: %+v", ip)
	}
	a.ok("namespaces", "remove-inactive-topic-policies", ns)
	if out := a.ok("namespaces", "get-inactive-topic-policies", ns, "--json"); strings.TrimSpace(out) != "null" {
		t.Fatalf("removed: %q", out)
	}

	// Anti-affinity.
	a.ok("namespaces", "set-anti-affinity-group", ns, "-g", "apart")
	if out := a.ok("namespaces", "get-anti-affinity-group", ns); out != "apart\n" {
		t.Fatalf("group: %q", out)
	}
	var members []string
	a.json(&members, "namespaces", "get-anti-affinity-namespaces", "-c", cluster, "-g", "apart", "-p", "public")
	if !slices.Equal(members, []string{ns}) {
		t.Fatalf("group members: %v", members)
	}
	a.ok("namespaces", "delete-anti-affinity-group", ns)
	if out := a.ok("namespaces", "get-anti-affinity-group", ns); out != "not set\n" {
		t.Fatalf("group after delete: %q", out)
	}

	// Bad arguments are usage errors (exit 2); bad values the server's.
	a.fails(2, []string{"--enable-delete-while-inactive"}, "namespaces", "set-inactive-topic-policies", ns, "-t", "1m")
	a.fails(2, []string{"--delete-mode"}, "namespaces", "set-inactive-topic-policies", ns, "-e", "-t", "1m", "-m", "sometimes")
	a.fails(2, []string{"--max-inactive-duration"}, "namespaces", "set-inactive-topic-policies", ns, "-e")
	a.fails(2, []string{"--sub"}, "namespaces", "unsubscribe", ns)
	a.fails(2, []string{"--bundle"}, "namespaces", "delete-bundle", ns)
	a.fails(2, []string{"--group"}, "namespaces", "set-anti-affinity-group", ns)
	a.fails(2, []string{"--cluster", "--tenant"}, "namespaces", "get-anti-affinity-namespaces", "-g", "apart")
	a.fails(1, []string{"412", "Cannot unsubscribe a replication cursor"}, "namespaces", "unsubscribe", ns, "-s", "isobar.repl.x")
}
