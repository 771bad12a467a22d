package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// Store is a bookie's storage engine. All methods are safe for concurrent
// use.
//
// Write path: Add, Fence and Delete queue a record for the journal goroutine,
// which writes a group of records, fdatasyncs once, applies them to the write
// cache (from then on Read sees them) and completes them. A flusher moves the
// write cache to entry logs and index files and writes a checkpoint, after
// which old journal files are removed. A compactor rewrites entry logs that
// deletions have mostly emptied.
//
// Failure model: an I/O error while writing the journal or ledger storage
// (a failed fsync leaves the file's state unknown) stops the store from
// accepting writes: every later Add, Fence and Delete fails with that error.
// Reads keep working. Restarting (Close, Open) recovers from the journal.
type Store struct {
	cfg      Config
	fs       vfs.FS
	log      *slog.Logger
	indexDir string

	// subMu is read-held while a request is queued so Close can close the
	// queue; closed is set by Close.
	subMu    sync.RWMutex
	closed   bool
	queue    chan *request
	isClosed atomic.Bool

	// mu guards the in-memory state shared by the journal goroutine, the
	// flusher, the compactor and readers. It is never held across I/O.
	mu         sync.Mutex
	ledgers    map[uint64]*ledgerState
	active     *memtable
	flushing   *memtable     // frozen memtable being flushed, or nil
	flushDone  chan struct{} // closed when the current flush ends
	appliedPos journalPos    // journal position applied to the write cache
	// pendingDeletes counts, per ledger, deletes applied in memory whose
	// index file removal has not been flushed yet.
	pendingDeletes map[uint64]int
	failed         error

	// storeMu serializes changes to ledger storage: flushes and the
	// compactor's index swaps. Readers never take it.
	storeMu     sync.Mutex
	writer      *logWriter // the flusher's current entry log, or nil
	cpPos       journalPos // last durable checkpoint
	storeClosed bool
	// sealedInFlush holds logs sealed by the flush in progress. They become
	// compaction candidates only once the flush's index slots pointing into
	// them are durable: before that, compaction would see their entries as
	// unreferenced and drop them.
	sealedInFlush []*logInfo

	// compactMu serializes compaction passes; compactOut is the log they
	// copy into.
	compactMu  sync.Mutex
	compactOut *logWriter
	// sealedInPass holds compaction output logs sealed during the pass in
	// progress, published when the pass ends (after its last index swap).
	sealedInPass []*logInfo

	idx          *indexStore
	logs         *entryLogs
	jw           *journalWriter // owned by the journal goroutine
	journalBytes atomic.Int64

	flushKick      chan struct{}
	stopFlush      chan struct{}
	skipFinalFlush atomic.Bool // tests: stop like a crash
	compactCancel  context.CancelFunc
	journalDone    chan struct{}
	flusherDone    chan struct{}
	compactorDone  chan struct{}
}

// ledgerState is what the store keeps in memory per ledger (not per entry).
type ledgerState struct {
	fenced    bool
	lastEntry int64
	// skipIndex is set for a ledger re-created while the index file of its
	// deleted previous incarnation still exists: reads must not use it.
	skipIndex bool
}

// Usage is the disk usage of the store's two directories. Total and Free
// describe the filesystems; Used counts the store's own files.
type Usage struct {
	JournalTotal, JournalFree, JournalUsed uint64
	LedgerTotal, LedgerFree, LedgerUsed    uint64
}

// journalQueueSize bounds the requests waiting for the journal; Add blocks
// while it is full.
const journalQueueSize = 8192

// Open opens (creating if needed) the store in cfg's directories and replays
// the journal from the last checkpoint.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Store{
		cfg:            cfg,
		fs:             cfg.FS,
		log:            cfg.Logger,
		indexDir:       filepath.Join(cfg.LedgerDir, "index"),
		queue:          make(chan *request, journalQueueSize),
		ledgers:        map[uint64]*ledgerState{},
		active:         newMemtable(),
		pendingDeletes: map[uint64]int{},
		flushKick:      make(chan struct{}, 1),
		stopFlush:      make(chan struct{}),
		journalDone:    make(chan struct{}),
		flusherDone:    make(chan struct{}),
		compactorDone:  make(chan struct{}),
	}
	s.idx = newIndexStore(s.fs, s.indexDir)
	s.logs = newEntryLogs(s.fs, cfg.LedgerDir)
	start := time.Now()
	if err := s.open(); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.log.Info("storage opened", "journalDir", cfg.JournalDir, "ledgerDir", cfg.LedgerDir,
		"ledgers", len(s.ledgers), "took", time.Since(start))

	go s.journalLoop()
	go s.flushLoop()
	ctx, cancel := context.WithCancel(context.Background())
	s.compactCancel = cancel
	go s.compactLoop(ctx)
	return s, nil
}

