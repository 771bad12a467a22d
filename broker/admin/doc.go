// Package admin owns the broker's HTTP admin API: the subset of Pulsar's
// v2 admin REST API (clusters, tenants, namespaces and their policies,
// topics, partitioned topics, subscriptions, lookup, brokers and health,
// bookies' racks)
// that pulsaradmin, pulsar-admin and the Pulsar client test suite use,
// with Pulsar's paths, JSON shapes and status codes. Policies live in
// globalconfig/policy; everything that needs a running broker goes
// through the interfaces of package broker/adminapi, which also holds the
// API's data types (the broker and the CLI use them without linking this
// server). docs/admin.md lists the endpoints and decisions.
package admin
