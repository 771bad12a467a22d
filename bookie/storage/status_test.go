package storage

import (
	"context"
	"fmt"
	"testing"

	"github.com/isobar-mq/isobar/bookie/proto"
)

// TestErrorStatuses pins the status a bookie answers each storage error
// with (proto.StatusOf): the errors are tied to their statuses here, not
// mapped by the server.
func TestErrorStatuses(t *testing.T) {
	for _, c := range []struct {
		err  error
		want proto.Status
	}{
		{ErrNoEntry, proto.StatusNoEntry},
		{ErrNoLedger, proto.StatusNoLedger},
		{ErrFenced, proto.StatusFenced},
		{ErrCorrupt, proto.StatusCorrupt},
		{&CorruptionError{File: "f", Reason: "bad crc"}, proto.StatusCorrupt},
		{ErrClosed, proto.StatusShutdown},
		{ErrTooLarge, proto.StatusTooLarge},
		{ErrEntryIDRange, proto.StatusInternal},
		{context.Canceled, proto.StatusShutdown},
		{context.DeadlineExceeded, proto.StatusTimeout},
	} {
		wrapped := fmt.Errorf("ledger 7 entry 3: %w", c.err)
		if got := proto.StatusOf(wrapped); got != c.want {
			t.Errorf("StatusOf(%v) = %v, want %v", wrapped, got, c.want)
		}
	}
}
