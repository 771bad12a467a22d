// Package mledger owns the managed ledger, after Pulsar's ManagedLedger: a
// topic's log kept as an ordered list of bookie ledgers, of which only the
// last is written, plus the durable cursors that consume it. The list and
// the cursors live as one JSON value in the region's metadata store under
// /isobar/<region>/topics/<name> and every change to it is a
// compare-and-swap on the revision last read, so a second owner can never
// be silently overwritten: the first one gets ErrFenced. Appends go through
// one driver goroutine that rolls over to a new ledger when the current one
// is full (entries, bytes or age) without losing or reordering adds; reads
// cross ledger boundaries; ledgers that every cursor has consumed are
// removed from the list and deleted from the bookies.
//
// The position arithmetic over the ledger list, the backlog and the
// trimming decision are pure functions (logic.go); a cursor's acknowledged
// ranges are package ackset. Ledgers are reached through package
// ledgers' Store (ledgers.OnBookies in brokers; tests can use the
// in-memory, fault-injecting ledgers of package memledger). The design
// and the metadata format are in docs/mledger.md.
package mledger

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/mledger/ackset"
	"github.com/isobar-mq/isobar/broker/mledger/ledgers"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/metastore"
)

// Position is the position of an entry: (ledger id, entry id), ordered by
// ledger then entry. It is ackset's type, so cursors need no conversion.
type Position = ackset.Position

// Errors. Check them with errors.Is; they are wrapped with context. Those
// a client can meet are of one kind of errkind's table, which decides
// how the broker answers it (named in each comment).
var (
	// ErrFenced: the topic metadata changed under us (another managed
	// ledger opened the same name) or our ledger was recovered by someone
	// else. The managed ledger can do nothing more; close it.
	// ServiceNotReady: the client looks the topic up again.
	ErrFenced = errkind.Sentinel(errkind.ErrServiceNotReady, "mledger: fenced by another owner")
	// ErrClosed: the managed ledger (or cursor) is closed. ServiceNotReady.
	ErrClosed = errkind.Sentinel(errkind.ErrServiceNotReady, "mledger: closed")
	// ErrInvalidName: a managed ledger or cursor name is not acceptable
	// (a topic name too long, a subscription name with '/').
	// PreconditionFailed: retrying cannot help.
	ErrInvalidName = errkind.Sentinel(errkind.ErrPreconditionFailed, "mledger: invalid name")
	// ErrInvalidPosition: a position that is not in the log (beyond its end,
	// negative, or in no ledger of it). BadRequest.
	ErrInvalidPosition = errkind.Sentinel(errkind.ErrBadRequest, "mledger: invalid position")
	// ErrTooManyAckRanges: an acknowledgement would give a cursor more
	// individually acknowledged ranges than Config.MaxAckedRanges.
	// PreconditionFailed (NotAllowedError on the binary protocol).
	ErrTooManyAckRanges = errkind.Sentinel(errkind.ErrPreconditionFailed, "mledger: too many acknowledged ranges; acknowledge earlier messages first")
	// ErrInvalidConfig: a bad Config. A broker bug, not a client's: no kind.
	ErrInvalidConfig = errors.New("mledger: invalid config")
	// ErrCorruptMeta: the topic metadata cannot be decoded. Persistence.
	ErrCorruptMeta = errkind.Sentinel(errkind.ErrPersistence, "mledger: corrupt metadata")
	// ErrInvalidProperties: topic properties with an empty key, or over
	// MaxPropertiesBytes. BadRequest.
	ErrInvalidProperties = errkind.Sentinel(errkind.ErrBadRequest, "mledger: invalid properties")
	// ErrNoCursor: no cursor with that name. SubscriptionNotFound.
	ErrNoCursor = errkind.Sentinel(errkind.ErrSubscriptionNotFound, "mledger: no such cursor")
)

