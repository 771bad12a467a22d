package policy_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// FuzzPoliciesJSON checks that any namespace body the decoder accepts
// survives a round trip unchanged (known fields and Extra alike).
func FuzzPoliciesJSON(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"auth_policies":{"namespace_auth":{"anonymous":["produce"]}},"replication_clusters":["standalone"]}`,
		`{"retention_policies":{"retentionTimeInMinutes":1,"retentionSizeInMB":2},"message_ttl_in_seconds":3}`,
		`{"backlog_quota_map":{"destination_storage":{"limit":"10","policy":"producer_request_hold"}}}`,
		`{"bundles":{"numBundles":2,"boundaries":["0x00000000","0x7fffffff","0xffffffff"]},"deduplicationEnabled":true}`,
		`{"autoTopicCreationOverride":{"allowAutoTopicCreation":true,"topicType":"partitioned","defaultNumPartitions":2}}`,
		`{"failover":{"mode":"active-standby","primary":"r0","epoch":2},"topicFailover":{"orders":{"mode":"active-standby","primary":"r1","epoch":3}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p policy.Policies
		if json.Unmarshal(b, &p) != nil {
			return
		}
		b1, err := json.Marshal(&p)
		if err != nil {
			t.Fatalf("marshal %q: %v", b, err)
		}
		var q policy.Policies
		if err := json.Unmarshal(b1, &q); err != nil {
			t.Fatalf("re-decode %s: %v", b1, err)
		}
		b2, err := json.Marshal(&q)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("round trip changed:\n%s\n%s", b1, b2)
		}
	})
}

func TestPoliciesCaseFolding(t *testing.T) {
	var p policy.Policies
	if err := json.Unmarshal([]byte(`{"Replication_Clusters":["a"],"other":1}`), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.ReplicationClusters) != 1 || len(p.Extra) != 1 || p.Extra["other"] == nil {
		t.Fatalf("policies = %+v", p)
	}
}

// FuzzTopicPoliciesJSON checks that a topic policies record the decoder
// accepts survives a round trip unchanged, and that checking and merging
// it do not panic.
func FuzzTopicPoliciesJSON(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"replication_clusters":["a"],"maxProducerPerTopic":3,"messageTTLInSeconds":60}`,
		`{"retentionPolicies":{"retentionTimeInMinutes":-1,"retentionSizeInMB":10},"maxMessageSize":1024}`,
		`{"dispatchRate":{"dispatchThrottlingRateInMsg":-1,"ratePeriodInSecond":1},"publishRate":{"publishThrottlingRateInMsg":5}}`,
		`{"delayedDelivery":{"active":true,"tickTime":1000,"maxDelayInMillis":60000}}`,
		`{"persistence":{"bookkeeperEnsemble":3,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":2,"managedLedgerMaxMarkDeleteRate":1.5}}`,
		`{"offloadPolicies":{"managedLedgerOffloadDriver":"aws-s3"},"schemaCompatibilityStrategy":"FULL"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p policy.TopicPolicies
		if json.Unmarshal(b, &p) != nil {
			return
		}
		_ = p.IsZero()
		_ = p.Over(policy.TopicPolicies{MaxProducers: new(int)})
		b1, err := json.Marshal(&p)
		if err != nil {
			return // a raw offload value that is not JSON: refused on write
		}
		var q policy.TopicPolicies
		if err := json.Unmarshal(b1, &q); err != nil {
			t.Fatalf("re-decode %s: %v", b1, err)
		}
		b2, err := json.Marshal(&q)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("round trip changed:\n%s\n%s", b1, b2)
		}
	})
}
