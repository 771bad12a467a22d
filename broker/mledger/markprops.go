package mledger

import (
	"context"
	"fmt"
	"maps"

	"github.com/isobar-mq/isobar/broker/mledger/ackset"
)

// MarkDeleteWithProperties acknowledges every entry up to and including p
// and replaces the cursor's properties with props, in one metadata write:
// after a crash the cursor has either both or neither (the topic
// compactor records its horizon and compacted ledger this way). p must be
// an entry of the log; a p at or before the mark-delete position leaves
// the position as it is and still writes props.
func (c *Cursor) MarkDeleteWithProperties(ctx context.Context, p Position, props map[string]string) error {
	ls := c.m.view()
	if !validEntry(ls, p) {
		return fmt.Errorf("mledger %s: cursor %s: mark-delete %v: %w (last confirmed %v)", c.m.name, c.name, p, ErrInvalidPosition, c.m.LastConfirmed())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return fmt.Errorf("mledger %s: cursor %s: %w", c.m.name, c.name, ErrClosed)
	}
	if err := c.m.checkOpen(); err != nil {
		return err
	}
	next := ackset.New(Position{})
	if b, err := c.set.MarshalBinary(); err != nil {
		return err
	} else if err := next.UnmarshalBinary(b); err != nil {
		return err
	}
	next.MaxRanges = c.set.MaxRanges
	next.AckCumulative(p)
	next.Advance(func(q Position) (Position, bool) { return nextPosition(ls, q) })
	oldSet, oldProps := c.set, c.props
	c.set, c.props = next, maps.Clone(props)
	if err := c.persistLocked(ctx); err != nil {
		c.set, c.props = oldSet, oldProps
		return err
	}
	if next.MarkDelete() != oldSet.MarkDelete() {
		return c.m.trim(ctx)
	}
	return nil
}

// StoredProperties reads the cursor's properties as the metadata store
// holds them now, without adopting them: after a write whose outcome is
// unknown (a timeout), it tells whether the write took effect. A cursor
// the store does not have is ErrNoCursor.
func (c *Cursor) StoredProperties(ctx context.Context) (map[string]string, error) {
	kv, err := c.m.deps.Meta.Get(ctx, c.m.key())
	if err != nil {
		return nil, fmt.Errorf("mledger %s: cursor %s: read metadata: %w", c.m.name, c.name, err)
	}
	t, err := decodeMeta(kv.Value)
	if err != nil {
		return nil, fmt.Errorf("mledger %s: %w", c.m.name, err)
	}
	i, ok := t.cursor(c.name)
	if !ok {
		return nil, fmt.Errorf("mledger %s: %w: %s", c.m.name, ErrNoCursor, c.name)
	}
	return maps.Clone(t.Cursors[i].Properties), nil
}
