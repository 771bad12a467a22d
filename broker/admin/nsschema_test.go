package admin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// TestNamespaceSchemaAndSecurity sets and reads the namespace's schema
// validation, auto-update strategy and flag, subscription auth mode and
// encryption requirement through pulsaradmin (as Pulsar clients send
// them), and what GET answers when one is not set; the namespace's
// document carries them in Pulsar's names.
func TestNamespaceSchemaAndSecurity(t *testing.T) {
	e := start(t)
	const ns = "/admin/v2/namespaces/public/default"
	e.run([]step{
		{"GET", ns + "/schemaValidationEnforced", "", 200, "false", ""},
		{"GET", ns + "/schemaAutoUpdateCompatibilityStrategy", "", 204, "", ""},
		{"GET", ns + "/isAllowAutoUpdateSchema", "", 200, "true", ""},
		{"GET", ns + "/subscriptionAuthMode", "", 200, `"None"`, ""},
		{"GET", ns + "/encryptionRequired", "", 200, "false", ""},
	})
	_, doc, _ := e.do("GET", ns, "")
	for _, f := range []string{`"schema_validation_enforced":false`, `"encryption_required":false`, `"subscription_auth_mode":"None"`} {
		if !strings.Contains(doc, f) {
			t.Errorf("namespace document lacks %s: %s", f, doc)
		}
	}

	c, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: e.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	n := c.Namespaces()
	name, _ := utils.GetNamespaceName("public/default")
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	check("set validation", n.SetSchemaValidationEnforced(*name, true))
	check("set auto-update strategy", n.SetSchemaAutoUpdateCompatibilityStrategy(*name, utils.BackwardTransitive))
	check("set auto-update", n.SetIsAllowAutoUpdateSchema(*name, false))
	check("set auth mode", n.SetSubscriptionAuthMode(*name, utils.Prefix))
	check("set encryption", n.SetEncryptionRequiredStatus(*name, true)) // sent as "true"

	if v, err := n.GetSchemaValidationEnforced(*name); err != nil || !v {
		t.Fatalf("validation enforced: %v %v", v, err)
	}
	if v, err := n.GetSchemaAutoUpdateCompatibilityStrategy(*name); err != nil || v != utils.BackwardTransitive {
		t.Fatalf("auto-update strategy: %v %v", v, err)
	}
	if v, err := n.GetIsAllowAutoUpdateSchema(*name); err != nil || v {
		t.Fatalf("auto-update: %v %v", v, err)
	}
	p, err := n.GetPolicies("public/default")
	check("policies", err)
	if !p.SchemaValidationEnforced || p.SchemaAutoUpdateCompatibilityStrategy != utils.BackwardTransitive || p.IsAllowAutoUpdateSchema == nil ||
		*p.IsAllowAutoUpdateSchema || p.SubscriptionAuthMode != utils.Prefix || !p.EncryptionRequired {
		t.Fatalf("policies %+v", p)
	}
	e.run([]step{
		{"GET", ns + "/subscriptionAuthMode", "", 200, `"Prefix"`, ""},
		{"GET", ns + "/encryptionRequired", "", 200, "true", ""},
		// Pulsar's other spellings: bare words, any case; null resets.
		{"PUT", ns + "/schemaAutoUpdateCompatibilityStrategy", "autoupdatedisabled", 204, "", ""},
		{"GET", ns + "/schemaAutoUpdateCompatibilityStrategy", "", 200, `"AutoUpdateDisabled"`, ""},
		{"PUT", ns + "/schemaAutoUpdateCompatibilityStrategy", "null", 204, "", ""},
		{"GET", ns + "/schemaAutoUpdateCompatibilityStrategy", "", 204, "", ""},
		{"POST", ns + "/subscriptionAuthMode", "null", 204, "", ""},
		{"GET", ns + "/subscriptionAuthMode", "", 200, `"None"`, ""},
		{"POST", ns + "/encryptionRequired", "false", 204, "", ""},
		{"POST", ns + "/schemaValidationEnforced", `"false"`, 204, "", ""},
		{"GET", ns + "/schemaValidationEnforced", "", 200, "false", ""},
		{"POST", ns + "/isAllowAutoUpdateSchema", "true", 204, "", ""},
		{"GET", ns + "/isAllowAutoUpdateSchema", "", 200, "true", ""},
	})
	pol, err := e.store.Namespace(context.Background(), "public/default")
	check("stored", err)
	if pol.SchemaValidationEnforced || pol.SchemaAutoUpdateStrategy != "" || pol.IsAllowAutoUpdateSchema == nil || !*pol.IsAllowAutoUpdateSchema ||
		pol.SubscriptionAuthMode != "None" || pol.EncryptionRequired || len(pol.Extra) != 0 {
		t.Fatalf("stored %+v, extra %v", pol.SchemaAndSecurity, pol.Extra)
	}
}

