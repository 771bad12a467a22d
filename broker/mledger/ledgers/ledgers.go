// Package ledgers is the managed ledger's view of ledgers: the few
// operations broker/mledger performs on BookKeeper-style ledgers, as
// interfaces. A Store creates a ledger to write (Writer), recovers one a
// previous writer left open (fencing that writer out and closing the
// ledger), opens one to read (Reader) and deletes one. OnBookies adapts
// the ledger client of bookie/ledger, which is what brokers run on;
// package broker/mledger/memledger keeps ledgers in memory with the same
// semantics and lets tests make chosen operations fail or hang.
//
// The contract is bookie/ledger's, and so are its types (CreateOptions,
// Metadata, Entry) and its errors, which implementations wrap and callers
// check with errors.Is:
//
//   - ledger.ErrNoLedger: the ledger does not exist (Recover, OpenReader,
//     Delete).
//   - ledger.ErrFenced: a recovery fenced the ledger; its writer's
//     appends and Close fail with it from then on.
//   - ledger.ErrTooLarge: an append refused before it was sent (its
//     callback gets entry id -1); the writer is unharmed.
//   - ledger.ErrClosed: the writer (or the client) is closed.
//   - ledger.ErrNoEntry: a read past what the reader may read (beyond a
//     closed ledger's last entry, or an open one's last-add-confirmed).
//
// Any other error is a failure to reach the bookies; after it the
// operation may or may not have happened.
package ledgers

import (
	"context"

	"github.com/isobar-mq/isobar/bookie/ledger"
)

// Store is what a managed ledger does with ledgers.
type Store interface {
	// Create makes a new, open ledger and returns its writer.
	Create(ctx context.Context, o ledger.CreateOptions) (Writer, error)
	// Recover fences ledger id (its writer's later appends and Close
	// fail with ledger.ErrFenced), closes it at the last entry an ack
	// quorum of bookies has, and returns its final metadata. A ledger
	// already closed is returned as it is.
	Recover(ctx context.Context, id uint64) (ledger.Metadata, error)
	// OpenReader opens ledger id for reading without disturbing its
	// writer: a closed ledger up to its last entry, an open one up to its
	// last-add-confirmed.
	OpenReader(ctx context.Context, id uint64) (Reader, error)
	// Delete removes ledger id and its entries.
	Delete(ctx context.Context, id uint64) error
}

// Writer appends to one ledger. It is safe for concurrent use.
type Writer interface {
	// ID is the ledger's id.
	ID() uint64
	// AppendAsync appends data as the next entry and calls cb with its
	// id once an ack quorum has it, or with the error that failed it.
	// Callbacks run in entry order, one at a time. A failure before an
	// id was assigned (too large, writer closed) calls cb with id -1,
	// possibly on the calling goroutine.
	AppendAsync(data []byte, cb func(entry int64, err error))
	// LastAddConfirmed is the last entry acknowledged in order; -1 if
	// none.
	LastAddConfirmed() int64
	// Metadata is the writer's view of the ledger's metadata; State is
	// ledger.StateClosed once Close closed it.
	Metadata() ledger.Metadata
	// Close waits for the outstanding appends and closes the ledger at
	// the last acknowledged entry. It fails with ledger.ErrFenced when a
	// recovery fenced the ledger first.
	Close(ctx context.Context) error
}

// Reader reads one ledger. It is safe for concurrent use.
type Reader interface {
	// Closed reports whether the ledger was closed when the reader
	// learnt its metadata (a reader of an open ledger stays open).
	Closed() bool
	// LastAddConfirmed is the last entry the reader may read: a closed
	// ledger's last entry, an open one's last-add-confirmed as last
	// learnt.
	LastAddConfirmed() int64
	// WaitLAC waits until the last-add-confirmed is above prev (or the
	// ledger is closed, or ctx ends) and returns it.
	WaitLAC(ctx context.Context, prev int64) (int64, error)
	// Read returns entries first..last, in order; an entry beyond
	// LastAddConfirmed is ledger.ErrNoEntry.
	Read(ctx context.Context, first, last int64) ([]ledger.Entry, error)
}
