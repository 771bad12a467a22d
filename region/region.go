// Package region composes Isobar's roles (package roles: metadata store
// member, bookie, broker, replicator worker, NATS server) into whole
// regions: the configuration file shape they share, the port plan, one
// region of every role in one process (`isobar region`, `isobar
// standalone`) and the development federation of several regions in one
// process with its WAN (`isobar dev`). It is composition only: nothing
// below it imports it, and the compositions use the same components a
// deployment of one process per role runs.
package region

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/internal/natsembed"
	"github.com/isobar-mq/isobar/internal/secrets"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/observability"
	"github.com/isobar-mq/isobar/roles"
)

// Config describes one region run in one process. Its own keys are the
// `region` section of the configuration file; the role templates
// (Metastore, Global, Bookie, Broker, Replicator, NATS) are the file's
// role sections, copied in by File.RegionConfig. It holds plain settings
// only.
type Config struct {
	// Name is the region name (lower-case letters, digits and dashes). Required.
	Name string `yaml:"name"`
	// Cluster is the region's cluster name in the configuration store;
	// empty means Name.
	Cluster string `yaml:"cluster"`
	// DataDir holds the region's data (etcd, bookie journals and ledgers,
	// the components' copies of the global configuration). Required.
	DataDir string `yaml:"dataDir"`
	// Host is the address every part listens on and advertises; empty
	// means 127.0.0.1.
	Host string `yaml:"host"`
	// BasePort and Index place every port by the port plan (ports.go):
	// this region is region Index of a federation laid out from BasePort.
	// Zero BasePort picks free ports, unless the explicit ports below say
	// otherwise.
	BasePort int `yaml:"basePort"`
	Index    int `yaml:"index"`
	// Regions names the federation's regions in port-plan order; with
	// BasePort set, this region's NATS server joins the others' gateways
	// at their planned ports.
	Regions []string `yaml:"regions"`
	// Bookies is how many bookies to run; zero means 3.
	Bookies int `yaml:"bookies"`
	// Brokers is how many brokers to run; zero means 1, -1 none.
	Brokers int `yaml:"brokers"`
	// Replicators is how many replicator workers run in a federation
	// (Global endpoints set); zero means 1, -1 none.
	Replicators int `yaml:"replicators"`
	// NATSURL points the replicators at an external NATS server instead
	// of the region's embedded one.
	NATSURL string `yaml:"natsUrl"`
	// ReplicatedNamespaces ("tenant/namespace") are created if missing,
	// and this region's cluster is added to their tenant's allowed
	// clusters and to their replication clusters: how a region joins a
	// federation's shared namespaces.
	ReplicatedNamespaces []string `yaml:"replicatedNamespaces"`
	// HTTPAddr is an extra address for /healthz, /readyz and /metrics
	// (they are on every broker's HTTP port as well); empty serves none.
	HTTPAddr string `yaml:"httpAddr"`

	// Explicit ports (for `isobar standalone` and tests); each overrides
	// the plan. Zero: the plan, or a free port.
	MetastorePort int `yaml:"-"`
	BookiePort    int `yaml:"-"`
	BrokerPort    int `yaml:"-"`
	HTTPPort      int `yaml:"-"`
	BrokerTLSPort int `yaml:"-"` // brokers that serve TLS
	HTTPSPort     int `yaml:"-"`

	// The role templates, from the file's sections.
	Metastore  metastore.Config       `yaml:"-"` // endpoints: an external etcd instead of the embedded member
	Global     metastore.Config       `yaml:"-"` // endpoints: the federation's global store
	Bookie     bookie.Config          `yaml:"-"` // directories and addresses are filled in per bookie
	Broker     roles.BrokerConfig     `yaml:"-"` // names, addresses and data directories are filled in
	Replicator roles.ReplicatorConfig `yaml:"-"`
	NATS       natsembed.Config       `yaml:"-"` // region, ports and gateways are filled in when empty
	// Etcd is the embedded member's template: its clientTls and peerTls
	// (the file's etcd section).
	Etcd metastore.EmbedConfig `yaml:"-"`
	// TelemetryOff disables metrics and traces.
	TelemetryOff bool `yaml:"-"`
	// Secrets, when set, secure every link of the region with the
	// federation's secrets (made by package secrets; `--secure`): mutual
	// TLS inside the region with its own CA, toward the other regions
	// with the federation CA, brokers TLS only with tokens. They override
	// the role templates' TLS and auth settings.
	Secrets *secrets.Files `yaml:"-"`
}

