package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestAdminNamespaceSchemaSecurityAndRates drives the namespace verbs of
// schema validation and auto-update, subscription auth mode, encryption
// and rates against a region, reading each back as text and as JSON.
func TestAdminNamespaceSchemaSecurityAndRates(t *testing.T) {
	url, _, _ := adminRegion(t)
	a := adminRunner{t, url}
	const ns = "public/default"

	var b bool
	a.json(&b, "namespaces", "get-schema-validation-enforce", ns)
	if b {
		t.Fatal("schema validation enforced by default")
	}
	a.ok("namespaces", "set-schema-validation-enforce", ns, "--enable")
	a.json(&b, "namespaces", "get-schema-validation-enforced", ns) // the alias
	if !b {
		t.Fatal("schema validation not enforced after --enable")
	}
	a.ok("namespaces", "set-is-allow-auto-update-schema", ns, "-d")
	if out := a.ok("namespaces", "get-is-allow-auto-update-schema", ns); out != "false\n" {
		t.Fatalf("get-is-allow-auto-update-schema: %q", out)
	}
	a.ok("namespaces", "set-encryption-required", ns, "-e")
	a.json(&b, "namespaces", "get-encryption-required", ns)
	if !b {
		t.Fatal("encryption not required after -e")
	}
	a.ok("namespaces", "set-encryption-required", ns, "--disable")

	var st *string
	a.json(&st, "namespaces", "get-schema-autoupdate-strategy", ns)
	if st != nil {
		t.Fatalf("auto-update strategy %q before any was set", *st)
	}
	for flag, want := range map[string]string{"NONE": "AlwaysCompatible", "backward_transitive": "BackwardTransitive", "FULL": "Full"} {
		a.ok("namespaces", "set-schema-autoupdate-strategy", ns, "--compatibility", flag)
		a.json(&st, "namespaces", "get-schema-autoupdate-strategy", ns)
		if st == nil || *st != want {
			t.Fatalf("--compatibility %s: %v, want %s", flag, st, want)
		}
	}
	a.ok("namespaces", "set-schema-autoupdate-strategy", ns, "--disabled")
	if out := a.ok("namespaces", "get-schema-autoupdate-strategy", ns); out != "AutoUpdateDisabled\n" {
		t.Fatalf("after --disabled: %q", out)
	}

	if out := a.ok("namespaces", "get-subscription-auth-mode", ns); out != "None\n" {
		t.Fatalf("default subscription auth mode: %q", out)
	}
	a.ok("namespaces", "set-subscription-auth-mode", ns, "-m", "Prefix")
	var mode string
	a.json(&mode, "namespaces", "get-subscription-auth-mode", ns)
	if mode != "Prefix" {
		t.Fatalf("subscription auth mode %q", mode)
	}
	var pol map[string]any
	a.json(&pol, "namespaces", "get-policies", ns)
	if pol["schema_validation_enforced"] != true || pol["is_allow_auto_update_schema"] != false || pol["subscription_auth_mode"] != "Prefix" ||
		pol["schema_auto_update_compatibility_strategy"] != "AutoUpdateDisabled" || pol["encryption_required"] != false {
		t.Fatalf("policies %v", pol)
	}

	// Rates: this cluster's entry, set with pulsar-admin's flags.
	var rate map[string]any
	a.json(&rate, "namespaces", "get-dispatch-rate", ns)
	if rate != nil {
		t.Fatalf("dispatch rate before any was set: %v", rate)
	}
	if out := a.ok("namespaces", "get-publish-rate", ns); out != "not set\n" {
		t.Fatalf("get-publish-rate: %q", out)
	}
	a.ok("namespaces", "set-dispatch-rate", ns, "--msg-dispatch-rate", "100", "--dispatch-rate-period", "2", "--relative-to-publish-rate")
	a.ok("namespaces", "set-subscription-dispatch-rate", ns, "--byte-dispatch-rate", "1048576")
	a.ok("namespaces", "set-replicator-dispatch-rate", ns, "--msg-dispatch-rate", "7")
	a.ok("namespaces", "set-publish-rate", ns, "--msg-publish-rate", "50")
	a.ok("namespaces", "set-subscribe-rate", ns, "--subscribe-rate", "3")
	a.json(&rate, "namespaces", "get-dispatch-rate", ns)
	if rate["dispatchThrottlingRateInMsg"] != float64(100) || rate["dispatchThrottlingRateInByte"] != float64(-1) || rate["ratePeriodInSecond"] != float64(2) || rate["relativeToPublishRate"] != true {
		t.Fatalf("dispatch rate %v", rate)
	}
	if out := a.ok("namespaces", "get-subscription-dispatch-rate", ns); !strings.Contains(out, "1048576") || !strings.Contains(out, "no limit") {
		t.Fatalf("get-subscription-dispatch-rate: %q", out)
	}
	a.json(&rate, "namespaces", "get-subscribe-rate", ns)
	if rate["subscribeThrottlingRatePerConsumer"] != float64(3) || rate["ratePeriodInSecond"] != float64(30) {
		t.Fatalf("subscribe rate %v", rate)
	}
	if out := a.ok("namespaces", "get-replicator-dispatch-rate", ns); !regexp.MustCompile(`(?m)^messages +7$`).MatchString(out) {
		t.Fatalf("get-replicator-dispatch-rate: %q", out)
	}
	for _, r := range []string{"dispatch-rate", "subscription-dispatch-rate", "replicator-dispatch-rate", "publish-rate", "subscribe-rate"} {
		a.ok("namespaces", "remove-"+r, ns)
		rate = map[string]any{"stale": true}
		a.json(&rate, "namespaces", "get-"+r, ns)
		if rate != nil {
			t.Fatalf("%s after remove: %v", r, rate)
		}
	}
	a.fails(1, []string{"404"}, "namespaces", "set-publish-rate", "public/none", "--msg-publish-rate", "5")
	a.fails(1, []string{"404"}, "namespaces", "set-subscription-auth-mode", "public/none", "-m", "None")
}

func TestAdminNamespaceSchemaSecurityUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"namespaces", "set-schema-validation-enforce", "t/ns"}, []string{"--enable", "--disable"}},
		{[]string{"namespaces", "set-encryption-required", "t/ns", "-e", "-d"}, []string{"exactly one"}},
		{[]string{"namespaces", "set-schema-autoupdate-strategy", "t/ns"}, []string{"--compatibility or --disabled"}},
		{[]string{"namespaces", "set-schema-autoupdate-strategy", "t/ns", "-c", "Sideways"}, []string{"--compatibility", "Sideways"}},
		{[]string{"namespaces", "set-schema-autoupdate-strategy", "t/ns", "-c", "FULL", "--disabled"}, []string{"not both"}},
		{[]string{"namespaces", "set-subscription-auth-mode", "t/ns"}, []string{"--subscription-auth-mode"}},
		{[]string{"namespaces", "set-subscription-auth-mode", "t/ns", "-m", "Suffix"}, []string{"None or Prefix"}},
		{[]string{"namespaces", "set-dispatch-rate", "t/ns", "--msg-dispatch-rate", "-5"}, []string{"-5"}},
		{[]string{"namespaces", "set-subscribe-rate", "t/ns", "--subscribe-rate-period", "-1"}, []string{"-1"}},
		{[]string{"namespaces", "set-publish-rate", "t/ns", "--byte-publish-rate", "x"}, []string{"byte-publish-rate"}},
		{[]string{"namespaces", "get-publish-rate", "noslash"}, []string{"tenant/namespace"}},
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
