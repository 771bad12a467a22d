package mledger

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/mledger/ledgers"
	"github.com/isobar-mq/isobar/errkind"
)

type addRequest struct {
	data  []byte
	cb    func(Position, error)
	chain *Chain
	// terminate makes the request a Terminate, ordered after the adds
	// queued before it (terminate.go).
	terminate bool
}

// ErrChainBroken fails an add of a Chain after an earlier add of the same
// chain failed. Persistence (retriable: the client resends).
var ErrChainBroken = errkind.Sentinel(errkind.ErrPersistence, "mledger: an earlier add of the chain failed")

// Chain links adds that must be stored without gaps: once one of them
// fails, every later add of the chain fails too (ErrChainBroken), even
// one that would have gone to a new ledger. Replicated entries use it, so
// that an entry that failed is never followed by a stored later one (the
// destination de-duplicates by the highest source position stored). A
// broken chain stays broken; start a new one once its adds have all
// completed.
type Chain struct{ broken atomic.Bool }

// NewChain returns an unbroken chain.
func NewChain() *Chain { return &Chain{} }

// Broken reports whether an add of the chain failed.
func (c *Chain) Broken() bool { return c.broken.Load() }

// AddEntryChainedAsync is AddEntryAsync for an add of chain c.
func (m *ManagedLedger) AddEntryChainedAsync(ctx context.Context, c *Chain, data []byte, cb func(Position, error)) {
	m.addAsync(ctx, addRequest{data: data, chain: c, cb: func(p Position, err error) {
		if err != nil {
			c.broken.Store(true)
		}
		cb(p, err)
	}})
}

// AddEntry appends data as the next entry and returns its position once an
// ack quorum of bookies has it. If ctx ends first the entry may still be
// written. data must not be modified afterwards (it may be kept to serve
// reads of the newest entries).
func (m *ManagedLedger) AddEntry(ctx context.Context, data []byte) (Position, error) {
	type result struct {
		p   Position
		err error
	}
	ch := make(chan result, 1)
	m.AddEntryAsync(ctx, data, func(p Position, err error) { ch <- result{p, err} })
	select {
	case r := <-ch:
		return r.p, r.err
	case <-ctx.Done():
		return Position{}, fmt.Errorf("mledger %s: add: %w", m.name, ctx.Err())
	}
}

// AddEntryAsync queues data as the next entry; cb gets its position once an
// ack quorum has it, or the error that failed it. Callbacks run in the order
// of the calls (for calls from one goroutine), one at a time, and must not
// block for long or call AddEntry (AddEntryAsync is fine). While
// Config.MaxPendingAdds adds are queued it blocks until there is room or ctx
// ends (then cb gets ctx's error on the calling goroutine). data must not be
// modified afterwards.
func (m *ManagedLedger) AddEntryAsync(ctx context.Context, data []byte, cb func(Position, error)) {
	m.addAsync(ctx, addRequest{data: data, cb: cb})
}

func (m *ManagedLedger) addAsync(ctx context.Context, r addRequest) {
	cb := r.cb
	m.addMu.RLock()
	defer m.addMu.RUnlock()
	if m.closing {
		cb(Position{}, fmt.Errorf("mledger %s: add: %w", m.name, ErrClosed))
		return
	}
	if err := m.fencedErr(); err != nil {
		cb(Position{}, err)
		return
	}
	if m.terminated.Load() && !r.terminate {
		cb(Position{}, fmt.Errorf("mledger %s: add: %w", m.name, ErrTerminated))
		return
	}
	// The queue is made on first use: an idle managed ledger holds none.
	// So is repair: only an issued add (which came through the queue)
	// sends to it.
	lv := m.live()
	lv.queueOnce.Do(func() {
		lv.queue = make(chan addRequest, m.cfg.Value().MaxPendingAdds)
		lv.repair = make(chan struct{}, 1)
	})
	select {
	case lv.queue <- r:
		m.kickDriver()
	case <-ctx.Done():
		cb(Position{}, fmt.Errorf("mledger %s: add: %w", m.name, ctx.Err()))
	}
}

// driverIdle is how long the driver waits for adds before it exits; the
// next add starts a new one. Idle topics keep no goroutine.
const driverIdle = 2 * time.Second

// kickDriver starts the driver goroutine unless one runs. Called after
// each enqueue: a driver exits only when it finds the queue empty under
// driverMu, so every queued add has a driver.
func (m *ManagedLedger) kickDriver() {
	m.l().driverMu.Lock()
	defer m.l().driverMu.Unlock()
	if m.driving || m.stopped {
		return
	}
	m.driving = true
	if m.l().stop == nil {
		m.l().stop = make(chan struct{})
	}
	m.l().drivers.Add(1)
	go m.run(m.l().stop)
}

