// Package ledger is the ledger client, after BookKeeper's: it creates
// ledgers on an ensemble of bookies, writes entries to a write quorum and
// acknowledges them in order once an ack quorum has them, replaces failed
// bookies with ensemble changes, recovers (fences and closes) ledgers whose
// writer is gone, and reads and tails them. Ledger metadata lives in the
// region's metadata store (docs/format/ledger-metadata.md); the design is in
// docs/ledger.md. The quorum, placement and recovery decisions are pure code
// (quorum.go, placement.go, core.go) driven by thin goroutines doing I/O.
package ledger

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/bookie/client"
	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/bookie/racks"
	"github.com/isobar-mq/isobar/metastore"
)

// Errors. Check them with errors.Is; they are wrapped with the ledger and
// entry they concern.
var (
	// ErrFenced: the ledger was fenced or taken over by recovery (or closed
	// by someone else); this writer can add nothing more.
	ErrFenced = errors.New("ledger: fenced")
	// ErrNoLedger: no metadata for that ledger id.
	ErrNoLedger = errors.New("ledger: no such ledger")
	// ErrNoEntry: the entry is not (yet) readable: beyond the last add
	// confirmed, or on no bookie of its write set.
	ErrNoEntry = errors.New("ledger: no such entry")
	// ErrNotEnoughBookies: too few live, writable bookies to create a ledger
	// or keep an ack quorum.
	ErrNotEnoughBookies = errors.New("ledger: not enough bookies")
	// ErrCorrupt: every copy that could be read failed its checksum.
	ErrCorrupt = errors.New("ledger: entry corrupt")
	// ErrClosed: the writer (or client) is closed, or a tailed ledger was
	// closed with nothing after the entry waited for.
	ErrClosed = errors.New("ledger: closed")
	// ErrInvalid: a bad argument or option.
	ErrInvalid = errors.New("ledger: invalid argument")
	// ErrTooLarge: the entry exceeds Config.MaxEntrySize.
	ErrTooLarge = errors.New("ledger: entry too large")
	// ErrUnavailable: no bookie of a write set answered.
	ErrUnavailable = errors.New("ledger: bookies unavailable")
)

// Config configures a Client. The zero value of every optional field means
// the documented default.
type Config struct {
	// Region names the region whose ledgers and bookies are used. Required.
	Region string
	// Logger receives ensemble changes, recoveries and failures; nil discards them.
	Logger *slog.Logger
	// RequestTimeout bounds one bookie request and one metadata operation; a
	// bookie that does not answer an add within it is replaced. Zero means 10s.
	RequestTimeout time.Duration
	// LongPollTimeout is how long a tailing reader's LAC poll waits at a
	// bookie before the reader re-reads the metadata. Zero means 2s.
	LongPollTimeout time.Duration
	// MaxInFlight bounds the entries a writer has outstanding; AppendAsync
	// blocks (Append waits, bounded by its ctx) while it is reached. Zero means 1024.
	MaxInFlight int
	// MaxInFlightBytes bounds the data bytes a writer has outstanding, with
	// the same blocking. Zero means 32 MiB.
	MaxInFlightBytes int64
	// MaxEntrySize bounds one entry's data. Zero means what fits a default
	// protocol frame (proto.DefaultMaxFrameSize less the headers).
	MaxEntrySize int
	// ChangeRetryInterval is how long a writer that found no replacement
	// bookie carries on degraded before it looks again. Zero means 1s.
	ChangeRetryInterval time.Duration
	// Seed seeds bookie placement; zero means a random seed.
	Seed uint64
	// TLS, when set, is how the client connects to bookies that serve TLS
	// (client.Options.TLS): the region's CA in RootCAs and, for bookies
	// that require one, a client certificate it signed. Nil connects in
	// plaintext.
	TLS *tls.Config
}

const maxEntryDefault = proto.DefaultMaxFrameSize - proto.HeaderSize - 16 - proto.EntryHeaderSize

