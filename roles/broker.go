package roles

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/bookie/racks"
	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/broker/ownership"
	"github.com/isobar-mq/isobar/broker/primary"
	"github.com/isobar-mq/isobar/console"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/deletes"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/globalconfig/schema"
	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
)

// BrokerConfig is one broker: the broker's settings plus where it
// listens and what it is called.
type BrokerConfig struct {
	broker.Config `yaml:",inline"`
	// Name is the broker's stable name (ownership, metrics); empty means
	// the host name.
	Name string `yaml:"name"`
	// ListenAddr is the Pulsar protocol listener; empty means
	// 0.0.0.0:6650.
	ListenAddr string `yaml:"listenAddr"`
	// HTTPListenAddr serves the admin REST API, lookups, /healthz,
	// /readyz and /metrics; empty means 0.0.0.0:8080.
	HTTPListenAddr string `yaml:"httpListenAddr"`
	// AdvertisedAddress is the host clients and other brokers reach this
	// broker at; empty means the listen host, or the host name when that
	// is a wildcard. ServiceURL and HTTPURL, when set, override the
	// advertised URLs entirely.
	AdvertisedAddress string `yaml:"advertisedAddress"`
	// DataDir keeps the broker's copy of the global configuration, so it
	// starts while the global store is down; empty keeps none.
	DataDir string `yaml:"dataDir"`
	// LeaseTTL is how long a dead broker keeps its bundles; zero means
	// 10s.
	LeaseTTL time.Duration `yaml:"leaseTTL"`
	// FenceLeaseTTL is the lease of the broker's fences and presence in
	// the global store (docs/failover.md): a dead or cut-off primary's
	// namespaces fail over no sooner than this, and a cut of the global
	// store shorter than this costs clients a delay only. Zero means 2s;
	// etcd counts it in whole seconds.
	FenceLeaseTTL time.Duration `yaml:"fenceLeaseTTL"`
	// LoadReportInterval is how often the broker samples its load (CPU,
	// message and byte rates, topics, connections, per owned bundle) for
	// its load report in the region's metadata store (docs/ownership.md);
	// zero means 10s.
	LoadReportInterval time.Duration `yaml:"loadReportInterval"`
	// LoadReportThresholdPercentage is the change of a sampled figure,
	// in percent of the published one, that publishes a sample at once
	// (Pulsar's loadBalancerReportUpdateThresholdPercentage); zero means 10.
	LoadReportThresholdPercentage float64 `yaml:"loadReportThresholdPercentage"`
	// LoadReportMaxInterval is the longest a sample goes unpublished
	// (Pulsar's loadBalancerReportUpdateMaxIntervalMinutes); zero means 15m.
	LoadReportMaxInterval time.Duration `yaml:"loadReportMaxInterval"`
	// TLS, when its certificate and key are set, serves the Pulsar
	// protocol (pulsar+ssl://) on TLSListenAddr and the HTTP API on
	// HTTPSListenAddr as well (docs/security.md). The files are read
	// again when they change.
	TLS tlsfiles.Config `yaml:"tls"`
	// TLSListenAddr is the Pulsar protocol's TLS listener; empty means
	// 0.0.0.0:6651 (Pulsar's brokerServicePortTls).
	TLSListenAddr string `yaml:"tlsListenAddr"`
	// HTTPSListenAddr is the HTTP API's TLS listener; empty means
	// 0.0.0.0:8443 (Pulsar's webServicePortTls).
	HTTPSListenAddr string `yaml:"httpsListenAddr"`
	// TLSOnly (with TLS) serves clients only over TLS: the plaintext
	// Pulsar port answers every connection with an error naming the
	// pulsar+ssl:// URL, and the plaintext HTTP port serves only /healthz,
	// /readyz and /metrics and refuses the rest with 403 naming the
	// https:// URL.
	TLSOnly bool `yaml:"tlsOnly"`
	// BookKeeperTLS is how the broker reaches bookies that serve TLS
	// (bookie.tls): the CAs their certificates chain to and the broker's
	// client certificate (Pulsar's bookkeeperTLS* settings).
	BookKeeperTLS tlsfiles.ClientConfig `yaml:"bookkeeperTls"`
	// LostBookieRecoveryDelay is how long a bookie's registration must
	// have been gone before the region's auditor (run by the leader
	// broker) copies its ledgers' entries to other bookies
	// (BookKeeper's lostBookieRecoveryDelay; docs/ledger.md "Automatic
	// recovery"); zero means 30s. A decommissioned bookie is recovered
	// at once.
	LostBookieRecoveryDelay time.Duration `yaml:"lostBookieRecoveryDelay"`
	// OpenLedgerRereplicationGracePeriod is how long an open ledger with
	// a copy on a lost bookie may stay open before the auditor fences and
	// closes it to re-replicate it (BookKeeper's
	// openLedgerRereplicationGracePeriod; docs/ledger.md "Automatic
	// recovery"): its writer, a topic's managed ledger, then rolls over to
	// a new ledger. It starts once the bookie counts as lost (after
	// lostBookieRecoveryDelay); zero means 30s.
	OpenLedgerRereplicationGracePeriod time.Duration `yaml:"openLedgerRereplicationGracePeriod"`

	// LoadBalancerEnabled turns the region's load manager on (Pulsar's
	// loadBalancerEnabled; docs/ownership.md "Load balancing"): the
	// leader broker sheds bundles from brokers loaded above the mean to
	// the least loaded ones, and splits hot bundles when
	// LoadBalancerAutoBundleSplitEnabled is set. Off by default.
	LoadBalancerEnabled bool `yaml:"loadBalancerEnabled"`
	// LoadBalancerSheddingInterval is how often the leader decides what
	// to shed and split (Pulsar's loadBalancerSheddingIntervalMinutes);
	// zero means 1m.
	LoadBalancerSheddingInterval time.Duration `yaml:"loadBalancerSheddingInterval"`
	// LoadBalancerBrokerThresholdShedderPercentage is how far above the
	// mean load of the region's brokers, in percent of the mean, a
	// broker's load must be for it to shed bundles (Pulsar's
	// loadBalancerBrokerThresholdShedderPercentage); zero means 10.
	LoadBalancerBrokerThresholdShedderPercentage float64 `yaml:"loadBalancerBrokerThresholdShedderPercentage"`
	// LoadBalancerSheddingMinLoadGap is the least difference between a
	// broker's load and the mean, in load points (one per 10 % CPU, per
	// 1000 messages/s and per MiB/s, in and out), for the broker to shed,
	// so that an idle region does not move bundles over noise (the role
	// of Pulsar's loadBalancerBundleUnloadMinThroughputThreshold); zero
	// means 1.
	LoadBalancerSheddingMinLoadGap float64 `yaml:"loadBalancerSheddingMinLoadGap"`
	// LoadBalancerSheddingGracePeriod is how long a bundle that was moved
	// or split stays where it is before it may be moved again (Pulsar's
	// loadBalancerSheddingGracePeriodMinutes); zero means 30m.
	LoadBalancerSheddingGracePeriod time.Duration `yaml:"loadBalancerSheddingGracePeriod"`
	// LoadBalancerAutoBundleSplitEnabled lets the load manager split a
	// bundle above one of the LoadBalancerNamespaceBundleMax* limits in
	// two (Pulsar's loadBalancerAutoBundleSplitEnabled, by
	// range_equally_divide), up to limits.maxBundlesPerNamespace bundles
	// (Pulsar's loadBalancerNamespaceMaximumBundles). Off by default.
	LoadBalancerAutoBundleSplitEnabled bool `yaml:"loadBalancerAutoBundleSplitEnabled"`
	// LoadBalancerNamespaceBundleMaxTopics is the most topics a bundle
	// holds before it is split; zero means 1000.
	LoadBalancerNamespaceBundleMaxTopics int64 `yaml:"loadBalancerNamespaceBundleMaxTopics"`
	// LoadBalancerNamespaceBundleMaxMsgRate is the most messages/s, in
	// and out together, a bundle carries before it is split; zero means
	// 30000.
	LoadBalancerNamespaceBundleMaxMsgRate float64 `yaml:"loadBalancerNamespaceBundleMaxMsgRate"`
	// LoadBalancerNamespaceBundleMaxBandwidthMbytes is the most MB/s, in
	// and out together, a bundle carries before it is split; zero means
	// 100.
	LoadBalancerNamespaceBundleMaxBandwidthMbytes float64 `yaml:"loadBalancerNamespaceBundleMaxBandwidthMbytes"`
}

