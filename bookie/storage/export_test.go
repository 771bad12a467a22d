package storage

import "context"

// Test-only operations on a store. They live here, compiled only into the
// package's tests, not in the production API.

// Checkpoint flushes the write cache to ledger storage, writes a checkpoint
// and removes journal files wholly before it, now (the store does it every
// FlushInterval and when the write cache fills). ctx is checked before
// starting; a flush in progress is not interrupted.
func (s *Store) Checkpoint(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.isClosed.Load() {
		return ErrClosed
	}
	return s.flush()
}

// Compact runs one compaction pass now: every sealed entry log whose live
// fraction is below CompactionThreshold has its live entries copied and is
// removed (the store runs one every CompactionInterval).
func (s *Store) Compact(ctx context.Context) (CompactionStats, error) {
	if s.isClosed.Load() {
		return CompactionStats{}, ErrClosed
	}
	return s.compact(ctx)
}
