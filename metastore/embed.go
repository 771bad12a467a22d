package metastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// EmbedConfig configures an embedded single-member etcd server.
type EmbedConfig struct {
	// Dir holds the etcd data. Required.
	Dir string
	// Name is the member name; empty means "isobar".
	Name string
	// ClientAddr is host:port for clients; empty or port 0 picks a free loopback port.
	ClientAddr string
	// PeerAddr is host:port for peers; empty or port 0 picks a free loopback port.
	PeerAddr string
	// StartTimeout bounds the wait for the server to be ready; zero means 60s.
	StartTimeout time.Duration
	// Logger receives lifecycle messages; nil discards them.
	Logger *slog.Logger
}

// Embedded is a running embedded etcd server.
type Embedded struct {
	etcd       *embed.Etcd
	clientAddr string
	logger     *slog.Logger
}

// StartEmbedded starts an etcd server in this process and waits until it
// serves. Restarting on the same Dir keeps all data.
func StartEmbedded(ctx context.Context, c EmbedConfig) (*Embedded, error) {
	if c.Dir == "" {
		return nil, errors.New("metastore: embedded etcd: dir is required")
	}
	if c.Name == "" {
		c.Name = "isobar"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 60 * time.Second
	}
	logger := c.Logger
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
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("metastore: embedded etcd dir: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = c.Dir
	cu := url.URL{Scheme: "http", Host: clientAddr}
	pu := url.URL{Scheme: "http", Host: peerAddr}
	cfg.ListenClientUrls = []url.URL{cu}
	cfg.AdvertiseClientUrls = []url.URL{cu}
	cfg.ListenPeerUrls = []url.URL{pu}
	cfg.AdvertisePeerUrls = []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
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
		return nil, fmt.Errorf("metastore: embedded etcd not ready after %v", c.StartTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	logger.Info("embedded etcd ready", "dir", c.Dir, "client", cu.String())
	return &Embedded{etcd: e, clientAddr: clientAddr, logger: logger}, nil
}

// Endpoints are the client URLs to pass to Connect.
func (e *Embedded) Endpoints() []string { return []string{"http://" + e.clientAddr} }

// ClientAddr is the host:port clients connect to.
func (e *Embedded) ClientAddr() string { return e.clientAddr }

// Close stops the server.
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
