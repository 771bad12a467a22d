package roles

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/isobar-mq/isobar/broker/ownership"
	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/proxy"
)

// ProxyConfig is one proxy (`isobar proxy`): the proxy's settings plus
// where it listens, in the brokers' shape.
type ProxyConfig struct {
	proxy.Config `yaml:",inline"`
	// Name names the proxy in logs and metrics; empty means the host name.
	Name string `yaml:"name"`
	// ListenAddr is the Pulsar protocol listener; empty means
	// 0.0.0.0:6650.
	ListenAddr string `yaml:"listenAddr"`
	// HTTPListenAddr serves the forwarded admin REST API and lookups,
	// /healthz, /readyz and /metrics; empty means 0.0.0.0:8080.
	HTTPListenAddr string `yaml:"httpListenAddr"`
	// TLS, when its certificate and key are set, serves the Pulsar
	// protocol (pulsar+ssl://) on TLSListenAddr and HTTP on
	// HTTPSListenAddr as well, as a broker's tls does.
	TLS tlsfiles.Config `yaml:"tls"`
	// TLSListenAddr is the Pulsar protocol's TLS listener; empty means
	// 0.0.0.0:6651.
	TLSListenAddr string `yaml:"tlsListenAddr"`
	// HTTPSListenAddr is the HTTP TLS listener; empty means 0.0.0.0:8443.
	HTTPSListenAddr string `yaml:"httpsListenAddr"`
}

// Validate reports every problem of a proxy's settings at once.
func (c ProxyConfig) Validate() error {
	var errs []error
	if !ValidName(c.Region) {
		errs = append(errs, fmt.Errorf("proxy.region: %q must be 1-63 lower-case letters, digits or dashes", c.Region))
	}
	if c.Name != "" && !validID(c.Name) {
		errs = append(errs, fmt.Errorf("proxy.name: %q must be letters, digits, '.', '-' or '_'", c.Name))
	}
	errs = append(errs, ValidAddr("proxy.listenAddr", c.ListenAddr), ValidAddr("proxy.httpListenAddr", c.HTTPListenAddr),
		ValidAddr("proxy.tlsListenAddr", c.TLSListenAddr), ValidAddr("proxy.httpsListenAddr", c.HTTPSListenAddr))
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("proxy.%w", err))
	}
	errs = append(errs, c.Config.Validate())
	return errors.Join(errs...)
}

// ProxyEndpoints says where a proxy listens: the URLs clients use.
type ProxyEndpoints struct {
	ServiceURL       string `json:"serviceUrl"`
	WebServiceURL    string `json:"webServiceUrl"`
	ServiceURLTLS    string `json:"serviceUrlTls,omitempty"`
	WebServiceURLTLS string `json:"webServiceUrlTls,omitempty"`
}

// Proxy is one proxy with its metadata store connection, its view of the
// region's brokers and its listeners (lifecycle.Component).
type Proxy struct {
	cfg    ProxyConfig
	meta   metastore.Config
	deps   Deps
	name   string
	logger *slog.Logger

	bln, hln, tln, hsln net.Listener
	eps                 ProxyEndpoints
	store               *metastore.Store
	view                *ownership.View
	px                  *proxy.Server
	servers             []*http.Server
	serving             chan struct{} // closed when the binary listeners' Serve returned
	stopped             bool
}

// NewProxy returns a proxy for cfg whose region's metadata store is meta.
func NewProxy(cfg ProxyConfig, meta metastore.Config, deps Deps) *Proxy {
	deps = deps.withDefaults()
	name := cfg.Name
	if name == "" {
		name = Hostname()
	}
	return &Proxy{cfg: cfg, meta: meta, deps: deps, name: name, logger: deps.Logger.With("proxy", name)}
}

// Name implements lifecycle.Component.
func (p *Proxy) Name() string { return "proxy " + p.name }

// Endpoints are the proxy's URLs (after Start).
func (p *Proxy) Endpoints() ProxyEndpoints { return p.eps }

// Server is the running proxy (nil before Start).
func (p *Proxy) Server() *proxy.Server { return p.px }