// Config configures a managed ledger. Zero values of optional fields mean
// the documented defaults.
type Config struct {
	// MaxEntriesPerLedger rolls over to a new ledger once the current one
	// has this many entries. Zero means 50000 (Pulsar's default).
	MaxEntriesPerLedger int64 `yaml:"maxEntriesPerLedger"`
	// MaxLedgerSize rolls over once the current ledger holds this many data
	// bytes. Zero means 2 GiB.
	MaxLedgerSize int64 `yaml:"maxLedgerSize"`
	// MaxLedgerAge rolls over, at the next add, once the current ledger is
	// this old. Zero means 4h.
	MaxLedgerAge time.Duration `yaml:"maxLedgerAge"`
	// EnsembleSize, WriteQuorum and AckQuorum shape new ledgers (E, Qw,
	// Qa). Zero means 2 each, Pulsar's managedLedgerDefault* values: every
	// entry on two bookies, and a region of three bookies keeps writing
	// (after an ensemble change) while any one of them is down. They must
	// keep ensembleSize >= writeQuorum >= ackQuorum, and a region needs
	// at least ensembleSize bookies.
	EnsembleSize int `yaml:"ensembleSize"`
	WriteQuorum  int `yaml:"writeQuorum"`
	AckQuorum    int `yaml:"ackQuorum"`
	// MaxPendingAdds bounds the adds queued for the driver; AddEntryAsync
	// blocks (bounded by its ctx) while the queue is full. Zero means 1000.
	MaxPendingAdds int `yaml:"maxPendingAdds"`
	// TailCacheEntries is how many of the newest entries of the current
	// ledger are kept in memory to serve recent reads. Entries the bookies
	// cannot serve yet (their last-add-confirmed, piggybacked on adds,
	// trails the writer by up to the ledger client's MaxInFlight entries)
	// are kept whatever this says. Zero means 1024.
	TailCacheEntries int `yaml:"tailCacheEntries"`
	// TailCacheBytes bounds the tail cache's data bytes the same way.
	// Zero means 4 MiB.
	TailCacheBytes int64 `yaml:"tailCacheBytes"`
	// MaxAckedRanges bounds a cursor's individually acknowledged ranges,
	// which are persisted with the topic's metadata (about 4 bytes each):
	// an acknowledgement that would add a range beyond it fails
	// (ErrTooManyAckRanges) until earlier entries are acknowledged, so a
	// consumer acknowledging every other message cannot grow the topic's
	// metadata past what the metadata store accepts. Zero means 10000
	// (Pulsar's managedLedgerMaxUnackedRangesToPersist); negative means
	// no limit.
	MaxAckedRanges int `yaml:"maxAckedRanges"`
}

// Deps are a managed ledger's live dependencies (Config holds settings
// only).
type Deps struct {
	// Meta is the region's metadata store. Required.
	Meta metastore.Meta
	// Ledgers creates, recovers, reads and deletes ledgers: the
	// bookies' (ledgers.OnBookies), or package memledger's in tests.
	// Required.
	Ledgers ledgers.Store
	// Region names the region (the metadata key prefix). Required.
	Region string
	// Logger receives rollovers, recoveries, trims and failures; nil discards.
	Logger *slog.Logger
	// Now is the clock for ledger age; nil means time.Now.
	Now func() time.Time
	// Changed, when set, is called with a managed ledger at the first
	// change since its ClearChanged of what its Ledgers, LastConfirmed,
	// Cursors or a cursor's Backlog report (changed.go). It is called
	// without the managed ledger's own locks but maybe with a cursor's
	// held, so it must not call back into the managed ledger.
	Changed func(*ManagedLedger)
}

func (d Deps) validate() []error {
	var errs []error
	if d.Meta == nil {
		errs = append(errs, errors.New("mledger: metadata store: required"))
	}
	if d.Ledgers == nil {
		errs = append(errs, errors.New("mledger: ledger client: required"))
	}
	if strings.TrimSpace(d.Region) == "" || strings.Contains(d.Region, "/") {
		errs = append(errs, fmt.Errorf("mledger: region %q must be a non-empty name without '/'", d.Region))
	}
	return errs
}

func (d Deps) withDefaults() Deps {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return d
}

// Validate reports every problem with the config at once (Problems
// under "mledger.").
func (c Config) Validate() error {
	errs := c.Problems("mledger.")
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
}

