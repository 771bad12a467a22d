// Package memledger keeps ledgers in memory, for tests of the managed
// ledger (broker/mledger) without etcd or bookies: a ledgers.Store with
// the BookKeeper semantics the managed ledger relies on, and the faults
// a test asks for. It is the ledgers' counterpart of metastore/metafault
// and bookie/vfs.
//
// Semantics, as bookie/ledger's (docs/ledger.md):
//   - A writer's appends get entry ids 0, 1, 2... and their callbacks
//     run in entry order on a goroutine of the writer. Once an append
//     fails the writer is broken: every later append fails with the same
//     error and Close fails, leaving the ledger open for recovery.
//   - Recover fences an open ledger and closes it at its last stored
//     entry: the writer's appends not yet stored, and its Close, fail
//     with ledger.ErrFenced. A closed ledger is returned as it is.
//   - A reader of an open ledger reads up to the last-add-confirmed the
//     stored entries carry (the writer's, as it was when each was sent:
//     it trails the writer), which WaitLAC advances; reads past it fail
//     with ledger.ErrNoEntry. A closed ledger reads up to its last entry.
//   - A closed writer refuses appends (ledger.ErrClosed); an append
//     larger than Config.MaxEntrySize is refused before it gets an id
//     (ledger.ErrTooLarge) and leaves the writer unharmed.
//   - Delete removes a ledger: later opens, recoveries, reads and
//     appends fail with ledger.ErrNoLedger.
//
// Faults: Store.SetInjector puts an Injector in front of every operation
// (Op names them): a Rule fails the Nth matching operation (or every one
// from it on), with ErrAckLost an append is stored but reported failed,
// and a Hang blocks matching operations until released.
//
//	s := memledger.New(memledger.Config{})
//	c := s.Client() // one broker's ledger client
//	deps := mledger.Deps{Meta: meta, Ledgers: c, Region: "r"}
//	rule := memledger.OnNth(3, memledger.OpAppend)
//	s.SetInjector(rule) // the third append from now on fails
//	c.Close()           // the broker dies; its ledgers stay open
//
// A Client is one broker's view of the store (as each broker has its own
// ledger client); closing it stands for that broker's crash: its writers
// stop without closing their ledgers, which stay open for the next owner
// to recover, and its later operations fail.
package memledger

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/mledger/ledgers"
)

// Config configures a Store.
type Config struct {
	// MaxEntrySize refuses larger appends with ledger.ErrTooLarge. Zero
	// means no limit.
	MaxEntrySize int
}

// Store is a ledgers.Store in memory. It is safe for concurrent use.
type Store struct {
	cfg   Config
	inj   atomic.Pointer[Injector]
	calls [numOps]atomic.Int64

	// mu guards the ledgers and the id counter.
	mu      sync.Mutex
	next    uint64
	ledgers map[uint64]*memLedger
}

var _ ledgers.Store = (*Store)(nil)

// memLedger is a ledger as the bookies and the metadata store keep it.
type memLedger struct {
	md      ledger.Metadata
	entries [][]byte // entry i at i; contiguous
	// lac is the highest last-add-confirmed the stored entries carry:
	// what a reader of the open ledger can read up to.
	lac    int64
	fenced bool
	// changed is closed (and replaced) when lac or the state changes.
	changed chan struct{}
}

func (l *memLedger) wake() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

func (l *memLedger) length(last int64) uint64 {
	var n uint64
	for _, e := range l.entries[:last+1] {
		n += uint64(len(e))
	}
	return n
}

// New returns an empty Store.
func New(cfg Config) *Store {
	return &Store{cfg: cfg, ledgers: map[uint64]*memLedger{}}
}

// SetInjector replaces the injector; nil lets every operation through.
func (s *Store) SetInjector(inj Injector) {
	if inj == nil {
		s.inj.Store(nil)
		return
	}
	s.inj.Store(&inj)
}

// Calls is the number of operations of kind op attempted so far, failed
// ones included.
func (s *Store) Calls(op Op) int64 {
	if op == 0 || op >= numOps {
		return 0
	}
	return s.calls[op].Load()
}

// check counts the operation and asks the injector.
func (s *Store) check(ctx context.Context, op Op, id uint64, entry int64) error {
	s.calls[op].Add(1)
	if p := s.inj.Load(); p != nil {
		if err := (*p).MaybeError(ctx, op, id, entry); err != nil {
			if entry >= 0 && op == OpAppend {
				return fmt.Errorf("ledger %d: entry %d: %s: %w", id, entry, op, err)
			}
			return fmt.Errorf("ledger %d: %s: %w", id, op, err)
		}
	}
	return nil
}

