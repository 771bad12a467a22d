package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/broker/compactor"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Compaction statuses, Pulsar's LongRunningProcessStatus.
const (
	CompactionNotRun  = "NOT_RUN"
	CompactionRunning = "RUNNING"
	CompactionSuccess = "SUCCESS"
	CompactionError   = "ERROR"
)

// ErrCompactionRunning: a compaction of the topic is already running
// (Pulsar's AlreadyRunningException, 409).
var ErrCompactionRunning = errkind.Sentinel(errkind.ErrConflict, "Compaction already in progress")

// CompactionStatus is the status of a topic's last compaction on this
// broker (Pulsar keeps it in memory too: NOT_RUN after a restart).
type CompactionStatus struct {
	Status    string
	LastError string
}

// topicCompaction is a topic's compaction: the run in progress, the last
// one's status and the compacted view that subscriptions reading
// compacted use.
type topicCompaction struct {
	// mu guards the fields below. Lock order: Topic.mu, then mu.
	mu      sync.Mutex
	running bool
	status  CompactionStatus
	cancel  context.CancelFunc
	done    chan struct{} // closed when the running compaction ends
	// view is the current compacted view; nil until first asked for
	// (loaded then from the compaction cursor) or when there is none.
	view   *compactor.View
	loaded bool // view reflects the stored state
}

// compaction is the topic's compaction state, made on first use (a
// million idle topics hold none).
func (t *Topic) compaction() *topicCompaction {
	if c := t.cmp.Load(); c != nil {
		return c
	}
	t.cmp.CompareAndSwap(nil, &topicCompaction{})
	return t.cmp.Load()
}

// compactionOptions shape the topic's compacted ledgers as its ledgers.
func (t *Topic) compactionOptions() compactor.Options {
	t.mu.Lock()
	pol := *t.policy
	t.mu.Unlock()
	c := ledgerConfig(t.b.cfg.Ledger, pol).WithDefaults()
	return compactor.Options{Ensemble: c.EnsembleSize, WriteQuorum: c.WriteQuorum, AckQuorum: c.AckQuorum, Logger: t.b.deps.Logger}
}

// startCompaction starts compacting the topic in the background;
// ErrCompactionRunning if a compaction is running.
func (t *Topic) startCompaction() error {
	if t.ml == nil {
		return fmt.Errorf("%w: a non-persistent topic cannot be compacted", errkind.ErrNotAllowed)
	}
	// t.mu is taken before c.mu, never under it (a subscription is made
	// under t.mu and may open the compacted view).
	if t.isClosed() {
		return fmt.Errorf("%w: topic %s is closing", ErrNotOwner, t.name)
	}
	opts := t.compactionOptions()
	opts.Switched = t.compactionSwitched
	c := t.compaction()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return ErrCompactionRunning
	}
	ctx, cancel := context.WithCancel(t.b.ctx)
	c.running, c.cancel, c.done = true, cancel, make(chan struct{})
	c.status = CompactionStatus{Status: CompactionRunning}
	done := c.done
	go func() {
		defer close(done)
		defer cancel()
		res, err := compactor.Compact(ctx, t.ml, t.b.deps.Ledgers, opts)
		st := CompactionStatus{Status: CompactionSuccess}
		switch {
		case err != nil:
			st = CompactionStatus{Status: CompactionError, LastError: err.Error()}
			t.b.log.Warn("compaction failed", "topic", t.name.String(), "err", err)
		case !res.State.Valid():
			st.Status = CompactionNotRun // an empty topic, as Pulsar says
		}
		c.mu.Lock()
		c.running, c.status = false, st
		c.mu.Unlock()
	}()
	return nil
}

// compactionSwitched adopts a new compaction state, before the previous
// compacted ledger is deleted: readers move to the new view.
func (t *Topic) compactionSwitched(st compactor.State) {
	c := t.compaction()
	c.mu.Lock()
	c.view, c.loaded = nil, false
	c.mu.Unlock()
	t.mu.Lock()
	subs := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	for _, s := range subs {
		s.kick()
	}
}

// compactionStatus is the status of the topic's compaction.
func (t *Topic) compactionStatus() CompactionStatus {
	c := t.cmp.Load()
	if c == nil {
		return CompactionStatus{Status: CompactionNotRun}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.Status == "" {
		return CompactionStatus{Status: CompactionNotRun}
	}
	return c.status
}

// stopCompaction cancels a running compaction and waits for it (the
// topic is closing).
func (t *Topic) stopCompaction() {
	c := t.cmp.Load()
	if c == nil {
		return
	}
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// compactionCursor returns the compaction cursor; nil when the topic was
// never compacted.
func (t *Topic) compactionCursor(ctx context.Context) (*mledger.Cursor, error) {
	if t.ml == nil || !slices.Contains(t.ml.Cursors(), compactor.CursorName) {
		return nil, nil
	}
	cur, err := t.ml.OpenExistingCursor(ctx, compactor.CursorName)
	if errors.Is(err, mledger.ErrNoCursor) {
		return nil, nil
	}
	return cur, err
}

// compactionState is the topic's stored compaction state.
func (t *Topic) compactionState(ctx context.Context) (compactor.State, error) {
	cur, err := t.compactionCursor(ctx)
	if err != nil || cur == nil {
		return compactor.NoState, err
	}
	return compactor.StateOf(cur.Properties())
}

// compactedView returns the topic's compacted view, opening it on first
// use; nil when the topic has none.
func (t *Topic) compactedView(ctx context.Context) (*compactor.View, error) {
	c := t.compaction()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded {
		return c.view, nil
	}
	st, err := t.compactionState(ctx)
	if err != nil {
		return nil, err
	}
	var v *compactor.View
	if st.Valid() {
		if v, err = compactor.OpenView(ctx, t.b.deps.Ledgers, st); err != nil {
			return nil, err
		}
	}
	c.view, c.loaded = v, true
	return v, nil
}

// compactionBacklog is what the automatic compaction compares with the
// threshold: the compaction cursor's backlog in bytes, or, before the
// first compaction, the size of the whole topic (Pulsar's estimate).
func (t *Topic) compactionBacklog(ctx context.Context) (int64, error) {
	cur, err := t.compactionCursor(ctx)
	if err != nil {
		return 0, err
	}
	if cur == nil {
		var size int64
		for _, l := range t.ml.Ledgers() {
			size += l.Size
		}
		return size, nil
	}
	_, bytes, _ := t.backlogBytes(cur)
	return bytes, nil
}

// maybeCompact starts a compaction when the topic's compaction threshold
// is set and the backlog compaction has not read exceeds it.
func (t *Topic) maybeCompact(ctx context.Context, threshold int64) error {
	if threshold <= 0 {
		return nil
	}
	c := t.compaction()
	c.mu.Lock()
	running := c.running
	c.mu.Unlock()
	if running {
		return nil
	}
	backlog, err := t.compactionBacklog(ctx)
	if err != nil {
		return fmt.Errorf("compaction threshold: %w", err)
	}
	if backlog <= threshold {
		return nil
	}
	t.b.log.Info("compaction threshold exceeded; compacting", "topic", t.name.String(), "backlogBytes", backlog, "threshold", threshold)
	if err := t.startCompaction(); err != nil && !errors.Is(err, ErrCompactionRunning) {
		return err
	}
	return nil
}

// deleteCompactedLedger deletes the compacted ledger of st once its topic
// is deleted (the managed ledger deletes only the topic's own ledgers).
func (t *Topic) deleteCompactedLedger(st compactor.State) {
	if !st.Valid() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := t.b.deps.Ledgers.Delete(ctx, uint64(st.Ledger)); err != nil {
		t.b.log.Warn("deleting a deleted topic's compacted ledger failed; it is orphaned", "topic", t.name.String(), "ledger", st.Ledger, "err", err)
	}
}

// checkReadCompacted refuses read_compacted where Pulsar does: on
// non-persistent topics, and on subscriptions with more than one active
// consumer (readers are non-durable Exclusive subscriptions).
func (t *Topic) checkReadCompacted(cmd *pb.CommandSubscribe) error {
	if !cmd.GetReadCompacted() {
		return nil
	}
	if t.ml == nil {
		return fmt.Errorf("%w: readCompacted is not allowed on non-persistent topic %s", errkind.ErrNotAllowed, t.name)
	}
	if st := cmd.GetSubType(); st != pb.CommandSubscribe_Exclusive && st != pb.CommandSubscribe_Failover {
		return fmt.Errorf("%w: readCompacted only allowed on failover or exclusive subscriptions", errkind.ErrNotAllowed)
	}
	return nil
}

// compactedStart is where a consumer reading compacted starts when it
// asked for want and would start at normal (want clamped to the log):
// at want, or the compacted view's first entry if that is later, when
// that is before normal and normal is the topic's first entry (entries
// of ledgers trimmed since compaction are only in the view); else at
// normal.
func (t *Topic) compactedStart(ctx context.Context, want, normal Position) Position {
	if first, ok := t.ml.FirstPosition(); ok && normal.Compare(first) > 0 {
		return normal
	}
	v, err := t.compactedView(ctx)
	if err != nil || v == nil {
		return normal
	}
	e, ok, err := v.First(ctx)
	if err != nil || !ok {
		return normal
	}
	if p := maxPosition(want, e.Position); p.Compare(normal) < 0 {
		return p
	}
	return normal
}

func maxPosition(a, b Position) Position {
	if a.Compare(b) > 0 {
		return a
	}
	return b
}

// startsEarliest reports whether a reader's start message id means the
// beginning of the topic.
func startsEarliest(id *pb.MessageIdData, initial pb.CommandSubscribe_InitialPosition) bool {
	if id == nil {
		return initial == pb.CommandSubscribe_Earliest
	}
	l, e := int64(id.GetLedgerId()), int64(id.GetEntryId())
	return l < 0 || e < 0 && l <= 0
}

// goneFromLog reports whether the entry at p is no longer in the topic's
// log (its ledger was trimmed).
func (t *Topic) goneFromLog(p Position) bool {
	first, ok := t.ml.FirstPosition()
	return !ok || p.Compare(first) < 0
}

// lastCompactedMessageID is GET_LAST_MESSAGE_ID for a consumer reading
// compacted: when the topic's last entry is within the compacted view,
// the view's last message (the last entry may have been compacted
// away), else last as given. Entry -1 says there is nothing to read.
func (t *Topic) lastCompactedMessageID(ctx context.Context, last Position, batch int32) (Position, int32, error) {
	v, err := t.compactedView(ctx)
	if err != nil || v == nil || last.Compare(v.Horizon()) > 0 {
		return last, batch, err
	}
	e, ok, err := v.Last(ctx)
	if err != nil {
		return last, batch, err
	}
	if !ok {
		return Position{Ledger: last.Ledger, Entry: -1}, -1, nil
	}
	batch = -1
	if meta, _, err := wire.DecodeEntry(e.Data); err == nil && meta.NumMessagesInBatch != nil {
		batch = meta.GetNumMessagesInBatch() - 1
		for i := batch; e.AckSet != nil && i >= 0; i-- {
			if w := int(i) / 64; w < len(e.AckSet) && e.AckSet[w]&(1<<(i%64)) != 0 {
				batch = i
				break
			}
		}
	}
	return e.Position, batch, nil
}

// readsCompacted reports whether a consumer of s reads compacted.
func (s *subscription) readsCompacted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.consumers {
		if k.compacted {
			return true
		}
	}
	return false
}

// intersectAckSets is the ack set of the messages both a and b leave
// (nil a: every message).
func intersectAckSets(a, b []int64) []int64 {
	if a == nil {
		return b
	}
	out := make([]int64, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] & b[i]
	}
	return out
}

// ownCursor reports whether a cursor is the broker's own rather than a
// subscription's: under ReservedPrefix, or the compaction cursor. Their
// states are never shipped to other regions (each region compacts its
// own copy of a topic).
func ownCursor(name string) bool {
	return strings.HasPrefix(name, ReservedPrefix) || name == compactor.CursorName
}
