// Package txncoord drives one transaction coordinator (docs/transactions.md):
// the state machine of package broker/txn, its log, the deadlines of open
// transactions and the fan-out of their ends to topics and subscriptions.
// The broker gives it the log (a managed ledger) and the fan-out (the
// topics' owners) as interfaces, so that it links neither.
package txncoord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/broker/txn"
	"github.com/isobar-mq/isobar/errkind"
)

// Log is a coordinator's durable log.
type Log interface {
	// Append stores one record; it returns once the record is durable.
	Append(ctx context.Context, data []byte) error
	// Replay calls restore with the last checkpoint's snapshot, if
	// there is one, then fn with every record stored after it, in order.
	Replay(ctx context.Context, restore func(snapshot []byte) error, fn func(data []byte) error) error
	// Checkpoint stores snapshot(), called after the log noted how far
	// its appends completed, as standing for every record up to there:
	// those may be dropped. (A record applied in memory before its append
	// completed is in the snapshot and replayed after it as well, which
	// changes nothing.)
	Checkpoint(ctx context.Context, snapshot func() []byte) error
	// Close releases the log.
	Close(ctx context.Context) error
}

// Ender tells topics and subscriptions that a transaction ended. Both
// must be idempotent: an end told twice is done once.
type Ender interface {
	EndOnPartition(ctx context.Context, topic string, id txn.ID, a txn.Action) error
	EndOnSubscription(ctx context.Context, sub txn.Sub, id txn.ID, a txn.Action) error
}

// Config configures a coordinator.
type Config struct {
	// TC is the coordinator's partition number (the most significant
	// half of its transaction ids).
	TC uint64
	// MaxTimeout bounds transactions' timeouts (and is the timeout of a
	// request for 0). Zero means 6h.
	MaxTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives what the coordinator logs about itself; nil discards.
	Logger *slog.Logger
	// CheckpointEvery is how many records are appended between two
	// checkpoints of the log (which bound its replay and let it be
	// trimmed); zero means 1000.
	CheckpointEvery int
}

// appendTimeout bounds one write to the log.
const appendTimeout = 30 * time.Second

// ErrClosed is returned by a coordinator that was closed or broken (its
// log failed): the client looks it up again and meets a recovered one.
var ErrClosed = fmt.Errorf("%w: transaction coordinator closed", errkind.ErrTransactionCoordinatorNotFound)

// Coordinator is a running transaction coordinator.
type Coordinator struct {
	cfg   Config
	log   Log
	ender Ender
	lg    *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}

	// appended counts records since the last checkpoint; ckMu makes
	// one checkpoint at a time.
	appended atomic.Int64
	ckMu     sync.Mutex

	mu      sync.Mutex
	core    *txn.Coordinator
	broken  bool
	waiters map[txn.ID]*waiter

	// recovered: when Start began and ended reading the log back.
	recoverStart, recoverEnd time.Time
}

type waiter struct {
	done chan struct{}
	err  error
}

