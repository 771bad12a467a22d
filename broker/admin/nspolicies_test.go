package admin_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNamespaceSettings sets, reads and removes each namespace limit and
// setting, with Pulsar's methods, and what GET answers when one is not set.
func TestNamespaceSettings(t *testing.T) {
	e := start(t)
	const ns = "/admin/v2/namespaces/public/default"
	e.run([]step{
		// Unset: 204 (pulsaradmin reads -1 or nil), or Pulsar's default.
		{"GET", ns + "/maxProducersPerTopic", "", 204, "", ""},
		{"GET", ns + "/maxConsumersPerTopic", "", 204, "", ""},
		{"GET", ns + "/maxConsumersPerSubscription", "", 204, "", ""},
		{"GET", ns + "/maxTopicsPerNamespace", "", 200, "0", ""},
		{"GET", ns + "/subscriptionExpirationTime", "", 204, "", ""},
		{"GET", ns + "/compactionThreshold", "", 204, "", ""},
		{"GET", ns + "/offloadThreshold", "", 200, "-1", ""},
		{"GET", ns + "/offloadThresholdInSeconds", "", 200, "-1", ""},
		{"GET", ns + "/offloadDeletionLagMs", "", 204, "", ""},
		{"GET", ns + "/schemaCompatibilityStrategy", "", 200, `"UNDEFINED"`, ""},
		{"GET", ns + "/properties", "", 200, "{}", ""},
		{"GET", ns + "/persistence", "", 204, "", ""},
		{"GET", ns + "/persistence/bookieAffinity", "", 204, "", ""},
		{"GET", ns + "/autoTopicCreation", "", 204, "", ""},
		{"GET", ns + "/maxUnackedMessagesPerConsumer", "", 204, "", ""},
		{"GET", ns + "/maxUnackedMessagesPerSubscription", "", 204, "", ""},
		{"GET", ns + "/deduplicationSnapshotInterval", "", 204, "", ""},
		{"GET", ns + "/delayedDelivery", "", 204, "", ""},

		{"POST", ns + "/maxUnackedMessagesPerConsumer", "100", 204, "", ""},
		{"GET", ns + "/maxUnackedMessagesPerConsumer", "", 200, "100", ""},
		{"POST", ns + "/maxUnackedMessagesPerSubscription", "400", 204, "", ""},
		{"GET", ns + "/maxUnackedMessagesPerSubscription", "", 200, "400", ""},
		{"POST", ns + "/deduplicationSnapshotInterval", "30", 204, "", ""},
		{"GET", ns + "/deduplicationSnapshotInterval", "", 200, "30", ""},
		{"POST", ns + "/delayedDelivery", `{"active":false,"tickTime":500,"maxDeliveryDelayInMillis":60000}`, 204, "", ""},
		{"GET", ns + "/delayedDelivery", "", 200, `"active":false,"tickTime":500,"maxDeliveryDelayInMillis":60000`, ""},
		{"POST", ns + "/delayedDelivery", `{"active":true,"tickTime":1000,"maxDelayInMillis":5000}`, 204, "", ""}, // pulsaradmin's name
		{"GET", ns + "/delayedDelivery", "", 200, `"maxDeliveryDelayInMillis":5000`, ""},

		{"POST", ns + "/maxProducersPerTopic", "5", 204, "", ""},
		{"GET", ns + "/maxProducersPerTopic", "", 200, "5", ""},
		{"DELETE", ns + "/maxProducersPerTopic", "", 204, "", ""},
		{"GET", ns + "/maxProducersPerTopic", "", 204, "", ""},
		{"POST", ns + "/maxConsumersPerTopic", "0", 204, "", ""},
		{"GET", ns + "/maxConsumersPerTopic", "", 200, "0", ""},
		{"POST", ns + "/maxConsumersPerSubscription", "3", 204, "", ""},
		{"POST", ns + "/maxTopicsPerNamespace", "100", 204, "", ""},
		{"GET", ns + "/maxTopicsPerNamespace", "", 200, "100", ""},
		{"POST", ns + "/subscriptionExpirationTime", "60", 204, "", ""},
		{"PUT", ns + "/compactionThreshold", "1048576", 204, "", ""},
		{"GET", ns + "/compactionThreshold", "", 200, "1048576", ""},
		{"PUT", ns + "/offloadThreshold", "-1", 204, "", ""},
		{"PUT", ns + "/offloadThresholdInSeconds", "3600", 204, "", ""},
		{"PUT", ns + "/offloadDeletionLagMs", "0", 204, "", ""},
		{"GET", ns + "/offloadDeletionLagMs", "", 200, "0", ""},
		{"PUT", ns + "/schemaCompatibilityStrategy", `"FULL"`, 204, "", ""},
		{"GET", ns + "/schemaCompatibilityStrategy", "", 200, `"FULL"`, ""},
		{"PUT", ns + "/schemaCompatibilityStrategy", `backward_transitive`, 204, "", ""},
		{"GET", ns + "/schemaCompatibilityStrategy", "", 200, `"BACKWARD_TRANSITIVE"`, ""},
		{"PUT", ns + "/schemaCompatibilityStrategy", `"UNDEFINED"`, 204, "", ""},
		{"GET", ns + "/schemaCompatibilityStrategy", "", 200, `"UNDEFINED"`, ""},
		{"PUT", ns + "/properties", `{"a":"1","b":"2"}`, 204, "", ""},
		{"PUT", ns + "/properties", `{"b":"3"}`, 204, "", ""}, // merged
		{"GET", ns + "/properties", "", 200, `{"a":"1","b":"3"}`, ""},
		{"PUT", ns + "/property/c/4", "", 204, "", ""},
		{"GET", ns + "/property/c", "", 200, `"4"`, ""},
		{"DELETE", ns + "/property/c", "", 204, "", ""},
		{"GET", ns + "/property/c", "", 204, "", ""},
		{"DELETE", ns + "/properties", "", 204, "", ""},
		{"GET", ns + "/properties", "", 200, "{}", ""},
		{"POST", ns + "/persistence", `{"bookkeeperEnsemble":3,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":2,"managedLedgerMaxMarkDeleteRate":1.5}`, 204, "", ""},
		{"GET", ns + "/persistence", "", 200, `"bookkeeperEnsemble":3`, ""},
		{"POST", ns + "/persistence/bookieAffinity", `{"bookkeeperAffinityGroupPrimary":"p","bookkeeperAffinityGroupSecondary":"s"}`, 204, "", ""},
		{"GET", ns + "/persistence/bookieAffinity", "", 200, `"bookkeeperAffinityGroupPrimary":"p"`, ""},
		{"DELETE", ns + "/persistence/bookieAffinity", "", 204, "", ""},
		{"GET", ns + "/persistence/bookieAffinity", "", 204, "", ""},
		{"DELETE", ns + "/persistence", "", 204, "", ""},
		{"GET", ns + "/persistence", "", 204, "", ""},
	})
	// The whole document carries them in Pulsar's field names.
	_, body, _ := e.do("GET", ns, "")
	for _, f := range []string{`"max_consumers_per_subscription":3`, `"max_topics_per_namespace":100`, `"subscription_expiration_time_minutes":60`,
		`"compaction_threshold":1048576`, `"offload_threshold":-1`, `"offload_threshold_in_seconds":3600`, `"offload_deletion_lag_ms":0`,
		`"max_unacked_messages_per_consumer":100`, `"max_unacked_messages_per_subscription":400`, `"deduplicationSnapshotIntervalSeconds":30`,
		`"delayed_delivery_policies":{"active":true,"tickTime":1000,"maxDeliveryDelayInMillis":5000`} {
		if !strings.Contains(body, f) {
			t.Errorf("namespace document lacks %s: %s", f, body)
		}
	}
	if strings.Contains(body, "schema_compatibility_strategy") || strings.Contains(body, "bookieAffinityGroups") {
		t.Errorf("unset settings in the namespace document: %s", body)
	}
	e.run([]step{
		{"DELETE", ns + "/maxUnackedMessagesPerConsumer", "", 204, "", ""},
		{"GET", ns + "/maxUnackedMessagesPerConsumer", "", 204, "", ""},
		{"DELETE", ns + "/maxUnackedMessagesPerSubscription", "", 204, "", ""},
		{"GET", ns + "/maxUnackedMessagesPerSubscription", "", 204, "", ""},
		{"DELETE", ns + "/deduplicationSnapshotInterval", "", 204, "", ""},
		{"GET", ns + "/deduplicationSnapshotInterval", "", 204, "", ""},
		{"DELETE", ns + "/delayedDelivery", "", 204, "", ""},
		{"GET", ns + "/delayedDelivery", "", 204, "", ""},
	})
}

