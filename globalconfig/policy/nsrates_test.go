package policy_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// A namespace's rates are read and written under Pulsar's names, by
// cluster, and not kept as unknown fields.
func TestNamespaceRatesJSON(t *testing.T) {
	const doc = `{"publishMaxMessageRate":{"west":{"publishThrottlingRateInMsg":10,"publishThrottlingRateInByte":-1}},
		"clusterDispatchRate":{"west":{"dispatchThrottlingRateInMsg":5,"dispatchThrottlingRateInByte":-1,"ratePeriodInSecond":1,"relativeToPublishRate":false}},
		"clusterSubscribeRate":{"west":{"subscribeThrottlingRatePerConsumer":2,"ratePeriodInSecond":30}},
		"latency_stats_sample_rate":{}}`
	var p policy.Policies
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		t.Fatal(err)
	}
	if p.PublishMaxMessageRate["west"].PublishThrottlingRateInMsg != 10 || p.ClusterSubscribeRate["west"].SubscribeThrottlingRatePerConsumer != 2 {
		t.Fatalf("rates %+v", p.NamespaceRates)
	}
	if d := p.DispatchRateIn("west"); d == nil || d.DispatchThrottlingRateInMsg != 5 {
		t.Fatalf("dispatch rate from clusterDispatchRate: %+v", d)
	}
	if p.DispatchRateIn("east") != nil || policy.RateIn(p.PublishMaxMessageRate, "east") != nil {
		t.Fatal("another cluster has rates")
	}
	if _, ok := p.Extra["publishMaxMessageRate"]; ok || len(p.Extra) != 1 {
		t.Fatalf("extra %v", p.Extra)
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"publishMaxMessageRate":{"west"`, `"clusterDispatchRate":{"west"`, `"clusterSubscribeRate":{"west"`, `"latency_stats_sample_rate":{}`} {
		if !strings.Contains(string(out), f) {
			t.Fatalf("%s lacks %s", out, f)
		}
	}
}

func TestNamespaceRatesValidated(t *testing.T) {
	s := newStore(t, policy.Config{LocalCluster: "test"})
	ctx := context.Background()
	must(t, s.EnsureStandalone(ctx, "test", policy.ClusterData{ServiceURL: "http://127.0.0.1:1"}))
	must(t, s.CreateNamespace(ctx, "public/r", nil))
	for _, set := range []func(*policy.Policies){
		func(p *policy.Policies) {
			p.TopicDispatchRate = map[string]policy.DispatchRate{"test": {DispatchThrottlingRateInMsg: -2}}
		},
		func(p *policy.Policies) {
			p.PublishMaxMessageRate = map[string]policy.PublishRate{"test": {PublishThrottlingRateInByte: -3}}
		},
		func(p *policy.Policies) {
			p.ClusterSubscribeRate = map[string]policy.SubscribeRate{"test": {RatePeriodInSecond: -1}}
		},
		func(p *policy.Policies) {
			p.ReplicatorDispatchRate = map[string]policy.DispatchRate{"no/such": {}}
		},
	} {
		_, err := s.UpdateNamespace(ctx, "public/r", func(p *policy.Policies) error { set(p); return nil })
		wantErr(t, err, policy.ErrInvalid)
	}
}
