package broker

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/replication"
)

// Synchronous replication (docs/failover.md, "Synchronous replication"):
// with a syncReplication policy, a client's publish is acknowledged once
// its entry is stored here and at least Regions other regions of the
// topic's replication clusters hold it too. A region holds an entry once
// the replicator worker streaming to it acknowledged it on the topic's
// replication cursor for that region (isobar.repl.<region>), which it
// does only after the remote broker stored the entry (quorum-written,
// fsync'd). So the replication stream itself carries the confirmations:
// nothing else crosses the WAN.
//
// syncQueue is the pure core: positions confirmed per remote in, held
// acknowledgements out, with the clock passed in. The topic drives it
// under syncRepl.mu and runs the acknowledgements it returns outside.

// syncWaiter is one held acknowledgement.
type syncWaiter struct {
	pos   mledger.Position
	since time.Time // when it arrived
	ack   func()
}

// syncQueue holds acknowledgements in log order until enough remotes
// confirmed their positions.
type syncQueue struct {
	regions  int                         // other regions to wait for (the policy's)
	fallback time.Duration               // 0: hold until confirmed
	durable  map[string]mledger.Position // per remote: the highest position it confirmed
	waiting  []syncWaiter
	// degraded: the fallback acknowledged entries the regions did not
	// confirm; acknowledgements are not held until they catch up with
	// degradedAt (the log's end when it happened).
	degraded      bool
	degradedSince time.Time
	degradedAt    mledger.Position
}

// horizon is the highest position at least n of remotes confirmed
// (ok false when fewer than n remotes are named or n is not positive).
func (q *syncQueue) horizon(remotes []string, n int) (mledger.Position, bool) {
	if n <= 0 || len(remotes) < n {
		return mledger.Position{}, false
	}
	ps := make([]mledger.Position, 0, len(remotes))
	for _, r := range remotes {
		p, ok := q.durable[r]
		if !ok {
			p = noPosition
		}
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b mledger.Position) int { return b.Compare(a) })
	return ps[n-1], true
}

// need is how many of remotes an entry waits for: the policy's number,
// or every remote when there are fewer.
func (q *syncQueue) need(remotes []string) int { return min(q.regions, len(remotes)) }

// confirm records that remote holds everything up to pos.
func (q *syncQueue) confirm(remote string, pos mledger.Position) {
	if cur, ok := q.durable[remote]; ok && pos.Compare(cur) <= 0 {
		return
	}
	if q.durable == nil {
		q.durable = map[string]mledger.Position{}
	}
	q.durable[remote] = pos
}

// hold queues w unless it need not wait; the acknowledgements due now
// are returned (w's among them when it need not wait).
func (q *syncQueue) hold(w syncWaiter, remotes []string) []func() {
	if q.degraded || q.need(remotes) == 0 {
		return append(q.releaseAll(), w.ack)
	}
	q.waiting = append(q.waiting, w)
	return q.release(remotes)
}

// release returns the acknowledgements of the waiters at or before the
// horizon, in order, and drops them from the queue.
func (q *syncQueue) release(remotes []string) []func() {
	n := q.need(remotes)
	if n == 0 {
		return q.releaseAll()
	}
	h, ok := q.horizon(remotes, n)
	if !ok {
		return nil
	}
	i := 0
	for i < len(q.waiting) && q.waiting[i].pos.Compare(h) <= 0 {
		i++
	}
	return q.take(i)
}

func (q *syncQueue) releaseAll() []func() { return q.take(len(q.waiting)) }

func (q *syncQueue) take(i int) []func() {
	if i == 0 {
		return nil
	}
	out := make([]func(), i)
	for j := range i {
		out[j] = q.waiting[j].ack
	}
	q.waiting = slices.Delete(q.waiting, 0, i)
	if len(q.waiting) == 0 {
		q.waiting = nil
	}
	return out
}

// expire falls back to asynchronous acknowledgements when the oldest
// waiter has waited the fallback time at now, counted from blocked
// instead when that is earlier (blockedSince: the regions it waits for
// were gone before it came): every waiter is released and the queue is
// degraded until the remotes reach end (the log's last position). fell
// reports that it happened now.
func (q *syncQueue) expire(now time.Time, end mledger.Position, blocked time.Time) (acks []func(), fell bool) {
	at, ok := q.nextExpiry(blocked)
	if !ok || now.Before(at) {
		return nil, false
	}
	q.degraded, q.degradedSince, q.degradedAt = true, now, end
	return q.releaseAll(), true
}