// Validate reports every problem with the config at once, naming the fields.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.Region) == "" || strings.Contains(c.Region, "/") {
		errs = append(errs, fmt.Errorf("ledger.region: %q must be a non-empty name without '/'", c.Region))
	}
	for name, d := range map[string]time.Duration{
		"requestTimeout": c.RequestTimeout, "longPollTimeout": c.LongPollTimeout, "changeRetryInterval": c.ChangeRetryInterval,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("ledger.%s: %v is negative", name, d))
		}
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("ledger.maxInFlight: %d is negative", c.MaxInFlight))
	}
	if c.MaxInFlightBytes < 0 {
		errs = append(errs, fmt.Errorf("ledger.maxInFlightBytes: %d is negative", c.MaxInFlightBytes))
	}
	if c.MaxEntrySize < 0 || c.MaxEntrySize > maxEntryDefault {
		errs = append(errs, fmt.Errorf("ledger.maxEntrySize: %d is not within 0..%d", c.MaxEntrySize, maxEntryDefault))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.LongPollTimeout == 0 {
		c.LongPollTimeout = 2 * time.Second
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 1024
	}
	if c.MaxInFlightBytes == 0 {
		c.MaxInFlightBytes = 32 << 20
	}
	if c.MaxEntrySize == 0 {
		c.MaxEntrySize = maxEntryDefault
	}
	if c.ChangeRetryInterval == 0 {
		c.ChangeRetryInterval = time.Second
	}
	return c
}

// Client creates, opens, recovers and deletes the ledgers of one region. It
// is safe for concurrent use.
type Client struct {
	meta metastore.Meta
	cfg  Config
	log  *slog.Logger
	pool *client.Pool

	rngMu sync.Mutex
	rng   *rand.Rand

	addrMu sync.RWMutex
	addrs  map[string]string // bookie id → address, from registrations

	// refreshMu serialises the address refreshes made on a miss or a
	// failed dial; lastRefresh is when the last one ended.
	refreshMu   sync.Mutex
	lastRefresh time.Time

	mu      sync.Mutex
	closed  bool
	writers map[*Writer]struct{}
}

// NewClient makes a client of the ledgers and bookies recorded in meta,
// the region's metadata store; it connects to bookies on first use.
func NewClient(meta metastore.Meta, cfg Config) (*Client, error) {
	if meta == nil {
		return nil, errors.New("ledger: no metadata store")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	return &Client{
		meta: meta,
		cfg:  cfg,
		log:  cfg.Logger.With("component", "ledger"),
		pool: client.NewPool(client.Options{
			RequestTimeout: cfg.RequestTimeout,
			Logger:         cfg.Logger,
			TLS:            cfg.TLS,
		}),
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		addrs:   map[string]string{},
		writers: map[*Writer]struct{}{},
	}, nil
}

// Close aborts the client's open writers (their pending entries fail with
// ErrClosed; their ledgers stay open for recovery) and closes its bookie
// connections.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	ws := make([]*Writer, 0, len(c.writers))
	for w := range c.writers {
		ws = append(ws, w)
	}
	c.mu.Unlock()
	for _, w := range ws {
		w.abort(fmt.Errorf("ledger %d: client closed: %w", w.id, ErrClosed))
	}
	return c.pool.Close()
}

// Pool is the client's bookie connection pool (for tools and tests that talk
// to bookies directly).
func (c *Client) Pool() *client.Pool { return c.pool }

// CreateOptions shape a new ledger.
type CreateOptions struct {
	// Ensemble is how many bookies store the ledger (E). Zero means 3.
	Ensemble int
	// WriteQuorum is how many bookies each entry is written to (Qw). Zero
	// means min(2, Ensemble).
	WriteQuorum int
	// AckQuorum is how many of those must confirm before the entry is
	// acknowledged (Qa). Zero means WriteQuorum.
	AckQuorum int
	// Properties are kept in the metadata for the ledger's owner.
	Properties map[string]string
	// Affinity confines the ledger's bookies to bookie groups, now and in
	// every ensemble change (it is kept in the metadata). The zero value
	// places on any bookie.
	Affinity Affinity
}

func (o CreateOptions) withDefaults() CreateOptions {
	if o.Ensemble == 0 {
		o.Ensemble = 3
	}
	if o.WriteQuorum == 0 {
		o.WriteQuorum = min(2, o.Ensemble)
	}
	if o.AckQuorum == 0 {
		o.AckQuorum = o.WriteQuorum
	}
	return o
}

