package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/metastore"
)

// recoveryWindow is how many entries recovery reads ahead at once.
const recoveryWindow = 16

// OpenRecover opens a ledger for reading after making sure it is closed: if
// it is still open (its writer may be gone, or alive and about to be fenced
// out) it is recovered first: marked in-recovery, fenced on its bookies,
// every entry that may have been acknowledged is found and re-written to its
// full write set, and the metadata is closed at the last such entry. A
// ledger already closed is just opened, so OpenRecover is idempotent.
func (c *Client) OpenRecover(ctx context.Context, id uint64) (*Reader, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		md, rev, err := c.Metadata(ctx, id)
		if err != nil {
			return nil, err
		}
		if md.State == StateClosed {
			return c.newReader(id, md, rev, md.LastEntry), nil
		}
		if md.State == StateOpen {
			n := md.Clone()
			n.State = StateInRecovery
			val, err := EncodeMetadata(&n)
			if err != nil {
				return nil, err
			}
			newRev, err := c.meta.CAS(ctx, LedgerKey(c.cfg.Region, id), val, rev)
			if errors.Is(err, metastore.ErrConflict) {
				lastErr = err
				continue // the writer changed its ensemble, or someone else began: look again
			}
			if err != nil {
				return nil, fmt.Errorf("ledger %d: recovery: %w", id, err)
			}
			md, rev = n, newRev
		}
		// In recovery (by us now, or by someone who may have died): recover.
		md, rev, err = c.recover(ctx, id, md, rev)
		if err == nil {
			c.log.Info("ledger recovered", "ledger", id, "lastEntry", md.LastEntry, "length", md.Length)
			return c.newReader(id, md, rev, md.LastEntry), nil
		}
		if !errors.Is(err, ErrFenced) || ctx.Err() != nil {
			return nil, err
		}
		lastErr = err // another recovery got ahead of us: look again
	}
	return nil, fmt.Errorf("ledger %d: recovery kept conflicting: %w", id, lastErr)
}

// recover runs recovery on a ledger already marked in-recovery.
func (c *Client) recover(ctx context.Context, id uint64, md Metadata, rev int64) (Metadata, int64, error) {
	c.refreshAddrs(ctx)
	seg := md.Last()

	fenceLAC, err := c.fence(ctx, id, md)
	if err != nil {
		return Metadata{}, 0, err
	}
	// Every entry before the current ensemble was acknowledged when the
	// writer switched to it, and the LAC entry was acknowledged.
	start := max(fenceLAC, seg.FirstEntry-1)
	var startLen uint64
	if start >= 0 {
		e, _, err := c.readEntry(ctx, id, &md, start)
		if err != nil {
			return Metadata{}, 0, fmt.Errorf("ledger %d: recovery: read confirmed entry %d: %w", id, start, err)
		}
		startLen = e.Length
	}
	c.log.Info("recovering ledger", "ledger", id, "fromEntry", start+1, "ensemble", seg.Bookies)

	w := c.newWriter(id, md, rev, true, start, startLen)
	defer w.stop(nil)
	var (
		errMu    sync.Mutex
		writeErr error
	)
	onWritten := func(_ int64, err error) {
		if err != nil {
			errMu.Lock()
			if writeErr == nil {
				writeErr = err
			}
			errMu.Unlock()
		}
	}
	next := start + 1
	for done := false; !done; {
		outcomes := c.recoveryReadWindow(ctx, id, md, next, recoveryWindow)
		for _, o := range outcomes {
			if o.err != nil {
				return Metadata{}, 0, o.err
			}
			if o.outcome == entryAbsent {
				done = true
				break
			}
			if err := w.enqueue(ctx, event{kind: evAppendEncoded, entry: o.entry, data: o.raw, length: o.length, cb: onWritten}); err != nil {
				return Metadata{}, 0, err
			}
			next = o.entry + 1
		}
	}
	r, err := w.drain(ctx)
	if err != nil {
		return Metadata{}, 0, err
	}
	errMu.Lock()
	if r.err == nil {
		r.err = writeErr
	}
	errMu.Unlock()
	if r.err != nil {
		return Metadata{}, 0, fmt.Errorf("ledger %d: recovery: re-write: %w", id, r.err)
	}
	if r.lac != next-1 {
		return Metadata{}, 0, fmt.Errorf("ledger %d: recovery: re-wrote up to %d, expected %d", id, r.lac, next-1)
	}
	mctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	return c.closeLedger(mctx, id, r.md, r.rev, StateInRecovery, r.lac, r.length)
}