// Start recovers the coordinator from its log and starts it: ends the
// previous owner left unfinished are run again, transactions past their
// deadline are aborted.
func Start(ctx context.Context, cfg Config, log Log, ender Ender) (*Coordinator, error) {
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = 6 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = 1000
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	core := txn.NewCoordinator(cfg.TC, cfg.MaxTimeout)
	recoverStart := cfg.Now()
	n := 0
	err := log.Replay(ctx, core.Restore, func(data []byte) error {
		r, err := txn.ParseRecord(data)
		if err != nil {
			return err
		}
		core.Replay(r)
		n++
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("txncoord: recover coordinator %d: %w", cfg.TC, err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{cfg: cfg, log: log, ender: ender, lg: lg.With("tc", cfg.TC), ctx: rctx, cancel: cancel,
		kick: make(chan struct{}, 1), core: core, waiters: map[txn.ID]*waiter{},
		recoverStart: recoverStart, recoverEnd: cfg.Now()}
	c.lg.Info("transaction coordinator recovered", "records", n, "transactions", core.Len())
	c.mu.Lock()
	for _, f := range core.Ending() {
		c.waiterLocked(f.ID)
		c.wg.Add(1)
		go c.finish(f)
	}
	c.mu.Unlock()
	c.wg.Add(1)
	go c.deadlines()
	return c, nil
}

// Close stops the coordinator: requests waiting get ErrClosed, ends
// under way stop (the next owner runs them again).
func (c *Coordinator) Close(ctx context.Context) error {
	c.mu.Lock()
	c.broken = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	for id, w := range c.waiters {
		w.err = ErrClosed
		close(w.done)
		delete(c.waiters, id)
	}
	c.mu.Unlock()
	return c.log.Close(ctx)
}

// Broken says whether the coordinator stopped serving (closed, or its
// log failed): the owner replaces it by a recovered one.
func (c *Coordinator) Broken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}

// Info reports a transaction the coordinator holds.
func (c *Coordinator) Info(id txn.ID) (txn.Info, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.Info(id)
}

// Stats is what a running coordinator reports of itself (the admin
// API's coordinator stats).
type Stats struct {
	txn.Stats
	// Broken: the coordinator stopped serving (closed, or its log
	// failed).
	Broken bool
	// RecoverStart and RecoverEnd are when Start began and finished
	// reading the log back.
	RecoverStart, RecoverEnd time.Time
}

// Stats reports the coordinator.
func (c *Coordinator) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Stats: c.core.Stats(), Broken: c.broken, RecoverStart: c.recoverStart, RecoverEnd: c.recoverEnd}
}

// Held lists the transactions the coordinator holds (open or ending), by
// id.
func (c *Coordinator) Held() []txn.Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.Held()
}

// NewTxn opens a transaction with the given timeout.
func (c *Coordinator) NewTxn(ctx context.Context, timeout time.Duration) (txn.ID, error) {
	c.mu.Lock()
	if c.broken {
		c.mu.Unlock()
		return txn.ID{}, ErrClosed
	}
	id, r, err := c.core.New(c.cfg.Now(), timeout)
	c.mu.Unlock()
	if err != nil {
		return txn.ID{}, err
	}
	c.poke()
	return id, c.append(ctx, r)
}

// AddPartitions records partitions a transaction produces to.
func (c *Coordinator) AddPartitions(ctx context.Context, id txn.ID, parts []string) error {
	return c.add(ctx, func() (txn.Record, bool, error) { return c.core.AddPartitions(id, parts) })
}

// AddSubscriptions records subscriptions a transaction acknowledges on.
func (c *Coordinator) AddSubscriptions(ctx context.Context, id txn.ID, subs []txn.Sub) error {
	return c.add(ctx, func() (txn.Record, bool, error) { return c.core.AddSubscriptions(id, subs) })
}

func (c *Coordinator) add(ctx context.Context, op func() (txn.Record, bool, error)) error {
	c.mu.Lock()
	if c.broken {
		c.mu.Unlock()
		return ErrClosed
	}
	r, ok, err := op()
	c.mu.Unlock()
	if err != nil || !ok {
		return err
	}
	return c.append(ctx, r)
}

// End commits or aborts a transaction and returns once every topic and
// subscription it touched was told, or ctx ends (the end goes on).
func (c *Coordinator) End(ctx context.Context, id txn.ID, a txn.Action) error {
	c.mu.Lock()
	if c.broken {
		c.mu.Unlock()
		return ErrClosed
	}
	r, f, ok, err := c.core.End(id, a)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	w := c.waiterLocked(id)
	c.mu.Unlock()
	if ok {
		if err := c.append(ctx, r); err != nil {
			return err
		}
		c.wg.Add(1)
		go c.finish(f)
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return fmt.Errorf("%w: end of transaction %v still under way: %w", errkind.ErrServiceNotReady, id, ctx.Err())
	}
}

func (c *Coordinator) waiterLocked(id txn.ID) *waiter {
	w := c.waiters[id]
	if w == nil {
		w = &waiter{done: make(chan struct{})}
		c.waiters[id] = w
	}
	return w
}

