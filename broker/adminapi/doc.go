// Package adminapi owns what the admin REST API's server (broker/admin),
// the broker that implements it, and the admin API's clients share: the
// data types of its answers, in Pulsar's admin JSON (stats, message ids,
// lookups, broker and bookie lists), the errors an implementation answers
// with (tied to errkind's kinds), and the interfaces the server needs of
// the broker, gathered in Broker (Topics, Brokers, and the parts a broker
// may leave out, nil when it does).
// It imports no net/http and no server code: the broker implements these
// interfaces without linking its HTTP layer, and region hands the
// implementation to the server.
package adminapi
