// Package policy owns the global configuration store of clusters, tenants,
// namespace policies and partitioned-topic metadata: typed, validated
// reads and compare-and-swap writes over the metadata store, with values
// kept as JSON in Pulsar's field names so the admin API can serve them
// as-is.
//
// # Keys
//
//	/isobar-global/clusters/<cluster>                                 ClusterData
//	/isobar-global/tenants/<tenant>                                   TenantInfo
//	/isobar-global/namespaces/<tenant>/<namespace>                    Policies
//	/isobar-global/partitioned-topics/<tenant>/<ns>/<domain>/<topic>  PartitionedMetadata
//
// # Invariants
//
// A namespace's tenant exists when the namespace is created; a tenant with
// namespaces cannot be deleted; a namespace holding partitioned topics (or
// topics the broker reports through Config.HasTopics) cannot be deleted; a
// partitioned topic's namespace exists when it is created. The cross-key
// checks run inside etcd transactions (comparing the parent's revision, or
// that no key exists under the child prefix), so concurrent creates and
// deletes cannot leave orphans. Replication clusters must exist and be
// allowed by the tenant; a cluster named by a tenant or a namespace cannot
// be deleted.
package policy
