package client

import (
	"errors"
	"fmt"

	"github.com/isobar-mq/isobar/bookie/proto"
)

// The connection's own failures; the errors of the bookie's statuses are
// package proto's (proto.ErrFenced, proto.ErrNoEntry, ...), which a
// *StatusError unwraps to. Check them with errors.Is.
var (
	// ErrBadResponse: the bookie answered with a response of the wrong
	// op, or a status the protocol does not know.
	ErrBadResponse = errors.New("client: unexpected response")
	// ErrDisconnected: the connection failed (I/O error, EOF, undecodable
	// frame); every request pending on it fails with it.
	ErrDisconnected = errors.New("client: connection failed")
	// ErrClosed: the connection or pool was closed by its owner.
	ErrClosed = errors.New("client: connection closed")
	// ErrRequestTimeout: no answer within Options.RequestTimeout.
	ErrRequestTimeout = errors.New("client: request timed out")
)

// StatusError is a non-OK answer from a bookie. It unwraps to the error
// of its status (proto.ErrFenced, proto.ErrNoEntry, ...).
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

// Unwrap returns the status's error (Status.Err), ErrBadResponse for a
// status the protocol does not know.
func (e *StatusError) Unwrap() error {
	if err := e.Status.Err(); err != nil && !errors.Is(err, proto.ErrUnknownStatus) {
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
		errors.Is(err, proto.ErrReadOnly) || errors.Is(err, proto.ErrShutdown) ||
		errors.Is(err, proto.ErrInternal) || errors.Is(err, ErrClosed) || errors.Is(err, ErrBadResponse)
}
