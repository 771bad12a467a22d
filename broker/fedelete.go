package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/deletes"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// Federation-wide deletes (docs/replication.md, "Deleting topics and
// namespaces"): deleting a topic or a namespace through the admin API
// writes a record in the global store (package deletes); every broker of
// every region looks at the records every deleteScanInterval, deletes the
// copies it owns, and marks the record applied for its region once the
// region holds none; loading or creating a topic a record covers is
// refused until the delete is finished everywhere.

// Errors of federation-wide deletes.
var (
	errNotEmpty      = errkind.Sentinel(errkind.ErrConflict, "namespace not empty")                   // 409
	errDeletePending = errkind.Sentinel(errkind.ErrServiceNotReady, "delete not finished everywhere") // 503
)

// deleteScanInterval is how often a broker looks for deletes to apply.
const deleteScanInterval = 200 * time.Millisecond

// deleteWait bounds how long an admin delete waits for the other regions
// (within the request's own deadline).
const deleteWait = 10 * time.Second

// ifEmptyGrace is how long a namespace delete without force is left to
// the broker that took it before others finish or withdraw it.
const ifEmptyGrace = time.Minute

// namespaceFinisher removes a deleted namespace's global records
// (PolicyNamespaces).
type namespaceFinisher interface {
	FinishNamespaceDelete(ctx context.Context, ns string) error
}

// FinishNamespaceDelete removes namespace ns's partitioned topics and
// then the namespace (its topic policies go with it).
func (p PolicyNamespaces) FinishNamespaceDelete(ctx context.Context, ns string) error {
	pts, err := p.Store.ListPartitioned(ctx, ns, "")
	if err != nil {
		return err
	}
	for _, pt := range pts {
		if err := p.Store.DeletePartitioned(ctx, pt); err != nil && !errors.Is(err, policy.ErrNotFound) {
			return err
		}
	}
	if err := p.Store.DeleteNamespace(ctx, ns); err != nil && !errors.Is(err, policy.ErrNotFound) {
		return err
	}
	return nil
}

// deleteGate refuses a topic that a delete record covers while the
// record blocks this region.
func (b *Broker) deleteGate(ctx context.Context, name topic.Name, pol NamespacePolicy) error {
	if b.deps.Deletes == nil {
		return nil
	}
	recs, err := b.deps.Deletes.Covering(ctx, name)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := r.Blocks(b.deps.Deletes.Region(), pol.ReplicationClusters); err != nil {
			return err
		}
	}
	return nil
}

// runDeletes applies the federation's delete records until ctx ends.
func (b *Broker) runDeletes(ctx context.Context) {
	t := time.NewTicker(deleteScanInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		recs, err := b.deps.Deletes.List(ctx)
		if err != nil {
			b.log.Warn("delete records", "err", err)
		}
		for _, r := range recs {
			if r.Done {
				continue
			}
			if err := b.applyDelete(ctx, r); err != nil && ctx.Err() == nil {
				b.log.Warn("delete not applied yet; retrying", "delete", r.Key, "err", err)
			}
			if r.IfEmpty && b.deps.Now().Sub(r.At) < ifEmptyGrace {
				continue // the broker that took it finishes it
			}
			if _, err := b.finishDelete(ctx, r.Key); err != nil && ctx.Err() == nil {
				b.log.Warn("delete not finished yet; retrying", "delete", r.Key, "err", err)
			}
		}
	}
}

// regionalTopics lists the topics of this region a record covers that
// still exist here.
func (b *Broker) regionalTopics(ctx context.Context, r deletes.Record) ([]topic.Name, error) {
	var names []topic.Name
	switch r.Kind {
	case deletes.Topic, deletes.Subscription:
		ts, err := r.Topics()
		if err != nil {
			return nil, err
		}
		for _, n := range ts {
			if n.Domain == topic.NonPersistent {
				if b.loadedTopic(n) != nil {
					names = append(names, n)
				}
				continue
			}
			_, err := b.deps.Meta.Get(ctx, mledger.TopicKey(b.cfg.Region, MLName(n)))
			switch {
			case err == nil:
				names = append(names, n)
			case !errors.Is(err, metastore.ErrNotFound):
				return nil, err
			}
		}
	case deletes.Namespace:
		ps, err := b.PersistentTopics(ctx, r.Name)
		if err != nil {
			return nil, err
		}
		for _, s := range ps {
			if n, err := topic.Parse(s); err == nil {
				names = append(names, n)
			}
		}
		for _, t := range b.loadedTopics() {
			if t.name.Domain == topic.NonPersistent && t.name.NamespaceName() == r.Name {
				names = append(names, t.name)
			}
		}
	}
	return names, nil
}

