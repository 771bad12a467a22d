// Package tlstest makes certificate authorities and certificates on disk
// for tests of TLS links: one CA per "region", certificates good for
// servers and clients on 127.0.0.1 and localhost, and atomic reissues for
// rotation tests.
package tlstest

import (
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/atomicfile"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
)

// CA is a certificate authority whose certificate is File, in Dir with
// the certificates it issues.
type CA struct {
	t    testing.TB
	PEM  tlsfiles.PEM
	File string
	Dir  string
}

// NewCA makes a CA named name, valid from an hour ago for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	now := time.Now()
	p, err := tlsfiles.NewCA(name, now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &CA{t: t, PEM: p, Dir: dir, File: filepath.Join(dir, "ca.pem")}
	Write(t, c.File, p.Cert)
	return c
}

// Issue writes a certificate whose common name is name, for 127.0.0.1 and
// localhost, good for servers and clients, valid from an hour ago for a
// day, and returns its files (<Dir>/<name>.pem and -key.pem).
func (c *CA) Issue(name string) (certFile, keyFile string) {
	c.t.Helper()
	certFile, keyFile = filepath.Join(c.Dir, name+".pem"), filepath.Join(c.Dir, name+"-key.pem")
	c.Reissue(name, certFile, keyFile)
	return certFile, keyFile
}

// Reissue replaces certFile and keyFile with a new certificate for name,
// each file by a rename (as a rotation should), and returns it.
func (c *CA) Reissue(name, certFile, keyFile string) *x509.Certificate {
	c.t.Helper()
	now := time.Now()
	p, err := tlsfiles.Issue(c.PEM, name, []string{"127.0.0.1", "localhost"}, true, now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		c.t.Fatal(err)
	}
	Write(c.t, keyFile, p.Key)
	Write(c.t, certFile, p.Cert)
	block, _ := pem.Decode(p.Cert)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		c.t.Fatal(err)
	}
	return cert
}

// Server is a server's TLS with a certificate for name that requires
// clients to present one of this CA.
func (c *CA) Server(name string) tlsfiles.Config {
	cert, key := c.Issue(name)
	return tlsfiles.Config{CertFile: cert, KeyFile: key, TrustCertsFile: c.File, RequireClientCert: true}
}

// Client is a client's TLS with a certificate of this CA for name,
// trusting the servers of trust.
func (c *CA) Client(name string, trust *CA) tlsfiles.ClientConfig {
	cert, key := c.Issue(name)
	return tlsfiles.ClientConfig{TrustCertsFile: trust.File, CertFile: cert, KeyFile: key}
}

// Write writes a file atomically (package atomicfile), readable by the
// owner only.
func Write(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
