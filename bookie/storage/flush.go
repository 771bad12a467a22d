package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// flushLoop is the flusher goroutine: it flushes when the write cache is
// full, every FlushInterval, and a last time on Close. A flush that failed
// for a transient reason (no file descriptor left) is tried again after a
// short, growing delay.
func (s *Store) flushLoop() {
	defer close(s.flusherDone)
	t := time.NewTicker(s.cfg.FlushInterval)
	defer t.Stop()
	var retry <-chan time.Time
	backoff := 50 * time.Millisecond
	var warned time.Time // the last "postponed" warning: at most one per 5s
	for {
		select {
		case <-s.stopFlush:
			if s.skipFinalFlush.Load() {
				return
			}
			if err := s.flush(); err != nil {
				s.log.Error("final flush failed", "err", err)
			}
			s.sealWriter()
			return
		case <-t.C:
		case <-s.flushKick:
		case <-retry:
		}
		retry = nil
		err := s.flush()
		switch {
		case err == nil:
			if !warned.IsZero() {
				s.log.Info("flush resumed")
				warned = time.Time{}
			}
			backoff = 50 * time.Millisecond
		case Transient(err):
			if time.Since(warned) > 5*time.Second {
				s.log.Warn("flush postponed: out of file descriptors; retrying", "err", err, "in", backoff)
				warned = time.Now()
			}
			retry = time.After(backoff)
			backoff = min(2*backoff, 2*time.Second)
		case !errors.Is(err, ErrClosed):
			s.log.Error("flush failed", "err", err)
		}
	}
}

// sealWriter seals the flusher's entry log on Close so the next Open does
// not have to scan it.
func (s *Store) sealWriter() {
	s.storeMu.Lock()
	defer s.storeMu.Unlock()
	if s.writer == nil || s.failedErr() != nil {
		return
	}
	info, err := s.writer.seal()
	if err != nil {
		s.log.Warn("sealing entry log failed; it will be scanned at the next start", "log", s.writer.id, "err", err)
		s.writer.abandon()
	} else {
		s.logs.addSealed(info)
	}
	s.writer = nil
}

// flush moves the write cache into ledger storage and checkpoints:
//
//  1. freeze the active memtable together with the journal position it
//     covers;
//  2. remove the index files of ledgers deleted in it;
//  3. append its entries to the entry log, ledger by ledger in id order and
//     entry by entry, and sync the log;
//  4. write their index slots and fence flags, sync the index files and the
//     index directory;
//  5. drop the frozen memtable (reads now go to the index);
//  6. write the checkpoint durably, then remove journal files wholly before
//     it.
//
// Any I/O error fails the store: the frozen memtable stays readable and the
// journal still holds everything, so a restart recovers. Running out of
// file descriptors (EMFILE, ENFILE) does not: the frozen memtable stays
// frozen and readable, writers wait for cache room, and the next flush
// writes it again (writing a snapshot twice is what a crash and a
// journal replay do anyway).
func (s *Store) flush() error {
	s.storeMu.Lock()
	defer s.storeMu.Unlock()
	if s.storeClosed {
		return ErrClosed
	}
	s.mu.Lock()
	if s.failed != nil {
		err := s.failed
		s.mu.Unlock()
		return err
	}
	if s.flushing != nil {
		// A flush postponed for lack of descriptors: write that one.
		snap := s.flushing
		s.mu.Unlock()
		return s.writeFrozen(snap)
	}
	if s.active.empty() && s.appliedPos == s.cpPos {
		s.mu.Unlock()
		return nil
	}
	snap := s.active
	snap.pos = s.appliedPos
	s.active = newMemtable()
	s.flushing = snap
	s.flushDone = make(chan struct{})
	s.mu.Unlock()
	return s.writeFrozen(snap)
}

