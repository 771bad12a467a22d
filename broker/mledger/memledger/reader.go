package memledger

import (
	"context"
	"fmt"
	"sync"

	"github.com/isobar-mq/isobar/bookie/ledger"
)

// Reader reads one ledger of a Store (ledgers.Reader).
type Reader struct {
	s  *Store
	id uint64

	// mu guards md and lac: what the reader last learnt of the ledger.
	mu  sync.Mutex
	md  ledger.Metadata
	lac int64
}

// learn takes in what the store says of the ledger. s.mu must be held.
func (r *Reader) learn(l *memLedger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.md = l.md.Clone()
	if l.md.State == ledger.StateClosed {
		r.lac = l.md.LastEntry
	} else {
		r.lac = max(r.lac, l.lac)
	}
}

// Closed implements ledgers.Reader.
func (r *Reader) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.md.State == ledger.StateClosed
}

// LastAddConfirmed implements ledgers.Reader.
func (r *Reader) LastAddConfirmed() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lac
}

// WaitLAC implements ledgers.Reader. A closed ledger with nothing beyond
// prev gives its last entry and ledger.ErrClosed.
func (r *Reader) WaitLAC(ctx context.Context, prev int64) (int64, error) {
	for {
		r.mu.Lock()
		lac, closed := r.lac, r.md.State == ledger.StateClosed
		r.mu.Unlock()
		if lac > prev {
			return lac, nil
		}
		if closed {
			return lac, fmt.Errorf("ledger %d: nothing after entry %d: %w", r.id, prev, ledger.ErrClosed)
		}
		r.s.mu.Lock()
		l := r.s.ledgers[r.id]
		if l == nil {
			r.s.mu.Unlock()
			return lac, fmt.Errorf("ledger %d: %w", r.id, ledger.ErrNoLedger)
		}
		if l.lac > prev || l.md.State == ledger.StateClosed {
			r.learn(l)
			r.s.mu.Unlock()
			continue
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		r.s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return lac, fmt.Errorf("ledger %d: wait for entries after %d: %w", r.id, prev, ctx.Err())
		}
	}
}

// Read implements ledgers.Reader.
func (r *Reader) Read(ctx context.Context, first, last int64) ([]ledger.Entry, error) {
	if first < 0 || last < first {
		return nil, fmt.Errorf("%w: ledger %d: read range %d..%d", ledger.ErrInvalid, r.id, first, last)
	}
	if lac := r.LastAddConfirmed(); last > lac {
		return nil, fmt.Errorf("%w: ledger %d: entry %d is beyond the last add confirmed %d", ledger.ErrNoEntry, r.id, last, lac)
	}
	if err := r.s.check(ctx, OpRead, r.id, first); err != nil {
		return nil, err
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	l := r.s.ledgers[r.id]
	if l == nil {
		return nil, fmt.Errorf("ledger %d: %w", r.id, ledger.ErrNoLedger)
	}
	if last >= int64(len(l.entries)) {
		return nil, fmt.Errorf("%w: ledger %d: entry %d", ledger.ErrNoEntry, r.id, last)
	}
	out := make([]ledger.Entry, 0, last-first+1)
	for id := first; id <= last; id++ {
		out = append(out, ledger.Entry{ID: id, Data: l.entries[id]})
	}
	return out, nil
}
