// Package pulsarconn is a minimal client of the Pulsar binary protocol for
// Isobar's replicator workers. It owns the client side of broker
// connections (one per broker address, CONNECT handshake, keep-alive,
// topic lookup with redirects), durable consumers that hand out raw entries
// ([u32 metadataSize][MessageMetadata][payload], batches left packed) and
// acknowledge them cumulatively, and producers that publish such raw entries
// unchanged. It is built on the codec in wire, not on
// pulsar-client-go, so that entries cross regions byte for byte.
//
// There is no transparent reconnection: when the broker closes a producer
// or consumer, or a connection is lost, the object fails with ErrClosed and
// the caller creates a new one.
package pulsarconn
