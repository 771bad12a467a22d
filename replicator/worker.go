package replicator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/replicator/frame"
	"github.com/isobar-mq/isobar/replicator/pulsarconn"
	"github.com/isobar-mq/isobar/topic"
)

// Worker is one replicator worker of a region: source streams for the
// topics assigned to it and a sink for frames from other regions.
type Worker struct {
	cfg    Config
	deps   Deps
	log    *slog.Logger
	client *pulsarconn.Client // nil when Deps gave both Source and Sink
	dec    *frame.Decoder
	dicts  *dictionaries
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	reg    *metastore.Registration
	sub    Subscription
	sem    chan struct{} // sink concurrency

	mu      sync.Mutex
	streams map[streamKey]*stream
	sinks   map[sinkKey]*sinkProducer
	stats   map[streamKey]*StreamStats

	metrics *metrics
	tracing bool
}

type streamKey struct{ Topic, Remote string }

type sinkKey struct{ Topic, Source string }

// New builds a worker: it neither registers nor serves until Start.
// Close stops it.
func New(cfg Config, deps Deps) (*Worker, error) {
	return newWorker(cfg, deps)
}

// Start registers the worker and starts serving and taking its share of
// the streams. On an error the worker is closed.
func (w *Worker) Start(ctx context.Context) error {
	// The registration holds no state: a live registration of this id is
	// this worker's previous life (or a twin with the same id, which runs
	// the same streams as a standby anyway) and is taken over.
	var err error
	w.reg, err = metastore.Register(ctx, w.deps.Meta, metastore.RegisterConfig{
		Key:      w.workerKey(w.cfg.ID),
		Value:    func() ([]byte, error) { return []byte(`{}`), nil },
		TTL:      w.cfg.LeaseTTL,
		Existing: func([]byte) metastore.Verdict { return metastore.TakeOver },
		Logger:   w.log,
	})
	if err != nil {
		w.Close()
		return fmt.Errorf("replicator %s: register: %w", w.cfg.ID, err)
	}
	if err := w.serve(); err != nil {
		w.Close()
		return err
	}
	w.wg.Add(1)
	go w.assignLoop()
	return nil
}

// newWorker makes a worker that neither registers nor serves yet: Start
// does both, tests of one side do what they need.
func newWorker(cfg Config, deps Deps) (*Worker, error) {
	if err := errors.Join(cfg.Validate(), deps.validate()); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	deps = deps.withDefaults()
	var client *pulsarconn.Client
	if deps.Source == nil || deps.Sink == nil {
		pc := pulsarconn.Config{ServiceURL: cfg.ServiceURL, Logger: deps.Logger}
		if strings.HasPrefix(cfg.ServiceURL, "pulsar+ssl://") {
			tc, err := clientTLS(cfg)
			if err != nil {
				return nil, err
			}
			pc.TLS = tc
		}
		if f := cfg.TokenFile; f != "" {
			pc.Token = func() (string, error) {
				b, err := os.ReadFile(f)
				return strings.TrimSpace(string(b)), err
			}
		}
		var err error
		if client, err = pulsarconn.New(pc); err != nil {
			return nil, err
		}
		if deps.Source == nil {
			deps.Source = brokers{client}
		}
		if deps.Sink == nil {
			deps.Sink = brokers{client}
		}
	}
	wctx, cancel := context.WithCancel(context.Background())
	lim := frame.Limits{MaxFrameBytes: cfg.MaxFrameBytes}
	w := &Worker{
		cfg: cfg, deps: deps, log: deps.Logger, client: client,
		dec:   frame.NewDecoder(lim),
		dicts: newDictionaries(cfg, lim),
		ctx:   wctx, cancel: cancel,
		sem:     make(chan struct{}, cfg.SinkConcurrency),
		streams: map[streamKey]*stream{},
		sinks:   map[sinkKey]*sinkProducer{},
		stats:   map[streamKey]*StreamStats{},
	}
	w.tracing = replication.TracingEnabled(deps.TracerProvider)
	if err := w.initMetrics(); err != nil {
		w.Close()
		return nil, fmt.Errorf("replicator %s: metrics: %w", cfg.ID, err)
	}
	return w, nil
}

// serve subscribes the sink to the frames sent to this region.
func (w *Worker) serve() error {
	sub, err := w.deps.Transport.QueueServe(Subject(w.cfg.Region, "*"), SinkQueue, w.onFrame)
	if err != nil {
		return fmt.Errorf("replicator %s: subscribe: %w", w.cfg.ID, err)
	}
	w.sub = sub
	return nil
}