// stopDrivers stops the driver for good (Close) and waits for it to
// return.
func (m *ManagedLedger) stopDrivers() {
	lv := m.lv.Load()
	if lv == nil {
		return // dormant: no driver ever ran
	}
	lv.driverMu.Lock()
	m.stopped = true
	if lv.stop != nil {
		close(lv.stop)
	}
	m.l().driverMu.Unlock()
	m.l().drivers.Wait()
}

// run is the driver: it issues queued adds to the current ledger in order
// and rolls over between two adds when needed. It returns when the queue
// stays empty for driverIdle, or when Close stops it (Close then issues
// what is left).
func (m *ManagedLedger) run(stop <-chan struct{}) {
	defer m.l().drivers.Done()
	idle := time.NewTimer(driverIdle)
	defer idle.Stop()
	for {
		select {
		case r := <-m.l().queue:
			m.issue(r)
			continue
		default:
		}
		idle.Reset(driverIdle)
		select {
		case r := <-m.l().queue:
			m.issue(r)
		case <-m.l().repair:
			m.repairBroken()
		case <-stop:
			m.l().driverMu.Lock()
			m.driving = false
			m.l().driverMu.Unlock()
			return
		case <-idle.C:
			m.l().driverMu.Lock()
			if len(m.l().queue) > 0 || len(m.l().repair) > 0 {
				m.l().driverMu.Unlock()
				continue
			}
			m.driving = false
			m.l().driverMu.Unlock()
			return
		}
	}
}

// needRollover reports whether the current ledger takes no more adds.
func (m *ManagedLedger) needRollover() bool {
	return m.l().w == nil || m.l().wBroken.Load() ||
		m.l().wEntries >= m.cfg.Value().MaxEntriesPerLedger ||
		m.l().wBytes >= m.cfg.Value().MaxLedgerSize ||
		m.deps.Now().Sub(time.Unix(0, m.l().wCreated)) >= m.cfg.Value().MaxLedgerAge
}

func (m *ManagedLedger) issue(r addRequest) {
	if err := m.fencedErr(); err != nil {
		r.cb(Position{}, err)
		return
	}
	if r.terminate {
		m.terminate(r)
		return
	}
	if m.terminated.Load() {
		m.failAdds([]addRequest{r}, ErrTerminated)
		return
	}
	roll := m.needRollover()
	// Checked after needRollover: a failed add marks its chain broken
	// before it marks the writer broken, so an add that goes to a new
	// ledger because of that failure sees the broken chain.
	if r.chain != nil && r.chain.broken.Load() {
		r.cb(Position{}, fmt.Errorf("mledger %s: add: %w", m.name, ErrChainBroken))
		return
	}
	if roll {
		if err := m.rollover(context.Background()); err != nil {
			r.cb(Position{}, fmt.Errorf("mledger %s: add: %w", m.name, err))
			return
		}
	}
	id := int64(m.l().w.ID())
	m.l().wEntries++
	m.l().wBytes += int64(len(r.data))
	m.l().inflight.Add(1)
	// The entry carries (piggybacked) a last-add-confirmed at least this;
	// once it is confirmed the bookies can serve reads up to it.
	lacAtIssue := m.l().w.LastAddConfirmed()
	m.l().w.AppendAsync(r.data, func(entry int64, err error) {
		defer m.l().inflight.Done()
		if err != nil {
			if errors.Is(err, ledger.ErrTooLarge) {
				// Refused before it was sent; the ledger is fine.
				m.failAdds([]addRequest{r}, err)
				return
			}
			m.l().wBroken.Store(true)
			// Not failed yet: the entry may be in the ledger (a bookie
			// had it); the driver closes the ledger and settles the add
			// by what the closed ledger holds. A fenced ledger too: a
			// recovery closed it (a new owner's, which fences us, or
			// automatic recovery's, after which we go on; closeWriter).
			m.l().failedMu.Lock()
			m.l().failed = append(m.l().failed, failedAdd{r: r, ledger: id, entry: entry})
			m.l().failedMu.Unlock()
			select {
			case m.l().repair <- struct{}{}:
			default:
			}
			m.kickDriver()
			return
		}
		p := Position{Ledger: id, Entry: entry}
		m.confirmed(p, r.data, lacAtIssue)
		m.noteChange()
		r.cb(p, nil)
	})
}

