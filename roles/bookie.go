package roles

import (
	"context"
	"errors"
	"log/slog"

	"go.opentelemetry.io/otel/metric"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/metastore"
)

// BookieConfig is one bookie.
type BookieConfig struct {
	bookie.Config `yaml:",inline"`
	// HTTPAddr is where /healthz, /readyz and /metrics are served;
	// default 0.0.0.0:8000, empty serves none.
	HTTPAddr string `yaml:"httpAddr"`
}

// Bookie is one bookie with its own metadata store connection
// (lifecycle.Component).
type Bookie struct {
	label  string // its name in a region ("bookie 2"); empty: by id
	cfg    bookie.Config
	meta   metastore.Config
	logger *slog.Logger
	meter  metric.MeterProvider

	store *metastore.Store
	srv   *bookie.Server
}

// NewBookie returns the bookie for cfg registering in the metadata store
// at meta; logger and meter may be nil.
func NewBookie(cfg bookie.Config, meta metastore.Config, logger *slog.Logger, meter metric.MeterProvider) *Bookie {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Bookie{cfg: cfg, meta: meta, logger: logger, meter: meter}
}

// SetLabel names the bookie in a composition ("bookie 2") instead of by
// its id; call it before Start.
func (b *Bookie) SetLabel(label string) { b.label = label }

// Name implements lifecycle.Component.
func (b *Bookie) Name() string {
	if b.label != "" {
		return b.label
	}
	if b.srv != nil {
		return "bookie " + b.srv.ID()
	}
	return "bookie " + b.cfg.ListenAddr
}

// Start implements lifecycle.Component.
func (b *Bookie) Start(ctx context.Context) error {
	store, err := connectMeta(ctx, b.meta, "metadata store", b.logger)
	if err != nil {
		return err
	}
	srv, err := bookie.New(b.cfg, bookie.Deps{Meta: store, Logger: b.logger, MeterProvider: b.meter})
	if err != nil {
		store.Close()
		return err
	}
	if err := srv.Start(ctx); err != nil {
		srv.Shutdown(context.Background())
		store.Close()
		return err
	}
	b.store, b.srv = store, srv
	return nil
}

// Shutdown implements lifecycle.Component: the bookie stops taking
// requests, answers those in flight, deregisters, flushes and closes its
// storage.
func (b *Bookie) Shutdown(ctx context.Context) error {
	if b.srv == nil {
		return nil
	}
	err := b.srv.Shutdown(ctx)
	b.store.Close()
	return err
}

// Abort implements lifecycle.Component.
func (b *Bookie) Abort() {
	if b.srv == nil {
		return
	}
	b.srv.Abort()
	b.store.Close()
}

// Ready implements lifecycle.Checker.
func (b *Bookie) Ready(context.Context) error {
	if b.srv == nil {
		return errors.New("not started")
	}
	return b.srv.Ready()
}

// Server is the running bookie (nil before Start).
func (b *Bookie) Server() *bookie.Server { return b.srv }
