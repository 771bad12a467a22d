// Package ownership owns broker registration and namespace-bundle ownership
// in a region's etcd: which brokers are alive, which broker serves which
// bundle, and where a bundle with no owner is placed.
//
// A broker registers under /isobar/<region>/brokers/<id> with an etcd
// lease and owns a bundle by holding /isobar/<region>/ownership/<tenant>/
// <namespace>/<bundle> under the same lease, so everything a broker owns
// vanishes when it dies or is cut off for longer than the lease TTL.
// Placement of an unowned bundle is the pure function Place. The formats
// and the failure behaviour are described in docs/ownership.md.
package ownership