// loadManager is the load manager's configuration (without its logger
// and meter).
func (c BrokerConfig) loadManager() broker.LoadManagerConfig {
	settle := 2 * c.LoadReportInterval
	if settle == 0 {
		settle = 2 * ownership.DefaultLoadReportInterval
	}
	return broker.LoadManagerConfig{
		Interval: c.LoadBalancerSheddingInterval,
		Balance: ownership.BalanceConfig{
			Shed:   ownership.ShedConfig{Threshold: c.LoadBalancerBrokerThresholdShedderPercentage, MinGap: c.LoadBalancerSheddingMinLoadGap},
			Grace:  c.LoadBalancerSheddingGracePeriod,
			Settle: settle,
			Split: ownership.SplitConfig{
				Enabled:            c.LoadBalancerAutoBundleSplitEnabled,
				MaxTopics:          c.LoadBalancerNamespaceBundleMaxTopics,
				MaxMsgRate:         c.LoadBalancerNamespaceBundleMaxMsgRate,
				MaxBandwidthMbytes: c.LoadBalancerNamespaceBundleMaxBandwidthMbytes,
				MaxBundles:         c.Limits.WithDefaults().MaxBundlesPerNamespace,
			},
		},
	}
}

// loadReports is the ownership registry's load report configuration.
func (c BrokerConfig) loadReports() ownership.LoadReportConfig {
	return ownership.LoadReportConfig{Interval: c.LoadReportInterval, Threshold: c.LoadReportThresholdPercentage, MaxInterval: c.LoadReportMaxInterval}
}