// applyDelete deletes this region's copies of what r covers that this
// broker owns (the other brokers of the region delete theirs), and marks
// r applied for the region once none is left. A namespace delete without
// force only checks that the region holds none of its topics.
func (b *Broker) applyDelete(ctx context.Context, r deletes.Record) error {
	region := b.deps.Deletes.Region()
	if _, ok := r.Applied[region]; ok {
		return nil
	}
	if _, ok := r.Refused[region]; ok {
		return nil
	}
	names, err := b.regionalTopics(ctx, r)
	if err != nil {
		return err
	}
	if r.IfEmpty {
		if len(names) == 0 {
			_, err = b.deps.Deletes.MarkApplied(ctx, r.Key, 0)
			return err
		}
		list := make([]string, 0, len(names))
		for _, n := range names {
			list = append(list, n.String())
		}
		slices.Sort(list)
		if len(list) > 5 {
			list = append(list[:5], fmt.Sprintf("and %d more", len(list)-5))
		}
		what := "topics"
		if len(names) == 1 {
			what = "topic"
		}
		_, err = b.deps.Deletes.MarkRefused(ctx, r.Key, fmt.Sprintf("%s holds %d %s of it: %s", region, len(names), what, strings.Join(list, ", ")))
		return err
	}
	var errs []error
	left := 0
	for _, n := range names {
		if !b.deps.Placement.Owns(n) {
			res, err := b.deps.Placement.Lookup(ctx, n, false)
			if err != nil || !res.Self {
				left++ // its owner deletes it
				continue
			}
		}
		del := b.deleteHere
		if r.Kind == deletes.Subscription {
			del = func(ctx context.Context, n topic.Name) error { return b.deleteSubHere(ctx, n, r.Subscription) }
		}
		if err := del(ctx, n); err != nil && !errors.Is(err, adminapi.ErrTopicNotFound) {
			errs = append(errs, fmt.Errorf("%s: %w", n, err))
			left++
		}
	}
	if left > 0 {
		return errors.Join(append(errs, fmt.Errorf("%d of %d copies here left to delete", left, len(names)))...)
	}
	if r.Kind == deletes.Namespace {
		b.sweepDeletedMarks(ctx) // (the namespace's local marks)
	}
	bound, err := b.ledgerBound(ctx)
	if err != nil {
		return err
	}
	if _, err := b.deps.Deletes.MarkApplied(ctx, r.Key, bound); err != nil {
		return err
	}
	b.log.Info("delete applied in this region", "delete", r.Name, "kind", string(r.Kind), "copies", len(names), "ledgerBound", bound)
	return nil
}

// deleteHere deletes topic n's copy in this region, which this broker
// owns, whoever uses it. A copy not loaded (the region was down when the
// delete began, and nothing may load it since) is loaded past the delete
// gate to be deleted.
func (b *Broker) deleteHere(ctx context.Context, n topic.Name) error {
	if n.Domain == topic.NonPersistent {
		if t := b.loadedTopic(n); t != nil {
			return b.unloadTopic(ctx, t)
		}
		return nil
	}
	if _, err := b.getTopic(ctx, n, applyingDelete); err != nil && !errors.Is(err, ErrTopicNotFound) {
		return err
	}
	return adminTopics{b}.deleteLocal(ctx, n, true, false)
}

// deleteSubHere deletes subscription sub of topic n's copy here, which
// this broker owns, whoever consumes from it.
func (b *Broker) deleteSubHere(ctx context.Context, n topic.Name, sub string) error {
	err := adminTopics{b}.DeleteSubscription(ctx, n, sub, true)
	if errors.Is(err, adminapi.ErrSubscriptionNotFound) || errors.Is(err, ErrTopicNotFound) {
		return nil
	}
	return err
}

// subDeleting reports whether a delete of subscription sub of topic n is
// under way (replicated subscription states must not create it again).
func (b *Broker) subDeleting(ctx context.Context, n topic.Name, sub string) bool {
	if b.deps.Deletes == nil {
		return false
	}
	r, ok, err := b.deps.Deletes.Get(ctx, deletes.SubscriptionKey(n, sub))
	return err == nil && ok && !r.Done
}