// Problems returns every problem of c, each naming its key under prefix
// (a configuration file's "broker.ledger."): a negative setting, or
// quorums of new ledgers, with the defaults applied, that no ledger can
// have (ensembleSize >= writeQuorum >= ackQuorum >= 1, ensembleSize at
// most ledger.MaxEnsemble). A writeQuorum above the ensemble would let
// every add wait for bookies the ledger does not have.
func (c Config) Problems(prefix string) []error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"maxEntriesPerLedger", c.MaxEntriesPerLedger}, {"maxLedgerSize", c.MaxLedgerSize},
		{"maxLedgerAge", int64(c.MaxLedgerAge)}, {"ensembleSize", int64(c.EnsembleSize)},
		{"writeQuorum", int64(c.WriteQuorum)}, {"ackQuorum", int64(c.AckQuorum)},
		{"maxPendingAdds", int64(c.MaxPendingAdds)}, {"tailCacheEntries", int64(c.TailCacheEntries)},
		{"tailCacheBytes", c.TailCacheBytes},
	} {
		if f.v < 0 {
			v := any(f.v)
			if f.name == "maxLedgerAge" {
				v = c.MaxLedgerAge
			}
			errs = append(errs, fmt.Errorf("%s%s: %v is negative", prefix, f.name, v))
		}
	}
	if c.EnsembleSize < 0 || c.WriteQuorum < 0 || c.AckQuorum < 0 {
		return errs
	}
	d := c.withDefaults()
	// said names a setting with its value, marking a default.
	said := func(name string, set, v int) string {
		if set == 0 {
			return fmt.Sprintf("%s%s: %d (the default)", prefix, name, v)
		}
		return fmt.Sprintf("%s%s: %d", prefix, name, v)
	}
	if d.EnsembleSize > ledger.MaxEnsemble {
		errs = append(errs, fmt.Errorf("%s is more than %d", said("ensembleSize", c.EnsembleSize, d.EnsembleSize), ledger.MaxEnsemble))
	}
	if d.WriteQuorum > d.EnsembleSize {
		errs = append(errs, fmt.Errorf("%s exceeds %s: an entry cannot be written to more bookies than the ledger's ensemble",
			said("writeQuorum", c.WriteQuorum, d.WriteQuorum), said("ensembleSize", c.EnsembleSize, d.EnsembleSize)))
	}
	if d.AckQuorum > d.WriteQuorum {
		errs = append(errs, fmt.Errorf("%s exceeds %s: an add cannot wait for more bookies than it is written to",
			said("ackQuorum", c.AckQuorum, d.AckQuorum), said("writeQuorum", c.WriteQuorum, d.WriteQuorum)))
	}
	return errs
}

// WithDefaults returns c with every zero setting replaced by its default.
func (c Config) WithDefaults() Config { return c.withDefaults() }

// DefaultMaxAckedRanges is Config.MaxAckedRanges when zero.
const DefaultMaxAckedRanges = 10000

func (c Config) withDefaults() Config {
	if c.EnsembleSize == 0 {
		c.EnsembleSize = 2
	}
	if c.WriteQuorum == 0 {
		c.WriteQuorum = min(2, c.EnsembleSize)
	}
	if c.AckQuorum == 0 {
		c.AckQuorum = c.WriteQuorum
	}
	if c.MaxEntriesPerLedger == 0 {
		c.MaxEntriesPerLedger = 50000
	}
	if c.MaxLedgerSize == 0 {
		c.MaxLedgerSize = 2 << 30
	}
	if c.MaxLedgerAge == 0 {
		c.MaxLedgerAge = 4 * time.Hour
	}
	if c.MaxPendingAdds == 0 {
		c.MaxPendingAdds = 1000
	}
	if c.TailCacheEntries == 0 {
		c.TailCacheEntries = 1024
	}
	if c.TailCacheBytes == 0 {
		c.TailCacheBytes = 4 << 20
	}
	if c.MaxAckedRanges == 0 {
		c.MaxAckedRanges = DefaultMaxAckedRanges
	}
	return c
}