// Validate reports every problem of a broker's settings at once.
func (c BrokerConfig) Validate() error {
	var errs []error
	if !ValidName(c.Region) {
		errs = append(errs, fmt.Errorf("broker.region: %q must be 1-63 lower-case letters, digits or dashes", c.Region))
	}
	if c.Name != "" && !validID(c.Name) {
		errs = append(errs, fmt.Errorf("broker.name: %q must be letters, digits, '.', '-' or '_'", c.Name))
	}
	errs = append(errs, ValidAddr("broker.listenAddr", c.ListenAddr), ValidAddr("broker.httpListenAddr", c.HTTPListenAddr),
		ValidAddr("broker.tlsListenAddr", c.TLSListenAddr), ValidAddr("broker.httpsListenAddr", c.HTTPSListenAddr))
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("broker.%w", err))
	}
	if c.TLSOnly && !c.TLS.Enabled() {
		errs = append(errs, errors.New("broker.tlsOnly: needs broker.tls.certFile and keyFile"))
	}
	if err := c.BookKeeperTLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("broker.bookkeeperTls: %w", err))
	}
	if c.LostBookieRecoveryDelay < 0 {
		errs = append(errs, fmt.Errorf("broker.lostBookieRecoveryDelay: %v is negative", c.LostBookieRecoveryDelay))
	}
	if c.OpenLedgerRereplicationGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("broker.openLedgerRereplicationGracePeriod: %v is negative", c.OpenLedgerRereplicationGracePeriod))
	}
	if c.LeaseTTL < 0 || c.LeaseTTL > 0 && c.LeaseTTL < time.Second {
		errs = append(errs, fmt.Errorf("broker.leaseTTL: %v must be 0 (default) or at least 1s", c.LeaseTTL))
	}
	if c.FenceLeaseTTL < 0 || c.FenceLeaseTTL > 0 && (c.FenceLeaseTTL < time.Second || c.FenceLeaseTTL%time.Second != 0) {
		errs = append(errs, fmt.Errorf("broker.fenceLeaseTTL: %v must be 0 (default) or whole seconds, at least 1s", c.FenceLeaseTTL))
	}
	// The load reports' checks (ownership.LoadReportConfig's) and the
	// load manager's, by the keys of this section.
	if c.LoadReportInterval < 0 || c.LoadReportInterval > 0 && c.LoadReportInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("broker.loadReportInterval: %v must be 0 (default) or at least 100ms", c.LoadReportInterval))
	}
	if t := c.LoadReportThresholdPercentage; t < 0 || t > 100 || math.IsNaN(t) {
		errs = append(errs, fmt.Errorf("broker.loadReportThresholdPercentage: %v is not within 0..100", t))
	}
	if c.LoadReportMaxInterval < 0 {
		errs = append(errs, fmt.Errorf("broker.loadReportMaxInterval: %v is negative", c.LoadReportMaxInterval))
	}
	if err := c.loadManager().Balance.Validate(); err != nil {
		for _, e := range splitErrors(err) {
			// The bundle limit is limits.maxBundlesPerNamespace's,
			// which Limits reports.
			if !strings.HasPrefix(e.Error(), "loadBalancerNamespaceMaximumBundles") {
				errs = append(errs, fmt.Errorf("broker.%w", e))
			}
		}
	}
	if c.LoadBalancerSheddingInterval < 0 {
		errs = append(errs, fmt.Errorf("broker.loadBalancerSheddingInterval: %v is negative", c.LoadBalancerSheddingInterval))
	}
	// The broker's own checks, with the URLs it will advertise.
	bc := c.Config
	if bc.ServiceURL == "" {
		bc.ServiceURL = "pulsar://placeholder:6650"
	}
	errs = append(errs, bc.Validate())
	return errors.Join(errs...)
}

// BrokerEndpoints says where one broker listens.
type BrokerEndpoints struct {
	ServiceURL    string `json:"serviceUrl"`
	WebServiceURL string `json:"webServiceUrl"`
	// The TLS listeners' URLs, when the broker serves TLS.
	ServiceURLTLS    string `json:"serviceUrlTls,omitempty"`
	WebServiceURLTLS string `json:"webServiceUrlTls,omitempty"`
}

// Broker is one broker with everything it needs of its own: a metadata
// store connection, a ledger client, its view of the policies, its
// registration in the ownership registry, its Pulsar listener and its
// HTTP server (admin REST API, lookups, health, metrics). It is a
// lifecycle.Component.
type Broker struct {
	cfg          BrokerConfig
	meta, global metastore.Config
	deps         Deps
	logger       *slog.Logger
	// clusterData, when set, is called once the broker serves: the
	// region composition records its brokers in the cluster record.
	clusterData func() policy.ClusterData

	name     string
	bln, hln net.Listener
	// The TLS listeners (nil without TLS) and their configuration.
	tln, hsln net.Listener
	tlsCfg    *tls.Config
	plainHTTP *http.Server // TLSOnly: the plaintext HTTP port's refusals
	eps       BrokerEndpoints
	// bc is the broker's configuration with its advertised URLs, and
	// cluster its cluster's name (after listen).
	bc      broker.Config
	cluster string
	store   *metastore.Store
	ledgers *ledger.Client
	auditor *ledger.Auditor
	// stopAudit stops the auditor's goroutine and waits for it.
	stopAudit func()
	// stopLoadMgr stops the load manager's goroutine (when
	// loadBalancerEnabled) and waits for it.
	stopLoadMgr func()
	pol         *policies
	reg         *ownership.Registry
	placement   *broker.OwnershipPlacement
	gates       *primary.Gates
	b           *broker.Broker
	// built is b for the callbacks of the registry and the fences, made
	// before it (nil until then).
	built   atomic.Pointer[broker.Broker]
	loadMgr *broker.LoadManager // nil unless loadBalancerEnabled
	http    *http.Server
	done    chan struct{} // the Pulsar listener's Serve returned
	stopped bool
}

