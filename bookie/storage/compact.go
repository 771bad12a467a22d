package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"
)

// CompactionStats describes one compaction pass.
type CompactionStats struct {
	LogsCompacted  int   // entry logs scanned and copied from
	LogsRemoved    int   // entry logs removed (their space reclaimed)
	EntriesCopied  int64 // live entries moved to a new log
	BytesCopied    int64 // bytes of those entries' frames
	BytesReclaimed int64 // size of the removed logs
}

func (c *CompactionStats) add(o CompactionStats) {
	c.LogsCompacted += o.LogsCompacted
	c.LogsRemoved += o.LogsRemoved
	c.EntriesCopied += o.EntriesCopied
	c.BytesCopied += o.BytesCopied
	c.BytesReclaimed += o.BytesReclaimed
}

// compactLoop is the background compactor.
func (s *Store) compactLoop(ctx context.Context) {
	defer close(s.compactorDone)
	if s.cfg.CompactionInterval < 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(s.cfg.CompactionInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := s.compact(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("compaction failed", "err", err)
		} else if st.LogsRemoved > 0 {
			s.log.Info("compaction pass", "logsRemoved", st.LogsRemoved, "bytesReclaimed", st.BytesReclaimed,
				"entriesCopied", st.EntriesCopied, "bytesCopied", st.BytesCopied)
		}
	}
}

// candidate is a sealed log and its live fraction.
type candidate struct {
	info *logInfo
	live float64
}

// compactionCandidates returns the sealed logs whose live fraction (bytes of
// ledgers that still exist over all bytes) is below the threshold, emptiest
// first. The fraction is an upper bound: overwritten entries and the copies
// replay made still count as live until their ledger is deleted.
func (s *Store) compactionCandidates() []candidate {
	infos := s.logs.snapshotSealed()
	var out []candidate
	s.mu.Lock()
	for _, info := range infos {
		var live uint64
		for l, b := range info.ledgers {
			if _, ok := s.ledgers[l]; ok {
				live += b
			}
		}
		frac := 0.0
		if info.total > 0 {
			frac = float64(live) / float64(info.total)
		}
		if frac < s.cfg.CompactionThreshold {
			out = append(out, candidate{info, frac})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b candidate) int {
		switch {
		case a.live < b.live:
			return -1
		case a.live > b.live:
			return 1
		}
		return compareU64(a.info.id, b.info.id)
	})
	return out
}

func (s *Store) compact(ctx context.Context) (CompactionStats, error) {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	defer func() {
		// Output logs sealed during the pass: every swap into them is done
		// (or the pass failed and they only hold unreferenced copies).
		for _, info := range s.sealedInPass {
			s.logs.addSealed(info)
		}
		s.sealedInPass = nil
	}()
	var stats CompactionStats
	for _, c := range s.compactionCandidates() {
		if err := ctx.Err(); err != nil {
			return stats, err
		}
		if err := s.failedErr(); err != nil {
			return stats, err
		}
		st, err := s.compactLog(ctx, c.info)
		stats.add(st)
		if err != nil {
			return stats, fmt.Errorf("storage: compact entry log %d: %w", c.info.id, err)
		}
	}
	if s.compactOut != nil {
		// Seal the output so it can be compacted in turn.
		info, err := s.compactOut.seal()
		if err != nil {
			s.compactOut.abandon()
			s.compactOut = nil
			return stats, fmt.Errorf("storage: seal compaction output: %w", err)
		}
		s.sealedInPass = append(s.sealedInPass, info)
		s.compactOut = nil
	}
	return stats, nil
}

// move is one entry copied by compaction, waiting for its index swap.
type move struct {
	ledger, entry uint64
	from, to      logLoc
}

// compactBatchBytes is how much compaction copies before it syncs the output
// and swaps the index entries.
const compactBatchBytes = 4 << 20

