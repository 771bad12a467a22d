package ownership

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// ErrSplitConflict is returned by Split when a half's ownership key
// already exists (an earlier split's leftovers, or a racing one).
var ErrSplitConflict = errors.New("ownership: a half of the bundle is owned already")

// Split hands bundle parent of ns, which this broker owns, over to its
// halves lo and hi without a moment in which its topics are unowned:
//
//  1. the halves' ownership keys are created under this broker's lease
//     (no other broker looks them up yet: the namespace's boundaries do
//     not name them);
//  2. commit changes the namespace's boundaries (a compare-and-swap in
//     the policy store) and the caller's bundle cache; from then on a
//     lookup of one of the parent's topics finds a half, owned here;
//  3. the parent stops counting as owned and its key is deleted after
//     grace (a lookup that read the old boundaries just before the
//     commit still finds the parent owned here, not unowned), unless the
//     registry closes first (the lease takes it along).
//
// When commit fails the halves' keys are deleted and nothing changed.
// The parent's loaded topics stay loaded: they now belong to the halves,
// which this broker owns. ErrNotOwned when the parent is not ours.
func (r *Registry) Split(ctx context.Context, ns string, parent, lo, hi topic.Bundle, grace time.Duration, commit func(context.Context) error) error {
	pk, err := bundleKey(ns, parent)
	if err != nil {
		return err
	}
	if lo.Lo != parent.Lo || lo.Hi != hi.Lo || hi.Hi != parent.Hi {
		return fmt.Errorf("%w: %s and %s do not split %s", ErrInvalidBundle, lo, hi, parent)
	}
	pkey := r.ownPrefix + pk
	r.mu.Lock()
	pe := r.owned[pkey]
	if !r.validLocked(pe) {
		r.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNotOwned, pk)
	}
	lease := r.leaseLocked()
	r.mu.Unlock()

	var got []topic.Bundle
	undo := func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.ttl)
		defer cancel()
		for _, b := range got {
			r.Release(uctx, ns, b)
		}
	}
	for _, b := range []topic.Bundle{lo, hi} {
		key := r.ownPrefix + mustKey(ns, b)
		won, err := r.acquire(ctx, lease, key, ns, b)
		if err != nil {
			undo()
			return fmt.Errorf("ownership: split %s: %w", pk, err)
		}
		if !won {
			undo()
			return fmt.Errorf("%w: %s", ErrSplitConflict, mustKey(ns, b))
		}
		got = append(got, b)
	}
	if err := commit(ctx); err != nil {
		undo()
		return err
	}
	r.mu.Lock()
	if r.owned[pkey] == pe {
		pe.releasing = true
	}
	if r.closed {
		r.mu.Unlock()
		return nil // the lease takes the parent's key along
	}
	r.retireWG.Add(1) // under mu: stop waits only after marking closed
	r.mu.Unlock()
	r.markLoadDirty()
	r.logger.Info("bundle split", "namespace", ns, "bundle", parent.String(), "into", lo.String()+" "+hi.String())
	go func() {
		defer r.retireWG.Done()
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.retireStop:
			return // closing: the lease takes the key along
		}
		dctx, cancel := context.WithTimeout(context.Background(), r.ttl)
		defer cancel()
		err := r.meta.DeleteIf(dctx, pkey, pe.rev)
		if err != nil && !errors.Is(err, metastore.ErrConflict) {
			r.logger.Warn("split: deleting the parent bundle's key failed; it goes with the lease", "key", pkey, "err", err)
			return
		}
		r.mu.Lock()
		if r.owned[pkey] == pe {
			delete(r.owned, pkey)
		}
		r.mu.Unlock()
	}()
	return nil
}

func mustKey(ns string, b topic.Bundle) string {
	k, _ := bundleKey(ns, b)
	return k
}