// NewBroker returns a broker for cfg whose region metadata store is meta
// and whose global configuration store is global (no endpoints: the
// region keeps its configuration in meta).
func NewBroker(cfg BrokerConfig, meta, global metastore.Config, deps Deps) *Broker {
	deps = deps.withDefaults()
	name := cfg.Name
	if name == "" {
		name = Hostname()
	}
	return &Broker{cfg: cfg, meta: meta, global: global, deps: deps, name: name,
		logger: deps.Logger.With("broker", name)}
}

// SetClusterData makes the broker register the cluster record f returns
// (and update an existing one to it) once it serves, instead of its own
// URLs: a region composition records all its brokers there. Call it
// before Start.
func (c *Broker) SetClusterData(f func() policy.ClusterData) { c.clusterData = f }

// Name implements lifecycle.Component.
func (c *Broker) Name() string { return "broker " + c.name }

// Config is the broker's configuration, as given to NewBroker.
func (c *Broker) Config() BrokerConfig { return c.cfg }

// Endpoints are the broker's advertised URLs (after Start).
func (c *Broker) Endpoints() BrokerEndpoints { return c.eps }

// Broker is the running broker (nil before Start).
func (c *Broker) Broker() *broker.Broker { return c.b }

// Policies is the broker's policy store (nil before Start).
func (c *Broker) Policies() *policy.Store {
	if c.pol == nil {
		return nil
	}
	return c.pol.store
}

// Start implements lifecycle.Component in four phases: listen (the
// sockets, so that a port in use fails at once, and the URLs the broker
// advertises), connect (the metadata store, the bookies, the policies and
// the global store), build (the broker and its subsystems) and serve (the
// goroutines, the listeners and the cluster record). When a phase fails,
// what the earlier ones opened is closed.
func (c *Broker) Start(ctx context.Context) (err error) {
	if err := c.cfg.Validate(); err != nil {
		return err
	}
	defer func() {
		if err != nil && c.done != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			c.Shutdown(sctx)
			cancel()
		} else if err != nil {
			c.release(context.Background())
		}
	}()
	if err := c.listen(); err != nil {
		return err
	}
	if err := c.connect(ctx); err != nil {
		return err
	}
	if err := c.build(ctx); err != nil {
		return err
	}
	return c.serve(ctx)
}

// listen opens the broker's listeners and works out the URLs it
// advertises (c.bc, c.eps).
func (c *Broker) listen() (err error) {
	if c.bln, err = listen("broker.listenAddr", c.cfg.ListenAddr, "0.0.0.0:6650"); err != nil {
		return err
	}
	if c.hln, err = listen("broker.httpListenAddr", c.cfg.HTTPListenAddr, "0.0.0.0:8080"); err != nil {
		return err
	}
	if c.cfg.TLS.Enabled() {
		if c.tlsCfg, err = c.cfg.TLS.Server(); err != nil {
			return fmt.Errorf("broker.%w", err)
		}
		if c.tln, err = listen("broker.tlsListenAddr", c.cfg.TLSListenAddr, "0.0.0.0:6651"); err != nil {
			return err
		}
		if c.hsln, err = listen("broker.httpsListenAddr", c.cfg.HTTPSListenAddr, "0.0.0.0:8443"); err != nil {
			return err
		}
	}
	bc := c.cfg.Config
	host := advertisedHost(c.cfg.AdvertisedAddress, c.bln)
	if c.tln != nil {
		if bc.ServiceURLTLS == "" {
			bc.ServiceURLTLS = "pulsar+ssl://" + net.JoinHostPort(advertisedHost(c.cfg.AdvertisedAddress, c.tln), strconv.Itoa(c.tln.Addr().(*net.TCPAddr).Port))
		}
		if bc.HTTPURLTLS == "" {
			bc.HTTPURLTLS = "https://" + net.JoinHostPort(advertisedHost(c.cfg.AdvertisedAddress, c.hsln), strconv.Itoa(c.hsln.Addr().(*net.TCPAddr).Port))
		}
	}
	if bc.ServiceURL == "" {
		bc.ServiceURL = "pulsar://" + net.JoinHostPort(host, strconv.Itoa(c.bln.Addr().(*net.TCPAddr).Port))
	}
	if bc.HTTPURL == "" {
		bc.HTTPURL = "http://" + net.JoinHostPort(advertisedHost(c.cfg.AdvertisedAddress, c.hln), strconv.Itoa(c.hln.Addr().(*net.TCPAddr).Port))
	}
	c.bc = bc
	c.cluster = bc.Cluster
	if c.cluster == "" {
		c.cluster = bc.Region
	}
	c.eps = BrokerEndpoints{ServiceURL: bc.ServiceURL, WebServiceURL: bc.HTTPURL, ServiceURLTLS: bc.ServiceURLTLS, WebServiceURLTLS: bc.HTTPURLTLS}
	return nil
}

