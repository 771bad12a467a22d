package natsembed

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/isobar-mq/isobar/internal/tlsfiles/tlstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// peerTLS is a gateway (or route) configuration with a certificate from c
// for name, trusting trust.
func peerTLS(c *tlstest.CA, name string, trust *tlstest.CA) tlsfiles.Config {
	cert, key := c.Issue(name)
	return tlsfiles.Config{CertFile: cert, KeyFile: key, TrustCertsFile: trust.File}
}

func connectTLS(s *Server, c tlsfiles.ClientConfig) (*nats.Conn, error) {
	opts, err := ClientOptions(c)
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.Name("test-"+s.Region()), nats.Timeout(5*time.Second))
	return nats.Connect(s.ClientURL(), opts...)
}

func mustConnectTLS(t *testing.T, s *Server, c tlsfiles.ClientConfig) *nats.Conn {
	t.Helper()
	nc, err := connectTLS(s, c)
	if err != nil {
		t.Fatalf("connect to %s: %v", s.Region(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// peerCert is the server certificate nc's connection saw.
func peerCert(t *testing.T, nc *nats.Conn) *x509.Certificate {
	t.Helper()
	cs, err := nc.TLSConnectionState()
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.PeerCertificates) == 0 {
		t.Fatal("no server certificate")
	}
	return cs.PeerCertificates[0]
}

// pubSub publishes on subject from pub until sub's subscription has it.
func pubSub(t *testing.T, pub, sub *nats.Conn, subject string) {
	t.Helper()
	s, err := sub.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unsubscribe()
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	// Interest reaches the other server asynchronously.
	waitFor(t, 10*time.Second, func() error {
		if err := pub.Publish(subject, []byte("hello")); err != nil {
			return err
		}
		if err := pub.Flush(); err != nil {
			return err
		}
		m, err := s.NextMsg(200 * time.Millisecond)
		if err != nil {
			return fmt.Errorf("%s: %w", subject, err)
		}
		if string(m.Data) != "hello" {
			return fmt.Errorf("%s: got %q", subject, m.Data)
		}
		return nil
	})
}

// federation is two regions, a and b, with TLS gateways from the
// federation's CA and TLS client ports requiring certificates from the
// region's own CA.
type federation struct {
	fedCA, caA, caB *tlstest.CA
	a, b            *Server
}

func startTLSFederation(t *testing.T) *federation {
	t.Helper()
	f := &federation{fedCA: tlstest.NewCA(t, "federation"), caA: tlstest.NewCA(t, "region-a"), caB: tlstest.NewCA(t, "region-b")}
	f.a = start(t, Config{Region: "a", TLS: f.caA.Server("nats-a"), GatewayTLS: peerTLS(f.fedCA, "gateway-a", f.fedCA)})
	f.b = start(t, Config{
		Region: "b", TLS: f.caB.Server("nats-b"), GatewayTLS: peerTLS(f.fedCA, "gateway-b", f.fedCA),
		Gateways: map[string]string{"a": f.a.GatewayURL()},
	})
	waitMesh(t, f.a, f.b)
	return f
}

func TestTLSGatewaysAndClientCertificates(t *testing.T) {
	f := startTLSFederation(t)
	if !strings.HasPrefix(f.a.ClientURL(), "nats://") {
		t.Errorf("ClientURL %q, want nats://", f.a.ClientURL())
	}
	ncA := mustConnectTLS(t, f.a, f.caA.Client("replicator-a", f.caA))
	ncB := mustConnectTLS(t, f.b, f.caB.Client("replicator-b", f.caB))
	if cn := peerCert(t, ncA).Subject.CommonName; cn != "nats-a" {
		t.Errorf("a's client port presented %q", cn)
	}
	pubSub(t, ncA, ncB, "replicate.a-to-b")
	pubSub(t, ncB, ncA, "replicate.b-to-a")

	// The gateways themselves are TLS, both ways.
	for _, s := range []*Server{f.a, f.b} {
		gz, err := s.ns.Gatewayz(&server.GatewayzOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for name, r := range gz.OutboundGateways {
			if r.Connection == nil || r.Connection.TLSVersion == "" {
				t.Errorf("%s: outbound gateway to %s is not TLS: %+v", s.Region(), name, r.Connection)
			}
		}
		for name, rs := range gz.InboundGateways {
			for _, r := range rs {
				if r.Connection == nil || r.Connection.TLSVersion == "" {
					t.Errorf("%s: inbound gateway from %s is not TLS: %+v", s.Region(), name, r.Connection)
				}
			}
		}
	}
}

func TestTLSClientPortRefusesOthers(t *testing.T) {
	caA, caB := tlstest.NewCA(t, "region-a"), tlstest.NewCA(t, "region-b")
	a := start(t, Config{Region: "a", TLS: caA.Server("nats-a")})
	good := mustConnectTLS(t, a, caA.Client("replicator-a", caA))
	serve(t, good, "sink.a", "a")

	for name, c := range map[string]struct {
		cfg   tlsfiles.ClientConfig
		want  string
		after bool // refused after the client's handshake
	}{
		// Trusts a's server certificate, presents one from b's CA.
		"other region's certificate": {caB.Client("replicator-b", caA), "tls: unknown certificate authority", true},
		"no certificate":             {tlsfiles.ClientConfig{TrustCertsFile: caA.File}, "tls: certificate required", true},
		// nats.go switches to TLS as the server asks, and does not
		// trust a's CA.
		"no TLS configured": {tlsfiles.ClientConfig{}, "x509: certificate signed by unknown authority", false},
	} {
		nc, err := connectTLS(a, c.cfg)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
			continue
		}
		t.Logf("%s: %v", name, err)
		// With TLS 1.3 the server checks the client's certificate after
		// the client's handshake is done: the client reads the server's
		// alert or, when it writes first, finds the connection closed.
		closed := errors.Is(err, nats.ErrTLS) && strings.Contains(err.Error(), "connection closed by remote after TLS handshake")
		if !strings.Contains(err.Error(), c.want) && !(closed && c.after) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}

	// A client speaking plain NATS is told TLS is required and gets no
	// PONG.
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(a.ClientURL(), "nats://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	info, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, `"tls_required":true`) || !strings.Contains(info, `"tls_verify":true`) {
		t.Errorf("INFO %q does not require TLS with client certificates", info)
	}
	fmt.Fprint(conn, "CONNECT {\"verbose\":false}\r\nPING\r\n")
	if line, err := r.ReadString('\n'); err == nil && strings.HasPrefix(line, "PONG") {
		t.Errorf("plain client got %q", line)
	} else {
		t.Logf("plain client: %q, %v", line, err)
	}

	// The good client is still served, and new good clients are too.
	if err := request(good, "sink.a", "still", "a"); err != nil {
		t.Fatal(err)
	}
	if err := request(mustConnectTLS(t, a, caA.Client("replicator-a2", caA)), "sink.a", "new", "a"); err != nil {
		t.Fatal(err)
	}

	// A client with TLS refuses a server without.
	plain := start(t, Config{Region: "plain"})
	if nc, err := connectTLS(plain, caA.Client("replicator-p", caA)); !errors.Is(err, nats.ErrSecureConnWanted) {
		if err == nil {
			nc.Close()
		}
		t.Errorf("TLS client to a plain server: %v, want %v", err, nats.ErrSecureConnWanted)
	}
}

// logRecorder keeps the NATS server's log lines.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, rec.Message)
	return nil
}

func (r *logRecorder) find(substr string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if strings.Contains(l, substr) {
			return l
		}
	}
	return ""
}

func TestTLSGatewayFromUnknownCADoesNotJoin(t *testing.T) {
	fedCA, rogueCA := tlstest.NewCA(t, "federation"), tlstest.NewCA(t, "rogue")
	logs := &logRecorder{}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	a, err := Start(ctx, Config{Region: "a", GatewayTLS: peerTLS(fedCA, "gateway-a", fedCA)}, slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Shutdown)
	b := start(t, Config{Region: "b", GatewayTLS: peerTLS(fedCA, "gateway-b", fedCA), Gateways: map[string]string{"a": a.GatewayURL()}})
	waitMesh(t, a, b)

	// c trusts the federation's CA, but its certificate is the rogue's.
	c := start(t, Config{Region: "c", GatewayTLS: peerTLS(rogueCA, "gateway-c", fedCA), Gateways: map[string]string{"a": a.GatewayURL()}})
	waitFor(t, 10*time.Second, func() error {
		if l := logs.find("TLS gateway handshake error"); l != "" {
			t.Logf("a: %s", l)
			return nil
		}
		return errors.New("a has not refused c's gateway")
	})
	if l := logs.find("TLS gateway handshake error"); !strings.Contains(l, "unknown authority") {
		t.Errorf("a's handshake error %q does not say the CA is unknown", l)
	}
	if n := c.NumGateways(); n != 0 {
		t.Errorf("c: NumGateways = %d, want 0", n)
	}
	for _, s := range []*Server{a, b} {
		if n := s.NumGateways(); n != 2 {
			t.Errorf("%s: NumGateways = %d, want 2 (a and b only)", s.Region(), n)
		}
	}
	short, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if err := WaitGateways(short, a, b, c); err == nil {
		t.Error("c joined the mesh")
	}
	waitMesh(t, a, b)
}

func TestTLSClientCertificateRotation(t *testing.T) {
	caA := tlstest.NewCA(t, "region-a")
	cfg := caA.Server("nats-a")
	a := start(t, Config{Region: "a", TLS: cfg})
	client := caA.Client("replicator-a", caA)
	old := mustConnectTLS(t, a, client)
	before := peerCert(t, old)

	rotated := caA.Reissue("nats-a-rotated", cfg.CertFile, cfg.KeyFile)
	waitFor(t, 10*time.Second, func() error {
		nc, err := connectTLS(a, client)
		if err != nil {
			return err
		}
		defer nc.Close()
		if got := peerCert(t, nc); got.SerialNumber.Cmp(rotated.SerialNumber) != 0 {
			return fmt.Errorf("new connection sees %q serial %v, want %q serial %v", got.Subject.CommonName, got.SerialNumber, rotated.Subject.CommonName, rotated.SerialNumber)
		}
		return nil
	})
	// The connection made before keeps its session.
	if !old.IsConnected() || peerCert(t, old).SerialNumber.Cmp(before.SerialNumber) != 0 {
		t.Error("the connection made before the rotation was disturbed")
	}
}

func TestTLSRoutes(t *testing.T) {
	caR := tlstest.NewCA(t, "region-r")
	p1, p2 := freePort(t), freePort(t)
	cfg := func(name string, routeTo int) Config {
		c := caR.Server(name)
		return Config{Region: "r", Name: name, TLS: c, ClusterPort: map[string]int{"r1": p1, "r2": p2}[name],
			Routes: []string{fmt.Sprintf("nats://127.0.0.1:%d", routeTo)}}
	}
	r1 := start(t, cfg("r1", p2))
	r2 := start(t, cfg("r2", p1))
	nc1 := mustConnectTLS(t, r1, caR.Client("c1", caR))
	nc2 := mustConnectTLS(t, r2, caR.Client("c2", caR))
	pubSub(t, nc1, nc2, "route.r1-to-r2")
}

func TestTLSValidate(t *testing.T) {
	rca := tlstest.NewCA(t, "region-a")
	cert, key := rca.Issue("nats-a")
	serverOnly, err := tlsfiles.Issue(rca.PEM, "server-only", []string{"127.0.0.1"}, false, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	soCert, soKey := filepath.Join(rca.Dir, "so.pem"), filepath.Join(rca.Dir, "so-key.pem")
	os.WriteFile(soCert, serverOnly.Cert, 0o600)
	os.WriteFile(soKey, serverOnly.Key, 0o600)

	for name, c := range map[string]struct {
		cfg  Config
		want []string
	}{
		"cert without key":      {Config{Region: "a", TLS: tlsfiles.Config{CertFile: cert}}, []string{"nats.tls: certFile and keyFile go together"}},
		"require without trust": {Config{Region: "a", TLS: tlsfiles.Config{CertFile: cert, KeyFile: key, RequireClientCert: true}}, []string{"nats.tls: requireClientCert needs trustCertsFile"}},
		"routes without trust": {Config{Region: "a", ClusterPort: 4248, TLS: tlsfiles.Config{CertFile: cert, KeyFile: key}},
			[]string{"nats.tls: a link between peers needs trustCertsFile"}},
		"gateway without trust": {Config{Region: "a", GatewayTLS: tlsfiles.Config{CertFile: cert, KeyFile: key}}, []string{"nats.gatewayTls: a link between peers needs trustCertsFile"}},
		"gateway server-only certificate": {Config{Region: "a", GatewayTLS: tlsfiles.Config{CertFile: soCert, KeyFile: soKey, TrustCertsFile: rca.File}},
			[]string{"nats.gatewayTls: certificate " + soCert + " lacks extended key usage clientAuth"}},
		"missing files": {Config{Region: "a",
			TLS:        tlsfiles.Config{CertFile: "/nonexistent/c.pem", KeyFile: key},
			GatewayTLS: tlsfiles.Config{CertFile: cert, KeyFile: key, TrustCertsFile: "/nonexistent/rca.pem"}},
			[]string{"nats.tls: certificate /nonexistent/c.pem", "nats.gatewayTls: trust certificates: open /nonexistent/rca.pem"}},
		"gateway trust without cert": {Config{Region: "a", GatewayTLS: tlsfiles.Config{TrustCertsFile: rca.File}}, []string{"nats.gatewayTls: trustCertsFile and requireClientCert need certFile and keyFile"}},
	} {
		err := c.cfg.Validate()
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want an error saying %q", name, err, w)
			}
		}
		if _, err := Start(t.Context(), c.cfg, nil); err == nil {
			t.Errorf("%s: Start accepted it", name)
		}
	}
	err = Config{Region: "a", TLS: tlsfiles.Config{CertFile: "/nonexistent/c.pem", KeyFile: key}}.Validate()
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v is not fs.ErrNotExist", err)
	}

	if opts, err := ClientOptions(tlsfiles.ClientConfig{}); err != nil || opts != nil {
		t.Errorf("ClientOptions without TLS = %v, %v", opts, err)
	}
	if _, err := ClientOptions(tlsfiles.ClientConfig{CertFile: cert}); err == nil || !strings.Contains(err.Error(), "certFile and keyFile go together") {
		t.Errorf("ClientOptions with a certificate and no key: %v", err)
	}
}