// ledgerBound is the first ledger id this region will make from now on.
func (b *Broker) ledgerBound(ctx context.Context) (uint64, error) {
	var n uint64
	kv, err := b.deps.Meta.Get(ctx, ledger.LedgerIDKey(b.cfg.Region))
	switch {
	case err == nil:
		if n, err = strconv.ParseUint(string(kv.Value), 10, 64); err != nil {
			return 0, fmt.Errorf("ledger id counter: %q is not a number", kv.Value)
		}
	case !errors.Is(err, metastore.ErrNotFound):
		return 0, err
	}
	return ledger.LedgerID(b.cfg.Region, n+1)
}

// currentRegions are the regions a record still waits for: its
// namespace's replication clusters, or the record's own once the
// namespace is gone.
func (b *Broker) currentRegions(ctx context.Context, r deletes.Record) ([]string, error) {
	ns := r.Name
	if r.Kind != deletes.Namespace {
		n, err := topic.Parse(r.Name)
		if err != nil {
			return nil, err
		}
		ns = n.NamespaceName()
		if pol, err := b.deps.Namespaces.Policy(ctx, ns); err == nil {
			return b.withTopicPolicy(ctx, n, pol).ReplicationClusters, nil
		} else if !errors.Is(err, ErrNamespace) {
			return nil, err
		}
		return r.Regions, nil
	}
	pol, err := b.deps.Namespaces.Policy(ctx, ns)
	if errors.Is(err, ErrNamespace) {
		return r.Regions, nil
	}
	if err != nil {
		return nil, err
	}
	return pol.ReplicationClusters, nil
}

// finishDelete finishes the record at key once every region it waits for
// has applied it: a namespace's global records go, then the record is
// marked done. done is false while regions are pending; an IfEmpty record
// a region refused is withdrawn (nothing was deleted) and reported in
// err wrapping adminapi.ErrConflict.
func (b *Broker) finishDelete(ctx context.Context, key string) (done bool, err error) {
	r, ok, err := b.deps.Deletes.Get(ctx, key)
	if err != nil || !ok {
		return false, err
	}
	if r.Done {
		return true, nil
	}
	current, err := b.currentRegions(ctx, r)
	if err != nil {
		return false, err
	}
	if len(r.Pending(current)) > 0 {
		return false, nil
	}
	if r.IfEmpty && len(r.Refused) > 0 {
		reasons := slices.Sorted(func(yield func(string) bool) {
			for _, v := range r.Refused {
				if !yield(v) {
					return
				}
			}
		})
		if err := b.deps.Deletes.Withdraw(ctx, key); err != nil {
			return false, err
		}
		return false, fmt.Errorf("%w: %s: %s; nothing was deleted", errNotEmpty, r.Name, strings.Join(reasons, "; "))
	}
	if r.Kind == deletes.Namespace {
		if f, ok := b.deps.Namespaces.(namespaceFinisher); ok {
			if err := f.FinishNamespaceDelete(ctx, r.Name); err != nil {
				return false, err
			}
		}
		if b.deps.Schemas != nil {
			if err := b.deps.Schemas.DeleteNamespace(ctx, r.Name); err != nil {
				return false, err
			}
		}
		if err := b.deps.Deletes.Forget(ctx, r.Name); err != nil {
			return false, err
		}
	}
	if _, err := b.deps.Deletes.Finish(ctx, key); err != nil {
		return false, err
	}
	b.log.Info("delete finished in every region", "delete", r.Name, "kind", string(r.Kind))
	return true, nil
}

