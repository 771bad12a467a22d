package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"

	"github.com/isobar-mq/isobar/auth"
)

// Broker is what the proxy needs of a broker's registration (the
// broker/ownership BrokerInfo, which the region converts): its id, its
// listeners and whether it is draining. The proxy links no broker code.
type Broker struct {
	// ID names the broker in its region.
	ID string
	// ServiceURL and HTTPURL are its binary protocol and HTTP addresses
	// ("pulsar://host:port", "http://host:port").
	ServiceURL, HTTPURL string
	// ServiceURLTLS and HTTPURLTLS are the same over TLS; empty without.
	ServiceURLTLS, HTTPURLTLS string
	// Draining is set while the broker shuts down: no new work for it.
	Draining bool
}

// brokerInfo is a broker's registration.
type brokerInfo = Broker

// Brokers gives the live brokers of the region.
type Brokers interface {
	Brokers() []Broker
}

// Deps are the proxy's live dependencies.
type Deps struct {
	// Brokers are the region's live brokers. Required.
	Brokers Brokers
	// Logger; nil discards.
	Logger *slog.Logger
	// MeterProvider records the proxy's metrics; nil means none.
	MeterProvider metric.MeterProvider
}

// ErrClosed is returned by Serve once the server is shut down.
var ErrClosed = errors.New("proxy: server closed")

// Server is the proxy: Serve takes binary-protocol listeners, HTTP is
// the handler of the HTTP ports. It is safe for concurrent use.
type Server struct {
	cfg       Config
	deps      Deps
	log       *slog.Logger
	auth      *auth.Server
	brokerTLS *tls.Config // nil: plaintext to brokers
	m         *metrics
	next      atomic.Uint64 // round robin over the brokers
	lookups   atomic.Int64  // lookup requests in progress
	conns     atomic.Int64  // client connections open

	ctx    context.Context // ends at Abort or when Shutdown closes the connections
	cancel context.CancelFunc

	mu        sync.Mutex
	listeners map[net.Listener]bool
	open      map[*clientConn]bool
	closed    bool
	wg        sync.WaitGroup // connection goroutines
}

// New returns a proxy for cfg.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Brokers == nil {
		return nil, errors.New("proxy: deps.Brokers is required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.MeterProvider == nil {
		deps.MeterProvider = noopmetric.NewMeterProvider()
	}
	cfg = cfg.WithDefaults()
	a, err := auth.NewServer(cfg.Auth)
	if err != nil {
		return nil, fmt.Errorf("proxy.auth: %w", err)
	}
	bt, err := cfg.BrokerClient.TLS.Client()
	if err != nil {
		return nil, fmt.Errorf("proxy.brokerClient.tls: %w", err)
	}
	m, err := newMetrics(deps.MeterProvider)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, deps: deps, log: deps.Logger, auth: a, brokerTLS: bt, m: m,
		ctx: ctx, cancel: cancel, listeners: map[net.Listener]bool{}, open: map[*clientConn]bool{}}
	return s, nil
}

// Serve accepts binary-protocol connections on ln (a TLS listener for
// pulsar+ssl://) until Shutdown or Abort, which close it; it then returns
// ErrClosed.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	s.listeners[ln] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	var backoff time.Duration // after failed accepts: 5ms doubling to 1s
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "in", backoff)
				select {
				case <-s.ctx.Done():
				case <-time.After(backoff):
				}
				continue
			}
			return fmt.Errorf("proxy: accept: %w", err)
		}
		backoff = 0
		s.m.newConn(s.ctx)
		if s.conns.Add(1) > int64(s.cfg.MaxConnections) {
			s.conns.Add(-1)
			s.m.rejected(s.ctx)
			s.log.Warn("connection refused: too many open", "max", s.cfg.MaxConnections, "remote", nc.RemoteAddr().String())
			nc.Close()
			continue
		}
		c := newClientConn(s, nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			s.conns.Add(-1)
			nc.Close()
			return ErrClosed
		}
		s.open[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		s.m.active(s.ctx, 1)
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.open, c)
			s.mu.Unlock()
			s.conns.Add(-1)
			s.m.active(s.ctx, -1)
		}()
	}
}