// TestNamespaceSettingsBadInput sends bad input to each new endpoint: each
// is refused with a reason (Pulsar's where its clients compare it) and
// changes nothing.
func TestNamespaceSettingsBadInput(t *testing.T) {
	e := start(t)
	const ns = "/admin/v2/namespaces/public/default"
	e.run([]step{
		{"POST", ns + "/maxProducersPerTopic", "7", 204, "", ""},
		{"PUT", ns + "/properties", `{"keep":"me"}`, 204, "", ""},
	})
	bad := []step{
		{"POST", ns + "/maxProducersPerTopic", "-1", 412, `"maxProducersPerTopic must be 0 or more"`, ""},
		{"POST", ns + "/maxProducersPerTopic", "2147483648", 412, "at most", ""},
		{"POST", ns + "/maxProducersPerTopic", `"x"`, 400, "", ""},
		{"POST", ns + "/maxProducersPerTopic", "", 400, "empty body", ""},
		{"POST", ns + "/maxConsumersPerTopic", "-1", 412, `"maxConsumersPerTopic must be 0 or more"`, ""},
		{"POST", ns + "/maxConsumersPerSubscription", "-5", 412, `"maxConsumersPerSubscription must be 0 or more"`, ""},
		{"POST", ns + "/maxConsumersPerSubscription", "1.5", 400, "", ""},
		{"POST", ns + "/maxTopicsPerNamespace", "-1", 412, `"maxTopicsPerNamespace must be 0 or more"`, ""},
		{"POST", ns + "/subscriptionExpirationTime", "-60", 412, `"Invalid value for subscription expiration time"`, ""},
		{"PUT", ns + "/compactionThreshold", "-1", 412, `"compactionThreshold must be 0 or more"`, ""},
		{"PUT", ns + "/offloadThreshold", "-2", 412, "", ""},
		{"PUT", ns + "/offloadThresholdInSeconds", "-60", 412, `"Invalid value for offloadThresholdInSecond"`, ""},
		{"PUT", ns + "/offloadDeletionLagMs", "-1", 412, "", ""},
		{"PUT", ns + "/offloadDeletionLagMs", "{}", 400, "", ""},
		{"PUT", ns + "/schemaCompatibilityStrategy", `"SIDEWAYS"`, 400, "SIDEWAYS", ""},
		{"PUT", ns + "/schemaCompatibilityStrategy", `42`, 400, "", ""},
		{"PUT", ns + "/properties", `{"a":1}`, 400, "", ""},
		{"PUT", ns + "/properties", `{"":"v"}`, 400, "key", ""},
		{"PUT", ns + "/properties", `[`, 400, "", ""},
		{"POST", ns + "/persistence", `{"bookkeeperEnsemble":1,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":1}`, 400, "bookkeeperEnsemble", ""},
		{"POST", ns + "/persistence", `{"bookkeeperEnsemble":2,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":0}`, 400, "", ""},
		{"POST", ns + "/persistence", `{"bookkeeperEnsemble":1,"bookkeeperWriteQuorum":1,"bookkeeperAckQuorum":1,"managedLedgerMaxMarkDeleteRate":-1}`, 400, "managedLedgerMaxMarkDeleteRate", ""},
		{"POST", ns + "/persistence", `nope`, 400, "", ""},
		{"POST", ns + "/persistence", `{"bookkeeperEnsemble":3,"bookkeeperWriteQuorum":1,"bookkeeperAckQuorum":2}`, 400, "bookkeeperAckQuorum", ""},
		{"POST", ns + "/persistence", `{"bookkeeperEnsemble":101,"bookkeeperWriteQuorum":1,"bookkeeperAckQuorum":1}`, 400, "more than 100", ""},
		{"POST", ns + "/persistence/bookieAffinity", `{"bookkeeperAffinityGroupSecondary":"s"}`, 400, "bookkeeperAffinityGroupPrimary", ""},
		{"POST", ns + "/maxUnackedMessagesPerConsumer", "-1", 412, `"maxUnackedMessagesPerConsumer must be 0 or more"`, ""},
		{"POST", ns + "/maxUnackedMessagesPerSubscription", "-1", 412, `"maxUnackedMessagesPerSubscription must be 0 or more"`, ""},
		{"POST", ns + "/maxUnackedMessagesPerSubscription", "ten", 400, "", ""},
		{"POST", ns + "/deduplicationSnapshotInterval", "-1", 412, `"interval must be 0 or more"`, ""},
		{"POST", ns + "/deduplicationSnapshotInterval", "2147483648", 412, "at most", ""},
		{"POST", ns + "/delayedDelivery", `{"active":true,"tickTime":-1}`, 400, "tickTime", ""},
		{"POST", ns + "/delayedDelivery", `{"active":true,"tickTime":86400001}`, 400, "tickTime", ""},
		{"POST", ns + "/delayedDelivery", `{"active":true,"maxDeliveryDelayInMillis":-5}`, 400, "maxDeliveryDelayInMillis", ""},
		{"POST", ns + "/delayedDelivery", `{"active":"yes"}`, 400, "", ""},
		{"POST", ns + "/delayedDelivery", `null`, 400, "DELETE", ""},
		{"POST", ns + "/autoTopicCreation", `{"allowAutoTopicCreation":true,"topicType":"partitioned"}`, 412,
			`"Invalid configuration for autoTopicCreationOverride. the detail is [defaultNumPartitions] cannot be null when the type is partitioned."`, ""},
		{"POST", ns + "/autoTopicCreation", `{"allowAutoTopicCreation":true,"topicType":"partitioned","defaultNumPartitions":0}`, 412,
			"cannot be less than 1 for partition type.", ""},
		{"POST", ns + "/autoTopicCreation", `{"allowAutoTopicCreation":true,"topicType":"non-partitioned","defaultNumPartitions":3}`, 412,
			"is not allowed to be set when the type is non-partition.", ""},
		{"POST", "/admin/v2/namespaces/public/nonexist/maxProducersPerTopic", "1", 404, `"Namespace does not exist"`, ""},
		{"POST", "/admin/v2/namespaces/non-exist/default/maxProducersPerTopic", "1", 404, `"Tenant does not exist"`, ""},
		{"GET", "/admin/v2/namespaces/public/nonexist/properties", "", 404, `"Namespace does not exist"`, ""},
		{"PUT", "/admin/v2/namespaces/public/nonexist/schemaCompatibilityStrategy", `"FULL"`, 404, `"Namespace does not exist"`, ""},
	}
	_, before, _ := e.do("GET", ns, "")
	for _, s := range bad {
		e.run([]step{s})
		if _, after, _ := e.do("GET", ns, ""); after != before {
			t.Fatalf("%s %s %s changed the namespace:\nbefore %s\nafter  %s", s.method, s.path, s.body, before, after)
		}
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(before), &p); err != nil || p["max_producers_per_topic"] != float64(7) {
		t.Fatalf("namespace = %s (%v)", before, err)
	}
}

