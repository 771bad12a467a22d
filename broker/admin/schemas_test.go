package admin_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/globalconfig/schema"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/topic"
)

func startSchemas(t *testing.T) (*env, *schema.Store) {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{Bookies: 0})
	store, err := policy.New(c.Connect(), policy.Config{LocalCluster: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.EnsureStandalone(context.Background(), "standalone", policy.ClusterData{
		ServiceURL: "http://127.0.0.1:8080", BrokerServiceURL: "pulsar://127.0.0.1:6650"}); err != nil {
		t.Fatal(err)
	}
	schemas, err := schema.New(c.Connect(), schema.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ft := newFakeTopics()
	srv := httptest.NewServer(admin.New(admin.Config{Policies: store, Broker: adminapi.Broker{Topics: ft}, Cluster: "standalone", Schemas: schemas}))
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, topics: ft, store: store}, schemas
}

const (
	userV1 = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}`
	userV2 = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"name","type":"string","default":""}]}`
	userV3 = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"age","type":"int"}]}`
)

func post(typ, def string) string {
	b, _ := json.Marshal(map[string]any{"type": typ, "schema": def, "properties": map[string]string{"owner": "acme"}})
	return string(b)
}

func TestSchemaEndpoints(t *testing.T) {
	e, schemas := startSchemas(t)
	const base = "/admin/v2/schemas/public/default/users"
	expect := func(method, path, body string, status int, contains string) string {
		t.Helper()
		code, got, _ := e.do(method, path, body)
		if code != status || !strings.Contains(got, contains) {
			t.Fatalf("%s %s: %d %s, want %d containing %q", method, path, code, got, status, contains)
		}
		return got
	}
	expect("GET", base+"/schema", "", 404, "Schema not found")
	expect("GET", base+"/schemas", "", 200, `"getSchemaResponses":[]`)
	expect("POST", base+"/schema", post("AVRO", userV1), 200, `"version":0`)
	expect("POST", base+"/schema", post("AVRO", userV1), 200, `"version":0`) // the same: its version
	expect("POST", base+"/schema", post("AVRO", userV2), 200, `"version":1`)
	// FULL (the default): a field without a default cannot be added.
	expect("POST", base+"/compatibility", post("AVRO", userV3), 200, `{"compatibility":false,"schemaCompatibilityStrategy":"FULL"}`)
	expect("POST", base+"/compatibility", post("AVRO", userV2), 200, `"compatibility":true`)
	expect("POST", base+"/schema", post("AVRO", userV3), 409, "reason")
	expect("POST", base+"/version", post("AVRO", userV1), 200, `{"version":0}`)
	expect("POST", base+"/version", post("AVRO", userV3), 404, "Schema not found")
	got := expect("GET", base+"/schema", "", 200, `"version":1`)
	var r struct {
		Version    int64
		Type, Data string
		Timestamp  int64
		Properties map[string]string
	}
	if err := json.Unmarshal([]byte(got), &r); err != nil || r.Type != "AVRO" || r.Data != userV2 || r.Timestamp == 0 || r.Properties["owner"] != "acme" {
		t.Fatalf("GET schema = %+v %v", r, err)
	}
	expect("GET", base+"/schema/0", "", 200, `"version":0`)
	expect("GET", base+"/schema/5", "", 404, "Schema not found")
	expect("GET", base+"/schema/x", "", 400, "reason")
	got = expect("GET", base+"/schemas", "", 200, `"getSchemaResponses"`)
	var all struct {
		Schemas []struct{ Version int64 } `json:"getSchemaResponses"`
	}
	if err := json.Unmarshal([]byte(got), &all); err != nil || len(all.Schemas) != 2 || all.Schemas[1].Version != 1 {
		t.Fatalf("GET schemas = %s", got)
	}
	// A partition has its partitioned topic's schema.
	expect("GET", "/admin/v2/schemas/public/default/users-partition-2/schema", "", 200, `"version":1`)
	// A strategy set on the namespace (by its Pulsar name) applies.
	// (Through JSON, whether policy.Policies models the field or not.)
	if _, err := e.store.UpdateNamespace(context.Background(), "public/default", func(p *policy.Policies) error {
		b, _ := json.Marshal(p)
		var m map[string]any
		json.Unmarshal(b, &m)
		m["schema_compatibility_strategy"] = "FORWARD"
		b, _ = json.Marshal(m)
		*p = policy.Policies{}
		return json.Unmarshal(b, p)
	}); err != nil {
		t.Fatal(err)
	}
	expect("POST", base+"/compatibility", post("AVRO", userV3), 200, `{"compatibility":true,"schemaCompatibilityStrategy":"FORWARD"}`)
	// A topic's own strategy wins over its namespace's (the local one
	// over the global one).
	expect("PUT", "/admin/v2/persistent/public/default/users/schemaCompatibilityStrategy?isGlobal=true", `"ALWAYS_INCOMPATIBLE"`, 204, "")
	expect("POST", base+"/compatibility", post("AVRO", userV3), 200, `{"compatibility":false,"schemaCompatibilityStrategy":"ALWAYS_INCOMPATIBLE"}`)
	expect("PUT", "/admin/v2/persistent/public/default/users/schemaCompatibilityStrategy", `"ALWAYS_COMPATIBLE"`, 204, "")
	expect("POST", base+"/compatibility", post("AVRO", userV3), 200, `{"compatibility":true,"schemaCompatibilityStrategy":"ALWAYS_COMPATIBLE"}`)
	expect("DELETE", "/admin/v2/persistent/public/default/users/schemaCompatibilityStrategy", "", 204, "")
	expect("DELETE", "/admin/v2/persistent/public/default/users/schemaCompatibilityStrategy?isGlobal=true", "", 204, "")
	expect("POST", base+"/compatibility", post("AVRO", userV3), 200, `"schemaCompatibilityStrategy":"FORWARD"`)

	// Bad input: 4xx with a reason, nothing stored.
	n, _ := topic.Parse("persistent://public/default/users")
	before, _ := schemas.All(context.Background(), n)
	for _, bad := range []struct {
		body   string
		status int
	}{
		{`{"type":`, 400},
		{``, 400},
		{`{"schema":"x"}`, 400},
		{post("NOPE", ""), 400},
		{post("AVRO", `{"type":"record"`), 400},
		{post("JSON", `{"type":"record","name":"U","fields":[{"name":"a","type":"nosuch"}]}`), 400},
		{post("AVRO", strings.Repeat(" ", schema.MaxSchemaBytes+1)), 413},
	} {
		code, got, _ := e.do("POST", base+"/schema", bad.body)
		if code != bad.status || !strings.Contains(got, "reason") {
			t.Errorf("POST %.60q: %d %s, want %d with a reason", bad.body, code, got, bad.status)
		}
	}
	expect("POST", "/admin/v2/schemas/public/nope/users/schema", post("STRING", ""), 404, "reason")
	if after, _ := schemas.All(context.Background(), n); len(after) != len(before) {
		t.Fatalf("bad input stored something: %d versions, then %d", len(before), len(after))
	}

	// Deletion, then forced deletion.
	expect("DELETE", base+"/schema", "", 200, `"version":2`)
	expect("GET", base+"/schema", "", 404, "Schema not found")
	expect("GET", base+"/schemas", "", 200, `"getSchemaResponses":[]`)
	expect("DELETE", base+"/schema", "", 404, "Schema not found")
	expect("POST", base+"/schema", post("AVRO", userV3), 200, `"version":3`)
	expect("DELETE", base+"/schema?force=true", "", 200, "version")
	expect("GET", base+"/schema", "", 404, "Schema not found")
	expect("POST", base+"/schema", post("STRING", ""), 200, `"version":0`)

	// A deleted namespace's schemas go with it.
	expect("PUT", "/admin/v2/namespaces/public/tmp", "", 204, "")
	expect("POST", "/admin/v2/schemas/public/tmp/t/schema", post("STRING", ""), 200, `"version":0`)
	expect("DELETE", "/admin/v2/namespaces/public/tmp", "", 204, "")
	expect("PUT", "/admin/v2/namespaces/public/tmp", "", 204, "")
	expect("GET", "/admin/v2/schemas/public/tmp/t/schema", "", 404, "Schema not found")
	expect("GET", base+"/schema", "", 200, `"version":0`)
}
