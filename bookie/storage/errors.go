package storage

import (
	"errors"
	"fmt"

	"github.com/isobar-mq/isobar/bookie/proto"
)

// Errors returned by the Store. They are wrapped with the ledger and entry
// they concern; test with errors.Is. Each but ErrEntryIDRange is also the
// protocol error a bookie answers it with (errors.Is(ErrFenced,
// proto.ErrFenced) holds; ErrClosed is proto.ErrShutdown), so the server
// finds the status with proto.StatusOf.
var (
	ErrNoEntry  = proto.Sentinel(proto.StatusNoEntry, "storage: no such entry")
	ErrNoLedger = proto.Sentinel(proto.StatusNoLedger, "storage: no such ledger")
	ErrFenced   = proto.Sentinel(proto.StatusFenced, "storage: ledger fenced")
	ErrCorrupt  = proto.Sentinel(proto.StatusCorrupt, "storage: data corrupted")
	ErrClosed   = proto.Sentinel(proto.StatusShutdown, "storage: store closed")
	ErrTooLarge = proto.Sentinel(proto.StatusTooLarge, "storage: entry too large")
	// ErrEntryIDRange is returned for an entry id above MaxEntryID: the index
	// addresses entries by id, so ids must stay within a sane range.
	ErrEntryIDRange = errors.New("storage: entry id out of range")
)

// CorruptionError reports data on disk that failed validation. It matches
// ErrCorrupt (and so proto.ErrCorrupt) with errors.Is. Ledger and Entry
// are set when known.
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

// Is makes errors.Is(err, ErrCorrupt) and errors.Is(err, proto.ErrCorrupt)
// true.
func (e *CorruptionError) Is(target error) bool {
	return target == ErrCorrupt || errors.Is(ErrCorrupt, target)
}
