package region

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/broker/ownership"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// BrokerEndpoints says where one broker listens.
type BrokerEndpoints struct {
	ServiceURL    string `json:"serviceUrl"`
	WebServiceURL string `json:"webServiceUrl"`
}

// runningBroker is one broker of the region with its ownership registry
// and HTTP server.
type runningBroker struct {
	meta   *metastore.Store // the broker's own etcd client, as a separate process would have
	b      *broker.Broker
	reg    *ownership.Registry
	http   *http.Server
	eps    BrokerEndpoints
	done   chan struct{} // the binary listener's Serve returned
	killed bool
}

// startBrokers starts the ledger client, the policy store and the region's
// brokers, each with a binary listener, an HTTP listener (admin API,
// lookups) and a registration in the ownership registry.
func (r *Region) startBrokers(ctx context.Context) error {
	cfg := r.cfg
	lc, err := ledger.NewClient(ledger.Config{Meta: r.meta, Region: cfg.Name, Logger: r.logger})
	if err != nil {
		return fmt.Errorf("region %s: ledger client: %w", cfg.Name, err)
	}
	r.ledgers = lc
	cluster := cfg.clusterName()
	pc := policy.Config{Meta: r.meta, LocalCluster: cluster, HasTopics: r.hasTopics, MeterProvider: r.telemetry.MeterProvider()}
	if r.global != nil {
		pc.Meta, pc.Cache = r.globalMeta, r.global
	}
	pol, err := policy.New(pc)
	if err != nil {
		return fmt.Errorf("region %s: %w", cfg.Name, err)
	}
	r.policies = pol
	for i := range cfg.Brokers {
		rb, err := r.startBroker(ctx, i, lc, pol)
		if err != nil {
			return fmt.Errorf("region %s: broker %d: %w", cfg.Name, i, err)
		}
		r.brokers = append(r.brokers, rb)
	}
	first := r.brokers[0].eps
	cd := policy.ClusterData{ServiceURL: first.WebServiceURL, BrokerServiceURL: first.ServiceURL, NATSURL: r.natsURL}
	if r.global != nil {
		// One region of a federation: register (or refresh) its cluster;
		// the federation creates the shared tenants and namespaces.
		if old, err := pol.Cluster(ctx, cluster); err == nil && reflect.DeepEqual(old, cd) {
			return nil // registered as it is (read from the cache)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := pol.CreateCluster(wctx, cluster, cd)
		if errors.Is(err, policy.ErrExists) {
			err = pol.UpdateCluster(wctx, cluster, cd)
		}
		if err != nil {
			if _, cerr := pol.Cluster(ctx, cluster); cerr == nil {
				// Known from the cache with other addresses, and the
				// global store cannot be written now: serve anyway.
				r.logger.Warn("could not update this region's cluster record in the global store; serving with the cached one", "err", err)
				return nil
			}
			return fmt.Errorf("region %s: register cluster %s: %w", cfg.Name, cluster, err)
		}
		return nil
	}
	err = pol.EnsureStandalone(ctx, cluster, cd)
	if err != nil {
		return fmt.Errorf("region %s: create cluster %s, tenant public and namespace public/default: %w", cfg.Name, cluster, err)
	}
	return nil
}

func (r *Region) hasTopics(ctx context.Context, ns string) (bool, error) {
	if len(r.brokers) == 0 {
		return false, nil
	}
	ts, err := r.brokers[0].b.PersistentTopics(ctx, ns)
	return len(ts) > 0, err
}

func (r *Region) startBroker(ctx context.Context, i int, lc *ledger.Client, pol *policy.Store) (_ *runningBroker, err error) {
	cfg := r.cfg
	port := func(base int) string {
		if base == 0 {
			return "0"
		}
		return strconv.Itoa(base + i)
	}
	bln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, port(cfg.BrokerPort)))
	if err != nil {
		return nil, err
	}
	hln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, port(cfg.HTTPPort)))
	if err != nil {
		bln.Close()
		return nil, err
	}
	defer func() {
		if err != nil {
			bln.Close()
			hln.Close()
		}
	}()
	rb := &runningBroker{
		eps: BrokerEndpoints{
			ServiceURL:    "pulsar://" + bln.Addr().String(),
			WebServiceURL: "http://" + hln.Addr().String(),
		},
		done: make(chan struct{}),
	}
	logger := r.logger.With("broker", i)
	meta, err := metastore.Connect(ctx, metastore.Config{Endpoints: r.metaEndpoints, Logger: logger})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			meta.Close()
		}
	}()
	rb.meta = meta
	var b *broker.Broker // set below; OnLost runs only after Start
	placement := &broker.OwnershipPlacement{Policies: pol}
	reg, err := ownership.Start(ctx, ownership.Config{
		Meta:   meta,
		Region: cfg.Name,
		Self: ownership.BrokerInfo{
			ID:         fmt.Sprintf("broker-%s", strconv.Itoa(bln.Addr().(*net.TCPAddr).Port)),
			ServiceURL: rb.eps.ServiceURL,
			HTTPURL:    rb.eps.WebServiceURL,
		},
		LeaseTTL: cfg.BrokerLeaseTTL,
		Logger:   logger,
		OnLost: func(ns string, bd topic.Bundle) {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = b.UnloadMatching(ctx, func(n topic.Name) bool { return placement.InBundle(n, ns, bd) })
			}()
		},
	})
	if err != nil {
		return nil, err
	}
	placement.Registry = reg
	rb.reg = reg
	bc := cfg.Broker
	bc.Region, bc.Cluster, bc.Meta, bc.Ledgers = cfg.Name, cfg.clusterName(), meta, lc
	bc.ServiceURL, bc.HTTPURL = rb.eps.ServiceURL, rb.eps.WebServiceURL
	bc.Placement = placement
	bc.Namespaces = broker.PolicyNamespaces{Store: pol, Default: policy.AutoTopicCreation{AllowAutoTopicCreation: true, TopicType: policy.TopicTypeNonPartitioned}}
	bc.Logger = logger
	bc.MeterProvider = r.telemetry.MeterProvider()
	bc.TracerProvider = r.telemetry.TracerProvider()
	bc.OnDrained = func(ctx context.Context) {
		if err := reg.Close(ctx); err != nil {
			logger.Warn("releasing bundle ownership failed", "err", err)
		}
	}
	b, err = broker.New(bc)
	if err != nil {
		reg.Close(ctx)
		return nil, err
	}
	rb.b = b
	adm := admin.New(admin.Config{
		Policies:          pol,
		Topics:            b.Admin(),
		Cluster:           cfg.clusterName(),
		Logger:            logger,
		AutoTopicCreation: policy.AutoTopicCreation{AllowAutoTopicCreation: true, TopicType: policy.TopicTypeNonPartitioned},
	})
	mux := http.NewServeMux()
	mux.Handle("/metrics", r.telemetry.Handler())
	mux.Handle("/", adm)
	rb.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := rb.http.Serve(hln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server stopped", "err", err)
		}
	}()
	go func() {
		defer close(rb.done)
		if err := b.Serve(bln); err != nil {
			logger.Error("broker listener stopped", "err", err)
		}
	}()
	logger.Info("broker started", "serviceUrl", rb.eps.ServiceURL, "webServiceUrl", rb.eps.WebServiceURL)
	return rb, nil
}

