package region

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/internal/natsembed"
	"github.com/isobar-mq/isobar/metastore"
)

// connectMeta connects to the metadata store at cfg, retrying for
// cfg.StartupTimeout (30s by default), so that a wrong address fails
// start-up with a clear error instead of hanging, while a store that
// starts at the same time as the component is waited for.
func connectMeta(ctx context.Context, cfg metastore.Config, what string, logger *slog.Logger) (*metastore.Store, error) {
	budget := cfg.StartupTimeout
	if budget == 0 {
		budget = 30 * time.Second
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = min(5*time.Second, budget)
	}
	rctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var s *metastore.Store
	err := lifecycle.Retry(rctx, logger, "connect to the "+what+" "+fmt.Sprint(cfg.Endpoints), 1000, 250*time.Millisecond, func(ctx context.Context) error {
		var err error
		s, err = metastore.Connect(ctx, cfg)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, err // stopped while starting
		}
		return nil, fmt.Errorf("%w: %s at %v did not answer within %v: %w", ErrUnreachable, what, cfg.Endpoints, budget, err)
	}
	return s, nil
}

// ErrUnreachable wraps a start-up failure to reach a dependency (the
// metadata store) after the bounded retry.
var ErrUnreachable = errors.New("region: dependency unreachable")

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

// NATS is one embedded NATS server (lifecycle.Component).
type NATS struct {
	cfg    natsembed.Config
	logger *slog.Logger
	s      *natsembed.Server
}

// NewNATS returns the server for cfg; logger may be nil.
func NewNATS(cfg natsembed.Config, logger *slog.Logger) *NATS {
	return &NATS{cfg: cfg, logger: logger}
}

// Name implements lifecycle.Component.
func (n *NATS) Name() string { return "nats " + n.cfg.Region }

// Start implements lifecycle.Component.
func (n *NATS) Start(ctx context.Context) error {
	s, err := natsembed.Start(ctx, n.cfg, n.logger)
	if errors.Is(err, natsembed.ErrListen) {
		return fmt.Errorf("%w: %w", ErrListen, err)
	}
	if err != nil {
		return err
	}
	n.s = s
	return nil
}

// Shutdown implements lifecycle.Component.
func (n *NATS) Shutdown(context.Context) error {
	if n.s != nil {
		n.s.Shutdown()
	}
	return nil
}

// Abort implements lifecycle.Component.
func (n *NATS) Abort() { n.Shutdown(context.Background()) }

// Ready implements lifecycle.Checker.
func (n *NATS) Ready(context.Context) error {
	if n.s == nil || !n.s.Ready() {
		return errors.New("not accepting connections")
	}
	return nil
}

// Server is the running server (nil before Start).
func (n *NATS) Server() *natsembed.Server { return n.s }