// connect reaches what the broker stores in: the region's metadata store
// (retried for its start-up timeout), the bookies through a ledger client,
// and the policies (in the global store through its cache, or in the
// region's store).
func (c *Broker) connect(ctx context.Context) (err error) {
	if c.store, err = connectMeta(ctx, c.meta, "metadata store", c.logger); err != nil {
		return err
	}
	bkTLS, err := c.cfg.BookKeeperTLS.Client()
	if err != nil {
		return fmt.Errorf("broker.bookkeeperTls: %w", err)
	}
	if c.ledgers, err = ledger.NewClient(c.store, ledger.Config{Region: c.bc.Region, Logger: c.logger, TLS: bkTLS}); err != nil {
		return fmt.Errorf("ledger client: %w", err)
	}
	limits := c.bc.Limits.WithDefaults()
	c.pol, err = openPolicies(ctx, policiesConfig{
		local: c.store, global: c.global, dataDir: c.cfg.DataDir, cluster: c.cluster,
		hasTopics: c.hasTopics, logger: c.logger, meter: c.deps.Telemetry.MeterProvider(),
		maxPartitions: limits.MaxPartitionsPerTopic, maxBundles: limits.MaxBundlesPerNamespace,
	})
	return err
}

// build makes the broker and its subsystems: the bundle placement and the
// broker's registration in the ownership registry, the auditor, the
// primary fences, the schema and delete stores, the broker itself, its
// load manager and its HTTP server. The registry and the fences call back
// into the broker (unloading a lost bundle, demoting a topic) through
// this role (unloadLost, demote), which forwards once the broker is
// built. The registry registers the broker here (Registry.Start): the
// placement needs it before the broker serves.
func (c *Broker) build(ctx context.Context) (err error) {
	tel := c.deps.Telemetry
	pol := c.pol.store
	c.placement = &broker.OwnershipPlacement{Policies: pol, Local: c.store, Region: c.bc.Region}
	reg, err := ownership.New(ownership.Config{
		Region: c.bc.Region,
		Self: ownership.BrokerInfo{ID: c.name, ServiceURL: c.bc.ServiceURL, HTTPURL: c.bc.HTTPURL,
			ServiceURLTLS: c.bc.ServiceURLTLS, HTTPURLTLS: c.bc.HTTPURLTLS},
		LeaseTTL:    c.cfg.LeaseTTL,
		LoadReports: c.cfg.loadReports(),
	}, ownership.Deps{
		Meta:         c.store,
		Logger:       c.logger,
		OnLost:       c.unloadLost,
		AntiAffinity: c.antiAffinity,
	})
	if err != nil {
		return err
	}
	if err := reg.Start(ctx); err != nil {
		return err
	}
	c.reg = reg
	c.placement.Registry = c.reg
	// Automatic recovery: every broker runs the auditor; it acts while
	// this broker is the region's leader (ownership.Leader, the broker
	// leader the admin API names).
	c.auditor, err = c.ledgers.NewAuditor(ledger.AuditorConfig{
		LostBookieRecoveryDelay: c.cfg.LostBookieRecoveryDelay,
		OpenLedgerGracePeriod:   c.cfg.OpenLedgerRereplicationGracePeriod,
		MeterProvider:           tel.MeterProvider(),
		Leader:                  c.leader,
	})
	if err != nil {
		return fmt.Errorf("broker auditor: %w", err)
	}
	// The fences use the global store with timeouts of their own; the
	// schema and delete records go through the bound of the policies
	// (policies.meta), as every admin write does.
	var globalMeta metastore.Meta = c.store // no global store: the region keeps its configuration
	configMeta := globalMeta
	var cached func(string) ([]byte, int64, bool)
	if c.pol.global != nil {
		globalMeta, configMeta, cached = c.pol.global, c.pol.meta, c.pol.cache.Get
	}
	cluster := c.cluster
	c.gates, err = primary.New(primary.Config{Region: cluster, Broker: c.name, TTL: c.cfg.FenceLeaseTTL}, primary.Deps{
		Global:         globalMeta,
		Cached:         cached,
		AutoNamespaces: c.autoFailoverNamespaces,
		Promote:        func(ctx context.Context, ns, from string) error { return pol.Promote(ctx, ns, from, cluster) },
		Logger:         c.logger,
		Demote:         c.demote,
	})
	if err != nil {
		return err
	}
	// Schemas live beside the namespaces: in the global store, read
	// through its cache, or in the region's own store without one.
	sc := schema.Config{Logger: c.logger}
	if c.pol.cache != nil {
		sc.Cache = c.pol.cache
	}
	schemas, err := schema.New(configMeta, sc)
	if err != nil {
		return err
	}
	// Deletes of topics and namespaces reach every region through
	// records in the global store (docs/replication.md).
	dc := deletes.Config{Region: cluster}
	if c.pol.cache != nil {
		dc.Cache = c.pol.cache
	}
	dels, err := deletes.New(configMeta, dc)
	if err != nil {
		return err
	}
	schemaSettings := func(ctx context.Context, name topic.Name) (schema.Settings, error) {
		return schema.SettingsFor(ctx, pol, name)
	}
	autoCreate := policy.AutoTopicCreation{AllowAutoTopicCreation: true, TopicType: policy.TopicTypeNonPartitioned}
	b, err := broker.New(c.bc, broker.Deps{
		Schemas:        schemas,
		Deletes:        dels,
		SchemaSettings: schemaSettings,
		Meta:           c.store,
		Ledgers:        c.ledgers,
		Placement:      c.placement,
		Namespaces:     broker.PolicyNamespaces{Store: pol, Default: autoCreate},
		AuthPolicies:   policy.AuthSource{Store: pol},
		Primary:        c.gates,
		Logger:         c.logger,
		MeterProvider:  tel.MeterProvider(),
		TracerProvider: tel.TracerProvider(),
		OnDrained:      c.releaseOwnership,
	})
	if err != nil {
		return err
	}
	c.b = b
	c.built.Store(b)
	c.reg.SetLoadSource(broker.NewLoadSampler(b, c.placement).Sample)
	if c.cfg.LoadBalancerEnabled {
		// The load manager: every broker runs it; it decides while this
		// broker is the region's leader, as the auditor above.
		lmc := c.cfg.loadManager()
		lmc.Logger, lmc.MeterProvider = c.logger, tel.MeterProvider()
		if c.loadMgr, err = broker.NewLoadManager(b, c.placement, lmc); err != nil {
			return err
		}
	}
	adm := admin.New(admin.Config{
		Policies:          pol,
		Broker:            b.AdminAPI(),
		Cluster:           cluster,
		Logger:            c.logger,
		AutoTopicCreation: autoCreate,
		Health:            c.healthCheck,
		MaxRequestBytes:   c.bc.Limits.WithDefaults().MaxAdminRequestBytes,
		Authz:             b.Authorizer(),
		TopicDefaults:     b.TopicDefaults(),
		Schemas:           schemas,
		Bookies:           racks.NewStore(c.store, c.bc.Region),
		Recovery:          ledger.Operations{Client: c.ledgers, Auditor: c.auditor},
		PeerClient:        peerClient(c.cfg.TLS),
	})
	mux := http.NewServeMux()
	health := c.deps.Health
	if health == nil {
		health = lifecycle.NewHealth(tel.Handler())
		health.SetReady(c)
	}
	health.Mount(mux)
	mux.Handle("/", adm)
	// The console's static files need no credentials: its pages call
	// the admin API with the user's token, which the rest of the mux
	// checks as for any client.
	root := http.NewServeMux()
	root.Handle("/", b.Auth().HTTP(mux))
	root.Handle(console.Prefix, console.Handler())
	root.Handle("/console", console.Handler())
	c.http = &http.Server{Handler: root, ReadHeaderTimeout: 10 * time.Second}
	if c.cfg.TLSOnly {
		c.plainHTTP = &http.Server{Handler: tlsOnlyHTTP(b.Auth().HTTP(mux), c.bc.HTTPURLTLS), ReadHeaderTimeout: 10 * time.Second}
	}
	return nil
}