// ManagedLedger is one topic's log. It is safe for concurrent use.
type ManagedLedger struct {
	// cfg is interned: the managed ledgers of a namespace share one.
	cfg unique.Handle[Config]
	// deps are shared by the managed ledgers opened with them (OpenShared).
	deps *Deps
	name string

	// metaMu serialises metadata updates; it guards meta and rev.
	metaMu sync.Mutex
	meta   topicMeta
	rev    int64
	// unsure is the value of a metadata write whose outcome is not known
	// (the store failed it, but may have applied it: the caller's context
	// ended, or the connection was lost with the reply). A conflict on the
	// next write is this write's, not another owner's, when the store
	// holds exactly this value. Guarded by metaMu.
	unsure *string
	// writer is this managed ledger's id in the values it writes
	// (storedMeta.Writer, in base 36); random, made by its first write.
	writer uint64
	// created: Open found no metadata and wrote the first (Created).
	created bool
	// closing, driving and stopped are guarded by addMu and driverMu
	// (below); they are here to share a word with created.
	closing bool
	driving bool
	stopped bool
	// terminated is set by Terminate (and at open, from the metadata).
	terminated atomic.Bool
	// changed: something Deps.Changed reports changed since
	// ClearChanged (changed.go).
	changed atomic.Bool
	// fenced is set once a CAS failed or our ledger was fenced; sticky.
	fenced atomic.Pointer[error]

	// mu guards the confirmed state, updated by add callbacks.
	mu            sync.Mutex
	lastConfirmed Position
	// Data bytes confirmed in lastBytesLedger (the open ledger's size).
	lastBytesLedger int64
	lastLedgerBytes int64
	// lv is the rest, made at the first add or read (live): an idle
	// managed ledger, dormant, holds its name, metadata and cursors
	// only.
	lv atomic.Pointer[mlLive]

	// addMu guards closing (above) against AddEntryAsync sending to queue.
	addMu sync.RWMutex

	ret atomic.Pointer[Retention]
	// shape, when set (SetQuorums, SetAffinity), replaces cfg's quorums
	// and the default placement for new ledgers.
	shape atomic.Pointer[ledgerShape]
	// markRate is the mark-delete rate's float64 bits (markrate.go).
	markRate atomic.Uint64

	// cursorsMu guards cursors: the open cursors, sorted by name (most
	// topics have one or two; a slice holds them in less than a map).
	cursorsMu sync.Mutex
	cursors   []*Cursor
}

// mlLive is the part of a managed ledger made at its first add or read
// (live): the add queue and its driver, the current ledger's writer,
// the readers and the tail cache. A dormant managed ledger (idle since
// its open) holds none of it (docs/decisions.md, "Idle topics cost
// nothing periodic").
type mlLive struct {
	closed chan struct{} // made when closing is set, closed when Close has drained the queue

	tail   *tailCache    // nil until an entry is confirmed (m.mu guards it)
	notify chan struct{} // closed at the next confirmed entry; nil until asked for (m.mu)

	queueOnce sync.Once
	queue     chan addRequest // made by the first add
	repair    chan struct{}   // cap 1: an add failed; the driver settles it (made with queue)

	// driverMu guards the managed ledger's driving and stopped and
	// stop: whether a driver goroutine runs, whether Close stopped
	// them for good, and the channel Close closes to stop one (made
	// with the first driver).
	driverMu sync.Mutex
	// wBroken: an add failed, roll over before the next (set by add
	// callbacks, read by the driver).
	wBroken atomic.Bool
	stop    chan struct{}
	drivers sync.WaitGroup

	// Owned by the driver goroutine (and by Close after done).
	w        ledgers.Writer
	wEntries int64
	wBytes   int64
	wCreated int64          // Unix ns
	inflight sync.WaitGroup // adds issued to w whose callbacks have not run
	// unrecorded is a ledger a rollover closed whose close the metadata
	// does not record yet (the write failed; the list still says open):
	// the next rollover, or Close, records it.
	unrecorded *LedgerInfo

	// failedMu guards failed: adds the current ledger failed, settled
	// when it is closed (see settleFailed).
	failedMu sync.Mutex
	failed   []failedAdd

	readersMu sync.Mutex
	readers   map[int64]ledgers.Reader // nil until a ledger is read
}

// live returns m's live part, making it: m is being written or read.
func (m *ManagedLedger) live() *mlLive {
	if lv := m.lv.Load(); lv != nil {
		return lv
	}
	m.lv.CompareAndSwap(nil, &mlLive{})
	return m.lv.Load()
}

// l is live, for the write path's many uses (the driver, Close once the
// managed ledger was written). Where a dormant managed ledger is to stay
// so, m.lv is read instead.
func (m *ManagedLedger) l() *mlLive { return m.live() }

// logger is the managed ledger's logger, made when something is logged
// (an idle topic of a million keeps none).
func (m *ManagedLedger) logger() *slog.Logger {
	return m.deps.Logger.With("component", "mledger", "topic", m.name)
}