func (c Config) clusterName() string {
	if c.Cluster != "" {
		return c.Cluster
	}
	return c.Name
}

func (c Config) withDefaults() Config {
	if c.Bookies == 0 {
		c.Bookies = 3
	}
	if c.Brokers == 0 {
		c.Brokers = 1
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	return c
}

// federated reports whether the region is part of a federation.
func (c Config) federated() bool { return len(c.Global.Endpoints) > 0 }

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if !roles.ValidName(c.Name) {
		errs = append(errs, fmt.Errorf("region.name: %q must be 1-63 lower-case letters, digits or dashes, not starting or ending with a dash", c.Name))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("region.dataDir: required"))
	}
	if c.Brokers < -1 || c.Brokers > MaxBrokers {
		errs = append(errs, fmt.Errorf("region.brokers: %d is not within -1..%d", c.Brokers, MaxBrokers))
	}
	if c.Bookies < 0 || c.Bookies > MaxBookies {
		errs = append(errs, fmt.Errorf("region.bookies: %d is not within 0..%d", c.Bookies, MaxBookies))
	}
	if c.Replicators < -1 || c.Replicators > 16 {
		errs = append(errs, fmt.Errorf("region.replicators: %d is not within -1..16", c.Replicators))
	}
	if c.BasePort != 0 {
		if err := CheckPlan(c.BasePort, c.Index+1); err != nil {
			errs = append(errs, fmt.Errorf("region.basePort: %w", err))
		}
	}
	if c.Index < 0 {
		errs = append(errs, fmt.Errorf("region.index: %d is negative", c.Index))
	}
	if len(c.Regions) > 0 && (c.Index >= len(c.Regions) || c.Regions[c.Index] != c.Name) {
		errs = append(errs, fmt.Errorf("region.regions: %v must name this region (%q) at its index %d", c.Regions, c.Name, c.Index))
	}
	for _, r := range c.Regions {
		if !roles.ValidName(r) {
			errs = append(errs, fmt.Errorf("region.regions: %q is not a region name", r))
		}
	}
	for _, ns := range c.ReplicatedNamespaces {
		if t, n, ok := strings.Cut(ns, "/"); !ok || t == "" || n == "" || strings.Contains(n, "/") {
			errs = append(errs, fmt.Errorf("region.replicatedNamespaces: %q is not tenant/namespace", ns))
		}
	}
	if c.Secrets != nil {
		if _, ok := c.Secrets.Regions[c.Name]; !ok {
			errs = append(errs, fmt.Errorf("region.secrets: none for region %q", c.Name))
		}
	}
	if len(c.ReplicatedNamespaces) > 0 && !c.federated() {
		errs = append(errs, errors.New("region.replicatedNamespaces: need a global configuration store (global.endpoints)"))
	}
	for name, p := range map[string]int{"metastorePort": c.MetastorePort, "bookiePort": c.BookiePort, "brokerPort": c.BrokerPort, "httpPort": c.HTTPPort,
		"brokerTlsPort": c.BrokerTLSPort, "httpsPort": c.HTTPSPort} {
		if p < 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("region.%s: %d is not a port", name, p))
		}
	}
	// Each broker takes its port plus its index: the ranges must not meet.
	ranges := [][2]any{{"brokerPort", c.BrokerPort}, {"httpPort", c.HTTPPort}}
	if c.Secrets != nil || c.Broker.TLS.Enabled() {
		ranges = append(ranges, [2]any{"brokerTlsPort", c.BrokerTLSPort}, [2]any{"httpsPort", c.HTTPSPort})
	}
	n := max(c.Brokers, 1)
	for i, a := range ranges {
		for _, b := range ranges[i+1:] {
			pa, pb := a[1].(int), b[1].(int)
			if pa != 0 && pb != 0 && pa < pb+n && pb < pa+n {
				errs = append(errs, fmt.Errorf("region.%s %d and %s %d: %d brokers would share ports", a[0], pa, b[0], pb, n))
			}
		}
	}
	errs = append(errs, c.templateProblems()...)
	return errors.Join(errs...)
}

