package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/bookie/proto"
)

// Entry is one ledger entry.
type Entry struct {
	ID   int64
	Data []byte
}

// Reader reads a ledger: a closed one up to its last entry, an open one up
// to its last add confirmed, which WaitLAC advances while the writer goes
// on. It is safe for concurrent use.
type Reader struct {
	c  *Client
	id uint64

	mu  sync.Mutex
	md  Metadata
	rev int64
	lac int64
}

func (c *Client) newReader(id uint64, md Metadata, rev int64, lac int64) *Reader {
	return &Reader{c: c, id: id, md: md, rev: rev, lac: lac}
}

// OpenNoRecovery opens a ledger for reading without disturbing its writer.
// For a ledger still open the LAC is the highest one its current bookies
// have seen piggybacked on entries (it trails the writer by about one entry).
func (c *Client) OpenNoRecovery(ctx context.Context, id uint64) (*Reader, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	md, rev, err := c.Metadata(ctx, id)
	if err != nil {
		return nil, err
	}
	if md.State == StateClosed {
		return c.newReader(id, md, rev, md.LastEntry), nil
	}
	c.refreshAddrs(ctx)
	lac := max(md.Last().FirstEntry-1, c.readLAC(ctx, id, md.Last()))
	return c.newReader(id, md, rev, lac), nil
}

// readLAC asks every bookie of seg for the ledger's LAC at once and returns
// the highest answer (-1 if none).
func (c *Client) readLAC(ctx context.Context, id uint64, seg Segment) int64 {
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		lac = int64(-1)
	)
	for _, b := range seg.Bookies {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
			defer cancel()
			conn, err := c.bookie(rctx, b)
			if err != nil {
				return
			}
			if l, err := conn.ReadLAC(rctx, id, -1, 0); err == nil {
				mu.Lock()
				lac = max(lac, l)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lac
}

// ID is the ledger id.
func (r *Reader) ID() uint64 { return r.id }

// LastAddConfirmed is the last entry known to be readable (-1: none).
func (r *Reader) LastAddConfirmed() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lac
}

// Closed reports whether the ledger was closed when the metadata was last read.
func (r *Reader) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.md.State == StateClosed
}

// Length is the closed ledger's total data length (0 while open).
func (r *Reader) Length() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.md.Length
}

// Metadata is the metadata as last read.
func (r *Reader) Metadata() Metadata {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.md.Clone()
}

// maxReadAhead bounds the entries one Read fetches concurrently.
const maxReadAhead = 64

// Read returns entries first..last (inclusive), which must not be beyond the
// LAC. Each entry is read from the first bookie of its write set, then the
// next on an error or a copy failing its checksum; if all fail on an open
// ledger the metadata is re-read (the writer may have replaced bookies) and
// the entry tried once more. Up to 64 entries are fetched concurrently.
func (r *Reader) Read(ctx context.Context, first, last int64) ([]Entry, error) {
	r.mu.Lock()
	md, lac := r.md, r.lac
	r.mu.Unlock()
	if first < 0 || last < first {
		return nil, fmt.Errorf("%w: ledger %d: read range %d..%d", ErrInvalid, r.id, first, last)
	}
	if last > lac {
		return nil, fmt.Errorf("%w: ledger %d: entry %d is beyond the last add confirmed %d", ErrNoEntry, r.id, last, lac)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := int(last - first + 1)
	out := make([]Entry, n)
	errs := make([]error, n)
	sem := make(chan struct{}, maxReadAhead)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			errs[i] = ctx.Err()
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			e, _, err := r.c.readEntry(ctx, r.id, &md, first+int64(i))
			if err != nil && ctx.Err() == nil && md.State != StateClosed {
				// The writer may have replaced bookies since the metadata was read.
				if r.refresh(ctx) == nil {
					if cur := r.Metadata(); !sameEnsembles(cur.Ensembles, md.Ensembles) {
						e, _, err = r.c.readEntry(ctx, r.id, &cur, first+int64(i))
					}
				}
			}
			if err != nil {
				errs[i] = err
				cancel()
				return
			}
			out[i] = Entry{ID: first + int64(i), Data: e.Data}
		})
	}
	wg.Wait()
	// Report the first real failure, not the cancellations it caused.
	var firstErr error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return nil, fmt.Errorf("ledger %d: read: %w", r.id, firstErr)
	}
	return out, nil
}

// readEntry reads one entry from its write set, trying each bookie in turn,
// and verifies it. It returns the decoded entry and its encoded bytes.
func (c *Client) readEntry(ctx context.Context, id uint64, md *Metadata, entry int64) (proto.Entry, []byte, error) {
	seg := md.SegmentFor(entry)
	var errs []error
	corrupt, missing := 0, 0
	for _, idx := range WriteSet(entry, md.EnsembleSize, md.WriteQuorum) {
		e, raw, err := c.readCopy(ctx, id, seg.Bookies[idx], entry)
		if err == nil {
			return e, raw, nil
		}
		if ctx.Err() != nil {
			return proto.Entry{}, nil, ctx.Err()
		}
		switch {
		case errors.Is(err, ErrCorrupt):
			corrupt++
		case errors.Is(err, proto.ErrNoEntry), errors.Is(err, proto.ErrNoLedger):
			missing++
		}
		errs = append(errs, err)
	}
	kind := ErrUnavailable
	switch {
	case corrupt > 0:
		kind = ErrCorrupt
	case missing == len(errs):
		kind = ErrNoEntry
	}
	return proto.Entry{}, nil, fmt.Errorf("%w: ledger %d entry %d: %w", kind, id, entry, errors.Join(errs...))
}