// tailCache holds the newest confirmed entries of one ledger, for
// tailing reads.
type tailCache struct {
	ledger   int64
	first    int64    // entry id of entries[0]
	entries  [][]byte // newest confirmed entries of ledger
	readable int64    // bookies serve ledger's entries up to this
	size     int64    // data bytes in entries
}

// Shared returns d with its defaults, for OpenShared: the managed
// ledgers opened with it share it.
func (d Deps) Shared() *Deps {
	d = d.withDefaults()
	return &d
}

// Open opens the managed ledger name, creating it if needed. A last ledger
// left open by a previous owner is recovered (fenced and closed) and its
// final entry count recorded; an empty one is dropped and deleted. Then a
// new ledger is created for writing and added to the list with a CAS.
func Open(ctx context.Context, deps Deps, cfg Config, name string) (*ManagedLedger, error) {
	return OpenShared(ctx, deps.Shared(), cfg, name)
}

// OpenShared is Open with deps (from Deps.Shared) kept, not copied: the
// managed ledgers of a broker share one.
func OpenShared(ctx context.Context, deps *Deps, cfg Config, name string) (*ManagedLedger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if errs := deps.validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m := &ManagedLedger{
		cfg:  unique.Make(cfg),
		deps: deps,
		name: name,
	}
	kv, err := deps.Meta.Get(ctx, m.key())
	switch {
	case err == nil:
		m.meta, err = decodeMeta(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("mledger %s: %w", name, err)
		}
		m.rev = kv.Rev
	case errors.Is(err, metastore.ErrNotFound):
		m.meta = topicMeta{Version: MetaVersion}
		m.created = true
	default:
		return nil, fmt.Errorf("mledger %s: open: %w", name, err)
	}

	next := m.meta.clone()
	var drop []int64
	if n := len(next.Ledgers); n > 0 && next.Ledgers[n-1].State == LedgerOpen {
		last := &next.Ledgers[n-1]
		md, err := deps.Ledgers.Recover(ctx, uint64(last.ID))
		switch {
		case errors.Is(err, ledger.ErrNoLedger):
			drop = append(drop, last.ID)
		case err != nil:
			return nil, fmt.Errorf("mledger %s: recover ledger %d: %w", name, last.ID, err)
		default:
			last.Entries, last.Size, last.State = md.LastEntry+1, int64(md.Length), LedgerClosed
			last.Closed = deps.Now().UnixMilli()
			m.logger().Info("recovered the previous owner's ledger", "ledger", last.ID, "entries", last.Entries)
			if last.Entries == 0 {
				drop = append(drop, last.ID)
			}
		}
		if len(drop) > 0 {
			next.Ledgers = next.Ledgers[:n-1]
		}
	}
	// No ledger is created until the first add (an idle managed ledger
	// holds no writer): the last confirmed entry is the last one of the
	// closed ledgers.
	m.lastConfirmed = lastPosition(next.Ledgers)
	m.terminated.Store(next.Terminated)
	// Write the metadata even when nothing changed: the new revision makes
	// a previous owner's next CAS fail, so it cannot keep writing.
	m.metaMu.Lock()
	err = m.casLocked(ctx, next)
	m.metaMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("mledger %s: open: %w", name, err)
	}
	for _, id := range drop {
		m.deleteLedger(ctx, id)
	}
	m.logger().Debug("opened", "ledgers", len(next.Ledgers))
	return m, nil
}

// Name is the managed ledger's name.
func (m *ManagedLedger) Name() string { return m.name }

// key is the managed ledger's metadata key (made when used: a million
// idle topics do not each keep one).
func (m *ManagedLedger) key() string { return TopicKey(m.deps.Region, m.name) }

// Created reports whether Open created the managed ledger: its metadata
// did not exist before.
func (m *ManagedLedger) Created() bool { return m.created }

// quorums are the shape of new ledgers: ensemble size, write and ack
// quorum.
type quorums struct{ ensemble, write, ack int }

