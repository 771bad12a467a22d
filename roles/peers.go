package roles

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"time"

	"github.com/isobar-mq/isobar/internal/tlsfiles"
)

// peerClient is the HTTP client a broker calls the region's other brokers
// with (the admin API forwards a namespace operation's part for each
// bundle to the bundle's owner). The brokers of a region serve HTTPS
// with certificates of the same chain, so it trusts the certificates of
// the broker's own certificate file besides the system's CAs.
func peerClient(cfg tlsfiles.Config) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CertFile != "" {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if pem, err := os.ReadFile(cfg.CertFile); err == nil {
			pool.AppendCertsFromPEM(pem)
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: t, Timeout: 2 * time.Minute}
}
