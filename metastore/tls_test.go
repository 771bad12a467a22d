package metastore

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/isobar-mq/isobar/internal/tlsfiles/tlstest"
)

// TestClientTLS: a member serving clients over mutual TLS serves a client
// with a certificate of its CA and refuses, with a clear error, one of
// another CA (another region's), one without a certificate and a
// plaintext one, and keeps serving.
func TestClientTLS(t *testing.T) {
	region, other := tlstest.NewCA(t, "region-a"), tlstest.NewCA(t, "region-b")
	srvCert, srvKey := region.Issue("etcd")
	e, err := StartEmbedded(context.Background(), EmbedConfig{
		Dir:       t.TempDir(),
		ClientTLS: tlsfiles.Config{CertFile: srvCert, KeyFile: srvKey, TrustCertsFile: region.File, RequireClientCert: true},
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
	goodCert, goodKey := region.Issue("broker-1")
	good := tlsfiles.ClientConfig{TrustCertsFile: region.File, CertFile: goodCert, KeyFile: goodKey}
	if err := connect(good, e.Endpoints()[0]); err != nil {
		t.Fatalf("client with the region's certificate: %v", err)
	}
	strangerCert, strangerKey := other.Issue("broker-1")
	plain := "http://" + e.ClientAddr()
	for name, tc := range map[string]struct {
		cfg      tlsfiles.ClientConfig
		endpoint string
		says     string
	}{
		"another region's certificate": {tlsfiles.ClientConfig{TrustCertsFile: region.File, CertFile: strangerCert, KeyFile: strangerKey}, e.Endpoints()[0], "unknown certificate authority"},
		"no certificate":               {tlsfiles.ClientConfig{TrustCertsFile: region.File}, e.Endpoints()[0], "certificate required"},
		"not trusting the server":      {tlsfiles.ClientConfig{TrustCertsFile: other.File, CertFile: goodCert, KeyFile: goodKey}, e.Endpoints()[0], "certificate signed by unknown authority"},
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
	ca := tlstest.NewCA(t, "region-a")
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
		cert, key := ca.Issue(fmt.Sprintf("m%d", i))
		tc := tlsfiles.Config{CertFile: cert, KeyFile: key, TrustCertsFile: ca.File, RequireClientCert: true}
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
	cert, key := ca.Issue("client")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tc := tlsfiles.ClientConfig{TrustCertsFile: ca.File, CertFile: cert, KeyFile: key}
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
	ca := tlstest.NewCA(t, "x")
	cert, key := ca.Issue("m")
	for name, c := range map[string]EmbedConfig{
		"cert without key":       {Dir: "d", ClientTLS: tlsfiles.Config{CertFile: cert}},
		"missing file":           {Dir: "d", ClientTLS: tlsfiles.Config{CertFile: cert + ".gone", KeyFile: key}},
		"peer without trust":     {Dir: "d", PeerTLS: tlsfiles.Config{CertFile: cert, KeyFile: key}},
		"http peer URL with TLS": {Dir: "d", InitialCluster: "isobar=http://127.0.0.1:1", PeerTLS: tlsfiles.Config{CertFile: cert, KeyFile: key, TrustCertsFile: ca.File}},
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
