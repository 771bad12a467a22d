package roles

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/isobar-mq/isobar/internal/natsembed"
)

// NATSConfig is one NATS server of a region.
type NATSConfig struct {
	natsembed.Config `yaml:",inline"`
	// HTTPAddr is where /healthz, /readyz and /metrics are served;
	// default 0.0.0.0:8222, empty serves none.
	HTTPAddr string `yaml:"httpAddr"`
}

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
