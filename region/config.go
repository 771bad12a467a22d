package region

import (
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/broker/ownership"
	"github.com/isobar-mq/isobar/internal/natsembed"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/replicator"
)

// File is the one configuration shape of every isobar process: a section
// per role. Each command reads the sections it needs (`isobar broker`
// reads metastore, global, broker and telemetry; `isobar region` reads
// region and uses the role sections as templates for its parts). It holds
// plain settings only; docs/config.md lists every key.
type File struct {
	// Metastore says how to reach the region's metadata store (etcd).
	Metastore metastore.Config `yaml:"metastore"`
	// Global says how to reach the global configuration store; no
	// endpoints keeps clusters, tenants and namespaces in the region's
	// own metadata store (a region alone).
	Global metastore.Config `yaml:"global"`
	// Etcd is the member `isobar metastore` runs.
	Etcd MetastoreConfig `yaml:"etcd"`
	// Bookie is the bookie `isobar bookie` runs.
	Bookie BookieConfig `yaml:"bookie"`
	// Broker is the broker `isobar broker` runs.
	Broker BrokerConfig `yaml:"broker"`
	// Replicator is the worker `isobar replicator` runs.
	Replicator ReplicatorConfig `yaml:"replicator"`
	// NATS is the server `isobar nats` runs.
	NATS NATSConfig `yaml:"nats"`
	// Proxy is the proxy `isobar proxy` runs.
	Proxy ProxyConfig `yaml:"proxy"`
	// Region is what `isobar region` runs: every role of one region.
	Region Config `yaml:"region"`
	// Telemetry configures metrics and traces.
	Telemetry TelemetryConfig `yaml:"telemetry"`
	// ShutdownTimeout bounds a graceful shutdown (SIGTERM), after which
	// the process aborts; zero means 30s.
	ShutdownTimeout time.Duration `yaml:"shutdownTimeout"`
}

// TelemetryConfig configures a process's metrics and traces. OTLP export
// is configured by the standard OTEL_EXPORTER_OTLP_* variables.
type TelemetryConfig struct {
	// Disabled turns metrics and traces off (/metrics is empty).
	Disabled bool `yaml:"disabled"`
}

// MetastoreConfig is one member of an etcd cluster: a region's metadata
// store or the global configuration store.
type MetastoreConfig struct {
	metastore.EmbedConfig `yaml:",inline"`
	// HTTPAddr is where /healthz, /readyz and /metrics are served;
	// default 0.0.0.0:2381, empty serves none.
	HTTPAddr string `yaml:"httpAddr"`
}

// BookieConfig is one bookie.
type BookieConfig struct {
	bookie.Config `yaml:",inline"`
	// HTTPAddr is where /healthz, /readyz and /metrics are served;
	// default 0.0.0.0:8000, empty serves none.
	HTTPAddr string `yaml:"httpAddr"`
}

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

// ReplicatorConfig is one replicator worker.
type ReplicatorConfig struct {
	replicator.Config `yaml:",inline"`
	// NATSURL is the region's NATS server(s), "nats://host:port[,...]".
	NATSURL string `yaml:"natsUrl"`
	// DataDir keeps the worker's copy of the global configuration; empty
	// keeps none.
	DataDir string `yaml:"dataDir"`
	// HTTPAddr is where /healthz, /readyz and /metrics are served;
	// default 0.0.0.0:8090, empty serves none.
	HTTPAddr string `yaml:"httpAddr"`
	// NATSTLS is how the worker reaches NATS servers that serve TLS
	// (nats.tls): the CAs their certificates chain to and the worker's
	// client certificate.
	NATSTLS tlsfiles.ClientConfig `yaml:"natsTls"`
}

// NATSConfig is one NATS server of a region.
type NATSConfig struct {
	natsembed.Config `yaml:",inline"`
	// HTTPAddr is where /healthz, /readyz and /metrics are served;
	// default 0.0.0.0:8222, empty serves none.
	HTTPAddr string `yaml:"httpAddr"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidName reports whether s can name a region.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// Hostname is the default name of brokers, bookies' id prefix and
// replicator workers: the host name, lower-cased, or "localhost".
func Hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return strings.ToLower(h)
}

// ValidAddr checks a host:port setting (empty is fine).
func ValidAddr(field, a string) error {
	if a == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		return fmt.Errorf("%s: %q is not host:port", field, a)
	}
	return nil
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
	if err := c.loadReports().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("broker: %w", err))
	}
	if err := c.loadManager().Balance.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("broker: %w", err))
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

// Validate reports every problem of a worker's settings at once.
func (c ReplicatorConfig) Validate() error {
	var errs []error
	if !ValidName(c.Region) {
		errs = append(errs, fmt.Errorf("replicator.region: %q must be 1-63 lower-case letters, digits or dashes", c.Region))
	}
	if c.ID != "" && !validID(c.ID) {
		errs = append(errs, fmt.Errorf("replicator.id: %q must be letters, digits, '.', '-' or '_'", c.ID))
	}
	if c.NATSURL == "" {
		errs = append(errs, errors.New("replicator.natsUrl: required"))
	}
	rc := c.Config
	if rc.ID == "" {
		rc.ID = "placeholder"
	}
	if rc.ServiceURL == "" {
		errs = append(errs, errors.New("replicator.serviceUrl: required (the region's brokers, pulsar://host:port[,host:port])"))
		rc.ServiceURL = "pulsar://placeholder:6650"
	}
	errs = append(errs, rc.Validate(), ValidAddr("replicator.httpAddr", c.HTTPAddr))
	if err := c.NATSTLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("replicator.natsTls: %w", err))
	}
	return errors.Join(errs...)
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func validID(s string) bool { return idRE.MatchString(s) }

// RegionConfig is the file's region section with the role sections as
// its templates.
func (f File) RegionConfig() Config {
	c := f.Region
	c.Metastore, c.Global, c.Etcd = f.Metastore, f.Global, f.Etcd.EmbedConfig
	c.Bookie, c.Broker, c.Replicator, c.NATS = f.Bookie.Config, f.Broker, f.Replicator, f.NATS.Config
	c.TelemetryOff = f.Telemetry.Disabled
	return c
}
