package broker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/broker/dynconfig"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// The deletion of inactive topics (Pulsar's inactive topic policies), run
// by the maintenance loop on the loaded persistent topics. A topic is
// deleted when its policy in force (its own, else its namespace's, else
// the region's dynamic settings brokerDeleteInactiveTopics*) allows it
// and:
//   - it has no producer and no consumer;
//   - nothing has been published to it, and no producer or consumer has
//     come or gone, for longer than the policy's duration (counted from
//     when the topic was loaded here at the earliest);
//   - its retention does not keep it (unlimited retention time, or a
//     retention time not yet passed since it was last active, as Pulsar's
//     shouldTopicBeRetained);
//   - by the mode: it has no subscriptions, or every subscription has
//     caught up (no backlog);
//   - it is not replicated to another region (docs/decisions.md,
//     "Inactive topics are deleted in one region only, never replicated
//     ones").
// A partition goes only when every partition of its partitioned topic
// qualifies: each owner reports its qualifying partitions in the region's
// metadata store (inactivePartitionKey), and deletes its own once the
// others are reported (or gone); the last deletion removes the
// partitioned topic's record too.

// inactivePolicy is the inactive topic policy in force for a topic of
// policy pol: whether deletion is on, its mode and after how long.
func (b *Broker) inactivePolicy(pol NamespacePolicy) (on bool, mode string, after time.Duration) {
	d := b.dynamic()
	mode = d.String(dynconfig.DeleteInactiveTopicsMode, policy.DeleteWhenNoSubscriptions)
	if ip := pol.Inactive; ip != nil {
		if ip.InactiveTopicDeleteMode != "" {
			mode = ip.InactiveTopicDeleteMode
		}
		return ip.DeleteWhileInactive, mode, time.Duration(ip.MaxInactiveDurationSeconds) * time.Second
	}
	secs, ok := d.Int(dynconfig.DeleteInactiveTopicsMaxInactiveSeconds)
	if !ok {
		secs = 60
	}
	return d.Bool(dynconfig.DeleteInactiveTopicsEnabled, false), mode, time.Duration(secs) * time.Second
}

// touch records that the topic was active now (a producer or consumer
// came or went).
func (t *Topic) touch() {
	t.activeAt.Store(t.b.deps.Now().UnixNano())
}

// lastActive is when the topic was last active: loaded here, a message
// published, a producer or consumer come or gone.
func (t *Topic) lastActive() time.Time {
	last := t.loadedAt()
	if ms := t.lastPublish.Load(); ms > 0 {
		if p := time.UnixMilli(ms); p.After(last) {
			last = p
		}
	}
	if ns := t.activeAt.Load(); ns > 0 {
		if a := time.Unix(0, ns); a.After(last) {
			last = a
		}
	}
	return last
}

// inUse reports whether the topic has a producer or a consumer.
func (t *Topic) inUse() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.producers) > 0 || len(t.waiting) > 0 {
		return true
	}
	for _, s := range t.subs {
		s.mu.Lock()
		n := len(s.consumers)
		s.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}

// subscriptionsAllow reports whether the topic's subscriptions (not the
// broker's own cursors) let mode delete it.
func (t *Topic) subscriptionsAllow(ctx context.Context, mode string) bool {
	var subs []string
	for _, c := range t.ml.Cursors() {
		if !strings.HasPrefix(c, ReservedPrefix) {
			subs = append(subs, c)
		}
	}
	if mode != policy.DeleteWhenSubscriptionsCaughtUp {
		return len(subs) == 0
	}
	for _, name := range subs {
		c, err := t.ml.OpenCursor(ctx, name, mledger.Latest)
		if err != nil || c.Backlog() > 0 {
			return false
		}
	}
	return true
}

// retained reports whether retention keeps a topic last active at last:
// an unlimited retention time, or one not yet passed (Pulsar's
// shouldTopicBeRetained).
func retained(r mledger.Retention, now, last time.Time) bool {
	if !r.Set {
		return false
	}
	return r.Time < 0 || now.Sub(last) < r.Time
}

// inactive reports whether t may be deleted now under pol (every
// condition but the other partitions'), as of which activity, and
// whether deletion is on for it at all.
func (b *Broker) inactive(ctx context.Context, t *Topic, pol NamespacePolicy) (ok bool, last time.Time, on bool) {
	now := b.deps.Now()
	on, mode, after := b.inactivePolicy(pol)
	on = on && len(t.remotes()) == 0
	if t.inUse() {
		t.touch()
		return false, time.Time{}, on
	}
	if !on {
		return false, time.Time{}, false
	}
	last = t.lastActive()
	if now.Sub(last) < after || retained(pol.Retention, now, last) || !t.subscriptionsAllow(ctx, mode) {
		return false, time.Time{}, true
	}
	return true, last, true
}

// inactivePartitionKey is the key of the report that a partition
// qualifies for deletion.
func inactivePartitionKey(region string, name topic.Name) string {
	return metastore.RegionPrefix(region) + "inactive-partitions/" + name.StorageName()
}

// inactiveReport is the value of an inactivePartitionKey: the reporting
// broker and when it last found the partition inactive (Unix ms).
type inactiveReport struct {
	Broker  string `json:"broker"`
	Checked int64  `json:"checked"`
}

