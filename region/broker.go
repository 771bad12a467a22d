package region

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/bookie/racks"
	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/broker/ownership"
	"github.com/isobar-mq/isobar/broker/primary"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/deletes"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/globalconfig/schema"
	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/observability"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
)

// BrokerEndpoints says where one broker listens.
type BrokerEndpoints struct {
	ServiceURL    string `json:"serviceUrl"`
	WebServiceURL string `json:"webServiceUrl"`
	// The TLS listeners' URLs, when the broker serves TLS.
	ServiceURLTLS    string `json:"serviceUrlTls,omitempty"`
	WebServiceURLTLS string `json:"webServiceUrlTls,omitempty"`
}

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
	// SpanExporters receive the spans of telemetry a region makes for
	// itself (when Telemetry is nil); tests pass an in-memory exporter.
	SpanExporters []sdktrace.SpanExporter
}

// withDefaults fills in a discarding logger and, for a component on its
// own, disabled telemetry. (A region or federation given no telemetry
// makes its own instead.)
func (d Deps) withDefaults() Deps {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Telemetry == nil {
		d.Telemetry, _ = observability.New(context.Background(), observability.Config{Disabled: true})
	}
	return d
}

// Broker is one broker with everything it needs of its own: a metadata
// store connection, a ledger client, its view of the policies, its
// registration in the ownership registry, its Pulsar listener and its
// HTTP server (admin REST API, lookups, health, metrics). It is a
// lifecycle.Component.
type Broker struct {
	cfg          BrokerConfig
	meta, global metastore.Config
	deps         Deps
	logger       *slog.Logger
	// updateCluster, when set, is called once the broker serves: the
	// region composition records its brokers in the cluster record.
	clusterData func() policy.ClusterData

	name     string
	bln, hln net.Listener
	// The TLS listeners (nil without TLS) and their configuration.
	tln, hsln net.Listener
	tlsCfg    *tls.Config
	plainHTTP *http.Server // TLSOnly: the plaintext HTTP port's refusals
	eps       BrokerEndpoints
	store     *metastore.Store
	ledgers   *ledger.Client
	auditor   *ledger.Auditor
	// stopAudit stops the auditor's goroutine and waits for it.
	stopAudit func()
	// stopLoadMgr stops the load manager's goroutine (when
	// loadBalancerEnabled) and waits for it.
	stopLoadMgr func()
	pol         *policies
	reg         *ownership.Registry
	placement   *broker.OwnershipPlacement
	gates       *primary.Gates
	b           *broker.Broker
	http        *http.Server
	done        chan struct{} // the Pulsar listener's Serve returned
	stopped     bool
}

// NewBroker returns a broker for cfg whose region metadata store is meta
// and whose global configuration store is global (no endpoints: the
// region keeps its configuration in meta).
func NewBroker(cfg BrokerConfig, meta, global metastore.Config, deps Deps) *Broker {
	deps = deps.withDefaults()
	name := cfg.Name
	if name == "" {
		name = Hostname()
	}
	return &Broker{cfg: cfg, meta: meta, global: global, deps: deps, name: name,
		logger: deps.Logger.With("broker", name)}
}

// Name implements lifecycle.Component.
func (c *Broker) Name() string { return "broker " + c.name }

// Endpoints are the broker's advertised URLs (after Start).
func (c *Broker) Endpoints() BrokerEndpoints { return c.eps }

// Broker is the running broker (nil before Start).
func (c *Broker) Broker() *broker.Broker { return c.b }

// Policies is the broker's policy store (nil before Start).
func (c *Broker) Policies() *policy.Store {
	if c.pol == nil {
		return nil
	}
	return c.pol.store
}

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
var ErrListen = errors.New("region: cannot listen")

