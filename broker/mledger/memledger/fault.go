package memledger

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/isobar-mq/isobar/internal/faultrule"
)

// ErrInjected is the error a Rule injects by default.
var ErrInjected = errors.New("memledger: injected error")

// ErrAckLost, injected into an append (OpAppend), stores the entry all the
// same and fails only its acknowledgement: the bookies have it, the writer
// never heard. The writer breaks as after any failed append, and a
// recovery of the ledger keeps the entry.
var ErrAckLost = errors.New("memledger: injected: entry stored, acknowledgement lost")

// Op is the kind of an operation, as seen by an Injector.
type Op uint8

// Operation kinds, with the ledger and entry an Injector sees.
const (
	OpCreate  Op = iota + 1 // Store.Create: ledger 0, entry -1
	OpAppend                // an append reaching the bookies: its ledger and entry (in entry order)
	OpClose                 // Writer.Close, once its appends completed: ledger, -1
	OpRecover               // Store.Recover: ledger, -1
	OpOpen                  // Store.OpenReader: ledger, -1
	OpRead                  // Reader.Read: ledger, the first entry asked for
	OpDelete                // Store.Delete: ledger, -1
	numOps
)

var opNames = [...]string{
	OpCreate: "create", OpAppend: "append", OpClose: "close", OpRecover: "recover",
	OpOpen: "open", OpRead: "read", OpDelete: "delete",
}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return "op?"
}

// Injector decides, for every operation of a Store, whether it fails. It
// is called before the operation takes effect, from whatever goroutine
// performs it (an append's from the writer's, so a blocked append holds up
// the appends after it, as a bookie that does not answer does). It may
// block to make the operation hang; ctx is the operation's (for an append,
// the writer's, which ends when the writer is aborted).
type Injector interface {
	MaybeError(ctx context.Context, op Op, ledger uint64, entry int64) error
}

// InjectorFunc adapts a function to an Injector.
type InjectorFunc func(ctx context.Context, op Op, ledger uint64, entry int64) error

// MaybeError calls f.
func (f InjectorFunc) MaybeError(ctx context.Context, op Op, ledger uint64, entry int64) error {
	return f(ctx, op, ledger, entry)
}

// Rule fails the Nth operation (1-based) among those that match it: of a
// kind in Ops (empty: any) on ledger Ledger (0: any). It counts the
// matching operations. Set the exported fields before first use.
type Rule struct {
	N      int64  // which matching operation fails; <= 0: none, only count
	Ops    []Op   // kinds that match; empty: all
	Ledger uint64 // the ledger that matches; 0: all
	Err    error  // nil: ErrInjected; ErrAckLost (on appends) stores the entry
	Sticky bool   // after the Nth, every later matching operation fails too (until Clear)

	faultrule.Counter // Count, Fired, Clear
}

// OnNth returns a Rule failing the nth operation of a kind in ops.
func OnNth(n int64, ops ...Op) *Rule { return &Rule{N: n, Ops: ops} }

// Once returns a Rule failing the first operation of a kind in ops.
func Once(ops ...Op) *Rule { return OnNth(1, ops...) }

// Always returns a Rule failing every operation of a kind in ops until
// Clear.
func Always(ops ...Op) *Rule { return &Rule{N: 1, Ops: ops, Sticky: true} }

func (r *Rule) matches(op Op, ledger uint64) bool {
	return (len(r.Ops) == 0 || slices.Contains(r.Ops, op)) && (r.Ledger == 0 || r.Ledger == ledger)
}

// MaybeError implements Injector.
func (r *Rule) MaybeError(_ context.Context, op Op, ledger uint64, _ int64) error {
	if !r.matches(op, ledger) {
		return nil
	}
	if !r.Fail(r.N, r.Sticky) {
		return nil
	}
	if r.Err != nil {
		return r.Err
	}
	return ErrInjected
}

// Hang makes the operations that match it block until Release (or their
// context ends, which fails them with its error): a bookie or a metadata
// store that does not answer. Make one with NewHang.
type Hang struct {
	ops    []Op
	ledger uint64

	release chan struct{}
	once    sync.Once
	// mu guards hung and waiting.
	mu      sync.Mutex
	hung    int
	waiting chan struct{} // closed at the next operation that hangs
}

// NewHang returns a Hang for the operations of a kind in ops (empty: any)
// on ledger (0: any).
func NewHang(ledger uint64, ops ...Op) *Hang {
	return &Hang{ops: ops, ledger: ledger, release: make(chan struct{})}
}

// MaybeError implements Injector: a matching operation blocks.
func (h *Hang) MaybeError(ctx context.Context, op Op, ledger uint64, _ int64) error {
	if len(h.ops) > 0 && !slices.Contains(h.ops, op) || h.ledger != 0 && h.ledger != ledger {
		return nil
	}
	select {
	case <-h.release:
		return nil
	default:
	}
	h.mu.Lock()
	h.hung++
	if h.waiting != nil {
		close(h.waiting)
		h.waiting = nil
	}
	h.mu.Unlock()
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Hung is how many operations have hung so far (released ones included).
func (h *Hang) Hung() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hung
}

// Wait blocks until at least n operations have hung, or ctx ends.
func (h *Hang) Wait(ctx context.Context, n int) error {
	for {
		h.mu.Lock()
		if h.hung >= n {
			h.mu.Unlock()
			return nil
		}
		if h.waiting == nil {
			h.waiting = make(chan struct{})
		}
		ch := h.waiting
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Release lets the hung operations, and every later one, go on.
func (h *Hang) Release() { h.once.Do(func() { close(h.release) }) }

// Rules combines injectors: every one sees every operation (so each
// counts on its own), in order, and the first error wins.
func Rules(injs ...Injector) Injector {
	return InjectorFunc(func(ctx context.Context, op Op, ledger uint64, entry int64) error {
		var first error
		for _, i := range injs {
			if err := i.MaybeError(ctx, op, ledger, entry); err != nil && first == nil {
				first = err
			}
		}
		return first
	})
}
