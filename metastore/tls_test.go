package metastore

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/tlsfiles"
)

// testCA is a CA with certificates issued to files in dir.
type testCA struct {
	t    *testing.T
	dir  string
	ca   tlsfiles.PEM
	file string // the CA certificate
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	now := time.Now()
	ca, err := tlsfiles.NewCA(name, now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(file, ca.Cert, 0o600); err != nil {
		t.Fatal(err)
	}
	return &testCA{t: t, dir: dir, ca: ca, file: file}
}

// issue writes a certificate for name (server and client use) and
// returns its files.
func (c *testCA) issue(name string) (cert, key string) {
	c.t.Helper()
	now := time.Now()
	p, err := tlsfiles.Issue(c.ca, name, []string{"127.0.0.1", "localhost"}, true, now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		c.t.Fatal(err)
	}
	cert, key = filepath.Join(c.dir, name+".pem"), filepath.Join(c.dir, name+"-key.pem")
	if err := os.WriteFile(cert, p.Cert, 0o600); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(key, p.Key, 0o600); err != nil {
		c.t.Fatal(err)
	}
	return cert, key
}

// TestClientTLS: a member serving clients over mutual TLS serves a client
// with a certificate of its CA and refuses, with a clear error, one of
// another CA (another region's), one without a certificate and a
// plaintext one, and keeps serving.
func TestClientTLS(t *testing.T) {
	region, other := newTestCA(t, "region-a"), newTestCA(t, "region-b")
	srvCert, srvKey := region.issue("etcd")
	e, err := StartEmbedded(context.Background(), EmbedConfig{
		Dir:       t.TempDir(),
		ClientTLS: tlsfiles.Config{CertFile: srvCert, KeyFile: srvKey, TrustCertsFile: region.file, RequireClientCert: true},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if ep := e.Endpoints()[0]; !strings.HasPrefix(ep, "https://") {
		t.Fatalf("endpoint %s, want https://", ep)
	}
	connect := func(tc tlsfiles.ClientConfig, endpoint string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := Connect(ctx, Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, TLS: tc})
		if err != nil {
			return err
		}
		defer s.Close()
		_, err = s.Put(ctx, "/tls-test", []byte("x"))
		return err
	}
	goodCert, goodKey := region.issue("broker-1")
	good := tlsfiles.ClientConfig{TrustCertsFile: region.file, CertFile: goodCert, KeyFile: goodKey}
	if err := connect(good, e.Endpoints()[0]); err != nil {
		t.Fatalf("client with the region's certificate: %v", err)
	}
	strangerCert, strangerKey := other.issue("broker-1")
	plain := "http://" + e.ClientAddr()
	for name, tc := range map[string]struct {
		cfg      tlsfiles.ClientConfig
		endpoint string
		says     string
	}{
		"another region's certificate": {tlsfiles.ClientConfig{TrustCertsFile: region.file, CertFile: strangerCert, KeyFile: strangerKey}, e.Endpoints()[0], "unknown certificate authority"},
		"no certificate":               {tlsfiles.ClientConfig{TrustCertsFile: region.file}, e.Endpoints()[0], "certificate required"},
		"not trusting the server":      {tlsfiles.ClientConfig{TrustCertsFile: other.file, CertFile: goodCert, KeyFile: goodKey}, e.Endpoints()[0], "certificate signed by unknown authority"},
		"plaintext":                    {tlsfiles.ClientConfig{}, plain, "speaks TLS: set metastore.tls"},
	} {
		err := connect(tc.cfg, tc.endpoint)
		if err == nil {
			t.Errorf("%s: served", name)
			continue
		}
		if !strings.Contains(err.Error(), "does not answer") || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want a refusal saying %q", name, err, tc.says)
		}
		t.Logf("%s: %v", name, err)
	}
	if err := connect(good, e.Endpoints()[0]); err != nil {
		t.Fatalf("after the refusals: %v", err)
	}
}

// TestPeerTLS: a three-member cluster whose members verify each other's
// certificates forms a quorum and replicates.
func TestPeerTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("three etcd members: -short")
	}
	ca := newTestCA(t, "region-a")
	var peers, clients []string
	for range 3 {
		peers, clients = append(peers, freeAddr(t)), append(clients, freeAddr(t))
	}
	var initial []string
	for i, p := range peers {
		initial = append(initial, fmt.Sprintf("m%d=https://%s", i, p))
	}
	cfgs := make([]EmbedConfig, 3)
	for i := range cfgs {
		cert, key := ca.issue(fmt.Sprintf("m%d", i))
		tc := tlsfiles.Config{CertFile: cert, KeyFile: key, TrustCertsFile: ca.file, RequireClientCert: true}
		cfgs[i] = EmbedConfig{Name: fmt.Sprintf("m%d", i), Dir: t.TempDir(), ClientAddr: clients[i], PeerAddr: peers[i],
			InitialCluster: strings.Join(initial, ","), ClientTLS: tc, PeerTLS: tc}
	}
	// The members wait for each other: start them together.
	errs := make(chan error, 3)
	members := make(chan *Embedded, 3)
	for _, c := range cfgs {
		go func() {
			e, err := StartEmbedded(context.Background(), c, nil)
			if err == nil {
				members <- e
			}
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(members)
	for e := range members {
		defer e.Close()
	}
	cert, key := ca.issue("client")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tc := tlsfiles.ClientConfig{TrustCertsFile: ca.file, CertFile: cert, KeyFile: key}
	w, err := Connect(ctx, Config{Endpoints: []string{"https://" + clients[0]}, TLS: tc})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Put(ctx, "/peer-tls", []byte("v")); err != nil {
		t.Fatal(err)
	}
	r, err := Connect(ctx, Config{Endpoints: []string{"https://" + clients[2]}, TLS: tc})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	kv, err := r.Get(ctx, "/peer-tls")
	if err != nil || string(kv.Value) != "v" {
		t.Fatalf("read on another member: %v %v", kv, err)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	ca := newTestCA(t, "x")
	cert, key := ca.issue("m")
	for name, c := range map[string]EmbedConfig{
		"cert without key":       {Dir: "d", ClientTLS: tlsfiles.Config{CertFile: cert}},
		"missing file":           {Dir: "d", ClientTLS: tlsfiles.Config{CertFile: cert + ".gone", KeyFile: key}},
		"peer without trust":     {Dir: "d", PeerTLS: tlsfiles.Config{CertFile: cert, KeyFile: key}},
		"http peer URL with TLS": {Dir: "d", InitialCluster: "isobar=http://127.0.0.1:1", PeerTLS: tlsfiles.Config{CertFile: cert, KeyFile: key, TrustCertsFile: ca.file}},
		"https peer URL no TLS":  {Dir: "d", InitialCluster: "isobar=https://127.0.0.1:1"},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	if err := (Config{Endpoints: []string{"https://h:1"}}).Validate(); err == nil {
		t.Error("https endpoint without tls: valid")
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
