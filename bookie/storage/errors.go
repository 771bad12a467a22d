package storage

import (
	"errors"
	"fmt"
)

// Errors returned by the Store. They are wrapped with the ledger and entry
// they concern; test with errors.Is.
var (
	ErrNoEntry  = errors.New("storage: no such entry")
	ErrNoLedger = errors.New("storage: no such ledger")
	ErrFenced   = errors.New("storage: ledger fenced")
	ErrCorrupt  = errors.New("storage: data corrupted")
	ErrClosed   = errors.New("storage: store closed")
	ErrTooLarge = errors.New("storage: entry too large")
	// ErrEntryIDRange is returned for an entry id above MaxEntryID: the index
	// addresses entries by id, so ids must stay within a sane range.
	ErrEntryIDRange = errors.New("storage: entry id out of range")
)

// CorruptionError reports data on disk that failed validation. It matches
// ErrCorrupt with errors.Is. Ledger and Entry are set when known.
type CorruptionError struct {
	File   string
	Offset int64
	Ledger uint64
	Entry  uint64
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("storage: corrupt data in %s at offset %d (ledger %d, entry %d): %s",
		e.File, e.Offset, e.Ledger, e.Entry, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }
