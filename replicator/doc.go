// Package replicator streams a region's topics to the other regions of
// their namespaces' replication clusters, over NATS (docs/replication.md).
//
// A Worker runs both sides. The source side consumes each (topic, remote)
// stream's replication cursor, isobar.repl.<remote>, from the local
// brokers over the Pulsar protocol (package pulsarconn), packs entries
// into zstd frames (package frame) and sends each frame as a NATS request
// to the remote region; only when the remote replies does it acknowledge
// the entries, and only then does it send the next frame of that stream
// (one frame in flight per stream keeps per-source order at the
// destination). While a frame waits for its reply the stream probes the
// remote's sinks; when none is reachable it gives the frame up at once and
// sends it again as soon as one answers a probe. The sink side answers
// those requests in its own region
// through the NATS queue group isobar-sink: it checks the whole frame,
// then appends the entries through a replicator producer, marked
// replicated from the source; the broker drops entries whose source
// position it already stored, so a frame applied twice stores nothing
// twice.
//
// A worker reaches NATS, its region's brokers and the policy store only
// through small interfaces (Transport, Source and Cursor, Sink and
// Writer, Policies), which NATSTransport, a pulsarconn.Client and a
// *policy.Store implement; the rules that need no I/O (which entries
// go, how a frame is gathered, backoff and probe pacing, what a sink
// accepts and how it marks entries) are plain functions beside them.
// The package's tests run both sides on in-memory fakes.
//
// Workers are stateless: streams are spread over the live workers of a
// region (registered under leases in the local etcd) by rendezvous
// hashing, and the Failover subscription keeps a stream with one active
// consumer while the assignment moves.
package replicator
