package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProxyUsageErrors: `isobar proxy` refuses unknown keys and bad
// values, naming each, with exit status 2, before it starts anything.
func TestProxyUsageErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknown := write("unknown.yaml", "metastore:\n  endpoints: [http://127.0.0.1:1]\nproxy:\n  regionn: us-east\n")
	authz := write("authz.yaml", "metastore:\n  endpoints: [http://127.0.0.1:1]\nproxy:\n  region: us-east\n  auth:\n    authenticationEnabled: true\n    token: {secretKey: "+write("k", "0123456789abcdef0123456789abcdef")+"}\n    authorizationEnabled: true\n")
	bounds := write("bounds.yaml", "metastore:\n  endpoints: [http://127.0.0.1:1]\nproxy:\n  region: us-east\n  maxConnections: -1\n  keepAlive: 10ms\n  listenAddr: nowhere\n")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"proxy", "--config", unknown}, []string{"regionn"}},
		{[]string{"proxy", "--metastore", "http://127.0.0.1:1"}, []string{"proxy.region"}},
		{[]string{"proxy", "--config", authz}, []string{"authorizationEnabled", "brokers' settings", "proxy.brokerClient: with proxy.auth.authenticationEnabled"}},
		{[]string{"proxy", "--config", bounds}, []string{"proxy.maxConnections: -1", "proxy.keepAlive: 10ms", `proxy.listenAddr: "nowhere"`}},
		{[]string{"proxy", "--metastore", "http://127.0.0.1:1", "--region", "Bad_Region"}, []string{"proxy.region"}},
	} {
		_, err := run(context.Background(), c.args...)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("%v: err %v (exit %d), want a usage error", c.args, err, exitCode(err))
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v does not mention %q", c.args, err, w)
			}
		}
	}
}
