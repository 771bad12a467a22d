package policy_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/internal/wanproxy"
	"github.com/isobar-mq/isobar/metastore"
)

// TestBoundWritesFailPromptlyWhileTheStoreIsUnreachable: a store over
// the global store through Bound, with its reads from a cache, as a
// region has it. While the link to the store is cut, and while it is
// black-holed, a write fails within the bound with ErrUnreachable (503,
// still a deadline to errors.Is) instead of waiting for the store; reads
// are served from the cache; a caller's own deadline stays the caller's.
// Once the link is back the next write succeeds and is read back at once.
func TestBoundWritesFailPromptlyWhileTheStoreIsUnreachable(t *testing.T) {
	const bound = time.Second
	tc := testcluster.Start(t, testcluster.Options{Bookies: 0})
	link, err := wanproxy.Listen("127.0.0.1:0", strings.TrimPrefix(tc.Endpoints()[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gm, err := metastore.Connect(ctx, metastore.Config{Endpoints: []string{"http://" + link.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gm.Close() })
	cache, err := globalconfig.Start(ctx, gm, globalconfig.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	s, err := policy.New(policy.Bound(gm, bound), policy.Config{Cache: cache, LocalCluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	must(t, s.EnsureStandalone(ctx, "c1", policy.ClusterData{ServiceURL: "http://c1:8080"}))
	must(t, s.CreateTenant(ctx, "t1", policy.TenantInfo{AllowedClusters: []string{"c1"}}))

	for _, fault := range []struct {
		name  string
		apply func()
	}{{"cut", link.Cut}, {"blackhole", link.Blackhole}} {
		fault.apply()
		start := time.Now()
		err := s.CreateNamespace(ctx, "t1/during-"+fault.name, nil)
		took := time.Since(start)
		if !errors.Is(err, policy.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: create namespace: %v, want ErrUnreachable wrapping a deadline", fault.name, err)
		}
		if got := errkind.HTTPStatusOf(err); got != 503 {
			t.Errorf("%s: %v answered %d, want 503", fault.name, err, got)
		}
		if !strings.Contains(errkind.MessageOf(err), "global configuration store unreachable") {
			t.Errorf("%s: reason %q does not name the global configuration store", fault.name, errkind.MessageOf(err))
		}
		// Well before a client's own timeout; the bound is 1 s.
		if took > bound+5*time.Second {
			t.Errorf("%s: the write failed after %v, bound %v", fault.name, took, bound)
		}
		t.Logf("%s: write failed after %v: %v", fault.name, took.Round(time.Millisecond), err)
		if _, err := s.UpdateNamespace(ctx, "public/default", func(p *policy.Policies) error { return nil }); !errors.Is(err, policy.ErrUnreachable) {
			t.Errorf("%s: update namespace: %v, want ErrUnreachable", fault.name, err)
		}
		// Reads come from the cache.
		if _, err := s.Namespace(ctx, "public/default"); err != nil {
			t.Errorf("%s: read namespace: %v", fault.name, err)
		}
		if ts, err := s.Tenants(ctx); err != nil || len(ts) != 2 {
			t.Errorf("%s: tenants %v, %v", fault.name, ts, err)
		}
		// A caller whose own deadline is shorter gets its own error.
		short, cancelShort := context.WithTimeout(ctx, bound/4)
		err = s.CreateNamespace(short, "t1/short", nil)
		cancelShort()
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, policy.ErrUnreachable) {
			t.Errorf("%s: with the caller's shorter deadline: %v, want the caller's deadline, not ErrUnreachable", fault.name, err)
		}

		link.Up()
		start = time.Now()
		if err := s.CreateNamespace(ctx, "t1/after-"+fault.name, nil); err != nil {
			t.Fatalf("%s: create namespace after the heal: %v", fault.name, err)
		}
		t.Logf("%s: first write after the heal took %v", fault.name, time.Since(start).Round(time.Millisecond))
		if _, err := s.Namespace(ctx, "t1/after-"+fault.name); err != nil {
			t.Errorf("%s: read after the write: %v", fault.name, err)
		}
	}
	// What failed was not written.
	for _, ns := range []string{"t1/during-cut", "t1/during-blackhole", "t1/short"} {
		if _, err := tc.Meta.Get(ctx, policy.NamespaceKey("t1", strings.TrimPrefix(ns, "t1/"))); !errors.Is(err, metastore.ErrNotFound) {
			t.Errorf("%s: %v, want not found", ns, err)
		}
	}
}
