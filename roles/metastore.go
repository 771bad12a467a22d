package roles

import (
	"context"
	"errors"
	"log/slog"

	"github.com/isobar-mq/isobar/metastore"
)

// MetastoreConfig is one member of an etcd cluster: a region's metadata
// store or the global configuration store.
type MetastoreConfig struct {
	metastore.EmbedConfig `yaml:",inline"`
	// HTTPAddr is where /healthz, /readyz and /metrics are served;
	// default 0.0.0.0:2381, empty serves none.
	HTTPAddr string `yaml:"httpAddr"`
}

// Metastore is one etcd member (lifecycle.Component).
type Metastore struct {
	cfg    metastore.EmbedConfig
	logger *slog.Logger
	e      *metastore.Embedded
}

// NewMetastore returns the member for cfg; logger may be nil.
func NewMetastore(cfg metastore.EmbedConfig, logger *slog.Logger) *Metastore {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Metastore{cfg: cfg, logger: logger}
}

// Name implements lifecycle.Component.
func (m *Metastore) Name() string { return "metastore " + m.cfg.Name }

// Start implements lifecycle.Component: it returns once the member serves
// (a member of a cluster: once a quorum has formed).
func (m *Metastore) Start(ctx context.Context) error {
	e, err := metastore.StartEmbedded(ctx, m.cfg, m.logger)
	if err != nil {
		return err
	}
	m.e = e
	return nil
}

// Shutdown implements lifecycle.Component.
func (m *Metastore) Shutdown(context.Context) error {
	if m.e != nil {
		m.e.Close()
		m.e = nil
	}
	return nil
}

// Abort implements lifecycle.Component (in a process of its own the
// member is killed; in-process it can only be closed).
func (m *Metastore) Abort() { m.Shutdown(context.Background()) }

// Ready implements lifecycle.Checker: the member knows a leader.
func (m *Metastore) Ready(context.Context) error {
	if m.e == nil {
		return errors.New("not running")
	}
	if !m.e.HasLeader() {
		return errors.New("no etcd leader (no quorum)")
	}
	return nil
}

// Endpoints are the member's client URLs.
func (m *Metastore) Endpoints() []string { return m.e.Endpoints() }
