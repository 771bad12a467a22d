package broker

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/wire"
)

// dedupCursor is the cursor whose properties hold the de-duplication
// snapshot (producer name → highest sequence id) and whose mark-delete
// position says up to where the snapshot covers the log.
const dedupCursor = "isobar.dedup"

// dedupSnapshotEvery is how many entries pass between snapshots (Pulsar's
// brokerDeduplicationEntriesInterval); the topic's snapshot interval
// (Broker.dedupSnapshotInterval) takes one sooner when fewer are written.
const dedupSnapshotEvery = 1000

// dedup is a topic's de-duplication state (Pulsar's message
// de-duplication): per producer name, the highest sequence id pushed
// (accepted for storing) and confirmed (stored), kept with the managed
// ledger as snapshots in the isobar.dedup cursor (its properties, and its
// mark-delete position saying up to where they cover the log), and
// loaded from the last snapshot and a replay of the entries after it.
// The fields are guarded by the topic's mu, but for load, write and
// interval.
type dedup struct {
	t *Topic
	// pushed and confirmed are nil until the state is loaded.
	pushed    map[string]int64
	confirmed map[string]int64
	cur       *mledger.Cursor // the isobar.dedup cursor, once loaded
	// sn is the progress towards the next snapshot (t.mu guards it),
	// made by the first entry stored (an idle topic keeps none).
	sn *dedupSnap
	// load serializes loading the state.
	load sync.Mutex
	// write serializes writing snapshots, so an older one never replaces
	// a newer one.
	write sync.Mutex
	// interval is Broker.dedupSnapshotInterval, nanoseconds.
	interval atomic.Int64
}

// dedupSnap is a topic's progress towards its next de-duplication
// snapshot.
type dedupSnap struct {
	since int64            // entries stored since the last snapshot
	last  mledger.Position // the last of them
	// timer takes a snapshot once the interval has passed since the
	// first entry after the last one (nil: none armed); gen tells a
	// timer that was replaced or stopped from the current one.
	timer *time.Timer
	gen   uint64
}

// crossRegion says whether producers' sequence ids carry across
// regions: in an active-standby namespace a producer that fails over to
// the new primary resends what it had pending with the same name and
// sequence ids, so the new primary drops what it already has from the
// old one by replication.
func (d *dedup) crossRegion() bool { return d.t.dedupCrossRegion() }

// dedupCrossRegion is dedup.crossRegion, without the state.
func (t *Topic) dedupCrossRegion() bool {
	return t.failover().Mode == policy.ActiveStandby
}