// readCopy reads an entry from one bookie and verifies its checksum and header.
func (c *Client) readCopy(ctx context.Context, id uint64, bookie string, entry int64) (proto.Entry, []byte, error) {
	conn, err := c.bookie(ctx, bookie)
	if err != nil {
		return proto.Entry{}, nil, err
	}
	raw, err := conn.Read(ctx, id, uint64(entry), false)
	if err != nil {
		if errors.Is(err, proto.ErrCorrupt) {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return proto.Entry{}, nil, err
	}
	e, err := verifyEntry(raw, id, entry)
	if err != nil {
		return proto.Entry{}, nil, fmt.Errorf("bookie %s: %w", bookie, err)
	}
	return e, raw, nil
}

// verifyEntry decodes a copy read from a bookie and checks that it is intact
// (CRC32C) and is the entry asked for.
func verifyEntry(raw []byte, id uint64, entry int64) (proto.Entry, error) {
	e, err := proto.DecodeEntry(raw)
	if err != nil {
		return proto.Entry{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if e.Ledger != id || e.ID != uint64(entry) {
		return proto.Entry{}, fmt.Errorf("%w: got ledger %d entry %d for ledger %d entry %d", ErrCorrupt, e.Ledger, e.ID, id, entry)
	}
	return e, nil
}

// WaitLAC waits until the LAC is beyond prev and returns it. While the
// ledger is open it long-polls the current ensemble's bookies; when a poll
// brings nothing it re-reads the metadata, so a ledger closed meanwhile (or
// moved to a new ensemble) is noticed. A closed ledger with nothing beyond
// prev gives the LAC and ErrClosed.
func (r *Reader) WaitLAC(ctx context.Context, prev int64) (int64, error) {
	for {
		r.mu.Lock()
		lac, md := r.lac, r.md
		r.mu.Unlock()
		if lac > prev {
			return lac, nil
		}
		if md.State == StateClosed {
			return lac, fmt.Errorf("ledger %d: nothing after entry %d: %w", r.id, prev, ErrClosed)
		}
		got, answered := r.pollLAC(ctx, md.Last(), prev)
		if ctx.Err() != nil {
			return lac, fmt.Errorf("ledger %d: wait for entries after %d: %w", r.id, prev, ctx.Err())
		}
		if got > prev {
			r.mu.Lock()
			r.lac = max(r.lac, got)
			r.mu.Unlock()
			continue
		}
		if err := r.refresh(ctx); err != nil {
			return lac, err
		}
		if !answered {
			// No bookie answered; do not spin.
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}
}

// pollLAC long-polls every bookie of seg and returns as soon as one reports a
// LAC beyond prev. answered says whether any bookie answered at all.
func (r *Reader) pollLAC(ctx context.Context, seg Segment, prev int64) (lac int64, answered bool) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		lac int64
		ok  bool
	}
	results := make(chan result, len(seg.Bookies))
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, b := range seg.Bookies {
		wg.Go(func() {
			conn, err := r.c.bookie(pctx, b)
			if err != nil {
				results <- result{-1, false}
				return
			}
			l, err := conn.ReadLAC(pctx, r.id, prev, r.c.cfg.LongPollTimeout)
			results <- result{l, err == nil || errors.Is(err, proto.ErrTimeout) || errors.Is(err, proto.ErrNoLedger)}
		})
	}
	lac = -1
	for range seg.Bookies {
		res := <-results
		answered = answered || res.ok
		if res.ok && res.lac > lac {
			lac = res.lac
		}
		if lac > prev {
			return lac, answered
		}
	}
	return lac, answered
}

// refresh re-reads the metadata: a closed ledger's LAC is its last entry,
// and a new ensemble means every entry before it is confirmed.
func (r *Reader) refresh(ctx context.Context) error {
	mctx, cancel := context.WithTimeout(ctx, r.c.cfg.RequestTimeout)
	defer cancel()
	md, rev, err := r.c.Metadata(mctx, r.id)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("ledger %d: %w", r.id, ctx.Err())
		}
		if errors.Is(err, ErrNoLedger) {
			return err
		}
		return nil // transient: poll again
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rev <= r.rev {
		return nil
	}
	r.md, r.rev = md, rev
	if md.State == StateClosed {
		r.lac = md.LastEntry
	} else {
		r.lac = max(r.lac, md.Last().FirstEntry-1)
	}
	return nil
}
