package broker

import (
	"context"
	"errors"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/broker/ownership"
	"github.com/isobar-mq/isobar/topic"
)

// BundlePlacement is implemented by a Placement that places namespace
// bundles on the region's brokers (OwnershipPlacement). Without one, this
// broker serves every bundle (Self).
type BundlePlacement interface {
	// Bundles lists a namespace's bundles in hash order.
	Bundles(ctx context.Context, ns string) ([]topic.Bundle, error)
	// LookupBundle returns the broker that owns bundle b of ns, placing
	// it when no broker does (as Lookup places a topic's bundle).
	LookupBundle(ctx context.Context, ns string, b topic.Bundle, authoritative bool) (LookupResult, error)
	// BundleOwner returns the broker that owns bundle b of ns without
	// placing it: false when none does.
	BundleOwner(ctx context.Context, ns string, b topic.Bundle) (LookupResult, bool, error)
	// UnloadBundle gives up bundle b of ns: this broker stops owning it,
	// stop closes its topics, then its ownership is released.
	UnloadBundle(ctx context.Context, ns string, b topic.Bundle, stop func(context.Context) error) error
}

// Bundles implements BundlePlacement.
func (p *OwnershipPlacement) Bundles(ctx context.Context, ns string) ([]topic.Bundle, error) {
	bs, _, err := p.bundlesOf(ctx, ns)
	return bs, err
}

func (p *OwnershipPlacement) result(info ownership.BrokerInfo) LookupResult {
	return LookupResult{ServiceURL: info.ServiceURL, HTTPURL: info.HTTPURL, ServiceURLTLS: info.ServiceURLTLS, HTTPURLTLS: info.HTTPURLTLS,
		Self: info.ID == p.Registry.Self().ID}
}

// LookupBundle implements BundlePlacement.
func (p *OwnershipPlacement) LookupBundle(ctx context.Context, ns string, b topic.Bundle, authoritative bool) (LookupResult, error) {
	info, err := p.Registry.Lookup(ctx, ns, b, authoritative)
	if err != nil {
		return LookupResult{}, err
	}
	return p.result(info), nil
}

// BundleOwner implements BundlePlacement.
func (p *OwnershipPlacement) BundleOwner(ctx context.Context, ns string, b topic.Bundle) (LookupResult, bool, error) {
	info, ok, err := p.Registry.Owner(ctx, ns, b)
	if err != nil || !ok {
		return LookupResult{}, false, err
	}
	return p.result(info), true, nil
}

// UnloadBundle implements BundlePlacement.
func (p *OwnershipPlacement) UnloadBundle(ctx context.Context, ns string, b topic.Bundle, stop func(context.Context) error) error {
	return p.Registry.Unload(ctx, ns, b, stop)
}

// bundleCounter is implemented by Namespaces that know a namespace's
// bundle count (PolicyNamespaces).
type bundleCounter interface {
	NumBundles(ctx context.Context, ns string) (int, error)
}

// NumBundles returns the namespace's bundle count (DefaultBundles when
// its policies set none).
func (p PolicyNamespaces) NumBundles(ctx context.Context, ns string) (int, error) {
	pol, err := p.Store.Namespace(ctx, ns)
	if err != nil {
		return 0, err
	}
	if pol.Bundles != nil && pol.Bundles.NumBundles > 0 {
		return pol.Bundles.NumBundles, nil
	}
	return DefaultBundles, nil
}

// Bundles implements adminapi.Bundles.
func (a adminTopics) Bundles(ctx context.Context, ns string) ([]topic.Bundle, error) {
	if bp, ok := a.b.deps.Placement.(BundlePlacement); ok {
		return bp.Bundles(ctx, ns)
	}
	n := DefaultBundles
	if c, ok := a.b.deps.Namespaces.(bundleCounter); ok {
		var err error
		if n, err = c.NumBundles(ctx, ns); err != nil {
			return nil, err
		}
	}
	return topic.Bundles(n), nil
}

// BundleOwner implements adminapi.Bundles.
func (a adminTopics) BundleOwner(ctx context.Context, ns string, b topic.Bundle, acquire, authoritative bool) (adminapi.BundleOwner, error) {
	bp, ok := a.b.deps.Placement.(BundlePlacement)
	if !ok {
		return adminapi.BundleOwner{Owned: true, Self: true}, nil
	}
	var r LookupResult
	var err error
	if acquire {
		r, err = bp.LookupBundle(ctx, ns, b, authoritative)
	} else {
		var found bool
		r, found, err = bp.BundleOwner(ctx, ns, b)
		if err == nil && !found {
			return adminapi.BundleOwner{}, nil
		}
	}
	if err != nil {
		return adminapi.BundleOwner{}, err
	}
	return adminapi.BundleOwner{Owned: true, Self: r.Self, URL: r.HTTPURL, URLTLS: r.HTTPURLTLS}, nil
}

// UnloadBundle implements adminapi.Bundles: the bundle's loaded topics are
// closed (their clients told to reconnect) while this broker no longer
// owns the bundle, then its ownership is released, so the clients'
// lookups place it again. Without a BundlePlacement the topics are only
// closed (the clients come back here).
func (a adminTopics) UnloadBundle(ctx context.Context, ns string, b topic.Bundle) error {
	bs, err := a.Bundles(ctx, ns)
	if err != nil {
		return err
	}
	stop := func(ctx context.Context) error {
		return a.b.UnloadMatching(ctx, func(n topic.Name) bool {
			return n.InNamespace(ns) && topic.BundleFor(n, bs) == b
		})
	}
	bp, ok := a.b.deps.Placement.(BundlePlacement)
	if !ok {
		return stop(ctx)
	}
	err = bp.UnloadBundle(ctx, ns, b, stop)
	if errors.Is(err, ownership.ErrNotOwned) {
		return nil // released meanwhile (lost, or another unload): nothing is served here
	}
	return err
}
