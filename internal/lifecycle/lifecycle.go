// Package lifecycle is the one lifecycle every Isobar component follows and
// the one process runner that drives it. A component is built from plain
// settings plus its live dependencies, then started, then either shut down
// gracefully with a deadline (a drain) or aborted as a crash would stop
// it. The runner turns the first SIGINT or SIGTERM into a graceful
// shutdown and a second signal, or the shutdown deadline, into an abort,
// and serves /healthz, /readyz and /metrics.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Component is one part of a process.
type Component interface {
	// Name names the component in logs and health reports.
	Name() string
	// Start starts the component and returns once it serves. When it
	// fails nothing of the component keeps running.
	Start(ctx context.Context) error
	// Shutdown stops the component gracefully (it drains its work and
	// hands what it owns to its peers), bounded by ctx: when ctx ends
	// first, the rest is cut short.
	Shutdown(ctx context.Context) error
	// Abort stops the component at once, as a crash would: no drain, and
	// nothing released in shared state (leases expire by themselves). It
	// may be called while Shutdown runs (it cuts it short) and after it.
	Abort()
}

// Checker is a component that can tell whether it can serve now.
type Checker interface {
	// Ready returns nil when the component is registered and able to
	// serve, else why not.
	Ready(ctx context.Context) error
}

// Group is components started in order and stopped in reverse order. It
// is itself a Component.
type Group struct {
	name  string
	parts []Component

	mu      sync.Mutex
	started int // how many of parts have started (and not stopped)
}

// NewGroup returns a group of parts.
func NewGroup(name string, parts ...Component) *Group {
	return &Group{name: name, parts: parts}
}

// Add appends parts; only before Start.
func (g *Group) Add(parts ...Component) { g.parts = append(g.parts, parts...) }

// Name implements Component.
func (g *Group) Name() string { return g.name }

// Start starts each part in order. When one fails, the parts already
// started are shut down (bounded by StartFailureShutdown) and the error is
// returned.
func (g *Group) Start(ctx context.Context) error {
	for i, p := range g.parts {
		if err := p.Start(ctx); err != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StartFailureShutdown)
			g.Shutdown(sctx)
			cancel()
			g.Abort() // whatever the deadline left running
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		g.mu.Lock()
		g.started = i + 1
		g.mu.Unlock()
	}
	return nil
}

// StartFailureShutdown bounds the shutdown of what had started when a
// later part fails to start.
const StartFailureShutdown = 30 * time.Second

// Shutdown shuts the started parts down in reverse order, each with what
// is left of ctx, and returns every error. When ctx ends, the part whose
// shutdown it cut short and those before it stay started, for Abort.
func (g *Group) Shutdown(ctx context.Context) error {
	var errs []error
	for {
		g.mu.Lock()
		if g.started == 0 {
			g.mu.Unlock()
			return errors.Join(errs...)
		}
		p := g.parts[g.started-1]
		g.mu.Unlock()
		if err := p.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name(), err))
			if ctx.Err() != nil {
				return errors.Join(errs...)
			}
		}
		g.mu.Lock()
		if g.started > 0 && g.parts[g.started-1] == p {
			g.started--
		}
		g.mu.Unlock()
	}
}

// Abort aborts the started parts in reverse order (also the one a
// concurrent Shutdown is stopping).
func (g *Group) Abort() {
	g.mu.Lock()
	n := g.started
	g.started = 0
	g.mu.Unlock()
	for i := n - 1; i >= 0; i-- {
		g.parts[i].Abort()
	}
}

// Ready returns the first started part that is not ready, nil when all
// are (parts that are not Checkers count as ready once started).
func (g *Group) Ready(ctx context.Context) error {
	g.mu.Lock()
	started := g.started
	g.mu.Unlock()
	if started < len(g.parts) {
		return fmt.Errorf("%s: %d of %d parts up", g.name, started, len(g.parts))
	}
	for _, p := range g.parts {
		if c, ok := p.(Checker); ok {
			if err := c.Ready(ctx); err != nil {
				return fmt.Errorf("%s: %w", p.Name(), err)
			}
		}
	}
	return nil
}

// Retry calls fn until it succeeds, ctx ends or attempts run out, waiting
// between attempts with a doubling delay from first up to 5s. It returns
// fn's last error. Components use it for their first connection to a
// dependency (the metadata store) so that a bad address fails start-up in
// bounded time.
func Retry(ctx context.Context, logger *slog.Logger, what string, attempts int, first time.Duration, fn func(context.Context) error) error {
	delay := first
	var err error
	for i := 0; i < attempts; i++ {
		if err = fn(ctx); err == nil {
			return nil
		}
		if i == attempts-1 {
			break
		}
		if logger != nil {
			logger.Warn("retrying", "what", what, "attempt", i+1, "of", attempts, "err", err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Second)
	}
	return fmt.Errorf("%s: gave up after %d attempts: %w", what, attempts, err)
}
