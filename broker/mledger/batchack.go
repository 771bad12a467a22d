package mledger

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Batch-index acknowledgements. A client may acknowledge some of the
// messages of a batch entry: with the entry it sends Pulsar's ack set, a
// bitset in 64-bit words in which bit i set means message i of the batch
// is still to be acknowledged. The cursor keeps, for each entry partly
// acknowledged, the bits still set (the intersection of every ack set
// received for it), persists them with its other state, and acknowledges
// the entry once no bit is left.

// MaxPartialBatches bounds the entries a cursor keeps partly acknowledged.
const MaxPartialBatches = 10000

// MaxBatchWords bounds an ack set: 64 words, batches of up to 4096
// messages.
const MaxBatchWords = 64

// AckBatch records that of the batch entry at p only the messages whose
// bits are set in remaining are not acknowledged yet; with no bit set it
// acknowledges the entry. It persists the cursor.
func (c *Cursor) AckBatch(ctx context.Context, p Position, remaining []int64) error {
	if len(remaining) > MaxBatchWords {
		return fmt.Errorf("mledger %s: cursor %s: ack set of %d words for %v, at most %d", c.m.name, c.name, len(remaining), p, MaxBatchWords)
	}
	if !validEntry(c.m.view(), p) {
		return fmt.Errorf("mledger %s: cursor %s: ack %v: %w (last confirmed %v)", c.m.name, c.name, p, ErrInvalidPosition, c.m.LastConfirmed())
	}
	full, err := c.ackBatchLocked(ctx, p, remaining)
	if err != nil || !full {
		return err
	}
	return c.Ack(ctx, p)
}

// ackBatchLocked merges remaining into p's partial state and persists it;
// full reports that nothing of p is left to acknowledge (the caller acks
// p whole).
func (c *Cursor) ackBatchLocked(ctx context.Context, p Position, remaining []int64) (full bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return false, fmt.Errorf("mledger %s: cursor %s: %w", c.m.name, c.name, ErrClosed)
	}
	if err := c.m.checkOpen(); err != nil {
		return false, err
	}
	if c.set.IsAcked(p) {
		return false, nil
	}
	old, had := c.batch[p]
	merged := slices.Clone(remaining)
	if had {
		merged = intersect(old, remaining)
	}
	if noneSet(merged) {
		return true, nil
	}
	if had && slices.Equal(old, merged) {
		return false, nil
	}
	if !had && len(c.batch) >= MaxPartialBatches {
		return false, fmt.Errorf("mledger %s: cursor %s: %w: %d entries partly acknowledged", c.m.name, c.name, ErrTooManyAckRanges, len(c.batch))
	}
	if c.batch == nil {
		c.batch = map[Position][]int64{}
	}
	defer func() { c.partial.Store(int32(len(c.batch))) }()
	c.batch[p] = merged
	if err := c.persistLocked(ctx); err != nil {
		if had {
			c.batch[p] = old
		} else {
			delete(c.batch, p)
		}
		return false, err
	}
	return false, nil
}

// BatchRemaining returns the ack set of an entry partly acknowledged (bit
// i set: message i still to acknowledge); nil when it is not.
func (c *Cursor) BatchRemaining(p Position) []int64 {
	if c.partial.Load() == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.batch) == 0 {
		return nil
	}
	return slices.Clone(c.batch[p])
}

// PartialBatches returns a copy of every partly acknowledged entry's ack
// set.
func (c *Cursor) PartialBatches() map[Position][]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[Position][]int64, len(c.batch))
	for p, s := range c.batch {
		out[p] = slices.Clone(s)
	}
	return out
}

// batchesForPersist drops the partial states of entries acknowledged since
// and encodes the rest. c.mu held.
func (c *Cursor) batchesForPersist() map[string][]int64 {
	if len(c.batch) == 0 {
		return nil
	}
	out := map[string][]int64{}
	for p, s := range c.batch {
		if c.set.IsAcked(p) {
			delete(c.batch, p)
			c.partial.Store(int32(len(c.batch)))
			continue
		}
		out[strconv.FormatInt(p.Ledger, 10)+":"+strconv.FormatInt(p.Entry, 10)] = s
	}
	return out
}

// decodeBatches checks and decodes a stored cursor's partial batches.
func decodeBatches(m map[string][]int64) (map[Position][]int64, error) {
	if len(m) > MaxPartialBatches {
		return nil, fmt.Errorf("%w: %d partly acknowledged entries, at most %d", ErrCorruptMeta, len(m), MaxPartialBatches)
	}
	out := make(map[Position][]int64, len(m))
	for k, s := range m {
		l, e, ok := strings.Cut(k, ":")
		ln, err1 := strconv.ParseInt(l, 10, 64)
		en, err2 := strconv.ParseInt(e, 10, 64)
		if !ok || err1 != nil || err2 != nil || ln < 0 || en < 0 || len(s) == 0 || len(s) > MaxBatchWords || noneSet(s) {
			return nil, fmt.Errorf("%w: partly acknowledged entry %q: %v", ErrCorruptMeta, k, s)
		}
		out[Position{Ledger: ln, Entry: en}] = slices.Clone(s)
	}
	return out, nil
}

func intersect(a, b []int64) []int64 {
	out := make([]int64, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] & b[i]
	}
	return out
}

func noneSet(s []int64) bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}
