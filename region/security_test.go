package region_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/isobar-mq/isobar/region"
)

// TestTokenAuthorizationEndToEnd runs a region with token authentication
// and authorization on, and checks what each kind of role may do with
// the unmodified pulsar-client-go and its pulsaradmin: a superuser
// manages tenants, a tenant's admin its namespaces and grants, a granted
// role produces or consumes as granted, and everyone else is refused
// (401 without a valid token, 403 without the permission; on the wire
// AuthenticationError and AuthorizationError), with nothing created.
func TestTokenAuthorizationEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := auth.NewSecretKey()
	keyFile := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(keyFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := region.Config{Name: "sec", DataDir: filepath.Join(dir, "data"), Bookies: 2}
	cfg.Broker.Auth = auth.Config{
		AuthenticationEnabled: true, AuthorizationEnabled: true,
		Token:          auth.TokenConfig{SecretKey: "file://" + keyFile},
		SuperUserRoles: []string{"root"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := region.Start(ctx, cfg, region.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	eps := r.Endpoints()

	token := func(role string) string {
		tok, err := auth.Sign(auth.HS256, secret, role, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	adminAs := func(tok string) pulsaradmin.Client {
		c, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: eps.WebServiceURL, Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	status := func(err error) int {
		var e rest.Error
		if errors.As(err, &e) {
			return e.Code
		}
		if err == nil {
			return 200
		}
		t.Fatalf("not an HTTP error: %v", err)
		return 0
	}

	// The superuser makes a tenant with an admin role; the tenant's admin
	// makes a namespace and grants produce and consume.
	root := adminAs(token("root"))
	if err := root.Tenants().Create(utils.TenantData{Name: "acme", AdminRoles: []string{"acme-admin"}, AllowedClusters: []string{"sec"}}); err != nil {
		t.Fatal(err)
	}
	acmeAdmin := adminAs(token("acme-admin"))
	if err := acmeAdmin.Namespaces().CreateNamespace("acme/app"); err != nil {
		t.Fatal(err)
	}
	ns, _ := utils.GetNamespaceName("acme/app")
	if err := acmeAdmin.Namespaces().GrantNamespacePermission(*ns, "writer", []utils.AuthAction{"produce"}); err != nil {
		t.Fatal(err)
	}
	if err := acmeAdmin.Namespaces().GrantNamespacePermission(*ns, "reader", []utils.AuthAction{"consume"}); err != nil {
		t.Fatal(err)
	}

	// Admin refusals: no token 401, a forged or expired one 401, a role
	// without the right 403; nothing is created.
	forged, _ := auth.Sign(auth.HS256, auth.NewSecretKey(), "root", time.Time{})
	expired, _ := auth.Sign(auth.HS256, secret, "root", time.Now().Add(-time.Minute))
	for _, c := range []struct {
		name, tok string
		want      int
	}{
		{"no token", "", 401}, {"forged", forged, 401}, {"expired", expired, 401}, {"malformed", "x.y.z", 401},
		{"tenant admin creating a tenant", token("acme-admin"), 403},
		{"granted role creating a tenant", token("writer"), 403},
	} {
		err := adminAs(c.tok).Tenants().Create(utils.TenantData{Name: "evil", AllowedClusters: []string{"sec"}})
		if got := status(err); got != c.want {
			t.Errorf("%s: create tenant: status %d (%v), want %d", c.name, got, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		tok  string
	}{{"other tenant's admin", token("other-admin")}, {"writer", token("writer")}, {"nobody", token("nobody")}} {
		if got := status(adminAs(c.tok).Namespaces().CreateNamespace("acme/evil")); got != 403 {
			t.Errorf("%s: create namespace: status %d, want 403", c.name, got)
		}
		if got := status(adminAs(c.tok).Namespaces().GrantNamespacePermission(*ns, "nobody", []utils.AuthAction{"produce"})); got != 403 {
			t.Errorf("%s: grant: status %d, want 403", c.name, got)
		}
	}
	if tenants, err := root.Tenants().List(); err != nil || strings.Contains(strings.Join(tenants, ","), "evil") {
		t.Fatalf("tenants %v, %v", tenants, err)
	}
	if nss, err := root.Namespaces().GetNamespaces("acme"); err != nil || len(nss) != 1 {
		t.Fatalf("namespaces of acme: %v, %v", nss, err)
	}
	if perms, err := root.Namespaces().GetNamespacePermissions(*ns); err != nil || len(perms) != 2 {
		t.Fatalf("permissions: %v, %v", perms, err)
	}
	// Health stays open.
	if err := probeStatus(eps.WebServiceURL+"/readyz", 200); err != nil {
		t.Error(err)
	}

	// The binary protocol: each role produces and consumes as granted.
	client := func(role string) pulsar.Client {
		opts := pulsar.ClientOptions{URL: eps.ServiceURL, OperationTimeout: 5 * time.Second, Logger: quietLogger()}
		if role != "" {
			opts.Authentication = pulsar.NewAuthenticationToken(token(role))
		}
		c, err := pulsar.NewClient(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	const tp = "persistent://acme/app/orders"
	canProduce := func(role string) error {
		p, err := client(role).CreateProducer(pulsar.ProducerOptions{Topic: tp})
		if err == nil {
			_, err = p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(role)})
			p.Close()
		}
		return err
	}
	canConsume := func(role string) error {
		c, err := client(role).Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "sub-" + role, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err == nil {
			c.Close()
		}
		return err
	}
	for _, c := range []struct {
		role             string
		produce, consume bool
	}{
		{"root", true, true}, {"acme-admin", true, true}, {"writer", true, false}, {"reader", false, true},
		{"other-admin", false, false}, {"nobody", false, false}, {"", false, false},
	} {
		if err := canProduce(c.role); (err == nil) != c.produce {
			t.Errorf("role %q produce: %v, want allowed=%v", c.role, err, c.produce)
		}
		if err := canConsume(c.role); (err == nil) != c.consume {
			t.Errorf("role %q consume: %v, want allowed=%v", c.role, err, c.consume)
		}
	}
	// The reader receives what the granted producers sent.
	cons, err := client("reader").Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "check", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for range 3 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got[string(m.Payload())] = true
	}
	if !got["root"] || !got["acme-admin"] || !got["writer"] {
		t.Fatalf("received from %v", got)
	}
	// A role whose grant is revoked (a deleted role) is refused from then
	// on, though its token is still valid.
	if err := acmeAdmin.Namespaces().RevokeNamespacePermission(*ns, "writer"); err != nil {
		t.Fatal(err)
	}
	if err := canProduce("writer"); err == nil {
		t.Error("a revoked role still produces")
	}
	// Refused roles created no subscription.
	subs, err := root.Subscriptions().List(*adminTopic(t, tp))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range subs {
		if s == "sub-writer" || s == "sub-nobody" || s == "sub-other-admin" || s == "sub-" {
			t.Errorf("refused role left subscription %s", s)
		}
	}
}

func adminTopic(t *testing.T, s string) *utils.TopicName {
	t.Helper()
	n, err := utils.GetTopicName(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// probeStatus GETs url without credentials and checks the status.
func probeStatus(url string, want int) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("GET %s: %d, want %d", url, resp.StatusCode, want)
	}
	return nil
}

// TestReplicationWithTokens: with authentication and authorization on in
// every region, the replicator workers authenticate with their role's
// token and geo-replication works; a client's token opens the topic in
// each region.
func TestReplicationWithTokens(t *testing.T) {
	dir := t.TempDir()
	secret := auth.NewSecretKey()
	keyFile := filepath.Join(dir, "secret.key")
	tokFile := filepath.Join(dir, "repl.token")
	replTok, _ := auth.Sign(auth.HS256, secret, "repl", time.Time{})
	rootTok, _ := auth.Sign(auth.HS256, secret, "root", time.Time{})
	if os.WriteFile(keyFile, secret, 0o600) != nil || os.WriteFile(tokFile, []byte(replTok+"\n"), 0o600) != nil {
		t.Fatal("write key files")
	}
	f := startFederation(t, 2, func(i int, c *region.Config) {
		c.Broker.Auth = auth.Config{
			AuthenticationEnabled: true, AuthorizationEnabled: true,
			Token:          auth.TokenConfig{SecretKey: keyFile},
			SuperUserRoles: []string{"root"}, ReplicatorRoles: []string{"repl"},
		}
		c.Replicator.TokenFile = tokFile
	})
	client := func(i int) pulsar.Client {
		c, err := pulsar.NewClient(pulsar.ClientOptions{URL: f.Regions[i].Endpoints().ServiceURL, OperationTimeout: 30 * time.Second,
			Logger: quietLogger(), Authentication: pulsar.NewAuthenticationToken(rootTok)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const tp = "persistent://acme/geo/secure"
	cons, err := client(1).Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	p, err := client(0).CreateProducer(pulsar.ProducerOptions{Topic: tp})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("message %d in r1: %v", i, err)
		}
		if string(m.Payload()) != fmt.Sprint(i) {
			t.Fatalf("message %d is %q", i, m.Payload())
		}
		cons.Ack(m)
	}
}

// TestTLSWithTokens: a broker serving TLS (pulsar+ssl:// and https://)
// with token authentication. pulsar-client-go produces and consumes over
// TLS with a token, pulsaradmin manages tenants over HTTPS with one; a
// plaintext client on the TLS port, a TLS client that does not trust the
// CA, and a TLS client on the plaintext port fail, and the broker keeps
// serving. Client certificates authenticate too (mutual TLS, the role
// from the common name), through pulsar-client-go's AuthenticationTLS
// and pulsaradmin's TLS key pair.
func TestTLSWithTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now()
	ca, err := tlsfiles.NewCA("isobar test CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := tlsfiles.Issue(ca, "broker", []string{"127.0.0.1", "localhost"}, false, now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	secret := auth.NewSecretKey()
	files := map[string][]byte{"ca.pem": ca.Cert, "cert.pem": srv.Cert, "key.pem": srv.Key, "secret.key": secret}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caFile := filepath.Join(dir, "ca.pem")
	cfg := region.Config{Name: "tls", DataDir: filepath.Join(dir, "data"), Bookies: 2}
	cfg.Broker.TLS = tlsfiles.Config{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), TrustCertsFile: filepath.Join(dir, "ca.pem")}
	cfg.Broker.TLSListenAddr, cfg.Broker.HTTPSListenAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Broker.Auth = auth.Config{AuthenticationEnabled: true, AuthorizationEnabled: true, TLSAuthentication: true,
		Token: auth.TokenConfig{SecretKey: filepath.Join(dir, "secret.key")}, SuperUserRoles: []string{"root", "cert-admin"}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := region.Start(ctx, cfg, region.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	be := r.Endpoints().Brokers[0]
	if !strings.HasPrefix(be.ServiceURLTLS, "pulsar+ssl://") || !strings.HasPrefix(be.WebServiceURLTLS, "https://") {
		t.Fatalf("endpoints %+v", be)
	}
	rootTok, _ := auth.Sign(auth.HS256, secret, "root", time.Time{})

	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: be.WebServiceURLTLS, TLSTrustCertsFilePath: caFile, Token: rootTok})
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Tenants().Create(utils.TenantData{Name: "sec", AllowedClusters: []string{"tls"}}); err != nil {
		t.Fatalf("create tenant over HTTPS: %v", err)
	}
	if err := adm.Namespaces().CreateNamespace("sec/ns"); err != nil {
		t.Fatal(err)
	}

	tlsClient := func(url, trust string, opTimeout time.Duration) pulsar.Client {
		c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, TLSTrustCertsFilePath: trust, OperationTimeout: opTimeout,
			ConnectionTimeout: 3 * time.Second, Logger: quietLogger(), Authentication: pulsar.NewAuthenticationToken(rootTok)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	const tp = "persistent://sec/ns/t"
	c := tlsClient(be.ServiceURLTLS, caFile, 30*time.Second)
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("over tls")}); err != nil {
		t.Fatal(err)
	}
	if m, err := cons.Receive(ctx); err != nil || string(m.Payload()) != "over tls" {
		t.Fatalf("receive: %v", err)
	}

	// Refusals: each client fails, the broker keeps serving.
	otherCA, _ := tlsfiles.NewCA("other CA", now.Add(-time.Hour), now.Add(time.Hour))
	otherFile := filepath.Join(dir, "other-ca.pem")
	os.WriteFile(otherFile, otherCA.Cert, 0o600)
	plainOnTLS := "pulsar://" + strings.TrimPrefix(be.ServiceURLTLS, "pulsar+ssl://")
	tlsOnPlain := "pulsar+ssl://" + strings.TrimPrefix(be.ServiceURL, "pulsar://")
	for name, cl := range map[string]pulsar.Client{
		"plaintext on the TLS port": tlsClient(plainOnTLS, "", 3*time.Second),
		"unknown CA":                tlsClient(be.ServiceURLTLS, otherFile, 3*time.Second),
		"TLS on the plaintext port": tlsClient(tlsOnPlain, caFile, 3*time.Second),
	} {
		if p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: tp}); err == nil {
			p.Close()
			t.Errorf("%s: a producer was created", name)
		}
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("still serving")}); err != nil {
		t.Fatalf("after the refusals: %v", err)
	}
	// HTTPS without the CA is refused by the client; plain HTTP to the
	// HTTPS port gets no answer.
	insecure, _ := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: be.WebServiceURLTLS, Token: rootTok})
	if _, err := insecure.Tenants().List(); err == nil {
		t.Error("HTTPS without trusting the CA succeeded")
	}
	if err := probeStatus("http://"+strings.TrimPrefix(be.WebServiceURLTLS, "https://")+"/readyz", 200); err == nil {
		t.Error("plain HTTP on the HTTPS port was served")
	}

	// Mutual TLS: a client certificate authenticates its common name.
	certClient := func(cn string) (certFile, keyFile string) {
		pair, err := tlsfiles.Issue(ca, cn, nil, true, now.Add(-time.Hour), now.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		certFile, keyFile = filepath.Join(dir, cn+".pem"), filepath.Join(dir, cn+"-key.pem")
		os.WriteFile(certFile, pair.Cert, 0o600)
		os.WriteFile(keyFile, pair.Key, 0o600)
		return certFile, keyFile
	}
	mtls := func(cn string) pulsar.Client {
		cf, kf := certClient(cn)
		c, err := pulsar.NewClient(pulsar.ClientOptions{URL: be.ServiceURLTLS, TLSTrustCertsFilePath: caFile, OperationTimeout: 5 * time.Second,
			Logger: quietLogger(), Authentication: pulsar.NewAuthenticationTLS(cf, kf)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	if p, err := mtls("cert-admin").CreateProducer(pulsar.ProducerOptions{Topic: tp}); err != nil {
		t.Fatalf("certificate of a superuser: %v", err)
	} else {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("by certificate")}); err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	if p, err := mtls("nobody").CreateProducer(pulsar.ProducerOptions{Topic: tp}); err == nil {
		p.Close()
		t.Error("a certificate of a role without permission produced")
	}
	cf, kf := certClient("cert-admin")
	certAdmin, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: be.WebServiceURLTLS, TLSTrustCertsFilePath: caFile, TLSCertFile: cf, TLSKeyFile: kf})
	if err != nil {
		t.Fatal(err)
	}
	if tenants, err := certAdmin.Tenants().List(); err != nil || !slices.Contains(tenants, "sec") {
		t.Errorf("tenants by certificate over HTTPS: %v, %v", tenants, err)
	}
}

// TestBasicAndAnonymousEndToEnd runs a region configured as
// pulsar-client-go's own test broker is: token and basic authentication,
// an anonymous role for clients without credentials, authorization on.
// The unmodified client authenticates with NewAuthenticationBasic (its
// suite's admin / 123456, a superuser), a client without credentials is
// the anonymous role and may do what that role was granted (and read a
// transaction's metadata, as in Pulsar), nothing more, and a wrong
// password is refused.
func TestBasicAndAnonymousEndToEnd(t *testing.T) {
	dir := t.TempDir()
	secret := auth.NewSecretKey()
	keyFile := filepath.Join(dir, "secret.key")
	users := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(keyFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	// `openssl passwd -apr1 -salt FG4AO6aX 123456`, the suite's file.
	if err := os.WriteFile(users, []byte("admin:$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := region.Config{Name: "sec", DataDir: filepath.Join(dir, "data"), Bookies: 2}
	cfg.Broker.Auth = auth.Config{
		AuthenticationEnabled: true, AuthorizationEnabled: true,
		Token:             auth.TokenConfig{SecretKey: "file://" + keyFile},
		BasicAuthFile:     users,
		AnonymousUserRole: "anonymous",
		SuperUserRoles:    []string{"admin"},
	}
	cfg.Broker.Transactions.Enabled = true
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := region.Start(ctx, cfg, region.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	eps := r.Endpoints()

	// The admin API with HTTP Basic: the superuser makes two namespaces
	// and grants the anonymous role produce and consume on one.
	rest := func(method, path, body, user, password string) int {
		req, err := http.NewRequestWithContext(ctx, method, eps.WebServiceURL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/admin/v2/tenants/acme", `{"allowedClusters":["sec"]}`},
		{"PUT", "/admin/v2/namespaces/acme/open", ""},
		{"PUT", "/admin/v2/namespaces/acme/closed", ""},
		{"POST", "/admin/v2/namespaces/acme/open/permissions/anonymous", `["produce","consume"]`},
	} {
		if st := rest(c.method, c.path, c.body, "admin", "123456"); st/100 != 2 {
			t.Fatalf("%s %s as admin: %d", c.method, c.path, st)
		}
	}
	if st := rest("PUT", "/admin/v2/namespaces/acme/other", "", "admin", "wrong"); st != http.StatusUnauthorized {
		t.Fatalf("a wrong password: %d, want 401", st)
	}
	if st := rest("PUT", "/admin/v2/namespaces/acme/other", "", "", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous making a namespace: %d, want 403", st)
	}
	// A transaction's metadata is any role's to read, as in Pulsar
	// (pulsar-client-go's transaction tests read it without credentials):
	// an unknown one is 404, not 403.
	if st := rest("GET", "/admin/v3/transactions/transactionMetadata/0/12345", "", "", ""); st != http.StatusNotFound {
		t.Fatalf("anonymous reading an unknown transaction: %d, want 404", st)
	}

	client := func(a pulsar.Authentication) pulsar.Client {
		c, err := pulsar.NewClient(pulsar.ClientOptions{URL: eps.ServiceURL, OperationTimeout: 5 * time.Second, Logger: quietLogger(), Authentication: a})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	roundTrip := func(c pulsar.Client, tp string) error {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			return err
		}
		defer cons.Close()
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp})
		if err != nil {
			return err
		}
		defer p.Close()
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("hello")}); err != nil {
			return err
		}
		m, err := cons.Receive(ctx)
		if err != nil {
			return err
		}
		if string(m.Payload()) != "hello" {
			return fmt.Errorf("received %q", m.Payload())
		}
		return nil
	}
	basic, err := pulsar.NewAuthenticationBasic("admin", "123456")
	if err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(client(basic), "persistent://acme/closed/t"); err != nil {
		t.Errorf("the superuser by basic authentication: %v", err)
	}
	anonymous := client(nil)
	if err := roundTrip(anonymous, "persistent://acme/open/t"); err != nil {
		t.Errorf("anonymous where it is granted: %v", err)
	}
	if err := roundTrip(anonymous, "persistent://acme/closed/t2"); err == nil || !strings.Contains(err.Error(), "AuthorizationError") {
		t.Errorf("anonymous where it is not granted: %v, want an authorization error", err)
	}
	wrong, err := pulsar.NewAuthenticationBasic("admin", "12345")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client(wrong).CreateProducer(pulsar.ProducerOptions{Topic: "persistent://acme/open/t"}); err == nil {
		t.Error("a wrong password was let in")
	}
}
