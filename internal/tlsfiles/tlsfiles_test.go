package tlsfiles

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/filewatch"
)

// pki is a CA and a server certificate on disk.
type pki struct {
	dir                       string
	ca, server                PEM
	caFile, certFile, keyFile string
	notBefore, notAfter       time.Time
}

func newPKI(t *testing.T, notBefore, notAfter time.Time) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	var err error
	if p.ca, err = NewCA("test CA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if p.server, err = Issue(p.ca, "broker", []string{"127.0.0.1", "localhost"}, false, notBefore, notAfter); err != nil {
		t.Fatal(err)
	}
	p.caFile, p.certFile, p.keyFile = filepath.Join(p.dir, "ca.pem"), filepath.Join(p.dir, "cert.pem"), filepath.Join(p.dir, "key.pem")
	p.write(t)
	return p
}

func (p *pki) write(t *testing.T) {
	t.Helper()
	for f, b := range map[string][]byte{p.caFile: p.ca.Cert, p.certFile: p.server.Cert, p.keyFile: p.server.Key} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func (p *pki) pool(t *testing.T) *x509.CertPool {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.ca.Cert) {
		t.Fatal("CA")
	}
	return pool
}

// echoServer serves TLS on loopback with cfg and echoes one line per
// connection; it keeps serving after failed handshakes.
func echoServer(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					io.WriteString(c, line)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip dials addr with cfg and echoes a line.
func roundTrip(addr string, cfg *tls.Config) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("bad echo")
	}
	return nil
}

func TestServeRefuseAndRotate(t *testing.T) {
	now := time.Now()
	p := newPKI(t, now.Add(-time.Hour), now.Add(time.Hour))
	cfg, err := Config{CertFile: p.certFile, KeyFile: p.keyFile}.Server()
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, cfg)
	if err := roundTrip(addr, &tls.Config{RootCAs: p.pool(t)}); err != nil {
		t.Fatal(err)
	}
	// An unknown CA fails the client's handshake, clearly.
	other := newPKI(t, now.Add(-time.Hour), now.Add(time.Hour))
	if err := roundTrip(addr, &tls.Config{RootCAs: other.pool(t)}); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("unknown CA: %v", err)
	}
	// TLS 1.1 is refused.
	if err := roundTrip(addr, &tls.Config{RootCAs: p.pool(t), MaxVersion: tls.VersionTLS11}); err == nil {
		t.Fatal("TLS 1.1 accepted")
	}
	// A plaintext client gets no echo and the server keeps serving.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "ping\n")
	if b, _ := io.ReadAll(c); strings.Contains(string(b), "ping") {
		t.Fatal("a plaintext client was answered in plaintext")
	}
	c.Close()
	if err := roundTrip(addr, &tls.Config{RootCAs: p.pool(t)}); err != nil {
		t.Fatalf("after the refusals: %v", err)
	}

	// Rotation: replace the files with another CA's certificate; new
	// connections get it without a restart. A half-written file first
	// leaves the old certificate in use.
	if err := os.WriteFile(p.certFile, []byte("-----BEGIN CERT"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Over two recheck periods (so the change is looked at), every
	// handshake still gets the old certificate.
	for start := time.Now(); time.Since(start) < 2*filewatch.Interval; {
		if err := roundTrip(addr, &tls.Config{RootCAs: p.pool(t)}); err != nil {
			t.Fatalf("a broken certificate file replaced the one in use: %v", err)
		}
	}
	other.certFile, other.keyFile, other.caFile = p.certFile, p.keyFile, filepath.Join(other.dir, "ca.pem")
	other.write(t)
	deadline := time.Now().Add(10 * time.Second)
	for roundTrip(addr, &tls.Config{RootCAs: other.pool(t)}) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the rotated certificate is not served")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := roundTrip(addr, &tls.Config{RootCAs: p.pool(t)}); err == nil {
		t.Fatal("the old certificate is still served")
	}
}

