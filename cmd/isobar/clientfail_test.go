package main

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/secrets"
	"github.com/isobar-mq/isobar/region"
)

// secureRegion starts a region whose broker serves only TLS and requires
// tokens (as `--secure` makes it) and returns its broker's endpoints and
// the CA and superuser token files.
func secureRegion(t *testing.T) (plainURL, tlsURL, ca, token string) {
	t.Helper()
	dir := t.TempDir()
	files, err := secrets.Ensure(filepath.Join(dir, "secrets"), []string{"sec"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	r, err := region.Start(ctx, region.Config{Name: "sec", DataDir: filepath.Join(dir, "data"), Brokers: 1, Secrets: &files}, region.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); err != nil {
			t.Errorf("region shutdown: %v", err)
		}
	})
	b := r.Brokers()[0]
	return b.ServiceURL, b.ServiceURLTLS, files.CA, files.SuperUserToken
}

// clientFails runs an `isobar client` command that must fail before its
// --timeout with a reason and a hint (the client library alone retried
// these until its own 30 s timeout and then said "context deadline
// exceeded" or "connection error").
func clientFails(t *testing.T, args []string, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args = append(args, "--timeout", "45s", "--log-level", "error")
	out, err := run(ctx, args...)
	if err == nil {
		t.Fatalf("%s: no error\n%s", strings.Join(args, " "), out)
	}
	msg := err.Error()
	t.Logf("isobar %s:\n%s", strings.Join(args, " "), msg)
	for _, w := range append(want, "\nhint: ") {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: error does not say %q:\n%s", strings.Join(args, " "), w, msg)
		}
	}
	for _, bad := range []string{"deadline exceeded", "--timeout", "connection error", "errkind:", "policy:", "wire:", "broker: "} {
		if strings.Contains(msg, bad) {
			t.Errorf("%s: error says %q:\n%s", strings.Join(args, " "), bad, msg)
		}
	}
	if code := exitCode(err); code != 1 {
		t.Errorf("%s: exit %d, want 1", strings.Join(args, " "), code)
	}
}

// TestClientFailsFastWithTheBrokersReason: `isobar client produce` and
// `consume` against a dead port, a TLS-only broker without a token or a
// trusted CA, a plaintext URL for a TLS port and the reverse, and topics
// whose tenant or namespace does not exist: each fails at once with the
// broker's reason (or what was found at the address) and a hint.
func TestClientFailsFastWithTheBrokersReason(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	produce := func(url string, more ...string) []string {
		return append([]string{"client", "produce", "t", "-m", "x", "--service-url", url}, more...)
	}
	t.Run("dead port", func(t *testing.T) {
		clientFails(t, produce("pulsar://"+dead), "nothing listens at "+dead+" (connection refused)", "is the broker running")
		clientFails(t, []string{"client", "consume", "t", "-s", "s", "-u", "pulsar://" + dead}, "connection refused")
		clientFails(t, []string{"client", "produce", "t", "-m", "x", "--url", "pulsar://" + dead}, "nothing listens at "+dead)
	})

	plainURL, tlsURL, ca, token := secureRegion(t)
	tlsAddr := strings.TrimPrefix(tlsURL, "pulsar+ssl://")
	t.Run("no token", func(t *testing.T) {
		clientFails(t, produce(tlsURL, "--tls-trust-certs-file", ca),
			"AuthenticationError", "no credentials; this server requires auth method token", "--token-file")
	})
	t.Run("plaintext port of a TLS-only broker", func(t *testing.T) {
		clientFails(t, produce(plainURL, "--token-file", token), "this broker serves only TLS: connect to "+tlsURL, "use --service-url "+tlsURL+" with")
	})
	t.Run("untrusted CA", func(t *testing.T) {
		clientFails(t, produce(tlsURL, "--token-file", token), "not signed by a CA this client trusts", "--tls-trust-certs-file")
	})
	t.Run("plaintext URL for the TLS port", func(t *testing.T) {
		clientFails(t, produce("pulsar://"+tlsAddr, "--token-file", token), tlsAddr+" speaks TLS", "pulsar+ssl://"+tlsAddr)
	})
	t.Run("missing tenant or namespace", func(t *testing.T) {
		sec := []string{"--token-file", token, "--tls-trust-certs-file", ca}
		clientFails(t, append([]string{"client", "produce", "persistent://nobody/ns/t", "-m", "x", "-u", tlsURL}, sec...),
			`TopicNotFound: tenant "nobody" does not exist`, "isobar admin tenants create")
		clientFails(t, append([]string{"client", "consume", "persistent://public/nowhere/t", "-s", "s", "-u", tlsURL}, sec...),
			`TopicNotFound: namespace "public/nowhere" does not exist`, "isobar admin namespaces create")
	})
	t.Run("TLS URL for a plaintext port", func(t *testing.T) {
		_, serviceURL, _ := adminRegion(t)
		addr := strings.TrimPrefix(serviceURL, "pulsar://")
		clientFails(t, produce("pulsar+ssl://"+addr), addr+" does not speak TLS", "pulsar://"+addr)
		clientFails(t, []string{"client", "produce", "persistent://pub lic/default/t", "-m", "x", "-u", serviceURL},
			`InvalidTopicName: invalid name "persistent://pub lic/default/t": tenant has a bad character ' '`, "tenant/namespace/name")
	})
}

// TestClientServiceURLFromEnvAndShortFlags: ISOBAR_SERVICE_URL is the
// default service URL, and produce takes pulsar-client's -k and -p.
func TestClientServiceURLFromEnvAndShortFlags(t *testing.T) {
	_, serviceURL, _ := adminRegion(t)
	t.Setenv("ISOBAR_SERVICE_URL", serviceURL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := run(ctx, "client", "produce", "short", "-m", "hello", "-k", "key-1", "-p", "a=1,b=2", "--log-level", "error"); err != nil {
		t.Fatalf("produce with the URL from the environment: %v\n%s", err, out)
	}
	out, err := run(ctx, "client", "consume", "short", "-s", "s", "-p", "Earliest", "--json", "--log-level", "error")
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, out)
	}
	for _, want := range []string{`"payload":"hello"`, `"key":"key-1"`, `"a":"1"`, `"b":"2"`} {
		if !strings.Contains(out, want) {
			t.Errorf("consumed %s, want %s", out, want)
		}
	}
}

// TestClientTimeoutBoundsTheCommand: against a port that accepts and
// never answers, --timeout ends the command with what did not happen.
func TestClientTimeoutBoundsTheCommand(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			defer nc.Close() // held open, never answered
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err = run(ctx, "client", "produce", "t", "-m", "x", "-u", "pulsar://"+ln.Addr().String(), "--timeout", "1s", "--log-level", "error")
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()+" did not answer CONNECT within") || !strings.Contains(err.Error(), "hint: ") {
		t.Fatalf("err %v", err)
	}
	if code := exitCode(err); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
}
