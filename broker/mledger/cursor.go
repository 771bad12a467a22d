package mledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/isobar-mq/isobar/broker/mledger/ackset"
)

// InitialPosition says where a new cursor starts.
type InitialPosition int

const (
	// Latest: after the last confirmed entry (only new entries are consumed).
	Latest InitialPosition = iota
	// Earliest: before the first entry still in the log.
	Earliest
)

// Cursor is a durable subscription position: a mark-delete position plus
// the entries individually acknowledged after it. Every change is persisted
// in the topic metadata by CAS before the call returns (see docs/mledger.md
// for the cost), unless the managed ledger's mark-delete rate defers it
// (markrate.go). It is safe for concurrent use.
type Cursor struct {
	m    *ManagedLedger
	name string

	// mu guards set and deleted, and orders persists.
	mu    sync.Mutex
	set   *ackset.Set
	batch map[Position][]int64 // partly acknowledged batch entries (batchack.go)
	// partial mirrors len(batch), so that delivery asks for an entry's
	// ack set without taking mu when no entry is partly acknowledged.
	partial atomic.Int32
	deleted bool
	// rateDirty: the state in memory is ahead of the store (markrate.go;
	// here to share a word with partial).
	rateDirty bool
	props     map[string]string
	rate      markRate // writes deferred by the mark-delete rate (markrate.go)
}

// OpenCursor returns the cursor name, restoring it from the metadata or,
// if it does not exist, creating it at initial and persisting it.
func (m *ManagedLedger) OpenCursor(ctx context.Context, name string, initial InitialPosition) (*Cursor, error) {
	return m.openCursor(ctx, name, initial, true)
}

// OpenExistingCursor returns the cursor name, restoring it from the
// metadata; ErrNoCursor, creating nothing, if it does not exist.
func (m *ManagedLedger) OpenExistingCursor(ctx context.Context, name string) (*Cursor, error) {
	return m.openCursor(ctx, name, Latest, false)
}

func (m *ManagedLedger) openCursor(ctx context.Context, name string, initial InitialPosition, create bool) (*Cursor, error) {
	if err := ValidateCursorName(name); err != nil {
		return nil, err
	}
	if initial != Latest && initial != Earliest {
		return nil, fmt.Errorf("mledger %s: cursor %s: unknown initial position %d", m.name, name, initial)
	}
	m.cursorsMu.Lock()
	defer m.cursorsMu.Unlock()
	if c := m.cursorLocked(name); c != nil {
		return c, nil
	}
	if err := m.checkOpen(); err != nil {
		return nil, err
	}
	c := &Cursor{m: m, name: name}
	m.metaMu.Lock()
	i, ok := m.meta.cursor(name)
	var stored cursorMeta
	if ok {
		stored = m.meta.Cursors[i]
	}
	m.metaMu.Unlock()
	if ok {
		set, err := decodeAckSet(stored.AckSet)
		if err != nil {
			return nil, fmt.Errorf("mledger %s: cursor %s: %w", m.name, name, err)
		}
		batch, err := decodeBatches(stored.Batches)
		if err != nil {
			return nil, fmt.Errorf("mledger %s: cursor %s: %w", m.name, name, err)
		}
		c.set, c.props, c.batch = set, maps.Clone(stored.Properties), batch
		c.rate.written = set.MarkDelete()
		c.partial.Store(int32(len(batch)))
		c.set.MaxRanges = max(0, m.cfg.Value().MaxAckedRanges)
		m.addCursorLocked(c)
		return c, nil
	}
	if !create {
		return nil, fmt.Errorf("mledger %s: %w: %s", m.name, ErrNoCursor, name)
	}
	ls := m.view()
	md := lastPosition(ls)
	if initial == Earliest && len(ls) > 0 {
		md = Position{Ledger: ls[0].ID, Entry: -1}
	}
	c.set = ackset.New(md)
	c.set.MaxRanges = max(0, m.cfg.Value().MaxAckedRanges)
	if err := c.persistLocked(ctx); err != nil {
		return nil, err
	}
	m.addCursorLocked(c)
	return c, nil
}