// append stores r; a failure breaks the coordinator, whose memory is
// then ahead of its log. The write is the coordinator's, not the
// request's: it is not cut short when ctx ends (a client that goes away
// mid-request, its connection's context cancelled, would otherwise give
// up the coordinator for every client); ctx's values are kept.
func (c *Coordinator) append(ctx context.Context, r txn.Record) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appendTimeout)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel) // closing the coordinator ends it
	defer stop()
	if err := c.log.Append(wctx, r.Marshal()); err != nil {
		c.mu.Lock()
		c.broken = true
		c.mu.Unlock()
		c.lg.Warn("transaction log write failed; coordinator given up", "err", err)
		return fmt.Errorf("%w: transaction log: %w", errkind.ErrTransactionCoordinatorNotFound, err)
	}
	if c.appended.Add(1) >= int64(c.cfg.CheckpointEvery) {
		c.checkpoint()
	}
	return nil
}

// checkpoint snapshots the coordinator into its log, unless one is
// under way.
func (c *Coordinator) checkpoint() {
	if !c.ckMu.TryLock() {
		return
	}
	defer c.ckMu.Unlock()
	c.appended.Store(0)
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	err := c.log.Checkpoint(ctx, func() []byte {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.core.Snapshot()
	})
	if err != nil {
		c.lg.Warn("transaction log checkpoint failed; the next one retries", "err", err)
	}
}

// finish tells every partition and subscription of f, retrying each
// until it succeeds or the coordinator closes, then logs the end done
// and wakes the requests waiting for it.
func (c *Coordinator) finish(f txn.Fanout) {
	defer c.wg.Done()
	var wg sync.WaitGroup
	var failed sync.Once
	closed := false
	try := func(what string, fn func(ctx context.Context) error) {
		defer wg.Done()
		for delay := 50 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
			ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
			err := fn(ctx)
			cancel()
			if err == nil {
				return
			}
			c.lg.Info("transaction end not delivered yet; retrying", "txn", f.ID.String(), "to", what, "err", err)
			select {
			case <-c.ctx.Done():
				failed.Do(func() { closed = true })
				return
			case <-time.After(delay):
			}
		}
	}
	for _, p := range f.Partitions {
		wg.Add(1)
		go try(p, func(ctx context.Context) error { return c.ender.EndOnPartition(ctx, p, f.ID, f.Action) })
	}
	for _, s := range f.Subs {
		wg.Add(1)
		go try(s.Topic+"/"+s.Subscription, func(ctx context.Context) error { return c.ender.EndOnSubscription(ctx, s, f.ID, f.Action) })
	}
	wg.Wait()
	if closed {
		return
	}
	c.mu.Lock()
	r, err := c.core.Done(f.ID)
	c.mu.Unlock()
	if err == nil {
		err = c.append(c.ctx, r)
	}
	c.mu.Lock()
	if w := c.waiters[f.ID]; w != nil {
		w.err = err
		close(w.done)
		delete(c.waiters, f.ID)
	}
	c.mu.Unlock()
}

func (c *Coordinator) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// deadlines aborts open transactions at their deadlines.
func (c *Coordinator) deadlines() {
	defer c.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c.mu.Lock()
		rs, fs := c.core.Expire(c.cfg.Now())
		at, ok := c.core.NextDeadline()
		for _, f := range fs {
			c.waiterLocked(f.ID)
		}
		c.mu.Unlock()
		for i, r := range rs {
			c.lg.Info("transaction timed out; aborting it", "txn", fs[i].ID.String())
			if err := c.append(c.ctx, r); err != nil {
				return
			}
			c.wg.Add(1)
			go c.finish(fs[i])
		}
		wait := time.Hour
		if ok {
			wait = max(time.Millisecond, at.Sub(c.cfg.Now()))
		}
		timer.Reset(wait)
		select {
		case <-c.ctx.Done():
			return
		case <-c.kick:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		}
	}
}

// IsClosed says whether err is a closed coordinator's.
func IsClosed(err error) bool { return errors.Is(err, ErrClosed) }
