package broker

import (
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/json"
	"reflect"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/topic"
)

// Which loaded topics a maintenance pass visits (docs/decisions.md,
// "Idle topics cost nothing periodic"). A pass reads each namespace's
// policies, as before, but visits only:
//   - the topics listed since the last pass: loaded since, or stored
//     something (their first publish of the pass lists them, as the
//     load sampler's traffic list);
//   - the topics the last pass kept listed because the policies can act
//     on them at any time (keepVisiting);
//   - the inactive-deletion candidates whose time has come (dueQueue),
//     each scheduled for when it may next qualify;
//   - every topic of a namespace whose policies, own topic policies or
//     the region's dynamic settings changed since the last pass (one
//     walk over the loaded topics, only then).
// So an idle topic without such policies and without a backlog costs no
// work in a pass.

// dueQueue holds keys each due at a time; a key added again is due at
// its latest time only. Not safe for concurrent use.
type dueQueue[K comparable] struct {
	h   dueHeap[K]
	due map[K]int64 // each key's latest time (entries of h at other times are stale)
}

type dueEntry[K comparable] struct {
	k  K
	at int64
}

type dueHeap[K comparable] []dueEntry[K]

func (h dueHeap[K]) Len() int           { return len(h) }
func (h dueHeap[K]) Less(i, j int) bool { return h[i].at < h[j].at }
func (h dueHeap[K]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap[K]) Push(x any)        { *h = append(*h, x.(dueEntry[K])) }
func (h *dueHeap[K]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = dueEntry[K]{}
	*h = old[:len(old)-1]
	return e
}

// add makes k due at at (replacing when it was due before).
func (q *dueQueue[K]) add(k K, at int64) {
	if q.due == nil {
		q.due = map[K]int64{}
	}
	if cur, ok := q.due[k]; ok && cur == at {
		return
	}
	q.due[k] = at
	heap.Push(&q.h, dueEntry[K]{k, at})
}

// remove forgets k.
func (q *dueQueue[K]) remove(k K) { delete(q.due, k) }

// popDue removes and returns the keys due at or before now, earliest
// first.
func (q *dueQueue[K]) popDue(now int64) []K {
	var out []K
	for len(q.h) > 0 && q.h[0].at <= now {
		e := heap.Pop(&q.h).(dueEntry[K])
		if at, ok := q.due[e.k]; ok && at == e.at {
			delete(q.due, e.k)
			out = append(out, e.k)
		}
	}
	// Stale entries are dropped as they come due; a heap mostly of them
	// is rebuilt.
	if len(q.h) > 64 && len(q.h) > 2*len(q.due) {
		q.h = q.h[:0]
		for k, at := range q.due {
			q.h = append(q.h, dueEntry[K]{k, at})
		}
		heap.Init(&q.h)
	}
	return out
}

// len is the number of keys due.
func (q *dueQueue[K]) len() int { return len(q.due) }

// maintIndex is the broker's record of what the next maintenance pass
// visits.
type maintIndex struct {
	// pass serialises passes and guards the fields below it.
	pass sync.Mutex
	ns   map[string]nsMaintRecord // by namespace, as the last pass read them
	dyn  *dynamicSnapshot         // the dynamic settings the last pass saw
	due  dueQueue[*Topic]         // inactive-deletion candidates

	// mu guards list, the topics to visit next (each once: its
	// maintListed flag).
	mu   sync.Mutex
	list []*Topic
}

// nsMaintRecord is what a pass read of a namespace: its policy and a
// digest of its topics' own policies (digested false: not known, so the
// namespace counts as changed every pass).
type nsMaintRecord struct {
	pol      NamespacePolicy
	digest   [sha256.Size]byte
	digested bool
}

// sameAs reports whether r and o were read from the same policies.
func (r nsMaintRecord) sameAs(o nsMaintRecord) bool {
	return r.digested && o.digested && r.digest == o.digest && reflect.DeepEqual(r.pol, o.pol)
}

// listMaint lists t for the next maintenance pass (once).
func (b *Broker) listMaint(t *Topic) {
	if t.flag(flMaintListed) || t.swapFlag(flMaintListed, true) {
		return
	}
	m := &b.maintIdx
	m.mu.Lock()
	m.list = append(m.list, t)
	m.mu.Unlock()
}

