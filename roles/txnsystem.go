package roles

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

// TransactionSystemNamespace is the namespace whose bundles place the
// transaction coordinators (docs/transactions.md).
const TransactionSystemNamespace = "pulsar/system"

// EnsureTransactionSystem creates what a region with transactions on
// needs in the policy store: tenant pulsar and namespace pulsar/system
// joined by cluster (it holds no topics, so joining it replicates
// nothing), and the coordinator assign topic as a partitioned topic
// record of coordinators partitions (at least 1), so that lookups over
// HTTP find the coordinators as well. What exists is left alone.
func EnsureTransactionSystem(ctx context.Context, pol *policy.Store, cluster string, coordinators int) error {
	tenant, _, _ := strings.Cut(TransactionSystemNamespace, "/")
	if err := JoinNamespace(ctx, pol, tenant, TransactionSystemNamespace, cluster); err != nil {
		return err
	}
	name, err := topic.Parse(broker.TCAssignTopic)
	if err != nil {
		return err
	}
	if _, ok, err := pol.Partitions(ctx, name); err != nil || ok {
		return err
	}
	if err := pol.CreatePartitioned(ctx, name, max(1, coordinators)); err != nil && !errors.Is(err, policy.ErrExists) {
		return fmt.Errorf("transaction coordinator assign topic: %w", err)
	}
	return nil
}

// JoinNamespace creates tenant and namespace ns ("tenant/name") if they
// are missing and adds cluster to the tenant's allowed clusters and to
// the namespace's replication clusters, retrying until both hold it (two
// regions, or two brokers, may join at once) or ctx ends.
func JoinNamespace(ctx context.Context, pol *policy.Store, tenant, ns, cluster string) error {
	for {
		ti, err := pol.Tenant(ctx, tenant)
		switch {
		case errors.Is(err, policy.ErrNotFound):
			err = pol.CreateTenant(ctx, tenant, policy.TenantInfo{AdminRoles: []string{}, AllowedClusters: []string{cluster}})
		case err == nil && !slices.Contains(ti.AllowedClusters, cluster):
			ti.AllowedClusters = append(slices.Clone(ti.AllowedClusters), cluster)
			err = pol.UpdateTenant(ctx, tenant, ti)
		case err == nil:
			p, nerr := pol.Namespace(ctx, ns)
			switch {
			case errors.Is(nerr, policy.ErrNotFound):
				err = pol.CreateNamespace(ctx, ns, &policy.Policies{ReplicationClusters: []string{cluster}})
			case nerr == nil && !slices.Contains(p.ReplicationClusters, cluster):
				_, err = pol.UpdateNamespace(ctx, ns, func(p *policy.Policies) error {
					if !slices.Contains(p.ReplicationClusters, cluster) {
						p.ReplicationClusters = append(p.ReplicationClusters, cluster)
					}
					return nil
				})
			case nerr == nil:
				return nil // joined
			default:
				err = nerr
			}
		}
		if err != nil && !errors.Is(err, policy.ErrExists) && !errors.Is(err, policy.ErrConflict) {
			return fmt.Errorf("join namespace %s: %w", ns, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("join namespace %s: %w", ns, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