// Start implements lifecycle.Component.
func (p *Proxy) Start(ctx context.Context) (err error) {
	if err := p.cfg.Validate(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			p.Abort()
		}
	}()
	if p.bln, err = listen("proxy.listenAddr", p.cfg.ListenAddr, "0.0.0.0:6650"); err != nil {
		return err
	}
	if p.hln, err = listen("proxy.httpListenAddr", p.cfg.HTTPListenAddr, "0.0.0.0:8080"); err != nil {
		return err
	}
	var tlsCfg *tls.Config
	if p.cfg.TLS.Enabled() {
		if tlsCfg, err = p.cfg.TLS.Server(); err != nil {
			return fmt.Errorf("proxy.%w", err)
		}
		if p.tln, err = listen("proxy.tlsListenAddr", p.cfg.TLSListenAddr, "0.0.0.0:6651"); err != nil {
			return err
		}
		if p.hsln, err = listen("proxy.httpsListenAddr", p.cfg.HTTPSListenAddr, "0.0.0.0:8443"); err != nil {
			return err
		}
	}
	url := func(scheme string, ln net.Listener) string {
		return scheme + net.JoinHostPort(advertisedHost("", ln), strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	p.eps = ProxyEndpoints{ServiceURL: url("pulsar://", p.bln), WebServiceURL: url("http://", p.hln)}
	if p.tln != nil {
		p.eps.ServiceURLTLS, p.eps.WebServiceURLTLS = url("pulsar+ssl://", p.tln), url("https://", p.hsln)
	}
	if p.store, err = connectMeta(ctx, p.meta, "metadata store", p.logger); err != nil {
		return err
	}
	if p.view, err = ownership.WatchBrokers(ctx, p.store, p.cfg.Region, p.logger); err != nil {
		return err
	}
	tel := p.deps.Telemetry
	if p.px, err = proxy.New(p.cfg.Config, proxy.Deps{Brokers: proxyBrokers{p.view}, Logger: p.logger, MeterProvider: tel.MeterProvider()}); err != nil {
		return err
	}
	mux := http.NewServeMux()
	health := p.deps.Health
	if health == nil {
		health = lifecycle.NewHealth(tel.Handler())
		health.SetReady(p)
	}
	health.Mount(mux)
	mux.Handle("/", p.px.HTTP())
	handler := p.px.Auth().HTTP(mux)
	p.serving = make(chan struct{})
	bins := []net.Listener{p.bln}
	https := map[net.Listener]bool{p.hln: true}
	if p.tln != nil {
		bins = append(bins, tls.NewListener(p.tln, tlsCfg))
		https[tls.NewListener(p.hsln, tlsCfg)] = true
	}
	for ln := range https {
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		p.servers = append(p.servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				p.logger.Error("http server stopped", "err", err)
			}
		}()
	}
	left := make(chan struct{}, len(bins))
	for _, ln := range bins {
		go func() {
			defer func() { left <- struct{}{} }()
			if err := p.px.Serve(ln); err != nil && !errors.Is(err, proxy.ErrClosed) {
				p.logger.Error("proxy listener stopped", "err", err)
			}
		}()
	}
	go func() {
		for range bins {
			<-left
		}
		close(p.serving)
	}()
	p.logger.Info("proxy serving", "serviceUrl", p.eps.ServiceURL, "webServiceUrl", p.eps.WebServiceURL,
		"serviceUrlTls", p.eps.ServiceURLTLS, "webServiceUrlTls", p.eps.WebServiceURLTLS, "region", p.cfg.Region)
	return nil
}

// Ready implements lifecycle.Checker: the proxy serves and sees a live
// broker of its region.
func (p *Proxy) Ready(context.Context) error {
	switch {
	case p.px == nil:
		return errors.New("not started")
	case p.stopped:
		return errors.New("stopped")
	}
	for _, b := range p.view.Brokers() {
		if !b.Draining {
			return nil
		}
	}
	return fmt.Errorf("no live broker registered in region %s", p.cfg.Region)
}

// Shutdown implements lifecycle.Component: the listeners close, then the
// connections (clients reconnect, through another proxy of the same
// address, and resend what was not acknowledged).
func (p *Proxy) Shutdown(ctx context.Context) error {
	if p.px == nil || p.stopped {
		return nil
	}
	p.stopped = true
	var errs []error
	for _, srv := range p.servers {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http: %w", err))
		}
	}
	if err := p.px.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	if p.serving != nil {
		<-p.serving
	}
	p.release()
	return errors.Join(errs...)
}

// Abort implements lifecycle.Component.
func (p *Proxy) Abort() {
	p.stopped = true
	for _, srv := range p.servers {
		srv.Close()
	}
	if p.px != nil {
		p.px.Abort()
	}
	if p.serving != nil {
		<-p.serving
	}
	p.release()
}

func (p *Proxy) release() {
	for _, ln := range []net.Listener{p.bln, p.hln, p.tln, p.hsln} {
		if ln != nil {
			ln.Close()
		}
	}
	if p.view != nil {
		p.view.Close()
		p.view = nil
	}
	if p.store != nil {
		p.store.Close()
		p.store = nil
	}
}

// proxyBrokers gives the proxy the region's live brokers from the
// ownership registrations, in the proxy's terms (proxy.Broker).
type proxyBrokers struct{ v *ownership.View }

// Brokers implements proxy.Brokers.
func (b proxyBrokers) Brokers() []proxy.Broker {
	infos := b.v.Brokers()
	out := make([]proxy.Broker, len(infos))
	for i, in := range infos {
		out[i] = proxy.Broker{
			ID: in.ID, ServiceURL: in.ServiceURL, HTTPURL: in.HTTPURL,
			ServiceURLTLS: in.ServiceURLTLS, HTTPURLTLS: in.HTTPURLTLS, Draining: in.Draining,
		}
	}
	return out
}
