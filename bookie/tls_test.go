package bookie_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/bookie/client"
	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/isobar-mq/isobar/internal/tlsfiles/tlstest"
)

// bookieTLS is the TLS config of a bookie of the region whose CA is r:
// it requires client certificates r signed.
func bookieTLS(r *tlstest.CA) tlsfiles.Config { return r.Server("bookie") }

// clientTLS is a ledger client's TLS config: trusting the bookies' CA
// (trust) and, unless certFrom is nil, with a client certificate certFrom
// issued.
func clientTLS(t *testing.T, trust, certFrom *tlstest.CA) *tls.Config {
	t.Helper()
	cc := tlsfiles.ClientConfig{TrustCertsFile: trust.File}
	if certFrom != nil {
		cc = certFrom.Client("ledger-client", trust)
	}
	cfg, err := cc.Client()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func tlsLedgerClient(t *testing.T, cl *testcluster.Cluster, cfg *tls.Config) *ledger.Client {
	t.Helper()
	lc, err := ledger.NewClient(cl.Meta, ledger.Config{Region: cl.Region, Logger: cl.Logger(),
		RequestTimeout: 3 * time.Second, TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close() })
	return lc
}

// writeAndRead writes n entries to a new ledger on the cluster's one
// bookie, closes it and reads them back with a reader of the same client.
func writeAndRead(t *testing.T, lc *ledger.Client, n int) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := lc.Create(ctx, ledger.CreateOptions{Ensemble: 1, WriteQuorum: 1, AckQuorum: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := lc.OpenNoRecovery(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(ctx, 0, int64(n-1))
	if err != nil || len(got) != n {
		t.Fatalf("read back %d of %d entries: %v", len(got), n, err)
	}
	for _, en := range got {
		if !bytes.Equal(en.Data, payload(int(en.ID))) {
			t.Fatalf("entry %d differs", en.ID)
		}
	}
	return w.ID()
}

// TestTLSMutual: a bookie that requires client certificates from its
// region's CA serves a ledger client with one, and refuses, with errors
// that name the bookie and say what failed, a client with a certificate
// from another region's CA, one with none, one that does not trust the
// bookie's CA and a plaintext one; connections that never finish a
// handshake hold nothing up; and it goes on serving the good client.
func TestTLSMutual(t *testing.T) {
	a, b := tlstest.NewCA(t, "region-a"), tlstest.NewCA(t, "region-b")
	btls := bookieTLS(a)
	cl := testcluster.Start(t, testcluster.Options{Bookies: 1, Bookie: func(_ int, c *bookie.Config) { c.TLS = btls }})
	addr := cl.Bookie(0).Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	good := tlsLedgerClient(t, cl, clientTLS(t, a, a))
	ledgerID := writeAndRead(t, good, 50)

	// Connections that send nothing, or garbage, stay open while the rest
	// of the test runs: the accept loop does not wait on their handshakes.
	for _, junk := range [][]byte{nil, []byte("GET / HTTP/1.0\r\n"), {0x16, 0x03, 0x01, 0x00}} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if junk != nil {
			if _, err := nc.Write(junk); err != nil {
				t.Fatal(err)
			}
		}
	}

	refused := []struct {
		name string
		cfg  *tls.Config
		want []string // in the error
	}{
		{"certificate from another region's CA", clientTLS(t, a, b), []string{"over TLS: the bookie closed the connection after the handshake", "unknown certificate authority"}},
		{"no client certificate", clientTLS(t, a, nil), []string{"over TLS: the bookie closed the connection after the handshake", "certificate required"}},
		{"bookie's CA not trusted", clientTLS(t, b, b), []string{"over TLS", "certificate signed by unknown authority"}},
		{"plaintext", nil, nil},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			// The connection itself.
			c, err := client.Dial(ctx, addr, client.Options{TLS: tc.cfg, DialTimeout: 10 * time.Second})
			if err == nil {
				// Plaintext: the bookie drops the connection at the
				// first request, which fails.
				_, err = c.Info(ctx)
				c.Close()
			}
			if err == nil {
				t.Fatal("the bookie served the client")
			}
			if !errors.Is(err, client.ErrDisconnected) || !strings.Contains(err.Error(), addr) {
				t.Fatalf("error %q: want ErrDisconnected naming %s", err, addr)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
			t.Logf("refused: %v", err)

			// A ledger client of such credentials reads nothing.
			lc := tlsLedgerClient(t, cl, tc.cfg)
			if _, err := lc.Pool().Get(ctx, addr); err == nil && tc.cfg != nil {
				t.Fatal("the ledger client got a connection to the bookie")
			}
			r, err := lc.OpenNoRecovery(ctx, ledgerID)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := r.Read(ctx, 0, 0); err == nil {
				t.Fatalf("read %d entries", len(got))
			} else {
				t.Logf("read refused: %v", err)
			}
		})
	}

	// The bookie still serves the good client: on its pooled connection
	// and on a new one.
	writeAndRead(t, good, 20)
	writeAndRead(t, tlsLedgerClient(t, cl, clientTLS(t, a, a)), 20)

	// Dial verifies the bookie's certificate against the host of its
	// address unless the config names another, and leaves the caller's
	// config alone.
	for _, name := range []string{"", "localhost", "elsewhere"} {
		cfg := clientTLS(t, a, a)
		cfg.ServerName = name
		c, err := client.Dial(ctx, addr, client.Options{TLS: cfg})
		if err == nil {
			_, err = c.Info(ctx)
			c.Close()
		}
		if cfg.ServerName != name {
			t.Errorf("Dial changed the config's ServerName to %q", cfg.ServerName)
		}
		if wantErr := name == "elsewhere"; (err != nil) != wantErr || wantErr && !strings.Contains(err.Error(), "not elsewhere") {
			t.Errorf("ServerName %q: %v", name, err)
		}
	}
	if srv := cl.Bookie(0).Server(); srv.Ready() != nil {
		t.Fatalf("bookie not ready: %v", srv.Ready())
	}
}

// TestTLSCertificateRotation: new certificate and key files replace the
// bookie's; new connections get the new certificate without a restart,
// and the ledger client goes on writing and reading.
func TestTLSCertificateRotation(t *testing.T) {
	a := tlstest.NewCA(t, "region-a")
	btls := bookieTLS(a)
	cl := testcluster.Start(t, testcluster.Options{Bookies: 1, Bookie: func(_ int, c *bookie.Config) { c.TLS = btls }})
	addr := cl.Bookie(0).Addr()
	cfg := clientTLS(t, a, a)
	lc := tlsLedgerClient(t, cl, cfg)
	writeAndRead(t, lc, 10)

	peer := func() *x509.Certificate {
		t.Helper()
		c := cfg.Clone()
		c.ServerName = "127.0.0.1"
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, c)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	old := peer()
	if old.Subject.CommonName != "bookie" {
		t.Fatalf("certificate of %q, want bookie", old.Subject.CommonName)
	}

	a.Reissue("bookie-rotated", btls.CertFile, btls.KeyFile)
	var cur *x509.Certificate
	testcluster.WaitFor(t, 15*time.Second, func() bool {
		cur = peer()
		return cur.SerialNumber.Cmp(old.SerialNumber) != 0
	})
	if cur.Subject.CommonName != "bookie-rotated" {
		t.Fatalf("new certificate %q, want bookie-rotated", cur.Subject.CommonName)
	}
	writeAndRead(t, lc, 10)
	writeAndRead(t, tlsLedgerClient(t, cl, clientTLS(t, a, a)), 10)
}