// awaitDelete applies record r here and waits, up to deleteWait, until it
// is finished everywhere; past that it says which regions are pending.
func (b *Broker) awaitDelete(ctx context.Context, r deletes.Record) error {
	wctx, cancel := context.WithTimeout(ctx, deleteWait)
	defer cancel()
	if err := b.applyDelete(wctx, r); err != nil {
		b.log.Debug("delete not applied here yet", "delete", r.Key, "err", err)
	}
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		done, err := b.finishDelete(wctx, r.Key)
		if done {
			return nil
		}
		if err != nil && errors.Is(err, errNotEmpty) {
			return err
		}
		select {
		case <-tick.C:
			continue
		case <-wctx.Done():
		}
		cur, ok, gerr := b.deps.Deletes.Get(ctx, r.Key)
		if gerr != nil || !ok {
			return fmt.Errorf("%w: delete of %s: %v", errDeletePending, r.Name, errors.Join(err, gerr, wctx.Err()))
		}
		current, _ := b.currentRegions(ctx, cur)
		pending := cur.Pending(current)
		if cur.IfEmpty {
			// Nothing was deleted: withdraw it rather than leave the
			// namespace blocked.
			if werr := b.deps.Deletes.Withdraw(ctx, r.Key); werr != nil {
				return fmt.Errorf("%w: namespace %s: regions %s did not answer within %v, and the check could not be withdrawn: %w", errDeletePending, r.Name, strings.Join(pending, ", "), deleteWait, werr)
			}
			return &adminapi.PendingError{Regions: pending, Err: fmt.Errorf("%w: namespace %s not deleted: regions %s did not answer within %v whether they hold topics of it; nothing was deleted", errDeletePending, r.Name, strings.Join(pending, ", "), deleteWait)}
		}
		if len(pending) == 0 {
			return fmt.Errorf("%w: %s: every region has deleted its copy, but the delete could not be finished within %v: %v; retry the delete", errDeletePending, r.Name, deleteWait, err)
		}
		return &adminapi.PendingError{Regions: pending, Err: fmt.Errorf("%w: %s deleted in %s, but regions %s have not deleted their copies within %v (unreachable?): they will when they return, and until then it cannot be created again; retry the delete to wait for them",
			errDeletePending, r.Name, strings.Join(appliedRegions(cur), ", "), strings.Join(pending, ", "), deleteWait)}
	}
}

func appliedRegions(r deletes.Record) []string {
	out := make([]string, 0, len(r.Applied))
	for reg := range r.Applied {
		out = append(out, reg)
	}
	slices.Sort(out)
	return out
}

// DeleteTopicEverywhere implements adminapi.FederatedDeletes: it deletes
// topic name (with partitioned, the partitioned topic of partitions
// partitions) in every region, or joins the delete of it under way.
func (a adminTopics) DeleteTopicEverywhere(ctx context.Context, name topic.Name, partitioned bool, partitions int, force bool) (bool, error) {
	d := a.b.deps.Deletes
	if d == nil {
		return false, nil
	}
	cur, ok, err := d.Get(ctx, deletes.TopicKey(name))
	if err != nil {
		return true, err
	}
	if !ok || cur.Done {
		if cur, err = a.beginTopicDelete(ctx, name, partitioned, partitions, force); err != nil {
			return true, err
		}
	}
	if cur.Partitions > 0 {
		if pd, ok := a.b.deps.Namespaces.(partitionedDeleter); ok {
			if err := pd.DeletePartitioned(ctx, name.Base()); err != nil && !errors.Is(err, policy.ErrNotFound) {
				return true, err
			}
		}
	}
	return true, a.b.awaitDelete(ctx, cur)
}

// beginTopicDelete checks that the topic may be deleted and writes its
// record.
func (a adminTopics) beginTopicDelete(ctx context.Context, name topic.Name, partitioned bool, partitions int, force bool) (deletes.Record, error) {
	if !partitioned {
		ok, err := a.exists(ctx, name)
		if err != nil {
			return deletes.Record{}, err
		}
		if !ok {
			return deletes.Record{}, fmt.Errorf("%w: %s", adminapi.ErrTopicNotFound, name)
		}
		t, err := a.owned(ctx, name, mustExist) // (the owner takes the delete)
		if err != nil {
			return deletes.Record{}, err
		}
		if !force && t.inUse() {
			return deletes.Record{}, fmt.Errorf("%w: topic %s has active producers or consumers", adminapi.ErrPreconditionFailed, name)
		}
	} else {
		if partitions == 0 {
			return deletes.Record{}, fmt.Errorf("%w: partitioned topic %s does not exist", adminapi.ErrTopicNotFound, name)
		}
		for i := range partitions {
			if t := a.b.loadedTopic(name.Partitioned(i)); t != nil && !force && t.inUse() {
				return deletes.Record{}, fmt.Errorf("%w: partition %s has active producers or consumers", adminapi.ErrPreconditionFailed, t.name)
			}
		}
	}
	pol, err := a.b.deps.Namespaces.Policy(ctx, name.NamespaceName())
	if err != nil {
		return deletes.Record{}, err
	}
	pol = a.b.withTopicPolicy(ctx, name, pol)
	rec := deletes.Record{Kind: deletes.Topic, Name: name.Base().String(), Regions: regionsOf(pol, a.b.deps.Deletes.Region())}
	if !partitioned {
		rec.Name = name.String()
	} else {
		rec.Partitions = partitions
	}
	r, _, err := a.b.deps.Deletes.Begin(ctx, rec)
	return r, err
}

