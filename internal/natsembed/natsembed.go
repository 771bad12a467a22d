// Package natsembed owns Isobar's embedded NATS servers: one nats-server per
// region, running in-process, joined to the other regions' servers by NATS
// gateways into one super-cluster. Replicators in every region talk to their
// local server; gateways carry subjects between regions.
//
// Each server's cluster (gateway) name and server name are the region name.
// A server has a client listener and a gateway listener, and lists the
// gateway URLs of the other regions it knows. It need not know all of them:
// NATS gossips gateway URLs, so when B connects to A, A tells B about every
// gateway it knows and makes an implicit gateway back to B (and tells the
// others about B). A federation of regions whose ports are picked at start
// (port 0) therefore comes up by starting a seed region with no gateways and
// then every other region with just the seed's GatewayURL; WaitGateways
// returns once the full mesh is up. For restarts in place, use fixed ports and
// list every other region, so that any surviving region brings the restarted
// one back into the mesh.
//
// With Config.TLS the client port (and routes) speak TLS, and with
// requireClientCert take only clients whose certificate chains to the
// region's CA; with Config.GatewayTLS gateways are mutual TLS between
// certificates of the federation's CA. Certificates are read again when
// their files change. Clients connect with ClientOptions.
//
// There is no JetStream: NATS is only the transport between regions;
// durability lives in the ledgers.
package natsembed

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// DefaultHost is the listen host when Config.Host is empty.
const DefaultHost = "127.0.0.1"

// defaultReadyTimeout bounds Start when ctx has no deadline.
const defaultReadyTimeout = 10 * time.Second

// Config describes one NATS server of a region. It holds settings only.
type Config struct {
	// Region is the region name: the gateway (super-cluster) name of
	// every server of the region, and the server name when Name is empty.
	// Required.
	Region string `yaml:"region"`
	// Name is the server name, unique in the super-cluster; empty means
	// Region (one server per region).
	Name string `yaml:"name"`
	// Host is the listen host for clients, routes and gateways; empty
	// means DefaultHost (127.0.0.1).
	Host string `yaml:"host"`
	// Port is the client port; 0 picks a free port (see Server.ClientURL).
	Port int `yaml:"port"`
	// ClusterPort, when set, listens for routes from the region's other
	// NATS servers (a NATS cluster inside the region, named after it);
	// Routes lists their route URLs ("nats://host:clusterport").
	ClusterPort int      `yaml:"clusterPort"`
	Routes      []string `yaml:"routes"`
	// GatewayPort is the gateway port; 0 picks a free port (see
	// Server.GatewayURL). Use a fixed port for a server that must come back
	// on the same address after a restart.
	GatewayPort int `yaml:"gatewayPort"`
	// GatewayAdvertise is the host:port other regions reach this server's
	// gateway on, when it is not the listen address (NAT, containers).
	GatewayAdvertise string `yaml:"gatewayAdvertise"`
	// Gateways maps other regions' names to their gateway URLs
	// ("nats://host:port", or "nats://user:password@host:port" to present
	// that region's GatewayUser and GatewayPassword). It may be empty for
	// a single region or a seed; the rest of the mesh is discovered
	// through gateway gossip.
	Gateways map[string]string `yaml:"gateways"`
	// GatewayUser and GatewayPassword, when set, are the credentials
	// another region's gateway must present to connect to this one. To
	// connect, this server presents the credentials in the region's URL in
	// Gateways, or its own when the URL has none (a URL learnt through
	// gossip never has any). A federation that shares one pair sets it in
	// every region and gossip keeps working; regions with pairs of their
	// own must list every other region in Gateways with its pair, and a
	// URL another region gossips is then refused (a federation behind an
	// emulated WAN relies on that: each region reaches another only
	// through its own link).
	GatewayUser     string `yaml:"gatewayUser"`
	GatewayPassword string `yaml:"gatewayPassword"`
	// TLS, when set, is TLS on the client port and on routes. Clients
	// must then use TLS (see ClientOptions; the client URL stays
	// nats://); with requireClientCert they must present a certificate
	// that chains to trustCertsFile (the region's CA). Routes are mutual
	// TLS: with a ClusterPort, trustCertsFile is required and the
	// certificate must serve as client and server certificate.
	TLS tlsfiles.Config `yaml:"tls"`
	// GatewayTLS, when set, is mutual TLS on gateways: this server and
	// every other region's present certificates that chain to
	// trustCertsFile (the federation's CA), which is required;
	// requireClientCert is implied. The certificate serves as client and
	// server certificate and must name the host of this server's gateway
	// URL (or GatewayAdvertise) as other regions dial it.
	GatewayTLS tlsfiles.Config `yaml:"gatewayTls"`
}

