package region

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/internal/natsembed"
	"github.com/isobar-mq/isobar/internal/secrets"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/roles"
	"github.com/isobar-mq/isobar/topic"
)

// FederationConfig describes several regions sharing one global
// configuration store and one NATS super-cluster, in one process (`isobar
// dev` and the federation tests). Each region is the same composition
// `isobar region` runs.
type FederationConfig struct {
	// Regions are the regions' configs. Their Global endpoints, NATS
	// ports and gateways are filled in; with BasePort set, so are their
	// indexes and port plans.
	Regions []Config
	// GlobalDir holds the embedded global store's data. Required.
	GlobalDir string
	// BasePort lays every port out by the port plan (ports.go); zero
	// picks free ports.
	BasePort int
	// Host is where everything listens; empty means 127.0.0.1.
	Host string
	// Namespaces ("tenant/namespace") replicate across every region, as
	// well as public/default.
	Namespaces []string
	// WAN, when set, runs every link between regions (NATS gateways) and
	// from each region to the global store through an emulated WAN
	// (Federation.WAN).
	WAN *WANConfig
	// Secrets, when set, secure every link (`isobar dev --secure`): the
	// global store serves mutual TLS with the federation CA, and each
	// region is started with them (Config.Secrets).
	Secrets *secrets.Files
}

// Federation is a running federation.
type Federation struct {
	cfg     FederationConfig
	deps    Deps
	global  *roles.Metastore
	gcfg    metastore.EmbedConfig
	Regions []*Region
	configs []Config // as started (ports and gateways filled in)
	wan     *WAN

	mu   sync.Mutex      // serializes KillRegion and StartRegion
	down map[string]bool // regions killed and not started again
}

// WAN returns the emulated network between the regions (nil unless
// FederationConfig.WAN was set).
func (f *Federation) WAN() *WAN { return f.wan }

// StartFederation starts the global store, then each region (each joins
// the replicated namespaces), and returns once the NATS gateways form a
// full mesh and every region sees every replicated namespace with every
// region in it.
func StartFederation(ctx context.Context, cfg FederationConfig, deps Deps) (*Federation, error) {
	f := NewFederation(cfg, deps)
	if err := f.Start(ctx); err != nil {
		return nil, err
	}
	return f, nil
}

// NewFederation returns the federation cfg describes (a
// lifecycle.Component).
func NewFederation(cfg FederationConfig, deps Deps) *Federation {
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	// No telemetry given: each region makes its own, as a process would.
	return &Federation{cfg: cfg, deps: deps}
}

// Name implements lifecycle.Component.
func (f *Federation) Name() string { return "federation" }

// Ready implements lifecycle.Checker: every region is.
func (f *Federation) Ready(ctx context.Context) error {
	if f.global == nil || f.global.Ready(ctx) != nil {
		return errors.New("global store not ready")
	}
	for _, r := range f.Regions {
		if err := r.Ready(ctx); err != nil {
			return fmt.Errorf("region %s: %w", r.Name(), err)
		}
	}
	return nil
}

// Abort implements lifecycle.Component.
func (f *Federation) Abort() {
	for i := len(f.Regions) - 1; i >= 0; i-- {
		f.Regions[i].Abort()
	}
	if f.global != nil {
		f.global.Abort()
	}
	f.wan.close()
}

