package proxy

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
)

// Config is the proxy's settings (the proxy section of the configuration
// file, without the listeners, which the process owns).
type Config struct {
	// Region is the region whose brokers the proxy fronts: their
	// registrations in its metadata store are the only brokers it
	// forwards to. Required.
	Region string `yaml:"region"`
	// Auth is how clients authenticate to the proxy, in the brokers'
	// shape: authenticationEnabled, token, tlsAuthentication and
	// authenticateMetrics apply; authorization is the brokers' (they
	// authorize the client's role), so the role lists must be empty.
	Auth auth.Config `yaml:"auth"`
	// BrokerClient is how the proxy reaches the brokers.
	BrokerClient BrokerClientConfig `yaml:"brokerClient"`
	// MaxConnections bounds the client connections open at once (Pulsar's
	// maxConcurrentInboundConnections); more are closed at once. Zero
	// means 10000.
	MaxConnections int `yaml:"maxConnections"`
	// MaxConcurrentLookups bounds the lookup requests (LOOKUP,
	// PARTITIONED_METADATA, GET_TOPICS_OF_NAMESPACE, GET_SCHEMA) in
	// progress (Pulsar's maxConcurrentLookupRequests); more get
	// TooManyRequests, which clients retry. Zero means 50000.
	MaxConcurrentLookups int `yaml:"maxConcurrentLookupRequests"`
	// HandshakeTimeout bounds the wait for a client's CONNECT and for a
	// broker's answer to the proxy's; zero means 10s.
	HandshakeTimeout time.Duration `yaml:"handshakeTimeout"`
	// KeepAlive is the ping interval of lookup connections (a proxied
	// connection carries the broker's own pings); one silent for two
	// intervals is closed. Zero means 30s.
	KeepAlive time.Duration `yaml:"keepAlive"`
	// MaxRequestBytes bounds the body of a forwarded HTTP request (413
	// beyond); the proxy holds it to replay it on a redirect. Zero means
	// 16 MiB, the brokers' largest.
	MaxRequestBytes int `yaml:"maxRequestBytes"`
}

// BrokerClientConfig is how the proxy connects to brokers.
type BrokerClientConfig struct {
	// TokenFile holds the token the proxy authenticates to the brokers
	// with when its authentication is on; its role must be one of the
	// brokers' auth.proxyRoles. Read at each connection, so it can be
	// replaced. Empty: the proxy authenticates with its TLS client
	// certificate (tls.certFile), or not at all.
	TokenFile string `yaml:"tokenFile"`
	// TLS, when enabled, connects to the brokers' TLS listeners
	// (pulsar+ssl://, https://), trusting trustCertsFile; certFile and
	// keyFile are the proxy's client certificate.
	TLS tlsfiles.ClientConfig `yaml:"tls"`
}

// Defaults and bounds.
const (
	DefaultMaxConnections       = 10000
	DefaultMaxConcurrentLookups = 50000
	DefaultMaxRequestBytes      = 16 << 20
	maxConnectionsLimit         = 1 << 20
	maxLookupsLimit             = 1 << 20
	maxRequestBytesLimit        = 1 << 30
)

// WithDefaults fills in the zero values.
func (c Config) WithDefaults() Config {
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxConcurrentLookups == 0 {
		c.MaxConcurrentLookups = DefaultMaxConcurrentLookups
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = 30 * time.Second
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	return c
}

// Validate reports every problem at once, naming the keys (under prefix
// "proxy.").
func (c Config) Validate() error {
	var errs []error
	if c.Region == "" || strings.ContainsAny(c.Region, "/ \t\n") {
		errs = append(errs, fmt.Errorf("proxy.region: %q must name the region whose brokers the proxy fronts", c.Region))
	}
	if err := c.Auth.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("proxy.%w", err))
	}
	if c.Auth.AuthorizationEnabled || len(c.Auth.SuperUserRoles) > 0 || len(c.Auth.ReplicatorRoles) > 0 || len(c.Auth.ProxyRoles) > 0 {
		errs = append(errs, errors.New("proxy.auth: authorizationEnabled, superUserRoles, replicatorRoles and proxyRoles are the brokers' settings (they authorize the client's role); leave them out of the proxy's"))
	}
	if err := c.BrokerClient.TLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("proxy.brokerClient.%w", err))
	}
	if f := c.BrokerClient.TokenFile; f != "" {
		if _, err := os.Stat(f); err != nil {
			errs = append(errs, fmt.Errorf("proxy.brokerClient.tokenFile: %w", err))
		}
	}
	if c.Auth.AuthenticationEnabled && c.BrokerClient.TokenFile == "" && c.BrokerClient.TLS.CertFile == "" {
		errs = append(errs, errors.New("proxy.brokerClient: with proxy.auth.authenticationEnabled the proxy acts for its clients and needs credentials of its own (tokenFile, or tls.certFile), for a role among the brokers' auth.proxyRoles"))
	}
	bound := func(key string, v, limit int) {
		if v < 0 || v > limit {
			errs = append(errs, fmt.Errorf("proxy.%s: %d is not within 0..%d", key, v, limit))
		}
	}
	bound("maxConnections", c.MaxConnections, maxConnectionsLimit)
	bound("maxConcurrentLookupRequests", c.MaxConcurrentLookups, maxLookupsLimit)
	bound("maxRequestBytes", c.MaxRequestBytes, maxRequestBytesLimit)
	if c.HandshakeTimeout < 0 || c.HandshakeTimeout > 10*time.Minute {
		errs = append(errs, fmt.Errorf("proxy.handshakeTimeout: %v is not within 0..10m", c.HandshakeTimeout))
	}
	if c.KeepAlive < 0 || c.KeepAlive > 0 && c.KeepAlive < time.Second || c.KeepAlive > time.Hour {
		errs = append(errs, fmt.Errorf("proxy.keepAlive: %v must be 0 (default 30s) or within 1s..1h", c.KeepAlive))
	}
	return errors.Join(errs...)
}
