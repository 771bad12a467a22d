package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Writer appends entries to a ledger it created. Only one writer exists per
// ledger; once recovery fences the ledger every add fails with ErrFenced.
// It is safe for concurrent use; entries get ids in the order Append and
// AppendAsync are called.
//
// One goroutine owns the writer's state (a writeCore) and does its I/O:
// callers and bookie connections post events to its mailbox, it applies
// them to the core and carries out what the core asks (sends, ensemble
// changes). Callbacks run in entry order on a second goroutine.
type Writer struct {
	c        *Client
	id       uint64
	recovery bool
	log      *slog.Logger

	slots  chan struct{} // one per entry between AppendAsync and its callback
	bytes  byteBudget    // data bytes between AppendAsync and the callback
	ctx    context.Context
	cancel context.CancelFunc
	mb     mailbox
	cbq    callbackQueue
	wg     sync.WaitGroup // the driver and ensemble-change goroutines
	cbDone chan struct{}  // closed when the callback goroutine returns

	lac atomic.Int64

	// Owned by the driver goroutine.
	core       *writeCore
	md         Metadata
	rev        int64
	quarantine []string // bookies that failed under this writer
	drains     []chan drainResult
	retry      *time.Timer

	mu       sync.Mutex
	closing  bool  // Close was called: no more appends
	closed   bool  // Close finished, or the writer was aborted
	closeErr error // how it ended: nil only when Close wrote the closed metadata
	stopped  bool  // the goroutines were told to stop
	mdShared Metadata
}

type drainResult struct {
	err    error
	md     Metadata
	rev    int64
	lac    int64
	length uint64
}

type eventKind int

const (
	evAppend eventKind = iota
	evAppendEncoded
	evResult
	evChange
	evRetryChange
	evDrain
)

type event struct {
	kind   eventKind
	entry  int64
	index  int
	bookie string
	data   []byte
	length uint64
	err    error
	cb     func(int64, error)
	change *changeResult
	drain  chan drainResult
}

// mailbox is the driver's event queue. put never blocks: bookie connections
// post to it from their reader goroutines. It holds at most about
// MaxInFlight × write quorum answers plus MaxInFlight appends, since every
// event stems from an entry holding an in-flight slot.
type mailbox struct {
	mu     sync.Mutex
	q      []event
	notify chan struct{}
}

func (m *mailbox) put(ev event) {
	m.mu.Lock()
	m.q = append(m.q, ev)
	m.mu.Unlock()
	select {
	case m.notify <- struct{}{}:
	default:
	}
}

func (m *mailbox) take(buf []event) []event {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.q
	m.q = buf[:0]
	return q
}

// callbackQueue runs completions in order on its own goroutine, so a slow
// callback never stalls the driver.
type callbackQueue struct {
	mu     sync.Mutex
	q      []completion
	closed bool
	notify chan struct{}
}

