// Package tlsfiles is TLS from files for Isobar's servers: a certificate
// and key read again when the files change (rotation without a restart),
// an optional CA bundle that client certificates must chain to (mutual
// TLS), TLS 1.2 at least, and clear errors for files that cannot serve
// (missing, mismatched, expired). It also issues certificates, for tests
// and for the certificates `--secure` makes.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/isobar-mq/isobar/internal/filewatch"
)

// Config names a server's TLS files.
type Config struct {
	// CertFile and KeyFile are the server's certificate chain and private
	// key in PEM. Both are read again when either changes.
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// TrustCertsFile is a PEM bundle of the CAs that client certificates
	// must chain to; with it, a client certificate is asked for and
	// verified when given.
	TrustCertsFile string `yaml:"trustCertsFile"`
	// RequireClientCert refuses clients without a certificate that
	// chains to TrustCertsFile (mutual TLS).
	RequireClientCert bool `yaml:"requireClientCert"`
}

// Enabled reports whether TLS is configured.
func (c Config) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" }

// Validate checks the settings and that the files serve now: a readable
// certificate and key that match, and a certificate that has not expired.
func (c Config) Validate() error {
	if !c.Enabled() {
		if c.TrustCertsFile != "" || c.RequireClientCert {
			return errors.New("tls: trustCertsFile and requireClientCert need certFile and keyFile")
		}
		return nil
	}
	var errs []error
	if c.CertFile == "" || c.KeyFile == "" {
		errs = append(errs, errors.New("tls: certFile and keyFile go together"))
	} else if _, err := loadPair(c.CertFile, c.KeyFile, time.Now()); err != nil {
		errs = append(errs, err)
	}
	if c.RequireClientCert && c.TrustCertsFile == "" {
		errs = append(errs, errors.New("tls: requireClientCert needs trustCertsFile"))
	}
	if c.TrustCertsFile != "" {
		if _, err := loadPool(c.TrustCertsFile); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// loadPair reads a certificate and key and checks the certificate is
// valid at now.
func loadPair(certFile, keyFile string, now time.Time) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s and key %s: %w", certFile, keyFile, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s: %w", certFile, err)
	}
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("tls: certificate %s expired at %s", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return nil, fmt.Errorf("tls: certificate %s is not valid before %s", certFile, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	cert.Leaf = leaf
	return &cert, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: trust certificates: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tls: trust certificates %s: no PEM certificate in it", file)
	}
	return pool, nil
}

// Server returns a TLS configuration for a server that reads the files
// again when they change, so certificates rotate without a restart.
func (c Config) Server() (*tls.Config, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.Enabled() {
		return nil, errors.New("tls: not configured")
	}
	// Each is read again when its files change (package filewatch); files
	// that do not load (half written, expired) leave the previous one in
	// use.
	cert, err := watchPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, err
	}
	var pool *filewatch.Value[*x509.CertPool]
	if c.TrustCertsFile != "" {
		if pool, err = filewatch.New([]string{c.TrustCertsFile}, func() (*x509.CertPool, error) { return loadPool(c.TrustCertsFile) }); err != nil {
			return nil, err
		}
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert.Get()}}
		if pool != nil {
			cfg.ClientCAs = pool.Get()
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
			if c.RequireClientCert {
				cfg.ClientAuth = tls.RequireAndVerifyClientCert
			}
		}
		return cfg, nil
	}
	return base, nil
}
