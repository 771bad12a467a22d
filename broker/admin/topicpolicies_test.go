package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

func scopeOf(global bool) policy.TopicScope { return policy.TopicScope(global) }

// Every topic policy: unset is 204, a set value is answered as given, in
// its own scope only, and DELETE unsets it; applied=true falls back to
// the namespace, then the broker.
func TestTopicPolicies(t *testing.T) {
	e := start(t)
	const tt = "/admin/v2/persistent/public/default/tp"
	cases := []struct {
		path, method, body, want string
	}{
		{"messageTTL?messageTTL=600", "POST", "", "600"},
		{"retention", "POST", `{"retentionTimeInMinutes":1440,"retentionSizeInMB":20480}`, `{"retentionTimeInMinutes":1440,"retentionSizeInMB":20480}`},
		{"maxProducers", "POST", "10", "10"},
		{"maxConsumers", "POST", "0", "0"},
		{"maxConsumersPerSubscription", "POST", "3", "3"},
		{"maxUnackedMessagesOnConsumer", "POST", "1000", "1000"},
		{"maxUnackedMessagesOnSubscription", "POST", "5000", "5000"},
		{"maxSubscriptionsPerTopic", "POST", "100", "100"},
		{"maxMessageSize", "POST", "1048576", "1048576"},
		{"deduplicationSnapshotInterval", "POST", "1000", "1000"},
		{"schemaValidationEnforced", "POST", "true", "true"},
		{"schemaCompatibilityStrategy", "PUT", `"BACKWARD"`, `"BACKWARD"`},
		{"dispatchRate", "POST", `{"dispatchThrottlingRateInMsg":100,"dispatchThrottlingRateInByte":1048576,"ratePeriodInSecond":60,"relativeToPublishRate":false}`,
			`{"dispatchThrottlingRateInMsg":100,"dispatchThrottlingRateInByte":1048576,"ratePeriodInSecond":60,"relativeToPublishRate":false}`},
		{"subscriptionDispatchRate", "POST", `{"dispatchThrottlingRateInMsg":1000,"ratePeriodInSecond":30,"relativeToPublishRate":true}`,
			`{"dispatchThrottlingRateInMsg":1000,"dispatchThrottlingRateInByte":0,"ratePeriodInSecond":30,"relativeToPublishRate":true}`},
		{"replicatorDispatchRate", "POST", `{"dispatchThrottlingRateInMsg":500}`, `"dispatchThrottlingRateInMsg":500`},
		{"publishRate", "POST", `{"publishThrottlingRateInMsg":200,"publishThrottlingRateInByte":2097152}`, `{"publishThrottlingRateInMsg":200,"publishThrottlingRateInByte":2097152}`},
		{"subscribeRate", "POST", `{"subscribeThrottlingRatePerConsumer":10,"ratePeriodInSecond":60}`, `{"subscribeThrottlingRatePerConsumer":10,"ratePeriodInSecond":60}`},
		{"persistence", "POST", `{"bookkeeperEnsemble":3,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":2,"managedLedgerMaxMarkDeleteRate":10}`,
			`{"bookkeeperEnsemble":3,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":2,"managedLedgerMaxMarkDeleteRate":10}`},
		{"delayedDelivery", "POST", `{"active":true,"tickTime":1000,"maxDelayInMillis":60000}`, `"maxDelayInMillis":60000`},
		{"autoSubscriptionCreation", "POST", `{"allowAutoSubscriptionCreation":true}`, `{"allowAutoSubscriptionCreation":true}`},
		{"offloadPolicies", "POST", `{"managedLedgerOffloadDriver":"aws-s3","managedLedgerOffloadMaxThreads":4}`, `"managedLedgerOffloadDriver":"aws-s3"`},
		{"replication", "POST", `["standalone"]`, `["standalone"]`},
	}
	for _, c := range cases {
		path, _, _ := strings.Cut(c.path, "?")
		global := "?isGlobal=true"
		if path == "replication" {
			global = "" // always global
		}
		e.run([]step{
			{"GET", tt + "/" + path, "", 204, "", ""},
			{c.method, tt + "/" + c.path, c.body, 204, "", ""},
			{"GET", tt + "/" + path, "", 200, c.want, ""},
			{"GET", tt + "/" + path + "?applied=true", "", 200, c.want, ""},
			{"DELETE", tt + "/" + path, "", 204, "", ""},
			{"GET", tt + "/" + path, "", 204, "", ""},
		})
		if path == "replication" {
			continue
		}
		// The global scope is apart from the local one; the local value,
		// when set, is the one in force.
		sep := "&"
		if c.path == path {
			sep = "?"
		}
		e.run([]step{
			{c.method, tt + "/" + c.path + sep + "isGlobal=true", c.body, 204, "", ""},
			{"GET", tt + "/" + path, "", 204, "", ""},
			{"GET", tt + "/" + path + global, "", 200, c.want, ""},
			{"GET", tt + "/" + path + "?applied=true", "", 200, c.want, ""},
			{"DELETE", tt + "/" + path + global, "", 204, "", ""},
			{"GET", tt + "/" + path + global, "", 204, "", ""},
		})
	}
	// Local over global.
	e.run([]step{
		{"POST", tt + "/maxProducers?isGlobal=true", "7", 204, "", ""},
		{"POST", tt + "/maxProducers", "3", 204, "", ""},
		{"GET", tt + "/maxProducers?applied=true", "", 200, "3", ""},
		{"GET", tt + "/maxProducers?applied=true&isGlobal=true", "", 200, "7", ""},
		{"DELETE", tt + "/maxProducers", "", 204, "", ""},
		{"GET", tt + "/maxProducers?applied=true", "", 200, "7", ""},
		{"DELETE", tt + "/maxProducers?isGlobal=true", "", 204, "", ""},
	})
	// Applied: the namespace's, else the broker's.
	e.run([]step{
		{"GET", tt + "/messageTTL?applied=true", "", 200, "0", ""},
		{"POST", "/admin/v2/namespaces/public/default/messageTTL", "60", 204, "", ""},
		{"GET", tt + "/messageTTL?applied=true", "", 200, "60", ""},
		{"GET", tt + "/messageTTL", "", 204, "", ""},
		{"GET", tt + "/maxMessageSize?applied=true", "", 200, "5242880", ""},
		{"GET", tt + "/schemaCompatibilityStrategy?applied=true", "", 200, `"FULL"`, ""},
		{"GET", tt + "/replication?applied=true", "", 200, `["standalone"]`, ""},
		{"GET", tt + "/persistence?applied=true", "", 204, "", ""},
		{"GET", tt + "/maxUnackedMessagesOnSubscription?applied=true", "", 200, "200000", ""},
		{"GET", tt + "/deduplicationSnapshotInterval?applied=true", "", 200, "120", ""},
		{"GET", tt + "/delayedDelivery?applied=true", "", 200, `"active":true,"tickTime":0,"maxDeliveryDelayInMillis":0`, ""},
		// The namespace's new settings, then the topic's over them.
		{"POST", "/admin/v2/namespaces/public/default/maxUnackedMessagesPerSubscription", "7", 204, "", ""},
		{"GET", tt + "/maxUnackedMessagesOnSubscription?applied=true", "", 200, "7", ""},
		{"POST", "/admin/v2/namespaces/public/default/deduplicationSnapshotInterval", "5", 204, "", ""},
		{"GET", tt + "/deduplicationSnapshotInterval?applied=true", "", 200, "5", ""},
		{"POST", "/admin/v2/namespaces/public/default/delayedDelivery", `{"active":false}`, 204, "", ""},
		{"GET", tt + "/delayedDelivery?applied=true", "", 200, `"active":false`, ""},
		{"POST", tt + "/delayedDelivery", `{"active":true,"tickTime":250}`, 204, "", ""},
		{"GET", tt + "/delayedDelivery?applied=true", "", 200, `"active":true,"tickTime":250`, ""},
		{"DELETE", tt + "/delayedDelivery", "", 204, "", ""},
	})
	// A namespace field (kept verbatim or modelled) is read in Pulsar's
	// JSON name, per cluster where Pulsar keeps one value per cluster.
	if _, err := e.store.UpdateNamespace(context.Background(), "public/default", func(p *policy.Policies) error {
		p.SchemaCompatibilityStrategy = "FORWARD"
		p.TopicDispatchRate = map[string]policy.DispatchRate{"standalone": {DispatchThrottlingRateInMsg: 42}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.run([]step{
		{"GET", tt + "/schemaCompatibilityStrategy?applied=true", "", 200, `"FORWARD"`, ""},
		{"GET", tt + "/schemaCompatibilityStrategy", "", 204, "", ""},
		{"PUT", tt + "/schemaCompatibilityStrategy", `"FULL_TRANSITIVE"`, 204, "", ""},
		{"GET", tt + "/schemaCompatibilityStrategy?applied=true", "", 200, `"FULL_TRANSITIVE"`, ""},
		{"PUT", tt + "/schemaCompatibilityStrategy", `"UNDEFINED"`, 204, "", ""},
		{"GET", tt + "/schemaCompatibilityStrategy", "", 204, "", ""},
		{"GET", tt + "/dispatchRate?applied=true", "", 200, `"dispatchThrottlingRateInMsg":42`, ""},
	})
	// Nothing is left stored once every policy is removed.
	name, _ := topic.Parse("persistent://public/default/tp")
	for _, global := range []bool{false, true} {
		sc := map[bool]string{false: "local", true: "global"}[global]
		tp, found, err := e.store.TopicPoliciesIn(context.Background(), name, scopeOf(global))
		if err != nil || found {
			b, _ := json.Marshal(tp)
			t.Fatalf("%s topic policies left: %s, %v", sc, b, err)
		}
	}
}

// Bad input to every topic policy is refused with a reason and stores
// nothing: undecodable bodies 400, values out of range 412, an unknown
// namespace 404.
func TestTopicPolicyBadInput(t *testing.T) {
	e := start(t)
	const tt = "/admin/v2/persistent/public/default/tp"
	bad := []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", "messageTTL?messageTTL=ten", "", 400, "messageTTL"},
		{"POST", "messageTTL?messageTTL=-1", "", 412, "messageTTL"},
		{"POST", "messageTTL", "", 400, "empty body"},
		{"POST", "retention", `{"retentionTimeInMinutes":-2}`, 412, "less than -1"},
		{"POST", "retention", `{"retentionTimeInMinutes":`, 400, "body"},
		{"POST", "maxProducers", "-1", 412, "maxProducers"},
		{"POST", "maxProducers", `"ten"`, 400, "body"},
		{"POST", "maxProducers", "null", 400, "DELETE"},
		{"POST", "maxProducers", "1.5", 400, "body"},
		{"POST", "maxConsumers", "-5", 412, "maxConsumers"},
		{"POST", "maxConsumersPerSubscription", "-1", 412, "maxConsumersPerSubscription"},
		{"POST", "maxUnackedMessagesOnConsumer", "-1", 412, "maxUnackedMessagesOnConsumer"},
		{"POST", "maxUnackedMessagesOnSubscription", "-1", 412, "maxUnackedMessagesOnSubscription"},
		{"POST", "maxSubscriptionsPerTopic", "-1", 412, "maxSubscriptionsPerTopic"},
		{"POST", "maxSubscriptionsPerTopic", "4294967296", 412, "maxSubscriptionsPerTopic"},
		{"POST", "maxMessageSize", "-1", 412, "maxMessageSize"},
		{"POST", "maxMessageSize", "104857600", 412, "broker"},
		{"POST", "deduplicationSnapshotInterval", "-1", 412, "deduplicationSnapshotInterval"},
		{"POST", "schemaValidationEnforced", "1", 400, "body"},
		{"PUT", "schemaCompatibilityStrategy", `"SIDEWAYS"`, 412, "schemaCompatibilityStrategy"},
		{"PUT", "schemaCompatibilityStrategy", `{`, 400, "strategy"},
		{"POST", "dispatchRate", `{"dispatchThrottlingRateInMsg":-2}`, 412, "dispatchRate"},
		{"POST", "dispatchRate", `{"ratePeriodInSecond":-1}`, 412, "ratePeriodInSecond"},
		{"POST", "subscriptionDispatchRate", `[1]`, 400, "body"},
		{"POST", "replicatorDispatchRate", `{"dispatchThrottlingRateInByte":-7}`, 412, "replicatorDispatchRate"},
		{"POST", "publishRate", `{"publishThrottlingRateInMsg":-2}`, 412, "publishRate"},
		{"POST", "subscribeRate", `{"subscribeThrottlingRatePerConsumer":-2}`, 412, "subscribeRate"},
		// Persistence and delayed delivery: 400, as Pulsar refuses a bad
		// persistence policy.
		{"POST", "persistence", `{"bookkeeperEnsemble":1,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":1}`, 400, "bookkeeperEnsemble"},
		{"POST", "persistence", `{"bookkeeperEnsemble":3,"bookkeeperWriteQuorum":1,"bookkeeperAckQuorum":2}`, 400, "bookkeeperAckQuorum"},
		{"POST", "persistence", `{"bookkeeperEnsemble":0,"bookkeeperWriteQuorum":0,"bookkeeperAckQuorum":0}`, 400, "bookkeeperEnsemble"},
		{"POST", "persistence", `{"bookkeeperEnsemble":-1,"bookkeeperWriteQuorum":-1,"bookkeeperAckQuorum":-1}`, 400, "bookkeeperEnsemble"},
		{"POST", "persistence", `{"bookkeeperEnsemble":101,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":2}`, 400, "more than 100"},
		{"POST", "persistence", `{"bookkeeperEnsemble":1,"bookkeeperWriteQuorum":1,"bookkeeperAckQuorum":1,"managedLedgerMaxMarkDeleteRate":-1}`, 400, "managedLedgerMaxMarkDeleteRate"},
		{"POST", "persistence", `{"bookkeeperEnsemble":"three"}`, 400, "body"},
		{"POST", "delayedDelivery", `{"active":true,"tickTime":-1}`, 400, "tickTime"},
		{"POST", "delayedDelivery", `{"active":true,"tickTime":1000,"maxDeliveryDelayInMillis":-1}`, 400, "maxDeliveryDelayInMillis"},
		{"POST", "delayedDelivery", `{"active":true,"maxDelayInMillis":-1}`, 400, "maxDeliveryDelayInMillis"},
		{"POST", "delayedDelivery", `{"active":true,"tickTime":1.5}`, 400, "body"},
		{"POST", "delayedDelivery", `{"active":"yes"}`, 400, "body"},
		{"POST", "autoSubscriptionCreation", `true`, 400, "body"},
		{"POST", "offloadPolicies", `"aws-s3"`, 400, "body"},
		{"POST", "offloadPolicies", `null`, 400, "object"},
		{"POST", "replication", `[]`, 412, "at least one"},
		{"POST", "replication", `["nowhere"]`, 412, "nowhere"},
		{"POST", "replication", `["standalone","standalone"]`, 412, "twice"},
		{"POST", "replication", `"standalone"`, 400, "body"},
		{"POST", "maxProducers?isGlobal=maybe", "1", 400, "isGlobal"},
		{"GET", "maxProducers?applied=maybe", "", 400, "applied"},
	}
	for _, b := range bad {
		e.run([]step{{b.method, tt + "/" + b.path, b.body, b.status, b.want, ""}})
	}
	e.run([]step{
		{"POST", "/admin/v2/persistent/public/nowhere/tp/maxProducers", "1", 404, "", ""},
		{"GET", "/admin/v2/persistent/public/nowhere/tp/maxProducers", "", 404, "", ""},
		{"POST", "/admin/v2/persistent/public/default/tp/maxProducers", "1", 204, "", ""},
		{"POST", "/admin/v2/persistent/public/default/tp/maxProducers", "-1", 412, "", ""},
		{"GET", "/admin/v2/persistent/public/default/tp/maxProducers", "", 200, "1", ""},
		{"DELETE", "/admin/v2/persistent/public/default/tp/maxProducers", "", 204, "", ""},
	})
	name, _ := topic.Parse("persistent://public/default/tp")
	for _, global := range []bool{false, true} {
		if tp, found, err := e.store.TopicPoliciesIn(context.Background(), name, scopeOf(global)); err != nil || found {
			b, _ := json.Marshal(tp)
			t.Fatalf("refused input stored %s (%v)", b, err)
		}
	}
	// A body beyond the request bound is 413.
	if status, _, _ := e.do(http.MethodPost, tt+"/offloadPolicies", `{"x":"`+string(make([]byte, 2<<20))+`"}`); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("huge body: %d, want 413", status)
	}
}

// The broker's ledger shape is the applied persistence policy when
// neither the topic nor its namespace sets one, in Pulsar's JSON.
func TestTopicPersistenceBrokerDefault(t *testing.T) {
	e := startWith(t, func(c *admin.Config) {
		c.TopicDefaults.Persistence = &adminapi.LedgerShape{EnsembleSize: 3, WriteQuorum: 2, AckQuorum: 2}
	})
	e.run([]step{
		{"PUT", "/admin/v2/persistent/public/default/tp", "", 204, "", ""},
		{"GET", "/admin/v2/persistent/public/default/tp/persistence?applied=true", "", 200,
			`{"bookkeeperEnsemble":3,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":2,"managedLedgerMaxMarkDeleteRate":0}`, ""},
		{"GET", "/admin/v2/persistent/public/default/tp/persistence", "", 204, "", ""},
	})
}
