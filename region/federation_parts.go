package region

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/isobar-mq/isobar/globalconfig"
	"github.com/isobar-mq/isobar/internal/natsembed"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/replicator"
)

// runningWorker is one replicator worker with its NATS connection.
type runningWorker struct {
	w  *replicator.Worker
	nc *nats.Conn
	id string
}

// startGlobal connects to the global configuration store and starts the
// region's cache of it.
func (r *Region) startGlobal(ctx context.Context) error {
	// Not Connect: the global store may be down while the region starts;
	// the cache then serves its persisted copy.
	gm, err := metastore.Open(metastore.Config{Endpoints: r.cfg.GlobalEndpoints, Logger: r.logger})
	if err != nil {
		return fmt.Errorf("region %s: global store: %w", r.cfg.Name, err)
	}
	r.globalMeta = gm
	c, err := globalconfig.Start(ctx, globalconfig.Config{
		Meta:          gm,
		Persist:       filepath.Join(r.cfg.DataDir, "globalconfig"),
		Logger:        r.logger.With("component", "globalconfig"),
		MeterProvider: r.telemetry.MeterProvider(),
	})
	if err != nil {
		return fmt.Errorf("region %s: global configuration cache: %w", r.cfg.Name, err)
	}
	r.global = c
	return nil
}

// startNATS starts the embedded NATS server, or uses the external one.
func (r *Region) startNATS(ctx context.Context) error {
	if r.cfg.NATS == nil {
		r.natsURL = r.cfg.NATSURL
		return nil
	}
	nc := *r.cfg.NATS
	nc.Region = r.cfg.Name
	if nc.Host == "" {
		nc.Host = r.cfg.Host
	}
	if nc.Logger == nil {
		nc.Logger = r.logger.With("component", "nats")
	}
	s, err := natsembed.Start(ctx, nc)
	if err != nil {
		return fmt.Errorf("region %s: nats: %w", r.cfg.Name, err)
	}
	r.nats = s
	r.natsURL = s.ClientURL()
	return nil
}

func (r *Region) startWorker(ctx context.Context, i int) (*runningWorker, error) {
	id := fmt.Sprintf("%s-replicator-%d", r.cfg.Name, i)
	nc, err := nats.Connect(r.natsURL, nats.Name(id), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		return nil, fmt.Errorf("region %s: replicator %d: nats: %w", r.cfg.Name, i, err)
	}
	wc := r.cfg.Replicator
	wc.Region, wc.ID, wc.NATS, wc.Meta, wc.Policies = r.cfg.clusterName(), id, nc, r.meta, r.policies
	// Every broker of the region, starting at a different one per worker:
	// lookups move on to the next when one is down.
	var hosts []string
	for j := range r.brokers {
		hosts = append(hosts, strings.TrimPrefix(r.brokers[(i+j)%len(r.brokers)].eps.ServiceURL, "pulsar://"))
	}
	wc.ServiceURL = "pulsar://" + strings.Join(hosts, ",")
	if wc.Logger == nil {
		wc.Logger = r.logger
	}
	wc.MeterProvider, wc.TracerProvider = r.telemetry.MeterProvider(), r.telemetry.TracerProvider()
	w, err := replicator.Start(ctx, wc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("region %s: replicator %d: %w", r.cfg.Name, i, err)
	}
	return &runningWorker{w: w, nc: nc, id: id}, nil
}

func (r *Region) stopWorkers() {
	for _, rw := range r.workers {
		if rw.w != nil {
			rw.w.Close()
			rw.nc.Close()
		}
	}
	r.workers = nil
}

// KillReplicator stops replicator worker i as a crash would (for fault
// tests); RestartReplicator starts it again.
func (r *Region) KillReplicator(i int) {
	rw := r.workers[i]
	rw.w.Abort()
	rw.nc.Close()
	rw.w = nil
}

// RestartReplicator starts a killed replicator worker i again.
func (r *Region) RestartReplicator(ctx context.Context, i int) error {
	rw, err := r.startWorker(ctx, i)
	if err != nil {
		return err
	}
	r.workers[i] = rw
	return nil
}

// Replicators returns the running replicator workers (nil entries for
// killed ones).
func (r *Region) Replicators() []*replicator.Worker {
	out := make([]*replicator.Worker, len(r.workers))
	for i, rw := range r.workers {
		out[i] = rw.w
	}
	return out
}

// NATS returns the region's embedded NATS server (nil when external).
func (r *Region) NATS() *natsembed.Server { return r.nats }

// RestartNATS stops the embedded NATS server and starts it again on the
// same ports (its clients reconnect by themselves).
func (r *Region) RestartNATS(ctx context.Context, down time.Duration) error {
	if r.nats == nil {
		return fmt.Errorf("region %s: no embedded nats server", r.cfg.Name)
	}
	cfg := *r.cfg.NATS
	cfg.Region, cfg.Logger = r.cfg.Name, r.logger.With("component", "nats")
	if cfg.Host == "" {
		cfg.Host = r.cfg.Host
	}
	cfg.Port, cfg.GatewayPort = portOf(r.nats.ClientURL()), portOf(r.nats.GatewayURL())
	r.nats.Shutdown()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	s, err := natsembed.Start(ctx, cfg)
	if err != nil {
		return err
	}
	r.nats = s
	return nil
}

// Global is the region's cache of the global configuration store (nil
// when the region keeps its configuration in its own etcd).
func (r *Region) Global() *globalconfig.Cache { return r.global }

func portOf(u string) int {
	i := strings.LastIndexByte(u, ':')
	if i < 0 {
		return 0
	}
	p, _ := strconv.Atoi(u[i+1:])
	return p
}