// Validate reports every problem with c at once, naming the fields.
func (c Config) Validate() error {
	var errs []error
	if c.Region == "" {
		errs = append(errs, errors.New("Region: required"))
	} else if !validName(c.Region) {
		errs = append(errs, fmt.Errorf("Region: %q must be letters, digits, '-' or '_'", c.Region))
	}
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("Port: %d out of range 0..65535", c.Port))
	}
	if c.GatewayPort < 0 || c.GatewayPort > 65535 {
		errs = append(errs, fmt.Errorf("GatewayPort: %d out of range 0..65535", c.GatewayPort))
	}
	if c.Port != 0 && c.Port == c.GatewayPort {
		errs = append(errs, fmt.Errorf("GatewayPort: %d is also the client Port", c.GatewayPort))
	}
	if c.Name != "" && !validName(c.Name) {
		errs = append(errs, fmt.Errorf("Name: %q must be letters, digits, '-' or '_'", c.Name))
	}
	if c.ClusterPort < 0 || c.ClusterPort > 65535 {
		errs = append(errs, fmt.Errorf("ClusterPort: %d out of range 0..65535", c.ClusterPort))
	}
	if len(c.Routes) > 0 && c.ClusterPort == 0 {
		errs = append(errs, errors.New("Routes: need a ClusterPort to listen for routes on"))
	}
	for i, r := range c.Routes {
		if _, err := routeURL(r); err != nil {
			errs = append(errs, fmt.Errorf("Routes[%d]: %v", i, err))
		}
	}
	if c.GatewayAdvertise != "" {
		if _, _, err := net.SplitHostPort(c.GatewayAdvertise); err != nil {
			errs = append(errs, fmt.Errorf("GatewayAdvertise: %q is not host:port", c.GatewayAdvertise))
		}
	}
	if (c.GatewayUser == "") != (c.GatewayPassword == "") {
		errs = append(errs, errors.New("GatewayUser and GatewayPassword: set both or neither"))
	}
	for _, name := range sortedKeys(c.Gateways) {
		raw := c.Gateways[name]
		switch {
		case !validName(name):
			errs = append(errs, fmt.Errorf("Gateways[%q]: region must be letters, digits, '-' or '_'", name))
		case name == c.Region:
			errs = append(errs, fmt.Errorf("Gateways[%q]: is this server's own region", name))
		}
		if _, err := gatewayURL(raw); err != nil {
			errs = append(errs, fmt.Errorf("Gateways[%q]: %v", name, err))
		}
	}
	if c.ClusterPort != 0 {
		errs = append(errs, fieldError("nats.tls", c.TLS.ValidatePeer()))
	} else {
		errs = append(errs, fieldError("nats.tls", c.TLS.Validate()))
	}
	errs = append(errs, fieldError("nats.gatewayTls", c.GatewayTLS.ValidatePeer()))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("natsembed: invalid config: %w", err)
	}
	return nil
}

// fieldError names field in each of tlsfiles' errors ("tls: ..." becomes
// "nats.gatewayTls: ..."), keeping them for errors.Is and As.
func fieldError(field string, err error) error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range j.Unwrap() {
			errs = append(errs, fieldError(field, e))
		}
		return errors.Join(errs...)
	}
	return namedError{field, err}
}

type namedError struct {
	field string
	err   error
}

func (e namedError) Error() string {
	return e.field + ": " + strings.TrimPrefix(e.err.Error(), "tls: ")
}

func (e namedError) Unwrap() error { return e.err }

func validName(s string) bool {
	for _, r := range s {
		ok := r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !ok {
			return false
		}
	}
	return s != ""
}

func gatewayURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// (Not url.Parse's error: it repeats the URL, password and all.)
		return nil, errors.New("not a URL of the form nats://host:port or nats://user:password@host:port")
	}
	if u.Scheme != "nats" || u.Hostname() == "" || u.Port() == "" {
		return nil, fmt.Errorf("%q is not nats://host:port", u.Redacted())
	}
	return u, nil
}

func routeURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "nats" && u.Scheme != "nats-route") || u.Hostname() == "" || u.Port() == "" {
		return nil, fmt.Errorf("%q is not nats://host:port", raw)
	}
	return u, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ErrListen wraps a port Start cannot listen on (in use, not local).
var ErrListen = errors.New("natsembed: cannot listen")

// MaxPayload is the largest message the servers accept.
const MaxPayload = 8 << 20

// Server is a running embedded NATS server of one region.
type Server struct {
	region     string
	ns         *server.Server
	clientURL  string
	gatewayURL string
}