// Metadata is ledger id's metadata as the metadata store has it; false
// when there is no such ledger.
func (s *Store) Metadata(id uint64) (ledger.Metadata, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.ledgers[id]
	if l == nil {
		return ledger.Metadata{}, false
	}
	return l.md.Clone(), true
}

// Entries is a copy of the entries the bookies hold of ledger id (those
// of an open ledger beyond its last-add-confirmed included); nil when
// there is no such ledger.
func (s *Store) Entries(id uint64) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.ledgers[id]; l != nil {
		return slices.Clone(l.entries)
	}
	return nil
}

// IDs are the ids of the ledgers that exist, in order.
func (s *Store) IDs() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.ledgers))
}

// Create implements ledgers.Store.
func (s *Store) Create(ctx context.Context, o ledger.CreateOptions) (ledgers.Writer, error) {
	return s.create(ctx, o, nil)
}

func (s *Store) create(ctx context.Context, o ledger.CreateOptions, c *Client) (*Writer, error) {
	if err := s.check(ctx, OpCreate, 0, -1); err != nil {
		return nil, fmt.Errorf("ledger: create: %w", err)
	}
	if o.Ensemble == 0 {
		o.Ensemble = 3
	}
	if o.WriteQuorum == 0 {
		o.WriteQuorum = min(2, o.Ensemble)
	}
	if o.AckQuorum == 0 {
		o.AckQuorum = o.WriteQuorum
	}
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("ledger: create: %w", err)
	}
	bookies := make([]string, o.Ensemble)
	for i := range bookies {
		bookies[i] = "mem-" + strconv.Itoa(i)
	}
	md := ledger.Metadata{
		Version:      ledger.MetadataVersion,
		EnsembleSize: o.Ensemble,
		WriteQuorum:  o.WriteQuorum,
		AckQuorum:    o.AckQuorum,
		State:        ledger.StateOpen,
		LastEntry:    -1,
		Ensembles:    []ledger.Segment{{FirstEntry: 0, Bookies: bookies}},
		CreatedAt:    time.Now().UTC(),
		Properties:   maps.Clone(o.Properties),
	}
	if !o.Affinity.IsZero() {
		a := o.Affinity
		md.Affinity = &a
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	id := s.next
	s.ledgers[id] = &memLedger{md: md, lac: -1}
	wctx, cancel := context.WithCancel(context.Background())
	w := &Writer{s: s, c: c, id: id, ctx: wctx, cancel: cancel, md: md.Clone()}
	w.lac.Store(-1)
	return w, nil
}

// Recover implements ledgers.Store.
func (s *Store) Recover(ctx context.Context, id uint64) (ledger.Metadata, error) {
	if err := s.check(ctx, OpRecover, id, -1); err != nil {
		return ledger.Metadata{}, fmt.Errorf("ledger %d: recovery: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.ledgers[id]
	if l == nil {
		return ledger.Metadata{}, fmt.Errorf("ledger %d: %w", id, ledger.ErrNoLedger)
	}
	if l.md.State != ledger.StateClosed {
		l.fenced = true
		last := int64(len(l.entries)) - 1
		l.md.State, l.md.LastEntry, l.md.Length = ledger.StateClosed, last, l.length(last)
		l.wake()
	}
	return l.md.Clone(), nil
}

// OpenReader implements ledgers.Store.
func (s *Store) OpenReader(ctx context.Context, id uint64) (ledgers.Reader, error) {
	if err := s.check(ctx, OpOpen, id, -1); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.ledgers[id]
	if l == nil {
		return nil, fmt.Errorf("ledger %d: %w", id, ledger.ErrNoLedger)
	}
	r := &Reader{s: s, id: id, lac: -1}
	r.learn(l)
	return r, nil
}

// Delete implements ledgers.Store.
func (s *Store) Delete(ctx context.Context, id uint64) error {
	if err := s.check(ctx, OpDelete, id, -1); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.ledgers[id]
	if l == nil {
		return fmt.Errorf("ledger %d: %w", id, ledger.ErrNoLedger)
	}
	delete(s.ledgers, id)
	l.wake()
	return nil
}