// TestNamespaceSchemaAndSecurityBadInput: invalid JSON, values of the
// wrong type, unknown enumeration values and a namespace or tenant that
// does not exist are refused with a reason and change nothing.
func TestNamespaceSchemaAndSecurityBadInput(t *testing.T) {
	e := start(t)
	const ns = "/admin/v2/namespaces/public/default"
	e.run([]step{
		{"POST", ns + "/schemaValidationEnforced", "true", 204, "", ""},
		{"PUT", ns + "/schemaAutoUpdateCompatibilityStrategy", `"Forward"`, 204, "", ""},
		{"POST", ns + "/subscriptionAuthMode", `"Prefix"`, 204, "", ""},
	})
	bad := []step{
		{"POST", ns + "/schemaValidationEnforced", "", 400, "empty body", ""},
		{"POST", ns + "/schemaValidationEnforced", "yes", 400, "not true or false", ""},
		{"POST", ns + "/schemaValidationEnforced", "1", 400, "not true or false", ""},
		{"POST", ns + "/encryptionRequired", `{"encryptionRequired":true}`, 400, "not true or false", ""},
		{"POST", ns + "/encryptionRequired", `"TRUE!"`, 400, "", ""},
		{"POST", ns + "/isAllowAutoUpdateSchema", "[", 400, "", ""},
		{"PUT", ns + "/schemaAutoUpdateCompatibilityStrategy", `"Sideways"`, 400, "Sideways", ""},
		{"PUT", ns + "/schemaAutoUpdateCompatibilityStrategy", `"FULL_TRANSITIVE"`, 400, "AlwaysCompatible", ""},
		{"PUT", ns + "/schemaAutoUpdateCompatibilityStrategy", "", 400, "empty body", ""},
		{"POST", ns + "/schemaAutoUpdateCompatibilityStrategy", `"Full"`, 405, "", ""},
		{"POST", ns + "/subscriptionAuthMode", `"Suffix"`, 400, "want None or Prefix", ""},
		{"POST", ns + "/subscriptionAuthMode", `42`, 400, "", ""},
		{"DELETE", ns + "/schemaValidationEnforced", "", 405, "", ""},
		{"POST", "/admin/v2/namespaces/public/nonexist/encryptionRequired", "true", 404, `"Namespace does not exist"`, ""},
		{"GET", "/admin/v2/namespaces/public/nonexist/subscriptionAuthMode", "", 404, `"Namespace does not exist"`, ""},
		{"PUT", "/admin/v2/namespaces/non-exist/default/schemaAutoUpdateCompatibilityStrategy", `"Full"`, 404, `"Tenant does not exist"`, ""},
		// A namespace created with a bad value is refused too (412, as any
		// invalid policies document).
		{"PUT", "/admin/v2/namespaces/public/other", `{"subscription_auth_mode":"Everyone"}`, 412, "subscription_auth_mode", ""},
		{"PUT", "/admin/v2/namespaces/public/other", `{"schema_auto_update_compatibility_strategy":"Never"}`, 412, "schema_auto_update_compatibility_strategy", ""},
	}
	_, before, _ := e.do("GET", ns, "")
	for _, s := range bad {
		if s.status == 405 {
			if status, _, _ := e.do(s.method, s.path, s.body); status != 405 {
				t.Fatalf("%s %s: %d, want 405", s.method, s.path, status)
			}
		} else {
			e.run([]step{s})
		}
		if _, after, _ := e.do("GET", ns, ""); after != before {
			t.Fatalf("%s %s %s changed the namespace:\nbefore %s\nafter  %s", s.method, s.path, s.body, before, after)
		}
	}
	if status, _, _ := e.do("GET", "/admin/v2/namespaces/public/other", ""); status != 404 {
		t.Fatalf("a namespace created with a bad value: %d", status)
	}
	if !strings.Contains(before, `"schema_auto_update_compatibility_strategy":"Forward"`) || !strings.Contains(before, `"subscription_auth_mode":"Prefix"`) {
		t.Fatalf("namespace = %s", before)
	}
}