// Start starts the server for cfg and waits until it accepts client
// connections, bounded by ctx (10s if ctx has no deadline). It does not wait
// for gateways; see WaitGateways. logger, when not nil, receives the NATS
// server's log lines, all at debug level with the NATS level as attribute
// "nats_level".
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	host := cfg.Host
	if host == "" {
		host = DefaultHost
	}
	// nats-server only logs a listener it cannot open; say so at once.
	for field, port := range map[string]int{"port": cfg.Port, "gatewayPort": cfg.GatewayPort, "clusterPort": cfg.ClusterPort} {
		if port <= 0 {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return nil, fmt.Errorf("%w: nats.%s %d: %w", ErrListen, field, port, err)
		}
		ln.Close()
	}
	name := cfg.Name
	if name == "" {
		name = cfg.Region
	}
	opts := &server.Options{
		ServerName: name,
		Host:       host,
		Port:       natsPort(cfg.Port),
		NoSigs:     true,
		NoLog:      logger == nil,
		// Replication frames are up to a few MiB (the default is 1 MiB).
		MaxPayload: MaxPayload,
		Gateway: server.GatewayOpts{
			Name:      cfg.Region,
			Host:      host,
			Port:      natsPort(cfg.GatewayPort),
			Advertise: cfg.GatewayAdvertise,
			Username:  cfg.GatewayUser,
			Password:  cfg.GatewayPassword,
		},
	}
	if cfg.ClusterPort != 0 {
		opts.Cluster = server.ClusterOpts{Name: cfg.Region, Host: host, Port: cfg.ClusterPort}
		for _, r := range cfg.Routes {
			u, _ := routeURL(r) // checked by Validate
			opts.Routes = append(opts.Routes, u)
		}
	}
	for _, name := range sortedKeys(cfg.Gateways) {
		u, _ := gatewayURL(cfg.Gateways[name]) // checked by Validate
		opts.Gateway.Gateways = append(opts.Gateway.Gateways, &server.RemoteGatewayOpts{Name: name, URLs: []*url.URL{u}})
	}
	if err := setTLS(opts, cfg); err != nil {
		return nil, fmt.Errorf("natsembed: region %s: %w", cfg.Region, err)
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsembed: region %s: %w", cfg.Region, err)
	}
	if logger != nil {
		debug := logger.Enabled(ctx, slog.LevelDebug)
		// The caller's logger names the region (region.Start adds
		// region=<name>; a process logs it when it starts).
		ns.SetLoggerV2(slogLogger{logger}, debug, false, false)
	}
	ns.Start()

	deadline := time.Now().Add(defaultReadyTimeout)
	if d, ok := ctx.Deadline(); ok {
		deadline = d
	}
	for !ns.ReadyForConnections(min(100*time.Millisecond, max(time.Until(deadline), time.Millisecond))) {
		if err := ctx.Err(); err != nil || time.Now().After(deadline) {
			ns.Shutdown()
			ns.WaitForShutdown()
			if err == nil {
				err = context.DeadlineExceeded
			}
			return nil, fmt.Errorf("natsembed: region %s: not ready for connections: %w", cfg.Region, err)
		}
	}
	gw := ns.GatewayAddr()
	if gw == nil {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("natsembed: region %s: gateway listener not started", cfg.Region)
	}
	return &Server{
		region:     cfg.Region,
		ns:         ns,
		clientURL:  "nats://" + net.JoinHostPort(host, strconv.Itoa(ns.Addr().(*net.TCPAddr).Port)),
		gatewayURL: "nats://" + net.JoinHostPort(host, strconv.Itoa(gw.Port)),
	}, nil
}

// tlsTimeout bounds TLS handshakes on every listener (nats-server's default
// is 2s, short for a loaded machine).
const tlsTimeout = 5 * time.Second

// setTLS sets the TLS options of the client port, routes and gateways.
// nats-server takes the tls.Config as given: it does not need Certificates,
// so tlsfiles' configurations, which read the certificate again when its
// files change, rotate certificates without a restart.
func setTLS(opts *server.Options, cfg Config) error {
	timeout := tlsTimeout.Seconds()
	if cfg.TLS.Enabled() {
		tc, err := cfg.TLS.Server()
		if err != nil {
			return fieldError("nats.tls", err)
		}
		if cfg.TLS.RequireClientCert {
			// The handshake uses the configuration GetConfigForClient
			// returns; nats-server reads ClientAuth off this one to tell
			// clients (INFO tls_verify) that they need a certificate.
			tc.ClientAuth = tls.RequireAndVerifyClientCert
		}
		opts.TLSConfig, opts.TLSVerify, opts.TLSTimeout = tc, cfg.TLS.RequireClientCert, timeout
		if cfg.ClusterPort != 0 {
			rc, err := cfg.TLS.Peer()
			if err != nil {
				return fieldError("nats.tls", err)
			}
			opts.Cluster.TLSConfig, opts.Cluster.TLSTimeout = rc, timeout
		}
	}
	if cfg.GatewayTLS.Enabled() {
		// nats-server clones it for each remote gateway it dials and sets
		// ServerName to the host of the remote's URL.
		gc, err := cfg.GatewayTLS.Peer()
		if err != nil {
			return fieldError("nats.gatewayTls", err)
		}
		opts.Gateway.TLSConfig, opts.Gateway.TLSTimeout = gc, timeout
	}
	return nil
}

