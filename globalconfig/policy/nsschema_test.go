package policy_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// The schema and security fields are read and written under Pulsar's
// names (not kept as unknown fields), and the two booleans are always
// written, as Pulsar does.
func TestSchemaAndSecurityJSON(t *testing.T) {
	var p policy.Policies
	const doc = `{"schema_validation_enforced":true,"schema_auto_update_compatibility_strategy":"Backward",
		"is_allow_auto_update_schema":false,"subscription_auth_mode":"Prefix","encryption_required":true}`
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		t.Fatal(err)
	}
	want := policy.SchemaAndSecurity{SchemaValidationEnforced: true, SchemaAutoUpdateStrategy: "Backward",
		SubscriptionAuthMode: "Prefix", EncryptionRequired: true}
	if got := p.SchemaAndSecurity; got.IsAllowAutoUpdateSchema == nil || *got.IsAllowAutoUpdateSchema || p.AllowsAutoUpdateSchema() {
		t.Fatalf("is_allow_auto_update_schema: %+v", got)
	}
	p.IsAllowAutoUpdateSchema = nil
	if p.SchemaAndSecurity != want || len(p.Extra) != 0 || !p.AllowsAutoUpdateSchema() || p.AuthMode() != "Prefix" {
		t.Fatalf("decoded %+v, extra %v", p.SchemaAndSecurity, p.Extra)
	}
	out, _ := json.Marshal(policy.Policies{})
	for _, f := range []string{`"schema_validation_enforced":false`, `"encryption_required":false`} {
		if !strings.Contains(string(out), f) {
			t.Errorf("%s lacks %s", out, f)
		}
	}
	if (policy.Policies{}).AuthMode() != policy.SubscriptionAuthNone {
		t.Error("unset auth mode is not None")
	}
}

// Unknown enumeration values are refused on create and update, and a
// refused update leaves the namespace as it was.
func TestSchemaAndSecurityValidated(t *testing.T) {
	s := newStore(t, policy.Config{LocalCluster: "test"})
	ctx := context.Background()
	must(t, s.EnsureStandalone(ctx, "test", policy.ClusterData{ServiceURL: "http://127.0.0.1:1"}))
	for _, doc := range []string{
		`{"schema_auto_update_compatibility_strategy":"Sometimes"}`,
		`{"schema_auto_update_compatibility_strategy":"backward"}`, // stored names are Pulsar's spelling
		`{"subscription_auth_mode":"Suffix"}`,
	} {
		var p policy.Policies
		must(t, json.Unmarshal([]byte(doc), &p))
		wantErr(t, s.CreateNamespace(ctx, "public/bad", &p), policy.ErrInvalid)
	}
	must(t, s.CreateNamespace(ctx, "public/ok", nil))
	_, err := s.UpdateNamespace(ctx, "public/ok", func(p *policy.Policies) error {
		p.EncryptionRequired = true
		p.SubscriptionAuthMode = "prefix"
		return nil
	})
	wantErr(t, err, policy.ErrInvalid)
	p, err := s.Namespace(ctx, "public/ok")
	must(t, err)
	if p.EncryptionRequired || p.SubscriptionAuthMode != "" {
		t.Fatalf("a refused update changed the namespace: %+v", p.SchemaAndSecurity)
	}

	for in, want := range map[string]string{"backward": "Backward", " FULLTRANSITIVE ": "FullTransitive", "AutoUpdateDisabled": "AutoUpdateDisabled"} {
		if got, err := policy.ParseSchemaAutoUpdateStrategy(in); err != nil || got != want {
			t.Errorf("ParseSchemaAutoUpdateStrategy(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := policy.ParseSchemaAutoUpdateStrategy("FULL_TRANSITIVE"); err == nil || !strings.Contains(err.Error(), "AlwaysCompatible") {
		t.Errorf("a compatibility strategy name taken as an auto-update one: %v", err)
	}
	if m, err := policy.ParseSubscriptionAuthMode("prefix"); err != nil || m != "Prefix" {
		t.Errorf("ParseSubscriptionAuthMode(prefix) = %q, %v", m, err)
	}
	if _, err := policy.ParseSubscriptionAuthMode("Suffix"); err == nil {
		t.Error("Suffix accepted")
	}
}