// recover ends a degraded period once the remotes the policy asks for
// hold everything up to where it began; it reports whether it ended now.
func (q *syncQueue) recover(remotes []string) bool {
	if !q.degraded {
		return false
	}
	if h, ok := q.horizon(remotes, q.need(remotes)); ok && h.Compare(q.degradedAt) >= 0 {
		q.degraded = false
		return true
	}
	return false
}

// nextExpiry is when the oldest waiter reaches the fallback time, counted
// from blocked when that is earlier than its arrival (false when there is
// nothing to time).
func (q *syncQueue) nextExpiry(blocked time.Time) (time.Time, bool) {
	if q.fallback <= 0 || q.degraded || len(q.waiting) == 0 {
		return time.Time{}, false
	}
	start := q.waiting[0].since
	if !blocked.IsZero() && blocked.Before(start) {
		start = blocked
	}
	return start.Add(q.fallback), true
}

// blockedSince is since when fewer of remotes than an entry needs could
// confirm it, given since when each gone remote has been unreachable
// (absent: reachable, as far as is known); zero while enough are
// reachable. A waiter's fallback counts from then if that is earlier
// than its arrival: the bound is on how long the regions have been
// unreachable, so an entry that arrives at a primary whose regions were
// gone for the bound already (a new primary after its only other region
// was lost) is not held for the bound again.
func (q *syncQueue) blockedSince(remotes []string, gone map[string]time.Time) time.Time {
	n := q.need(remotes)
	if n == 0 {
		return time.Time{}
	}
	var since []time.Time
	for _, r := range remotes {
		if t, ok := gone[r]; ok {
			since = append(since, t)
		}
	}
	if len(remotes)-len(since) >= n {
		return time.Time{}
	}
	// Enough were reachable until the (len(remotes)-n+1)-th went.
	slices.SortFunc(since, func(a, b time.Time) int { return a.Compare(b) })
	return since[len(remotes)-n]
}

// syncRepl is a topic's synchronous replication driver: the queue under
// its lock and the fallback timer.
type syncRepl struct {
	mu      sync.Mutex
	q       syncQueue
	timer   *time.Timer
	timerAt time.Time // when timer fires
	gen     uint64    // tells a stopped or replaced timer from the current one
	// remotes are the topic's other regions as of the last policy pass
	// (applySyncPolicy, which follows every change of them): read on every
	// publish and confirmation without the topic's lock.
	remotes []string
}

// applySyncPolicy starts or stops holding acknowledgements as the
// topic's policy says (at load and at every maintenance pass). The
// positions the remotes confirmed so far are read from the replication
// cursors; acknowledgements arriving meanwhile are merged in.
func (t *Topic) applySyncPolicy(ctx context.Context) {
	if t.ml == nil {
		return
	}
	t.mu.Lock()
	sr := t.policy.SyncReplication
	t.mu.Unlock()
	cur := t.srepl.Load()
	if sr == nil {
		if cur != nil && t.srepl.CompareAndSwap(cur, nil) {
			cur.mu.Lock()
			acks := cur.q.releaseAll()
			cur.stopTimerLocked()
			cur.mu.Unlock()
			runAll(acks)
			t.kickConsumers()
			t.b.log.Info("synchronous replication off", "topic", t.name.String())
		}
		return
	}
	remotes := t.remotes()
	if cur == nil {
		// Complete before it is published: syncHold reads it at once.
		cur = &syncRepl{remotes: remotes}
		cur.q.regions, cur.q.fallback = sr.Regions, time.Duration(sr.FallbackAfterSeconds)*time.Second
		if !t.srepl.CompareAndSwap(nil, cur) {
			cur = t.srepl.Load()
		}
	}
	for _, r := range remotes {
		c, err := t.ml.OpenCursor(ctx, replication.CursorName(r), mledger.Earliest)
		if err != nil {
			continue
		}
		md := c.MarkDelete()
		cur.mu.Lock()
		cur.q.confirm(r, md)
		cur.mu.Unlock()
	}
	cur.mu.Lock()
	cur.q.regions, cur.q.fallback = sr.Regions, time.Duration(sr.FallbackAfterSeconds)*time.Second
	cur.remotes = remotes
	acks := cur.q.release(remotes)
	ended := cur.q.recover(remotes)
	t.armSyncTimerLocked(cur)
	cur.mu.Unlock()
	runAll(acks)
	if ended {
		t.b.log.Info("synchronous replication caught up; publishes wait for the other regions again", "topic", t.name.String())
	}
}