// SetQuorums shapes the ledgers created from now on (the current one
// keeps its shape until it rolls over): ensemble size, write quorum and
// ack quorum, zero values meaning the defaults of Config. The result must
// hold ensemble >= write >= ack >= 1, else nothing changes.
func (m *ManagedLedger) SetQuorums(ensemble, write, ack int) error {
	c := Config{EnsembleSize: ensemble, WriteQuorum: write, AckQuorum: ack}.withDefaults()
	if c.AckQuorum < 1 || c.WriteQuorum < c.AckQuorum || c.EnsembleSize < c.WriteQuorum {
		return fmt.Errorf("%w: ensemble %d, write quorum %d, ack quorum %d: want ensemble >= write >= ack >= 1",
			ErrInvalidConfig, c.EnsembleSize, c.WriteQuorum, c.AckQuorum)
	}
	q := quorums{c.EnsembleSize, c.WriteQuorum, c.AckQuorum}
	cfg := m.cfg.Value()
	m.updateShape(func(s *ledgerShape) bool {
		if s.q == nil && q == (quorums{cfg.EnsembleSize, cfg.WriteQuorum, cfg.AckQuorum}) || s.q != nil && *s.q == q {
			return false // unchanged (every maintenance pass sets it again)
		}
		s.q = &q
		return true
	})
	return nil
}

// ledgerShape is what SetQuorums and SetAffinity set; nil fields are the
// defaults.
type ledgerShape struct {
	q *quorums
	a *ledger.Affinity
}

// updateShape applies f to a copy of the shape and stores it, unless f
// reports no change.
func (m *ManagedLedger) updateShape(f func(*ledgerShape) bool) {
	for {
		cur := m.shape.Load()
		var next ledgerShape
		if cur != nil {
			next = *cur
		}
		if !f(&next) || m.shape.CompareAndSwap(cur, &next) {
			return
		}
	}
}

func (m *ManagedLedger) createLedger(ctx context.Context) (ledgers.Writer, error) {
	q := quorums{m.cfg.Value().EnsembleSize, m.cfg.Value().WriteQuorum, m.cfg.Value().AckQuorum}
	if s := m.shape.Load(); s != nil && s.q != nil {
		q = *s.q
	}
	w, err := m.deps.Ledgers.Create(ctx, ledger.CreateOptions{
		Ensemble:    q.ensemble,
		WriteQuorum: q.write,
		AckQuorum:   q.ack,
		Properties:  map[string]string{"mledger": m.name},
		Affinity:    m.bookieAffinity(),
	})
	if err != nil {
		return nil, fmt.Errorf("create ledger: %w", err)
	}
	return w, nil
}

// SetAffinity confines the ledgers created from now on (and their
// ensemble changes) to bookie groups: the namespace's bookie affinity.
// The zero value, the default, places them on any bookie.
func (m *ManagedLedger) SetAffinity(a ledger.Affinity) {
	m.updateShape(func(s *ledgerShape) bool {
		switch cur := s.a; {
		case cur == nil && a.Primary == nil && a.Secondary == nil:
			// The default, which nil stands for: an idle topic keeps no copy.
			return false
		case cur != nil && reflect.DeepEqual(*cur, a):
			// Unchanged (every maintenance pass sets it again).
			return false
		}
		s.a = &a
		return true
	})
}

func (m *ManagedLedger) bookieAffinity() ledger.Affinity {
	if s := m.shape.Load(); s != nil && s.a != nil {
		return *s.a
	}
	return ledger.Affinity{}
}

// discardWriter closes and deletes a ledger that never made it into the
// list (best effort: a failure leaves an orphan ledger, logged).
func (m *ManagedLedger) discardWriter(w ledgers.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		m.logger().Warn("closing an unused ledger", "ledger", w.ID(), "err", err)
	}
	m.deleteLedger(ctx, int64(w.ID()))
}

func (m *ManagedLedger) deleteLedger(ctx context.Context, id int64) {
	if lv := m.lv.Load(); lv != nil {
		lv.readersMu.Lock()
		delete(lv.readers, id)
		lv.readersMu.Unlock()
	}
	if err := m.deps.Ledgers.Delete(ctx, uint64(id)); err != nil && !errors.Is(err, ledger.ErrNoLedger) {
		m.logger().Warn("deleting a ledger failed; it is orphaned", "ledger", id, "err", err)
	}
}

func (m *ManagedLedger) setWriter(w ledgers.Writer) {
	m.l().w, m.l().wEntries, m.l().wBytes, m.l().wCreated = w, 0, 0, m.deps.Now().UnixNano()
	m.l().wBroken.Store(false)
}

