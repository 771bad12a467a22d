// Package compactor owns topic compaction, after Pulsar's two-phase
// compactor: it reads a topic's compacted view (the previous compacted
// ledger, then the topic's entries after the previous horizon) up to the
// topic's current end, keeps each key's latest message (phase one finds
// them, phase two writes them to a new compacted ledger in the bookies),
// and switches the topic to the new ledger and horizon in one write of
// the __compaction cursor, whose position also holds back what
// compaction has not read yet. View serves the compacted view to
// subscriptions that read compacted.
//
// What is kept (Scan, Rewrite), the compacted ledger's entry format and
// the state in the cursor's properties are pure code (core.go); Compact
// and View do the I/O. The design is in docs/compaction.md.
package compactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/mledger"
)

// Options shape a compaction run.
type Options struct {
	// Ensemble, WriteQuorum and AckQuorum shape the compacted ledger; zero
	// means the ledger client's defaults.
	Ensemble, WriteQuorum, AckQuorum int
	// Logger receives the run's progress; nil discards it.
	Logger *slog.Logger
	// Switched, if set, is called once the topic's state names the new
	// compacted ledger, before the previous one is deleted: readers of
	// the previous view move to the new one.
	Switched func(State)
}

// Result is what a run did.
type Result struct {
	// State is the topic's compaction state after the run.
	State State
	// Compacted says a new compacted ledger was written; false when the
	// topic had nothing to compact (empty, or nothing after the horizon).
	Compacted bool
	// Read and Kept count the entries read and the entries written.
	Read, Kept int64
}

// readBatch is how many entries a run reads at a time.
const readBatch = 100

// Compact compacts the managed ledger ml up to its last confirmed entry,
// writing the compacted ledger with lc. It is not safe to run twice at
// once on one topic (the broker runs one at a time). When it fails, the
// topic's previous compaction state stays as it was (the switch to the
// new one is a single metadata write) and the new ledger is deleted,
// unless the switch's outcome is unknown, in which case the new ledger
// is kept (perhaps orphaned) rather than deleted under a state naming
// it.
func Compact(ctx context.Context, ml *mledger.ManagedLedger, lc *ledger.Client, o Options) (Result, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "compactor", "topic", ml.Name())
	cur, err := ml.OpenCursor(ctx, CursorName, mledger.Earliest)
	if err != nil {
		return Result{}, fmt.Errorf("compactor: %w", err)
	}
	prev, err := StateOf(cur.Properties())
	if err != nil {
		return Result{}, err
	}
	res := Result{State: prev}
	end := ml.LastConfirmed()
	if end.Entry < 0 || prev.Valid() && end.Compare(prev.Horizon) <= 0 {
		return res, nil // nothing (new) to compact
	}
	var view *View
	from := Position{}
	if prev.Valid() {
		if view, err = OpenView(ctx, lc, prev); err != nil {
			return res, err
		}
		from = Position{Ledger: prev.Horizon.Ledger, Entry: prev.Horizon.Entry + 1}
	}
	src := source{ml: ml, view: view, from: from, end: end}

	// Phase one: each key's latest message.
	latest := Latest{}
	start := time.Now()
	if err := src.each(ctx, func(p Position, entry []byte) error {
		res.Read++
		return latest.Scan(p, entry)
	}); err != nil {
		return res, fmt.Errorf("compactor: phase one: %w", err)
	}
	log.Info("compaction phase one done", "entries", res.Read, "keys", len(latest), "horizon", end.String())

	// Phase two: write them to a new ledger.
	w, err := lc.Create(ctx, ledger.CreateOptions{
		Ensemble: o.Ensemble, WriteQuorum: o.WriteQuorum, AckQuorum: o.AckQuorum,
		Properties: map[string]string{"compactedTopic": ml.Name(), "compactionHorizon": end.String()},
	})
	if err != nil {
		return res, fmt.Errorf("compactor: create compacted ledger: %w", err)
	}
	next := State{Ledger: int64(w.ID()), Horizon: end}
	discard := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = w.Close(dctx)
		if err := lc.Delete(dctx, w.ID()); err != nil && !errors.Is(err, ledger.ErrNoLedger) {
			log.Warn("deleting an unused compacted ledger failed; it is orphaned", "ledger", w.ID(), "err", err)
		}
	}
	if err := src.write(ctx, latest, w, &res.Kept); err != nil {
		discard()
		return res, fmt.Errorf("compactor: phase two: %w", err)
	}
	if err := w.Close(ctx); err != nil || w.Metadata().State != ledger.StateClosed {
		discard()
		if err == nil {
			err = errors.New("the writer stopped with the ledger open")
		}
		return res, fmt.Errorf("compactor: close compacted ledger %d: %w", w.ID(), err)
	}

	// The switch: one write of the cursor, position and properties.
	if err := cur.MarkDeleteWithProperties(ctx, end, next.Properties()); err != nil {
		if !switched(ctx, cur, next) {
			discard()
			return res, fmt.Errorf("compactor: record compacted ledger %d: %w", next.Ledger, err)
		}
		log.Warn("the switch to the compacted ledger reported an error but may have happened; keeping the ledger", "ledger", next.Ledger, "err", err)
		return res, fmt.Errorf("compactor: record compacted ledger %d (outcome unknown, ledger kept): %w", next.Ledger, err)
	}
	res.State, res.Compacted = next, true
	if o.Switched != nil {
		o.Switched(next)
	}
	log.Info("compacted", "ledger", next.Ledger, "horizon", end.String(), "read", res.Read, "kept", res.Kept, "took", time.Since(start).Round(time.Millisecond))
	if prev.Valid() && prev.Ledger != next.Ledger {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := lc.Delete(dctx, uint64(prev.Ledger)); err != nil && !errors.Is(err, ledger.ErrNoLedger) {
			log.Warn("deleting the previous compacted ledger failed; it is orphaned", "ledger", prev.Ledger, "err", err)
		}
	}
	return res, nil
}