// cursorLocked is the open cursor name, nil if none; m.cursorsMu held.
func (m *ManagedLedger) cursorLocked(name string) *Cursor {
	if i, ok := m.cursorIndexLocked(name); ok {
		return m.cursors[i]
	}
	return nil
}

// cursorIndexLocked is where cursor name is, or would be, in m.cursors;
// m.cursorsMu held.
func (m *ManagedLedger) cursorIndexLocked(name string) (int, bool) {
	return slices.BinarySearchFunc(m.cursors, name, func(c *Cursor, name string) int {
		return strings.Compare(c.name, name)
	})
}

// addCursorLocked adds c, which is not open yet, to m.cursors;
// m.cursorsMu held.
func (m *ManagedLedger) addCursorLocked(c *Cursor) {
	i, _ := m.cursorIndexLocked(c.name)
	m.cursors = slices.Insert(m.cursors, i, c)
}

// Cursors lists the names of the persisted cursors.
func (m *ManagedLedger) Cursors() []string {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	var names []string
	for _, c := range m.meta.Cursors {
		names = append(names, c.Name)
	}
	return names
}

// DeleteCursor removes the cursor from the metadata (a cursor object still
// held fails with ErrClosed afterwards) and trims what it was holding back.
func (m *ManagedLedger) DeleteCursor(ctx context.Context, name string) error {
	m.cursorsMu.Lock()
	c := m.cursorLocked(name)
	m.cursorsMu.Unlock()
	if c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	err := m.update(ctx, func(t *topicMeta) error {
		i, ok := t.cursor(name)
		if !ok {
			return fmt.Errorf("mledger %s: %w: %s", m.name, ErrNoCursor, name)
		}
		t.Cursors = slices.Delete(t.Cursors, i, i+1)
		return nil
	})
	if err != nil {
		return err
	}
	if c != nil {
		c.deleted = true
	}
	m.cursorsMu.Lock()
	if i, ok := m.cursorIndexLocked(name); ok {
		m.cursors = slices.Delete(m.cursors, i, i+1)
	}
	m.cursorsMu.Unlock()
	return m.trim(ctx)
}

func (m *ManagedLedger) checkOpen() error {
	if err := m.fencedErr(); err != nil {
		return err
	}
	m.addMu.RLock()
	defer m.addMu.RUnlock()
	if m.closing {
		return fmt.Errorf("mledger %s: %w", m.name, ErrClosed)
	}
	return nil
}

// Name is the cursor's name.
func (c *Cursor) Name() string { return c.name }

// MarkDelete is the position up to which everything is acknowledged.
func (c *Cursor) MarkDelete() Position {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.set.MarkDelete()
}

// IsAcked reports whether p is acknowledged, cumulatively or individually.
func (c *Cursor) IsAcked(p Position) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.set.IsAcked(p)
}

// AckedRanges returns the individually acknowledged ranges after the
// mark-delete position.
func (c *Cursor) AckedRanges() []ackset.Range {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.set.Ranges()
}

// Properties returns a copy of the cursor's stored properties.
func (c *Cursor) Properties() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.props)
}

// Backlog is the number of entries after the mark-delete position that are
// not individually acknowledged.
func (c *Cursor) Backlog() int64 {
	ls := c.m.view()
	c.mu.Lock()
	defer c.mu.Unlock()
	return backlog(ls, c.set.MarkDelete(), c.set.Count())
}

// Ack acknowledges the entry at p alone, moves the mark-delete position over
// any acknowledged run that now follows it, and persists the cursor.
func (c *Cursor) Ack(ctx context.Context, p Position) error {
	return c.change(ctx, p, func(s *ackset.Set) (bool, error) { return s.Ack(p) })
}

// AckCumulative acknowledges every entry up to and including p.
func (c *Cursor) AckCumulative(ctx context.Context, p Position) error {
	return c.change(ctx, p, func(s *ackset.Set) (bool, error) { return s.AckCumulative(p), nil })
}