// Start implements lifecycle.Component; see StartFederation.
func (f *Federation) Start(ctx context.Context) (err error) {
	cfg := f.cfg
	if len(cfg.Regions) == 0 {
		return errors.New("federation: no regions")
	}
	if cfg.GlobalDir == "" {
		return errors.New("federation.globalDir: required")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.BasePort != 0 {
		if err := CheckPlan(cfg.BasePort, len(cfg.Regions)); err != nil {
			return fmt.Errorf("federation: %w", err)
		}
	}
	deps := f.deps
	defer func() {
		if err != nil {
			f.Shutdown(context.Background())
		}
	}()
	client, peer := GlobalPorts(cfg.BasePort)
	if cfg.BasePort == 0 {
		if client, err = freePort(cfg.Host); err != nil {
			return err
		}
		if peer, err = freePort(cfg.Host); err != nil {
			return err
		}
	}
	f.gcfg = metastore.EmbedConfig{
		Name: "global", Dir: cfg.GlobalDir,
		ClientAddr: net.JoinHostPort(cfg.Host, strconv.Itoa(client)),
		PeerAddr:   net.JoinHostPort(cfg.Host, strconv.Itoa(peer)),
	}
	if cfg.Secrets != nil {
		f.gcfg.ClientTLS = GlobalServer(*cfg.Secrets)
	}
	f.global = roles.NewMetastore(f.gcfg, deps.Logger.With("component", "global-store"))
	if err := f.global.Start(ctx); err != nil {
		return fmt.Errorf("federation: global store: %w", err)
	}
	namespaces := append([]string{topic.DefaultTenant + "/" + topic.DefaultNamespace}, cfg.Namespaces...)
	var names []string
	for _, rc := range cfg.Regions {
		names = append(names, rc.Name)
	}
	// Every region's NATS ports are fixed before any starts, so every
	// server lists every other's gateway and a restarted region rejoins
	// the mesh by itself.
	gateways := map[string]string{}
	if cfg.WAN != nil {
		f.wan = newWAN()
	}
	for i := range cfg.Regions {
		rc := &cfg.Regions[i]
		rc.Global.Endpoints = f.global.Endpoints()
		rc.Secrets = cfg.Secrets
		if f.wan != nil {
			addr, err := f.wan.add(cfg.Host, rc.clusterName(), GlobalStore, f.gcfg.ClientAddr, cfg.WAN.Latency)
			if err != nil {
				return fmt.Errorf("federation: %w", err)
			}
			scheme, _, _ := strings.Cut(rc.Global.Endpoints[0], "://")
			rc.Global.Endpoints = []string{scheme + "://" + addr}
		}
		rc.ReplicatedNamespaces = append(rc.ReplicatedNamespaces, namespaces...)
		if rc.Host == "" {
			rc.Host = cfg.Host
		}
		if cfg.BasePort != 0 {
			rc.BasePort, rc.Index, rc.Regions = cfg.BasePort, i, names
		}
		if rc.NATS.Port == 0 {
			if rc.NATS.Port, err = natsPort(*rc, PlanPorts(cfg.BasePort, i).NATS); err != nil {
				return err
			}
		}
		if rc.NATS.GatewayPort == 0 {
			if rc.NATS.GatewayPort, err = natsPort(*rc, PlanPorts(cfg.BasePort, i).NATSGateway); err != nil {
				return err
			}
		}
		gateways[rc.clusterName()] = net.JoinHostPort(rc.Host, strconv.Itoa(rc.NATS.GatewayPort))
	}
	var servers []*natsembed.Server
	wanSecret := rand.Text() // the gateways' password behind the WAN (below)
	for i, rc := range cfg.Regions {
		if len(rc.NATS.Gateways) == 0 {
			rc.NATS.Gateways = map[string]string{}
			for name, addr := range gateways {
				if name == rc.clusterName() {
					continue
				}
				if f.wan != nil {
					if addr, err = f.wan.add(cfg.Host, rc.clusterName(), name, addr, cfg.WAN.Latency); err != nil {
						return fmt.Errorf("federation: %w", err)
					}
				}
				u := url.URL{Scheme: "nats", Host: addr}
				if f.wan != nil {
					u.User = url.UserPassword(name, wanSecret)
				}
				rc.NATS.Gateways[name] = u.String()
			}
			if f.wan != nil {
				rc.NATS.GatewayAdvertise = unadvertised
				// Credentials of its own: a URL another region gossips
				// (its link to the same region) carries none and is
				// refused, so this region reaches the others only through
				// its own links (natsembed.Config.GatewayUser).
				rc.NATS.GatewayUser, rc.NATS.GatewayPassword = rc.clusterName(), wanSecret
			}
		}
		r, err := Start(ctx, rc, deps)
		if err != nil {
			return fmt.Errorf("federation: region %d: %w", i, err)
		}
		f.Regions = append(f.Regions, r)
		f.configs = append(f.configs, rc)
		if r.nats != nil {
			servers = append(servers, r.nats.Server())
		}
	}
	if len(servers) > 1 {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := natsembed.WaitGateways(wctx, servers...)
		cancel()
		if err != nil {
			return fmt.Errorf("federation: nats gateways: %w", err)
		}
	}
	var clusters []string
	for _, rc := range f.configs {
		clusters = append(clusters, rc.clusterName())
	}
	for _, ns := range namespaces {
		if err := f.waitReplicated(ctx, ns, clusters); err != nil {
			return err
		}
	}
	return nil
}

func natsPort(rc Config, planned int) (int, error) {
	if rc.BasePort != 0 {
		return planned, nil
	}
	return freePort(rc.Host)
}

// waitReplicated waits until every region sees namespace ns replicated to
// at least clusters.
func (f *Federation) waitReplicated(ctx context.Context, ns string, clusters []string) error {
	for _, r := range f.Regions {
		for {
			p, err := r.Policies().Namespace(ctx, ns)
			if err == nil && containsAll(p.ReplicationClusters, clusters) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("federation: region %s does not see namespace %s replicated to %v: %w", r.Name(), ns, clusters, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// region returns the index of the region named name.
func (f *Federation) region(name string) (int, error) {
	for i, r := range f.Regions {
		if r.Name() == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("federation: no region %q", name)
}

// KillRegion stops region name as a crash of all its processes would
// (nothing drains; its data stays on disk): for failover drills.
func (f *Federation) KillRegion(name string) error {
	i, err := f.region(name)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[name] {
		return fmt.Errorf("federation: region %s is down already", name)
	}
	f.Regions[i].Abort()
	if f.down == nil {
		f.down = map[string]bool{}
	}
	f.down[name] = true
	return nil
}

// StartRegion starts region name again on its data and configuration
// after KillRegion (or a Shutdown of that region).
func (f *Federation) StartRegion(ctx context.Context, name string) error {
	i, err := f.region(name)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := Start(ctx, f.configs[i], f.deps)
	if err != nil {
		return fmt.Errorf("federation: restart region %s: %w", name, err)
	}
	f.Regions[i] = r
	delete(f.down, name)
	return nil
}

// Down reports whether region name was killed and not started again.
func (f *Federation) Down(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down[name]
}

// GlobalEndpoints are the global store's client URLs.
func (f *Federation) GlobalEndpoints() []string {
	if f.gcfg.ClientTLS.Enabled() {
		return []string{"https://" + f.gcfg.ClientAddr}
	}
	return []string{"http://" + f.gcfg.ClientAddr}
}

// Shutdown stops the regions, then the global store.
func (f *Federation) Shutdown(ctx context.Context) error {
	var errs []error
	for i := len(f.Regions) - 1; i >= 0; i-- {
		if f.Regions[i] == nil {
			continue
		}
		if err := f.Regions[i].Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if f.global != nil {
		f.global.Shutdown(ctx)
	}
	if err := f.wan.close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
