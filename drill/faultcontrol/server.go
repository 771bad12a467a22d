package faultcontrol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/internal/wanproxy"
)

// Readiness probes of a region (Config's Ready).
const (
	readyTimeout = time.Second
	readyEvery   = 100 * time.Millisecond
)

// Server is `isobar fault-control`: the fault-control API over regions
// that run elsewhere. A kill or a start runs the region's hook command,
// then waits until its readiness URL says it is down or up; partition,
// blackhole and heal act on the WAN links it proxies (package wanproxy),
// or partition and heal run the region's hook commands for them.
// It is a lifecycle.Component: the links and the API listen from Start to
// Shutdown.
type Server struct {
	cfg    Config
	logger *slog.Logger
	hc     *http.Client

	links   []*link // set by Start, before the API serves
	regions map[string]*regionCtl
	ln      net.Listener
	srv     *http.Server
	// ctx ends at Abort: it bounds the hooks running then.
	ctx    context.Context
	cancel context.CancelFunc
}

// link is one proxied link of a region.
type link struct {
	from, to string
	*wanproxy.Link
}

// regionCtl is one region's settings and the lock that makes its hooks
// run one at a time.
type regionCtl struct {
	cfg  RegionConfig
	busy chan struct{} // holds a token while a hook runs

	mu  sync.Mutex
	wan string // with partition and heal hooks: "up", "cut" or "unknown"
}

func (r *regionCtl) wanState() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wan
}

func (r *regionCtl) setWAN(state string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wan = state
}

// acquire waits for the region's previous hook to end, or for ctx.
func (r *regionCtl) acquire(ctx context.Context, action Action) (release func(), err error) {
	select {
	case r.busy <- struct{}{}:
		return func() { <-r.busy }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s %s: gave up waiting for the region's previous action: %w", action, r.cfg.Name, ctx.Err())
	}
}