// Close stops the streams and the sink and deregisters the worker.
func (w *Worker) Close() error {
	if w.sub != nil {
		_ = w.sub.Drain()
	}
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	sinks := w.sinks
	w.sinks = map[sinkKey]*sinkProducer{}
	w.mu.Unlock()
	for _, s := range sinks {
		s.close()
	}
	if w.reg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = w.reg.Close(ctx)
		cancel()
	}
	if w.metrics != nil {
		_ = w.metrics.reg.Unregister()
	}
	if w.client == nil {
		return nil
	}
	return w.client.Close()
}

// Registered reports whether the worker's registration lease is live.
func (w *Worker) Registered() bool { return w.reg != nil && w.reg.Registered() }

// Abort stops the worker as a crash would: no deregistration (its lease
// expires) and no draining.
func (w *Worker) Abort() {
	if w.sub != nil {
		_ = w.sub.Unsubscribe()
	}
	w.cancel()
	if w.client != nil {
		_ = w.client.Close()
	}
	w.wg.Wait()
	if w.reg != nil {
		w.reg.Abort() // no longer kept alive: the lease expires
	}
	if w.metrics != nil {
		_ = w.metrics.reg.Unregister()
	}
}

func (w *Worker) workerKey(id string) string {
	return metastore.RegionPrefix(w.cfg.Region) + "replicators/" + id
}

// assignLoop re-evaluates which streams exist and which of them this
// worker runs: at once when a topic appears or goes, or a worker joins or
// leaves (watches on the region's topics and workers), and every
// ScanInterval for what no watch shows (policy changes). A new topic's
// stream thus starts within milliseconds rather than a scan later. (The
// registration registers again by itself when its lease is lost.)
func (w *Worker) assignLoop() {
	defer w.wg.Done()
	t := time.NewTicker(w.cfg.ScanInterval)
	defer t.Stop()
	kick := make(chan struct{}, 1)
	w.wg.Add(2)
	go w.watchKeys(metastore.RegionPrefix(w.cfg.Region)+"topics/", kick)
	go w.watchKeys(metastore.RegionPrefix(w.cfg.Region)+"replicators/", kick)
	for {
		if err := w.assign(w.ctx); err != nil && w.ctx.Err() == nil {
			w.log.Warn("replication assignment", "err", err)
		}
		select {
		case <-w.ctx.Done():
			w.mu.Lock()
			for _, s := range w.streams {
				s.cancel()
			}
			w.mu.Unlock()
			return
		case <-t.C:
		case <-kick:
		}
	}
}

