package broker_test

import (
	"testing"
	"time"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/wire/pb"
)

// proxyConnect is a CONNECT a proxy sends for a client: its own token,
// the client's role and, when given, the client's token.
func proxyConnect(proxyToken, original, originalToken string) *pb.BaseCommand {
	c := connectCmd("test", "token", []byte(proxyToken))
	if original != "" {
		c.Connect.OriginalPrincipal = &original
	}
	if originalToken != "" {
		m := auth.TokenMethod
		c.Connect.OriginalAuthMethod, c.Connect.OriginalAuthData = &m, &originalToken
	}
	return c
}

// TestProxyRoles: only a role of auth.proxyRoles may connect for a client
// (original_principal), and it must name one that is not a proxy; the
// client's role is then the one authorized, not the proxy's; a client
// token the proxy forwards must be valid and for that role.
func TestProxyRoles(t *testing.T) {
	a := startAuthEnv(t, func(c *auth.Config) {
		c.AuthorizationEnabled = true
		c.SuperUserRoles = []string{"root"}
		c.ProxyRoles = []string{"proxy", "proxy2"}
	})
	ctx := ctxT(t)
	if err := a.pol.CreateTenant(ctx, "acme", policy.TenantInfo{AllowedClusters: []string{"test"}}); err != nil {
		t.Fatal(err)
	}
	if err := a.pol.CreateNamespace(ctx, "acme/app", nil); err != nil {
		t.Fatal(err)
	}
	if err := a.pol.GrantNamespacePermission(ctx, "acme/app", "writer", []string{"produce"}); err != nil {
		t.Fatal(err)
	}
	valid := time.Now().Add(time.Hour)
	tok := func(role string) string { return a.token(t, role, valid) }

	for _, c := range []struct {
		name    string
		connect *pb.BaseCommand
		code    pb.ServerError
		says    string
	}{
		{"client claiming a principal", proxyConnect(tok("writer"), "root", ""), pb.ServerError_AuthorizationError, `role "writer" is not a proxy role`},
		{"superuser claiming a principal", proxyConnect(tok("root"), "writer", ""), pb.ServerError_AuthorizationError, `role "root" is not a proxy role`},
		{"proxy without a principal", proxyConnect(tok("proxy"), "", ""), pb.ServerError_AuthorizationError, "connects only on behalf of a client"},
		{"proxy for a proxy", proxyConnect(tok("proxy"), "proxy2", ""), pb.ServerError_AuthorizationError, "is a proxy role"},
		{"forwarded token of another role", proxyConnect(tok("proxy"), "root", tok("writer")), pb.ServerError_AuthenticationError, `for role "writer", not the original principal "root"`},
		{"forwarded token expired", proxyConnect(tok("proxy"), "writer", a.token(t, "writer", time.Now().Add(-time.Minute))), pb.ServerError_AuthenticationError, "token expired"},
		{"bad principal", proxyConnect(tok("proxy"), "a b", ""), pb.ServerError_AuthenticationError, "no spaces"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := dialRaw(t, a.url, false)
			r.send(c.connect)
			expectRefused(t, r, c.code, c.says)
		})
	}

	// The proxy acting for writer may produce to acme/app and nothing
	// else; acting for nobody it may not produce at all; the proxy's own
	// role has no grant and needs none.
	for _, c := range []struct {
		name, original, originalToken, topic string
		ok                                   bool
	}{
		{"for writer", "writer", "", "persistent://acme/app/t", true},
		{"for writer, its token forwarded", "writer", tok("writer"), "persistent://acme/app/t", true},
		{"for writer, elsewhere", "writer", "", "persistent://public/default/t", false},
		{"for nobody", "nobody", "", "persistent://acme/app/t", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := dialRaw(t, a.url, false)
			r.send(proxyConnect(tok("proxy"), c.original, c.originalToken))
			if cmd := r.recv().Cmd; cmd.GetType() != pb.BaseCommand_CONNECTED {
				t.Fatalf("CONNECT: %v", cmd)
			}
			s := &wireSession{r: r}
			got := s.producer(c.topic, "", "", 1)
			if got.ok != c.ok || !c.ok && got.code != pb.ServerError_AuthorizationError {
				t.Fatalf("producer on %s: %v, want ok=%v", c.topic, got, c.ok)
			}
		})
	}
}