// switched reports whether the store holds next after a switch that
// reported an error (true too when that cannot be read: then the new
// ledger must not be deleted).
func switched(ctx context.Context, cur *mledger.Cursor, next State) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	props, err := cur.StoredProperties(rctx)
	if err != nil {
		return true
	}
	return props[LedgerProperty] == strconv.FormatInt(next.Ledger, 10)
}

// source is what a run reads: the previous compacted view, then the
// topic's entries from `from` up to end.
type source struct {
	ml   *mledger.ManagedLedger
	view *View
	from Position
	end  Position
}

// each calls fn for every entry of the source, in position order.
func (s source) each(ctx context.Context, fn func(Position, []byte) error) error {
	if s.view != nil {
		for i := int64(0); i < s.view.Len(); i += readBatch {
			es, err := s.view.read(ctx, i, min(s.view.Len()-1, i+readBatch-1))
			if err != nil {
				return err
			}
			for _, e := range es {
				if err := fn(e.Position, e.Data); err != nil {
					return err
				}
			}
		}
	}
	from := s.from
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		es, next, err := s.ml.Read(ctx, from, readBatch)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.Position.Compare(s.end) > 0 {
				return nil
			}
			if err := fn(e.Position, e.Data); err != nil {
				return err
			}
		}
		if len(es) == 0 || es[len(es)-1].Position.Compare(s.end) >= 0 {
			return nil
		}
		from = next
	}
}

// write appends what latest keeps of every entry of the source to w. An
// append that fails ends it; the rest are waited for by w.Close, which
// fails if any did.
func (s source) write(ctx context.Context, latest Latest, w *ledger.Writer, kept *int64) error {
	errc := make(chan error, 1)
	fail := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	err := s.each(ctx, func(p Position, entry []byte) error {
		select {
		case err := <-errc:
			return err
		default:
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		k, ok, err := latest.Rewrite(p, entry)
		if err != nil || !ok {
			return err
		}
		data, err := AppendEntry(nil, p, k)
		if err != nil {
			return err
		}
		*kept++
		w.AppendAsync(data, func(id int64, err error) {
			if err != nil {
				fail(fmt.Errorf("append to compacted ledger %d: %w", w.ID(), err))
			}
		})
		return nil
	})
	if err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	default:
	}
	return nil
}