// fencedErr returns the sticky fenced error, or nil.
func (m *ManagedLedger) fencedErr() error {
	if p := m.fenced.Load(); p != nil {
		return *p
	}
	return nil
}

func (m *ManagedLedger) setFenced(cause error) error {
	err := fmt.Errorf("mledger %s: %w (%w)", m.name, ErrFenced, cause)
	m.fenced.CompareAndSwap(nil, &err)
	return *m.fenced.Load()
}

// stillOwner reports whether the topic's metadata is still at a
// revision this managed ledger wrote (no other owner opened it). The read
// may race with this managed ledger's own updates (cursors'): a revision
// below the one it knows now was its own, as any write by another client
// would have made its later CAS fail.
func (m *ManagedLedger) stillOwner(ctx context.Context) (bool, error) {
	if m.fencedErr() != nil {
		return false, nil
	}
	kv, err := m.deps.Meta.Get(ctx, m.key())
	if errors.Is(err, metastore.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mledger %s: read metadata: %w", m.name, err)
	}
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	return kv.Rev <= m.rev, nil
}

// casLocked writes next with a CAS on m.rev and adopts it. A conflict
// fences the managed ledger. metaMu must be held.
func (m *ManagedLedger) casLocked(ctx context.Context, next topicMeta) error {
	if err := m.fencedErr(); err != nil {
		return err
	}
	for m.writer == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		m.writer = binary.LittleEndian.Uint64(b[:])
	}
	val, err := encodeMetaBy(&next, strconv.FormatUint(m.writer, 36))
	if err != nil {
		return err
	}
	rev, err := m.deps.Meta.CAS(ctx, m.key(), val, m.rev)
	if errors.Is(err, metastore.ErrConflict) && m.ownWriteLocked(ctx) {
		// Our own earlier write, which we took as failed, was applied:
		// write over it (the metadata in memory is what holds).
		m.logger().Info("a metadata write heard failed had been applied; writing over it")
		rev, err = m.deps.Meta.CAS(ctx, m.key(), val, m.rev)
	}
	if errors.Is(err, metastore.ErrConflict) {
		return m.setFenced(err)
	}
	if err != nil {
		if landed, lerr := m.landedLocked(ctx, val); lerr == nil && landed > 0 {
			m.logger().Info("metadata write applied although it failed", "err", err)
			m.meta, m.rev, m.unsure = next, landed, nil
			return nil
		}
		unsure := string(val)
		m.unsure = &unsure
		return fmt.Errorf("mledger %s: write metadata: %w", m.name, err)
	}
	m.meta, m.rev, m.unsure = next, rev, nil
	return nil
}

// landedLocked reads the metadata after a write of val failed: the
// store may have applied it anyway (a context that ended while the write
// was on its way, a reply lost with the connection). It returns the
// revision val was stored at, 0 when the store holds something else.
// The read has a context of its own (the caller's may have ended).
// metaMu must be held.
func (m *ManagedLedger) landedLocked(ctx context.Context, val []byte) (int64, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	kv, err := m.deps.Meta.Get(rctx, m.key())
	if err != nil {
		return 0, err
	}
	if kv.Rev != m.rev && bytes.Equal(kv.Value, val) {
		return kv.Rev, nil
	}
	return 0, nil
}

// ownWriteLocked reports, after a conflict, whether the store holds the
// value of this managed ledger's last write of unknown outcome (m.unsure):
// then nobody else wrote, and m.rev takes that write's revision. metaMu
// must be held.
func (m *ManagedLedger) ownWriteLocked(ctx context.Context) bool {
	if m.unsure == nil {
		return false
	}
	landed, err := m.landedLocked(ctx, []byte(*m.unsure))
	if err != nil || landed == 0 {
		return false
	}
	m.rev, m.unsure = landed, nil
	return true
}

// update applies fn to a copy of the metadata and writes it by CAS.
func (m *ManagedLedger) update(ctx context.Context, fn func(*topicMeta) error) error {
	m.metaMu.Lock()
	next := m.meta.clone()
	if err := fn(&next); err != nil {
		m.metaMu.Unlock()
		return err
	}
	err := m.casLocked(ctx, next)
	m.metaMu.Unlock()
	if err == nil {
		m.noteChange()
	}
	return err
}

