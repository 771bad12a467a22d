package broker

import (
	"context"
	"errors"
	"net/url"
	"sync"

	"github.com/isobar-mq/isobar/broker/ownership"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// DefaultBundles is the number of bundles of a namespace without a bundles
// policy (Pulsar's default).
const DefaultBundles = 4

// OwnershipPlacement places topics by namespace bundle through the
// region's ownership registry: the bundle of a topic is found from its
// namespace's bundle count in the policy store (cached, so that Owns does
// not block).
type OwnershipPlacement struct {
	Registry *ownership.Registry
	Policies *policy.Store
	// Local and Region, when set, keep the region's own bundle
	// boundaries of split namespaces (adminsplit.go): the region's
	// metadata store and name.
	Local  metastore.Meta
	Region string

	mu      sync.Mutex
	bundles map[string][]topic.Bundle // by namespace
}

func (p *OwnershipPlacement) bundleFor(ctx context.Context, name topic.Name) (topic.Bundle, bool, error) {
	bs, ok, err := p.bundlesOf(ctx, name.NamespaceName())
	if !ok || err != nil {
		return topic.Bundle{}, ok, err
	}
	return topic.BundleFor(name, bs), true, nil
}

// bundlesOf returns the bundles of namespace ns: with a ctx read from its
// policies (their boundaries, which a split changes) and cached; with a
// nil ctx from the cache only, without blocking (false when not cached).
func (p *OwnershipPlacement) bundlesOf(ctx context.Context, ns string) ([]topic.Bundle, bool, error) {
	if ctx == nil {
		p.mu.Lock()
		bs, ok := p.bundles[ns]
		p.mu.Unlock()
		return bs, ok, nil
	}
	bs, _, _, err := p.readBundles(ctx, ns)
	if err != nil {
		return nil, false, err
	}
	p.setBundles(ns, bs)
	return bs, true, nil
}

// setBundles caches the bundles of ns, unless the cached ones refine
// them (split them further): the policies read were older than a split
// this broker made, from a cache of the store that lags its own write.
// (Bundles are only ever split, never merged.)
func (p *OwnershipPlacement) setBundles(ns string, bs []topic.Bundle) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bundles == nil {
		p.bundles = map[string][]topic.Bundle{}
	}
	if old, ok := p.bundles[ns]; ok && refines(old, bs) {
		return
	}
	p.bundles[ns] = bs
}

// refines reports whether fine has more bundles than coarse and every
// boundary of coarse is one of fine's.
func refines(fine, coarse []topic.Bundle) bool {
	if len(fine) <= len(coarse) {
		return false
	}
	have := make(map[uint32]bool, len(fine))
	for _, b := range fine {
		have[b.Lo] = true
	}
	for _, b := range coarse {
		if !have[b.Lo] {
			return false
		}
	}
	return true
}

// Lookup implements Placement.
func (p *OwnershipPlacement) Lookup(ctx context.Context, name topic.Name, authoritative bool) (LookupResult, error) {
	b, _, err := p.bundleFor(ctx, name)
	if err != nil {
		return LookupResult{}, err
	}
	info, err := p.Registry.Lookup(ctx, name.NamespaceName(), b, authoritative)
	if err != nil {
		return LookupResult{}, err
	}
	self := info.ID == p.Registry.Self().ID
	return LookupResult{ServiceURL: info.ServiceURL, HTTPURL: info.HTTPURL, ServiceURLTLS: info.ServiceURLTLS, HTTPURLTLS: info.HTTPURLTLS,
		Self: self, Authoritative: !self || authoritative}, nil
}

// Owns implements Placement.
func (p *OwnershipPlacement) Owns(name topic.Name) bool {
	b, ok, _ := p.bundleFor(nil, name)
	return ok && p.Registry.Owns(name.NamespaceName(), b)
}

// OwnedEpoch implements Placement.
func (p *OwnershipPlacement) OwnedEpoch(name topic.Name) (int64, bool) {
	b, ok, _ := p.bundleFor(nil, name)
	if !ok {
		return 0, false
	}
	return p.Registry.OwnedEpoch(name.NamespaceName(), b)
}

// InBundle reports whether name falls in bundle b of namespace ns.
func (p *OwnershipPlacement) InBundle(name topic.Name, ns string, b topic.Bundle) bool {
	if !name.InNamespace(ns) {
		return false
	}
	got, ok, _ := p.bundleFor(nil, name)
	return ok && got == b
}

// Brokers implements BrokerLister: host:port of each live broker's HTTP
// listener.
func (p *OwnershipPlacement) Brokers(ctx context.Context) ([]string, error) {
	infos, err := p.Registry.Brokers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(infos))
	for _, i := range infos {
		if u, err := url.Parse(i.HTTPURL); err == nil && u.Host != "" {
			out = append(out, u.Host)
		}
	}
	return out, nil
}

// Leader implements BrokerLeader: the HTTP URL of the region's leader
// broker (ownership.Leader).
func (p *OwnershipPlacement) Leader(ctx context.Context) (string, error) {
	infos, err := p.Registry.Brokers(ctx)
	if err != nil {
		return "", err
	}
	l, ok := ownership.Leader(infos)
	if !ok {
		return "", ownership.ErrNoBrokers
	}
	return l.HTTPURL, nil
}

// UnloadOwned gives up every bundle this broker owns, one at a time, as
// an unload does (Registry.Unload: no new load of the bundle's topics,
// its loaded topics closed, then its ownership released), for a broker
// that shuts down. The loaded topics are grouped by bundle in one pass
// over them, not one pass per bundle. A topic loaded after that pass
// whose bundle is not yet being released is closed by the broker's own
// shutdown instead.
func (p *OwnershipPlacement) UnloadOwned(ctx context.Context, b *Broker) error {
	type bundleOf struct {
		tenant, ns string
		b          topic.Bundle
	}
	groups := map[bundleOf][]*Topic{}
	for _, t := range b.loadedTopics() {
		bd, ok, _ := p.bundleFor(nil, t.name)
		if ok {
			k := bundleOf{t.name.Tenant, t.name.Namespace, bd}
			groups[k] = append(groups[k], t)
		}
	}
	var errs []error
	for _, ob := range p.Registry.Owned() {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		tenant, ns, err := topic.ParseNamespace(ob.Namespace)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ts := groups[bundleOf{tenant, ns, ob.Bundle}]
		err = p.Registry.Unload(ctx, ob.Namespace, ob.Bundle, func(ctx context.Context) error {
			var errs []error
			for _, t := range ts {
				errs = append(errs, b.unloadTopic(ctx, t))
			}
			return errors.Join(errs...)
		})
		if err != nil && !errors.Is(err, ownership.ErrNotOwned) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