// Validate reports every problem with the options at once.
func (o CreateOptions) Validate() error {
	errs := checkQuorums(o.Ensemble, o.WriteQuorum, o.AckQuorum)
	if err := o.Affinity.validate(); err != nil {
		errs = append(errs, err)
	}
	for k := range o.Properties {
		if k == "" {
			errs = append(errs, errors.New("properties: empty key"))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
}

// Create creates a ledger on a fresh ensemble and returns its writer. Bad
// options and too few bookies are reported before anything is written.
func (c *Client) Create(ctx context.Context, o CreateOptions) (*Writer, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("ledger: create: %w", err)
	}
	mctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	bookies, err := c.placementCandidates(mctx)
	if err != nil {
		return nil, fmt.Errorf("ledger: create: %w", err)
	}
	ensemble, err := Place(bookies, o.Ensemble, nil, o.Affinity, c.rand())
	if err != nil {
		return nil, fmt.Errorf("ledger: create: %w", err)
	}
	n, err := metastore.NextID(mctx, c.meta, LedgerIDKey(c.cfg.Region))
	if err != nil {
		return nil, fmt.Errorf("ledger: create: allocate id: %w", err)
	}
	id, err := LedgerID(c.cfg.Region, n)
	if err != nil {
		return nil, fmt.Errorf("ledger: create: %w", err)
	}
	md := Metadata{
		Version:      MetadataVersion,
		EnsembleSize: o.Ensemble,
		WriteQuorum:  o.WriteQuorum,
		AckQuorum:    o.AckQuorum,
		State:        StateOpen,
		LastEntry:    -1,
		Ensembles:    []Segment{{FirstEntry: 0, Bookies: ensemble}},
		CreatedAt:    time.Now().UTC(),
		Properties:   maps.Clone(o.Properties),
	}
	if !o.Affinity.IsZero() {
		a := o.Affinity.clone()
		md.Affinity = &a
	}
	val, err := EncodeMetadata(&md)
	if err != nil {
		return nil, err
	}
	rev, err := c.meta.Create(mctx, LedgerKey(c.cfg.Region, id), val)
	if err != nil {
		return nil, fmt.Errorf("ledger %d: create metadata: %w", id, err)
	}
	c.log.Debug("ledger created", "ledger", id, "ensemble", ensemble, "qw", o.WriteQuorum, "qa", o.AckQuorum)
	return c.newWriter(id, md, rev, false, -1, 0), nil
}

// Metadata reads a ledger's metadata and its revision.
func (c *Client) Metadata(ctx context.Context, id uint64) (Metadata, int64, error) {
	kv, err := c.meta.Get(ctx, LedgerKey(c.cfg.Region, id))
	if errors.Is(err, metastore.ErrNotFound) {
		return Metadata{}, 0, fmt.Errorf("ledger %d: %w", id, ErrNoLedger)
	}
	if err != nil {
		return Metadata{}, 0, fmt.Errorf("ledger %d: read metadata: %w", id, err)
	}
	md, err := DecodeMetadata(kv.Value)
	if err != nil {
		return Metadata{}, 0, fmt.Errorf("ledger %d: %w", id, err)
	}
	return md, kv.Rev, nil
}

// Delete deletes a ledger's entries from every bookie that ever held it,
// then its metadata. If a bookie cannot be reached the metadata is kept (so
// the delete can be retried) and the error says which bookie.
func (c *Client) Delete(ctx context.Context, id uint64) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		md, rev, err := c.Metadata(ctx, id)
		if err != nil {
			return err
		}
		c.refreshAddrs(ctx)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for _, b := range md.AllBookies() {
			wg.Go(func() {
				rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
				defer cancel()
				conn, err := c.bookie(rctx, b)
				if err == nil {
					err = conn.Delete(rctx, id)
				}
				if err != nil && !errors.Is(err, proto.ErrNoLedger) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			return fmt.Errorf("ledger %d: delete: %w", id, errors.Join(errs...))
		}
		err = c.meta.DeleteIf(ctx, LedgerKey(c.cfg.Region, id), rev)
		if errors.Is(err, metastore.ErrConflict) && attempt < 3 {
			continue // changed meanwhile (an ensemble change added a bookie): again
		}
		if err != nil {
			return fmt.Errorf("ledger %d: delete metadata: %w", id, err)
		}
		c.log.Debug("ledger deleted", "ledger", id)
		return nil
	}
}

func (c *Client) checkOpen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("ledger: client: %w", ErrClosed)
	}
	return nil
}

func (c *Client) rand() *rand.Rand {
	c.rngMu.Lock()
	defer c.rngMu.Unlock()
	// A child generator per call keeps callers from sharing one unguarded.
	return rand.New(rand.NewPCG(c.rng.Uint64(), c.rng.Uint64()))
}