// Start implements lifecycle.Component.
func (c *Broker) Start(ctx context.Context) (err error) {
	if err := c.cfg.Validate(); err != nil {
		return err
	}
	defer func() {
		if err != nil && c.b != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			c.Shutdown(sctx)
			cancel()
		} else if err != nil {
			c.release(context.Background())
		}
	}()
	if c.bln, err = listen("broker.listenAddr", c.cfg.ListenAddr, "0.0.0.0:6650"); err != nil {
		return err
	}
	if c.hln, err = listen("broker.httpListenAddr", c.cfg.HTTPListenAddr, "0.0.0.0:8080"); err != nil {
		return err
	}
	if c.cfg.TLS.Enabled() {
		if c.tlsCfg, err = c.cfg.TLS.Server(); err != nil {
			return fmt.Errorf("broker.%w", err)
		}
		if c.tln, err = listen("broker.tlsListenAddr", c.cfg.TLSListenAddr, "0.0.0.0:6651"); err != nil {
			return err
		}
		if c.hsln, err = listen("broker.httpsListenAddr", c.cfg.HTTPSListenAddr, "0.0.0.0:8443"); err != nil {
			return err
		}
	}
	bc := c.cfg.Config
	host := advertisedHost(c.cfg.AdvertisedAddress, c.bln)
	if c.tln != nil {
		if bc.ServiceURLTLS == "" {
			bc.ServiceURLTLS = "pulsar+ssl://" + net.JoinHostPort(advertisedHost(c.cfg.AdvertisedAddress, c.tln), strconv.Itoa(c.tln.Addr().(*net.TCPAddr).Port))
		}
		if bc.HTTPURLTLS == "" {
			bc.HTTPURLTLS = "https://" + net.JoinHostPort(advertisedHost(c.cfg.AdvertisedAddress, c.hsln), strconv.Itoa(c.hsln.Addr().(*net.TCPAddr).Port))
		}
	}
	if bc.ServiceURL == "" {
		bc.ServiceURL = "pulsar://" + net.JoinHostPort(host, strconv.Itoa(c.bln.Addr().(*net.TCPAddr).Port))
	}
	if bc.HTTPURL == "" {
		bc.HTTPURL = "http://" + net.JoinHostPort(advertisedHost(c.cfg.AdvertisedAddress, c.hln), strconv.Itoa(c.hln.Addr().(*net.TCPAddr).Port))
	}
	c.eps = BrokerEndpoints{ServiceURL: bc.ServiceURL, WebServiceURL: bc.HTTPURL, ServiceURLTLS: bc.ServiceURLTLS, WebServiceURLTLS: bc.HTTPURLTLS}
	if c.store, err = connectMeta(ctx, c.meta, "metadata store", c.logger); err != nil {
		return err
	}
	bkTLS, err := c.cfg.BookKeeperTLS.Client()
	if err != nil {
		return fmt.Errorf("broker.bookkeeperTls: %w", err)
	}
	if c.ledgers, err = ledger.NewClient(ledger.Config{Meta: c.store, Region: bc.Region, Logger: c.logger, TLS: bkTLS}); err != nil {
		return fmt.Errorf("ledger client: %w", err)
	}
	cluster := bc.Cluster
	if cluster == "" {
		cluster = bc.Region
	}
	tel := c.deps.Telemetry
	limits := bc.Limits.WithDefaults()
	c.pol, err = openPolicies(ctx, policiesConfig{
		local: c.store, global: c.global, dataDir: c.cfg.DataDir, cluster: cluster,
		hasTopics: c.hasTopics, logger: c.logger, meter: tel.MeterProvider(),
		maxPartitions: limits.MaxPartitionsPerTopic, maxBundles: limits.MaxBundlesPerNamespace,
	})
	if err != nil {
		return err
	}
	pol := c.pol.store
	var b *broker.Broker // set below; OnLost runs only after Start
	placement := &broker.OwnershipPlacement{Policies: pol, Local: c.store, Region: bc.Region}
	c.placement = placement
	c.reg, err = ownership.Start(ctx, ownership.Config{
		Meta:   c.store,
		Region: bc.Region,
		Self: ownership.BrokerInfo{ID: c.name, ServiceURL: bc.ServiceURL, HTTPURL: bc.HTTPURL,
			ServiceURLTLS: bc.ServiceURLTLS, HTTPURLTLS: bc.HTTPURLTLS},
		LeaseTTL:    c.cfg.LeaseTTL,
		LoadReports: c.cfg.loadReports(),
		Logger:      c.logger,
		OnLost: func(ns string, bd topic.Bundle) {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = b.UnloadMatching(ctx, func(n topic.Name) bool { return placement.InBundle(n, ns, bd) })
			}()
		},
		AntiAffinity: func(ctx context.Context, ns string) ([]string, error) {
			p, err := pol.Namespace(ctx, ns)
			if err != nil || p.AntiAffinityGroup == "" {
				return nil, err
			}
			tenant, _, _ := topic.ParseNamespace(ns)
			return pol.AntiAffinityNamespaces(ctx, tenant, p.AntiAffinityGroup)
		},
	})
	if err != nil {
		return err
	}
	placement.Registry = c.reg
	reg := c.reg
	// Automatic recovery: every broker runs the auditor; it acts while
	// this broker is the region's leader (ownership.Leader, the broker
	// leader the admin API names).
	c.auditor, err = c.ledgers.NewAuditor(ledger.AuditorConfig{
		LostBookieRecoveryDelay: c.cfg.LostBookieRecoveryDelay,
		OpenLedgerGracePeriod:   c.cfg.OpenLedgerRereplicationGracePeriod,
		MeterProvider:           tel.MeterProvider(),
		Leader: func(ctx context.Context) bool {
			infos, err := reg.Brokers(ctx)
			if err != nil {
				return false
			}
			l, ok := ownership.Leader(infos)
			return ok && l.ID == c.name
		},
	})
	if err != nil {
		return fmt.Errorf("broker auditor: %w", err)
	}
	{
		actx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); c.auditor.Run(actx) }()
		c.stopAudit = func() { cancel(); <-done }
	}
	// The fences use the global store with timeouts of their own; the
	// schema and delete records go through the bound of the policies
	// (policies.meta), as every admin write does.
	var globalMeta metastore.Meta = c.store // no global store: the region keeps its configuration
	configMeta := globalMeta
	var cached func(string) ([]byte, int64, bool)
	if c.pol.global != nil {
		globalMeta, configMeta, cached = c.pol.global, c.pol.meta, c.pol.cache.Get
	}
	c.gates, err = primary.New(primary.Config{Region: cluster, Broker: c.name, TTL: c.cfg.FenceLeaseTTL}, primary.Deps{
		Global: globalMeta,
		Cached: cached,
		AutoNamespaces: func() []primary.AutoNamespace {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			nss, _ := pol.AutoFailoverNamespaces(ctx)
			out := make([]primary.AutoNamespace, 0, len(nss))
			for _, n := range nss {
				out = append(out, primary.AutoNamespace{Name: n.Namespace, Failover: n.Failover, Clusters: n.Clusters})
			}
			return out
		},
		Promote: func(ctx context.Context, ns, from string) error { return pol.Promote(ctx, ns, from, cluster) },
		Logger:  c.logger,
		Demote:  func(ctx context.Context, ns, topic, to string) { b.Demote(ctx, ns, topic, to) },
	})
	if err != nil {
		return err
	}
	// Schemas live beside the namespaces: in the global store, read
	// through its cache, or in the region's own store without one.
	sc := schema.Config{Meta: configMeta, Logger: c.logger}
	if c.pol.cache != nil {
		sc.Cache = c.pol.cache
	}
	schemas, err := schema.New(sc)
	if err != nil {
		return err
	}
	// Deletes of topics and namespaces reach every region through
	// records in the global store (docs/replication.md).
	dc := deletes.Config{Meta: configMeta, Region: cluster}
	if c.pol.cache != nil {
		dc.Cache = c.pol.cache
	}
	dels, err := deletes.New(dc)
	if err != nil {
		return err
	}
	schemaSettings := func(ctx context.Context, name topic.Name) (schema.Settings, error) {
		return schema.SettingsFor(ctx, pol, name)
	}
	autoCreate := policy.AutoTopicCreation{AllowAutoTopicCreation: true, TopicType: policy.TopicTypeNonPartitioned}
	b, err = broker.New(bc, broker.Deps{
		Schemas:        schemas,
		Deletes:        dels,
		SchemaSettings: schemaSettings,
		Meta:           c.store,
		Ledgers:        c.ledgers,
		Placement:      placement,
		Namespaces:     broker.PolicyNamespaces{Store: pol, Default: autoCreate},
		AuthPolicies:   policy.AuthSource{Store: pol},
		Primary:        c.gates,
		Logger:         c.logger,
		MeterProvider:  tel.MeterProvider(),
		TracerProvider: tel.TracerProvider(),
		OnDrained: func(ctx context.Context) {
			if err := reg.Close(ctx); err != nil {
				c.logger.Warn("releasing bundle ownership failed", "err", err)
			}
		},
	})
	if err != nil {
		return err
	}
	c.b = b
	c.reg.SetLoadSource(broker.NewLoadSampler(b, placement).Sample)
	if c.cfg.LoadBalancerEnabled {
		// The load manager: every broker runs it; it decides while this
		// broker is the region's leader, as the auditor above.
		lmc := c.cfg.loadManager()
		lmc.Logger, lmc.MeterProvider = c.logger, tel.MeterProvider()
		lm, err := broker.NewLoadManager(b, placement, lmc)
		if err != nil {
			return err
		}
		lctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); lm.Run(lctx) }()
		c.stopLoadMgr = func() { cancel(); <-done }
	}
	adm := admin.New(admin.Config{
		Policies:          pol,
		Broker:            b.AdminAPI(),
		Cluster:           cluster,
		Logger:            c.logger,
		AutoTopicCreation: autoCreate,
		Health:            c.healthCheck,
		MaxRequestBytes:   limits.MaxAdminRequestBytes,
		Authz:             b.Authorizer(),
		TopicDefaults:     b.TopicDefaults(),
		Schemas:           schemas,
		Bookies:           racks.NewStore(c.store, bc.Region),
		Recovery:          ledger.Operations{Client: c.ledgers, Auditor: c.auditor},
		PeerClient:        peerClient(c.cfg.TLS),
	})
	mux := http.NewServeMux()
	health := c.deps.Health
	if health == nil {
		health = lifecycle.NewHealth(tel.Handler())
		health.SetReady(c)
	}
	health.Mount(mux)
	mux.Handle("/", adm)
	c.http = &http.Server{Handler: b.Auth().HTTP(mux), ReadHeaderTimeout: 10 * time.Second}
	c.done = make(chan struct{})
	hln, bln := c.hln, c.bln
	plainHTTP := c.http
	if c.cfg.TLSOnly {
		plainHTTP = &http.Server{Handler: tlsOnlyHTTP(b.Auth().HTTP(mux), bc.HTTPURLTLS), ReadHeaderTimeout: 10 * time.Second}
		c.plainHTTP = plainHTTP
		go refusePlaintext(bln, bc.ServiceURLTLS, c.logger)
	}
	go func() {
		if err := plainHTTP.Serve(hln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.logger.Error("http server stopped", "err", err)
		}
	}()
	if c.tln != nil {
		hsln, tln := tls.NewListener(c.hsln, c.tlsCfg), tls.NewListener(c.tln, c.tlsCfg)
		go func() {
			if err := c.http.Serve(hsln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				c.logger.Error("https server stopped", "err", err)
			}
		}()
		go func() {
			if c.cfg.TLSOnly {
				defer close(c.done)
			}
			if err := b.Serve(tln); err != nil {
				c.logger.Error("broker TLS listener stopped", "err", err)
			}
		}()
	}
	if !c.cfg.TLSOnly {
		go func() {
			defer close(c.done)
			if err := b.Serve(bln); err != nil {
				c.logger.Error("broker listener stopped", "err", err)
			}
		}()
	}
	if err := c.registerCluster(ctx, cluster); err != nil {
		return err
	}
	c.logger.Info("broker serving", "serviceUrl", bc.ServiceURL, "webServiceUrl", bc.HTTPURL, "serviceUrlTls", bc.ServiceURLTLS, "webServiceUrlTls", bc.HTTPURLTLS, "region", bc.Region, "cluster", cluster)
	return nil
}

