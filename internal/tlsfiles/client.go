package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/isobar-mq/isobar/internal/filewatch"
)

// ClientConfig names the TLS files of a client of an Isobar server: the
// CAs the server's certificate must chain to and, for servers that
// authenticate clients by certificate (the internal links: bookies,
// etcd, NATS), the client's own certificate and key.
type ClientConfig struct {
	// TrustCertsFile is a PEM bundle of the CAs the server's certificate
	// must chain to; empty means the system's.
	TrustCertsFile string `yaml:"trustCertsFile"`
	// CertFile and KeyFile are the client's certificate chain and key in
	// PEM, read again when they change; empty sends none.
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// Enable turns TLS on with the system's CAs and no client certificate
	// (any of the files turns it on too).
	Enable bool `yaml:"enable"`
}

// Enabled reports whether the client uses TLS.
func (c ClientConfig) Enabled() bool {
	return c.Enable || c.TrustCertsFile != "" || c.CertFile != "" || c.KeyFile != ""
}

// Validate checks the settings and that the files load now.
func (c ClientConfig) Validate() error {
	var errs []error
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("tls: certFile and keyFile go together"))
	} else if c.CertFile != "" {
		if _, err := loadPair(c.CertFile, c.KeyFile, time.Now()); err != nil {
			errs = append(errs, err)
		}
	}
	if c.TrustCertsFile != "" {
		if _, err := loadPool(c.TrustCertsFile); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Client returns the TLS configuration of a client: TLS 1.2 at least,
// servers verified against TrustCertsFile (read once), and the client
// certificate read again when its files change. It returns nil, nil when
// TLS is not enabled.
func (c ClientConfig) Client() (*tls.Config, error) {
	if !c.Enabled() {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TrustCertsFile != "" {
		pool, err := loadPool(c.TrustCertsFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := watchPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert.Get(), nil }
	}
	return cfg, nil
}

// watchPair is a certificate and key read again when either file changes;
// files that do not load (half written, expired) leave the previous pair
// in use.
func watchPair(certFile, keyFile string) (*filewatch.Value[*tls.Certificate], error) {
	return filewatch.New([]string{certFile, keyFile}, func() (*tls.Certificate, error) {
		return loadPair(certFile, keyFile, time.Now())
	})
}

// Peer returns the TLS configuration of a link whose ends both accept and
// dial (NATS routes and gateways): the certificate serves both as server
// and as client certificate (it needs both extended key usages), and the
// other end must present one that chains to TrustCertsFile, which is
// required. The certificate is read again when its files change; the
// trusted CAs are read once.
func (c Config) Peer() (*tls.Config, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.Enabled() {
		return nil, errors.New("tls: not configured")
	}
	if c.TrustCertsFile == "" {
		return nil, errors.New("tls: a link between peers needs trustCertsFile")
	}
	cert, err := watchPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, err
	}
	pool, err := loadPool(c.TrustCertsFile)
	if err != nil {
		return nil, err
	}
	return peerConfig(cert, pool), nil
}

func peerConfig(cert *filewatch.Value[*tls.Certificate], pool *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		GetCertificate:       func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert.Get(), nil },
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert.Get(), nil },
		RootCAs:              pool,
		ClientCAs:            pool,
		ClientAuth:           tls.RequireAndVerifyClientCert,
	}
}

// ValidatePeer is Validate for a link between peers (Peer): it also needs
// TrustCertsFile, and a certificate that both a server and a client may
// present (extended key usages serverAuth and clientAuth, or none), since
// each end of such a link accepts and dials.
func (c Config) ValidatePeer() error {
	errs := []error{c.Validate()}
	if !c.Enabled() {
		return errs[0]
	}
	if c.TrustCertsFile == "" {
		errs = append(errs, errors.New("tls: a link between peers needs trustCertsFile"))
	}
	if c.CertFile != "" && c.KeyFile != "" {
		if cert, err := loadPair(c.CertFile, c.KeyFile, time.Now()); err == nil {
			for _, u := range []struct {
				usage x509.ExtKeyUsage
				name  string
			}{{x509.ExtKeyUsageServerAuth, "serverAuth"}, {x509.ExtKeyUsageClientAuth, "clientAuth"}} {
				if !hasExtKeyUsage(cert.Leaf, u.usage) {
					errs = append(errs, fmt.Errorf("tls: certificate %s lacks extended key usage %s, which a link between peers needs", c.CertFile, u.name))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// hasExtKeyUsage reports whether cert may be used for usage: a certificate
// without extended key usages may be used for any.
func hasExtKeyUsage(cert *x509.Certificate, usage x509.ExtKeyUsage) bool {
	if len(cert.ExtKeyUsage) == 0 && len(cert.UnknownExtKeyUsage) == 0 {
		return true
	}
	for _, u := range cert.ExtKeyUsage {
		if u == usage || u == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}
