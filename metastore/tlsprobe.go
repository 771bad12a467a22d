package metastore

import (
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// tlsDiagnosis says why a TLS mismatch may keep etcd at endpoint from
// answering, or "" when it finds none. etcd's client only reports a
// deadline when the handshake fails, so a start-up that cannot connect
// asks once, directly: with tc, does the handshake (and the server's
// verdict on our certificate, which TLS 1.3 sends after it) succeed;
// without tc, does the server speak TLS.
func tlsDiagnosis(endpoint string, tc *tls.Config) string {
	host := endpoint
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		host = u.Host
	}
	d := &net.Dialer{Timeout: time.Second}
	if tc == nil {
		probe := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // only asks whether the server speaks TLS
		c, err := tls.DialWithDialer(d, "tcp", host, probe)
		if err != nil {
			return ""
		}
		c.Close()
		return "the server at " + host + " speaks TLS: set metastore.tls (and https:// endpoints)"
	}
	tc = tc.Clone()
	if tc.ServerName == "" {
		tc.ServerName, _, _ = net.SplitHostPort(host)
	}
	c, err := tls.DialWithDialer(d, "tcp", host, tc)
	if err != nil {
		return "TLS handshake with " + host + ": " + err.Error()
	}
	defer c.Close()
	// A refusal of our certificate arrives as an alert on the first read.
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && strings.Contains(err.Error(), "tls:") {
		return "TLS handshake with " + host + ": " + err.Error()
	}
	return ""
}
