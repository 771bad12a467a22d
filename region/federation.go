package region

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/natsembed"
	"github.com/isobar-mq/isobar/metastore"
)

// FederationConfig describes several regions sharing one global
// configuration store and one NATS super-cluster, in one process (the
// `dev` federation and the federation tests).
type FederationConfig struct {
	// Regions are the regions' configs. GlobalEndpoints is filled in; a
	// nil NATS gets an embedded server with free ports; the gateways are
	// filled in.
	Regions []Config
	// GlobalDir holds the embedded global store's data. Required.
	GlobalDir string
	// GlobalPort is the global store's client port (peer port + 1); 0
	// picks free ports.
	GlobalPort int
	// Host is where the global store listens; empty means 127.0.0.1.
	Host string
	// Tenant and Namespace name a namespace created (if missing)
	// replicated across every region; an empty Namespace creates none.
	Tenant, Namespace string
}

// Federation is a running federation.
type Federation struct {
	cfg        FederationConfig
	logger     *slog.Logger
	global     *metastore.Embedded
	globalAddr [2]string // client, peer
	Regions    []*Region
	configs    []Config // as started (gateways and NATS ports filled in)
}

// StartFederation starts the global store, then each region with its NATS
// server joined to the previous regions' gateways, waits for the gateway
// mesh, and creates the replicated namespace.
func StartFederation(ctx context.Context, cfg FederationConfig, logger *slog.Logger) (_ *Federation, err error) {
	if len(cfg.Regions) == 0 {
		return nil, errors.New("federation: no regions")
	}
	if cfg.GlobalDir == "" {
		return nil, errors.New("federation.globalDir: required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	f := &Federation{cfg: cfg, logger: logger}
	defer func() {
		if err != nil {
			f.Shutdown(context.Background())
		}
	}()
	client, peer := cfg.GlobalPort, cfg.GlobalPort+1
	if cfg.GlobalPort == 0 {
		if client, err = freePort(cfg.Host); err != nil {
			return nil, err
		}
		if peer, err = freePort(cfg.Host); err != nil {
			return nil, err
		}
	}
	f.globalAddr = [2]string{net.JoinHostPort(cfg.Host, strconv.Itoa(client)), net.JoinHostPort(cfg.Host, strconv.Itoa(peer))}
	if err := f.StartGlobal(ctx); err != nil {
		return nil, err
	}
	var clusters []string
	var servers []*natsembed.Server
	for i, rc := range cfg.Regions {
		rc.GlobalEndpoints = f.global.Endpoints()
		nc := natsembed.Config{}
		if rc.NATS != nil {
			nc = *rc.NATS
		}
		if nc.Gateways == nil {
			nc.Gateways = map[string]string{}
		}
		for _, prev := range f.Regions {
			if _, ok := nc.Gateways[prev.Name()]; !ok && prev.NATS() != nil {
				nc.Gateways[prev.Name()] = prev.NATS().GatewayURL()
			}
		}
		rc.NATS = &nc
		r, err := Start(ctx, rc, logger)
		if err != nil {
			return nil, fmt.Errorf("federation: region %d: %w", i, err)
		}
		f.Regions = append(f.Regions, r)
		// A restart comes back on the same NATS ports.
		nc.Port, nc.GatewayPort = portOf(r.NATS().ClientURL()), portOf(r.NATS().GatewayURL())
		f.configs = append(f.configs, rc)
		servers = append(servers, r.NATS())
		clusters = append(clusters, rc.clusterName())
	}
	if len(servers) > 1 {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := natsembed.WaitGateways(wctx, servers...)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("federation: nats gateways: %w", err)
		}
	}
	// public/default, where Pulsar clients go by default, is replicated
	// everywhere too.
	if err := f.EnsureReplicated(ctx, "public", "default", clusters); err != nil {
		return nil, err
	}
	if cfg.Namespace != "" {
		if err := f.EnsureReplicated(ctx, cfg.Tenant, cfg.Namespace, clusters); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// EnsureReplicated creates tenant (allowing clusters) and namespace
// tenant/ns replicated to clusters, unless they exist.
func (f *Federation) EnsureReplicated(ctx context.Context, tenant, ns string, clusters []string) error {
	pol := f.Regions[0].Policies()
	err := pol.CreateTenant(ctx, tenant, policy.TenantInfo{AdminRoles: []string{}, AllowedClusters: clusters})
	if err != nil && !errors.Is(err, policy.ErrExists) {
		return fmt.Errorf("federation: tenant %s: %w", tenant, err)
	}
	err = pol.CreateNamespace(ctx, tenant+"/"+ns, &policy.Policies{ReplicationClusters: clusters})
	if err != nil && !errors.Is(err, policy.ErrExists) {
		return fmt.Errorf("federation: namespace %s/%s: %w", tenant, ns, err)
	}
	// Every region sees it before we return.
	for _, r := range f.Regions {
		for {
			if _, err := r.Policies().Namespace(ctx, tenant+"/"+ns); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// StopRegion shuts region i down (for tests of a region restart).
func (f *Federation) StopRegion(ctx context.Context, i int) error {
	return f.Regions[i].Shutdown(ctx)
}

// StartRegion starts region i again on its data and config. Its ports
// must have been fixed in its config (etcd, bookies, brokers: bookies are
// known to their ledgers by address); NATS comes back on its ports.
func (f *Federation) StartRegion(ctx context.Context, i int) error {
	r, err := Start(ctx, f.configs[i], f.logger)
	if err != nil {
		return err
	}
	f.Regions[i] = r
	return nil
}

// GlobalEndpoints are the global store's client URLs.
func (f *Federation) GlobalEndpoints() []string { return f.global.Endpoints() }

// StopGlobal stops the global store (for fault tests); the regions keep
// serving from their caches.
func (f *Federation) StopGlobal() {
	if f.global != nil {
		f.global.Close()
		f.global = nil
	}
}

// StartGlobal starts the global store (again) on its directory and ports.
func (f *Federation) StartGlobal(ctx context.Context) error {
	g, err := metastore.StartEmbedded(ctx, metastore.EmbedConfig{
		Dir: filepath.Join(f.cfg.GlobalDir), Name: "global",
		ClientAddr: f.globalAddr[0], PeerAddr: f.globalAddr[1],
		Logger: f.logger.With("component", "global-store"),
	})
	if err != nil {
		return fmt.Errorf("federation: global store: %w", err)
	}
	f.global = g
	return nil
}

// Shutdown stops the regions, then the global store.
func (f *Federation) Shutdown(ctx context.Context) error {
	var errs []error
	for i := len(f.Regions) - 1; i >= 0; i-- {
		if err := f.Regions[i].Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	f.StopGlobal()
	return errors.Join(errs...)
}

func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
