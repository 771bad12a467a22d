// Package roles holds the single roles of an isobar process, each a
// lifecycle.Component with its settings: an etcd member (Metastore), a
// Bookie, a Broker, an embedded NATS server, a Replicator worker and a
// Proxy. A command runs one of them as a process (`isobar broker`);
// package region composes them into a whole region, a federation and
// its WAN (`isobar region`, `isobar dev`).
package roles

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/observability"
)

// Deps are what every component of a process shares: its logger, its
// telemetry (one registry per process) and its health endpoints.
type Deps struct {
	// Logger; nil discards.
	Logger *slog.Logger
	// Telemetry provides metrics and traces; nil means none.
	Telemetry *observability.Telemetry
	// Health is the process's /healthz, /readyz and /metrics, served on
	// every broker's HTTP port as well; nil serves the broker's own
	// readiness and the telemetry's metrics there.
	Health *lifecycle.Health
}

// withDefaults fills in a discarding logger and, for a component on its
// own, disabled telemetry.
func (d Deps) withDefaults() Deps {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Telemetry == nil {
		d.Telemetry, _ = observability.New(context.Background(), observability.Config{Disabled: true})
	}
	return d
}

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
var ErrUnreachable = errors.New("roles: dependency unreachable")

// advertisedHost is the host put in the broker's URLs.
func advertisedHost(adv string, ln net.Listener) string {
	if adv != "" {
		return adv
	}
	host, _, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		return Hostname()
	}
	return host
}

func listen(field, addr, def string) (net.Listener, error) {
	if addr == "" {
		addr = def
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrListen, field, addr, err)
	}
	return ln, nil
}

// ErrListen wraps a failure to open a listener (the port is in use, the
// address is not local).
var ErrListen = errors.New("roles: cannot listen")

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

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func validID(s string) bool { return idRE.MatchString(s) }
