package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// Health serves a process's /healthz (alive), /readyz (registered and
// able to serve) and /metrics. A process has one; the runner drives it
// and components that run an HTTP server of their own (a broker's admin
// port) mount it there too.
type Health struct {
	metrics http.Handler

	mu       sync.Mutex
	checker  Checker // nil until the component has started
	draining bool
}

// NewHealth returns the health endpoints of a process; metrics serves
// /metrics (nil: 404).
func NewHealth(metrics http.Handler) *Health { return &Health{metrics: metrics} }

// SetReady makes /readyz ask c (nil: not ready). The runner calls it
// once its component has started.
func (h *Health) SetReady(c Checker) {
	h.mu.Lock()
	h.checker = c
	h.mu.Unlock()
}

func (h *Health) setDraining() {
	h.mu.Lock()
	h.draining = true
	h.mu.Unlock()
}

// Ready reports what /readyz reports: nil when the process serves.
func (h *Health) Ready(ctx context.Context) error {
	h.mu.Lock()
	c, draining := h.checker, h.draining
	h.mu.Unlock()
	switch {
	case draining:
		return errors.New("shutting down")
	case c == nil:
		return errors.New("starting")
	}
	return c.Ready(ctx)
}

// Mount adds the health and metrics paths to mux.
func (h *Health) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := h.Ready(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	if h.metrics != nil {
		mux.Handle("GET /metrics", h.metrics)
	}
}

// Runner runs one process: it logs the process's identity, serves the
// health endpoints, starts the component, and stops it on a signal.
type Runner struct {
	// Logger receives the lifecycle's messages. Required.
	Logger *slog.Logger
	// Identity are key/value pairs logged when the process starts (role,
	// name, region, addresses).
	Identity []any
	// HTTPAddr, when set, is where Health is served on a server of the
	// runner's own.
	HTTPAddr string
	// Health is the process's health endpoints; nil makes one without
	// metrics.
	Health *Health
	// ShutdownTimeout bounds the graceful shutdown; zero means 30s. When
	// it passes the component is aborted.
	ShutdownTimeout time.Duration
	// Signals, when set, replaces SIGINT and SIGTERM (tests).
	Signals <-chan os.Signal
	// Ready, when set, is closed once the component has started.
	Ready chan<- struct{}
}

// DuplicateSignalWindow is how soon after the first signal another one
// counts as the same (ignored) rather than as the second (abort).
const DuplicateSignalWindow = time.Second

// ErrListen wraps a failure to open the health endpoints' listener.
var ErrListen = errors.New("lifecycle: cannot listen")

// ErrAborted is returned by Run when a second signal or the shutdown
// deadline aborted the component.
var ErrAborted = errors.New("lifecycle: aborted")

// Run starts c and serves until ctx ends or the first signal arrives, then
// shuts c down gracefully; a second signal, or ShutdownTimeout, aborts it.
// It returns c's start error, the shutdown's error, or ErrAborted.
func (r *Runner) Run(ctx context.Context, c Component) error {
	sigs := r.Signals
	if sigs == nil {
		ch := make(chan os.Signal, 2)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(ch)
		sigs = ch
	}
	h := r.Health
	if h == nil {
		h = NewHealth(nil)
	}
	timeout := r.ShutdownTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	log := r.Logger
	log.Info("starting", append([]any{"pid", os.Getpid()}, r.Identity...)...)

	var srv *http.Server
	if r.HTTPAddr != "" {
		ln, err := net.Listen("tcp", r.HTTPAddr)
		if err != nil {
			return fmt.Errorf("%w: health endpoints on %s: %w", ErrListen, r.HTTPAddr, err)
		}
		mux := http.NewServeMux()
		h.Mount(mux)
		srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		log.Info("health endpoints", "url", "http://"+ln.Addr().String())
	}

	// A signal during start stops the start (its context ends) and the
	// process exits without serving.
	sctx, cancelStart := context.WithCancel(ctx)
	startDone := make(chan error, 1)
	go func() { startDone <- c.Start(sctx) }()
	var startErr error
	select {
	case startErr = <-startDone:
	case <-sigs:
		log.Info("signal while starting: stopping")
		cancelStart()
		startErr = <-startDone
		cancelStart()
		if startErr == nil {
			return r.stop(context.Background(), c, sigs, timeout)
		}
		return nil
	}
	cancelStart()
	if startErr != nil {
		if ctx.Err() != nil {
			// Stopped while starting, as on a signal: the start's error
			// is the stop's doing, not a failure.
			log.Info("context ended while starting: stopped", "err", startErr)
			return nil
		}
		return startErr
	}
	if ch, ok := c.(Checker); ok {
		h.SetReady(ch)
	} else {
		h.SetReady(alwaysReady{})
	}
	log.Info("started", r.Identity...)
	if r.Ready != nil {
		close(r.Ready)
	}
	select {
	case <-ctx.Done():
		log.Info("stopping: context ended")
	case s := <-sigs:
		log.Info("stopping: signal received; a second signal aborts", "signal", s.String())
	}
	h.setDraining()
	return r.stop(context.WithoutCancel(ctx), c, sigs, timeout)
}

// stop shuts c down, aborting it on a second signal or the deadline.
func (r *Runner) stop(ctx context.Context, c Component, sigs <-chan os.Signal, timeout time.Duration) error {
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.Shutdown(sctx) }()
wait:
	for {
		select {
		case err := <-done:
			if err != nil {
				r.Logger.Warn("stopped with errors", "err", err, "took", time.Since(start))
				return err
			}
			r.Logger.Info("stopped", "took", time.Since(start))
			return nil
		case s := <-sigs:
			if time.Since(start) < DuplicateSignalWindow {
				// One keypress can reach a process twice (its process
				// group and a parent that forwards it).
				r.Logger.Info("signal right after the first: ignored", "signal", s.String())
				continue
			}
			r.Logger.Warn("second signal: aborting", "signal", s.String())
			break wait
		case <-sctx.Done():
			r.Logger.Warn("shutdown deadline passed: aborting", "timeout", timeout)
			break wait
		}
	}
	cancel()
	c.Abort()
	// The graceful shutdown ends soon after its context; do not wait for
	// it beyond a moment.
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	return ErrAborted
}

type alwaysReady struct{}

func (alwaysReady) Ready(context.Context) error { return nil }
