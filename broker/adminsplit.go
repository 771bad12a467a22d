package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/broker/ownership"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// SplitGrace is how long the key of a split bundle stays after the split
// (ownership.Registry.Split): a lookup that read the namespace's old
// boundaries just before the split finds the bundle still owned here.
const SplitGrace = 10 * time.Second

// errSplitRaced: the bundle left the namespace's boundaries meanwhile.
var errSplitRaced = errkind.Sentinel(errkind.ErrConflict, "the bundle is no longer one of the namespace's (split meanwhile)")

// RegionBundles is the region's own bundle boundaries of a namespace that
// was split in the region, stored as JSON under
// /isobar/<region>/bundles/<tenant>/<namespace> (Pulsar keeps a
// namespace's bundles in each cluster's local policies). Base is the
// namespace's boundaries in the global store that Boundaries refine;
// when those differ (the namespace was created again with other
// bundles) the record is ignored.
type RegionBundles struct {
	Base       []string `json:"base"`
	Boundaries []string `json:"boundaries"`
}

// RegionBundlesKey is the key of ns's RegionBundles in region's store.
func RegionBundlesKey(region, ns string) string {
	return metastore.RegionPrefix(region) + "bundles/" + ns
}

// readBundles reads ns's bundles: the region's own boundaries when it
// split the namespace (and they refine the global ones), else the global
// boundaries of its policies. It also returns the global boundaries and
// the revision of the region's record (0: none).
func (p *OwnershipPlacement) readBundles(ctx context.Context, ns string) ([]topic.Bundle, []string, int64, error) {
	global := policy.DefaultBundlesData(DefaultBundles)
	if p.Policies != nil {
		pol, err := p.Policies.Namespace(ctx, ns)
		if err != nil {
			return nil, nil, 0, err
		}
		if pol.Bundles != nil {
			global = pol.Bundles
		}
	}
	base := policy.BundlesDataOf(global.List()).Boundaries
	if p.Local == nil {
		return global.List(), base, 0, nil
	}
	kv, err := p.Local.Get(ctx, RegionBundlesKey(p.Region, ns))
	if errors.Is(err, metastore.ErrNotFound) {
		return global.List(), base, 0, nil
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("bundles of %s: %w", ns, err)
	}
	var rb RegionBundles
	if json.Unmarshal(kv.Value, &rb) != nil || !slices.Equal(rb.Base, base) {
		return global.List(), base, kv.Rev, nil // not of this namespace's boundaries: replaced at the next split
	}
	return (&policy.BundlesData{Boundaries: rb.Boundaries}).List(), base, kv.Rev, nil
}

// SplitBundle hands bundle parent of ns, owned here, over to its halves
// lo and hi: both owned here, the region's boundaries of the namespace
// changed with a compare-and-swap in the region's metadata store (without
// one, the namespace's policies in the policy store), the cache of
// bundles changed with them, so the parent's loaded topics stay served
// (now as topics of a half). See ownership.Registry.Split.
func (p *OwnershipPlacement) SplitBundle(ctx context.Context, ns string, parent, lo, hi topic.Bundle) error {
	if p.Local == nil && p.Policies == nil {
		return fmt.Errorf("%w: no store to keep the boundaries in", adminapi.ErrUnavailable)
	}
	return p.Registry.Split(ctx, ns, parent, lo, hi, SplitGrace, func(ctx context.Context) error {
		next, err := p.commitSplit(ctx, ns, parent, lo, hi)
		if err != nil {
			return err
		}
		p.setBundles(ns, next)
		return nil
	})
}

func (p *OwnershipPlacement) commitSplit(ctx context.Context, ns string, parent, lo, hi topic.Bundle) ([]topic.Bundle, error) {
	if p.Local == nil {
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
		return next, err
	}
	cur, base, rev, err := p.readBundles(ctx, ns)
	if err != nil {
		return nil, err
	}
	next, err := topic.Replace(cur, parent, lo, hi)
	if errors.Is(err, topic.ErrUnsplittable) {
		return nil, errkind.Sentinel(errkind.ErrPreconditionFailed, err.Error())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSplitRaced, err)
	}
	val, _ := json.Marshal(RegionBundles{Base: base, Boundaries: policy.BundlesDataOf(next).Boundaries})
	if _, err := p.Local.CAS(ctx, RegionBundlesKey(p.Region, ns), val, rev); err != nil {
		if errors.Is(err, metastore.ErrConflict) {
			return nil, fmt.Errorf("%w: the region's boundaries changed meanwhile", errSplitRaced)
		}
		return nil, fmt.Errorf("split %s %s: %w", ns, parent, err)
	}
	return next, nil
}

// bundleSplitter is implemented by a Placement that splits bundles
// (OwnershipPlacement).
type bundleSplitter interface {
	SplitBundle(ctx context.Context, ns string, parent, lo, hi topic.Bundle) error
}

// SplitBundle implements adminapi.BundleSplitter. With unload set both
// halves are unloaded afterwards (their clients look them up again and
// the next lookups place them afresh).
func (a adminTopics) SplitBundle(ctx context.Context, ns string, b, lo, hi topic.Bundle, unload bool) error {
	sp, ok := a.b.deps.Placement.(bundleSplitter)
	if !ok {
		return fmt.Errorf("%w: this broker places no bundles", adminapi.ErrUnavailable)
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
