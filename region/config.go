package region

import (
	"time"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/roles"
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
	Etcd roles.MetastoreConfig `yaml:"etcd"`
	// Bookie is the bookie `isobar bookie` runs.
	Bookie roles.BookieConfig `yaml:"bookie"`
	// Broker is the broker `isobar broker` runs.
	Broker roles.BrokerConfig `yaml:"broker"`
	// Replicator is the worker `isobar replicator` runs.
	Replicator roles.ReplicatorConfig `yaml:"replicator"`
	// NATS is the server `isobar nats` runs.
	NATS roles.NATSConfig `yaml:"nats"`
	// Proxy is the proxy `isobar proxy` runs.
	Proxy roles.ProxyConfig `yaml:"proxy"`
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

// RegionConfig is the file's region section with the role sections as
// its templates.
func (f File) RegionConfig() Config {
	c := f.Region
	c.Metastore, c.Global, c.Etcd = f.Metastore, f.Global, f.Etcd.EmbedConfig
	c.Bookie, c.Broker, c.Replicator, c.NATS = f.Bookie.Config, f.Broker, f.Replicator, f.NATS.Config
	c.TelemetryOff = f.Telemetry.Disabled
	return c
}
