// Package region composes one Isobar region from its parts: the local
// metadata store (an embedded etcd server by default, or external
// endpoints), the bookie ensemble and, as they land, brokers and replicator
// workers; and the `dev` federation of several regions in one process. It is
// composition only: nothing below it imports it.
package region

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/globalconfig"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/natsembed"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/observability"
	"github.com/isobar-mq/isobar/replicator"
)

// Config describes one region.
type Config struct {
	// Name is the region name (lower-case letters, digits and dashes). Required.
	Name string `yaml:"name"`
	// DataDir holds the region's data (etcd, bookie journals and ledgers). Required.
	DataDir string `yaml:"dataDir"`
	// Host is the address components listen on; empty means 127.0.0.1.
	Host string `yaml:"host"`
	// MetastoreEndpoints, when set, use an external etcd instead of the embedded one.
	MetastoreEndpoints []string `yaml:"metastoreEndpoints"`
	// MetastorePort is the embedded etcd client port (its peer port is the next one); 0 picks free ports.
	MetastorePort int `yaml:"metastorePort"`
	// Bookies is how many bookies to run; zero means 3.
	Bookies int `yaml:"bookies"`
	// BookiePort is the first bookie's port, the others follow; 0 picks free ports.
	BookiePort int `yaml:"bookiePort"`
	// Bookie is the template for every bookie's config; directories and
	// addresses are filled in per bookie.
	Bookie bookie.Config `yaml:"bookie"`
	// Brokers is how many brokers to run; zero means 1, -1 none.
	Brokers int `yaml:"brokers"`
	// BrokerPort is the first broker's Pulsar protocol port, the others
	// follow; 0 picks free ports.
	BrokerPort int `yaml:"brokerPort"`
	// HTTPPort is the first broker's HTTP (admin, lookup) port, the others
	// follow; 0 picks free ports.
	HTTPPort int `yaml:"httpPort"`
	// Cluster is the cluster name of the region in the policy store;
	// empty means Name.
	Cluster string `yaml:"cluster"`
	// BrokerLeaseTTL is how long a dead broker keeps its bundles; zero
	// means the ownership registry's default.
	BrokerLeaseTTL time.Duration `yaml:"brokerLeaseTTL"`
	// Broker is the template for every broker's config; addresses, stores
	// and placement are filled in per broker.
	Broker broker.Config `yaml:"-"`

	// GlobalEndpoints are the global configuration store's etcd
	// endpoints. When set, clusters, tenants, namespaces and their
	// policies live there and the region reads them through a watched
	// cache (persisted under DataDir/globalconfig), so it keeps serving
	// while the global store is unreachable. Empty keeps them in the
	// region's own etcd (a single-region deployment).
	GlobalEndpoints []string `yaml:"globalEndpoints"`
	// NATS, when set, starts an embedded NATS server for replication; its
	// Region is filled in. NATSURL points at an external one instead.
	NATS    *natsembed.Config `yaml:"-"`
	NATSURL string            `yaml:"natsUrl"`
	// Replicators is how many replicator workers run when NATS is
	// configured; zero means 1, -1 none.
	Replicators int `yaml:"replicators"`
	// Replicator is the template for every replicator worker's config.
	Replicator replicator.Config `yaml:"-"`

	// Telemetry, when set, is used by every part of the region; nil makes
	// one for the region (metrics on each broker's HTTP port at /metrics,
	// OTLP when the OTEL_EXPORTER_OTLP_* variables say so).
	Telemetry *observability.Telemetry `yaml:"-"`
	// TelemetryOff disables metrics and traces (no-op providers).
	TelemetryOff bool `yaml:"telemetryOff"`
}

