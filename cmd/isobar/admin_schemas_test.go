package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAdminSchemas(t *testing.T) {
	url, _, _ := adminRegion(t)
	a := adminRunner{t, url}
	dir := t.TempDir()
	write := func(name string, v any) string {
		b, _ := json.Marshal(v)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v0 := write("v0.json", map[string]any{"type": "AVRO", "schema": `{"type":"record","name":"U","fields":[{"name":"id","type":"long"}]}`, "properties": map[string]string{"team": "a"}})
	bad := write("bad.json", map[string]any{"type": "AVRO", "schema": `{"type":"record","name":"U","fields":[{"name":"id","type":"long"},{"name":"n","type":"int"}]}`})
	const tp = "public/default/users"

	a.ok("schemas", "upload", tp, "-f", v0)
	var got []struct {
		Version    int64
		SchemaInfo struct {
			Type       string
			Properties map[string]string
		}
	}
	a.json(&got, "schemas", "get", tp)
	if len(got) != 1 || got[0].Version != 0 || got[0].SchemaInfo.Type != "AVRO" || got[0].SchemaInfo.Properties["team"] != "a" {
		t.Fatalf("schemas get: %+v", got)
	}
	if out := a.ok("schemas", "get", tp, "--version", "0"); !strings.Contains(out, "AVRO") || !strings.Contains(out, "team=a") {
		t.Fatalf("schemas get --version 0: %q", out)
	}
	if out := a.ok("schemas", "compatibility", tp, "-f", bad); !strings.Contains(out, "false") || !strings.Contains(out, "FULL") {
		t.Fatalf("schemas compatibility: %q", out)
	}
	if out, err := a.run("schemas", "upload", tp, "-f", bad); err == nil || !strings.Contains(out+err.Error(), "409") {
		t.Fatalf("incompatible upload: %v %q", err, out)
	}
	a.json(&got, "schemas", "list", tp)
	if len(got) != 1 {
		t.Fatalf("schemas list: %+v", got)
	}
	a.ok("schemas", "delete", tp)
	if _, err := a.run("schemas", "get", tp); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("get after delete: %v", err)
	}
	a.ok("schemas", "upload", tp, "-f", v0)
	a.ok("schemas", "delete", tp, "--force")
	if _, err := a.run("schemas", "upload", tp); err == nil {
		t.Fatal("upload without --filename accepted")
	}
}