// isTemporary reports accept errors worth retrying (out of descriptors).
func isTemporary(err error) bool {
	s := err.Error()
	return strings.Contains(s, "too many open files") || strings.Contains(s, "connection reset") || strings.Contains(s, "aborted")
}

// Shutdown stops accepting and closes every connection (a proxy holds no
// state: clients reconnect, through another proxy of the same address,
// and resend what was not acknowledged), then waits for them, bounded
// by ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Abort closes everything at once.
func (s *Server) Abort() { s.stop() }

func (s *Server) stop() {
	s.mu.Lock()
	s.closed = true
	for ln := range s.listeners {
		ln.Close()
	}
	conns := make([]*clientConn, 0, len(s.open))
	for c := range s.open {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.cancel()
	for _, c := range conns {
		c.close()
	}
}

// Connections is the number of client connections open.
func (s *Server) Connections() int { return int(s.conns.Load()) }

// pick returns a live broker for a request that any broker can answer,
// in turn; draining brokers only when nothing else is live. skip names
// brokers already tried.
func (s *Server) pick(skip map[string]bool) (Broker, bool) {
	all := s.deps.Brokers.Brokers()
	var live, draining []Broker
	for _, b := range all {
		if skip[b.ID] {
			continue
		}
		if b.Draining {
			draining = append(draining, b)
		} else {
			live = append(live, b)
		}
	}
	if len(live) == 0 {
		live = draining
	}
	if len(live) == 0 {
		return Broker{}, false
	}
	return live[s.next.Add(1)%uint64(len(live))], true
}

// brokerByHost finds the registered broker one of whose Pulsar URLs
// (pulsar:// or pulsar+ssl://) is at hostport.
func (s *Server) brokerByHost(hostport string) (Broker, bool) {
	for _, b := range s.deps.Brokers.Brokers() {
		for _, u := range []string{b.ServiceURL, b.ServiceURLTLS} {
			if u != "" && hostOf(u) == hostport {
				return b, true
			}
		}
	}
	return Broker{}, false
}

// brokerByHTTP finds the registered broker one of whose HTTP URLs is at
// hostport.
func (s *Server) brokerByHTTP(hostport string) (Broker, bool) {
	for _, b := range s.deps.Brokers.Brokers() {
		for _, u := range []string{b.HTTPURL, b.HTTPURLTLS} {
			if u != "" && hostOf(u) == hostport {
				return b, true
			}
		}
	}
	return Broker{}, false
}

// hostOf is the host:port of a URL ("" if it has none).
func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Host
}

// brokerAddr is where the proxy dials broker b's Pulsar port: its TLS
// listener when the proxy connects over TLS.
func (s *Server) brokerAddr(b Broker) (string, error) {
	if s.brokerTLS != nil {
		if b.ServiceURLTLS == "" {
			return "", fmt.Errorf("broker %s serves no TLS listener (proxy.brokerClient.tls is on)", b.ID)
		}
		return hostOf(b.ServiceURLTLS), nil
	}
	return hostOf(b.ServiceURL), nil
}

// brokerHTTP is the base URL the proxy sends broker b's HTTP requests to.
func (s *Server) brokerHTTP(b Broker) (string, error) {
	if s.brokerTLS != nil {
		if b.HTTPURLTLS == "" {
			return "", fmt.Errorf("broker %s serves no HTTPS listener (proxy.brokerClient.tls is on)", b.ID)
		}
		return b.HTTPURLTLS, nil
	}
	return b.HTTPURL, nil
}

// proxyCredentials are the proxy's own credentials toward brokers:
// its token (read now), or its TLS client certificate.
func (s *Server) proxyCredentials() (method string, data []byte, err error) {
	if f := s.cfg.BrokerClient.TokenFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", nil, fmt.Errorf("proxy.brokerClient.tokenFile: %w", err)
		}
		return auth.TokenMethod, []byte(strings.TrimSpace(string(b))), nil
	}
	if s.cfg.BrokerClient.TLS.CertFile != "" {
		return auth.TLSMethod, nil, nil
	}
	return "", nil, nil
}