// NewServer returns a server for cfg, which must be valid (see
// Config.Validate); logger may be nil.
func NewServer(cfg Config, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, logger: logger, regions: map[string]*regionCtl{}}
	// Probes bypass any proxy from the environment: they go to the
	// regions' own addresses.
	s.hc = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: readyTimeout}
	for _, r := range cfg.Regions {
		rc := &regionCtl{cfg: r, busy: make(chan struct{}, 1)}
		if len(r.Partition) > 0 {
			rc.wan = wanproxy.StateUp.String() // as links start
		}
		s.regions[r.Name] = rc
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Name implements lifecycle.Component.
func (s *Server) Name() string { return "fault control" }

// Start listens on every link and on the API's address. When one cannot
// listen, nothing is left listening and the error wraps
// lifecycle.ErrListen.
func (s *Server) Start(context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	for _, r := range s.cfg.Regions {
		for _, lc := range r.Links {
			l, err := wanproxy.Listen(lc.Listen, lc.Target)
			if err != nil {
				s.closeLinks()
				return fmt.Errorf("%w: link %s -> %s on %s: %w", lifecycle.ErrListen, r.Name, lc.To, lc.Listen, err)
			}
			l.SetLatency(s.cfg.Latency)
			s.links = append(s.links, &link{from: r.Name, to: lc.To, Link: l})
		}
	}
	ln, err := net.Listen("tcp", s.cfg.listenAddr())
	if err != nil {
		s.closeLinks()
		return fmt.Errorf("%w: fault-control API on %s: %w", lifecycle.ErrListen, s.cfg.listenAddr(), err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: Handler(s), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return nil
}

// Shutdown stops accepting requests, waits for those in flight (a hook
// runs to its end or its timeout) until ctx ends, then closes the links.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	if s.srv != nil {
		err = s.srv.Shutdown(ctx)
	}
	s.cancel()
	return errors.Join(err, s.closeLinks())
}

// Abort stops at once: the API, the links, and any hook still running
// (its process group is killed).
func (s *Server) Abort() {
	s.cancel()
	if s.srv != nil {
		s.srv.Close()
	}
	s.closeLinks()
}

func (s *Server) closeLinks() error {
	var errs []error
	for _, l := range s.links {
		errs = append(errs, l.Close()) // again: nil
	}
	return errors.Join(errs...)
}

// URL is the API's base URL (after Start).
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Links describes the links (after Start): "from->to listen -> target".
func (s *Server) Links() []string {
	var out []string
	for _, l := range s.links {
		out = append(out, fmt.Sprintf("%s->%s %s -> %s", l.from, l.to, l.Addr(), l.Target()))
	}
	return out
}

// Regions implements Backend: a region is up while its readiness URL
// answers 2xx; its WAN state is "up" when every link into and out of it
// is, else the state of the first that is not. A region with partition
// and heal hooks is "cut" after its partition hook succeeded, "up" at
// first and after its heal hook succeeded, "unknown" after either
// failed.
func (s *Server) Regions(ctx context.Context) []RegionState {
	out := make([]RegionState, len(s.cfg.Regions))
	var wg sync.WaitGroup
	for i, r := range s.cfg.Regions {
		out[i] = RegionState{Name: r.Name, WAN: s.wanState(r.Name)}
		if len(r.Partition) > 0 {
			out[i].WAN = s.regions[r.Name].wanState()
		}
		wg.Go(func() { out[i].Up = s.probe(ctx, r.Ready) == nil })
	}
	wg.Wait()
	return out
}

func (s *Server) wanState(region string) string {
	ls := s.touching(region)
	if len(ls) == 0 {
		return ""
	}
	for _, l := range ls {
		if st := l.State(); st != wanproxy.StateUp {
			return st.String()
		}
	}
	return wanproxy.StateUp.String()
}

// touching is the links into and out of region, its own first.
func (s *Server) touching(region string) []*link {
	var own, in []*link
	for _, l := range s.links {
		switch region {
		case l.from:
			own = append(own, l)
		case l.to:
			in = append(in, l)
		}
	}
	return append(own, in...)
}

// Act implements Backend. Kills and starts of one region run one at a
// time, each to its end (or HookTimeout) even if the caller goes away.
func (s *Server) Act(ctx context.Context, name string, action Action) error {
	r, ok := s.regions[name]
	if !ok {
		return fmt.Errorf("%w: no region %q in the fault-control configuration", ErrUnknownRegion, name)
	}
	switch action {
	case Kill, Start:
		return s.hook(ctx, r, action)
	case Partition, Blackhole, Heal:
		if len(r.cfg.Partition) > 0 {
			return s.wanHook(ctx, r, action)
		}
		ls := s.touching(name)
		if len(ls) == 0 {
			return fmt.Errorf("%w: region %s has none in the fault-control configuration (regions[].links)", ErrNoWAN, name)
		}
		for _, l := range ls {
			switch action {
			case Partition:
				l.Cut()
			case Blackhole:
				l.Blackhole()
			default:
				l.Up()
			}
		}
		s.logger.Info("fault control: "+string(action), "region", name, "links", len(ls))
		return nil
	}
	return fmt.Errorf("faultcontrol: unknown action %q", action)
}

// hook kills or starts region r: its hook, then the wait for its
// readiness URL to agree, within HookTimeout.
func (s *Server) hook(ctx context.Context, r *regionCtl, action Action) error {
	release, err := r.acquire(ctx, action)
	if err != nil {
		return err
	}
	defer release()
	timeout := s.cfg.hookTimeout()
	// The action runs to its end whether or not the caller waits.
	actx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	start := time.Now()
	argv, wantUp := r.cfg.Kill, false
	if action == Start {
		argv, wantUp = r.cfg.Start, true
	}
	if err := runHook(actx, argv); err != nil {
		s.logger.Warn("fault control: hook failed", "region", r.cfg.Name, "action", action, "err", err)
		return fmt.Errorf("%s %s: hook %w", action, r.cfg.Name, err)
	}
	hookDone := time.Now()
	var last error
	for {
		last = s.probe(actx, r.cfg.Ready)
		if (last == nil) == wantUp {
			break
		}
		select {
		case <-actx.Done():
			state := "still answers"
			if wantUp {
				state = fmt.Sprintf("does not answer 2xx (%v)", last)
			}
			return fmt.Errorf("%s %s: the hook succeeded in %v, but %s %s after %v in all", action, r.cfg.Name,
				hookDone.Sub(start).Round(time.Millisecond), r.cfg.Ready, state, timeout)
		case <-time.After(readyEvery):
		}
	}
	s.logger.Info("fault control: "+string(action), "region", r.cfg.Name,
		"hook", hookDone.Sub(start).Round(time.Millisecond), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// wanHook partitions or heals region r with its hook, within
// HookTimeout; a blackhole is refused, as a command cannot do one.
func (s *Server) wanHook(ctx context.Context, r *regionCtl, action Action) error {
	if action == Blackhole {
		return fmt.Errorf("%w: region %s is cut by its partition and heal commands, which cannot black-hole it (blackhole needs regions[].links)", ErrNoWAN, r.cfg.Name)
	}
	release, err := r.acquire(ctx, action)
	if err != nil {
		return err
	}
	defer release()
	// The hook runs to its end whether or not the caller waits.
	actx, cancel := context.WithTimeout(s.ctx, s.cfg.hookTimeout())
	defer cancel()
	start := time.Now()
	argv, after := r.cfg.Partition, wanproxy.StateCut.String()
	if action == Heal {
		argv, after = r.cfg.Heal, wanproxy.StateUp.String()
	}
	if err := runHook(actx, argv); err != nil {
		// Part of it may have been done: the state is not known.
		r.setWAN("unknown")
		s.logger.Warn("fault control: hook failed", "region", r.cfg.Name, "action", action, "err", err)
		return fmt.Errorf("%s %s: hook %w", action, r.cfg.Name, err)
	}
	r.setWAN(after)
	s.logger.Info("fault control: "+string(action), "region", r.cfg.Name, "hook", time.Since(start).Round(time.Millisecond))
	return nil
}

// probe is nil when url answers 2xx within readyTimeout, else why not.
func (s *Server) probe(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s", resp.Status)
	}
	return nil
}