// compactLog copies the live entries of one sealed log to the compaction
// output log, points the index at the copies, and removes the log. Adds and
// flushes go on meanwhile: only the index swaps take storeMu.
func (s *Store) compactLog(ctx context.Context, info *logInfo) (CompactionStats, error) {
	var stats CompactionStats
	name := s.logs.path(info.id)
	f, err := s.fs.Open(name)
	if err != nil {
		return stats, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return stats, err
	}
	stats.LogsCompacted = 1
	sc := newFrameScanner(f, info.id, fi.Size(), validEntryLogKind, validEntryPayload)
	var moves []move
	pending := 0
	res, err := sc.walk(fileHeaderSize, true, func(fr *frame) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ledger := binary.LittleEndian.Uint64(fr.payload)
		entry := binary.LittleEndian.Uint64(fr.payload[8:])
		if !s.ledgerExists(ledger) {
			return nil
		}
		from := logLoc{log: info.id, off: fr.off, length: uint32(fr.length - entryPrefixSize)}
		loc, found, err := s.idx.lookup(ledger, entry)
		if err != nil {
			// Without the index we cannot tell whether this copy is live:
			// keep the log.
			return err
		}
		if !found || loc != from {
			return nil // overwritten: this copy is dead
		}
		if err := s.ensureCompactOut(); err != nil {
			return err
		}
		to, err := s.compactOut.append(ledger, entry, fr.payload[entryPrefixSize:])
		if err != nil {
			return err
		}
		moves = append(moves, move{ledger, entry, from, to})
		pending += frameHeaderSize + fr.length
		stats.EntriesCopied++
		stats.BytesCopied += int64(frameHeaderSize + fr.length)
		if pending >= compactBatchBytes {
			if err := s.commitMoves(moves); err != nil {
				return err
			}
			moves, pending = moves[:0], 0
		}
		return nil
	})
	if err != nil {
		return stats, err
	}
	if err := s.commitMoves(moves); err != nil {
		return stats, err
	}
	if res.midCorrupt {
		s.logs.markCorrupt(info.id)
		s.log.Error("entry log has mid-file corruption; keeping it", "log", info.id, "file", name, "offset", res.firstBad)
		return stats, nil
	}
	if err := s.logs.remove(info.id); err != nil {
		return stats, err
	}
	stats.LogsRemoved = 1
	stats.BytesReclaimed = fi.Size()
	s.log.Debug("entry log compacted", "log", info.id, "bytes", fi.Size(), "entriesCopied", stats.EntriesCopied)
	return stats, nil
}

func (s *Store) ledgerExists(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ledgers[id]
	return ok
}

// ensureCompactOut opens the compaction output log, rotating a full one.
func (s *Store) ensureCompactOut() error {
	if s.compactOut != nil && s.compactOut.end() < s.cfg.EntryLogMaxBytes {
		return nil
	}
	if s.compactOut != nil {
		// Moves into it that are not swapped in yet are still safe: seal
		// syncs the data, and the log is published as a compaction
		// candidate only when the pass ends.
		info, err := s.compactOut.seal()
		if err != nil {
			return err
		}
		s.sealedInPass = append(s.sealedInPass, info)
		s.compactOut = nil
	}
	w, err := newLogWriter(s.fs, s.cfg.LedgerDir, s.logs.allocID(), &s.logs.bytes)
	if err != nil {
		return err
	}
	s.compactOut = w
	return nil
}

// commitMoves makes the copies durable, then points the index at them. A
// slot that changed meanwhile (the entry was overwritten, or the ledger
// deleted) keeps its new value.
func (s *Store) commitMoves(moves []move) error {
	if len(moves) == 0 {
		return nil
	}
	if err := s.compactOut.sync(); err != nil {
		return err
	}
	s.storeMu.Lock()
	defer s.storeMu.Unlock()
	if s.storeClosed {
		return ErrClosed
	}
	touched := map[uint64]*cachedFile[uint64]{}
	defer func() {
		for _, cf := range touched {
			s.idx.release(cf)
		}
	}()
	for _, m := range moves {
		cf, ok := touched[m.ledger]
		if !ok {
			var err error
			cf, _, err = s.idx.acquire(m.ledger, false)
			if errors.Is(err, fs.ErrNotExist) {
				continue // the ledger's index is gone: deleted meanwhile
			}
			if err != nil {
				return err
			}
			touched[m.ledger] = cf
		}
		if _, err := s.idx.swapSlot(cf, m.ledger, m.entry, m.from, m.to); err != nil {
			s.fail(fmt.Errorf("compaction index swap: %w", err))
			return err
		}
	}
	for _, cf := range touched {
		if err := cf.f.Sync(); err != nil {
			s.fail(fmt.Errorf("compaction index sync: %w", err))
			return err
		}
	}
	return nil
}
