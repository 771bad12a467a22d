package admin_test

import (
	"net/http/httptest"
	"testing"

	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/broker/adminapi"
)

// A part of the broker the server was not given (adminapi.Broker's nil
// fields, and the server's other dependencies) makes its endpoints answer
// as before their routes were chosen by the part's presence: 503, or 405
// for compaction and subscription properties, each with its reason.
func TestAbsentParts(t *testing.T) {
	e := start(t) // topics (a fake with no optional part) and bookies' racks
	const tp = "/admin/v2/persistent/public/default/t"
	e.run([]step{
		{"PUT", tp, "", 204, "", ""},
		{"GET", "/admin/v2/brokers/leaderBroker", "", 503, "the brokers' configuration is not served by this broker", ""},
		{"GET", "/admin/v2/brokers/configuration", "", 503, "the brokers' configuration is not served by this broker", ""},
		{"DELETE", "/admin/v2/brokers/configuration/maxProducersPerTopic", "", 503, "the brokers' configuration is not served by this broker", ""},
		{"GET", "/admin/v2/broker-stats/load-report", "", 503, "this broker publishes no load report", ""},
		{"PUT", tp + "/compaction", "", 405, "this broker does not compact topics", ""},
		{"GET", tp + "/compaction", "", 405, "this broker does not compact topics", ""},
		{"GET", tp + "/subscription/s/properties", "", 405, "subscription properties are not kept here", ""},
		{"PUT", tp + "/subscription/s/properties", `{"a":"b"}`, 405, "subscription properties are not kept here", ""},
		{"PUT", tp + "/subscription/s", `{"ledgerId":-1,"entryId":-1,"properties":{"a":"b"}}`, 405, "subscription properties are not kept here", ""},
		{"PUT", "/admin/v2/namespaces/public/default/unload", "", 503, "namespace bundles are not served by this broker", ""},
		{"GET", "/lookup/v2/topic/persistent/public/default/t/bundle", "", 503, "namespace bundles are not served by this broker", ""},
		{"GET", "/admin/v2/schemas/public/default/t/schema", "", 503, "the schema registry is not available", ""},
		{"GET", "/admin/v2/bookies/decommissioned", "", 503, "automatic recovery is not served by this broker", ""},
		{"POST", "/admin/v2/bookies/decommission/b1:3181", "", 503, "automatic recovery is not served by this broker", ""},
		{"GET", "/admin/v3/transactions/transactionMetadata/0/1", "", 503, "this broker describes no transactions", ""},
		{"GET", "/admin/v3/transactions/coordinatorStats", "", 503, "this broker describes no transactions", ""},
		{"GET", "/admin/v3/transactions/slowTransactions/1000?coordinatorId=0", "", 503, "this broker describes no transactions", ""},
		{"GET", "/admin/v3/transactions/transactionBufferStats/public/default/t", "", 503, "this broker describes no transactions", ""},
		{"GET", "/admin/v3/transactions/transactionInBufferStats/public/default/t/0/1", "", 503, "this broker describes no transactions", ""},
		{"GET", "/admin/v3/transactions/pendingAckStats/public/default/t/s", "", 503, "this broker describes no transactions", ""},
		{"GET", "/admin/v3/transactions/transactionInPendingAckStats/public/default/t/s/0/1", "", 503, "this broker describes no transactions", ""},
	})

	// No configuration store, no topics, no bookies.
	bare := httptest.NewServer(admin.New(admin.Config{Cluster: "standalone"}))
	t.Cleanup(bare.Close)
	(&env{t: t, srv: bare}).run([]step{
		{"GET", "/admin/v2/clusters", "", 503, "the configuration store is not available", ""},
		{"PUT", "/admin/v2/tenants/x", "{}", 503, "the configuration store is not available", ""},
		{"GET", "/admin/v2/namespaces/public/default/permissions", "", 503, "the configuration store is not available", ""},
		{"GET", "/admin/v2/namespaces/public/default/topics", "", 503, "the configuration store is not available", ""},
		{"GET", "/admin/v2/persistent/public/default", "", 503, "the configuration store is not available", ""},
		{"GET", "/admin/v2/persistent/public/default/partitioned", "", 503, "the configuration store is not available", ""},
		{"GET", tp + "/stats", "", 503, "the configuration store is not available", ""},
		{"GET", tp + "/permissions", "", 503, "the configuration store is not available", ""},
		{"GET", "/admin/v2/schemas/public/default/t/schema", "", 503, "the configuration store is not available", ""},
		{"GET", "/admin/v2/brokers/standalone", "", 503, "the configuration store is not available", ""},
		{"GET", "/admin/v2/brokers", "", 503, "topics are not served by this broker", ""},
		{"GET", "/admin/v2/bookies/racks-info", "", 503, "the bookies' rack information is not served by this broker", ""},
		{"GET", "/admin/v2/bookies/all", "", 503, "the bookies' rack information is not served by this broker", ""},
	})

	// A configuration store but no topics.
	notopics := httptest.NewServer(admin.New(admin.Config{Policies: e.store, Broker: adminapi.Broker{}, Cluster: "standalone"}))
	t.Cleanup(notopics.Close)
	(&env{t: t, srv: notopics}).run([]step{
		{"GET", tp + "/stats", "", 503, "topics are not served by this broker", ""},
		{"GET", "/admin/v2/persistent/public/default", "", 503, "topics are not served by this broker", ""},
		{"GET", "/admin/v2/namespaces/public/default/topics", "", 503, "topics are not served by this broker", ""},
		{"GET", "/admin/v2/brokers/standalone", "", 503, "topics are not served by this broker", ""},
	})
}