// syncHold runs ack once the entry at pos is held by enough other regions
// (at once when the topic is not synchronous). A duplicate's
// acknowledgement (dup) waits for everything stored so far, since its
// first copy is somewhere in there. Called from an add's callback: it
// does not block.
func (t *Topic) syncHold(pos mledger.Position, dup bool, ack func()) {
	sr := t.srepl.Load()
	if sr == nil {
		ack()
		return
	}
	if dup {
		pos = t.ml.LastConfirmed()
	}
	now := t.b.deps.Now()
	sr.mu.Lock()
	remotes := sr.remotes
	cutOff := false
	if sr.q.degraded && !t.b.reachedStoreSince(time.Time{}) {
		// Degraded, and now cut off from the global store: this region
		// may be replaced any moment, so publishes wait for the other
		// regions again (the fallback needs the store).
		sr.q.degraded, cutOff = false, true
	}
	acks := sr.q.hold(syncWaiter{pos: pos, since: now, ack: ack}, remotes)
	t.armSyncTimerLocked(sr)
	sr.mu.Unlock()
	runAll(acks)
	if cutOff {
		t.b.log.Warn("synchronous replication: cut off from the global store while degraded; publishes wait for the other regions again", "topic", t.name.String())
	}
}

// syncConfirmed records that the replicator acknowledged everything up to
// pos on the replication cursor of remote (its region stored it) and
// releases what that completes.
func (t *Topic) syncConfirmed(cursor string, pos mledger.Position) {
	sr := t.srepl.Load()
	if sr == nil {
		return
	}
	remote, ok := strings.CutPrefix(cursor, replication.Prefix)
	if !ok {
		return
	}
	sr.mu.Lock()
	remotes := sr.remotes
	sr.q.confirm(remote, pos)
	acks := sr.q.release(remotes)
	ended := sr.q.recover(remotes)
	sr.mu.Unlock()
	runAll(acks)
	t.kickConsumers() // the dispatch limit may have moved
	if ended {
		t.b.log.Info("synchronous replication caught up; publishes wait for the other regions again", "topic", t.name.String())
	}
}

// armSyncTimerLocked arms the fallback timer for the oldest waiter, if
// the policy falls back (sr.mu held). While the regions the waiters need
// are not known to be gone it looks again every syncGoneRecheck, since
// they may be seen gone (from longer ago) meanwhile.
func (t *Topic) armSyncTimerLocked(sr *syncRepl) {
	now := t.b.deps.Now()
	blocked := t.syncBlockedSince(sr)
	at, ok := sr.q.nextExpiry(blocked)
	if !ok {
		sr.stopTimerLocked()
		return
	}
	if blocked.IsZero() {
		at = minTime(at, now.Add(syncGoneRecheck))
	}
	if sr.timer != nil {
		if !at.Before(sr.timerAt) {
			return // armed for then or earlier; it re-arms itself
		}
		sr.stopTimerLocked()
	}
	sr.gen++
	gen := sr.gen
	sr.timerAt = at
	sr.timer = time.AfterFunc(max(at.Sub(now), 0), func() { t.syncTick(sr, gen) })
}

// syncGoneRecheck is how often a fallback timer looks whether the regions
// its waiters need were seen gone.
const syncGoneRecheck = 100 * time.Millisecond

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// syncBlockedSince is the queue's blockedSince with the regions gone as
// this broker's gates see them (sr.mu held).
func (t *Topic) syncBlockedSince(sr *syncRepl) time.Time {
	if t.b.deps.Primary == nil || sr.q.fallback <= 0 {
		return time.Time{}
	}
	var gone map[string]time.Time
	for _, r := range sr.remotes {
		if since, ok := t.b.deps.Primary.GoneSince(r); ok {
			if gone == nil {
				gone = map[string]time.Time{}
			}
			gone[r] = since
		}
	}
	return sr.q.blockedSince(sr.remotes, gone)
}

func (sr *syncRepl) stopTimerLocked() {
	if sr.timer != nil {
		sr.timer.Stop()
		sr.timer = nil
	}
	sr.gen++
}