// registerCluster makes sure the cluster record exists: without a global
// store, with tenant public and namespace public/default as in a Pulsar
// standalone; with one, the record alone (a federation's namespaces are
// created by its operator, or by `isobar region` and `isobar dev`). An
// existing record is left alone unless the region composition asks for
// its brokers' URLs.
func (c *Broker) registerCluster(ctx context.Context, cluster string) error {
	pol := c.pol.store
	cd := policy.ClusterData{ServiceURL: c.eps.WebServiceURL, BrokerServiceURL: c.eps.ServiceURL,
		ServiceURLTLS: c.eps.WebServiceURLTLS, BrokerServiceURLTLS: c.eps.ServiceURLTLS}
	if c.clusterData != nil {
		cd = c.clusterData()
	}
	if c.pol.cache == nil {
		if err := pol.EnsureStandalone(ctx, cluster, cd); err != nil {
			return fmt.Errorf("create cluster %s, tenant public and namespace public/default: %w", cluster, err)
		}
		if c.clusterData == nil {
			return nil
		}
	}
	old, err := pol.Cluster(ctx, cluster)
	if err == nil && (c.clusterData == nil || reflect.DeepEqual(old, cd)) {
		return nil // registered (perhaps read from the cache)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err != nil {
		err = pol.CreateCluster(wctx, cluster, cd)
	}
	if err == nil || errors.Is(err, policy.ErrExists) {
		err = pol.UpdateCluster(wctx, cluster, cd)
	}
	if err != nil {
		if _, cerr := pol.Cluster(ctx, cluster); cerr == nil {
			// Known from the cache with other addresses, and the global
			// store cannot be written now: serve anyway.
			c.logger.Warn("could not update the cluster record in the global store; serving with the cached one", "err", err)
			return nil
		}
		return fmt.Errorf("register cluster %s: %w", cluster, err)
	}
	return nil
}