// dedupState returns t's de-duplication state, making it when t has none
// yet: an idle topic keeps none. Not with t.mu held.
func (t *Topic) dedupState() *dedup {
	if d := t.dd.Load(); d != nil {
		return d
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if d := t.dd.Load(); d != nil {
		return d
	}
	d := &dedup{t: t}
	// The snapshot interval of t's policy now; setPolicy sets it again
	// (after t.policy) once the state is made.
	d.interval.Store(int64(t.b.dedupSnapshotInterval(*t.policy)))
	t.dd.Store(d)
	return d
}

// replica says whether entries replicated from src are
// de-duplicated by their producers' sequence ids against what this topic
// stored, in an active-standby namespace: at a standby, those from the
// primary; at a primary that does not hold its fence (cut off, or taking
// over), all of them — after a partition heals, the new primary's stream
// may come before this region hears that it is no longer the primary.
// Not at the primary that writes: an old primary's late tail is stored
// there, or dropped by resentHere.
func (d *dedup) replica(src string) bool {
	t := d.t
	f := t.failover()
	switch {
	case f.Mode != policy.ActiveStandby:
		return false
	case f.Primary != t.b.cfg.Cluster:
		return src == f.Primary
	default:
		return t.b.checkPrimary(t.name) != nil
	}
}

// confirmStored records a persisted sequence id and snapshots now and then.
func (d *dedup) confirmStored(name string, seq int64, pos mledger.Position) {
	t := d.t
	t.mu.Lock()
	if seq > d.confirmed[name] {
		d.confirmed[name] = seq
	}
	t.mu.Unlock()
	d.stored(pos)
}

// loaded says whether the state is loaded.
func (d *dedup) loaded() bool {
	d.t.mu.Lock()
	defer d.t.mu.Unlock()
	return d.cur != nil
}

// stored counts an entry stored under de-duplication and snapshots
// the state (sequence ids and replication high-water marks) into the
// isobar.dedup cursor, whose mark-delete position then says up to where
// the snapshot covers the log: every dedupSnapshotEvery entries, and
// once the topic's snapshot interval has passed since the first entry
// after the last snapshot (a timer armed by that entry, so an idle
// topic holds none). Callbacks confirm in log order, so a snapshot taken
// at pos covers every entry up to pos.
func (d *dedup) stored(pos mledger.Position) {
	t := d.t
	t.mu.Lock()
	if d.sn == nil {
		d.sn = &dedupSnap{}
	}
	d.sn.since++
	d.sn.last = pos
	var snap map[string]string
	if d.sn.since >= dedupSnapshotEvery {
		snap = d.snapshotLocked()
	} else if d.sn.timer == nil && !t.closed {
		d.armTimerLocked(time.Duration(d.interval.Load()))
	}
	cur := d.cur
	t.mu.Unlock()
	if snap != nil {
		// Off the add callback: the callback must not block.
		go d.writeSnapshot(cur, snap, pos)
	}
}

// snapshotLocked takes the state to snapshot at the last entry stored and
// starts counting (and timing) afresh (t.mu held).
func (d *dedup) snapshotLocked() map[string]string {
	t := d.t
	if d.sn != nil {
		d.sn.since = 0
	}
	d.stopTimerLocked()
	snap := make(map[string]string, len(d.confirmed)+len(t.rs().replIn))
	for k, v := range d.confirmed {
		snap[k] = strconv.FormatInt(v, 10)
	}
	for src, st := range t.rs().replIn {
		if st.confirmed.Ledger >= 0 {
			snap[replication.Prefix+src] = FormatSourcePosition(st.confirmed)
		}
	}
	t.rs().epochs.appendProps(snap)
	return snap
}

// armTimerLocked arms the snapshot timer to fire after after (none
// when it is not positive; t.mu held).
func (d *dedup) armTimerLocked(after time.Duration) {
	if after <= 0 {
		return
	}
	if d.sn == nil {
		d.sn = &dedupSnap{}
	}
	d.sn.gen++
	gen := d.sn.gen
	d.sn.timer = time.AfterFunc(after, func() { d.tick(gen) })
}

// stopTimerLocked disarms the snapshot timer (t.mu held); one that
// is firing already finds itself replaced and does nothing.
func (d *dedup) stopTimerLocked() {
	if d.sn == nil {
		return // never armed
	}
	if d.sn.timer != nil {
		d.sn.timer.Stop()
		d.sn.timer = nil
	}
	d.sn.gen++
}

// tick is the snapshot timer of generation gen firing: a snapshot
// at the last entry stored, if any was since the last snapshot.
func (d *dedup) tick(gen uint64) {
	t := d.t
	t.mu.Lock()
	if d.sn == nil || gen != d.sn.gen || t.closed || d.cur == nil {
		t.mu.Unlock()
		return
	}
	d.sn.timer = nil
	if d.sn.since == 0 {
		t.mu.Unlock()
		return
	}
	pos := d.sn.last
	snap := d.snapshotLocked()
	cur := d.cur
	t.mu.Unlock()
	d.writeSnapshot(cur, snap, pos)
}

// setInterval applies a new snapshot interval: a timer armed with
// the old one is armed again with the new one, from now.
func (d *dedup) setInterval(iv time.Duration) {
	t := d.t
	if time.Duration(d.interval.Swap(int64(iv))) == iv {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if d.sn != nil && d.sn.timer != nil {
		d.stopTimerLocked()
		d.armTimerLocked(iv)
	}
}

// writeSnapshot stores snap, the state at pos, in the isobar.dedup
// cursor: its properties, then its mark-delete position. One at a time,
// and never over a snapshot of a later position. A failure leaves the
// previous snapshot in force (the next one covers more).
func (d *dedup) writeSnapshot(cur *mledger.Cursor, snap map[string]string, pos mledger.Position) {
	t := d.t
	d.write.Lock()
	defer d.write.Unlock()
	if pos.Compare(cur.MarkDelete()) <= 0 {
		return
	}
	// An epoch mark written since snap was taken (markEpoch, under
	// dedupWrite too) must not be lost.
	t.mu.Lock()
	t.rs().epochs.appendProps(snap)
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(t.b.ctx, 10*time.Second)
	defer cancel()
	if err := cur.SetProperties(ctx, snap); err == nil {
		_ = cur.AckCumulative(ctx, pos)
	}
}

// ensureLoaded loads the de-duplication state (producer sequence ids
// and replication high-water marks) unless it is loaded: the snapshot in
// the isobar.dedup cursor's properties, then a replay of every entry after
// its mark-delete position.
func (d *dedup) ensureLoaded(ctx context.Context) error {
	t := d.t
	d.load.Lock()
	defer d.load.Unlock()
	t.mu.Lock()
	loaded := d.cur != nil
	t.mu.Unlock()
	if loaded || t.ml == nil {
		return nil
	}
	c, err := t.ml.OpenCursor(ctx, dedupCursor, mledger.Earliest)
	if err != nil {
		return err
	}
	seqs := map[string]int64{}
	hwm := map[string]mledger.Position{}
	lastOwn := noPosition
	props := c.Properties()
	epochs, err := loadEpochFirsts(props)
	if err != nil {
		// Not fatal: without it a late copy of a resent message may be
		// stored twice, as before the state was kept.
		t.b.log.Warn("de-duplication state of the epoch unreadable; starting without it", "topic", t.name.String(), "err", err)
		epochs = epochFirsts{}
	}
	for k, v := range props {
		if isEpochFirstKey(k) {
			continue
		}
		if src, ok := strings.CutPrefix(k, replication.Prefix); ok {
			if p, err := ParseSourcePosition(v); err == nil {
				hwm[src] = p
			}
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			seqs[k] = n
		}
	}
	md := c.MarkDelete()
	from := mledger.Position{Ledger: md.Ledger, Entry: md.Entry + 1}
	crossRegion := d.crossRegion()
	for {
		es, next, err := t.ml.Read(ctx, from, 256)
		if err != nil {
			return fmt.Errorf("topic %s: de-duplication replay: %w", t.name, err)
		}
		for _, e := range es {
			meta, _, err := wire.DecodeEntry(e.Data)
			if err != nil {
				continue
			}
			if src, pos, ok, _ := sourcePosition(meta); ok {
				if old, seen := hwm[src]; !seen || pos.Compare(old) > 0 {
					hwm[src] = pos
				}
				if !crossRegion {
					continue
				}
			} else {
				lastOwn = e.Position
				epochs.replayed(e.Position, meta.GetProducerName(), int64(meta.GetSequenceId()))
			}
			seq := int64(max(meta.GetSequenceId(), meta.GetHighestSequenceId()))
			if seq > seqs[meta.GetProducerName()] {
				seqs[meta.GetProducerName()] = seq
			}
		}
		if len(es) == 0 {
			break
		}
		from = next
	}
	t.mu.Lock()
	d.cur = c
	d.pushed = seqs
	d.confirmed = maps.Clone(seqs)
	for src, p := range hwm {
		if t.rs().replIn == nil {
			t.rs().replIn = map[string]*replIn{}
		}
		t.rs().replIn[src] = newReplIn(p)
	}
	if lastOwn.Compare(t.rs().lastOwn) > 0 {
		t.rs().lastOwn = lastOwn
	}
	t.rs().epochs = epochs
	t.mu.Unlock()
	return nil
}