// stopBrokers shuts the brokers down (each unloads its topics, gives up
// its bundles, then closes connections), then the ledger client.
func (r *Region) stopBrokers(ctx context.Context) error {
	var errs []error
	for i := len(r.brokers) - 1; i >= 0; i-- {
		rb := r.brokers[i]
		if rb.killed {
			continue
		}
		if err := rb.b.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("broker %d: %w", i, err))
		}
		if err := rb.reg.Close(ctx); err != nil && !errors.Is(err, ownership.ErrClosed) {
			errs = append(errs, fmt.Errorf("broker %d: ownership: %w", i, err))
		}
		if err := rb.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("broker %d: http: %w", i, err))
		}
		<-rb.done
		rb.meta.Close()
	}
	r.brokers = nil
	if r.ledgers != nil {
		r.ledgers.Close()
		r.ledgers = nil
	}
	return errors.Join(errs...)
}

// KillBroker stops broker i as a crash would (for fault tests): its
// connections drop, its topics stay open, and its etcd client closes, so
// its registration and bundles stay until their lease expires.
func (r *Region) KillBroker(i int) {
	rb := r.brokers[i]
	rb.killed = true
	rb.b.Abort()
	rb.http.Close()
	rb.meta.Close()
	// Stop the registry's goroutines; with the etcd client closed it cannot
	// revoke its lease, which expires as a crashed broker's would.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	rb.reg.Close(ctx)
	cancel()
	<-rb.done
}

// Brokers lists where the region's brokers listen.
func (r *Region) Brokers() []BrokerEndpoints {
	out := make([]BrokerEndpoints, 0, len(r.brokers))
	for _, rb := range r.brokers {
		out = append(out, rb.eps)
	}
	return out
}

// Policies is the region's policy store (nil without brokers).
func (r *Region) Policies() *policy.Store { return r.policies }

// Broker returns broker i (for tests).
func (r *Region) Broker(i int) *broker.Broker { return r.brokers[i].b }