// templateProblems checks the role sections the region's parts are made
// from (bookie, broker, replicator, etcd, metastore), under the file's
// keys, before anything starts: each as the region fills it in, with
// placeholders for the names, addresses and directories it sets itself,
// so that only the file's own settings are judged. Rules between
// sections are checked here too: new ledgers need at least
// broker.ledger.ensembleSize bookies.
func (c Config) templateProblems() []error {
	var errs []error
	name := c.Name
	if !roles.ValidName(name) {
		name = "placeholder" // reported as region.name
	}
	bc := c.Bookie
	bc.Region, bc.ListenAddr, bc.AdvertiseAddr = name, "127.0.0.1:0", ""
	if bc.JournalDir == "" {
		bc.JournalDir = "placeholder"
	}
	if bc.LedgerDir == "" {
		bc.LedgerDir = "placeholder"
	}
	errs = append(errs, split(bc.Validate())...)
	if c.Brokers >= 0 {
		br := c.Broker
		br.Region, br.Cluster, br.Name = name, "", ""
		br.ListenAddr, br.HTTPListenAddr, br.TLSListenAddr, br.HTTPSListenAddr = "", "", "", ""
		br.ServiceURL, br.HTTPURL, br.ServiceURLTLS, br.HTTPURLTLS = "", "", "", ""
		errs = append(errs, split(br.Validate())...)
		bookies := c.Bookies
		if bookies == 0 {
			bookies = 3
		}
		if e := br.Ledger.WithDefaults().EnsembleSize; e > bookies && br.Ledger.EnsembleSize >= 0 {
			what := fmt.Sprintf("broker.ledger.ensembleSize: %d", e)
			if br.Ledger.EnsembleSize == 0 {
				what += " (the default)"
			}
			errs = append(errs, fmt.Errorf("%s exceeds region.bookies: %d: every new ledger needs that many bookies; run more bookies (region.bookies, --bookies) or make new ledgers smaller (broker.ledger.ensembleSize, writeQuorum, ackQuorum)", what, bookies))
		}
	}
	if c.federated() && c.Replicators >= 0 {
		rc := c.Replicator
		rc.Region, rc.ID, rc.DataDir = name, "", ""
		rc.NATSURL, rc.ServiceURL = "nats://placeholder:4222", "pulsar://placeholder:6650"
		errs = append(errs, split(rc.Validate())...)
	}
	if len(c.Metastore.Endpoints) > 0 {
		errs = append(errs, split(c.Metastore.Validate())...)
	}
	return errs
}

// split returns the problems err joins (errors.Join), each on its own,
// so that every one is listed once.
func split(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, split(e)...)
		}
		return out
	}
	return []error{err}
}

// Endpoints says where a region's parts listen.
type Endpoints struct {
	Name string `json:"name"`
	// ServiceURL, WebServiceURL and MetricsURL are the first broker's,
	// and so are the TLS URLs when the brokers serve TLS.
	ServiceURL       string                  `json:"serviceUrl,omitempty"`
	WebServiceURL    string                  `json:"webServiceUrl,omitempty"`
	ServiceURLTLS    string                  `json:"serviceUrlTls,omitempty"`
	WebServiceURLTLS string                  `json:"webServiceUrlTls,omitempty"`
	MetricsURL       string                  `json:"metricsUrl,omitempty"`
	MetadataURL      string                  `json:"metadataUrl"`
	NATSURL          string                  `json:"natsUrl,omitempty"`
	Bookies          []string                `json:"bookies"`
	Brokers          []roles.BrokerEndpoints `json:"brokers"`
}

// Deps are what every component of a process shares: its logger, its
// telemetry (one registry per process) and its health endpoints.
type Deps struct {
	// Logger; nil discards.
	Logger *slog.Logger
	// Telemetry provides metrics and traces; nil means the region makes
	// its own.
	Telemetry *observability.Telemetry
	// Health is the process's /healthz, /readyz and /metrics, served on
	// every broker's HTTP port as well; nil serves the broker's own
	// readiness and the telemetry's metrics there.
	Health *lifecycle.Health
	// SpanExporters receive the spans of telemetry a region makes for
	// itself (when Telemetry is nil); tests pass an in-memory exporter.
	SpanExporters []sdktrace.SpanExporter
}

