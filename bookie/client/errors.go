package client

import (
	"errors"
	"fmt"

	"github.com/isobar-mq/isobar/bookie/proto"
)

// Errors for each non-OK protocol status, plus the connection's own failures.
// Check them with errors.Is; a *StatusError carries the details.
var (
	ErrNoEntry     = errors.New("client: no such entry")
	ErrNoLedger    = errors.New("client: no such ledger")
	ErrFenced      = errors.New("client: ledger fenced")
	ErrReadOnly    = errors.New("client: bookie read-only")
	ErrCorrupt     = errors.New("client: entry corrupt")
	ErrBadRequest  = errors.New("client: bad request")
	ErrTooLarge    = errors.New("client: too large")
	ErrInternal    = errors.New("client: bookie internal error")
	ErrTimeout     = errors.New("client: long poll timed out")
	ErrUnknownOp   = errors.New("client: unknown operation")
	ErrShutdown    = errors.New("client: bookie shutting down")
	ErrBadResponse = errors.New("client: unexpected response")

	// ErrDisconnected: the connection failed (I/O error, EOF, undecodable
	// frame); every request pending on it fails with it.
	ErrDisconnected = errors.New("client: connection failed")
	// ErrClosed: the connection or pool was closed by its owner.
	ErrClosed = errors.New("client: connection closed")
	// ErrRequestTimeout: no answer within Options.RequestTimeout.
	ErrRequestTimeout = errors.New("client: request timed out")
)

// statusErrors is the one table mapping protocol statuses to errors.
var statusErrors = map[proto.Status]error{
	proto.StatusNoEntry:    ErrNoEntry,
	proto.StatusNoLedger:   ErrNoLedger,
	proto.StatusFenced:     ErrFenced,
	proto.StatusReadOnly:   ErrReadOnly,
	proto.StatusCorrupt:    ErrCorrupt,
	proto.StatusBadRequest: ErrBadRequest,
	proto.StatusTooLarge:   ErrTooLarge,
	proto.StatusInternal:   ErrInternal,
	proto.StatusTimeout:    ErrTimeout,
	proto.StatusUnknownOp:  ErrUnknownOp,
	proto.StatusShutdown:   ErrShutdown,
}

// StatusError is a non-OK answer from a bookie. It unwraps to the sentinel
// for its status (ErrFenced, ErrNoEntry, ...).
type StatusError struct {
	Addr   string
	Op     proto.Op
	Ledger uint64
	Entry  uint64
	Status proto.Status
}

func (e *StatusError) Error() string {
	switch e.Op {
	case proto.OpAdd, proto.OpRead:
		return fmt.Sprintf("bookie %s: %s ledger %d entry %d: %v", e.Addr, e.Op, e.Ledger, e.Entry, e.Unwrap())
	case proto.OpInfo:
		return fmt.Sprintf("bookie %s: %s: %v", e.Addr, e.Op, e.Unwrap())
	}
	return fmt.Sprintf("bookie %s: %s ledger %d: %v", e.Addr, e.Op, e.Ledger, e.Unwrap())
}

// Unwrap returns the status's sentinel error.
func (e *StatusError) Unwrap() error {
	if err, ok := statusErrors[e.Status]; ok {
		return err
	}
	return fmt.Errorf("%w: status %v", ErrBadResponse, e.Status)
}

// IsBookieFailure reports whether err means the bookie (or the way to it)
// failed, as opposed to an answer about the ledger or entry: connection
// failures, timeouts, read-only, shutdown and internal errors. A ledger
// writer replaces such a bookie.
func IsBookieFailure(err error) bool {
	return errors.Is(err, ErrDisconnected) || errors.Is(err, ErrRequestTimeout) ||
		errors.Is(err, ErrReadOnly) || errors.Is(err, ErrShutdown) ||
		errors.Is(err, ErrInternal) || errors.Is(err, ErrClosed) || errors.Is(err, ErrBadResponse)
}
