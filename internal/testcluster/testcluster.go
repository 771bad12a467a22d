// Package testcluster starts the real parts of a region in-process for
// tests: an embedded etcd server and N bookies on free loopback ports with
// temporary directories, each stopped by t.Cleanup.
package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/bookie/client"
	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/metastore"
)

// Options shape a test cluster.
type Options struct {
	// Bookies is how many bookies to start; zero starts none.
	Bookies int
	// Region names the region; empty means "test".
	Region string
	// Racks, when set, labels bookie i with Racks[i % len(Racks)].
	Racks []string
	// Bookie adjusts bookie i's config before it starts.
	Bookie func(i int, c *bookie.Config)
	// Logger receives component logs; nil discards them (set ISOBAR_TEST_LOG=1 to log to stderr).
	Logger *slog.Logger
}

// Cluster is a running test region's storage layer.
type Cluster struct {
	t      testing.TB
	Region string
	Dir    string
	Meta   *metastore.Store
	logger *slog.Logger
	opts   Options

	etcdMu   sync.Mutex
	etcd     *metastore.Embedded
	etcdAddr string

	mu      sync.Mutex
	bookies []*Bookie
}

// Bookie is one bookie of a test cluster.
type Bookie struct {
	c   *Cluster
	i   int
	cfg bookie.Config

	mu  sync.Mutex
	srv *bookie.Server
	id  string // the bookie's id, known once it started
}

// Start starts etcd and the bookies and waits until every bookie is
// registered. Everything stops when the test ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Region == "" {
		o.Region = "test"
	}
	logger := o.Logger
	if logger == nil {
		if os.Getenv("ISOBAR_TEST_LOG") != "" {
			logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		} else {
			logger = slog.New(slog.DiscardHandler)
		}
	}
	c := &Cluster{t: t, Region: o.Region, Dir: t.TempDir(), logger: logger, opts: o}
	ctx := context.Background()
	e, err := metastore.StartEmbedded(ctx, metastore.EmbedConfig{Dir: filepath.Join(c.Dir, "etcd")}, logger)
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	c.etcd, c.etcdAddr = e, e.ClientAddr()
	t.Cleanup(func() {
		c.etcdMu.Lock()
		defer c.etcdMu.Unlock()
		if c.etcd != nil {
			c.etcd.Close()
		}
	})
	meta, err := metastore.Connect(ctx, metastore.Config{Endpoints: e.Endpoints()})
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	c.Meta = meta
	t.Cleanup(func() { meta.Close() })
	for i := 0; i < o.Bookies; i++ {
		c.AddBookie()
	}
	return c
}

// Endpoints are the etcd client URLs.
func (c *Cluster) Endpoints() []string { return []string{"http://" + c.etcdAddr} }

// Logger is the cluster's logger.
func (c *Cluster) Logger() *slog.Logger { return c.logger }

// Connect opens another metadata store connection (closed at cleanup).
func (c *Cluster) Connect() *metastore.Store {
	c.t.Helper()
	m, err := metastore.Connect(context.Background(), metastore.Config{Endpoints: c.Endpoints()})
	if err != nil {
		c.t.Fatalf("testcluster: %v", err)
	}
	c.t.Cleanup(func() { m.Close() })
	return m
}

// StopEtcd stops the embedded etcd server (data stays on disk).
func (c *Cluster) StopEtcd() {
	c.etcdMu.Lock()
	defer c.etcdMu.Unlock()
	if c.etcd != nil {
		c.etcd.Close()
		c.etcd = nil
	}
}

// StartEtcd restarts the embedded etcd server on its directory and port.
func (c *Cluster) StartEtcd() {
	c.t.Helper()
	c.etcdMu.Lock()
	defer c.etcdMu.Unlock()
	if c.etcd != nil {
		return
	}
	e, err := metastore.StartEmbedded(context.Background(), metastore.EmbedConfig{
		Dir: filepath.Join(c.Dir, "etcd"), ClientAddr: c.etcdAddr}, c.logger)
	if err != nil {
		c.t.Fatalf("testcluster: restart etcd: %v", err)
	}
	c.etcd = e
}