// roles are the dependencies the region hands its roles.
func (d Deps) roles() roles.Deps {
	return roles.Deps{Logger: d.Logger, Telemetry: d.Telemetry, Health: d.Health}
}

// Region is every role of one region in one process: an embedded etcd
// member (unless external endpoints are given), a NATS server (in a
// federation), the bookies, the brokers and the replicator workers, each
// the same component a process of its own runs, started in that order
// and stopped in reverse. It is a lifecycle.Component.
type Region struct {
	cfg    Config
	deps   Deps
	ownTel bool // the telemetry was made here

	group   *lifecycle.Group
	etcd    *roles.Metastore
	nats    *roles.NATS
	bookies []*roles.Bookie
	brokers []*roles.Broker
	workers []*roles.Replicator
	meta    metastore.Config // how the parts reach the region's etcd
	natsURL string
}

// Start builds region cfg and starts it: New plus Start.
func Start(ctx context.Context, cfg Config, deps Deps) (*Region, error) {
	r, err := New(cfg, deps)
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// New builds the region's components from cfg, resolving every port it
// will use (free ports are picked now).
func New(cfg Config, deps Deps) (*Region, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	deps.Logger = deps.Logger.With("region", cfg.Name)
	r := &Region{cfg: cfg}
	if deps.Telemetry == nil {
		tel, err := observability.New(context.Background(), observability.Config{
			Region: cfg.Name, Component: "region", Instance: cfg.Name, Disabled: cfg.TelemetryOff, Logger: deps.Logger,
			SpanExporters: deps.SpanExporters,
		})
		if err != nil {
			return nil, fmt.Errorf("region %s: %w", cfg.Name, err)
		}
		deps.Telemetry, r.ownTel = tel, true
	}
	r.deps = deps
	if err := r.build(); err != nil {
		if r.ownTel {
			deps.Telemetry.Shutdown(context.Background())
		}
		return nil, fmt.Errorf("region %s: %w", cfg.Name, err)
	}
	return r, nil
}

// port returns explicit, else the plan's planned+offset, else a free port.
func (r *Region) port(explicit, planned, offset int) (int, error) {
	switch {
	case explicit != 0:
		return explicit + offset, nil
	case r.cfg.BasePort != 0:
		return planned + offset, nil
	}
	return freePort(r.cfg.Host)
}

func (r *Region) addr(p int) string { return net.JoinHostPort(r.cfg.Host, strconv.Itoa(p)) }

// build makes the components.
func (r *Region) build() error {
	cfg, logger := r.cfg, r.deps.Logger
	plan := PlanPorts(cfg.BasePort, cfg.Index)
	r.group = lifecycle.NewGroup("region " + cfg.Name)
	r.meta = cfg.Metastore
	sec := newSecure(cfg)
	// metaFor and globalFor are how a component of kind reaches the
	// region's metadata store and the global store.
	metaFor := func(kind string) metastore.Config {
		m := r.meta
		if sec != nil {
			m.TLS = sec.client(kind)
		}
		return m
	}
	globalFor := func() metastore.Config {
		if sec != nil && cfg.federated() {
			return sec.global(cfg.Global)
		}
		return cfg.Global
	}
	if len(r.meta.Endpoints) == 0 {
		client, err := r.port(cfg.MetastorePort, plan.Metastore, 0)
		if err != nil {
			return err
		}
		peer, err := r.port(cfg.MetastorePort, plan.Metastore, 1)
		if err != nil {
			return err
		}
		ec := metastore.EmbedConfig{
			Name: cfg.Name, Dir: filepath.Join(cfg.DataDir, "etcd"),
			ClientAddr: r.addr(client), PeerAddr: r.addr(peer),
			ClientTLS: cfg.Etcd.ClientTLS, PeerTLS: cfg.Etcd.PeerTLS,
		}
		if sec != nil {
			ec.ClientTLS, ec.PeerTLS = sec.server("etcd"), sec.server("etcd")
		}
		r.etcd = roles.NewMetastore(ec, logger.With("component", "etcd"))
		r.meta.Endpoints = []string{"http://" + r.addr(client)}
		if ec.ClientTLS.Enabled() {
			r.meta.Endpoints = []string{"https://" + r.addr(client)}
			if !r.meta.TLS.Enabled() {
				r.meta.TLS.Enable = true
			}
		}
		r.group.Add(r.etcd)
	}
	if cfg.federated() {
		if err := r.buildNATS(plan); err != nil {
			return err
		}
	}
	for i := 0; i < cfg.Bookies; i++ {
		bc := cfg.Bookie
		bc.Region = cfg.Name
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
		p := 0
		if cfg.BookiePort != 0 || cfg.BasePort != 0 {
			p, _ = r.port(cfg.BookiePort, plan.Bookie, i)
		}
		bc.ListenAddr = r.addr(p) // port 0: a free port at start
		bc.AdvertiseAddr = ""
		if bc.Rack == "" {
			bc.Rack = fmt.Sprintf("rack-%d", i)
		}
		if sec != nil {
			bc.TLS = sec.server("bookie")
		}
		b := roles.NewBookie(bc, metaFor("bookie"), logger.With("bookie", i), r.deps.Telemetry.MeterProvider())
		b.SetLabel(fmt.Sprintf("bookie %d", i))
		r.bookies = append(r.bookies, b)
		r.group.Add(b)
	}
	if cfg.Brokers < 0 {
		return nil
	}
	var eps []roles.BrokerEndpoints
	for i := 0; i < cfg.Brokers; i++ {
		bp, err := r.port(cfg.BrokerPort, plan.Broker, i)
		if err != nil {
			return err
		}
		hp, err := r.port(cfg.HTTPPort, plan.HTTP, i)
		if err != nil {
			return err
		}
		bc := cfg.Broker
		bc.Region, bc.Cluster = cfg.Name, cfg.clusterName()
		bc.Name = fmt.Sprintf("%s-broker-%d", cfg.Name, i)
		bc.ListenAddr, bc.HTTPListenAddr = r.addr(bp), r.addr(hp)
		bc.AdvertisedAddress = ""
		bc.ServiceURL, bc.HTTPURL = "pulsar://"+r.addr(bp), "http://"+r.addr(hp)
		bc.DataDir = filepath.Join(cfg.DataDir, fmt.Sprintf("broker-%d", i))
		if sec != nil {
			bc = sec.broker(bc)
		}
		ep := roles.BrokerEndpoints{ServiceURL: bc.ServiceURL, WebServiceURL: bc.HTTPURL}
		if bc.TLS.Enabled() {
			tp, err := r.port(cfg.BrokerTLSPort, plan.BrokerTLS, i)
			if err != nil {
				return err
			}
			hsp, err := r.port(cfg.HTTPSPort, plan.HTTPS, i)
			if err != nil {
				return err
			}
			bc.TLSListenAddr, bc.HTTPSListenAddr = r.addr(tp), r.addr(hsp)
			bc.ServiceURLTLS, bc.HTTPURLTLS = "pulsar+ssl://"+r.addr(tp), "https://"+r.addr(hsp)
			ep.ServiceURLTLS, ep.WebServiceURLTLS = bc.ServiceURLTLS, bc.HTTPURLTLS
		}
		b := roles.NewBroker(bc, metaFor("broker"), globalFor(), r.deps.roles())
		b.SetClusterData(r.clusterData)
		eps = append(eps, ep)
		r.brokers = append(r.brokers, b)
		r.group.Add(b)
	}
	if cfg.federated() && cfg.Replicators >= 0 {
		for i := range max(cfg.Replicators, 1) {
			rc := cfg.Replicator
			rc.Region = cfg.clusterName()
			rc.ID = fmt.Sprintf("%s-replicator-%d", cfg.Name, i)
			rc.NATSURL = r.natsURL
			if sec != nil {
				rc.TLSTrustCertsFile, rc.TLSCertFile, rc.TLSKeyFile = cfg.Secrets.CA, "", ""
				rc.TokenFile = sec.region.ReplicatorToken
				rc.NATSTLS = sec.client("replicator")
			}
			// Every broker, starting at a different one per worker:
			// lookups move on to the next when one is down. Over TLS
			// when the brokers serve it.
			var hosts []string
			scheme := "pulsar://"
			for j := range eps {
				ep := eps[(i+j)%len(eps)]
				if ep.ServiceURLTLS != "" {
					scheme = "pulsar+ssl://"
					hosts = append(hosts, strings.TrimPrefix(ep.ServiceURLTLS, scheme))
				} else {
					hosts = append(hosts, strings.TrimPrefix(ep.ServiceURL, scheme))
				}
			}
			rc.ServiceURL = scheme + strings.Join(hosts, ",")
			rc.DataDir = filepath.Join(cfg.DataDir, fmt.Sprintf("replicator-%d", i))
			w := roles.NewReplicator(rc, metaFor("replicator"), globalFor(), r.deps.roles())
			r.workers = append(r.workers, w)
			r.group.Add(w)
		}
	}
	if len(cfg.ReplicatedNamespaces) > 0 || cfg.Broker.Transactions.Enabled {
		r.group.Add(&joiner{r: r})
	}
	return nil
}

// buildNATS adds the region's NATS server (unless NATSURL names an
// external one) with its gateways: those of the template, else the other
// regions' planned gateway ports.
func (r *Region) buildNATS(plan Ports) error {
	cfg := r.cfg
	if cfg.NATSURL != "" {
		r.natsURL = cfg.NATSURL
		return nil
	}
	nc := cfg.NATS
	nc.Region = cfg.clusterName()
	if sec := newSecure(cfg); sec != nil {
		nc.TLS, nc.GatewayTLS = sec.server("nats"), sec.federation()
	}
	if nc.Host == "" {
		nc.Host = cfg.Host
	}
	var err error
	if nc.Port == 0 {
		if nc.Port, err = r.port(0, plan.NATS, 0); err != nil {
			return err
		}
	}
	if nc.GatewayPort == 0 {
		if nc.GatewayPort, err = r.port(0, plan.NATSGateway, 0); err != nil {
			return err
		}
	}
	if len(nc.Gateways) == 0 && cfg.BasePort != 0 && len(cfg.Regions) > 0 {
		nc.Gateways = map[string]string{}
		for j, other := range cfg.Regions {
			if j != cfg.Index {
				nc.Gateways[other] = "nats://" + net.JoinHostPort(nc.Host, strconv.Itoa(PlanPorts(cfg.BasePort, j).NATSGateway))
			}
		}
	}
	r.nats = roles.NewNATS(nc, r.deps.Logger.With("component", "nats"))
	r.natsURL = "nats://" + net.JoinHostPort(nc.Host, strconv.Itoa(nc.Port))
	r.group.Add(r.nats)
	return nil
}

// clusterData is the region's cluster record: its first broker's URLs
// (every broker's, for the Pulsar protocol) and its NATS server.
func (r *Region) clusterData() policy.ClusterData {
	var urls, tlsURLs []string
	for _, b := range r.brokers {
		urls = append(urls, strings.TrimPrefix(b.Config().ServiceURL, "pulsar://"))
		if u := b.Endpoints().ServiceURLTLS; u != "" {
			tlsURLs = append(tlsURLs, strings.TrimPrefix(u, "pulsar+ssl://"))
		}
	}
	cd := policy.ClusterData{
		ServiceURL:       r.brokers[0].Config().HTTPURL,
		BrokerServiceURL: "pulsar://" + strings.Join(urls, ","),
		NATSURL:          r.natsURL,
	}
	if len(tlsURLs) > 0 {
		cd.ServiceURLTLS = r.brokers[0].Endpoints().WebServiceURLTLS
		cd.BrokerServiceURLTLS = "pulsar+ssl://" + strings.Join(tlsURLs, ",")
	}
	return cd
}

// Name implements lifecycle.Component: the region's name.
func (r *Region) Name() string { return r.cfg.Name }

// Start implements lifecycle.Component: the parts start in order (etcd,
// NATS, bookies, brokers, replicators) and each waits until it serves.
// When one fails the others are stopped.
func (r *Region) Start(ctx context.Context) error {
	if err := r.group.Start(ctx); err != nil {
		if r.ownTel {
			r.deps.Telemetry.Shutdown(context.Background())
		}
		return fmt.Errorf("region %s: %w", r.cfg.Name, err)
	}
	r.deps.Logger.Info("region started", "metadata", r.meta.Endpoints, "bookies", len(r.bookies), "brokers", len(r.brokers), "replicators", len(r.workers))
	return nil
}

// Ready implements lifecycle.Checker.
func (r *Region) Ready(ctx context.Context) error { return r.group.Ready(ctx) }

// Shutdown implements lifecycle.Component: the parts stop in reverse
// order, each draining.
func (r *Region) Shutdown(ctx context.Context) error {
	err := r.group.Shutdown(ctx)
	if r.ownTel {
		r.deps.Telemetry.Shutdown(ctx)
	}
	r.deps.Logger.Info("region stopped")
	return err
}

// Abort implements lifecycle.Component.
func (r *Region) Abort() {
	r.group.Abort()
	if r.ownTel {
		r.deps.Telemetry.Shutdown(context.Background())
	}
}

// Endpoints lists where the region's parts listen.
func (r *Region) Endpoints() Endpoints {
	e := Endpoints{Name: r.cfg.Name, NATSURL: r.natsURL}
	if len(r.meta.Endpoints) > 0 {
		e.MetadataURL = r.meta.Endpoints[0]
	}
	for _, b := range r.bookies {
		if s := b.Server(); s != nil {
			e.Bookies = append(e.Bookies, s.Addr())
		}
	}
	e.Brokers = r.Brokers()
	if len(e.Brokers) > 0 {
		e.ServiceURL, e.WebServiceURL = e.Brokers[0].ServiceURL, e.Brokers[0].WebServiceURL
		e.ServiceURLTLS, e.WebServiceURLTLS = e.Brokers[0].ServiceURLTLS, e.Brokers[0].WebServiceURLTLS
		e.MetricsURL = e.WebServiceURL + "/metrics"
	}
	return e
}

// Brokers lists where the region's brokers listen.
func (r *Region) Brokers() []roles.BrokerEndpoints {
	out := make([]roles.BrokerEndpoints, 0, len(r.brokers))
	for _, b := range r.brokers {
		e := b.Endpoints() // with the TLS URLs, once it started
		if e.ServiceURL == "" {
			e = roles.BrokerEndpoints{ServiceURL: b.Config().ServiceURL, WebServiceURL: b.Config().HTTPURL}
		}
		out = append(out, e)
	}
	return out
}

// Policies is the first broker's policy store (nil without brokers).
func (r *Region) Policies() *policy.Store {
	if len(r.brokers) == 0 {
		return nil
	}
	return r.brokers[0].Policies()
}

// joiner adds the region to its replicated namespaces once its brokers
// serve (the last part of a federated region), and creates pulsar/system
// when transactions are on.
type joiner struct{ r *Region }

func (j *joiner) Name() string { return "namespaces" }

func (j *joiner) Start(ctx context.Context) error {
	r := j.r
	pol := r.Policies()
	if pol == nil {
		return errors.New("no broker to write the configuration through")
	}
	cluster := r.cfg.clusterName()
	for _, ns := range r.cfg.ReplicatedNamespaces {
		tenant, _, _ := strings.Cut(ns, "/")
		if err := JoinNamespace(ctx, pol, tenant, ns, cluster); err != nil {
			return err
		}
	}
	if r.cfg.Broker.Transactions.Enabled {
		// Each broker does it as it starts (roles.Broker); again here,
		// for a region whose brokers started before it was federated.
		return roles.EnsureTransactionSystem(ctx, pol, cluster, r.cfg.Broker.Transactions.Coordinators)
	}
	return nil
}

func (j *joiner) Shutdown(context.Context) error { return nil }
func (j *joiner) Abort()                         {}

// JoinNamespace creates tenant and namespace ns ("tenant/name") if they
// are missing and adds cluster to the tenant's allowed clusters and to
// the namespace's replication clusters (roles.JoinNamespace).
func JoinNamespace(ctx context.Context, pol *policy.Store, tenant, ns, cluster string) error {
	return roles.JoinNamespace(ctx, pol, tenant, ns, cluster)
}