func (q *callbackQueue) put(cs []completion) {
	if len(cs) == 0 {
		return
	}
	q.mu.Lock()
	q.q = append(q.q, cs...)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (q *callbackQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (c *Client) newWriter(id uint64, md Metadata, rev int64, recovery bool, lac int64, lacLen uint64) *Writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{
		c:        c,
		id:       id,
		recovery: recovery,
		log:      c.log.With("ledger", id),
		slots:    make(chan struct{}, c.cfg.MaxInFlight),
		bytes:    byteBudget{max: c.cfg.MaxInFlightBytes},
		ctx:      ctx,
		cancel:   cancel,
		mb:       mailbox{notify: make(chan struct{}, 1)},
		cbq:      callbackQueue{notify: make(chan struct{}, 1)},
		cbDone:   make(chan struct{}),
		core:     newWriteCore(id, md.EnsembleSize, md.WriteQuorum, md.AckQuorum, recovery, md.Last(), lac, lacLen),
		md:       md,
		rev:      rev,
		mdShared: md.Clone(),
	}
	w.lac.Store(lac)
	if !recovery {
		c.mu.Lock()
		c.writers[w] = struct{}{}
		c.mu.Unlock()
	}
	w.wg.Add(1)
	go func() { defer w.wg.Done(); w.run() }()
	go func() { defer close(w.cbDone); w.runCallbacks() }()
	return w
}

// ID is the ledger id.
func (w *Writer) ID() uint64 { return w.id }

// LastAddConfirmed is the last entry acknowledged (in order) to the caller; -1 if none.
func (w *Writer) LastAddConfirmed() int64 { return w.lac.Load() }

// Metadata is the writer's view of the ledger's metadata (ensembles change
// when bookies are replaced).
func (w *Writer) Metadata() Metadata {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mdShared.Clone()
}

// AppendAsync appends data as the next entry and calls cb with its id once
// an ack quorum of bookies has it, or with the error that failed it.
// Callbacks run in entry order on the writer's callback goroutine and must
// not block for long, and must not call Append or Close (AppendAsync is
// fine). At most Config.MaxInFlight entries and Config.MaxInFlightBytes of
// data are outstanding; AppendAsync blocks while either limit is reached
// (an entry larger than the byte limit goes alone). data must not be modified until cb
// runs. A failure before an id was assigned (writer closed, entry too large)
// calls cb with id -1, possibly on the calling goroutine.
func (w *Writer) AppendAsync(data []byte, cb func(entryID int64, err error)) {
	if err := w.appendAsync(context.Background(), data, cb); err != nil {
		cb(-1, err)
	}
}

// Append appends data as the next entry and returns its id once an ack
// quorum of bookies has it. If ctx ends first the entry may still be written.
func (w *Writer) Append(ctx context.Context, data []byte) (int64, error) {
	type result struct {
		id  int64
		err error
	}
	ch := make(chan result, 1)
	if err := w.appendAsync(ctx, data, func(id int64, err error) { ch <- result{id, err} }); err != nil {
		return -1, err
	}
	select {
	case r := <-ch:
		return r.id, r.err
	case <-ctx.Done():
		return -1, fmt.Errorf("ledger %d: append: %w", w.id, ctx.Err())
	}
}

// appendAsync queues an append; on error cb has not been and will not be called.
func (w *Writer) appendAsync(ctx context.Context, data []byte, cb func(int64, error)) error {
	if len(data) > w.c.cfg.MaxEntrySize {
		return fmt.Errorf("%w: ledger %d: %d bytes, limit %d", ErrTooLarge, w.id, len(data), w.c.cfg.MaxEntrySize)
	}
	return w.enqueue(ctx, event{kind: evAppend, data: data, cb: cb})
}

// enqueue takes an in-flight slot and the entry's bytes from the budget
// (blocking while either is exhausted) and posts ev to the driver. Its
// callback gives both back just before the caller's callback runs.
func (w *Writer) enqueue(ctx context.Context, ev event) error {
	select {
	case w.slots <- struct{}{}:
	default:
		select {
		case w.slots <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("ledger %d: append: %w", w.id, ctx.Err())
		case <-w.ctx.Done():
			return fmt.Errorf("ledger %d: %w", w.id, ErrClosed)
		}
	}
	n := int64(len(ev.data))
	if err := w.bytes.acquire(ctx, w.ctx.Done(), n); err != nil {
		<-w.slots
		if ctx.Err() != nil {
			return fmt.Errorf("ledger %d: append: %w", w.id, err)
		}
		return fmt.Errorf("ledger %d: %w", w.id, ErrClosed)
	}
	cb := ev.cb
	ev.cb = func(id int64, err error) {
		<-w.slots
		w.bytes.release(n)
		cb(id, err)
	}
	w.mu.Lock()
	if w.closing || w.stopped {
		w.mu.Unlock()
		<-w.slots
		w.bytes.release(n)
		return fmt.Errorf("ledger %d: %w", w.id, ErrClosed)
	}
	w.mb.put(ev)
	w.mu.Unlock()
	return nil
}

// byteBudget bounds the data bytes in flight. An entry larger than the
// whole budget is let through alone.
type byteBudget struct {
	mu   sync.Mutex
	used int64
	max  int64
	wake chan struct{} // closed and replaced on every release
}

func (b *byteBudget) acquire(ctx context.Context, stop <-chan struct{}, n int64) error {
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		if b.wake == nil {
			b.wake = make(chan struct{})
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return ErrClosed
		}
	}
}