// listBookies reads the live bookie registrations and refreshes the
// id → address map.
func (c *Client) listBookies(ctx context.Context) ([]BookieInfo, error) {
	kvs, err := c.meta.List(ctx, BookiesPrefix(c.cfg.Region))
	if err != nil {
		return nil, fmt.Errorf("list bookies: %w", err)
	}
	out := make([]BookieInfo, 0, len(kvs))
	for _, kv := range kvs {
		var b BookieInfo
		if err := json.Unmarshal(kv.Value, &b); err != nil {
			c.log.Warn("ignoring undecodable bookie registration", "key", kv.Key, "err", err)
			continue
		}
		if b.ID == "" {
			b.ID = strings.TrimPrefix(kv.Key, BookiesPrefix(c.cfg.Region))
		}
		if b.Address == "" {
			b.Address = b.ID
		}
		out = append(out, b)
	}
	c.addrMu.Lock()
	for _, b := range out {
		c.addrs[b.ID] = b.Address
	}
	c.addrMu.Unlock()
	return out, nil
}

// placementCandidates are the live bookie registrations, decommissioned
// ones marked read-only, with the groups and racks the region's
// racks-info gives them. The racks-info is read
// each time (placement is rare: a new ledger, an ensemble change), so a
// change applies at once; when it cannot be read nothing is placed,
// rather than placed outside a namespace's groups.
func (c *Client) placementCandidates(ctx context.Context) ([]BookieInfo, error) {
	bookies, err := c.listBookies(ctx)
	if err != nil {
		return nil, err
	}
	rc, err := racks.Read(ctx, c.meta, c.cfg.Region)
	if err != nil {
		return nil, err
	}
	// A decommissioned bookie takes no new copies: to placement it is
	// read-only (automatic recovery moves its copies away).
	dec, err := DecommissionedBookies(ctx, c.meta, c.cfg.Region)
	if err != nil {
		return nil, err
	}
	for i, b := range bookies {
		if slices.Contains(dec, b.ID) {
			bookies[i].ReadOnly = true
		}
	}
	return WithRacks(bookies, rc), nil
}

// refreshAddrs refreshes the address map, ignoring errors (addrOf falls back).
func (c *Client) refreshAddrs(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	c.listBookies(rctx)
}

// addrOf is the address of bookie id: from its registration when one was
// seen, else the id itself (bookies of earlier versions took their address
// as id, and a dead bookie's registration is gone). known says which.
func (c *Client) addrOf(id string) (addr string, known bool) {
	c.addrMu.RLock()
	a, ok := c.addrs[id]
	c.addrMu.RUnlock()
	if ok {
		return a, true
	}
	return id, false
}

// minRefreshInterval bounds how often misses and failed dials re-read the
// registrations.
const minRefreshInterval = 200 * time.Millisecond

// refreshAddrsSince refreshes the address map unless a refresh ended after
// since (a concurrent caller's served this one too) or less than
// minRefreshInterval ago. Concurrent callers share one refresh.
func (c *Client) refreshAddrsSince(ctx context.Context, since time.Time) {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	if c.lastRefresh.After(since) || time.Since(c.lastRefresh) < minRefreshInterval {
		return
	}
	c.refreshAddrs(ctx)
	c.lastRefresh = time.Now()
}

// bookie returns a connection to bookie id. A bookie's address may change
// while its id stays (docs/format/cookie.md): an id without a known
// address, or one whose known address does not answer, re-reads the
// registrations and dials the address found there.
func (c *Client) bookie(ctx context.Context, id string) (*client.Conn, error) {
	start := time.Now()
	addr, known := c.addrOf(id)
	if !known {
		c.refreshAddrsSince(ctx, start)
		addr, _ = c.addrOf(id)
	}
	conn, err := c.pool.Get(ctx, addr)
	if err == nil || ctx.Err() != nil {
		return conn, err
	}
	c.refreshAddrsSince(ctx, start)
	if now, ok := c.addrOf(id); ok && now != addr {
		c.log.Debug("bookie moved", "bookie", id, "from", addr, "to", now)
		return c.pool.Get(ctx, now)
	}
	return nil, err
}