func (c *Cursor) change(ctx context.Context, p Position, fn func(*ackset.Set) (bool, error)) error {
	if !validEntry(c.m.view(), p) {
		return fmt.Errorf("mledger %s: cursor %s: ack %v: %w (last confirmed %v)", c.m.name, c.name, p, ErrInvalidPosition, c.m.LastConfirmed())
	}
	return c.apply(ctx, fn)
}

// apply runs fn on a copy of the cursor's set, advances it and persists.
func (c *Cursor) apply(ctx context.Context, fn func(*ackset.Set) (bool, error)) error {
	ls := c.m.view()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return fmt.Errorf("mledger %s: cursor %s: %w", c.m.name, c.name, ErrClosed)
	}
	if err := c.m.checkOpen(); err != nil {
		return err
	}
	// Work on a copy so a failed persist leaves the cursor as stored.
	next := ackset.New(Position{})
	if b, err := c.set.MarshalBinary(); err != nil {
		return err
	} else if err := next.UnmarshalBinary(b); err != nil {
		return err
	}
	next.MaxRanges = c.set.MaxRanges
	changed, err := fn(next)
	if errors.Is(err, ackset.ErrTooManyRanges) {
		return fmt.Errorf("mledger %s: cursor %s: %w: %w", c.m.name, c.name, ErrTooManyAckRanges, err)
	}
	if err != nil {
		return fmt.Errorf("mledger %s: cursor %s: %w", c.m.name, c.name, err)
	}
	changed = next.Advance(func(q Position) (Position, bool) { return nextPosition(ls, q) }) || changed
	if !changed {
		return nil
	}
	old := c.set
	c.set = next
	c.m.noteChange() // the backlog may have changed, persisted or not
	if c.deferLocked() {
		return nil
	}
	if err := c.persistLocked(ctx); err != nil {
		c.set = old
		return err
	}
	if next.MarkDelete() != old.MarkDelete() {
		return c.m.trim(ctx)
	}
	return nil
}

// persistLocked writes the cursor's state into the metadata. c.mu held.
func (c *Cursor) persistLocked(ctx context.Context) error {
	enc, err := encodeAckSet(c.set)
	if err != nil {
		return err
	}
	md := c.set.MarkDelete()
	cm := cursorMeta{Name: c.name, MarkDelete: posJSON{md.Ledger, md.Entry}, AckSet: enc, Batches: c.batchesForPersist(), Properties: maps.Clone(c.props)}
	err = c.m.update(ctx, func(t *topicMeta) error {
		if i, ok := t.cursor(c.name); ok {
			t.Cursors[i] = cm
		} else {
			t.Cursors = append(t.Cursors, cm)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mledger %s: cursor %s: persist: %w", c.m.name, c.name, err)
	}
	c.wroteLocked()
	return nil
}

// trim removes from the list the ledgers every cursor has consumed, then
// deletes them from the bookies. A failed delete leaves an orphan ledger
// (logged); the list never names a deleted ledger.
func (m *ManagedLedger) trim(ctx context.Context) error {
	var ids []int64
	err := m.update(ctx, func(t *topicMeta) error {
		slowest, ok := slowestMarkDelete(t.Cursors)
		ids = trimmable(t.Ledgers, currentID(t.Ledgers), slowest, ok, m.retention(), m.deps.Now().UnixMilli())
		if len(ids) == 0 {
			return errNothingToDo
		}
		t.Ledgers = t.Ledgers[len(ids):]
		return nil
	})
	if errors.Is(err, errNothingToDo) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mledger %s: trim: %w", m.name, err)
	}
	for _, id := range ids {
		m.deleteLedger(ctx, id)
	}
	m.logger().Debug("trimmed", "ledgers", ids)
	return nil
}

var errNothingToDo = errors.New("nothing to do")

// currentID is the id of the last ledger of ls if it is open, else -1.
func currentID(ls []LedgerInfo) int64 {
	if n := len(ls); n > 0 && ls[n-1].State == LedgerOpen {
		return ls[n-1].ID
	}
	return -1
}
