package roles

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/isobar-mq/isobar/globalconfig/deletes"
	"github.com/isobar-mq/isobar/internal/natsembed"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/replicator"
)

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

// Replicator is one replicator worker with its own metadata store and
// NATS connections and its own view of the policies (a
// lifecycle.Component).
type Replicator struct {
	cfg          ReplicatorConfig
	meta, global metastore.Config
	deps         Deps
	logger       *slog.Logger

	store *metastore.Store
	pol   *policies
	nc    *nats.Conn
	w     *replicator.Worker
}

// NewReplicator returns a worker for cfg whose region metadata store is
// meta and whose global configuration store is global.
func NewReplicator(cfg ReplicatorConfig, meta, global metastore.Config, deps Deps) *Replicator {
	deps = deps.withDefaults()
	if cfg.ID == "" {
		cfg.ID = Hostname()
	}
	return &Replicator{cfg: cfg, meta: meta, global: global, deps: deps,
		logger: deps.Logger.With("replicator", cfg.ID)}
}

// Name implements lifecycle.Component.
func (c *Replicator) Name() string { return "replicator " + c.cfg.ID }

// Worker is the running worker (nil before Start and after Abort).
func (c *Replicator) Worker() *replicator.Worker { return c.w }

// Start implements lifecycle.Component.
func (c *Replicator) Start(ctx context.Context) (err error) {
	if err := c.cfg.Validate(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			c.release()
		}
	}()
	if c.store, err = connectMeta(ctx, c.meta, "metadata store", c.logger); err != nil {
		return err
	}
	tel := c.deps.Telemetry
	c.pol, err = openPolicies(ctx, policiesConfig{
		local: c.store, global: c.global, dataDir: c.cfg.DataDir, cluster: c.cfg.Region,
		logger: c.logger, meter: tel.MeterProvider(),
	})
	if err != nil {
		return err
	}
	// The worker must come up while NATS is down (it serves the local
	// side as soon as NATS is back), so the connection retries forever.
	opts, err := natsembed.ClientOptions(c.cfg.NATSTLS)
	if err != nil {
		return fmt.Errorf("replicator.natsTls: %w", err)
	}
	opts = append(opts, nats.Name(c.cfg.ID), nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(true))
	c.nc, err = nats.Connect(c.cfg.NATSURL, opts...)
	if err != nil {
		return fmt.Errorf("nats %s: %w", c.cfg.NATSURL, err)
	}
	var delMeta metastore.Meta = c.store
	dc := deletes.Config{Region: c.cfg.Region}
	if c.pol.global != nil {
		delMeta, dc.Cache = c.pol.meta, c.pol.cache
	}
	dels, err := deletes.New(delMeta, dc)
	if err != nil {
		return err
	}
	w, err := replicator.New(c.cfg.Config, replicator.Deps{
		Transport: replicator.NATSTransport(c.nc), Meta: c.store, Policies: c.pol.store, Deletes: dels, Logger: c.logger,
		MeterProvider: tel.MeterProvider(), TracerProvider: tel.TracerProvider(),
	})
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	c.w = w
	c.logger.Info("replicator serving", "serviceUrl", c.cfg.ServiceURL, "nats", c.cfg.NATSURL)
	return nil
}

// Ready implements lifecycle.Checker: the worker is registered and
// connected to NATS.
func (c *Replicator) Ready(context.Context) error {
	switch {
	case c.w == nil:
		return errors.New("not running")
	case !c.nc.IsConnected():
		return errors.New("not connected to NATS")
	case !c.w.Registered():
		return errors.New("not registered in the metadata store")
	}
	return nil
}

// Shutdown implements lifecycle.Component: the worker deregisters, so the
// other workers of the region take its streams over at their next scan,
// stops its streams and its sink, and closes its connections.
func (c *Replicator) Shutdown(context.Context) error {
	if c.w == nil {
		return nil
	}
	err := c.w.Close()
	c.w = nil
	c.release()
	return err
}

// Abort implements lifecycle.Component: no deregistration (the lease
// expires) and no draining.
func (c *Replicator) Abort() {
	if c.w == nil {
		return
	}
	c.w.Abort()
	c.w = nil
	c.release()
}

func (c *Replicator) release() {
	if c.nc != nil {
		c.nc.Close()
	}
	if c.pol != nil {
		c.pol.close()
	}
	if c.store != nil {
		c.store.Close()
	}
}