// syncTick is the fallback timer firing.
func (t *Topic) syncTick(sr *syncRepl, gen uint64) {
	sr.mu.Lock()
	if gen != sr.gen {
		sr.mu.Unlock()
		return
	}
	sr.timer = nil
	if len(sr.q.waiting) > 0 && !t.b.reachedStoreSince(sr.q.waiting[0].since) {
		// Cut off from the global store: this region may have been
		// replaced as the primary, so what it holds is not acknowledged
		// from its copy alone. Tried again once it reaches the store.
		sr.gen++
		gen := sr.gen
		sr.timer = time.AfterFunc(syncStoreRetry, func() { t.syncTick(sr, gen) })
		sr.mu.Unlock()
		return
	}
	acks, fell := sr.q.expire(t.b.deps.Now(), t.ml.LastConfirmed(), t.syncBlockedSince(sr))
	regions, fallback := sr.q.regions, sr.q.fallback
	t.armSyncTimerLocked(sr)
	sr.mu.Unlock()
	runAll(acks)
	if fell {
		t.kickConsumers()
		t.b.log.Warn("synchronous replication fell back to asynchronous: the other regions did not confirm in time",
			"topic", t.name.String(), "regions", regions, "fallbackAfter", fallback, "released", len(acks))
		t.b.metrics.syncFallback.Add(context.Background(), 1, metric.WithAttributes(attribute.String("isobar.cluster", t.b.cfg.Cluster), attribute.String("pulsar.namespace", t.name.NamespaceName())))
	}
}

// dispatchLimit is the last position consumers may be sent while the
// topic is synchronous: what enough other regions confirmed holding
// (Kafka's high watermark). An entry stored here but not there yet is not
// delivered: if this region failed now, the producer would send it again
// to the region that takes over, and a consumer would get it twice. ok is
// false when there is no limit (not synchronous, or degraded).
// Replication cursors read past it: they are what moves it.
func (t *Topic) dispatchLimit() (mledger.Position, bool) {
	sr := t.srepl.Load()
	if sr == nil {
		return mledger.Position{}, false
	}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if sr.q.degraded {
		return mledger.Position{}, false
	}
	return sr.q.horizon(sr.remotes, sr.q.need(sr.remotes))
}

// kickConsumers wakes the dispatchers of the topic's subscriptions but
// its replication cursors' (the dispatch limit moved).
func (t *Topic) kickConsumers() {
	t.mu.Lock()
	subs := make([]*subscription, 0, len(t.subs))
	for name, s := range t.subs {
		if !strings.HasPrefix(name, replication.Prefix) {
			subs = append(subs, s)
		}
	}
	t.mu.Unlock()
	for _, s := range subs {
		s.kick()
	}
}

// syncStoreRetry is how often a fallback that waits for the global store
// looks again.
const syncStoreRetry = 100 * time.Millisecond

// reachedStoreSince reports whether this broker reached the global store
// after since and still does (always, without fence gates: nothing can
// replace it).
func (b *Broker) reachedStoreSince(since time.Time) bool {
	if b.deps.Primary == nil {
		return true
	}
	return b.deps.Primary.ReachedSince(since)
}

// syncStats is the topic's synchronous replication state for its stats
// (nil when it is not synchronous).
func (t *Topic) syncStats() *adminapi.SyncReplicationStats {
	sr := t.srepl.Load()
	if sr == nil {
		return nil
	}
	now := t.b.deps.Now()
	sr.mu.Lock()
	defer sr.mu.Unlock()
	remotes := sr.remotes
	st := &adminapi.SyncReplicationStats{Regions: sr.q.regions, FallbackAfterSeconds: int(sr.q.fallback / time.Second), State: adminapi.SyncStateSync, Waiting: len(sr.q.waiting)}
	if len(sr.q.waiting) > 0 {
		st.OldestWaitMs = now.Sub(sr.q.waiting[0].since).Milliseconds()
	}
	if sr.q.degraded {
		st.State = adminapi.SyncStateDegraded
		st.DegradedSince = sr.q.degradedSince.UTC().Format(time.RFC3339Nano)
	}
	for _, r := range remotes {
		if p, ok := sr.q.durable[r]; ok {
			if st.Confirmed == nil {
				st.Confirmed = map[string]string{}
			}
			st.Confirmed[r] = FormatSourcePosition(p)
		}
	}
	return st
}

// stopSync drops the held acknowledgements of a closing topic: its
// producers are closed and resend to the next owner, which
// de-duplicates them (never acknowledged here without the regions).
func (t *Topic) stopSync() {
	sr := t.srepl.Load()
	if sr == nil {
		return
	}
	sr.mu.Lock()
	sr.q.waiting = nil
	sr.stopTimerLocked()
	sr.mu.Unlock()
}

// runAll runs the acknowledgements a queue released, in order.
func runAll(fs []func()) {
	for _, f := range fs {
		f()
	}
}
