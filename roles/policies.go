package roles

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"go.opentelemetry.io/otel/metric"

	"github.com/isobar-mq/isobar/globalconfig"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/metastore"
)

// policies is a component's access to clusters, tenants, namespaces and
// their policies: in the region's own metadata store (a region alone), or
// in the global configuration store read through a watched cache, kept
// under dataDir so that the component starts and serves while the global
// store is down.
type policies struct {
	store  *policy.Store
	global *metastore.Store
	// meta is the global store as the configuration stores (policies,
	// schemas, deletes) use it: every request bounded by
	// policy.StoreTimeout, so that an admin write fails with a 503 while
	// the store is unreachable instead of waiting for it.
	meta  metastore.Meta
	cache *globalconfig.Cache
}

type policiesConfig struct {
	local     *metastore.Store
	global    metastore.Config // no endpoints: keep them in local
	dataDir   string           // empty: no persisted copy
	cluster   string
	hasTopics func(ctx context.Context, ns string) (bool, error)
	logger    *slog.Logger
	meter     metric.MeterProvider
	// maxPartitions and maxBundles are the broker's limits (zero: the
	// store's defaults).
	maxPartitions, maxBundles int
}

func openPolicies(ctx context.Context, c policiesConfig) (*policies, error) {
	var meta metastore.Meta = c.local
	pc := policy.Config{LocalCluster: c.cluster, HasTopics: c.hasTopics, MeterProvider: c.meter,
		MaxPartitions: c.maxPartitions, MaxBundles: c.maxBundles, Logger: c.logger}
	p := &policies{}
	if len(c.global.Endpoints) > 0 {
		// Not Connect: the global store may be down while we start; the
		// cache then serves its persisted copy.
		gm, err := metastore.Open(c.global)
		if err != nil {
			return nil, fmt.Errorf("global store: %w", err)
		}
		persist := ""
		if c.dataDir != "" {
			persist = filepath.Join(c.dataDir, "globalconfig")
		}
		cache, err := globalconfig.Start(ctx, gm, globalconfig.Config{
			Persist: persist, MeterProvider: c.meter,
			Logger: c.logger.With("component", "globalconfig"),
		})
		if err != nil {
			gm.Close()
			return nil, fmt.Errorf("global configuration cache: %w", err)
		}
		p.global, p.meta, p.cache = gm, policy.Bound(gm, policy.StoreTimeout), cache
		meta, pc.Cache = p.meta, cache
	}
	store, err := policy.New(meta, pc)
	if err != nil {
		p.close()
		return nil, err
	}
	p.store = store
	return p, nil
}

func (p *policies) close() {
	if p.cache != nil {
		p.cache.Close()
	}
	if p.global != nil {
		p.global.Close()
	}
}
