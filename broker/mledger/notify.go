package mledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/isobar-mq/isobar/broker/mledger/ackset"
	"github.com/isobar-mq/isobar/metastore"
)

// Notify returns a channel that is closed when an entry is confirmed after
// the call. Tailing readers take it, check for entries, and wait on it when
// there are none, so an entry confirmed in between is never missed.
func (m *ManagedLedger) Notify() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	lv := m.live()
	if lv.notify == nil {
		lv.notify = make(chan struct{})
	}
	return lv.notify
}

// wakeLocked closes the notify channel, if anyone took it. m.mu held.
func (m *ManagedLedger) wakeLocked() {
	if lv := m.lv.Load(); lv != nil && lv.notify != nil {
		close(lv.notify)
		lv.notify = nil
	}
}

// FirstPosition is the first entry still in the log, or the position just
// after the last entry (with ok false) when the log has none.
func (m *ManagedLedger) FirstPosition() (p Position, ok bool) {
	ls := m.view()
	if p, ok := firstFrom(ls, 0); ok {
		return p, true
	}
	last := lastPosition(ls)
	return Position{Ledger: last.Ledger, Entry: last.Entry + 1}, false
}

// Valid reports whether p names an entry of the log.
func (m *ManagedLedger) Valid(p Position) bool { return validEntry(m.view(), p) }

// AckMany acknowledges each valid position of ps individually and persists
// the cursor once. Positions that name no entry of the log are skipped and
// reported in the error (wrapping ErrInvalidPosition) after the valid ones
// are applied.
func (c *Cursor) AckMany(ctx context.Context, ps []Position) error {
	ls := c.m.view()
	var bad []Position
	good := ps[:0:0]
	for _, p := range ps {
		if validEntry(ls, p) {
			good = append(good, p)
		} else {
			bad = append(bad, p)
		}
	}
	var err error
	if len(good) > 0 {
		err = c.apply(ctx, func(s *ackset.Set) (bool, error) {
			changed := false
			for _, p := range good {
				ch, err := s.Ack(p)
				if err != nil {
					return changed, err
				}
				changed = changed || ch
			}
			return changed, nil
		})
	}
	if err == nil && len(bad) > 0 {
		err = fmt.Errorf("mledger %s: cursor %s: ack %v: %w (last confirmed %v)", c.m.name, c.name, bad, ErrInvalidPosition, c.m.LastConfirmed())
	}
	return err
}

// ResetTo moves the cursor so that p is the next entry it delivers:
// everything before p counts as acknowledged, nothing after it does. p may
// be the position just after the last entry (the end of the log); a p before
// the first entry kept resets to the beginning.
func (c *Cursor) ResetTo(ctx context.Context, p Position) error {
	if p.Ledger < 0 || p.Entry < 0 {
		return fmt.Errorf("mledger %s: cursor %s: reset to %v: %w", c.m.name, c.name, p, ErrInvalidPosition)
	}
	md := Position{Ledger: p.Ledger, Entry: p.Entry - 1}
	if first, ok := c.m.FirstPosition(); ok && p.Compare(first) <= 0 {
		md = Position{Ledger: first.Ledger, Entry: first.Entry - 1}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return fmt.Errorf("mledger %s: cursor %s: %w", c.m.name, c.name, ErrClosed)
	}
	if err := c.m.checkOpen(); err != nil {
		return err
	}
	next := ackset.New(md)
	next.MaxRanges = c.set.MaxRanges
	old, oldBatch := c.set, c.batch
	c.set, c.batch = next, nil // a reset forgets partial batches too
	defer func() { c.partial.Store(int32(len(c.batch))) }()
	if err := c.persistLocked(ctx); err != nil {
		c.set, c.batch = old, oldBatch
		return err
	}
	return nil
}

// SetProperties replaces the cursor's stored properties (small string
// state kept with it, such as a de-duplication snapshot) and persists them.
func (c *Cursor) SetProperties(ctx context.Context, props map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return fmt.Errorf("mledger %s: cursor %s: %w", c.m.name, c.name, ErrClosed)
	}
	old := c.props
	c.props = maps.Clone(props)
	if err := c.persistLocked(ctx); err != nil {
		c.props = old
		return err
	}
	return nil
}

// Delete closes the managed ledger, removes its metadata (by CAS: a
// concurrent owner makes it fail with ErrFenced) and deletes its ledgers
// from the bookies. Ledgers that cannot be deleted now are logged as
// orphans; the topic is gone either way.
func (m *ManagedLedger) Delete(ctx context.Context) error {
	if err := m.Close(ctx); err != nil {
		return fmt.Errorf("mledger %s: delete: %w", m.name, err)
	}
	m.metaMu.Lock()
	ls := slices.Clone(m.meta.Ledgers)
	rev := m.rev
	m.metaMu.Unlock()
	if err := m.deps.Meta.DeleteIf(ctx, m.key(), rev); err != nil {
		if errors.Is(err, metastore.ErrConflict) {
			return fmt.Errorf("mledger %s: delete: %w", m.name, m.setFenced(err))
		}
		return fmt.Errorf("mledger %s: delete: %w", m.name, err)
	}
	for _, l := range ls {
		m.deleteLedger(ctx, l.ID)
	}
	return nil
}

// SetRetention sets the retention policy that trimming applies from now on
// (see Retention); call Trim to apply it at once.
func (m *ManagedLedger) SetRetention(r Retention) {
	if cur := m.ret.Load(); cur == nil && r == (Retention{}) || cur != nil && *cur == r {
		return // unchanged, or the default nil stands for
	}
	m.ret.Store(&r)
}

func (m *ManagedLedger) retention() Retention {
	if r := m.ret.Load(); r != nil {
		return *r
	}
	return Retention{}
}

// Trim deletes the ledgers every cursor has consumed that retention does
// not keep. It runs after every move of a mark-delete position; call it
// also now and then, for ledgers that age out of retention.
func (m *ManagedLedger) Trim(ctx context.Context) error {
	if err := m.checkOpen(); err != nil {
		return err
	}
	return m.trim(ctx)
}

// Skip returns the position k entries after p, stopping at the last entry
// of the log; p may be a mark-delete position such as (L, -1).
func (m *ManagedLedger) Skip(p Position, k int64) Position { return skipPosition(m.view(), p, k) }

// Prev returns the entry before p (p may be the end of the log); false at
// the start.
func (m *ManagedLedger) Prev(p Position) (Position, bool) { return prevPosition(m.view(), p) }
