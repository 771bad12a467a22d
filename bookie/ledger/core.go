package ledger

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/isobar-mq/isobar/bookie/proto"
)

// writeCore is the pure state machine of a ledger writer (and of recovery's
// re-writer): it assigns entry ids, says which bookie each entry is sent to,
// acknowledges entries in order, notices failed bookies and asks for
// ensemble changes, and resends to replacements. Events go in through its
// methods; what to do comes out of Ready. It does no I/O and reads no clock;
// the Writer's goroutine drives it.
type writeCore struct {
	ledger    uint64
	e, qw, qa int
	recovery  bool // re-writing recovered entries: full write quorum, FlagRecovery

	ensemble []string // the current ensemble's bookies
	segStart int64    // first entry of the current ensemble
	acks     *ackTracker
	entries  []pendingEntry // entries[head+i] is entry acks.LAC()+1+i
	head     int
	length   uint64 // ledger length through the last added entry
	lacLen   uint64 // ledger length through the LAC

	failed   uint64 // ensemble indices that failed and await replacement
	changing bool   // an ensemble change is being written
	degraded bool   // the last change found no replacement; wait for RetryChange
	err      error  // fatal: every pending and later entry fails with it

	// Outputs, collected until Ready.
	sends  []sendOp
	done   []completion
	change *changeRequest
}

type pendingEntry struct {
	payload []byte
	length  uint64
	cb      func(int64, error)
}

// sendOp asks the driver to send an encoded entry to one bookie.
type sendOp struct {
	Entry   int64
	Index   int
	Bookie  string
	Payload []byte
}

// completion is an entry's outcome, handed to its callback in entry order.
type completion struct {
	Entry int64
	Err   error
	CB    func(int64, error)
}

// changeRequest asks the driver to replace the bookies at Failed with an
// ensemble starting at entry Start.
type changeRequest struct {
	Start    int64
	Failed   []int
	Ensemble []string
}

func newWriteCore(ledger uint64, e, qw, qa int, recovery bool, seg Segment, lac int64, lacLen uint64) *writeCore {
	quorum := qa
	if recovery {
		quorum = qw
	}
	return &writeCore{
		ledger: ledger, e: e, qw: qw, qa: qa, recovery: recovery,
		ensemble: slices.Clone(seg.Bookies), segStart: seg.FirstEntry,
		acks:   newAckTracker(e, qw, quorum, lac),
		length: lacLen, lacLen: lacLen,
	}
}

// Ready returns and forgets the outputs collected so far.
func (c *writeCore) Ready() (sends []sendOp, done []completion, change *changeRequest) {
	sends, done, change = c.sends, c.done, c.change
	c.sends, c.done, c.change = nil, nil, nil
	return
}

// LAC is the last entry acknowledged in order; LACLength the ledger length through it.
func (c *writeCore) LAC() int64        { return c.acks.LAC() }
func (c *writeCore) LACLength() uint64 { return c.lacLen }

// Idle reports that nothing is pending (or the writer failed) and no
// ensemble change is running.
func (c *writeCore) Idle() bool { return !c.changing && (c.err != nil || c.acks.Pending() == 0) }

// Err is the fatal error, if any.
func (c *writeCore) Err() error { return c.err }

// Degraded reports that an ensemble change found no replacement and the
// writer goes on with fewer bookies until RetryChange.
func (c *writeCore) Degraded() bool { return c.degraded }

// Append encodes data as the next entry (piggybacking the LAC) and sends it
// to its write set.
func (c *writeCore) Append(data []byte, cb func(int64, error)) {
	if c.err != nil {
		c.done = append(c.done, completion{Entry: -1, Err: c.err, CB: cb})
		return
	}
	id := c.acks.Add()
	c.length += uint64(len(data))
	payload := proto.AppendEntry(make([]byte, 0, proto.EntryHeaderSize+len(data)), c.ledger, uint64(id), c.acks.LAC(), c.length, data)
	c.push(id, payload, c.length, cb)
}

// AppendEncoded sends an already encoded entry (recovery re-writes entries
// exactly as read). id must be the next entry id.
func (c *writeCore) AppendEncoded(id int64, payload []byte, length uint64, cb func(int64, error)) {
	if c.err == nil && id != c.acks.Next() {
		c.done = append(c.done, completion{Entry: id, Err: fmt.Errorf("ledger %d: re-write of entry %d out of order (next is %d)", c.ledger, id, c.acks.Next()), CB: cb})
		return
	}
	if c.err != nil {
		c.done = append(c.done, completion{Entry: id, Err: c.err, CB: cb})
		return
	}
	c.acks.Add()
	c.length = length
	c.push(id, payload, length, cb)
}

func (c *writeCore) push(id int64, payload []byte, length uint64, cb func(int64, error)) {
	c.entries = append(c.entries, pendingEntry{payload: payload, length: length, cb: cb})
	for _, idx := range WriteSet(id, c.e, c.qw) {
		if c.failed&(1<<uint(idx)) == 0 {
			c.sends = append(c.sends, sendOp{Entry: id, Index: idx, Bookie: c.ensemble[idx], Payload: payload})
		}
	}
}