func (s *Store) open() error {
	for _, dir := range []string{s.cfg.JournalDir, s.cfg.LedgerDir, s.indexDir} {
		if err := vfs.MkdirAllDurable(s.fs, dir); err != nil {
			return fmt.Errorf("storage: create %s: %w", dir, err)
		}
	}
	cp, err := readCheckpoint(s.fs, s.cfg.LedgerDir)
	if err != nil {
		return err
	}
	s.cpPos = cp.journal
	maxLog, err := s.logs.load(s.log)
	if err != nil {
		return fmt.Errorf("storage: load entry logs: %w", err)
	}
	s.logs.nextID.Store(max(maxLog+1, cp.nextLogID, 1))
	if err := s.loadLedgers(); err != nil {
		return err
	}
	lastJournal, err := s.replayJournal(cp)
	if err != nil {
		return err
	}
	s.jw, err = newJournalWriter(s.fs, s.cfg.JournalDir, lastJournal+1, s.cfg.JournalFileMaxBytes)
	if err != nil {
		return fmt.Errorf("storage: create journal file: %w", err)
	}
	s.journalBytes.Add(fileHeaderSize)
	// Everything before the new file is applied to the write cache, so the
	// next checkpoint can point at its start and let the replayed files go
	// (even if nothing is ever added).
	s.appliedPos = journalPos{s.jw.id, fileHeaderSize}
	return nil
}

func (s *Store) loadLedgers() error {
	ids, err := s.idx.list()
	if err != nil {
		return fmt.Errorf("storage: list index: %w", err)
	}
	removed := false
	for _, id := range ids {
		meta, ok, err := s.idx.load(id)
		if err != nil {
			return fmt.Errorf("storage: load index of ledger %d: %w", id, err)
		}
		if !ok {
			// Created by a flush that never completed; the journal still
			// has everything it was meant to hold.
			if err := s.fs.Remove(s.idx.path(id)); err != nil {
				return fmt.Errorf("storage: remove unfinished index file: %w", err)
			}
			removed = true
			continue
		}
		s.ledgers[id] = &ledgerState{fenced: meta.fenced, lastEntry: meta.lastEntry}
	}
	if removed {
		return s.fs.SyncDir(s.indexDir)
	}
	return nil
}

// Add makes the entry durable in the journal (group commit) and then calls
// done exactly once; done must not block. done(nil) is called only after the
// journal fdatasync, and the entry is visible to Read from just before. It
// is called from the journal goroutine, except when the add is refused up
// front (ErrClosed, ErrTooLarge, ErrEntryIDRange): then done runs before Add
// returns, on the caller's goroutine.
//
// data is retained: the caller must not modify it afterwards. A
// non-recovery add to a fenced ledger fails with ErrFenced; recovery adds are
// allowed. Adding an entry id that exists overwrites it. Add blocks while the
// journal queue is full.
func (s *Store) Add(ledgerID, entryID uint64, data []byte, recovery bool, done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	switch {
	case len(data) > s.cfg.MaxEntrySize:
		done(fmt.Errorf("ledger %d: add entry %d: %d bytes, limit %d: %w", ledgerID, entryID, len(data), s.cfg.MaxEntrySize, ErrTooLarge))
		return
	case entryID > MaxEntryID:
		done(fmt.Errorf("ledger %d: add entry %d: %w", ledgerID, entryID, ErrEntryIDRange))
		return
	}
	r := &request{kind: recAdd, ledger: ledgerID, entry: entryID, data: data, recovery: recovery, done: done}
	if err := s.submit(context.Background(), r); err != nil {
		done(fmt.Errorf("ledger %d: add entry %d: %w", ledgerID, entryID, err))
	}
}

