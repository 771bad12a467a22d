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
	"sync"
	"time"
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

// recheck is how often the files are looked at for a change.
const recheck = time.Second

// stamp identifies a version of a file.
type stamp struct {
	mod  time.Time
	size int64
}

func stat(file string) stamp {
	fi, err := os.Stat(file)
	if err != nil {
		return stamp{}
	}
	return stamp{fi.ModTime(), fi.Size()}
}

// files holds the loaded certificate and trust pool, reloading them when
// their files change. A changed file that does not load (half written,
// expired) leaves the previous one in use.
type files struct {
	cfg Config

	mu      sync.Mutex
	cert    *tls.Certificate
	pool    *x509.CertPool
	stamps  [3]stamp
	checked time.Time
}

func (f *files) current() (*tls.Certificate, *x509.CertPool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) < recheck {
		return f.cert, f.pool
	}
	f.checked = time.Now()
	now := [3]stamp{stat(f.cfg.CertFile), stat(f.cfg.KeyFile), {}}
	if f.cfg.TrustCertsFile != "" {
		now[2] = stat(f.cfg.TrustCertsFile)
	}
	if now == f.stamps {
		return f.cert, f.pool
	}
	if cert, err := loadPair(f.cfg.CertFile, f.cfg.KeyFile, time.Now()); err == nil {
		f.cert = cert
		f.stamps[0], f.stamps[1] = now[0], now[1]
	}
	if f.cfg.TrustCertsFile != "" {
		if pool, err := loadPool(f.cfg.TrustCertsFile); err == nil {
			f.pool = pool
			f.stamps[2] = now[2]
		}
	}
	return f.cert, f.pool
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
	f := &files{cfg: c}
	if cert, pool := f.current(); cert == nil || (c.TrustCertsFile != "" && pool == nil) {
		return nil, errors.New("tls: the files changed while they were read; try again")
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, pool := f.current()
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}}
		if pool != nil {
			cfg.ClientCAs = pool
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
			if c.RequireClientCert {
				cfg.ClientAuth = tls.RequireAndVerifyClientCert
			}
		}
		return cfg, nil
	}
	return base, nil
}
