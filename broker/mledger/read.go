package mledger

import (
	"context"
	"fmt"
	"time"

	"github.com/isobar-mq/isobar/broker/mledger/ledgers"
)

// Entry is one entry of the managed ledger.
type Entry struct {
	Position Position
	Data     []byte
}

// Read returns up to limit entries from from on, in order, crossing ledger
// boundaries, and the position to read from next. Reading at the end of the
// log (just after the last confirmed entry) returns no entries and no error;
// a position after that, or in no ledger of the log, is ErrInvalidPosition.
// A position in a ledger already trimmed moves to the first entry kept.
func (m *ManagedLedger) Read(ctx context.Context, from Position, limit int) ([]Entry, Position, error) {
	if limit <= 0 {
		return nil, from, fmt.Errorf("%w: read of %d entries", ErrInvalidPosition, limit)
	}
	ls := m.view()
	p, atEnd, err := startPosition(ls, from)
	if err != nil {
		return nil, from, fmt.Errorf("mledger %s: read: %w", m.name, err)
	}
	if atEnd {
		return nil, from, nil
	}
	var out []Entry
	for len(out) < limit {
		i := findLedger(ls, p.Ledger)
		l := ls[i]
		last := min(l.Entries-1, p.Entry+int64(limit-len(out))-1)
		es, err := m.readLedger(ctx, l, p.Entry, last)
		if err != nil {
			return out, p, fmt.Errorf("mledger %s: read %v: %w", m.name, p, err)
		}
		out = append(out, es...)
		end := Position{Ledger: l.ID, Entry: last}
		n, ok := nextPosition(ls, end)
		if !ok {
			return out, Position{Ledger: l.ID, Entry: last + 1}, nil
		}
		p = n
	}
	return out, p, nil
}

// readLedger reads entries first..last of one ledger: from the tail cache
// what it holds, the rest from the bookies.
func (m *ManagedLedger) readLedger(ctx context.Context, l LedgerInfo, first, last int64) ([]Entry, error) {
	var cached [][]byte
	bookieLast := last
	if l.State == LedgerOpen {
		m.mu.Lock()
		if tc := m.live().tail; tc != nil && tc.ledger == l.ID && last >= tc.first && last < tc.first+int64(len(tc.entries)) {
			from := max(first, tc.first)
			cached = append(cached, tc.entries[from-tc.first:last-tc.first+1]...)
			bookieLast = from - 1
		}
		m.mu.Unlock()
	}
	out := make([]Entry, 0, last-first+1)
	if bookieLast >= first {
		r, err := m.reader(ctx, l)
		if err != nil {
			return nil, err
		}
		if l.State == LedgerOpen {
			if err := waitLAC(ctx, r, bookieLast); err != nil {
				return nil, err
			}
		}
		es, err := r.Read(ctx, first, bookieLast)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			out = append(out, Entry{Position: Position{Ledger: l.ID, Entry: e.ID}, Data: e.Data})
		}
	}
	for i, d := range cached {
		out = append(out, Entry{Position: Position{Ledger: l.ID, Entry: bookieLast + 1 + int64(i)}, Data: d})
	}
	return out, nil
}

// waitLAC waits (a bounded time) until r can read entry want.
func waitLAC(ctx context.Context, r ledgers.Reader, want int64) error {
	if r.LastAddConfirmed() >= want {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for r.LastAddConfirmed() < want {
		if _, err := r.WaitLAC(wctx, want-1); err != nil {
			return err
		}
	}
	return nil
}

// reader returns the cached reader of a ledger, opening it without
// recovery on first use. A reader opened while the ledger was open is
// reopened once the list says it is closed.
func (m *ManagedLedger) reader(ctx context.Context, l LedgerInfo) (ledgers.Reader, error) {
	lv := m.live()
	lv.readersMu.Lock()
	r := lv.readers[l.ID]
	lv.readersMu.Unlock()
	if r != nil && (r.Closed() || l.State == LedgerOpen) {
		return r, nil
	}
	r, err := m.deps.Ledgers.OpenReader(ctx, uint64(l.ID))
	if err != nil {
		return nil, err
	}
	lv.readersMu.Lock()
	if lv.readers == nil {
		lv.readers = map[int64]ledgers.Reader{}
	}
	lv.readers[l.ID] = r
	lv.readersMu.Unlock()
	return r, nil
}

// InTail reports whether a read from p is served without the bookies:
// p is in the tail cache, or after the last confirmed entry (nothing to
// read yet). A dispatcher reading from anywhere else is catching up on a
// backlog (the broker paces those reads, broker/backlog.go).
func (m *ManagedLedger) InTail(p Position) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.Compare(m.lastConfirmed) > 0 {
		return true
	}
	lv := m.lv.Load()
	if lv == nil {
		return false // dormant: no tail cache (nor anything after the last confirmed entry to serve)
	}
	tc := lv.tail
	return tc != nil && len(tc.entries) > 0 && p.Ledger == tc.ledger && p.Entry >= tc.first
}
