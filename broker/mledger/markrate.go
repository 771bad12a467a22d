package mledger

import (
	"context"
	"math"
	"slices"
	"time"
)

// markRate is a cursor's throttle on persisting acknowledgements, as
// Pulsar's managedLedgerMaxMarkDeleteRate: with a rate r > 0 a cursor
// writes its state at most r times a second; an acknowledgement in
// between changes the cursor in memory, returns, and is written by a
// flush at the next allowed moment (or when the managed ledger closes).
// What a crash loses is at most that last second's acknowledgements,
// which the subscription then gets again: at-least-once, as in Pulsar.
// Rate 0 (the default) writes every change before the call returns.
type markRate struct {
	last    int64       // when the state was last written, Unix ns (0: not since opened)
	timer   *time.Timer // the pending flush
	written Position    // the mark-delete position last written
}

// SetMarkDeleteRate sets how many times a second each cursor may write
// its state: 0 (or less) writes every change. It applies at once.
func (m *ManagedLedger) SetMarkDeleteRate(perSecond float64) {
	if perSecond < 0 || math.IsNaN(perSecond) || math.IsInf(perSecond, 0) {
		perSecond = 0
	}
	m.markRate.Store(math.Float64bits(perSecond))
}

func (m *ManagedLedger) markDeleteInterval() time.Duration {
	r := math.Float64frombits(m.markRate.Load())
	if r <= 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / r)
}

// deferLocked reports whether the change just made to c.set may wait for
// a flush instead of being written now, and arranges the flush. c.mu held.
func (c *Cursor) deferLocked() bool {
	iv := c.m.markDeleteInterval()
	if iv <= 0 {
		return false
	}
	wait := iv - time.Since(time.Unix(0, c.rate.last))
	if wait <= 0 {
		return false
	}
	c.rateDirty = true
	if c.rate.timer == nil {
		c.rate.timer = time.AfterFunc(wait, c.flush)
	}
	return true
}

// wroteLocked records a successful write of the cursor's state. c.mu held.
func (c *Cursor) wroteLocked() {
	c.rate.last = time.Now().UnixNano()
	c.rateDirty = false
	c.rate.written = c.set.MarkDelete()
}

// flush writes a deferred state, then trims what the new mark-delete
// position frees. A failed write is tried again an interval later.
func (c *Cursor) flush() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.mu.Lock()
	c.rate.timer = nil
	if !c.rateDirty || c.deleted {
		c.mu.Unlock()
		return
	}
	before := c.rate.written
	if err := c.persistLocked(ctx); err != nil {
		if c.m.checkOpen() == nil {
			c.m.logger().Warn("deferred cursor write failed; trying again", "cursor", c.name, "err", err)
			if iv := c.m.markDeleteInterval(); iv > 0 {
				c.rate.timer = time.AfterFunc(iv, c.flush)
			}
		}
		c.mu.Unlock()
		return
	}
	moved := c.set.MarkDelete() != before
	c.mu.Unlock()
	if moved {
		if err := c.m.trim(ctx); err != nil {
			c.m.logger().Warn("trim after a deferred cursor write", "cursor", c.name, "err", err)
		}
	}
}

// flushCursors writes every cursor's deferred state now (closing).
func (m *ManagedLedger) flushCursors() {
	m.cursorsMu.Lock()
	cs := slices.Clone(m.cursors)
	m.cursorsMu.Unlock()
	for _, c := range cs {
		c.mu.Lock()
		if t := c.rate.timer; t != nil {
			t.Stop()
			c.rate.timer = nil
		}
		c.mu.Unlock()
		c.flush()
	}
}
