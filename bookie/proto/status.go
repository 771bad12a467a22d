package proto

import (
	"context"
	"errors"
	"fmt"
)

// Status is a response status code.
type Status uint16

// Response statuses.
const (
	StatusOK         Status = 0
	StatusNoEntry    Status = 1  // the entry is not on this bookie
	StatusNoLedger   Status = 2  // the ledger is not on this bookie
	StatusFenced     Status = 3  // the ledger is fenced; only recovery adds are accepted
	StatusReadOnly   Status = 4  // the bookie is read-only (disk full); adds are refused
	StatusCorrupt    Status = 5  // stored data failed its checksum
	StatusBadRequest Status = 6  // the request was malformed or invalid
	StatusTooLarge   Status = 7  // the frame or entry exceeds the bookie's limit
	StatusInternal   Status = 8  // the bookie failed to serve the request
	StatusTimeout    Status = 9  // a long poll ended without news
	StatusUnknownOp  Status = 10 // the request type is not known
	StatusShutdown   Status = 11 // the bookie is shutting down
)

// The errors of the non-OK statuses, one each, for both ends: a bookie
// answers an error that is one of them (errors.Is) with its status
// (StatusOf), and a client gets the same error back from the status
// (Status.Err). Another package ties its own sentinel to a status with
// Sentinel.
var (
	ErrNoEntry    = errors.New("bookie: no such entry")
	ErrNoLedger   = errors.New("bookie: no such ledger")
	ErrFenced     = errors.New("bookie: ledger fenced")
	ErrReadOnly   = errors.New("bookie: read-only")
	ErrCorrupt    = errors.New("bookie: entry corrupt")
	ErrBadRequest = errors.New("bookie: bad request")
	ErrTooLarge   = errors.New("bookie: too large")
	ErrInternal   = errors.New("bookie: internal error")
	ErrTimeout    = errors.New("bookie: long poll timed out")
	ErrUnknownOp  = errors.New("bookie: unknown operation")
	ErrShutdown   = errors.New("bookie: shutting down")
)

// ErrUnknownStatus is wrapped by the error of a status this codec does
// not know.
var ErrUnknownStatus = errors.New("bookie proto: unknown status")

// statuses is the one table of the statuses, indexed by status: each
// one's name and error (none for StatusOK). TestStatusTable checks that
// every status maps to its error and back.
var statuses = [...]struct {
	name string
	err  error
}{
	StatusOK:         {"ok", nil},
	StatusNoEntry:    {"no such entry", ErrNoEntry},
	StatusNoLedger:   {"no such ledger", ErrNoLedger},
	StatusFenced:     {"ledger fenced", ErrFenced},
	StatusReadOnly:   {"bookie read-only", ErrReadOnly},
	StatusCorrupt:    {"entry corrupt", ErrCorrupt},
	StatusBadRequest: {"bad request", ErrBadRequest},
	StatusTooLarge:   {"too large", ErrTooLarge},
	StatusInternal:   {"internal error", ErrInternal},
	StatusTimeout:    {"timed out", ErrTimeout},
	StatusUnknownOp:  {"unknown operation", ErrUnknownOp},
	StatusShutdown:   {"bookie shutting down", ErrShutdown},
}

func (s Status) String() string {
	if int(s) < len(statuses) {
		return statuses[s].name
	}
	return fmt.Sprintf("status(%d)", uint16(s))
}

// Err returns the error of status s: nil for StatusOK, ErrNoEntry for
// StatusNoEntry and so on, and an error wrapping ErrUnknownStatus for a
// status this codec does not know.
func (s Status) Err() error {
	if int(s) < len(statuses) {
		return statuses[s].err
	}
	return fmt.Errorf("%w: %v", ErrUnknownStatus, s)
}

// StatusOf returns the status a bookie answers err with: StatusOK for
// nil; the status whose error err is (errors.Is, in status order), its
// own sentinels (Sentinel) included; StatusShutdown for a canceled
// context (a bookie cancels its requests when it stops) and StatusTimeout
// for an expired one (a long poll ran out); StatusInternal for any other
// error.
func StatusOf(err error) Status {
	if err == nil {
		return StatusOK
	}
	for s, st := range statuses {
		if st.err != nil && errors.Is(err, st.err) {
			return Status(s)
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return StatusShutdown
	case errors.Is(err, context.DeadlineExceeded):
		return StatusTimeout
	}
	return StatusInternal
}

// Sentinel returns a new error whose text is text and which is the error
// of status s (errors.Is(err, s.Err()) holds): the way another package
// ties its sentinels to the status a bookie answers them with, e.g.
//
//	ErrNoEntry = proto.Sentinel(proto.StatusNoEntry, "storage: no such entry")
func Sentinel(s Status, text string) error {
	return &sentinel{text: text, status: s}
}

type sentinel struct {
	text   string
	status Status
}

func (e *sentinel) Error() string { return e.text }
func (e *sentinel) Unwrap() error { return e.status.Err() }