// serve starts the fences' presence, the broker's background loops, the
// auditor and the load manager, serves the listeners and registers the
// cluster record.
func (c *Broker) serve(ctx context.Context) error {
	c.gates.Start()
	c.b.Start()
	{
		actx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); c.auditor.Run(actx) }()
		c.stopAudit = func() { cancel(); <-done }
	}
	if c.loadMgr != nil {
		lctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); c.loadMgr.Run(lctx) }()
		c.stopLoadMgr = func() { cancel(); <-done }
	}
	b := c.b
	c.done = make(chan struct{})
	hln, bln := c.hln, c.bln
	plainHTTP := c.http
	if c.plainHTTP != nil {
		plainHTTP = c.plainHTTP
		go refusePlaintext(bln, c.bc.ServiceURLTLS, c.logger)
	}
	go func() {
		if err := plainHTTP.Serve(hln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.logger.Error("http server stopped", "err", err)
		}
	}()
	if c.tln != nil {
		hsln, tln := tls.NewListener(c.hsln, c.tlsCfg), tls.NewListener(c.tln, c.tlsCfg)
		go func() {
			if err := c.http.Serve(hsln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				c.logger.Error("https server stopped", "err", err)
			}
		}()
		go func() {
			if c.cfg.TLSOnly {
				defer close(c.done)
			}
			if err := b.Serve(tln); err != nil {
				c.logger.Error("broker TLS listener stopped", "err", err)
			}
		}()
	}
	if !c.cfg.TLSOnly {
		go func() {
			defer close(c.done)
			if err := b.Serve(bln); err != nil {
				c.logger.Error("broker listener stopped", "err", err)
			}
		}()
	}
	if err := c.registerCluster(ctx, c.cluster); err != nil {
		return err
	}
	if c.cfg.Transactions.Enabled {
		// The coordinators are placed by pulsar/system's bundles: a
		// region of separate broker processes has no one else to
		// create it.
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := EnsureTransactionSystem(tctx, c.pol.store, c.cluster, c.cfg.Transactions.Coordinators)
		cancel()
		if err != nil {
			return fmt.Errorf("transactions: %w", err)
		}
	}
	bc := c.bc
	c.logger.Info("broker serving", "serviceUrl", bc.ServiceURL, "webServiceUrl", bc.HTTPURL, "serviceUrlTls", bc.ServiceURLTLS, "webServiceUrlTls", bc.HTTPURLTLS, "cluster", c.cluster)
	return nil
}