// AddResult is a bookie's answer to one add. Answers from a bookie no
// longer at that ensemble index (it was replaced) are ignored.
func (c *writeCore) AddResult(entry int64, idx int, bookie string, err error) {
	if c.err != nil || idx < 0 || idx >= c.e || c.ensemble[idx] != bookie {
		return
	}
	bit := uint64(1) << uint(idx)
	switch {
	case err == nil:
		if c.failed&bit != 0 {
			return // a failed bookie's copies no longer count
		}
		c.acked(c.acks.Confirm(entry, idx))
	case errors.Is(err, proto.ErrFenced):
		// Someone is recovering the ledger: never route around a fence.
		c.fail(fmt.Errorf("%w: ledger %d: add entry %d: %w", ErrFenced, c.ledger, entry, err))
	case errors.Is(err, proto.ErrBadRequest), errors.Is(err, proto.ErrTooLarge), errors.Is(err, proto.ErrUnknownOp):
		// Another bookie would refuse it too.
		c.fail(fmt.Errorf("ledger %d: add entry %d: %w", c.ledger, entry, err))
	default:
		c.markFailed(idx)
	}
}

func (c *writeCore) markFailed(idx int) {
	bit := uint64(1) << uint(idx)
	if c.failed&bit != 0 {
		return
	}
	c.failed |= bit
	c.acks.Unconfirm(idx)
	c.degraded = false // a new failure is worth another attempt
	c.maybeChange()
}

func (c *writeCore) maybeChange() {
	if c.failed == 0 || c.changing || c.degraded || c.err != nil {
		return
	}
	c.changing = true
	c.change = &changeRequest{Start: c.acks.LAC() + 1, Failed: indices(c.failed), Ensemble: slices.Clone(c.ensemble)}
}

// EnsembleChanged reports that the metadata now has an ensemble starting at
// start with the replacements swapped in. Every pending entry whose write
// set contains a replaced index is sent to the replacement.
func (c *writeCore) EnsembleChanged(start int64, replaced map[int]string) {
	c.changing = false
	if c.err != nil {
		return
	}
	var mask uint64
	for idx, b := range replaced {
		c.ensemble[idx] = b
		c.failed &^= 1 << uint(idx)
		c.acks.Unconfirm(idx)
		mask |= 1 << uint(idx)
	}
	c.segStart = start
	for i := c.head; i < len(c.entries); i++ {
		id := c.acks.LAC() + 1 + int64(i-c.head)
		ws := writeSetMask(id, c.e, c.qw) & mask
		for ws != 0 {
			idx := bits.TrailingZeros64(ws)
			ws &^= 1 << uint(idx)
			c.sends = append(c.sends, sendOp{Entry: id, Index: idx, Bookie: c.ensemble[idx], Payload: c.entries[i].payload})
		}
	}
	c.maybeChange()
}

// EnsembleChangeFailed reports that no ensemble change could be written.
// With no replacement bookie the writer carries on degraded while every
// write set still has an ack quorum of live bookies (recovery settles for
// Qa then); otherwise, and on any other error, the ledger fails.
func (c *writeCore) EnsembleChangeFailed(err error) {
	c.changing = false
	if c.err != nil {
		return
	}
	if errors.Is(err, ErrNotEnoughBookies) {
		if c.recovery && c.acks.quorum > c.qa && c.viable(c.qa) {
			c.acked(c.acks.SetQuorum(c.qa))
		}
		if c.viable(c.acks.quorum) {
			c.degraded = true
			return
		}
	}
	c.fail(err)
}

// RetryChange tries again to replace failed bookies after a degraded spell.
func (c *writeCore) RetryChange() {
	c.degraded = false
	c.maybeChange()
}

// viable reports whether every write set keeps at least quorum bookies that
// have not failed.
func (c *writeCore) viable(quorum int) bool {
	for s := range c.e {
		if bits.OnesCount64(writeSetMask(int64(s), c.e, c.qw)&^c.failed) < quorum {
			return false
		}
	}
	return true
}

// Fail fails the writer: every pending entry (in order) and every later one
// fails with err.
func (c *writeCore) Fail(err error) {
	if c.err == nil {
		c.fail(err)
	}
}

func (c *writeCore) fail(err error) {
	c.err = err
	first := c.acks.LAC() + 1
	for i := c.head; i < len(c.entries); i++ {
		c.done = append(c.done, completion{Entry: first + int64(i-c.head), Err: err, CB: c.entries[i].cb})
	}
	c.entries, c.head = nil, 0
	c.change = nil
}

func (c *writeCore) acked(n int) {
	first := c.acks.LAC() - int64(n) + 1
	for i := range n {
		e := c.entries[c.head]
		c.entries[c.head] = pendingEntry{}
		c.head++
		c.lacLen = e.length
		c.done = append(c.done, completion{Entry: first + int64(i), CB: e.cb})
	}
	if c.head > 64 && c.head*2 >= len(c.entries) {
		c.entries = c.entries[:copy(c.entries, c.entries[c.head:])]
		c.head = 0
	}
}

func indices(mask uint64) []int {
	var out []int
	for mask != 0 {
		i := bits.TrailingZeros64(mask)
		out = append(out, i)
		mask &^= 1 << uint(i)
	}
	return out
}
