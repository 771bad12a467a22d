package proxy_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/isobar-mq/isobar/internal/tlsfiles/tlstest"
	"github.com/isobar-mq/isobar/wire/pb"
)

// TestProxyAuthAndTLS: brokers that serve TLS only to certified peers and
// require tokens with authorization, behind a proxy that terminates TLS
// for clients, checks their tokens itself and reaches the brokers over
// TLS as its own role (one of their auth.proxyRoles), naming each
// client's role. What a client may do through the proxy is exactly what
// its own role may: a granted role produces, a role without the grant is
// refused (AuthorizationError, 403), a client without a token is refused
// at the proxy (AuthenticationError, 401), and a client cannot claim
// another role by sending an original principal itself.
func TestProxyAuthAndTLS(t *testing.T) {
	dir := t.TempDir()
	secret := auth.NewSecretKey()
	keyFile := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(keyFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	token := func(role string) string {
		tok, err := auth.Sign(auth.HS256, secret, role, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	proxyToken := filepath.Join(dir, "proxy.token")
	if err := os.WriteFile(proxyToken, []byte(token("the-proxy")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := tlstest.NewCA(t, "test-ca")
	proxyCert, proxyKey := ca.Issue("proxy-server")
	e := startEnv(t, func(s *setup) {
		s.brokers = 2
		s.broker.Auth = auth.Config{
			AuthenticationEnabled: true, AuthorizationEnabled: true,
			Token:          auth.TokenConfig{SecretKey: keyFile},
			SuperUserRoles: []string{"admin"},
			ProxyRoles:     []string{"the-proxy"},
		}
		s.broker.TLS = ca.Server("broker") // mutual TLS: only certified peers
		s.proxy.Auth = auth.Config{AuthenticationEnabled: true, Token: auth.TokenConfig{SecretKey: keyFile}}
		s.proxy.BrokerClient.TokenFile = proxyToken
		s.proxy.BrokerClient.TLS = ca.Client("proxy-client", ca)
		s.proxy.TLS = tlsfiles.Config{CertFile: proxyCert, KeyFile: proxyKey}
	})
	eps := e.proxies[0].Endpoints()
	if eps.ServiceURLTLS == "" || eps.WebServiceURLTLS == "" {
		t.Fatalf("proxy endpoints %+v: no TLS", eps)
	}
	adminAs := func(tok string) pulsaradmin.Client {
		c, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: eps.WebServiceURLTLS, Token: tok, TLSTrustCertsFilePath: ca.File})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	status := func(err error) int {
		var re rest.Error
		if errors.As(err, &re) {
			return re.Code
		}
		if err == nil {
			return 200
		}
		t.Fatalf("not an HTTP error: %v", err)
		return 0
	}
	// The superuser, through the proxy, makes a tenant, a namespace and a
	// grant.
	root := adminAs(token("admin"))
	if err := root.Tenants().Create(utils.TenantData{Name: "acme", AllowedClusters: []string{regionName}}); err != nil {
		t.Fatal(err)
	}
	if err := root.Namespaces().CreateNamespace("acme/app"); err != nil {
		t.Fatal(err)
	}
	ns, _ := utils.GetNamespaceName("acme/app")
	if err := root.Namespaces().GrantNamespacePermission(*ns, "writer", []utils.AuthAction{"produce"}); err != nil {
		t.Fatal(err)
	}
	// Refusals over HTTP: no token at the proxy, a role without the right
	// at the broker; the proxy's own role is no key to anything.
	for _, c := range []struct {
		name, tok string
		want      int
	}{{"no token", "", 401}, {"nobody", token("nobody"), 403}, {"writer", token("writer"), 403}, {"the proxy's role", token("the-proxy"), 403}} {
		err := adminAs(c.tok).Namespaces().CreateNamespace("acme/evil")
		if got := status(err); got != c.want {
			t.Errorf("%s: create namespace: %d (%v), want %d", c.name, got, err, c.want)
		}
	}
	if nss, err := root.Namespaces().GetNamespaces("acme"); err != nil || len(nss) != 1 {
		t.Fatalf("namespaces of acme: %v, %v", nss, err)
	}

	// The binary protocol over TLS to the proxy.
	clientAs := func(tok string) pulsar.Client {
		opts := pulsar.ClientOptions{URL: eps.ServiceURLTLS, TLSTrustCertsFilePath: ca.File, OperationTimeout: 10 * time.Second}
		if tok != "" {
			opts.Authentication = pulsar.NewAuthenticationToken(tok)
		}
		return e.client(opts)
	}
	const topic = "persistent://acme/app/orders"
	w := clientAs(token("writer"))
	p, err := w.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatalf("writer's producer: %v", err)
	}
	if _, err := p.Send(e.ctx, &pulsar.ProducerMessage{Payload: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := w.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"}); err == nil || !strings.Contains(err.Error(), "AuthorizationError") {
		t.Errorf("writer subscribing (no consume grant): %v, want AuthorizationError", err)
	}
	if _, err := clientAs(token("nobody")).CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil || !strings.Contains(err.Error(), "AuthorizationError") {
		t.Errorf("nobody's producer: %v, want AuthorizationError", err)
	}
	if _, err := clientAs("").CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil {
		t.Error("a client without a token made a producer")
	}
	// The superuser reads what writer wrote, through the proxy.
	rd, err := clientAs(token("admin")).CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := rd.Next(e.ctx); err != nil || string(m.Payload()) != "hello" {
		t.Fatalf("admin reading: %v, %v", m, err)
	}
	rd.Close()

	// A client that sends an original principal itself is still itself:
	// the proxy builds the broker's CONNECT from what it authenticated.
	owner := e.owner(topic)
	if owner < 0 {
		t.Fatal("no broker has the topic loaded")
	}
	r := dialRaw(t, eps.ServiceURL)
	c := connectCmd(strings.TrimPrefix(e.brokers[owner].Endpoints().ServiceURL, "pulsar://"), auth.TokenMethod, []byte(token("writer")))
	admin := "admin"
	c.Connect.OriginalPrincipal = &admin
	r.send(c)
	if cmd := r.recv(); cmd.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("CONNECT: %v", cmd)
	}
	id, pid, other := uint64(1), uint64(1), "persistent://public/default/not-granted"
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{RequestId: &id, ProducerId: &pid, Topic: &other}})
	for {
		cmd := r.recv()
		if cmd.GetType() == pb.BaseCommand_ERROR && cmd.Error.GetRequestId() == id {
			if cmd.Error.GetError() != pb.ServerError_AuthorizationError {
				t.Fatalf("PRODUCER claiming admin: %v, want AuthorizationError", cmd)
			}
			break
		}
		if cmd.GetType() == pb.BaseCommand_PRODUCER_SUCCESS {
			t.Fatal("a client claiming an original principal got admin's rights through the proxy")
		}
	}
	// A lookup connection without a token is refused at the proxy.
	r = dialRaw(t, eps.ServiceURL)
	r.send(connectCmd("", "", nil))
	if last := r.expectClosed(); last.GetError().GetError() != pb.ServerError_AuthenticationError {
		t.Fatalf("CONNECT without a token: %v", last)
	}
}