// unloadLost is the registry's OnLost: the broker lost bundle bd of
// namespace ns (its lease expired), so it unloads the bundle's topics.
func (c *Broker) unloadLost(ns string, bd topic.Bundle) {
	b := c.built.Load()
	if b == nil {
		return // nothing loaded yet
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = b.UnloadMatching(ctx, func(n topic.Name) bool { return c.placement.InBundle(n, ns, bd) })
	}()
}

// antiAffinity is the registry's AntiAffinity: the namespaces of ns's
// anti-affinity group.
func (c *Broker) antiAffinity(ctx context.Context, ns string) ([]string, error) {
	pol := c.pol.store
	p, err := pol.Namespace(ctx, ns)
	if err != nil || p.AntiAffinityGroup == "" {
		return nil, err
	}
	tenant, _, _ := topic.ParseNamespace(ns)
	return pol.AntiAffinityNamespaces(ctx, tenant, p.AntiAffinityGroup)
}

// leader is the auditor's Leader: this broker is the region's leader.
func (c *Broker) leader(ctx context.Context) bool {
	infos, err := c.reg.Brokers(ctx)
	if err != nil {
		return false
	}
	l, ok := ownership.Leader(infos)
	return ok && l.ID == c.name
}

// autoFailoverNamespaces is the fences' AutoNamespaces: the namespaces
// with automatic failover.
func (c *Broker) autoFailoverNamespaces() []primary.AutoNamespace {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nss, _ := c.pol.store.AutoFailoverNamespaces(ctx)
	out := make([]primary.AutoNamespace, 0, len(nss))
	for _, n := range nss {
		out = append(out, primary.AutoNamespace{Name: n.Namespace, Failover: n.Failover, Clusters: n.Clusters})
	}
	return out
}

// demote is the fences' Demote: the broker demotes topic of ns, whose
// namespace's primary moved to region to.
func (c *Broker) demote(ctx context.Context, ns, topic, to string) {
	if b := c.built.Load(); b != nil {
		b.Demote(ctx, ns, topic, to)
	}
}

// releaseOwnership is the broker's OnDrained: once drained it gives up
// its bundles.
func (c *Broker) releaseOwnership(ctx context.Context) {
	if err := c.reg.Close(ctx); err != nil {
		c.logger.Warn("releasing bundle ownership failed", "err", err)
	}
}

// registerCluster makes sure the cluster record exists: without a global
// store, with tenant public and namespace public/default as in a Pulsar
// standalone; with one, the record alone (a federation's namespaces are
// created by its operator, or by `isobar region` and `isobar dev`). An
// existing record is left alone unless the region composition asks for
// its brokers' URLs.
func (c *Broker) registerCluster(ctx context.Context, cluster string) error {
	pol := c.pol.store
	cd := policy.ClusterData{ServiceURL: c.eps.WebServiceURL, BrokerServiceURL: c.eps.ServiceURL,
		ServiceURLTLS: c.eps.WebServiceURLTLS, BrokerServiceURLTLS: c.eps.ServiceURLTLS}
	if c.clusterData != nil {
		cd = c.clusterData()
	}
	if c.pol.cache == nil {
		if err := pol.EnsureStandalone(ctx, cluster, cd); err != nil {
			return fmt.Errorf("create cluster %s, tenant public and namespace public/default: %w", cluster, err)
		}
		if c.clusterData == nil {
			return nil
		}
	}
	old, err := pol.Cluster(ctx, cluster)
	if err == nil && (c.clusterData == nil || reflect.DeepEqual(old, cd)) {
		return nil // registered (perhaps read from the cache)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err != nil {
		err = pol.CreateCluster(wctx, cluster, cd)
	}
	if err == nil || errors.Is(err, policy.ErrExists) {
		err = pol.UpdateCluster(wctx, cluster, cd)
	}
	if err != nil {
		if _, cerr := pol.Cluster(ctx, cluster); cerr == nil {
			// Known from the cache with other addresses, and the global
			// store cannot be written now: serve anyway.
			c.logger.Warn("could not update the cluster record in the global store; serving with the cached one", "err", err)
			return nil
		}
		return fmt.Errorf("register cluster %s: %w", cluster, err)
	}
	return nil
}

func (c *Broker) hasTopics(ctx context.Context, ns string) (bool, error) {
	if c.b == nil {
		return false, nil
	}
	ts, err := c.b.PersistentTopics(ctx, ns)
	return len(ts) > 0, err
}

