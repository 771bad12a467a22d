package region

import (
	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/internal/secrets"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/roles"
)

// secure is how a region started with Secrets (`--secure`) secures its
// links: its internal links (etcd, bookies, NATS clients) by mutual TLS
// with certificates of its own CA, the links toward other regions (global
// store, NATS gateways) by mutual TLS with the federation CA, its brokers
// by TLS only with token authentication and authorization.
type secure struct {
	files  secrets.Files
	region secrets.Region
}

func newSecure(cfg Config) *secure {
	if cfg.Secrets == nil {
		return nil
	}
	return &secure{files: *cfg.Secrets, region: cfg.Secrets.Regions[cfg.Name]}
}

// server is the TLS of a region-internal listener of kind: its
// certificate, and clients must present one of the region's CA.
func (s *secure) server(kind string) tlsfiles.Config {
	p := s.region.Certs[kind]
	return tlsfiles.Config{CertFile: p.Cert, KeyFile: p.Key, TrustCertsFile: s.region.CA, RequireClientCert: true}
}

// client is the TLS of a region-internal client of kind.
func (s *secure) client(kind string) tlsfiles.ClientConfig {
	p := s.region.Certs[kind]
	return tlsfiles.ClientConfig{TrustCertsFile: s.region.CA, CertFile: p.Cert, KeyFile: p.Key}
}

// federation is the TLS of the region's links toward the other regions.
func (s *secure) federation() tlsfiles.Config {
	p := s.region.Federation
	return tlsfiles.Config{CertFile: p.Cert, KeyFile: p.Key, TrustCertsFile: s.files.CA, RequireClientCert: true}
}

// global is how the region's components reach the global store.
func (s *secure) global(g metastore.Config) metastore.Config {
	p := s.region.Federation
	g.TLS = tlsfiles.ClientConfig{TrustCertsFile: s.files.CA, CertFile: p.Cert, KeyFile: p.Key}
	return g
}

// broker secures a broker: TLS only, with its certificate from the
// federation CA, tokens signed with the federation's key, the superuser
// and the region's replicator role.
func (s *secure) broker(bc roles.BrokerConfig) roles.BrokerConfig {
	bc.TLS = tlsfiles.Config{CertFile: s.region.Public.Cert, KeyFile: s.region.Public.Key}
	bc.TLSOnly = true
	bc.BookKeeperTLS = s.client("broker")
	bc.Auth = auth.Config{
		AuthenticationEnabled: true,
		AuthorizationEnabled:  true,
		Token:                 auth.TokenConfig{SecretKey: s.files.SecretKey},
		SuperUserRoles:        []string{secrets.SuperUser},
		ReplicatorRoles:       []string{s.region.ReplicatorRole},
	}
	return bc
}

// GlobalServer is the TLS of a secure federation's global store member.
func GlobalServer(f secrets.Files) tlsfiles.Config {
	return tlsfiles.Config{CertFile: f.Global.Cert, KeyFile: f.Global.Key, TrustCertsFile: f.CA, RequireClientCert: true}
}