// natsPort maps our "0 = pick a free port" to nats-server's, where 0 means
// the default port (or, for gateways, no listener) and -1 means random.
func natsPort(p int) int {
	if p == 0 {
		return server.RANDOM_PORT
	}
	return p
}

// ClientOptions returns the nats.go options of a client of a server whose
// client port has TLS (Config.TLS): nats.Secure with c's configuration,
// which verifies the server against c.TrustCertsFile and presents
// c.CertFile, read again when it changes. The URL stays nats://; nats.go
// upgrades the connection. With TLS on, a server without TLS is refused.
// It returns no options when c does not enable TLS.
func ClientOptions(c tlsfiles.ClientConfig) ([]nats.Option, error) {
	tc, err := c.Client()
	if err != nil {
		return nil, fmt.Errorf("natsembed: client %w", err)
	}
	if tc == nil {
		return nil, nil
	}
	return []nats.Option{nats.Secure(tc)}, nil
}

// Region returns the server's region name.
func (s *Server) Region() string { return s.region }

// ClientURL returns the URL clients connect to, with the actual port. It is
// nats:// with TLS too: clients upgrade as the server asks (ClientOptions).
func (s *Server) ClientURL() string { return s.clientURL }

// GatewayURL returns the URL other regions' servers list in
// Config.Gateways, with the actual port.
func (s *Server) GatewayURL() string { return s.gatewayURL }

// Shutdown stops the server, closing its client and gateway connections, and
// waits until it has stopped. It is safe to call more than once.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}

// gateways returns the regions with an outbound gateway connection up and
// the number of inbound connections up per region.
func (s *Server) gateways() (out map[string]bool, in map[string]int) {
	out, in = map[string]bool{}, map[string]int{}
	gz, err := s.ns.Gatewayz(nil)
	if err != nil {
		return out, in
	}
	for name, r := range gz.OutboundGateways {
		if r != nil && r.Connection != nil {
			out[name] = true
		}
	}
	for name, rs := range gz.InboundGateways {
		for _, r := range rs {
			if r != nil && r.Connection != nil {
				in[name]++
			}
		}
	}
	return out, in
}

// WaitGateways waits until every server has an outbound and an inbound
// gateway connection with every other server's region (a full mesh), or ctx
// ends.
func WaitGateways(ctx context.Context, servers ...*Server) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		missing := missingGateways(servers)
		if missing == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("natsembed: gateways not meshed (%s): %w", missing, ctx.Err())
		case <-tick.C:
		}
	}
}

// missingGateways describes the first missing link, or returns "".
func missingGateways(servers []*Server) string {
	for _, s := range servers {
		out, in := s.gateways()
		for _, o := range servers {
			if o.region == s.region {
				continue
			}
			if !out[o.region] {
				return fmt.Sprintf("%s has no outbound gateway to %s", s.region, o.region)
			}
			if in[o.region] == 0 {
				return fmt.Sprintf("%s has no inbound gateway from %s", s.region, o.region)
			}
		}
	}
	return ""
}

// slogLogger routes nats-server's log lines to a *slog.Logger at debug level.
type slogLogger struct{ l *slog.Logger }

func (l slogLogger) log(level, format string, v []any) {
	if !l.l.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	l.l.Debug(fmt.Sprintf(format, v...), "nats_level", level)
}

func (l slogLogger) Noticef(format string, v ...any) { l.log("notice", format, v) }
func (l slogLogger) Warnf(format string, v ...any)   { l.log("warn", format, v) }
func (l slogLogger) Fatalf(format string, v ...any)  { l.log("fatal", format, v) }
func (l slogLogger) Errorf(format string, v ...any)  { l.log("error", format, v) }
func (l slogLogger) Debugf(format string, v ...any)  { l.log("debug", format, v) }
func (l slogLogger) Tracef(format string, v ...any)  { l.log("trace", format, v) }

// Ready reports whether the server accepts client connections.
func (s *Server) Ready() bool {
	return s.ns.Running() && s.ns.ReadyForConnections(100*time.Millisecond)
}
