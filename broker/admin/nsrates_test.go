package admin_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// A namespace's rates, through the pulsaradmin client: set, read back,
// stored by cluster under Pulsar's names, removed.
func TestNamespaceRates(t *testing.T) {
	e := start(t)
	c, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: e.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	ns, _ := utils.GetNamespaceName("public/default")
	dr := utils.DispatchRate{DispatchThrottlingRateInMsg: 100, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 2}
	check("set dispatch", c.Namespaces().SetDispatchRate(*ns, dr))
	check("set subscription dispatch", c.Namespaces().SetSubscriptionDispatchRate(*ns, utils.DispatchRate{DispatchThrottlingRateInMsg: 10, DispatchThrottlingRateInByte: 1000, RatePeriodInSecond: 1}))
	check("set replicator dispatch", c.Namespaces().SetReplicatorDispatchRate(*ns, utils.DispatchRate{DispatchThrottlingRateInMsg: 7, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}))
	check("set publish", c.Namespaces().SetPublishRate(*ns, utils.PublishRate{PublishThrottlingRateInMsg: 50, PublishThrottlingRateInByte: -1}))
	check("set subscribe", c.Namespaces().SetSubscribeRate(*ns, utils.SubscribeRate{SubscribeThrottlingRatePerConsumer: 3, RatePeriodInSecond: 30}))

	got, err := c.Namespaces().GetDispatchRate(*ns)
	check("get dispatch", err)
	if got != dr {
		t.Fatalf("dispatch rate %+v, want %+v", got, dr)
	}
	if got, err := c.Namespaces().GetSubscriptionDispatchRate(*ns); err != nil || got.DispatchThrottlingRateInByte != 1000 {
		t.Fatalf("subscription dispatch rate %+v, %v", got, err)
	}
	if got, err := c.Namespaces().GetReplicatorDispatchRate(*ns); err != nil || got.DispatchThrottlingRateInMsg != 7 {
		t.Fatalf("replicator dispatch rate %+v, %v", got, err)
	}
	if got, err := c.Namespaces().GetPublishRate(*ns); err != nil || got.PublishThrottlingRateInMsg != 50 {
		t.Fatalf("publish rate %+v, %v", got, err)
	}
	if got, err := c.Namespaces().GetSubscribeRate(*ns); err != nil || got.SubscribeThrottlingRatePerConsumer != 3 {
		t.Fatalf("subscribe rate %+v, %v", got, err)
	}
	pol, err := e.store.Namespace(context.Background(), "public/default")
	check("namespace", err)
	if pol.TopicDispatchRate["standalone"] != (policy.DispatchRate{DispatchThrottlingRateInMsg: 100, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 2}) || pol.PublishMaxMessageRate["standalone"].PublishThrottlingRateInMsg != 50 || pol.ClusterSubscribeRate["standalone"].SubscribeThrottlingRatePerConsumer != 3 {
		t.Fatalf("stored rates %+v", pol.NamespaceRates)
	}

	// Bad rates are refused.
	for path, body := range map[string]string{
		"dispatchRate":           `{"dispatchThrottlingRateInMsg":-5}`,
		"publishRate":            `{"publishThrottlingRateInByte":-2}`,
		"subscribeRate":          `{"subscribeThrottlingRatePerConsumer":1,"ratePeriodInSecond":-1}`,
		"replicatorDispatchRate": `"fast"`,
	} {
		if status, _, _ := e.do(http.MethodPost, "/admin/v2/namespaces/public/default/"+path, body); status != http.StatusBadRequest {
			t.Errorf("POST %s %s: %d, want 400", path, body, status)
		}
	}

	for _, path := range []string{"dispatchRate", "publishRate"} {
		if status, _, _ := e.do(http.MethodDelete, "/admin/v2/namespaces/public/default/"+path, ""); status != http.StatusNoContent {
			t.Fatalf("DELETE %s: %d", path, status)
		}
	}
	pol, err = e.store.Namespace(context.Background(), "public/default")
	check("namespace", err)
	if len(pol.TopicDispatchRate) != 0 || len(pol.PublishMaxMessageRate) != 0 || len(pol.SubscriptionDispatchRate) != 1 {
		t.Fatalf("after removal: %+v", pol.NamespaceRates)
	}
}
