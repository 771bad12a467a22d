package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAdminPermissions(t *testing.T) {
	url, _, _ := adminRegion(t)
	a := adminRunner{t, url}
	a.ok("tenants", "create", "acme")
	a.ok("namespaces", "create", "acme/app")

	a.ok("namespaces", "grant-permission", "acme/app", "--role", "alice", "--actions", "produce,consume,produce")
	a.ok("namespaces", "grant-permission", "acme/app", "--role", "bob", "--actions", "consume")
	var perms map[string][]string
	a.json(&perms, "namespaces", "permissions", "acme/app")
	if want := map[string][]string{"alice": {"consume", "produce"}, "bob": {"consume"}}; !reflect.DeepEqual(perms, want) {
		t.Errorf("namespace permissions = %v, want %v", perms, want)
	}
	if out := a.ok("namespaces", "permissions", "acme/app"); !strings.Contains(out, "alice") || !strings.Contains(out, "consume, produce") {
		t.Errorf("namespaces permissions: %q", out)
	}
	a.ok("namespaces", "revoke-permission", "acme/app", "--role", "bob")
	a.ok("namespaces", "revoke-permission", "acme/app", "--role", "bob")
	perms = nil
	a.json(&perms, "namespaces", "permissions", "acme/app")
	if len(perms) != 1 || perms["bob"] != nil {
		t.Errorf("after revoke: %v", perms)
	}
	a.fails(1, []string{"404"}, "namespaces", "grant-permission", "acme/none", "--role", "r", "--actions", "consume")

	a.ok("namespaces", "grant-subscription-permission", "acme/app", "-s", "audit", "--roles", "x,w")
	var subs map[string][]string
	a.json(&subs, "namespaces", "subscription-permission", "acme/app")
	if want := map[string][]string{"audit": {"w", "x"}}; !reflect.DeepEqual(subs, want) {
		t.Errorf("subscription permissions = %v, want %v", subs, want)
	}
	a.ok("namespaces", "revoke-subscription-permission", "acme/app", "--subscription", "audit", "--role", "w")
	subs = nil
	a.json(&subs, "namespaces", "subscription-permission", "acme/app")
	if want := map[string][]string{"audit": {"x"}}; !reflect.DeepEqual(subs, want) {
		t.Errorf("after revoke: %v", subs)
	}

	tp := "persistent://acme/app/orders"
	a.ok("topics", "grant-permission", tp, "--role", "carol", "--actions", "produce")
	a.ok("topics", "grant-permission", tp, "--role", "alice", "--actions", "functions")
	perms = nil
	a.json(&perms, "topics", "permissions", tp)
	if want := map[string][]string{"alice": {"consume", "functions", "produce"}, "carol": {"produce"}}; !reflect.DeepEqual(perms, want) {
		t.Errorf("topic permissions = %v, want %v", perms, want)
	}
	a.ok("topics", "revoke-permission", tp, "--role", "carol")
	a.fails(1, []string{"412", "not set at the topic level"}, "topics", "revoke-permission", tp, "--role", "carol")
}

func TestAdminPermissionUsageErrors(t *testing.T) {
	a := adminRunner{t, "http://127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"namespaces", "grant-permission", "t/ns"}, []string{"--role", "--actions"}},
		{[]string{"namespaces", "grant-permission", "t/ns", "--role", "r", "--actions", "produce,root"}, []string{"--actions", `unknown action "root"`}},
		{[]string{"namespaces", "grant-permission", "t/ns", "--role", "a\x01", "--actions", "produce"}, []string{"--role"}},
		{[]string{"namespaces", "revoke-permission", "t/ns"}, []string{"--role"}},
		{[]string{"namespaces", "grant-subscription-permission", "t/ns", "--roles", "a"}, []string{"--subscription"}},
		{[]string{"namespaces", "grant-subscription-permission", "t/ns", "-s", "s"}, []string{"--roles"}},
		{[]string{"namespaces", "revoke-subscription-permission", "t/ns", "-s", "s"}, []string{"--role"}},
		{[]string{"namespaces", "permissions", "noslash"}, []string{"tenant/namespace"}},
		{[]string{"topics", "grant-permission", "t", "--role", "r"}, []string{"--actions"}},
		{[]string{"topics", "revoke-permission", "t"}, []string{"--role"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			start := time.Now()
			adminRunner{t, a.url}.fails(2, tc.want, tc.args...)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v: a usage error must not wait for a server", d)
			}
		})
	}
}