// checkInactive deletes t when it qualifies; a qualifying partition is
// reported and returned, for deleteInactivePartitions to decide once
// every loaded topic was checked.
func (b *Broker) checkInactive(ctx context.Context, t *Topic, pol NamespacePolicy) (idlePartition bool) {
	if t.ml == nil {
		return false // not stored: a non-persistent topic goes when unloaded
	}
	ok, last, on := b.inactive(ctx, t, pol)
	key := inactivePartitionKey(b.cfg.Region, t.name)
	if t.name.Partition() >= 0 {
		if !ok {
			if t.swapFlag(flReported, false) || on && !t.swapFlag(flReportCleared, true) {
				// Ours, or one a previous owner left: the partition is not
				// idle now.
				_ = b.deps.Meta.Delete(ctx, key)
			}
			return false
		}
		v, _ := json.Marshal(inactiveReport{Broker: b.cfg.ServiceURL, Checked: b.deps.Now().UnixMilli()})
		if _, err := b.deps.Meta.Put(ctx, key, v); err != nil {
			b.log.Warn("inactive topics: cannot report an idle partition", "topic", t.name.String(), "err", err)
			return false
		}
		t.setFlag(flReported, true)
		return true
	}
	if ok {
		b.deleteInactive(ctx, t, last)
	}
	return false
}

// deleteInactive deletes t, inactive since last: it is unloaded, and its
// managed ledger deleted unless something was published meanwhile.
func (b *Broker) deleteInactive(ctx context.Context, t *Topic, last time.Time) bool {
	if err := b.unloadTopic(ctx, t); err != nil {
		b.log.Warn("inactive topics: unload", "topic", t.name.String(), "err", err)
		return false
	}
	if t.lastActive().After(last) {
		return false // used while being unloaded: kept (the next load serves it)
	}
	// The delete is conditional on the metadata's revision: a load of the
	// topic elsewhere meanwhile makes it fail, and the topic stays.
	if err := t.ml.Delete(ctx); err != nil {
		b.log.Warn("inactive topics: delete", "topic", t.name.String(), "err", err)
		return false
	}
	b.log.Info("inactive topic deleted", "topic", t.name.String(), "inactive", b.deps.Now().Sub(last).Round(time.Second))
	return true
}

// fresh reports whether a report checked at checked (Unix ms) still
// stands: its owner confirms it every maintenance round.
func (b *Broker) fresh(checked int64) bool {
	return b.deps.Now().Sub(time.UnixMilli(checked)) < 3*b.cfg.MaintenanceInterval
}

// partitionQualifies reports whether partition p of a partitioned topic
// may go: it is stored no more, or its owner reports it idle.
func (b *Broker) partitionQualifies(ctx context.Context, p topic.Name) (bool, error) {
	if _, err := b.deps.Meta.Get(ctx, mledger.TopicKey(b.cfg.Region, MLName(p))); errors.Is(err, metastore.ErrNotFound) {
		return true, nil
	} else if err != nil {
		return false, err
	}
	kv, err := b.deps.Meta.Get(ctx, inactivePartitionKey(b.cfg.Region, p))
	if errors.Is(err, metastore.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var r inactiveReport
	if json.Unmarshal(kv.Value, &r) != nil {
		return false, nil
	}
	return b.fresh(r.Checked), nil
}

// partitionedDeleter is implemented by Namespaces that can delete a
// partitioned topic's record (PolicyNamespaces).
type partitionedDeleter interface {
	DeletePartitioned(ctx context.Context, name topic.Name) error
}

// DeletePartitioned removes a partitioned topic's record.
func (p PolicyNamespaces) DeletePartitioned(ctx context.Context, name topic.Name) error {
	return p.Store.DeletePartitioned(ctx, name)
}

// deleteInactivePartitions deletes the idle partitions of idle whose
// partitioned topics have every partition idle or gone, then the
// records of the partitioned topics left without partitions.
func (b *Broker) deleteInactivePartitions(ctx context.Context, idle []*Topic) {
	bases := map[topic.Name]bool{}
	for _, t := range idle {
		base := t.name.Base()
		n, ok, err := b.deps.Namespaces.Partitions(ctx, base)
		if err != nil || !ok {
			continue
		}
		all := true
		for i := range n {
			q, err := b.partitionQualifies(ctx, base.Partitioned(i))
			if err != nil || !q {
				all = false
				break
			}
		}
		if !all {
			continue
		}
		if b.deleteInactive(ctx, t, t.lastActive()) {
			_ = b.deps.Meta.Delete(ctx, inactivePartitionKey(b.cfg.Region, t.name))
			t.setFlag(flReported, false)
			bases[base] = true
		}
	}
	for base := range bases {
		n, ok, err := b.deps.Namespaces.Partitions(ctx, base)
		if err != nil || !ok {
			continue
		}
		left := false
		for i := range n {
			if _, err := b.deps.Meta.Get(ctx, mledger.TopicKey(b.cfg.Region, MLName(base.Partitioned(i)))); !errors.Is(err, metastore.ErrNotFound) {
				left = true
				break
			}
		}
		if left {
			continue
		}
		d, ok := b.deps.Namespaces.(partitionedDeleter)
		if !ok {
			continue
		}
		if err := d.DeletePartitioned(ctx, base); err != nil && !errors.Is(err, policy.ErrNotFound) {
			b.log.Warn("inactive topics: delete the partitioned topic's record", "topic", base.String(), "err", err)
			continue
		}
		for i := range n {
			_ = b.deps.Meta.Delete(ctx, inactivePartitionKey(b.cfg.Region, base.Partitioned(i)))
		}
		b.log.Info("inactive partitioned topic deleted", "topic", base.String(), "partitions", n)
	}
}
