package bookie

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
)

// testPKI writes a CA, a bookie certificate (valid from nb until na) and
// a client certificate into dir.
func testPKI(t *testing.T, dir string, nb, na time.Time) (cfg tlsfiles.Config, client *tls.Config) {
	t.Helper()
	now := time.Now()
	ca, err := tlsfiles.NewCA("test CA", now.Add(-48*time.Hour), now.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := tlsfiles.Issue(ca, "bookie", []string{"127.0.0.1"}, false, nb, na)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := tlsfiles.Issue(ca, "client", nil, true, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"ca.pem": ca.Cert, "bookie.crt": srv.Cert, "bookie.key": srv.Key, "client.crt": cl.Cert, "client.key": cl.Key}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg = tlsfiles.Config{CertFile: filepath.Join(dir, "bookie.crt"), KeyFile: filepath.Join(dir, "bookie.key"),
		TrustCertsFile: filepath.Join(dir, "ca.pem"), RequireClientCert: true}
	client, err = tlsfiles.ClientConfig{TrustCertsFile: filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "client.crt"), KeyFile: filepath.Join(dir, "client.key")}.Client()
	if err != nil {
		t.Fatal(err)
	}
	return cfg, client
}

// recorder keeps log records.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// handshakeFailures are the logged handshake failures: their levels and errors.
func (r *recorder) handshakeFailures() (levels []slog.Level, errs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		if !strings.HasPrefix(rec.Message, "TLS handshake failed") {
			continue
		}
		levels = append(levels, rec.Level)
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				errs = append(errs, a.Value.String())
			}
			return true
		})
	}
	return levels, errs
}

func (r *recorder) above(l slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.recs {
		if rec.Level > l {
			out = append(out, rec.Message)
		}
	}
	return out
}

// TestTLSHandshakeFailures: over a bookie's TLS listener, a client that
// never finishes its handshake is disconnected after handshakeTimeout, a
// plaintext client and one without a certificate are disconnected, each
// failure is logged once at Warn at most (at Debug after the first), and
// the bookie serves a good client all along.
func TestTLSHandshakeFailures(t *testing.T) {
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = 300 * time.Millisecond
	now := time.Now()
	tcfg, ccfg := testPKI(t, t.TempDir(), now.Add(-time.Hour), now.Add(time.Hour))
	cfg := testConfig(t, t.TempDir())
	cfg.TLS = tcfg
	logs := &recorder{}
	s := startServer(t, cfg, Deps{Logger: slog.New(logs)})

	// Two connections that never finish a handshake: one silent, one
	// that starts a TLS record and stops.
	silent, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	stalled, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	stalled.Write([]byte{0x16, 0x03, 0x01, 0x01, 0x00})

	// Meanwhile a good client is served.
	good := func() {
		t.Helper()
		tc, err := tls.Dial("tcp", s.Addr(), ccfg)
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		r := &raw{t: t, nc: tc, br: bufio.NewReader(tc)}
		if resp := r.do(proto.Request{Op: proto.OpInfo, ID: 1}); resp.Status != proto.StatusOK || string(resp.Payload) != s.ID() {
			t.Fatalf("info over TLS: %+v", resp)
		}
		if resp := r.do(addReq(2, 7, 0, -1, "over tls")); resp.Status != proto.StatusOK {
			t.Fatalf("add over TLS: %v", resp.Status)
		}
	}
	good()

	// The stalled handshakes end at handshakeTimeout: the bookie closes them.
	for _, nc := range []net.Conn{silent, stalled} {
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(nc); err != nil {
			t.Fatalf("a connection without a handshake was not closed by the bookie: %v", err)
		}
	}

	// A plaintext client is disconnected.
	plain := dialRaw(t, s.Addr())
	plain.send(proto.Request{Op: proto.OpInfo, ID: 1})
	if !plain.closed() {
		t.Fatal("a plaintext client got an answer")
	}
	// So is one without a client certificate, at its first read.
	nocert := ccfg.Clone()
	nocert.GetClientCertificate = nil
	tc, err := tls.Dial("tcp", s.Addr(), nocert)
	if err == nil {
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = tc.Read(make([]byte, 1))
		tc.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("a client without a certificate: %v", err)
	}
	good()

	waitFor(t, 10*time.Second, func() bool { l, _ := logs.handshakeFailures(); return len(l) >= 4 })
	levels, errs := logs.handshakeFailures()
	warns := 0
	for i, l := range levels {
		switch l {
		case slog.LevelWarn:
			warns++
		case slog.LevelDebug:
		default:
			t.Errorf("handshake failure logged at %v: %s", l, errs[i])
		}
	}
	if warns != 1 {
		t.Errorf("%d handshake failures at Warn, want 1 (then Debug for a minute): %v %q", warns, levels, errs)
	}
	if joined := strings.Join(errs, "\n"); !strings.Contains(joined, "no handshake within 300ms") ||
		!strings.Contains(joined, "does not look like a TLS handshake") {
		t.Errorf("logged handshake errors:\n%s", joined)
	}
	if above := logs.above(slog.LevelWarn); len(above) > 0 {
		t.Errorf("logged above Warn: %q", above)
	}
	if err := s.Ready(); err != nil {
		t.Fatal(err)
	}
}

// TestConfigValidateTLS: problems with bookie.tls are reported each
// under bookie.tls, and New refuses them.
func TestConfigValidateTLS(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	good, _ := testPKI(t, dir, now.Add(-time.Hour), now.Add(time.Hour))
	expiredDir := t.TempDir()
	expired, _ := testPKI(t, expiredDir, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	missing := filepath.Join(dir, "absent.pem")

	base := testConfig(t, t.TempDir())
	base.TLS = good
	if err := base.Validate(); err != nil {
		t.Fatalf("a good TLS config: %v", err)
	}
	for _, tc := range []struct {
		name string
		tls  tlsfiles.Config
		want []string
	}{
		{"certificate without key", tlsfiles.Config{CertFile: good.CertFile}, []string{"certFile and keyFile go together"}},
		{"missing files", tlsfiles.Config{CertFile: missing, KeyFile: good.KeyFile}, []string{missing}},
		{"missing trust file", tlsfiles.Config{CertFile: good.CertFile, KeyFile: good.KeyFile, TrustCertsFile: missing}, []string{"trust certificates", missing}},
		{"expired certificate", expired, []string{"expired at"}},
		{"key of another certificate", tlsfiles.Config{CertFile: good.CertFile, KeyFile: expired.KeyFile}, []string{"private key does not match"}},
		{"client certificates without a CA", tlsfiles.Config{CertFile: good.CertFile, KeyFile: good.KeyFile, RequireClientCert: true},
			[]string{"requireClientCert needs trustCertsFile"}},
		{"two problems", tlsfiles.Config{CertFile: missing, KeyFile: good.KeyFile, RequireClientCert: true},
			[]string{missing, "requireClientCert needs trustCertsFile"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.TLS = tc.tls
			err := cfg.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "bookie.tls: ") {
					t.Errorf("%q is not under bookie.tls", line)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if _, nerr := New(cfg, Deps{}); nerr == nil || nerr.Error() != err.Error() {
				t.Errorf("New: %v, want %v", nerr, err)
			}
		})
	}
	if err := (Config{JournalDir: "j", LedgerDir: "l"}).Validate(); err != nil {
		t.Fatalf("without TLS: %v", err)
	}
}
