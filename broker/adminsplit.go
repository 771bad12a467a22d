package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/broker/ownership"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
)

// SplitGrace is how long the key of a split bundle stays after the split
// (ownership.Registry.Split): a lookup that read the namespace's old
// boundaries just before the split finds the bundle still owned here.
const SplitGrace = 10 * time.Second

// errSplitRaced: the bundle left the namespace's boundaries meanwhile.
var errSplitRaced = wire.Sentinel(wire.ErrConflict, "the bundle is no longer one of the namespace's (split meanwhile)")

// SplitBundle hands bundle parent of ns, owned here, over to its halves
// lo and hi: both owned here, the namespace's boundaries changed with a
// compare-and-swap in the policy store, the cache of bundles changed with
// them, so the parent's loaded topics stay served (now as topics of a
// half). See ownership.Registry.Split.
func (p *OwnershipPlacement) SplitBundle(ctx context.Context, ns string, parent, lo, hi topic.Bundle) error {
	if p.Policies == nil {
		return fmt.Errorf("%w: no policy store to change the boundaries in", admin.ErrUnavailable)
	}
	return p.Registry.Split(ctx, ns, parent, lo, hi, SplitGrace, func(ctx context.Context) error {
		var next []topic.Bundle
		_, err := p.Policies.UpdateNamespace(ctx, ns, func(pol *policy.Policies) error {
			n, err := topic.Replace(pol.Bundles.List(), parent, lo, hi)
			if err != nil {
				return fmt.Errorf("%w: %v", errSplitRaced, err)
			}
			pol.Bundles = policy.BundlesDataOf(n)
			next = n
			return nil
		})
		if err != nil {
			return err
		}
		p.setBundles(ns, next)
		return nil
	})
}

// bundleSplitter is implemented by a Placement that splits bundles
// (OwnershipPlacement).
type bundleSplitter interface {
	SplitBundle(ctx context.Context, ns string, parent, lo, hi topic.Bundle) error
}

// SplitBundle implements admin.BundleSplitter. With unload set both
// halves are unloaded afterwards (their clients look them up again and
// the next lookups place them afresh).
func (a adminTopics) SplitBundle(ctx context.Context, ns string, b, lo, hi topic.Bundle, unload bool) error {
	sp, ok := a.b.deps.Placement.(bundleSplitter)
	if !ok {
		return fmt.Errorf("%w: this broker places no bundles", admin.ErrUnavailable)
	}
	if err := sp.SplitBundle(ctx, ns, b, lo, hi); err != nil {
		if errors.Is(err, ownership.ErrSplitConflict) {
			return fmt.Errorf("%w: %v", errSplitRaced, err)
		}
		return err
	}
	if !unload {
		return nil
	}
	return errors.Join(a.UnloadBundle(ctx, ns, lo), a.UnloadBundle(ctx, ns, hi))
}