// takeMaint empties the list of topics for the next pass.
func (b *Broker) takeMaint() []*Topic {
	m := &b.maintIdx
	m.mu.Lock()
	out := m.list
	m.list = nil
	m.mu.Unlock()
	for _, t := range out {
		t.setFlag(flMaintListed, false)
	}
	return out
}

// NamespaceTopicPoliciesDigest is implemented by a NamespaceTopicPolicies
// that also digests what it read, so that a maintenance pass can tell
// that a namespace's topic policies did not change.
type NamespaceTopicPoliciesDigest interface {
	TopicPoliciesDigestOf(ctx context.Context, ns string) (apply func(topic.Name, NamespacePolicy) (NamespacePolicy, error), digest [sha256.Size]byte, err error)
}

// TopicPoliciesDigestOf implements NamespaceTopicPoliciesDigest.
func (p PolicyNamespaces) TopicPoliciesDigestOf(ctx context.Context, ns string) (func(topic.Name, NamespacePolicy) (NamespacePolicy, error), [sha256.Size]byte, error) {
	all, err := p.Store.EffectiveTopicPoliciesIn(ctx, ns)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	// Maps are encoded with their keys sorted: the same policies give
	// the same bytes.
	enc, err := json.Marshal(all)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	return func(name topic.Name, pol NamespacePolicy) (NamespacePolicy, error) {
		return applyTopicPolicies(name, pol, all[name.Base().String()])
	}, sha256.Sum256(enc), nil
}

// loadedNamespaces are the namespaces with loaded topics.
func (b *Broker) loadedNamespaces() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.loaded.ns))
	for ns := range b.loaded.ns {
		out = append(out, ns)
	}
	return out
}

// loadedIn are the loaded topics of the namespaces in nss.
func (b *Broker) loadedIn(nss map[string]bool) []*Topic {
	var out []*Topic
	for _, t := range b.loadedTopics() {
		for ns := range nss {
			if t.name.InNamespace(ns) {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// keepVisiting reports whether the policies pol can act on t at any
// time, so that the next pass visits it again: subscription expiration,
// replication (its cursors and backlogs), synchronous replication, a
// backlog over its quota; or a log that retention or trimming may
// shorten (more than one ledger: the last is never trimmed) or a
// backlog that message TTL, backlog quotas or compaction act on.
func (t *Topic) keepVisiting(pol NamespacePolicy) bool {
	if t.ml == nil {
		return false
	}
	if pol.SubscriptionExpiration > 0 || pol.SyncReplication != nil || t.srepl.Load() != nil ||
		t.flag(flQuotaExceeded) || len(t.remotes()) > 0 {
		return true
	}
	ls := t.ml.Ledgers()
	if len(ls) > 1 {
		return true
	}
	if len(ls) == 0 || ls[0].Entries == 0 {
		return false
	}
	if pol.CompactionThreshold > 0 {
		return true
	}
	if pol.MessageTTL <= 0 && pol.BacklogLimit <= 0 && pol.BacklogAge <= 0 {
		return false
	}
	for _, c := range t.userCursors(context.Background()) {
		if c.Backlog() > 0 {
			return true
		}
	}
	return false
}

// inactiveDue is when t should next be checked for deletion as inactive
// under pol, from its last activity; ok false when deletion does not
// apply to it (off, replicated, or retention keeps it forever) so that
// it need not be checked until something changes.
func (b *Broker) inactiveDue(t *Topic, pol NamespacePolicy) (at time.Time, ok bool) {
	on, _, after := b.inactivePolicy(pol)
	if !on || t.ml == nil || len(t.remotes()) > 0 {
		return time.Time{}, false
	}
	now, last := b.deps.Now(), t.lastActive()
	at = last.Add(after)
	if r := pol.Retention; r.Set {
		if r.Time < 0 {
			return time.Time{}, false
		}
		at = maxTime(at, last.Add(r.Time))
	}
	// Passed already (something else keeps it: its subscriptions, say):
	// the next pass looks again.
	return maxTime(at, now), true
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
