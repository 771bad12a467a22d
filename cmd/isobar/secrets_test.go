package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsCreate makes a federation's secrets, checks a proxy token
// with `isobar tokens validate`, keeps them on a second run, and refuses
// bad flags before writing anything.
func TestSecretsCreate(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "secrets")
	out, err := run(ctx, "secrets", "create", "--dir", dir, "--regions", "us-east,eu-west", "--host", "proxy-us-east,broker-us-east-1")
	if err != nil || !strings.Contains(out, "proxy token eu-west/proxy.token (role proxy-eu-west)") {
		t.Fatalf("create: %q %v", out, err)
	}
	out, err = run(ctx, "tokens", "validate", "-f", filepath.Join(dir, "eu-west", "proxy.token"), "--secret-key", filepath.Join(dir, "secret.key"))
	if err != nil || out != "valid: role proxy-eu-west, expires never\n" {
		t.Fatalf("validate the proxy token: %q %v", out, err)
	}
	ca, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if _, err := run(ctx, "secrets", "create", "--dir", dir, "--regions", "us-east,eu-west", "--host", "proxy-us-east,broker-us-east-1"); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); string(again) != string(ca) || len(ca) == 0 {
		t.Fatal("the CA was made again on the second run")
	}
	bad := filepath.Join(t.TempDir(), "bad")
	for _, args := range [][]string{
		{"--dir", bad, "--regions", "US-East"},
		{"--dir", bad, "--regions", "a,a"},
		{"--dir", bad},
		{"--regions", "a"},
		{"--dir", bad, "--regions", "a", "--host", "x,,y"},
	} {
		_, err := run(ctx, append([]string{"secrets", "create"}, args...)...)
		if _, ok := err.(usageError); !ok {
			t.Errorf("secrets create %v: %v, want a usage error", args, err)
		}
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("a refused create left %s behind (%v)", bad, err)
	}
}
