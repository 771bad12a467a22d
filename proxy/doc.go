// Package proxy is Isobar's proxy: a stateless front for one region's
// brokers, on the Pulsar binary protocol and on HTTP, as Apache Pulsar's
// proxy is (docs/proxy.md).
//
// Clients connect to the proxy only. A connection whose CONNECT names no
// broker is a lookup connection: the proxy answers CONNECT itself and
// forwards LOOKUP, PARTITIONED_METADATA, GET_TOPICS_OF_NAMESPACE and
// GET_SCHEMA to a live broker of the region (found in the region's broker
// registrations, which the region passes in as Deps.Brokers), following the brokers'
// redirects itself, and answers lookups with proxy_through_service_url
// set, so the client connects to the proxy again with CONNECT naming the
// owner (proxy_to_broker_url). For such a connection the proxy dials that
// broker, if it is a registered broker of the region (no open relay),
// replays the CONNECT and then copies bytes both ways. HTTP requests (the
// admin REST API, HTTP lookups) are forwarded to a broker, the proxy
// following the brokers' 307 redirects itself.
//
// With authentication on, the proxy checks the client's credentials and
// connects to brokers with its own, naming the client's role
// (original_principal, the X-Original-Principal header); the brokers
// accept that from the roles of their auth.proxyRoles only and authorize
// the client's role. With it off, the client's own credentials go to the
// brokers unchanged.
//
// The proxy keeps no state but its connections: several can run behind
// one address.
package proxy