func (s *Store) submit(ctx context.Context, r *request) error {
	s.subMu.RLock()
	defer s.subMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	select {
	case s.queue <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Fence marks the ledger fenced: later non-recovery adds fail with
// ErrFenced. It returns once the fence is durable. Fencing an unknown ledger
// creates it, empty and fenced.
func (s *Store) Fence(ctx context.Context, ledgerID uint64) error {
	if err := s.journalOp(ctx, recFence, ledgerID); err != nil {
		return fmt.Errorf("ledger %d: fence: %w", ledgerID, err)
	}
	return nil
}

// Delete removes the ledger; it returns once the delete is durable. Later
// reads fail with ErrNoLedger; compaction reclaims the space.
func (s *Store) Delete(ctx context.Context, ledgerID uint64) error {
	if err := s.journalOp(ctx, recDelete, ledgerID); err != nil {
		return fmt.Errorf("ledger %d: delete: %w", ledgerID, err)
	}
	return nil
}

func (s *Store) journalOp(ctx context.Context, kind uint8, ledgerID uint64) error {
	r := &request{kind: kind, ledger: ledgerID, result: make(chan error, 1)}
	if err := s.submit(ctx, r); err != nil {
		return err
	}
	select {
	case err := <-r.result:
		return err
	case <-ctx.Done():
		// The record may still become durable.
		return ctx.Err()
	}
}

// Fenced reports whether the ledger is fenced: whether a fence of it is
// durable. (Adds are refused from the moment the journal accepts a fence,
// slightly earlier.)
func (s *Store) Fenced(ledgerID uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.ledgers[ledgerID]
	return st != nil && st.fenced
}

// LastEntryID returns the highest entry id stored for the ledger, -1 if the
// ledger exists but holds no entry, or ErrNoLedger.
func (s *Store) LastEntryID(ledgerID uint64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.ledgers[ledgerID]
	if st == nil {
		return 0, fmt.Errorf("ledger %d: %w", ledgerID, ErrNoLedger)
	}
	return st.lastEntry, nil
}

// Read returns a copy of the entry's data. It fails with ErrNoLedger,
// ErrNoEntry, or a *CorruptionError (errors.Is ErrCorrupt) when the data on
// disk fails validation; it never returns unvalidated bytes. Read never
// waits for a journal or ledger storage fsync.
func (s *Store) Read(ledgerID, entryID uint64) ([]byte, error) {
	if s.isClosed.Load() {
		return nil, ErrClosed
	}
	s.mu.Lock()
	st := s.ledgers[ledgerID]
	if st == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("ledger %d: read entry %d: %w", ledgerID, entryID, ErrNoLedger)
	}
	d, ok := s.active.get(ledgerID, entryID)
	if !ok && s.flushing != nil {
		d, ok = s.flushing.get(ledgerID, entryID)
	}
	skip := st.skipIndex
	s.mu.Unlock()
	if ok {
		s.cfg.Observer.Read(true)
		return append([]byte(nil), d...), nil
	}
	if skip || entryID > MaxEntryID {
		return nil, fmt.Errorf("ledger %d: read entry %d: %w", ledgerID, entryID, ErrNoEntry)
	}
	for attempt := 0; ; attempt++ {
		loc, found, err := s.idx.lookup(ledgerID, entryID)
		if err != nil {
			return nil, fmt.Errorf("ledger %d: read entry %d: %w", ledgerID, entryID, err)
		}
		if !found {
			return nil, fmt.Errorf("ledger %d: read entry %d: %w", ledgerID, entryID, ErrNoEntry)
		}
		data, err := s.logs.read(loc, ledgerID, entryID)
		if errors.Is(err, errLogGone) {
			// Compaction moved the entry and removed the log after we read
			// the index: read the index again.
			if attempt < 3 {
				continue
			}
			err = &CorruptionError{File: s.logs.path(loc.log), Offset: loc.off, Ledger: ledgerID, Entry: entryID, Reason: "entry log named by the index is missing"}
		}
		if err != nil {
			return nil, fmt.Errorf("ledger %d: read entry %d: %w", ledgerID, entryID, err)
		}
		s.cfg.Observer.Read(false)
		return data, nil
	}
}

// Usage reports the disk usage of the journal and ledger directories.
func (s *Store) Usage() (Usage, error) {
	var u Usage
	var err error
	if u.JournalTotal, u.JournalFree, err = s.fs.Usage(s.cfg.JournalDir); err != nil {
		return Usage{}, fmt.Errorf("storage: journal dir usage: %w", err)
	}
	if u.LedgerTotal, u.LedgerFree, err = s.fs.Usage(s.cfg.LedgerDir); err != nil {
		return Usage{}, fmt.Errorf("storage: ledger dir usage: %w", err)
	}
	u.JournalUsed = uint64(max(0, s.journalBytes.Load()))
	u.LedgerUsed = uint64(max(0, s.logs.bytes.Load()+s.idx.bytes.Load()))
	return u, nil
}

// QueueDepths reports the requests waiting in the journal queue for a group
// commit, and the entries in the write cache waiting to be flushed to ledger
// storage (the active memtable plus the one being flushed).
func (s *Store) QueueDepths() (journal, flush int) {
	s.mu.Lock()
	flush = s.active.entries
	if s.flushing != nil {
		flush += s.flushing.entries
	}
	s.mu.Unlock()
	return len(s.queue), flush
}

// Close stops accepting requests, completes every queued one, flushes the
// write cache, writes a final checkpoint and stops all goroutines. Add after
// Close fails with ErrClosed.
func (s *Store) Close() error {
	s.subMu.Lock()
	if s.closed {
		s.subMu.Unlock()
		return ErrClosed
	}
	s.closed = true
	close(s.queue)
	s.subMu.Unlock()

	<-s.journalDone
	s.compactCancel()
	<-s.compactorDone
	close(s.stopFlush)
	<-s.flusherDone
	s.isClosed.Store(true)

	s.mu.Lock()
	err := s.failed
	s.mu.Unlock()
	s.closeFiles()
	if err != nil {
		return err
	}
	s.log.Info("storage closed")
	return nil
}

// closeFiles releases every file; used by Close and by a failed Open.
func (s *Store) closeFiles() {
	s.storeMu.Lock()
	s.storeClosed = true
	if s.writer != nil {
		s.writer.abandon()
		s.writer = nil
	}
	s.storeMu.Unlock()
	s.compactMu.Lock()
	if s.compactOut != nil {
		s.compactOut.abandon()
		s.compactOut = nil
	}
	s.compactMu.Unlock()
	if s.jw != nil {
		s.jw.close()
	}
	s.idx.close()
	s.logs.handles.close()
}

// Transient reports whether err is a shortage the process recovers from
// by itself, as opposed to a failing disk: no file descriptor left in the
// process (EMFILE) or the system (ENFILE). Storage never fails for it; it
// postpones what needed a new descriptor and tries again.
func Transient(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// fail stops the store from accepting writes after an I/O error.
func (s *Store) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLocked(err)
}

func (s *Store) failLocked(err error) {
	if s.failed == nil {
		s.failed = fmt.Errorf("storage: stopped accepting writes after an I/O error: %w", err)
		s.log.Error("storage failed; writes are refused until restart", "err", err)
	}
}

// ledgerLocked returns ledger's state, creating it.
func (s *Store) ledgerLocked(id uint64) *ledgerState {
	st := s.ledgers[id]
	if st == nil {
		st = &ledgerState{lastEntry: -1, skipIndex: s.pendingDeletes[id] > 0}
		s.ledgers[id] = st
	}
	return st
}

// applyLocked applies one durable journal record to the in-memory state and
// the active memtable. It is shared by the live path and replay.
func (s *Store) applyLocked(kind uint8, ledger, entry uint64, data []byte) {
	switch kind {
	case recAdd:
		st := s.ledgerLocked(ledger)
		s.active.put(ledger, entry, data)
		st.lastEntry = max(st.lastEntry, int64(entry))
	case recFence:
		s.ledgerLocked(ledger).fenced = true
		s.active.ledger(ledger).fenced = true
	case recDelete:
		delete(s.ledgers, ledger)
		s.active.drop(ledger)
		if s.flushing != nil {
			if ml := s.flushing.ledgers[ledger]; ml != nil {
				ml.dead = true
			}
		}
		if _, ok := s.active.deletes[ledger]; !ok {
			s.active.deletes[ledger] = struct{}{}
			s.pendingDeletes[ledger]++
		}
	}
}

// journalLoop is the journal goroutine: it gathers requests into groups,
// writes and syncs each group, applies it and completes its requests.
func (s *Store) journalLoop() {
	defer close(s.journalDone)
	defer s.jw.close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var batch []*request
	maxBytes := s.cfg.GroupCommitMaxBytes
	delay := s.cfg.GroupCommitMaxDelay
	for {
		r, ok := <-s.queue
		if !ok {
			return
		}
		batch = append(batch[:0], r)
		bytes := r.frameSize()
		open := true
		deadline := time.Now().Add(delay)
	gather:
		for bytes < maxBytes {
			select {
			case r, ok := <-s.queue:
				if !ok {
					open = false
					break gather
				}
				batch = append(batch, r)
				bytes += r.frameSize()
				continue
			default:
			}
			wait := time.Until(deadline)
			if delay <= 0 || wait <= 0 {
				break
			}
			timer.Reset(wait)
			select {
			case r, ok := <-s.queue:
				timer.Stop()
				if !ok {
					open = false
					break gather
				}
				batch = append(batch, r)
				bytes += r.frameSize()
			case <-timer.C:
				break gather
			}
		}
		s.commitBatch(batch)
		clear(batch)
		if !open {
			return
		}
	}
}

// Per-batch overlay of fences and deletes accepted but not yet applied, so
// requests later in the same batch see them.
const (
	overlayFenced  = 1
	overlayDeleted = 2
)

func (s *Store) commitBatch(batch []*request) {
	var overlay map[uint64]uint8
	s.mu.Lock()
	failed := s.failed
	for _, r := range batch {
		switch {
		case failed != nil:
			r.err = failed
		case r.kind == recAdd && !r.recovery:
			fenced := false
			if o, ok := overlay[r.ledger]; ok {
				fenced = o == overlayFenced
			} else if st := s.ledgers[r.ledger]; st != nil {
				fenced = st.fenced
			}
			if fenced {
				r.err = fmt.Errorf("ledger %d: add entry %d: %w", r.ledger, r.entry, ErrFenced)
			}
		case r.kind == recFence || r.kind == recDelete:
			if overlay == nil {
				overlay = map[uint64]uint8{}
			}
			overlay[r.ledger] = overlayFenced
			if r.kind == recDelete {
				overlay[r.ledger] = overlayDeleted
			}
		}
	}
	s.mu.Unlock()

	n := 0
	for _, r := range batch {
		if r.err == nil {
			s.jw.encode(r)
			n++
		}
	}
	var werr error
	if n > 0 {
		before, start := s.jw.size, time.Now()
		pos, err := s.jw.commit()
		s.journalBytes.Add(s.jw.size - before)
		if err == nil {
			s.cfg.Observer.JournalSynced(time.Since(start), n)
		}
		if err != nil {
			werr = err
			s.fail(fmt.Errorf("journal write: %w", err))
		} else {
			s.waitForCacheRoom()
			s.mu.Lock()
			for _, r := range batch {
				if r.err == nil {
					s.applyLocked(r.kind, r.ledger, r.entry, r.data)
				}
			}
			s.appliedPos = pos
			full := s.active.bytes >= s.cfg.WriteCacheMaxBytes && s.flushing == nil
			s.mu.Unlock()
			if full {
				s.kickFlush()
			}
		}
	}
	for _, r := range batch {
		err := r.err
		if err == nil && werr != nil {
			err = s.failedErr()
		}
		r.finish(err)
	}
	if n > 0 && werr == nil {
		// After the acks: a failed rotation only stops later batches.
		if rotated, err := s.jw.rotate(); err != nil {
			if Transient(err) {
				// The current file stays open and in use; the next batch
				// tries to rotate again.
				s.log.Warn("journal rotation postponed: out of file descriptors", "err", err)
			} else {
				s.fail(fmt.Errorf("journal rotation: %w", err))
			}
		} else if rotated {
			s.journalBytes.Add(fileHeaderSize)
		}
	}
}

// Failed returns the I/O error that stopped the store from accepting
// writes, or nil while it is healthy. Reads keep working after a failure;
// a restart recovers from the journal.
func (s *Store) Failed() error { return s.failedErr() }

func (s *Store) failedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// waitForCacheRoom holds the journal back (delaying acks) while the active
// memtable is full and the previous one is still being flushed: this is the
// write cache's bound.
func (s *Store) waitForCacheRoom() {
	for {
		s.mu.Lock()
		if s.failed != nil || s.flushing == nil || s.active.bytes < s.cfg.WriteCacheMaxBytes {
			s.mu.Unlock()
			return
		}
		ch := s.flushDone
		s.mu.Unlock()
		<-ch
	}
}

func (s *Store) kickFlush() {
	select {
	case s.flushKick <- struct{}{}:
	default:
	}
}