func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
	b.mu.Unlock()
}

// Close waits for the outstanding entries, then closes the ledger in the
// metadata at the last acknowledged entry and its length. Appends after
// Close fail with ErrClosed. If ctx ends first the writer stays closing and
// Close may be called again. A fenced writer's Close returns ErrFenced.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		// Already ended: report how. Only a Close that wrote the closed
		// metadata returns nil; an aborted writer (its client closed) left
		// the ledger open, for recovery to close.
		err := w.closeErr
		w.mu.Unlock()
		return err
	}
	if w.stopped {
		w.mu.Unlock()
		return fmt.Errorf("ledger %d: %w", w.id, ErrClosed)
	}
	w.closing = true
	w.mu.Unlock()
	r, err := w.drain(ctx)
	if err != nil {
		return err
	}
	if r.err != nil {
		w.stop(nil)
		err := fmt.Errorf("ledger %d: close: %w", w.id, r.err)
		w.markClosed(err)
		return err
	}
	mctx, cancel := context.WithTimeout(ctx, w.c.cfg.RequestTimeout)
	md, _, err := w.c.closeLedger(mctx, w.id, r.md, r.rev, StateOpen, r.lac, r.length)
	cancel()
	if err != nil {
		if !errors.Is(err, ErrFenced) {
			return err // the metadata may be retried by another Close
		}
		w.stop(nil)
		w.markClosed(err)
		return err
	}
	w.mu.Lock()
	w.mdShared = md
	w.mu.Unlock()
	w.stop(nil)
	w.markClosed(nil)
	w.log.Debug("ledger closed", "lastEntry", r.lac, "length", r.length)
	return nil
}

func (w *Writer) markClosed(err error) {
	w.mu.Lock()
	w.closed = true
	w.closeErr = err
	w.mu.Unlock()
	w.c.mu.Lock()
	delete(w.c.writers, w)
	w.c.mu.Unlock()
}

// drain waits until nothing is pending and returns the writer's final state.
func (w *Writer) drain(ctx context.Context) (drainResult, error) {
	ch := make(chan drainResult, 1)
	w.mb.put(event{kind: evDrain, drain: ch})
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return drainResult{}, fmt.Errorf("ledger %d: waiting for outstanding entries: %w", w.id, ctx.Err())
	case <-w.ctx.Done():
		return drainResult{}, fmt.Errorf("ledger %d: %w", w.id, ErrClosed)
	}
}

// abort stops the writer without closing the ledger: pending entries fail
// with err.
func (w *Writer) abort(err error) {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.stop(err)
	w.markClosed(err)
}

// stop ends the writer's goroutines. Entries still pending fail with err
// (ErrClosed when nil); every callback has run when stop returns.
func (w *Writer) stop(err error) {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		<-w.cbDone
		return
	}
	w.stopped = true
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
	if err == nil {
		err = fmt.Errorf("ledger %d: %w", w.id, ErrClosed)
	}
	// The driver is gone; finish its work here.
	if w.retry != nil {
		w.retry.Stop()
	}
	w.core.Fail(err)
	for _, ev := range w.mb.take(nil) {
		w.apply(&ev)
	}
	_, done, _ := w.core.Ready()
	w.cbq.put(done)
	for _, d := range w.drains {
		d <- drainResult{err: err}
	}
	w.cbq.close()
	<-w.cbDone
}

// run is the driver: it applies events to the core and carries out the
// core's requests until the writer stops.
func (w *Writer) run() {
	var buf []event
	for {
		select {
		case <-w.mb.notify:
		case <-w.ctx.Done():
			return
		}
		evs := w.mb.take(buf)
		for i := range evs {
			w.apply(&evs[i])
			evs[i] = event{}
		}
		buf = evs[:0]
		w.flush()
	}
}