// confirmed records an acknowledged entry: the last confirmed position and
// the tail cache of the current ledger. readable is an entry id up to which
// the bookies are known to serve reads; the cache keeps at least every
// entry after it, and otherwise at most Config.TailCacheEntries entries
// and Config.TailCacheBytes bytes.
func (m *ManagedLedger) confirmed(p Position, data []byte, readable int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.Compare(m.lastConfirmed) > 0 {
		m.lastConfirmed = p
	}
	if p.Ledger != m.lastBytesLedger {
		m.lastBytesLedger, m.lastLedgerBytes = p.Ledger, 0
	}
	m.lastLedgerBytes += int64(len(data))
	defer m.wakeLocked()
	lv := m.live() // made by the add confirmed here
	tc := lv.tail
	if tc == nil {
		tc = &tailCache{}
		lv.tail = tc
	}
	if tc.ledger != p.Ledger || tc.first+int64(len(tc.entries)) != p.Entry {
		tc.ledger, tc.first, tc.entries, tc.readable, tc.size = p.Ledger, p.Entry, tc.entries[:0], -1, 0
	}
	tc.readable = max(tc.readable, readable)
	tc.entries = append(tc.entries, data)
	tc.size += int64(len(data))
	// Over either bound, drop the oldest entries the bookies can serve.
	over := len(tc.entries) - m.cfg.Value().TailCacheEntries
	size := tc.size
	for i := 0; i < len(tc.entries) && size > m.cfg.Value().TailCacheBytes; i++ {
		size -= int64(len(tc.entries[i]))
		over = max(over, i+1)
	}
	drop := min(over, int(tc.readable-tc.first+1))
	if drop > 0 {
		for _, d := range tc.entries[:drop] {
			tc.size -= int64(len(d))
		}
		clear(tc.entries[:drop])
		tc.entries = tc.entries[drop:]
		tc.first += int64(drop)
	}
}

// failedAdd is an add the current ledger failed. It is settled once the
// ledger is closed: a bookie may have stored it, and a closed ledger
// (recovered when its writer broke) may hold it.
type failedAdd struct {
	r      addRequest
	ledger int64
	entry  int64 // its entry id in the ledger; -1: never sent
}

// repairBroken closes a ledger whose writer broke, settles its failed
// adds and re-issues the others on a new ledger, without waiting for the
// next add. Driver only.
func (m *ManagedLedger) repairBroken() {
	if m.l().w == nil || !m.l().wBroken.Load() {
		return
	}
	if err := m.rollover(context.Background()); err != nil {
		m.logger().Warn("replacing a failed ledger", "err", err)
	}
}

// settleFailed completes the adds that failed on ledger ledgerID, now
// closed at md.LastEntry. An add the ledger kept (at or below its last
// entry: the writer's own close keeps what was acknowledged, a recovery
// what a quorum of bookies has) succeeds at its position, exactly as if
// its acknowledgement had arrived; the others are returned, in order, to
// be issued again on the next ledger. So a bookie failure that the
// ensemble cannot absorb costs producers a pause, never an error and never
// a message stored twice. Driver only, after the ledger's callbacks ran.
func (m *ManagedLedger) settleFailed(ledgerID int64, md ledger.Metadata) (again []addRequest) {
	for _, f := range m.takeFailed() {
		if f.ledger == ledgerID && f.entry >= 0 && f.entry <= md.LastEntry {
			p := Position{Ledger: f.ledger, Entry: f.entry}
			m.confirmed(p, f.r.data, md.LastEntry)
			m.noteChange()
			f.r.cb(p, nil)
			continue
		}
		again = append(again, f.r)
	}
	return again
}

// takeFailed removes and returns the failed adds.
func (m *ManagedLedger) takeFailed() []failedAdd {
	m.l().failedMu.Lock()
	defer m.l().failedMu.Unlock()
	f := m.l().failed
	m.l().failed = nil
	return f
}

// failAdds fails adds with err (their chains break).
func (m *ManagedLedger) failAdds(adds []addRequest, err error) {
	for _, r := range adds {
		if r.chain != nil {
			r.chain.broken.Store(true)
		}
		r.cb(Position{}, fmt.Errorf("mledger %s: add: %w", m.name, err))
	}
}

// failAllFailed fails every failed add with err.
func (m *ManagedLedger) failAllFailed(err error) {
	var adds []addRequest
	for _, f := range m.takeFailed() {
		adds = append(adds, f.r)
	}
	m.failAdds(adds, err)
}

