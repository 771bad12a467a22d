package metastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/isobar-mq/isobar/internal/tlsfiles"
)

// EmbedConfig configures an embedded etcd member: alone (the default) or
// one member of a cluster (InitialCluster), for a region's metadata store
// or for the global configuration store. It holds settings only.
type EmbedConfig struct {
	// Name is the member name; empty means "isobar".
	Name string `yaml:"name"`
	// Dir holds the member's data. Required.
	Dir string `yaml:"dataDir"`
	// ClientAddr is host:port to listen on for clients; empty or port 0
	// picks a free loopback port.
	ClientAddr string `yaml:"clientAddr"`
	// PeerAddr is host:port to listen on for peers; empty or port 0 picks
	// a free loopback port.
	PeerAddr string `yaml:"peerAddr"`
	// AdvertiseClientAddr and AdvertisePeerAddr are the host:port others
	// reach this member on; empty means the listen address (which must
	// then not be a wildcard such as 0.0.0.0).
	AdvertiseClientAddr string `yaml:"advertiseClientAddr"`
	AdvertisePeerAddr   string `yaml:"advertisePeerAddr"`
	// InitialCluster lists every member at the cluster's first start,
	// "name=http://host:peerport,..."; empty means a cluster of this
	// member alone. Ignored once the member has data.
	InitialCluster string `yaml:"initialCluster"`
	// ClusterState is "new" (default) when the cluster is being created,
	// "existing" when this member joins a running cluster (after
	// `etcdctl member add`).
	ClusterState string `yaml:"clusterState"`
	// ClusterToken tells clusters apart at their first start; empty means
	// "isobar".
	ClusterToken string `yaml:"clusterToken"`
	// StartTimeout bounds the wait for the member to serve (for a cluster:
	// for a quorum to form); zero means 60s.
	StartTimeout time.Duration `yaml:"startTimeout"`
	// ClientTLS, when its certificate and key are set, serves clients
	// over TLS only (https:// endpoints); with requireClientCert, only
	// clients presenting a certificate that chains to trustCertsFile (the
	// region's own CA) are served. PeerTLS does the same for the links
	// between members, which then always present and verify
	// certificates: it needs trustCertsFile, and initialCluster's URLs
	// must be https://. etcd reads the files again at each handshake, so
	// certificates rotate without a restart.
	ClientTLS tlsfiles.Config `yaml:"clientTls"`
	PeerTLS   tlsfiles.Config `yaml:"peerTls"`
}

// clientScheme and peerScheme are the URL schemes of the member's
// listeners.
func (c EmbedConfig) clientScheme() string { return scheme(c.ClientTLS.Enabled()) }
func (c EmbedConfig) peerScheme() string   { return scheme(c.PeerTLS.Enabled()) }

func scheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

// Validate reports every problem at once, naming the fields.
func (c EmbedConfig) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("etcd.dataDir: required"))
	}
	for name, a := range map[string]string{"clientAddr": c.ClientAddr, "peerAddr": c.PeerAddr, "advertiseClientAddr": c.AdvertiseClientAddr, "advertisePeerAddr": c.AdvertisePeerAddr} {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("etcd.%s: %q is not host:port: %v", name, a, err))
		}
	}
	if c.InitialCluster != "" {
		for _, m := range strings.Split(c.InitialCluster, ",") {
			n, u, ok := strings.Cut(m, "=")
			if _, err := url.Parse(u); !ok || n == "" || err != nil || !strings.HasPrefix(u, "http") {
				errs = append(errs, fmt.Errorf("etcd.initialCluster: %q is not name=http://host:port", m))
			} else if want := c.peerScheme() + "://"; !strings.HasPrefix(u, want) {
				errs = append(errs, fmt.Errorf("etcd.initialCluster: %q must use %s (peerTls is %s)", m, want, map[bool]string{true: "on", false: "off"}[c.PeerTLS.Enabled()]))
			}
		}
		if !strings.Contains(","+c.InitialCluster, ","+c.name()+"=") {
			errs = append(errs, fmt.Errorf("etcd.initialCluster: does not list this member (%q)", c.name()))
		}
	}
	switch c.ClusterState {
	case "", "new", "existing":
	default:
		errs = append(errs, fmt.Errorf("etcd.clusterState: %q is not new or existing", c.ClusterState))
	}
	if c.StartTimeout < 0 {
		errs = append(errs, fmt.Errorf("etcd.startTimeout: %v is negative", c.StartTimeout))
	}
	if err := c.ClientTLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("etcd.clientTls: %w", err))
	}
	if err := c.PeerTLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("etcd.peerTls: %w", err))
	} else if c.PeerTLS.Enabled() && c.PeerTLS.TrustCertsFile == "" {
		errs = append(errs, errors.New("etcd.peerTls: trustCertsFile is required (members verify each other)"))
	}
	return errors.Join(errs...)
}