// writeFrozen writes the frozen memtable snap (s.flushing) to ledger
// storage and checkpoints. storeMu held.
func (s *Store) writeFrozen(snap *memtable) error {
	start := time.Now()
	entries, err := s.writeSnapshot(snap)

	s.mu.Lock()
	if err != nil && Transient(err) {
		s.mu.Unlock()
		return fmt.Errorf("flush: %w", err)
	}
	if err != nil {
		s.failLocked(fmt.Errorf("flush: %w", err))
		err = s.failed
	} else {
		s.flushing = nil
		for l := range snap.deletes {
			if s.pendingDeletes[l]--; s.pendingDeletes[l] <= 0 {
				delete(s.pendingDeletes, l)
				if st := s.ledgers[l]; st != nil {
					st.skipIndex = false
				}
			}
		}
	}
	close(s.flushDone)
	s.mu.Unlock()
	if err != nil {
		return err
	}

	cp := checkpoint{valid: true, journal: snap.pos, nextLogID: s.logs.nextID.Load()}
	if err := writeCheckpoint(s.fs, s.cfg.LedgerDir, cp); err != nil {
		if Transient(err) {
			// The data is in ledger storage; only the checkpoint lags
			// (a restart replays a little more journal). The next flush
			// writes it.
			s.log.Warn("checkpoint postponed: out of file descriptors", "err", err)
			return nil
		}
		s.fail(fmt.Errorf("write checkpoint: %w", err))
		return s.failedErr()
	}
	s.cpPos = snap.pos
	s.cfg.Observer.Flushed(time.Since(start))
	s.trimJournal(snap.pos.file)
	s.log.Debug("flushed", "entries", entries, "bytes", snap.bytes, "deletes", len(snap.deletes),
		"checkpointFile", snap.pos.file, "checkpointOffset", snap.pos.off, "took", time.Since(start))
	return nil
}

// isDead reports whether ledger was deleted after snap was frozen.
func (s *Store) isDead(ml *memLedger) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ml.dead
}

func (s *Store) writeSnapshot(snap *memtable) (int, error) {
	dirDirty := false
	// Deletes first: whatever the table holds for a deleted ledger came
	// after the delete.
	dels := sortedKeys(snap.deletes)
	for _, l := range dels {
		if err := s.idx.remove(l); err != nil {
			return 0, fmt.Errorf("remove index of ledger %d: %w", l, err)
		}
		dirDirty = true
	}

	type run struct {
		ledger uint64
		ml     *memLedger
		ids    []uint64
		locs   []logLoc
	}
	var runs []run
	n := 0
	for _, l := range sortedKeys(snap.ledgers) {
		ml := snap.ledgers[l]
		if s.isDead(ml) {
			continue
		}
		r := run{ledger: l, ml: ml, ids: sortedKeys(ml.entries)}
		r.locs = make([]logLoc, len(r.ids))
		for i, e := range r.ids {
			if err := s.rotateWriterIfFull(); err != nil {
				return 0, err
			}
			loc, err := s.writer.append(l, e, ml.entries[e])
			if err != nil {
				return 0, fmt.Errorf("write entry log: %w", err)
			}
			r.locs[i] = loc
		}
		runs = append(runs, r)
		n += len(r.ids)
	}
	if s.writer != nil {
		if err := s.writer.sync(); err != nil {
			return 0, fmt.Errorf("sync entry log: %w", err)
		}
	}

	var touched []*cachedFile[uint64]
	defer func() {
		for _, cf := range touched {
			s.idx.release(cf)
		}
	}()
	for _, r := range runs {
		if s.isDead(r.ml) {
			continue
		}
		cf, created, err := s.idx.acquire(r.ledger, true)
		if err != nil {
			return 0, fmt.Errorf("open index of ledger %d: %w", r.ledger, err)
		}
		touched = append(touched, cf)
		dirDirty = dirDirty || created
		if r.ml.fenced {
			if err := s.idx.setFenced(cf, r.ledger); err != nil {
				return 0, fmt.Errorf("fence ledger %d in index: %w", r.ledger, err)
			}
		}
		// A ledger's slots in one read and one write when its ids are dense
		// enough (striping leaves small gaps); else each consecutive run
		// with one write.
		if len(r.ids) == 0 {
			continue
		}
		if span := r.ids[len(r.ids)-1] - r.ids[0] + 1; span <= 2*uint64(len(r.ids))+64 {
			if err := s.idx.writeSlotsSpan(cf, r.ledger, r.ids, r.locs); err != nil {
				return 0, fmt.Errorf("write index of ledger %d: %w", r.ledger, err)
			}
			continue
		}
		for i := 0; i < len(r.ids); {
			j := i + 1
			for j < len(r.ids) && r.ids[j] == r.ids[j-1]+1 {
				j++
			}
			if err := s.idx.writeSlots(cf, r.ledger, r.ids[i], r.locs[i:j]); err != nil {
				return 0, fmt.Errorf("write index of ledger %d: %w", r.ledger, err)
			}
			i = j
		}
	}
	for _, cf := range touched {
		if err := cf.f.Sync(); err != nil {
			return 0, fmt.Errorf("sync index of ledger %d: %w", cf.key, err)
		}
	}
	if dirDirty {
		if err := s.fs.SyncDir(s.indexDir); err != nil {
			return 0, fmt.Errorf("sync index dir: %w", err)
		}
	}
	// Every slot pointing into the logs this flush sealed is durable now:
	// they may be compacted.
	for _, info := range s.sealedInFlush {
		s.logs.addSealed(info)
	}
	s.sealedInFlush = nil
	return n, nil
}

