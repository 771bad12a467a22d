// Package topic owns the names of topics and namespaces and the mapping of
// a topic to its namespace bundle. It is pure: no I/O, no clock, no state.
//
// # Names
//
// Parse accepts the forms the Pulsar client sends:
//
//	persistent://tenant/namespace/topic       fully qualified
//	non-persistent://tenant/namespace/topic   fully qualified, non-persistent
//	tenant/namespace/topic                    short: persistent
//	topic                                     short: persistent://public/default/topic
//
// The legacy (v1) four-part form that carries a cluster,
// persistent://tenant/cluster/namespace/topic (or tenant/cluster/ns/topic),
// is rejected: Isobar has only v2 namespaces. Because the local name may not
// contain '/', any name with more than three parts after the domain is
// treated as that legacy form and rejected.
//
// A local name ending in "-partition-N", N a decimal int32 without sign or
// leading zeros, names partition N of a partitioned topic; any other suffix
// (such as "-partition-01" or "-partition-x") is an ordinary name, as in
// Pulsar's TopicName.getPartitionIndex.
//
// # Validation
//
// Every error wraps ErrInvalidName and quotes the input.
//
//   - Tenant and namespace: 1 to MaxSegmentLen bytes of [-=:.A-Za-z0-9_]
//     (Pulsar's NamedEntity rule), not "." or ".."; "tenant/namespace" at
//     most MaxNamespaceLen bytes, so that its topics can be stored.
//   - Local topic name: 1 or more bytes of [A-Za-z0-9_] and
//     -=:.%~!@$&*+,;()' (no '/', no spaces or control characters, no
//     non-ASCII, and none of the URL-special characters ? # \ " < > ` { } | ^
//     [ ]), not "." or "..". Pulsar itself checks local names less; this set
//     is deliberately conservative and still accepts the names found in the
//     Pulsar Go client's test suite (my-topic-<n>, names with '.' and ':').
//   - The name storage keeps the topic under (StorageName,
//     tenant/namespace/persistent/local) is at most MaxNameLen bytes, the
//     managed ledger's limit: a name is valid everywhere or nowhere. A
//     partitioned topic also needs room for its partitions' suffixes
//     (ValidPartitions).
//
// # Bundles
//
// A namespace's hash space [0, 2^32) is split into bundles. Bundles(n)
// splits it into n ranges of 2^32/n (rounded down) hashes, the last one
// ending at 0xffffffff inclusive; Bundle.String formats a range the way
// Pulsar names bundles ("0x00000000_0x40000000"). BundleFor places a topic
// by Hash: CRC-32 (IEEE) of the UTF-8 bytes of the topic's canonical full
// name, as Pulsar's namespace service does (so a topic lands in the bundle
// Pulsar would choose), and each partition of a partitioned topic is placed
// by its own name. Murmur3 (x86_32) is provided for message-key hashing
// (Key_Shared, key-based routing), where Pulsar uses it.
package topic