func (c Config) clusterName() string {
	if c.Cluster != "" {
		return c.Cluster
	}
	return c.Name
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidName reports whether s can name a region.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if !ValidName(c.Name) {
		errs = append(errs, fmt.Errorf("region.name: %q must be 1-63 lower-case letters, digits or dashes, not starting or ending with a dash", c.Name))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("region.dataDir: required"))
	}
	if c.Brokers < -1 || c.Brokers > 64 {
		errs = append(errs, fmt.Errorf("region.brokers: %d is not within -1..64", c.Brokers))
	}
	if c.Bookies < 0 || c.Bookies > 64 {
		errs = append(errs, fmt.Errorf("region.bookies: %d is not within 0..64", c.Bookies))
	}
	for name, p := range map[string]int{"metastorePort": c.MetastorePort, "bookiePort": c.BookiePort, "brokerPort": c.BrokerPort, "httpPort": c.HTTPPort} {
		if p < 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("region.%s: %d is not a port", name, p))
		}
	}
	return errors.Join(errs...)
}

// Region is a running region.
type Region struct {
	cfg     Config
	logger  *slog.Logger
	etcd    *metastore.Embedded
	meta    *metastore.Store
	bookies []*bookie.Server

	metaEndpoints []string
	ledgers       *ledger.Client
	policies      *policy.Store
	brokers       []*runningBroker

	globalMeta *metastore.Store
	global     *globalconfig.Cache
	nats       *natsembed.Server
	natsURL    string
	workers    []*runningWorker
	telemetry  *observability.Telemetry
	ownTel     bool // made here: shut down with the region
}

// Endpoints says where a region's parts listen.
type Endpoints struct {
	Name string `json:"name"`
	// ServiceURL, WebServiceURL and MetricsURL are the first broker's.
	ServiceURL    string            `json:"serviceUrl,omitempty"`
	WebServiceURL string            `json:"webServiceUrl,omitempty"`
	MetricsURL    string            `json:"metricsUrl,omitempty"`
	MetadataURL   string            `json:"metadataUrl"`
	NATSURL       string            `json:"natsUrl,omitempty"`
	Bookies       []string          `json:"bookies"`
	Brokers       []BrokerEndpoints `json:"brokers"`
}

