package proto

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestStatusTable checks that every status maps to its error and back, on
// both ends of the protocol: Status.Err (the client) and StatusOf (the
// bookie) agree, and each error belongs to one status.
func TestStatusTable(t *testing.T) {
	want := []struct {
		status Status
		name   string
		err    error
	}{
		{StatusOK, "ok", nil},
		{StatusNoEntry, "no such entry", ErrNoEntry},
		{StatusNoLedger, "no such ledger", ErrNoLedger},
		{StatusFenced, "ledger fenced", ErrFenced},
		{StatusReadOnly, "bookie read-only", ErrReadOnly},
		{StatusCorrupt, "entry corrupt", ErrCorrupt},
		{StatusBadRequest, "bad request", ErrBadRequest},
		{StatusTooLarge, "too large", ErrTooLarge},
		{StatusInternal, "internal error", ErrInternal},
		{StatusTimeout, "timed out", ErrTimeout},
		{StatusUnknownOp, "unknown operation", ErrUnknownOp},
		{StatusShutdown, "bookie shutting down", ErrShutdown},
	}
	if len(statuses) != len(want) {
		t.Fatalf("%d statuses in the table, the test knows %d", len(statuses), len(want))
	}
	seen := map[error]Status{}
	for i, w := range want {
		if w.status != Status(i) {
			t.Errorf("status %v is %d, want %d", w.status, w.status, i)
		}
		if w.status.String() != w.name {
			t.Errorf("status %d is named %q, want %q", w.status, w.status.String(), w.name)
		}
		err := w.status.Err()
		if err != w.err {
			t.Errorf("%v.Err() = %v, want %v", w.status, err, w.err)
		}
		if w.status == StatusOK {
			if StatusOf(nil) != StatusOK {
				t.Errorf("StatusOf(nil) = %v", StatusOf(nil))
			}
			continue
		}
		if err == nil {
			t.Errorf("%v has no error", w.status)
			continue
		}
		if s, ok := seen[err]; ok {
			t.Errorf("%v and %v share error %v", s, w.status, err)
		}
		seen[err] = w.status
		for _, e := range []error{
			err,
			fmt.Errorf("ledger 7 entry 3: %w", err),
			Sentinel(w.status, "pkg: "+w.name),
			fmt.Errorf("x: %w", Sentinel(w.status, "pkg: "+w.name)),
		} {
			if got := StatusOf(e); got != w.status {
				t.Errorf("StatusOf(%v) = %v, want %v", e, got, w.status)
			}
		}
		if s := Sentinel(w.status, "pkg: x"); !errors.Is(s, err) || s.Error() != "pkg: x" {
			t.Errorf("Sentinel(%v) = %v, not its status's error", w.status, s)
		}
	}
}

func TestStatusOfOtherErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Status
	}{
		{errors.New("disk on fire"), StatusInternal},
		{context.Canceled, StatusShutdown},
		{fmt.Errorf("wait: %w", context.DeadlineExceeded), StatusTimeout},
		// A status's error decides before a context's.
		{fmt.Errorf("%w: %w", ErrNoLedger, context.Canceled), StatusNoLedger},
		{fmt.Errorf("read: %w", ErrEntryCorrupt), StatusCorrupt},
	} {
		if got := StatusOf(c.err); got != c.want {
			t.Errorf("StatusOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if err := Status(999).Err(); !errors.Is(err, ErrUnknownStatus) || Status(999).String() != "status(999)" {
		t.Errorf("Status(999): %v %q", err, Status(999).String())
	}
}