// view returns the ledger list with the open ledger's confirmed entry
// count filled in, for the pure functions of logic.go.
func (m *ManagedLedger) view() []LedgerInfo {
	m.metaMu.Lock()
	ls := append([]LedgerInfo(nil), m.meta.Ledgers...)
	m.metaMu.Unlock()
	m.mu.Lock()
	lc := m.lastConfirmed
	bl, bytes := m.lastBytesLedger, m.lastLedgerBytes
	m.mu.Unlock()
	for i := range ls {
		if ls[i].State == LedgerOpen {
			ls[i].Entries = 0
			if ls[i].ID == lc.Ledger {
				ls[i].Entries = lc.Entry + 1
			}
			if ls[i].ID == bl {
				ls[i].Size = bytes
			}
		}
	}
	return ls
}

// Ledgers returns a copy of the ledger list as the metadata has it, the open
// ledger's entry count filled in.
func (m *ManagedLedger) Ledgers() []LedgerInfo { return m.view() }

// LastConfirmed is the position of the last entry acknowledged to a writer;
// (first ledger, -1) while the log is empty.
func (m *ManagedLedger) LastConfirmed() Position {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastConfirmed
}

// Next returns the position of the entry after p, crossing to entry 0 of
// the next non-empty ledger after the last entry of one; false if p is the
// last confirmed entry or after it. It suits ackset.Set.Advance.
func (m *ManagedLedger) Next(p Position) (Position, bool) {
	return nextPosition(m.view(), p)
}

// Close stops accepting adds, waits for the queued ones, closes the current
// ledger and records its final size in the metadata. Cursors stay usable
// only until Close returns. A fenced managed ledger's Close returns
// ErrFenced and writes nothing.
func (m *ManagedLedger) Close(ctx context.Context) error {
	m.flushCursors() // acknowledgements the mark-delete rate deferred
	m.addMu.Lock()
	if m.closing {
		m.addMu.Unlock()
		<-m.l().closed
		return nil
	}
	m.closing = true
	m.live().closed = make(chan struct{}) // (a dormant one's made now: it is going)
	m.addMu.Unlock()
	m.stopDrivers()
	defer close(m.l().closed)
	lv := m.l() // (a dormant one's has nothing queued and no writer)
	// No driver runs and no add can be queued any more: issue what is left.
	for lv.queue != nil && len(lv.queue) > 0 {
		m.issue(<-lv.queue)
	}
	if lv.w == nil {
		if err := m.fencedErr(); err != nil {
			return err
		}
		if l := lv.unrecorded; l != nil {
			if err := m.update(ctx, func(t *topicMeta) error { return setLast(t, *l) }); err != nil {
				return fmt.Errorf("mledger %s: close: record ledger %d closed: %w", m.name, l.ID, err)
			}
			m.l().unrecorded = nil
		}
		return nil
	}
	if err := m.fencedErr(); err != nil {
		m.abandonWriter()
		m.failAllFailed(err)
		return err
	}
	if err := m.closeCurrent(ctx); err != nil {
		return fmt.Errorf("mledger %s: close: %w", m.name, err)
	}
	m.logger().Debug("closed")
	return nil
}

// abandonWriter closes a fenced writer without touching any metadata
// (Writer.Close fails with ErrFenced once recovery fenced it).
func (m *ManagedLedger) abandonWriter() {
	if m.l().w == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.l().w.Close(ctx)
	m.l().inflight.Wait()
	m.l().w = nil
}

// closeCurrent closes the current ledger and marks it closed in the list
// with its final entry count and size. Driver (or Close after the driver).
func (m *ManagedLedger) closeCurrent(ctx context.Context) error {
	id := int64(m.l().w.ID())
	md, err := m.closeWriter(ctx, m.l().w)
	if err != nil {
		m.failAllFailed(err)
		return err
	}
	// Adds the ledger failed and did not keep fail: no next ledger.
	m.failAdds(m.settleFailed(id, md), ErrClosed)
	return m.update(ctx, func(t *topicMeta) error {
		return setLast(t, LedgerInfo{ID: id, Entries: md.LastEntry + 1, Size: int64(md.Length), State: LedgerClosed, Closed: m.deps.Now().UnixMilli()})
	})
}