// TestSyncReplicationPolicy: a namespace's and a topic's synchronous
// replication (policy.SyncReplication) is set, read and removed; values
// out of range, more regions than the namespace's other replication
// clusters, and a change of the clusters that would leave too few are
// refused, changing nothing.
func TestSyncReplicationPolicy(t *testing.T) {
	e := start(t)
	const ns = "/admin/v2/namespaces/public/geo"
	const tp = "/admin/v2/persistent/public/geo/orders"
	e.run([]step{
		{"PUT", "/admin/v2/clusters/west", `{"serviceUrl":"http://west:8080"}`, 204, "", ""},
		{"POST", "/admin/v2/tenants/public", `{"allowedClusters":["standalone","west"]}`, 204, "", ""},
		{"PUT", ns, "", 204, "", ""},
		{"POST", ns + "/syncReplication", `{"regions":1}`, 412, "replication clusters", ""},
		{"POST", ns + "/replication", `["standalone","west"]`, 204, "", ""},
		{"GET", ns + "/syncReplication", "", 204, "", ""},
		{"POST", ns + "/syncReplication", `{"regions":1,"fallbackAfterSeconds":10}`, 204, "", ""},
		{"GET", ns + "/syncReplication", "", 200, `{"regions":1,"fallbackAfterSeconds":10}`, ""},
		{"GET", ns, "", 200, `"syncReplication":{"regions":1,"fallbackAfterSeconds":10}`, ""},
		{"POST", ns + "/syncReplication", `{"regions":2}`, 412, "1 besides", ""},
		{"POST", ns + "/syncReplication", `{"regions":0}`, 400, "regions", ""},
		{"POST", ns + "/syncReplication", `{"regions":1,"fallbackAfterSeconds":-1}`, 400, "fallbackAfterSeconds", ""},
		{"POST", ns + "/syncReplication", `{"regions":1,"fallbackAfterSeconds":3601}`, 400, "fallbackAfterSeconds", ""},
		{"POST", ns + "/syncReplication", `null`, 400, "DELETE", ""},
		{"POST", ns + "/replication", `["standalone"]`, 412, "syncReplication", ""},
		{"GET", ns + "/replication", "", 200, `["standalone","west"]`, ""},
		{"GET", ns + "/syncReplication", "", 200, `{"regions":1,"fallbackAfterSeconds":10}`, ""},

		// A topic's own.
		{"GET", tp + "/syncReplication", "", 204, "", ""},
		{"GET", tp + "/syncReplication?applied=true", "", 200, `{"regions":1,"fallbackAfterSeconds":10}`, ""},
		{"POST", tp + "/syncReplication", `{"regions":1}`, 204, "", ""},
		{"GET", tp + "/syncReplication", "", 200, `{"regions":1}`, ""},
		{"POST", tp + "/syncReplication", `{"regions":0}`, 400, "regions", ""},
		{"DELETE", tp + "/syncReplication", "", 204, "", ""},
		{"GET", tp + "/syncReplication", "", 204, "", ""},

		{"DELETE", ns + "/syncReplication", "", 204, "", ""},
		{"GET", ns + "/syncReplication", "", 204, "", ""},
		{"POST", ns + "/replication", `["standalone"]`, 204, "", ""},
	})
}
