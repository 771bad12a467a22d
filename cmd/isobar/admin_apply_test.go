package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseApplyFile(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		errs     []string // each in the error; none: valid
	}{
		{"compose init", "tenants:\n  - {name: geo, allowedClusters: [a, b]}\nnamespaces:\n  - {name: geo/r, replicationClusters: [a, b]}\n", nil},
		{"empty", "{}\n", nil},
		{"every bad name at once", "tenants:\n  - {name: 'a/b'}\nnamespaces:\n  - {name: nope}\n", []string{"tenants[0].name", "namespaces[0].name"}},
		{"unknown field", "tenants:\n  - {name: geo, clusters: [a]}\n", []string{"clusters"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseApplyFile([]byte(tc.in))
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %v", tc.errs)
			}
			for _, w := range tc.errs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestAdminApply applies a file twice (the second time changes nothing)
// and then a changed one.
func TestAdminApply(t *testing.T) {
	url, _, cluster := adminRegion(t)
	a := adminRunner{t, url}
	file := filepath.Join(t.TempDir(), "init.yaml")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tenants:\n  - {name: app, allowedClusters: [" + cluster + "]}\nnamespaces:\n  - {name: app/orders, replicationClusters: [" + cluster + "]}\n  - {name: app/plain}\n")
	a.ok("apply", file)
	a.ok("apply", file)
	var names []string
	a.json(&names, "namespaces", "list", "app")
	slices.Sort(names)
	if want := []string{"app/orders", "app/plain"}; !slices.Equal(names, want) {
		t.Errorf("namespaces of app: %v, want %v", names, want)
	}
	write("tenants:\n  - {name: app, adminRoles: [ops], allowedClusters: [" + cluster + "]}\n")
	a.ok("apply", file)
	out := a.ok("tenants", "get", "app", "--json")
	if !strings.Contains(out, `"ops"`) {
		t.Errorf("tenant app after the second file: %s, want admin role ops", out)
	}
	write("tenants:\n  - {name: app, allowedClusters: [nowhere]}\n")
	a.fails(1, []string{"apply tenant app"}, "apply", file)
}