// Start starts the region's parts in order and waits until each serves. On
// error everything already started is stopped.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (_ *Region, err error) {
	if cfg.Bookies == 0 {
		cfg.Bookies = 3
	}
	if cfg.Brokers == 0 {
		cfg.Brokers = 1
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("region", cfg.Name)
	r := &Region{cfg: cfg, logger: logger}
	defer func() {
		if err != nil {
			r.Shutdown(context.Background())
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("region %s: %w", cfg.Name, err)
	}
	r.telemetry = cfg.Telemetry
	if r.telemetry == nil {
		r.telemetry, err = observability.New(ctx, observability.Config{
			Region: cfg.Name, Component: "region", Instance: cfg.Name, Disabled: cfg.TelemetryOff, Logger: logger,
		})
		if err != nil {
			return nil, fmt.Errorf("region %s: %w", cfg.Name, err)
		}
		r.ownTel = true
	}
	endpoints := cfg.MetastoreEndpoints
	if len(endpoints) == 0 {
		ec := metastore.EmbedConfig{Dir: filepath.Join(cfg.DataDir, "etcd"), Name: cfg.Name, Logger: logger}
		if cfg.MetastorePort != 0 {
			ec.ClientAddr = net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.MetastorePort))
			ec.PeerAddr = net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.MetastorePort+1))
		}
		r.etcd, err = metastore.StartEmbedded(ctx, ec)
		if err != nil {
			return nil, fmt.Errorf("region %s: %w", cfg.Name, err)
		}
		endpoints = r.etcd.Endpoints()
	}
	r.metaEndpoints = endpoints
	r.meta, err = metastore.Connect(ctx, metastore.Config{Endpoints: endpoints, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("region %s: %w", cfg.Name, err)
	}
	if len(cfg.GlobalEndpoints) > 0 {
		if err := r.startGlobal(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.NATS != nil || cfg.NATSURL != "" {
		if err := r.startNATS(ctx); err != nil {
			return nil, err
		}
	}
	for i := 0; i < cfg.Bookies; i++ {
		bc := cfg.Bookie
		bc.Region = cfg.Name
		bc.MeterProvider = r.telemetry.MeterProvider()
		dir := filepath.Join(cfg.DataDir, fmt.Sprintf("bookie-%d", i))
		if bc.JournalDir == "" {
			bc.JournalDir = filepath.Join(dir, "journal")
		} else {
			bc.JournalDir = filepath.Join(bc.JournalDir, fmt.Sprintf("bookie-%d", i))
		}
		if bc.LedgerDir == "" {
			bc.LedgerDir = filepath.Join(dir, "ledgers")
		} else {
			bc.LedgerDir = filepath.Join(bc.LedgerDir, fmt.Sprintf("bookie-%d", i))
		}
		port := 0
		if cfg.BookiePort != 0 {
			port = cfg.BookiePort + i
		}
		bc.ListenAddr = net.JoinHostPort(cfg.Host, strconv.Itoa(port))
		if bc.Rack == "" {
			bc.Rack = fmt.Sprintf("rack-%d", i)
		}
		b, err := bookie.New(bc, r.meta, logger.With("bookie", i))
		if err != nil {
			return nil, fmt.Errorf("region %s: bookie %d: %w", cfg.Name, i, err)
		}
		r.bookies = append(r.bookies, b)
		if err := b.Start(ctx); err != nil {
			return nil, fmt.Errorf("region %s: bookie %d: %w", cfg.Name, i, err)
		}
	}
	if cfg.Brokers > 0 {
		if err := r.startBrokers(ctx); err != nil {
			return nil, err
		}
		if r.natsURL != "" && cfg.Replicators >= 0 {
			n := max(cfg.Replicators, 1)
			for i := range n {
				rw, err := r.startWorker(ctx, i)
				if err != nil {
					return nil, err
				}
				r.workers = append(r.workers, rw)
			}
		}
	}
	logger.Info("region started", "metadata", endpoints, "bookies", len(r.bookies), "brokers", len(r.brokers))
	return r, nil
}

// Name is the region's name.
func (r *Region) Name() string { return r.cfg.Name }

// Meta is the region's metadata store connection.
func (r *Region) Meta() *metastore.Store { return r.meta }

// Endpoints lists where the region's parts listen.
func (r *Region) Endpoints() Endpoints {
	e := Endpoints{Name: r.cfg.Name}
	if r.etcd != nil {
		e.MetadataURL = r.etcd.Endpoints()[0]
	} else if len(r.cfg.MetastoreEndpoints) > 0 {
		e.MetadataURL = r.cfg.MetastoreEndpoints[0]
	}
	for _, b := range r.bookies {
		e.Bookies = append(e.Bookies, b.Addr())
	}
	e.Brokers = r.Brokers()
	if len(e.Brokers) > 0 {
		e.ServiceURL, e.WebServiceURL = e.Brokers[0].ServiceURL, e.Brokers[0].WebServiceURL
		e.MetricsURL = e.WebServiceURL + "/metrics"
	}
	e.NATSURL = r.natsURL
	return e
}

// Shutdown stops the parts in reverse order.
func (r *Region) Shutdown(ctx context.Context) error {
	var errs []error
	r.stopWorkers()
	if err := r.stopBrokers(ctx); err != nil {
		errs = append(errs, err)
	}
	if r.nats != nil {
		r.nats.Shutdown()
	}
	if r.global != nil {
		r.global.Close()
	}
	if r.globalMeta != nil {
		r.globalMeta.Close()
	}
	for i := len(r.bookies) - 1; i >= 0; i-- {
		if err := r.bookies[i].Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("bookie %d: %w", i, err))
		}
	}
	if r.meta != nil {
		r.meta.Close()
	}
	if r.etcd != nil {
		r.etcd.Close()
	}
	if r.ownTel && r.telemetry != nil {
		r.telemetry.Shutdown(ctx)
	}
	r.logger.Info("region stopped")
	return errors.Join(errs...)
}