// fence fences the ledger on its current ensemble until no writer can gather
// an ack quorum in any write set, and returns the highest LAC reported.
func (c *Client) fence(ctx context.Context, id uint64, md Metadata) (int64, error) {
	seg := md.Last()
	fctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	type result struct {
		idx int
		lac int64
		err error
	}
	results := make(chan result, len(seg.Bookies))
	var wg sync.WaitGroup
	defer wg.Wait()
	for idx, b := range seg.Bookies {
		wg.Go(func() {
			conn, err := c.bookie(fctx, b)
			lac := int64(-1)
			if err == nil {
				lac, err = conn.Fence(fctx, id)
			}
			results <- result{idx, lac, err}
		})
	}
	ft := newFenceTracker(md.EnsembleSize, md.WriteQuorum, md.AckQuorum)
	maxLAC := int64(-1)
	var errs []error
	for range seg.Bookies {
		r := <-results
		if r.err != nil {
			ft.Failed(r.idx)
			errs = append(errs, r.err)
		} else {
			ft.Fenced(r.idx)
			maxLAC = max(maxLAC, r.lac)
		}
		if ft.Done() {
			return maxLAC, nil
		}
		if ft.Impossible() {
			break
		}
	}
	return -1, fmt.Errorf("%w: ledger %d: recovery: cannot fence enough bookies of %v: %w", ErrNotEnoughBookies, id, seg.Bookies, errors.Join(errs...))
}

// recoveredEntry is what recovery learned about one entry.
type recoveredEntry struct {
	entry   int64
	outcome entryOutcome
	raw     []byte // the encoded entry as read, re-written verbatim
	length  uint64
	err     error
}

// recoveryReadWindow decides entries from..from+n-1 concurrently and
// returns them in order, cut after the first absent one or error.
func (c *Client) recoveryReadWindow(ctx context.Context, id uint64, md Metadata, from int64, n int) []recoveredEntry {
	out := make([]recoveredEntry, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = c.recoveryRead(ctx, id, md, from+int64(i)) })
	}
	wg.Wait()
	for i, o := range out {
		if o.err != nil || o.outcome == entryAbsent {
			return out[:i+1]
		}
	}
	return out
}

// recoveryRead asks every bookie of an entry's write set for it at once and
// decides with entryVote.
func (c *Client) recoveryRead(ctx context.Context, id uint64, md Metadata, entry int64) recoveredEntry {
	seg := md.SegmentFor(entry)
	ws := WriteSet(entry, md.EnsembleSize, md.WriteQuorum)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		raw    []byte
		length uint64
		err    error
	}
	answers := make(chan answer, len(ws))
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, idx := range ws {
		wg.Go(func() {
			e, raw, err := c.readCopy(rctx, id, seg.Bookies[idx], entry)
			answers <- answer{raw, e.Length, err}
		})
	}
	found, missing, failed := 0, 0, 0
	var errs []error
	for range ws {
		a := <-answers
		switch {
		case a.err == nil:
			found++
		case errors.Is(a.err, proto.ErrNoEntry), errors.Is(a.err, proto.ErrNoLedger):
			missing++
		default:
			failed++
			errs = append(errs, a.err)
		}
		switch entryVote(md.WriteQuorum, md.AckQuorum, found, missing, failed) {
		case entryPresent:
			return recoveredEntry{entry: entry, outcome: entryPresent, raw: a.raw, length: a.length}
		case entryAbsent:
			return recoveredEntry{entry: entry, outcome: entryAbsent}
		case entryUnknown:
			return recoveredEntry{entry: entry, outcome: entryUnknown,
				err: fmt.Errorf("%w: ledger %d: recovery cannot tell whether entry %d exists: %w", ErrUnavailable, id, entry, errors.Join(errs...))}
		}
	}
	return recoveredEntry{entry: entry, outcome: entryUnknown, err: fmt.Errorf("%w: ledger %d entry %d", ErrUnavailable, id, entry)}
}