// AddBookie starts one more bookie and waits for its registration.
func (c *Cluster) AddBookie() *Bookie {
	c.t.Helper()
	c.mu.Lock()
	i := len(c.bookies)
	dir := filepath.Join(c.Dir, fmt.Sprintf("bookie-%d", i))
	cfg := bookie.Config{
		Region:          c.Region,
		ListenAddr:      freeAddr(c.t),
		JournalDir:      filepath.Join(dir, "journal"),
		LedgerDir:       filepath.Join(dir, "ledgers"),
		RegistrationTTL: 2 * time.Second,
		UsageInterval:   500 * time.Millisecond,
	}
	if len(c.opts.Racks) > 0 {
		cfg.Rack = c.opts.Racks[i%len(c.opts.Racks)]
	}
	if c.opts.Bookie != nil {
		c.opts.Bookie(i, &cfg)
	}
	b := &Bookie{c: c, i: i, cfg: cfg}
	c.bookies = append(c.bookies, b)
	c.mu.Unlock()
	b.Start()
	c.t.Cleanup(func() { b.Stop() })
	return b
}

// Bookie returns bookie i.
func (c *Cluster) Bookie(i int) *Bookie {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bookies[i]
}

// Bookies returns every bookie started so far.
func (c *Cluster) Bookies() []*Bookie {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Bookie(nil), c.bookies...)
}

// BookieByAddr finds a bookie by its address.
func (c *Cluster) BookieByAddr(addr string) *Bookie {
	for _, b := range c.Bookies() {
		if b.Addr() == addr {
			return b
		}
	}
	return nil
}

// BookieByID finds a bookie by its id (ledger metadata names bookies by id).
func (c *Cluster) BookieByID(id string) *Bookie {
	for _, b := range c.Bookies() {
		if b.ID() == id {
			return b
		}
	}
	return nil
}

// Addr is the bookie's address.
func (b *Bookie) Addr() string { return b.cfg.ListenAddr }

// ID is the bookie's id (from its cookie), once it has started.
func (b *Bookie) ID() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.id
}

// Config is the bookie's config.
func (b *Bookie) Config() bookie.Config { return b.cfg }

// Server is the running server, or nil when stopped.
func (b *Bookie) Server() *bookie.Server {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.srv
}

// Start starts the bookie (again) on its directories and address and waits
// for its registration.
func (b *Bookie) Start() {
	t := b.c.t
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv != nil {
		return
	}
	srv, err := bookie.New(b.cfg, bookie.Deps{Meta: b.c.Meta, Logger: b.c.logger.With("bookie", b.i)})
	if err != nil {
		t.Fatalf("testcluster: bookie %d: %v", b.i, err)
	}
	ctx := context.Background()
	var serr error
	for try := 0; try < 50; try++ {
		if serr = srv.Start(ctx); serr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond) // the port may linger briefly after a stop
	}
	if serr != nil {
		srv.Shutdown(ctx)
		t.Fatalf("testcluster: bookie %d: %v", b.i, serr)
	}
	b.srv = srv
	b.id = srv.ID()
}

// Stop shuts the bookie down gracefully (no-op when stopped).
func (b *Bookie) Stop() {
	b.mu.Lock()
	srv := b.srv
	b.srv = nil
	b.mu.Unlock()
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}
}

// Restart stops and starts the bookie.
func (b *Bookie) Restart() {
	b.Stop()
	b.Start()
}

// BookieConn connects through pool to bookie id of region, at the address
// its registration in meta names, as a ledger client does: tests read a
// ledger's copies from each bookie of its write sets with it.
func BookieConn(ctx context.Context, meta metastore.Meta, region, id string, pool *client.Pool) (*client.Conn, error) {
	kv, err := meta.Get(ctx, proto.BookiesPrefix(metastore.RegionPrefix(region))+id)
	if err != nil {
		return nil, fmt.Errorf("bookie %s: registration: %w", id, err)
	}
	var reg proto.Registration
	if err := json.Unmarshal(kv.Value, &reg); err != nil {
		return nil, fmt.Errorf("bookie %s: registration: %w", id, err)
	}
	return pool.Get(ctx, reg.Address)
}

// WaitFor polls cond until it holds or timeout passes, then fails the test.
func WaitFor(t testing.TB, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	delay := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", timeout)
		}
		time.Sleep(delay)
		if delay < 100*time.Millisecond {
			delay *= 2
		}
	}
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