// closeLedger writes the metadata closed at lac/length with
// compare-and-swap. On conflict it re-reads: a ledger someone else closed at
// the same point counts as closed; one in another state than want, or whose
// ensembles changed, means this closer was fenced out.
func (c *Client) closeLedger(ctx context.Context, id uint64, md Metadata, rev int64, want State, lac int64, length uint64) (Metadata, int64, error) {
	key := LedgerKey(c.cfg.Region, id)
	for {
		n := md.Clone()
		n.State, n.LastEntry, n.Length = StateClosed, lac, length
		val, err := EncodeMetadata(&n)
		if err != nil {
			return Metadata{}, 0, err
		}
		newRev, err := c.meta.CAS(ctx, key, val, rev)
		if err == nil {
			return n, newRev, nil
		}
		if !errors.Is(err, metastore.ErrConflict) {
			return Metadata{}, 0, fmt.Errorf("ledger %d: close: %w", id, err)
		}
		cur, curRev, err := c.Metadata(ctx, id)
		if err != nil {
			return Metadata{}, 0, fmt.Errorf("ledger %d: close: %w", id, err)
		}
		if cur.State == StateClosed && cur.LastEntry == lac && cur.Length == length {
			return cur, curRev, nil
		}
		if cur.State != want || !sameEnsembles(cur.Ensembles, md.Ensembles) {
			return Metadata{}, 0, fmt.Errorf("%w: ledger %d: close: metadata is now %s (last entry %d), not %s", ErrFenced, id, cur.State, cur.LastEntry, want)
		}
		md, rev = cur, curRev
	}
}

// changeResult is the outcome of an ensemble change.
type changeResult struct {
	start    int64
	replaced map[int]string
	md       Metadata
	rev      int64
	err      error
}

// changeEnsemble replaces the failed bookies of req: it picks live,
// reachable replacements outside the ensemble and exclude, and writes the
// new ensemble with compare-and-swap, re-applying it on a conflict as long as
// the ledger is still in state want with the ensembles this writer knows.
func (c *Client) changeEnsemble(ctx context.Context, id uint64, md Metadata, rev int64, want State, req changeRequest, exclude []string) changeResult {
	key := LedgerKey(c.cfg.Region, id)
	var lastErr error
	for attempt := range 5 {
		if attempt > 0 {
			select {
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			case <-ctx.Done():
				return changeResult{err: ctx.Err()}
			}
		}
		res, err := func() (changeResult, error) {
			cctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
			defer cancel()
			bookies, err := c.placementCandidates(cctx)
			if err != nil {
				return changeResult{}, err
			}
			repl, err := Replace(bookies, req.Ensemble, req.Failed, md.WriteQuorum, exclude, md.affinity(), c.rand())
			if err != nil {
				return changeResult{err: err}, nil
			}
			for idx, b := range repl {
				if _, err := c.bookie(cctx, b); err != nil {
					exclude = append(exclude, b)
					delete(repl, idx)
				}
			}
			if len(repl) == 0 {
				return changeResult{}, fmt.Errorf("%w: no reachable replacement", ErrNotEnoughBookies)
			}
			for {
				n, err := md.WithEnsembleChange(req.Start, repl)
				if err != nil {
					return changeResult{err: err}, nil
				}
				val, err := EncodeMetadata(&n)
				if err != nil {
					return changeResult{err: err}, nil
				}
				newRev, err := c.meta.CAS(cctx, key, val, rev)
				if err == nil {
					return changeResult{start: req.Start, replaced: repl, md: n, rev: newRev}, nil
				}
				if !errors.Is(err, metastore.ErrConflict) {
					return changeResult{}, err
				}
				cur, curRev, err := c.Metadata(cctx, id)
				if errors.Is(err, ErrNoLedger) {
					return changeResult{err: fmt.Errorf("%w: ledger %d was deleted", ErrFenced, id)}, nil
				}
				if err != nil {
					return changeResult{}, err
				}
				if cur.State == want && sameEnsembles(cur.Ensembles, n.Ensembles) {
					// Our own write landed though its answer was lost.
					return changeResult{start: req.Start, replaced: repl, md: cur, rev: curRev}, nil
				}
				if cur.State != want {
					return changeResult{err: fmt.Errorf("%w: ledger %d is %s", ErrFenced, id, cur.State)}, nil
				}
				if !sameEnsembles(cur.Ensembles, md.Ensembles) {
					return changeResult{err: fmt.Errorf("%w: ledger %d: ensembles changed by another client", ErrFenced, id)}, nil
				}
				md, rev = cur, curRev
			}
		}()
		if err == nil {
			return res
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return changeResult{err: fmt.Errorf("ledger %d: ensemble change: %w", id, lastErr)}
}

// WritableBookies returns how many registered bookies take writes now
// (registered and not read-only): new ledgers need at least their
// ensemble size of them.
func (c *Client) WritableBookies(ctx context.Context) (int, error) {
	bs, err := c.listBookies(ctx)
	if err != nil {
		return 0, err
	}
	return len(writable(bs, nil, nil)), nil
}
