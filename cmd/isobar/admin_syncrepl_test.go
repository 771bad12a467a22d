package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// TestAdminSyncReplicationVerbs drives the namespace and topic verbs of
// synchronous replication against a region: set, read back as text and
// as JSON (the topic's with --global and --applied), refused by the
// server when the namespace has too few replication clusters, and
// removed.
func TestAdminSyncReplicationVerbs(t *testing.T) {
	url, _, cluster := adminRegion(t)
	a := adminRunner{t, url}
	// A second cluster to wait for. Nothing serves it: only policies are
	// set here, and no topic is created.
	req, err := http.NewRequest(http.MethodPut, url+"/admin/v2/clusters/west", strings.NewReader(`{"serviceUrl":"http://127.0.0.1:1"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("create cluster west: %s", resp.Status)
	}
	const ns = "geo/sync"
	const tp = "persistent://geo/sync/orders"
	a.ok("tenants", "create", "geo", "--allowed-clusters", cluster+",west")
	a.ok("namespaces", "create", ns)

	// One replication cluster leaves no other region to wait for.
	a.fails(1, []string{"412", "replication clusters"}, "namespaces", "set-sync-replication", ns, "--regions", "1")
	a.ok("namespaces", "set-clusters", ns, "--clusters", cluster+",west")
	if out := a.ok("namespaces", "get-sync-replication", ns); out != "not set\n" {
		t.Fatalf("get-sync-replication before set: %q", out)
	}
	if out := a.ok("namespaces", "get-sync-replication", ns, "--json"); strings.TrimSpace(out) != "null" {
		t.Fatalf("get-sync-replication --json before set: %q", out)
	}
	a.ok("namespaces", "set-sync-replication", ns, "--regions", "1", "--fallback-after", "30s")
	var sr *policy.SyncReplication
	a.json(&sr, "namespaces", "get-sync-replication", ns)
	if sr == nil || *sr != (policy.SyncReplication{Regions: 1, FallbackAfterSeconds: 30}) {
		t.Fatalf("namespace sync replication %+v", sr)
	}
	if out := a.ok("namespaces", "get-sync-replication", ns); !strings.Contains(out, "regions") || !strings.Contains(out, "30s") {
		t.Fatalf("get-sync-replication: %q", out)
	}
	a.fails(1, []string{"412", "1 besides"}, "namespaces", "set-sync-replication", ns, "--regions", "2")
	a.fails(1, []string{"412", "syncReplication"}, "namespaces", "set-clusters", ns, "--clusters", cluster)
	a.ok("namespaces", "set-sync-replication", ns, "--regions", "1")
	sr = nil
	a.json(&sr, "namespaces", "get-sync-replication", ns)
	if sr == nil || *sr != (policy.SyncReplication{Regions: 1}) {
		t.Fatalf("namespace sync replication without --fallback-after %+v", sr)
	}
	if out := a.ok("namespaces", "get-sync-replication", ns); !strings.Contains(out, "never") {
		t.Fatalf("get-sync-replication without a fallback: %q", out)
	}

	// A topic's own: local and global, and the namespace's once removed.
	if out := a.ok("topics", "get-sync-replication", tp); out != "not set\n" {
		t.Fatalf("topics get-sync-replication before set: %q", out)
	}
	sr = nil
	a.json(&sr, "topics", "get-sync-replication", tp, "--applied")
	if sr == nil || *sr != (policy.SyncReplication{Regions: 1}) {
		t.Fatalf("topic's applied sync replication %+v, want the namespace's", sr)
	}
	a.ok("topics", "set-sync-replication", tp, "--regions", "1", "--fallback-after", "1m")
	a.ok("topics", "set-sync-replication", tp, "--regions", "1", "--fallback-after", "5s", "--global")
	sr = nil
	a.json(&sr, "topics", "get-sync-replication", tp)
	if sr == nil || *sr != (policy.SyncReplication{Regions: 1, FallbackAfterSeconds: 60}) {
		t.Fatalf("topic sync replication %+v", sr)
	}
	sr = nil
	a.json(&sr, "topics", "get-sync-replication", tp, "--global")
	if sr == nil || *sr != (policy.SyncReplication{Regions: 1, FallbackAfterSeconds: 5}) {
		t.Fatalf("topic global sync replication %+v", sr)
	}
	if out := a.ok("topics", "get-sync-replication", tp); !strings.Contains(out, "1m0s") {
		t.Fatalf("topics get-sync-replication: %q", out)
	}
	a.ok("topics", "remove-sync-replication", tp)
	sr = nil
	a.json(&sr, "topics", "get-sync-replication", tp, "--applied")
	if sr == nil || *sr != (policy.SyncReplication{Regions: 1, FallbackAfterSeconds: 5}) {
		t.Fatalf("topic's applied sync replication after removing the local one %+v, want the global one", sr)
	}
	a.ok("topics", "remove-sync-replication", tp, "--global")
	if out := a.ok("topics", "get-sync-replication", tp, "--global"); out != "not set\n" {
		t.Fatalf("topics get-sync-replication --global after remove: %q", out)
	}

	a.ok("namespaces", "remove-sync-replication", ns)
	if out := a.ok("namespaces", "get-sync-replication", ns); out != "not set\n" {
		t.Fatalf("get-sync-replication after remove: %q", out)
	}
	if out := a.ok("topics", "get-sync-replication", tp, "--applied", "--json"); strings.TrimSpace(out) != "null" {
		t.Fatalf("topic's applied sync replication with none: %q", out)
	}
	// Asynchronous again, so one cluster is enough.
	a.ok("namespaces", "set-clusters", ns, "--clusters", cluster)
	a.fails(1, []string{"404"}, "namespaces", "set-sync-replication", "geo/none", "--regions", "1")
}

// TestAdminSyncReplicationUsageErrors: bad flag values are refused
// (exit 2, the flag named, every problem at once) before any request.
func TestAdminSyncReplicationUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"namespaces", "set-sync-replication", "t/ns"}, []string{"--regions", "required"}},
		{[]string{"namespaces", "set-sync-replication", "t/ns", "--regions", "0"}, []string{"--regions", "1..64"}},
		{[]string{"namespaces", "set-sync-replication", "t/ns", "--regions", "65"}, []string{"--regions", "65"}},
		{[]string{"namespaces", "set-sync-replication", "t/ns", "--regions", "1", "--fallback-after", "-5s"}, []string{"--fallback-after", "-5s"}},
		{[]string{"namespaces", "set-sync-replication", "t/ns", "--regions", "1", "--fallback-after", "1500ms"}, []string{"--fallback-after", "whole number of seconds"}},
		{[]string{"namespaces", "set-sync-replication", "t/ns", "--regions", "1", "--fallback-after", "61m"}, []string{"--fallback-after", "3600s"}},
		{[]string{"namespaces", "set-sync-replication", "t/ns", "--regions", "1", "--fallback-after", "30"}, []string{"--fallback-after", "duration"}},
		{[]string{"namespaces", "set-sync-replication", "t/ns", "--regions", "-1", "--fallback-after", "-1s"}, []string{"--regions", "--fallback-after"}},
		{[]string{"namespaces", "set-sync-replication", "noslash", "--regions", "1"}, []string{"tenant/namespace"}},
		{[]string{"topics", "set-sync-replication", "t"}, []string{"--regions", "required"}},
		{[]string{"topics", "set-sync-replication", "t", "--regions", "1", "--fallback-after", "2h", "--global"}, []string{"--fallback-after"}},
		{[]string{"topics", "set-sync-replication", "a/b", "--regions", "1"}, []string{"tenant/namespace/name"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			start := time.Now()
			adminRunner{t, "http://127.0.0.1:1"}.fails(2, tc.want, tc.args...)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v: a usage error must not wait for a server", d)
			}
		})
	}
}