func (c EmbedConfig) name() string {
	if c.Name == "" {
		return "isobar"
	}
	return c.Name
}

// Embedded is a running embedded etcd member.
type Embedded struct {
	etcd       *embed.Etcd
	clientAddr string
	scheme     string // of the client URL
	logger     *slog.Logger
}

// StartEmbedded starts an etcd member in this process and waits until it
// serves (for a member of a cluster: until a quorum has formed).
// Restarting on the same Dir keeps all data. logger may be nil.
func StartEmbedded(ctx context.Context, c EmbedConfig, logger *slog.Logger) (*Embedded, error) {
	// A port picked for us (none given, or port 0) can be taken by
	// another process between the pick and etcd's bind: pick again.
	auto := func(a string) bool { return a == "" || strings.HasSuffix(a, ":0") }
	for attempt := 1; ; attempt++ {
		e, err := startEmbedded(ctx, c, logger)
		if err == nil || attempt == 5 || !(auto(c.ClientAddr) || auto(c.PeerAddr)) ||
			!(errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")) {
			return e, err
		}
	}
}

func startEmbedded(ctx context.Context, c EmbedConfig, logger *slog.Logger) (*Embedded, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("metastore: embedded etcd: %w", err)
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 60 * time.Second
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	clientAddr, err := resolveAddr(c.ClientAddr)
	if err != nil {
		return nil, fmt.Errorf("metastore: embedded etcd client address: %w", err)
	}
	peerAddr, err := resolveAddr(c.PeerAddr)
	if err != nil {
		return nil, fmt.Errorf("metastore: embedded etcd peer address: %w", err)
	}
	advClient, advPeer := clientAddr, peerAddr
	if c.AdvertiseClientAddr != "" {
		advClient = c.AdvertiseClientAddr
	}
	if c.AdvertisePeerAddr != "" {
		advPeer = c.AdvertisePeerAddr
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("metastore: embedded etcd dir: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = c.name()
	cfg.Dir = c.Dir
	cs, ps := c.clientScheme(), c.peerScheme()
	cfg.ListenClientUrls = []url.URL{{Scheme: cs, Host: clientAddr}}
	cfg.AdvertiseClientUrls = []url.URL{{Scheme: cs, Host: advClient}}
	cfg.ListenPeerUrls = []url.URL{{Scheme: ps, Host: peerAddr}}
	cfg.AdvertisePeerUrls = []url.URL{{Scheme: ps, Host: advPeer}}
	if t := c.ClientTLS; t.Enabled() {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustCertsFile, ClientCertAuth: t.RequireClientCert}
	}
	if t := c.PeerTLS; t.Enabled() {
		cfg.PeerTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustCertsFile, ClientCertAuth: true}
	}
	cfg.TlsMinVersion = "TLS1.2"
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if c.InitialCluster != "" {
		cfg.InitialCluster = c.InitialCluster
	}
	if c.ClusterState == "existing" {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	cfg.InitialClusterToken = "isobar"
	if c.ClusterToken != "" {
		cfg.InitialClusterToken = c.ClusterToken
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.AutoCompactionMode = embed.CompactorModeRevision
	cfg.AutoCompactionRetention = "10000"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("metastore: start embedded etcd in %s: %w", c.Dir, err)
	}
	t := time.NewTimer(c.StartTimeout)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("metastore: embedded etcd failed: %w", err)
	case <-t.C:
		e.Close()
		return nil, fmt.Errorf("metastore: embedded etcd %s not ready after %v (a cluster member waits for a quorum of its initial cluster)", cfg.Name, c.StartTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	logger.Info("embedded etcd ready", "name", cfg.Name, "dir", c.Dir, "client", cs+"://"+advClient, "peer", ps+"://"+advPeer)
	return &Embedded{etcd: e, clientAddr: advClient, scheme: cs, logger: logger}, nil
}

// Endpoints are the client URLs to pass to Connect (https:// with
// ClientTLS).
func (e *Embedded) Endpoints() []string { return []string{e.scheme + "://" + e.clientAddr} }

// ClientAddr is the host:port clients connect to.
func (e *Embedded) ClientAddr() string { return e.clientAddr }

// Err reports a fatal error of the running member (its channel receives
// at most once).
func (e *Embedded) Err() <-chan error { return e.etcd.Err() }

// Close stops the member.
func (e *Embedded) Close() {
	e.etcd.Close()
	e.logger.Info("embedded etcd stopped")
}

// resolveAddr turns "" or a port-0 address into a concrete free loopback address.
func resolveAddr(addr string) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if port != "0" {
		return addr, nil
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// HasLeader reports whether the member knows a cluster leader (it is
// part of a quorum).
func (e *Embedded) HasLeader() bool { return e.etcd.Server.Leader() != 0 }