func (w *Writer) apply(ev *event) {
	switch ev.kind {
	case evAppend:
		w.core.Append(ev.data, ev.cb)
	case evAppendEncoded:
		w.core.AppendEncoded(ev.entry, ev.data, ev.length, ev.cb)
	case evResult:
		w.core.AddResult(ev.entry, ev.index, ev.bookie, ev.err)
		if ev.err != nil && w.core.Err() == nil {
			w.log.Debug("add failed", "entry", ev.entry, "bookie", ev.bookie, "err", ev.err)
		}
	case evChange:
		r := ev.change
		if r.err != nil {
			w.log.Warn("ensemble change failed", "err", r.err)
			w.core.EnsembleChangeFailed(r.err)
			if w.core.Degraded() && w.ctx.Err() == nil {
				w.retry = time.AfterFunc(w.c.cfg.ChangeRetryInterval, func() { w.mb.put(event{kind: evRetryChange}) })
			}
			return
		}
		w.md, w.rev = r.md, r.rev
		w.mu.Lock()
		w.mdShared = r.md.Clone()
		w.mu.Unlock()
		w.log.Info("ensemble changed", "firstEntry", r.start, "replaced", r.replaced, "ensemble", r.md.Last().Bookies)
		w.core.EnsembleChanged(r.start, r.replaced)
	case evRetryChange:
		w.core.RetryChange()
	case evDrain:
		w.drains = append(w.drains, ev.drain)
	}
}

// flush carries out what the core asked for until it asks nothing more.
func (w *Writer) flush() {
	for {
		sends, done, change := w.core.Ready()
		w.lac.Store(w.core.LAC())
		w.cbq.put(done)
		if change != nil {
			w.startChange(*change)
		}
		for _, s := range sends {
			w.send(s)
		}
		if len(sends) == 0 && len(done) == 0 && change == nil {
			break
		}
	}
	if len(w.drains) > 0 && w.core.Idle() {
		r := drainResult{err: w.core.Err(), md: w.md.Clone(), rev: w.rev, lac: w.core.LAC(), length: w.core.LACLength()}
		for _, d := range w.drains {
			d <- r
		}
		w.drains = nil
	}
}

func (w *Writer) send(s sendOp) {
	conn, err := w.c.bookie(w.ctx, s.Bookie)
	if err != nil {
		w.core.AddResult(s.Entry, s.Index, s.Bookie, err)
		return
	}
	// No per-add cancellation (a context.AfterFunc per add cost ~6% CPU):
	// a stopping writer fails its pending entries itself (core.Fail), and
	// the connection's request timeout bounds an add the bookie never answers.
	conn.AddAsync(context.Background(), w.id, uint64(s.Entry), s.Payload, w.recovery, func(err error) {
		w.mb.put(event{kind: evResult, entry: s.Entry, index: s.Index, bookie: s.Bookie, err: err})
	})
}

func (w *Writer) startChange(req changeRequest) {
	for _, idx := range req.Failed {
		if b := req.Ensemble[idx]; !slices.Contains(w.quarantine, b) {
			w.quarantine = append(w.quarantine, b)
		}
	}
	want := StateOpen
	if w.recovery {
		want = StateInRecovery
	}
	md, rev, exclude := w.md.Clone(), w.rev, slices.Clone(w.quarantine)
	w.log.Info("replacing failed bookies", "failed", req.Failed, "firstEntry", req.Start)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		r := w.c.changeEnsemble(w.ctx, w.id, md, rev, want, req, exclude)
		w.mb.put(event{kind: evChange, change: &r})
	}()
}

// runCallbacks delivers completions in order (each callback first frees its
// entry's in-flight slot and bytes, see enqueue).
func (w *Writer) runCallbacks() {
	var batch []completion
	for {
		<-w.cbq.notify
		for {
			w.cbq.mu.Lock()
			batch, w.cbq.q = w.cbq.q, batch[:0]
			closed := w.cbq.closed
			w.cbq.mu.Unlock()
			if len(batch) == 0 {
				if closed {
					return
				}
				break
			}
			for i, c := range batch {
				c.CB(c.Entry, c.Err)
				batch[i] = completion{}
			}
		}
	}
}
