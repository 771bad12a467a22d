package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokensCommands makes keys and tokens the way Pulsar's docs do with
// `pulsar tokens`, and checks them with validate and show.
func TestTokensCommands(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.key")
	if _, err := run(ctx, "tokens", "create-secret-key", "--output", secret); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(secret); len(b) != 32 {
		t.Fatalf("secret key of %d bytes, want 32 raw bytes", len(b))
	}
	if fi, _ := os.Stat(secret); fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret key mode %v", fi.Mode())
	}
	tok, err := run(ctx, "tokens", "create", "--secret-key", "file://"+secret, "--subject", "app", "--expiry-time", "1y")
	if err != nil {
		t.Fatal(err)
	}
	tok = strings.TrimSpace(tok)
	out, err := run(ctx, "tokens", "validate", "-i", tok, "--secret-key", secret)
	if err != nil || !strings.HasPrefix(out, "valid: role app, expires 20") {
		t.Fatalf("validate: %q %v", out, err)
	}
	out, err = run(ctx, "tokens", "show", "-i", tok)
	if err != nil || !strings.Contains(out, `"sub":"app"`) || !strings.Contains(out, `"alg":"HS256"`) {
		t.Fatalf("show: %q %v", out, err)
	}

	for _, alg := range []string{"RS256", "ES256"} {
		priv, pub := filepath.Join(dir, alg+".priv"), filepath.Join(dir, alg+".pub")
		if _, err := run(ctx, "tokens", "create-key-pair", "-a", alg, "--output-private-key", priv, "--output-public-key", pub); err != nil {
			t.Fatal(err)
		}
		tok, err := run(ctx, "tokens", "create", "--private-key", priv, "-s", "admin")
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, alg+".token")
		os.WriteFile(f, []byte(tok), 0o600)
		out, err := run(ctx, "tokens", "validate", "-f", f, "--public-key", pub)
		if err != nil || out != "valid: role admin, expires never\n" {
			t.Fatalf("%s validate: %q %v", alg, out, err)
		}
		// The other key pair's public key refuses it.
		other := filepath.Join(dir, "RS256.pub")
		if alg == "RS256" {
			other = secret
			_, err = run(ctx, "tokens", "validate", "-f", f, "--secret-key", other)
		} else {
			_, err = run(ctx, "tokens", "validate", "-f", f, "--public-key", other)
		}
		if err == nil || exitCode(err) != 1 {
			t.Fatalf("%s token checked with another key: %v", alg, err)
		}
	}

	// Bad input: usage errors (exit status 2) saying what is wrong.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tokens", "create", "--secret-key", secret}, "--subject"},
		{[]string{"tokens", "create", "-s", "a"}, "exactly one of --secret-key and --private-key"},
		{[]string{"tokens", "create", "-s", "a", "--secret-key", secret, "-e", "5x"}, "--expiry-time"},
		{[]string{"tokens", "create", "-s", "a", "--secret-key", secret, "-e", "-1d"}, "positive"},
		{[]string{"tokens", "create", "-s", "a", "--private-key", secret}, "private key"},
		{[]string{"tokens", "create-key-pair", "-a", "HS256", "--output-private-key", "x", "--output-public-key", "y"}, "RS256 or ES256"},
		{[]string{"tokens", "validate", "-i", "x"}, "one of secretKey and publicKey"},
		{[]string{"tokens", "show"}, "exactly one of -i, -f and --stdin"},
	} {
		_, err := run(ctx, c.args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v (exit %d), want a usage error saying %q", c.args, err, exitCode(err), c.want)
		}
	}
	// A malformed token is refused (exit 1) by show and validate.
	if _, err := run(ctx, "tokens", "show", "-i", "garbage"); err == nil || exitCode(err) != 1 {
		t.Errorf("show garbage: %v", err)
	}
}

// A key written over a file others could read is left readable by its
// owner only.
func TestSecretKeyOverAReadableFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(context.Background(), "tokens", "create-secret-key", "--output", path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Fatalf("%v %v: want a 32-byte key of mode 0600", fi.Mode(), err)
	}
}