func (c *Broker) hasTopics(ctx context.Context, ns string) (bool, error) {
	if c.b == nil {
		return false, nil
	}
	ts, err := c.b.PersistentTopics(ctx, ns)
	return len(ts) > 0, err
}

// Ready implements lifecycle.Checker: the broker accepts connections, is
// registered in the ownership registry and not draining, can write to the
// metadata store, and sees enough writable bookies for a new ledger.
func (c *Broker) Ready(ctx context.Context) error {
	if c.b == nil || c.reg == nil {
		return errors.New("not started")
	}
	if c.stopped {
		return errors.New("stopped")
	}
	if err := c.b.AcceptErr(); err != nil {
		return err
	}
	if !c.reg.Registered() {
		return errors.New("not registered in the metadata store (lease lost; re-registering)")
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	key := metastore.RegionPrefix(c.cfg.Region) + "health/" + c.name
	if _, err := c.store.Put(ctx, key, []byte(time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
		return fmt.Errorf("cannot write to the metadata store: %w", err)
	}
	n, err := c.ledgers.WritableBookies(ctx)
	if err != nil {
		return fmt.Errorf("cannot list the bookies: %w", err)
	}
	if e := c.cfg.Ledger.WithDefaults().EnsembleSize; n < e {
		return fmt.Errorf("%d writable bookies, fewer than the ensemble size %d", n, e)
	}
	return nil
}

// healthCheck is GET /admin/v2/brokers/health: Ready, then an entry
// round-tripped through the broker's heartbeat ledger (bookies and
// metadata store), as Pulsar's health check round-trips a message.
func (c *Broker) healthCheck(ctx context.Context) error {
	if err := c.Ready(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.b.Heartbeat(ctx, c.name)
}

// Shutdown implements lifecycle.Component with a drain: the broker stops
// taking new bundles, then unloads its bundles one by one (the clients of
// a bundle's topics are told to reconnect and find its next owner at
// once, since the ownership is released right after), then closes its
// listeners and connections and deregisters.
func (c *Broker) Shutdown(ctx context.Context) error {
	if c.b == nil || c.stopped {
		return nil
	}
	c.stopped = true
	c.stopLoadManager()
	var errs []error
	if err := c.reg.Drain(ctx); err != nil {
		c.logger.Warn("drain mark", "err", err)
	}
	if err := c.placement.UnloadOwned(ctx, c.b); err != nil {
		errs = append(errs, err)
	}
	if err := c.b.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := c.gates.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("primary fences: %w", err))
	}
	if err := c.reg.Close(ctx); err != nil && !errors.Is(err, ownership.ErrClosed) {
		errs = append(errs, fmt.Errorf("ownership: %w", err))
	}
	if err := c.http.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("http: %w", err))
	}
	if c.plainHTTP != nil {
		if err := c.plainHTTP.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http: %w", err))
		}
		c.bln.Close() // its refusals (the broker serves only the TLS one)
	}
	<-c.done
	c.release(ctx)
	return errors.Join(errs...)
}