// watchKeys kicks the assignment when a key under prefix appears or goes
// (not when one changes: a topic's metadata is rewritten on every cursor
// save).
func (w *Worker) watchKeys(prefix string, kick chan<- struct{}) {
	defer w.wg.Done()
	known := map[string]bool{}
	if keys, err := w.deps.Meta.ListKeys(w.ctx, prefix); err == nil {
		for _, k := range keys {
			known[k] = true
		}
	}
	for ev := range w.deps.Meta.Watch(w.ctx, prefix, 0) {
		switch {
		case ev.Reset:
		case ev.Deleted:
			if !known[ev.Key] {
				continue
			}
			delete(known, ev.Key)
		case known[ev.Key]:
			continue
		default:
			known[ev.Key] = true
		}
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

// Streams lists the (topic, remote) pairs that exist now: persistent
// topics of this region whose namespace replicates to another cluster.
func (w *Worker) wantedStreams(ctx context.Context) ([]streamKey, error) {
	prefix := metastore.RegionPrefix(w.cfg.Region) + "topics/"
	keys, err := w.deps.Meta.ListKeys(ctx, prefix)
	if err != nil {
		return nil, err
	}
	remotes := map[string][]string{} // by namespace
	var out []streamKey
	for _, key := range keys {
		rest := strings.TrimPrefix(key, prefix)
		parts := strings.SplitN(rest, "/", 4)
		if len(parts) != 4 || parts[2] != string(topic.Persistent) {
			continue
		}
		ns := parts[0] + "/" + parts[1]
		name := "persistent://" + parts[0] + "/" + parts[1] + "/" + parts[3]
		rs, ok := remotes[ns]
		if !ok {
			if p, err := w.deps.Policies.Namespace(ctx, ns); err == nil {
				rs = w.others(p.ReplicationClusters)
			}
			remotes[ns] = rs
		}
		// A topic's own replication clusters replace its namespace's.
		if tn, err := topic.Parse(name); err == nil {
			if tp, ok, err := w.deps.Policies.TopicPolicies(ctx, tn); err == nil && ok && len(tp.ReplicationClusters) > 0 {
				rs = w.others(tp.ReplicationClusters)
			}
		}
		for _, r := range rs {
			out = append(out, streamKey{Topic: name, Remote: r})
		}
	}
	return out, nil
}

// others are the clusters other than this region of a replication list
// that includes it (none when it does not).
func (w *Worker) others(clusters []string) []string {
	if !slices.Contains(clusters, w.cfg.Region) {
		return nil
	}
	var out []string
	for _, c := range clusters {
		if c != w.cfg.Region {
			out = append(out, c)
		}
	}
	return out
}

// liveWorkers lists the registered workers of the region.
func (w *Worker) liveWorkers(ctx context.Context) ([]string, error) {
	prefix := metastore.RegionPrefix(w.cfg.Region) + "replicators/"
	keys, err := w.deps.Meta.ListKeys(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, key := range keys {
		out = append(out, strings.TrimPrefix(key, prefix))
	}
	if !slices.Contains(out, w.cfg.ID) {
		out = append(out, w.cfg.ID)
	}
	return out, nil
}

// Owner picks the worker of a stream among workers by rendezvous hashing:
// when a worker joins or leaves, only the streams it wins or held move.
func Owner(topicName, remote string, workers []string) string {
	var best string
	var bestScore uint64
	for _, wk := range workers {
		h := fnv.New64a()
		h.Write([]byte(topicName))
		h.Write([]byte{0})
		h.Write([]byte(remote))
		h.Write([]byte{0})
		h.Write([]byte(wk))
		if s := h.Sum64(); best == "" || s > bestScore || s == bestScore && wk < best {
			best, bestScore = wk, s
		}
	}
	return best
}

func (w *Worker) assign(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	wanted, err := w.wantedStreams(ctx)
	if err != nil {
		return err
	}
	workers, err := w.liveWorkers(ctx)
	if err != nil {
		return err
	}
	mine := map[streamKey]bool{}
	for _, k := range wanted {
		if Owner(k.Topic, k.Remote, workers) == w.cfg.ID {
			mine[k] = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, s := range w.streams {
		if !mine[k] {
			s.cancel()
			delete(w.streams, k)
		}
	}
	for k := range mine {
		if _, ok := w.streams[k]; ok {
			continue
		}
		st := w.stats[k]
		if st == nil {
			st = &StreamStats{Topic: k.Topic, Remote: k.Remote}
			w.stats[k] = st
		}
		s := newStream(w, k, st)
		w.streams[k] = s
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			s.run()
		}()
	}
	return nil
}

// StreamStats are a source stream's counters.
type StreamStats struct {
	Topic, Remote string
	// Entries and bytes sent and confirmed by the remote, raw and as
	// compressed on the wire; Frames counts confirmed frames.
	Entries, RawBytes, WireBytes, Frames int64
	// Skipped counts entries not sent: replicated from elsewhere or
	// excluded by replicate_to.
	Skipped int64
	// DictVersion is the version of the namespace's dictionary the last
	// confirmed frame was compressed with (0: none).
	DictVersion int
	// SubStates counts subscription-state records the remote confirmed.
	SubStates int64
	// Errors counts failed frames; LastError is the latest.
	Errors    int64
	LastError string
	// LastProgress is when the remote last confirmed a frame.
	LastProgress time.Time
	// Active: this worker is the stream's active consumer.
	Active bool
}

// Stats returns a copy of the source streams' counters, sorted.
func (w *Worker) Stats() []StreamStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]StreamStats, 0, len(w.stats))
	for _, s := range w.stats {
		out = append(out, s.snapshot())
	}
	slices.SortFunc(out, func(a, b StreamStats) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return strings.Compare(a.Remote, b.Remote)
	})
	return out
}

var statsMu sync.Mutex // guards every StreamStats

func (s *StreamStats) snapshot() StreamStats {
	statsMu.Lock()
	defer statsMu.Unlock()
	return *s
}

func (s *StreamStats) update(fn func(*StreamStats)) {
	statsMu.Lock()
	defer statsMu.Unlock()
	fn(s)
}

// replyError is a sink's refusal of a frame; code is its
// HeaderErrorCode, if any.
type replyError struct{ msg, code string }

func (e *replyError) Error() string { return "replicator: remote refused the frame: " + e.msg }

// ErrRefused matches a frame the remote sink refused.
var ErrRefused = errors.New("replicator: frame refused")

func (e *replyError) Is(target error) bool { return target == ErrRefused }

// clientTLS is the TLS configuration of the worker's connections to its
// brokers.
func clientTLS(cfg Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.TLSTrustCertsFile != "" {
		b, err := os.ReadFile(cfg.TLSTrustCertsFile)
		if err != nil {
			return nil, fmt.Errorf("replicator.tlsTrustCertsFile: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("replicator.tlsTrustCertsFile: %s holds no PEM certificate", cfg.TLSTrustCertsFile)
		}
	}
	if cfg.TLSCertFile != "" || cfg.TLSKeyFile != "" {
		pair, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("replicator.tlsCertFile and tlsKeyFile: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}