// Ready implements lifecycle.Checker: the broker accepts connections, is
// registered in the ownership registry and not draining, can write to the
// metadata store, and sees enough writable bookies for a new ledger.
func (c *Broker) Ready(ctx context.Context) error {
	if c.b == nil || c.reg == nil {
		return errors.New("not started")
	}
	if c.stopped {
		return errors.New("stopped")
	}
	if err := c.b.AcceptErr(); err != nil {
		return err
	}
	if !c.reg.Registered() {
		return errors.New("not registered in the metadata store (lease lost; re-registering)")
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	key := metastore.RegionPrefix(c.cfg.Region) + "health/" + c.name
	if _, err := c.store.Put(ctx, key, []byte(time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
		return fmt.Errorf("cannot write to the metadata store: %w", err)
	}
	n, err := c.ledgers.WritableBookies(ctx)
	if err != nil {
		return fmt.Errorf("cannot list the bookies: %w", err)
	}
	if e := c.cfg.Ledger.WithDefaults().EnsembleSize; n < e {
		return fmt.Errorf("%d writable bookies, fewer than the ensemble size %d", n, e)
	}
	return nil
}

// healthCheck is GET /admin/v2/brokers/health: Ready, then an entry
// round-tripped through the broker's heartbeat ledger (bookies and
// metadata store), as Pulsar's health check round-trips a message.
func (c *Broker) healthCheck(ctx context.Context) error {
	if err := c.Ready(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.b.Heartbeat(ctx, c.name)
}

// Shutdown implements lifecycle.Component with a drain: the broker stops
// taking new bundles, then unloads its bundles one by one (the clients of
// a bundle's topics are told to reconnect and find its next owner at
// once, since the ownership is released right after), then closes its
// listeners and connections and deregisters.
func (c *Broker) Shutdown(ctx context.Context) error {
	if c.b == nil || c.stopped {
		return nil
	}
	c.stopped = true
	c.stopLoadManager()
	var errs []error
	if err := c.reg.Drain(ctx); err != nil {
		c.logger.Warn("drain mark", "err", err)
	}
	if err := c.placement.UnloadOwned(ctx, c.b); err != nil {
		errs = append(errs, err)
	}
	if err := c.b.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := c.gates.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("primary fences: %w", err))
	}
	if err := c.reg.Close(ctx); err != nil && !errors.Is(err, ownership.ErrClosed) {
		errs = append(errs, fmt.Errorf("ownership: %w", err))
	}
	if err := c.http.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("http: %w", err))
	}
	if c.plainHTTP != nil {
		if err := c.plainHTTP.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http: %w", err))
		}
		c.bln.Close() // its refusals (the broker serves only the TLS one)
	}
	<-c.done
	c.release(ctx)
	return errors.Join(errs...)
}

// Abort implements lifecycle.Component: connections drop, topics stay open
// (the next owner recovers their ledgers) and the registration and bundles
// stay until their lease expires.
func (c *Broker) Abort() {
	if c.b == nil {
		return
	}
	c.stopped = true
	c.stopLoadManager()
	c.b.Abort()
	c.http.Close()
	if c.plainHTTP != nil {
		c.plainHTTP.Close()
		c.bln.Close()
	}
	c.reg.Abort() // its lease is no longer kept alive: it expires, as a crashed broker's would
	c.gates.Abort()
	<-c.done
	c.release(context.Background())
}

// stopLoadManager stops the load manager, when it runs.
func (c *Broker) stopLoadManager() {
	if c.stopLoadMgr != nil {
		c.stopLoadMgr()
		c.stopLoadMgr = nil
	}
}

// release closes what Start opened (after the broker stopped, or when
// Start failed).
func (c *Broker) release(context.Context) {
	if c.done == nil {
		// Start failed before the broker served: close what opened.
		if c.b != nil {
			c.b.Abort()
		}
		if c.gates != nil {
			c.gates.Abort()
		}
		if c.reg != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c.reg.Close(ctx)
			cancel()
		}
		for _, ln := range []net.Listener{c.bln, c.hln, c.tln, c.hsln} {
			if ln != nil {
				ln.Close()
			}
		}
	}
	c.stopLoadManager()
	if c.stopAudit != nil {
		c.stopAudit()
		c.stopAudit = nil
	}
	if c.ledgers != nil {
		c.ledgers.Close()
	}
	if c.pol != nil {
		c.pol.close()
	}
	if c.store != nil {
		c.store.Close()
	}
}

// refusePlaintext answers every connection to a TLS-only broker's
// plaintext Pulsar port with an error naming its TLS URL, after the
// client's first frame (its CONNECT), and closes it. It returns when ln
// is closed.
func refusePlaintext(ln net.Listener, tlsURL string, logger *slog.Logger) {
	refusal := fmt.Errorf("%w: this broker serves only TLS: connect to %s", errkind.ErrAuthentication, tlsURL)
	frame, _ := wire.AppendCommand(nil, wire.NewErrorCommand(0, refusal))
	for {
		nc, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				logger.Warn("plaintext listener stopped", "err", err)
			}
			return
		}
		go func() {
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := wire.ReadFrame(nc, 64<<10, nil); err != nil {
				return
			}
			_, _ = nc.Write(frame)
		}()
	}
}

// tlsOnlyHTTP serves a TLS-only broker's plaintext HTTP port: the health
// and metrics paths, and for the rest a 403 naming the https:// URL.
func tlsOnlyHTTP(mux http.Handler, httpsURL string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics":
			mux.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		b, _ := json.Marshal(map[string]string{"reason": "this broker serves only TLS: use " + httpsURL + r.URL.RequestURI()})
		_, _ = w.Write(b)
	})
}

// splitErrors returns the errors err joins (errors.Join), each on its
// own.
func splitErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, splitErrors(e)...)
		}
		return out
	}
	return []error{err}
}