// Abort implements lifecycle.Component: connections drop, topics stay open
// (the next owner recovers their ledgers) and the registration and bundles
// stay until their lease expires.
func (c *Broker) Abort() {
	if c.b == nil {
		return
	}
	c.stopped = true
	c.stopLoadManager()
	c.b.Abort()
	c.http.Close()
	if c.plainHTTP != nil {
		c.plainHTTP.Close()
		c.bln.Close()
	}
	c.reg.Abort() // its lease is no longer kept alive: it expires, as a crashed broker's would
	c.gates.Abort()
	<-c.done
	c.release(context.Background())
}

// stopLoadManager stops the load manager, when it runs.
func (c *Broker) stopLoadManager() {
	if c.stopLoadMgr != nil {
		c.stopLoadMgr()
		c.stopLoadMgr = nil
	}
}

// release closes what Start opened (after the broker stopped, or when
// Start failed).
func (c *Broker) release(context.Context) {
	if c.b == nil {
		// Start failed before the broker served: close what opened.
		if c.gates != nil {
			c.gates.Abort()
		}
		if c.reg != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c.reg.Close(ctx)
			cancel()
		}
		for _, ln := range []net.Listener{c.bln, c.hln, c.tln, c.hsln} {
			if ln != nil {
				ln.Close()
			}
		}
	}
	c.stopLoadManager()
	if c.stopAudit != nil {
		c.stopAudit()
		c.stopAudit = nil
	}
	if c.ledgers != nil {
		c.ledgers.Close()
	}
	if c.pol != nil {
		c.pol.close()
	}
	if c.store != nil {
		c.store.Close()
	}
}

// refusePlaintext answers every connection to a TLS-only broker's
// plaintext Pulsar port with an error naming its TLS URL, after the
// client's first frame (its CONNECT), and closes it. It returns when ln
// is closed.
func refusePlaintext(ln net.Listener, tlsURL string, logger *slog.Logger) {
	refusal := fmt.Errorf("%w: this broker serves only TLS: connect to %s", errkind.ErrAuthentication, tlsURL)
	frame, _ := wire.AppendCommand(nil, wire.NewErrorCommand(0, refusal))
	for {
		nc, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				logger.Warn("plaintext listener stopped", "err", err)
			}
			return
		}
		go func() {
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := wire.ReadFrame(nc, 64<<10, nil); err != nil {
				return
			}
			_, _ = nc.Write(frame)
		}()
	}
}

// tlsOnlyHTTP serves a TLS-only broker's plaintext HTTP port: the health
// and metrics paths, and for the rest a 403 naming the https:// URL.
func tlsOnlyHTTP(mux http.Handler, httpsURL string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics":
			mux.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		b, _ := json.Marshal(map[string]string{"reason": "this broker serves only TLS: use " + httpsURL + r.URL.RequestURI()})
		_, _ = w.Write(b)
	})
}
