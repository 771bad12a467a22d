package compose

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/auth"
)

// TestComposeSecure runs the federation with docker-compose.secure.yml
// over docker-compose.yml: the secrets service makes the CA,
// certificates and tokens, every link is TLS (mutual within a region and
// between regions), brokers serve only TLS and check tokens, the
// proxies serve TLS and check tokens. It runs the README's commands for
// a client on the host (the CA and the superuser token copied out of
// the secrets volume; produce in us-east, consume in eu-west, which
// crosses the TLS NATS gateways and both regions' replicators with their
// own tokens) and checks what is refused.
func TestComposeSecure(t *testing.T) {
	e, isobar := setUp(t, "docker-compose.yml", secureFile)

	// The README's client commands, over TLS with the superuser's token.
	topic := "persistent://" + namespace + "/secure"
	tls := func(port int) []string {
		return []string{"--service-url", fmt.Sprintf("pulsar+ssl://localhost:%d", port), "--tls-trust-certs-file", e.ca, "--token-file", e.token}
	}
	type result struct {
		out string
		err error
	}
	consumed := make(chan result, 1)
	go func() {
		out, err := e.run(2*time.Minute, isobar, append([]string{"client", "consume", topic, "-s", "sub", "-p", "Earliest", "-n", "3"}, tls(secureProxyPulsar[1])...)...)
		consumed <- result{out, err}
	}()
	if out, err := e.run(time.Minute, isobar, append([]string{"client", "produce", topic, "-m", "secret", "-n", "3"}, tls(secureProxyPulsar[0])...)...); err != nil {
		e.diagnose()
		t.Fatalf("isobar client produce over us-east's proxy: %v\n%s", err, out)
	}
	if res := <-consumed; res.err != nil || strings.Count(res.out, "secret\n") != 3 {
		e.diagnose()
		t.Fatalf("isobar client consume over eu-west's proxy: %v, want three \"secret\" lines in\n%s", res.err, res.out)
	}

	// What is refused: no token, a token of another key, a broker's
	// plaintext port.
	forged := filepath.Join(t.TempDir(), "forged.token")
	tok, err := auth.Sign(auth.HS256, auth.NewSecretKey(), "admin", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(forged, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := e.tlsClient()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what, url, token string
		status           int
		body             string
	}{
		{"the proxy over TLS with the superuser's token", fmt.Sprintf("https://localhost:%d/admin/v2/tenants", secureProxyHTTP[0]), e.token, http.StatusOK, "geo"},
		{"the proxy over TLS without a token", fmt.Sprintf("https://localhost:%d/admin/v2/tenants", secureProxyHTTP[0]), "", http.StatusUnauthorized, ""},
		{"the proxy over TLS with a token of another key", fmt.Sprintf("https://localhost:%d/admin/v2/tenants", secureProxyHTTP[1]), forged, http.StatusUnauthorized, ""},
		{"the proxy's plaintext port without a token", fmt.Sprintf("http://127.0.0.1:%d/admin/v2/tenants", regions[0].proxyHTTP), "", http.StatusUnauthorized, ""},
		{"a broker's plaintext port", fmt.Sprintf("http://127.0.0.1:%d/admin/v2/tenants", regions[0].http[0]), e.token, http.StatusForbidden, "https://"},
		{"a broker's plaintext port: its health check", fmt.Sprintf("http://127.0.0.1:%d/readyz", regions[1].http[0]), "", http.StatusOK, ""},
	} {
		req, _ := http.NewRequest(http.MethodGet, c.url, nil)
		if c.token != "" {
			b, err := os.ReadFile(c.token)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s: GET %s: %v", c.what, c.url, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.body) {
			t.Errorf("%s: GET %s: %s %s, want %d with %q", c.what, c.url, resp.Status, body, c.status, c.body)
		}
	}

	// Prometheus still scrapes every process over the plaintext ports.
	e.checkPrometheus()
	e.noRestarts()
	t.Logf("wall time %v", time.Since(e.start).Round(time.Second))
}

// The proxies' TLS ports, published on 127.0.0.1 by
// docker-compose.secure.yml, per region of regions.
var (
	secureProxyPulsar = []int{6651, 6751}
	secureProxyHTTP   = []int{8443, 8543}
)