// regionsOf are the regions a delete waits for: the replication
// clusters, this region among them.
func regionsOf(pol NamespacePolicy, region string) []string {
	out := slices.Clone(pol.ReplicationClusters)
	if !slices.Contains(out, region) {
		out = append(out, region)
	}
	slices.Sort(out)
	return out
}

// DeleteNamespaceEverywhere implements adminapi.FederatedDeletes: with
// force it deletes every topic of namespace ns in every region and then
// the namespace; without, it deletes the namespace only if no region
// holds a topic of it.
func (a adminTopics) DeleteNamespaceEverywhere(ctx context.Context, ns string, force bool) (bool, error) {
	d := a.b.deps.Deletes
	if d == nil {
		return false, nil
	}
	cur, ok, err := d.Get(ctx, deletes.NamespaceKey(ns))
	if err != nil {
		return true, err
	}
	if !ok || cur.Done {
		pol, err := a.b.deps.Namespaces.Policy(ctx, ns)
		if err != nil {
			return true, err
		}
		rec := deletes.Record{Kind: deletes.Namespace, Name: ns, IfEmpty: !force, Regions: regionsOf(pol, d.Region())}
		if cur, _, err = d.Begin(ctx, rec); err != nil {
			return true, err
		}
	}
	return true, a.b.awaitDelete(ctx, cur)
}

// CheckCreate implements adminapi.FederatedDeletes: whether topic name may
// be created now.
func (a adminTopics) CheckCreate(ctx context.Context, name topic.Name) error {
	if a.b.deps.Deletes == nil {
		return nil
	}
	pol, err := a.b.deps.Namespaces.Policy(ctx, name.NamespaceName())
	if err != nil {
		return err
	}
	return a.b.deleteGate(ctx, name, a.b.withTopicPolicy(ctx, name, pol))
}

// DeleteSubscriptionEverywhere implements adminapi.FederatedDeletes: it
// deletes subscription sub of topic name (of every partition of a
// partitioned topic of partitions partitions) in every region, or joins
// the delete of it under way.
func (a adminTopics) DeleteSubscriptionEverywhere(ctx context.Context, name topic.Name, partitions int, sub string, force bool) (bool, error) {
	d := a.b.deps.Deletes
	if d == nil {
		return false, nil
	}
	cur, ok, err := d.Get(ctx, deletes.SubscriptionKey(name, sub))
	if err != nil {
		return true, err
	}
	if !ok || cur.Done {
		targets := []topic.Name{name}
		if partitions > 0 {
			targets = targets[:0]
			for i := range partitions {
				targets = append(targets, name.Partitioned(i))
			}
		}
		found := false
		for _, t := range targets {
			_, s, err := a.sub(ctx, t, sub)
			if errors.Is(err, adminapi.ErrSubscriptionNotFound) || errors.Is(err, ErrTopicNotFound) || errors.Is(err, adminapi.ErrTopicNotFound) {
				continue
			}
			if err != nil {
				return true, err
			}
			found = true
			s.mu.Lock()
			n := len(s.consumers)
			s.mu.Unlock()
			if n > 0 && !force {
				return true, fmt.Errorf("%w: subscription %s has %d consumers", adminapi.ErrPreconditionFailed, sub, n)
			}
		}
		if !found {
			return true, fmt.Errorf("%w: %s on %s", adminapi.ErrSubscriptionNotFound, sub, name)
		}
		pol, err := a.b.deps.Namespaces.Policy(ctx, name.NamespaceName())
		if err != nil {
			return true, err
		}
		pol = a.b.withTopicPolicy(ctx, name, pol)
		rec := deletes.Record{Kind: deletes.Subscription, Name: name.String(), Subscription: sub, Partitions: partitions,
			Regions: regionsOf(pol, d.Region())}
		if cur, _, err = d.Begin(ctx, rec); err != nil {
			return true, err
		}
	}
	return true, a.b.awaitDelete(ctx, cur)
}