// rollover closes the current ledger (waiting for its callbacks, so the
// order of callbacks holds across ledgers), settles the adds it failed,
// creates the next ledger, records both in one CAS and issues the failed
// adds the closed ledger did not keep again, first. A close the metadata
// could not record (the CAS failed) is recorded by the next rollover:
// until then the list says the ledger is open, and with the entry count
// it had, readers would see it empty once another ledger follows it.
// Driver only.
func (m *ManagedLedger) rollover(ctx context.Context) error {
	justClosed := m.l().w != nil
	var again []addRequest
	if m.l().w != nil {
		old := m.l().w
		md, err := m.closeWriter(ctx, old)
		if err != nil {
			m.failAllFailed(err)
			return fmt.Errorf("rollover: %w", err)
		}
		m.l().unrecorded = &LedgerInfo{ID: int64(old.ID()), Entries: md.LastEntry + 1, Size: int64(md.Length), State: LedgerClosed, Closed: m.deps.Now().UnixMilli()}
		again = m.settleFailed(int64(old.ID()), md)
		m.l().w = nil
	}
	closed := m.l().unrecorded
	w, err := m.createLedger(ctx)
	if err != nil {
		m.failAdds(again, err)
		if justClosed {
			// Record the close anyway so the list stays exact. (An older
			// unrecorded close waits for a rollover that gets a ledger:
			// until one follows it, readers see its entries.)
			if uerr := m.update(ctx, func(t *topicMeta) error { return setLast(t, *closed) }); uerr != nil {
				return uerr
			}
			m.l().unrecorded = nil
		}
		return fmt.Errorf("rollover: %w", err)
	}
	err = m.update(ctx, func(t *topicMeta) error {
		if closed != nil {
			if err := setLast(t, *closed); err != nil {
				return err
			}
		}
		t.Ledgers = append(t.Ledgers, LedgerInfo{ID: int64(w.ID()), State: LedgerOpen})
		return nil
	})
	if err != nil {
		m.discardWriter(w)
		m.failAdds(again, err)
		return fmt.Errorf("rollover: %w", err)
	}
	m.l().unrecorded = nil
	m.setWriter(w)
	if closed != nil {
		m.logger().Debug("rolled over", "closed", closed.ID, "entries", closed.Entries, "new", w.ID(), "reissued", len(again))
	}
	for _, r := range again {
		m.issue(r)
	}
	return nil
}

// setLast replaces the last ledger of the list, which must be l's.
func setLast(t *topicMeta, l LedgerInfo) error {
	n := len(t.Ledgers)
	if n == 0 || t.Ledgers[n-1].ID != l.ID {
		return fmt.Errorf("%w: ledger %d is no longer the last of the list", ErrFenced, l.ID)
	}
	t.Ledgers[n-1] = l
	return nil
}

// closeWriter closes w and waits for its callbacks. If the writer broke (an
// add failed and it stopped) the ledger is recovered instead, which fences
// and closes it at the last entry a quorum has. Our ledger fenced by
// someone else fences the managed ledger when the topic's metadata changed
// too (a new owner opened it); when it did not, the fence was automatic
// recovery's (the auditor closes an open ledger left on a lost bookie,
// docs/ledger.md "Automatic recovery"), and the closed ledger is taken as
// if this writer had closed it: the managed ledger rolls over and goes
// on. It returns the closed ledger's metadata. Driver only (or Close
// after the driver).
func (m *ManagedLedger) closeWriter(ctx context.Context, w ledgers.Writer) (ledger.Metadata, error) {
	err := w.Close(ctx)
	m.l().inflight.Wait()
	if err == nil {
		// A writer aborted earlier (its client closed) "closes" without
		// closing the ledger: trust only metadata that says closed.
		if md := w.Metadata(); md.State == ledger.StateClosed {
			m.l().w = nil
			return md, nil
		}
		err = fmt.Errorf("ledger %d: writer stopped with the ledger still open", w.ID())
	}
	if errors.Is(err, ledger.ErrFenced) {
		owner, oerr := m.stillOwner(ctx)
		if oerr != nil {
			return ledger.Metadata{}, fmt.Errorf("close ledger %d: %w; %w", w.ID(), err, oerr)
		}
		if !owner {
			m.l().w = nil
			return ledger.Metadata{}, m.setFenced(err)
		}
		m.logger().Info("the ledger was fenced by a recovery while the topic is still ours (automatic recovery); rolling over", "ledger", w.ID())
	} else {
		m.logger().Warn("closing the ledger failed; recovering it", "ledger", w.ID(), "err", err)
	}
	md, rerr := m.deps.Ledgers.Recover(ctx, w.ID())
	if rerr != nil {
		return ledger.Metadata{}, fmt.Errorf("close ledger %d: %w; recover it: %w", w.ID(), err, rerr)
	}
	m.l().w = nil
	return md, nil
}
