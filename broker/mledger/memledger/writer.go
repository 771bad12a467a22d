package memledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/isobar-mq/isobar/bookie/ledger"
)

// Writer appends to one ledger of a Store (ledgers.Writer).
type Writer struct {
	s      *Store
	c      *Client // the client that created it; nil: the store
	id     uint64
	ctx    context.Context // ends when the writer is aborted
	cancel context.CancelFunc
	lac    atomic.Int64

	// mu guards the fields below.
	mu      sync.Mutex
	md      ledger.Metadata
	next    int64           // the next entry id
	pending []pendingAppend // appends not yet stored, in entry order
	// idle is nil while no goroutine stores pending appends; while one
	// does, it is closed when that goroutine returns.
	idle     chan struct{}
	broken   error // the first failed append's error
	closing  bool
	closed   bool
	closeErr error
}

type pendingAppend struct {
	entry int64
	data  []byte
	lac   int64 // the writer's last-add-confirmed when it was sent
	cb    func(int64, error)
}

// ID implements ledgers.Writer.
func (w *Writer) ID() uint64 { return w.id }

// LastAddConfirmed implements ledgers.Writer.
func (w *Writer) LastAddConfirmed() int64 { return w.lac.Load() }

// Metadata implements ledgers.Writer.
func (w *Writer) Metadata() ledger.Metadata {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.md.Clone()
}

// AppendAsync implements ledgers.Writer. The appends are stored, and
// their callbacks run, in order on a goroutine the writer starts when it
// has appends to store and that returns when it has none.
func (w *Writer) AppendAsync(data []byte, cb func(entry int64, err error)) {
	if limit := w.s.cfg.MaxEntrySize; limit > 0 && len(data) > limit {
		cb(-1, fmt.Errorf("%w: ledger %d: %d bytes, limit %d", ledger.ErrTooLarge, w.id, len(data), limit))
		return
	}
	w.mu.Lock()
	if w.closing || w.closed {
		w.mu.Unlock()
		cb(-1, fmt.Errorf("ledger %d: %w", w.id, ledger.ErrClosed))
		return
	}
	w.pending = append(w.pending, pendingAppend{entry: w.next, data: data, lac: w.lac.Load(), cb: cb})
	w.next++
	if w.idle == nil {
		w.idle = make(chan struct{})
		go w.run(w.idle)
	}
	w.mu.Unlock()
}

// run stores the pending appends in order and calls their callbacks.
func (w *Writer) run(idle chan struct{}) {
	for {
		w.mu.Lock()
		if len(w.pending) == 0 {
			w.idle = nil
			close(idle)
			w.mu.Unlock()
			return
		}
		a := w.pending[0]
		w.pending = w.pending[1:]
		err := w.broken
		w.mu.Unlock()
		if err == nil {
			err = w.store(a)
		}
		if err != nil {
			w.mu.Lock()
			if w.broken == nil {
				w.broken = err
			}
			w.mu.Unlock()
			a.cb(a.entry, err)
			continue
		}
		w.lac.Store(a.entry)
		a.cb(a.entry, nil)
	}
}

// store puts one append on the "bookies".
func (w *Writer) store(a pendingAppend) error {
	if w.ctx.Err() != nil {
		return fmt.Errorf("ledger %d: %w", w.id, ledger.ErrClosed)
	}
	ierr := w.s.check(w.ctx, OpAppend, w.id, a.entry)
	if ierr != nil && !errors.Is(ierr, ErrAckLost) {
		return ierr
	}
	if w.ctx.Err() != nil {
		return fmt.Errorf("ledger %d: %w", w.id, ledger.ErrClosed)
	}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	l := w.s.ledgers[w.id]
	switch {
	case l == nil:
		return fmt.Errorf("ledger %d: entry %d: %w", w.id, a.entry, ledger.ErrNoLedger)
	case l.fenced:
		return fmt.Errorf("ledger %d: entry %d: %w", w.id, a.entry, ledger.ErrFenced)
	case l.md.State != ledger.StateOpen || int64(len(l.entries)) != a.entry:
		return fmt.Errorf("ledger %d: entry %d: %w (ledger %s with %d entries)", w.id, a.entry, ledger.ErrClosed, l.md.State, len(l.entries))
	}
	l.entries = append(l.entries, a.data)
	if a.lac > l.lac {
		l.lac = a.lac
		l.wake()
	}
	return ierr
}

// Close implements ledgers.Writer.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		err := w.closeErr
		w.mu.Unlock()
		return err
	}
	w.closing = true
	idle := w.idle
	w.mu.Unlock()
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("ledger %d: waiting for outstanding entries: %w", w.id, ctx.Err())
		}
	}
	if err := w.s.check(ctx, OpClose, w.id, -1); err != nil {
		return err // as a failed metadata write: Close may be called again
	}
	w.mu.Lock()
	broken := w.broken
	w.mu.Unlock()
	if broken != nil {
		return w.markClosed(fmt.Errorf("ledger %d: close: %w", w.id, broken))
	}
	w.s.mu.Lock()
	l := w.s.ledgers[w.id]
	var err error
	switch {
	case l == nil:
		err = fmt.Errorf("ledger %d: close: %w", w.id, ledger.ErrNoLedger)
	case l.fenced:
		err = fmt.Errorf("ledger %d: close: %w", w.id, ledger.ErrFenced)
	default:
		last := w.lac.Load()
		l.md.State, l.md.LastEntry, l.md.Length = ledger.StateClosed, last, l.length(last)
		l.wake()
		w.mu.Lock()
		w.md = l.md.Clone()
		w.mu.Unlock()
	}
	w.s.mu.Unlock()
	return w.markClosed(err)
}

func (w *Writer) markClosed(err error) error {
	w.mu.Lock()
	w.closed, w.closeErr = true, err
	w.mu.Unlock()
	w.cancel()
	if w.c != nil {
		w.c.forget(w)
	}
	return err
}

// abort stops the writer without closing its ledger.
func (w *Writer) abort() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closing, w.closed, w.closeErr = true, true, fmt.Errorf("ledger %d: %w", w.id, ledger.ErrClosed)
	w.mu.Unlock()
	w.cancel()
}
