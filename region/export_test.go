package region

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/broker/ownership"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/replicator"
)

// Test-only operations on running regions and federations: crashes,
// restarts and views into the parts. They live here, compiled only into
// the package's tests, not in the production API.

// Broker returns broker i.
func (r *Region) Broker(i int) *broker.Broker { return r.brokers[i].Broker() }

// Owned lists the bundles broker i owns, as the region's metadata store
// records them (the ownership records an operator reads with etcdctl).
func (r *Region) Owned(i int) []ownership.OwnedBundle {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := metastore.Connect(ctx, r.meta)
	if err != nil {
		panic(fmt.Sprintf("region %s: metadata store: %v", r.Name(), err))
	}
	defer s.Close()
	prefix := ownership.OwnershipPrefix(r.Name())
	kvs, err := s.List(ctx, prefix)
	if err != nil {
		panic(fmt.Sprintf("region %s: list %s: %v", r.Name(), prefix, err))
	}
	self := r.Brokers()[i].ServiceURL
	var out []ownership.OwnedBundle
	for _, kv := range kvs {
		var o ownership.Ownership
		if err := json.Unmarshal(kv.Value, &o); err != nil {
			panic(fmt.Sprintf("ownership record %s: %v", kv.Key, err))
		}
		if o.ServiceURL != self {
			continue
		}
		ns, b, err := ownership.ParseBundleKey(strings.TrimPrefix(kv.Key, prefix))
		if err != nil {
			panic(err)
		}
		out = append(out, ownership.OwnedBundle{Namespace: ns, Bundle: b, Acquired: o.Acquired})
	}
	return out
}

// StopBroker shuts broker i down as an operator's stop does (its bundles
// unloaded one by one, its topics closed); the region's other brokers go
// on.
func (r *Region) StopBroker(ctx context.Context, i int) error { return r.brokers[i].Shutdown(ctx) }

// KillBroker stops broker i as a crash would (lifecycle Abort).
func (r *Region) KillBroker(i int) { r.brokers[i].Abort() }

// KillReplicator stops replicator worker i as a crash would.
func (r *Region) KillReplicator(i int) { r.workers[i].Abort() }

// RestartReplicator starts worker i again (after KillReplicator).
func (r *Region) RestartReplicator(ctx context.Context, i int) error {
	return r.workers[i].Start(ctx)
}

// Replicators returns the running workers (nil for killed ones).
func (r *Region) Replicators() []*replicator.Worker {
	out := make([]*replicator.Worker, len(r.workers))
	for i, w := range r.workers {
		out[i] = w.Worker()
	}
	return out
}

// RestartNATS stops the region's NATS server and starts it again on the
// same ports after down; its clients reconnect by themselves.
func (r *Region) RestartNATS(ctx context.Context, down time.Duration) error {
	r.nats.Shutdown(ctx)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	return r.nats.Start(ctx)
}

// StopRegion shuts region i down.
func (f *Federation) StopRegion(ctx context.Context, i int) error {
	return f.Regions[i].Shutdown(ctx)
}

// StopGlobal stops the global store; the regions keep serving from their
// caches.
func (f *Federation) StopGlobal() { f.global.Shutdown(context.Background()) }

// StartGlobal starts the global store again on its directory and ports.
func (f *Federation) StartGlobal(ctx context.Context) error { return f.global.Start(ctx) }

// StopBookie shuts bookie i down; StartBookie starts it again.
func (r *Region) StopBookie(ctx context.Context, i int) error { return r.bookies[i].Shutdown(ctx) }

// StartBookie starts bookie i again (after StopBookie).
func (r *Region) StartBookie(ctx context.Context, i int) error { return r.bookies[i].Start(ctx) }

// StopMetastore stops the region's embedded etcd; StartMetastore starts
// it again on its data.
func (r *Region) StopMetastore(ctx context.Context) error { return r.etcd.Shutdown(ctx) }

// StartMetastore starts the embedded etcd again.
func (r *Region) StartMetastore(ctx context.Context) error { return r.etcd.Start(ctx) }

// EnsureReplicated creates tenant (allowing clusters) and namespace
// tenant/ns replicated to clusters, unless they exist, and waits until
// every region sees it.
func (f *Federation) EnsureReplicated(ctx context.Context, tenant, ns string, clusters []string) error {
	pol := f.Regions[0].Policies()
	err := pol.CreateTenant(ctx, tenant, policy.TenantInfo{AdminRoles: []string{}, AllowedClusters: clusters})
	if err != nil && !errors.Is(err, policy.ErrExists) {
		return fmt.Errorf("federation: tenant %s: %w", tenant, err)
	}
	err = pol.CreateNamespace(ctx, tenant+"/"+ns, &policy.Policies{ReplicationClusters: clusters})
	if err != nil && !errors.Is(err, policy.ErrExists) {
		return fmt.Errorf("federation: namespace %s/%s: %w", tenant, ns, err)
	}
	return f.waitReplicated(ctx, tenant+"/"+ns, clusters)
}
