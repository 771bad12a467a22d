package admin_test

import (
	"net/http/httptest"
	"testing"

	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/broker/adminapi"
)

// TestBrokersEndpoints covers the active brokers, the leader and the
// dynamic configuration, and that a refused change changes nothing.
func TestBrokersEndpoints(t *testing.T) {
	e := start(t)
	fb := newFakeBrokers(e.topics)
	srv := httptest.NewServer(admin.New(admin.Config{Policies: e.store, Broker: adminapi.Broker{Topics: e.topics, Brokers: fb}, Cluster: "standalone"}))
	t.Cleanup(srv.Close)
	e.srv = srv
	const b = "/admin/v2/brokers"
	e.run([]step{
		{"GET", b, "", 200, `["127.0.0.1:8080"]`, ""},
		{"GET", b + "/standalone", "", 200, `["127.0.0.1:8080"]`, ""},
		{"GET", b + "/leaderBroker", "", 200, `{"brokerId":"127.0.0.1:8080","serviceUrl":"http://127.0.0.1:8080"}`, ""},
		{"GET", b + "/configuration", "", 200, `"maxProducersPerTopic"`, ""},
		{"GET", b + "/configuration/values", "", 200, `{}`, ""},
		{"POST", b + "/configuration/maxProducersPerTopic/5", "", 200, "", ""},
		// A value with a '/' is one escaped path segment.
		{"POST", b + "/configuration/allowAutoSubscriptionCreation/%7B%22k%2F1%22%3A%22x%22%7D", "", 200, "", ""},
		{"GET", b + "/configuration/values", "", 200, `"allowAutoSubscriptionCreation":"{\"k/1\":\"x\"}"`, ""},
		{"GET", b + "/configuration/runtime", "", 200, `"maxProducersPerTopic":"5"`, ""},
		{"POST", b + "/configuration/allowAutoSubscriptionCreation/true", "", 200, "", ""},
	})
	e.topics.Calls()
	bad := []step{
		{"POST", b + "/configuration/brokerServicePort/6651", "", 412, "brokerServicePort is not a dynamic configuration", ""},
		{"POST", b + "/configuration/maxProducersPerTopic/-1", "", 412, "not an integer from 0", ""},
		{"POST", b + "/configuration/maxProducersPerTopic/many", "", 412, "not an integer from 0", ""},
		{"POST", b + "/configuration/maxConsumersPerTopic/99999999999", "", 412, "", ""},
		{"DELETE", b + "/configuration/brokerServicePort", "", 412, "not a dynamic configuration", ""},
		{"GET", b + "/configuration/values", "", 200, `{"allowAutoSubscriptionCreation":"true","maxProducersPerTopic":"5"}`, ""},
	}
	e.run(bad)
	if calls := e.topics.Calls(); len(calls) != 0 {
		t.Fatalf("refused changes were made: %v", calls)
	}
	e.run([]step{
		{"DELETE", b + "/configuration/maxProducersPerTopic", "", 204, "", ""},
		{"GET", b + "/configuration/values", "", 200, `{"allowAutoSubscriptionCreation":"true"}`, ""},
	})

	// Without a broker behind them the endpoints answer 503.
	e.srv = httptest.NewServer(admin.New(admin.Config{Policies: e.store, Broker: adminapi.Broker{Topics: e.topics}, Cluster: "standalone"}))
	t.Cleanup(e.srv.Close)
	e.run([]step{
		{"GET", b + "/leaderBroker", "", 503, "", ""},
		{"POST", b + "/configuration/maxProducersPerTopic/5", "", 503, "", ""},
	})
}