// rotateWriterIfFull seals the current entry log once it reaches
// EntryLogMaxBytes and starts a new one (or starts the first one).
func (s *Store) rotateWriterIfFull() error {
	if s.writer != nil && s.writer.end() < s.cfg.EntryLogMaxBytes {
		return nil
	}
	if s.writer != nil {
		info, err := s.writer.seal()
		if err != nil {
			return fmt.Errorf("seal entry log %d: %w", s.writer.id, err)
		}
		s.sealedInFlush = append(s.sealedInFlush, info)
		s.writer = nil
	}
	w, err := newLogWriter(s.fs, s.cfg.LedgerDir, s.logs.allocID(), &s.logs.bytes)
	if err != nil {
		return fmt.Errorf("create entry log: %w", err)
	}
	s.writer = w
	return nil
}

// trimJournal removes journal files wholly before the checkpoint's file.
// Failures are only logged: a leftover file is removed at the next Open.
func (s *Store) trimJournal(before uint64) {
	ids, err := listSeqFiles(s.fs, s.cfg.JournalDir, "journal-", ".log")
	if err != nil {
		s.log.Warn("listing journal files failed", "err", err)
		return
	}
	// Rename first (cheap, atomic): replay no longer sees the file. Then
	// drop the data in steps (dropGradually): unlinking a whole 256 MiB
	// journal at once held the disk for ~300 ms, stalling the journal's
	// fdatasyncs behind it (docs/BENCHMARKS.md).
	renamed := 0
	for _, id := range ids {
		if id >= before {
			break
		}
		name := filepath.Join(s.cfg.JournalDir, journalName(id))
		fi, serr := s.fs.Stat(name)
		if err := s.fs.Rename(name, name+trimSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("removing journal file failed", "file", name, "err", err)
			break
		}
		if serr == nil {
			s.journalBytes.Add(-fi.Size())
		}
		renamed++
	}
	if renamed > 0 {
		if err := s.fs.SyncDir(s.cfg.JournalDir); err != nil {
			s.log.Warn("syncing journal dir failed", "err", err)
			return
		}
	}
	// This trim's files and any an earlier trim left behind.
	names, err := s.fs.List(s.cfg.JournalDir)
	if err != nil {
		return
	}
	for _, n := range names {
		if strings.HasSuffix(n, trimSuffix) {
			s.dropGradually(filepath.Join(s.cfg.JournalDir, n))
		}
	}
}

// trimSuffix marks a journal file being deleted.
const trimSuffix = ".trim"

// trimStep is how much of a file dropGradually frees at a time.
const trimStep = 8 << 20

// dropGradually shrinks a file in trimStep steps, then removes it, so the
// filesystem frees its blocks in small transactions that other writers'
// syncs can pass between. Errors are logged; a leftover is retried at the
// next trim.
func (s *Store) dropGradually(name string) {
	f, err := s.fs.OpenAppend(name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("opening a trimmed journal file failed", "file", name, "err", err)
		}
		return
	}
	fi, err := f.Stat()
	if err == nil {
		for size := fi.Size() - trimStep; size > 0; size -= trimStep {
			if err = f.Truncate(size); err != nil {
				break
			}
			time.Sleep(time.Millisecond) // let the journal's syncs in
		}
	}
	f.Close()
	if err != nil {
		s.log.Warn("shrinking a trimmed journal file failed", "file", name, "err", err)
	}
	if err := s.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("removing journal file failed", "file", name, "err", err)
	}
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