func TestMutualTLS(t *testing.T) {
	now := time.Now()
	p := newPKI(t, now.Add(-time.Hour), now.Add(time.Hour))
	cfg, err := Config{CertFile: p.certFile, KeyFile: p.keyFile, TrustCertsFile: p.caFile, RequireClientCert: true}.Server()
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, cfg)
	client, err := Issue(p.ca, "app", nil, true, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(client.Cert, client.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(addr, &tls.Config{RootCAs: p.pool(t), Certificates: []tls.Certificate{pair}}); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(addr, &tls.Config{RootCAs: p.pool(t)}); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	stranger := newPKI(t, now.Add(-time.Hour), now.Add(time.Hour))
	sc, _ := Issue(stranger.ca, "app", nil, true, now.Add(-time.Hour), now.Add(time.Hour))
	spair, _ := tls.X509KeyPair(sc.Cert, sc.Key)
	if err := roundTrip(addr, &tls.Config{RootCAs: p.pool(t), Certificates: []tls.Certificate{spair}}); err == nil {
		t.Fatal("a client certificate of an unknown CA was accepted")
	}
}

func TestValidate(t *testing.T) {
	now := time.Now()
	good := newPKI(t, now.Add(-time.Hour), now.Add(time.Hour))
	expired := newPKI(t, now.Add(-2*time.Hour), now.Add(-time.Hour))
	future := newPKI(t, now.Add(time.Hour), now.Add(2*time.Hour))
	other := newPKI(t, now.Add(-time.Hour), now.Add(time.Hour))
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	os.WriteFile(garbage, []byte("not pem"), 0o600)
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"expired":          {Config{CertFile: expired.certFile, KeyFile: expired.keyFile}, "expired at"},
		"not yet valid":    {Config{CertFile: future.certFile, KeyFile: future.keyFile}, "not valid before"},
		"key of another":   {Config{CertFile: good.certFile, KeyFile: other.keyFile}, "private key does not match"},
		"missing":          {Config{CertFile: "/nonexistent/cert.pem", KeyFile: good.keyFile}, "no such file"},
		"cert without key": {Config{CertFile: good.certFile}, "go together"},
		"trust not PEM":    {Config{CertFile: good.certFile, KeyFile: good.keyFile, TrustCertsFile: garbage}, "no PEM certificate"},
		"require w/o CA":   {Config{CertFile: good.certFile, KeyFile: good.keyFile, RequireClientCert: true}, "needs trustCertsFile"},
		"trust w/o cert":   {Config{TrustCertsFile: good.caFile}, "need certFile"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
		if _, err := c.cfg.Server(); err == nil {
			t.Errorf("%s: Server accepted it", name)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := Issue(PEM{Cert: good.server.Cert, Key: good.server.Key}, "x", nil, false, now, now.Add(time.Hour)); err == nil {
		t.Fatal("a non-CA certificate signed one")
	}
}

func TestValidatePeer(t *testing.T) {
	now := time.Now()
	p := newPKI(t, now.Add(-time.Hour), now.Add(time.Hour)) // a server-only certificate
	peer, err := Issue(p.ca, "peer", []string{"127.0.0.1"}, true, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	peerCert, peerKey := filepath.Join(p.dir, "peer.pem"), filepath.Join(p.dir, "peer-key.pem")
	os.WriteFile(peerCert, peer.Cert, 0o600)
	os.WriteFile(peerKey, peer.Key, 0o600)
	if err := (Config{CertFile: peerCert, KeyFile: peerKey, TrustCertsFile: p.caFile}).ValidatePeer(); err != nil {
		t.Fatalf("good peer configuration: %v", err)
	}
	if err := (Config{}).ValidatePeer(); err != nil {
		t.Fatalf("no TLS: %v", err)
	}
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"no trust":    {Config{CertFile: peerCert, KeyFile: peerKey}, "needs trustCertsFile"},
		"server only": {Config{CertFile: p.certFile, KeyFile: p.keyFile, TrustCertsFile: p.caFile}, "lacks extended key usage clientAuth"},
		"bad pair":    {Config{CertFile: p.certFile, KeyFile: peerKey, TrustCertsFile: p.caFile}, "private key does not match"},
	} {
		if err := c.cfg.ValidatePeer(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

// TestExpiredCertificates: an expired certificate fails the handshake
// with the reason on the other side, whichever side presents it, and the
// server keeps serving good clients.
func TestExpiredCertificates(t *testing.T) {
	now := time.Now()
	p := newPKI(t, now.Add(-time.Hour), now.Add(time.Hour))
	cfg, err := Config{CertFile: p.certFile, KeyFile: p.keyFile, TrustCertsFile: p.caFile, RequireClientCert: true}.Server()
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, cfg)
	clientWith := func(nb, na time.Time) *tls.Config {
		c, err := Issue(p.ca, "app", nil, true, nb, na)
		if err != nil {
			t.Fatal(err)
		}
		pair, _ := tls.X509KeyPair(c.Cert, c.Key)
		return &tls.Config{RootCAs: p.pool(t), GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }}
	}
	err = roundTrip(addr, clientWith(now.Add(-2*time.Hour), now.Add(-time.Hour)))
	if err == nil || !strings.Contains(err.Error(), "expired certificate") {
		t.Errorf("expired client certificate: %v, want the server's alert", err)
	}
	if err := roundTrip(addr, clientWith(now.Add(-time.Hour), now.Add(time.Hour))); err != nil {
		t.Fatalf("a good client after the refusal: %v", err)
	}

	// A server whose certificate expired (the files are checked at start
	// and on reload, but a certificate in use can run out).
	old, err := Issue(p.ca, "broker", []string{"127.0.0.1"}, false, now.Add(-2*time.Hour), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair, _ := tls.X509KeyPair(old.Cert, old.Key)
	stale := echoServer(t, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	err = roundTrip(stale, &tls.Config{RootCAs: p.pool(t)})
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("server with an expired certificate: %v, want x509's expiry", err)
	}
}
