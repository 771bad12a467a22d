package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/isobar-mq/isobar/terraform/provider/client"
)

// policiesBase is a namespace with retention and a TTL of its own, which
// its topics follow where they set none.
func policiesBase(tenant string) string {
	return fmt.Sprintf(`
resource "isobar_tenant" "t" {
  name             = %q
  allowed_clusters = ["us-east", "eu-west", "ap-south"]
}
resource "isobar_namespace" "ns" {
  tenant               = isobar_tenant.t.name
  name                 = "ns"
  replication_clusters = ["us-east", "eu-west", "ap-south"]
  retention            = { time_in_minutes = 60, size_in_mb = 100 }
  message_ttl_seconds  = 3600
}
`, tenant)
}

// policyTopics are the partitioned topic "orders" (2 partitions) and the
// topic "audit", each with the given policies.
func policyTopics(orders, audit string) string {
	return fmt.Sprintf(`
resource "isobar_topic" "orders" {
  tenant     = isobar_namespace.ns.tenant
  namespace  = isobar_namespace.ns.name
  name       = "orders"
  partitions = 2
  %s
}
resource "isobar_topic" "audit" {
  tenant    = isobar_namespace.ns.tenant
  namespace = isobar_namespace.ns.name
  name      = "audit"
  %s
}
`, orders, audit)
}

const (
	ordersPolicies = `
  message_ttl_seconds = 600
  retention           = { time_in_minutes = 1440, size_in_mb = 512 }
  backlog_quota = {
    destination_storage = { limit_size = 10485760, policy = "producer_request_hold" }
    message_age         = { limit_time = 3600, policy = "consumer_backlog_eviction" }
  }
  deduplication                           = true
  deduplication_snapshot_interval_seconds = 60
  sync_replication                        = { regions = 1, fallback_after_seconds = 30 }
  max_producers                           = 10
  max_consumers                           = 20
  max_consumers_per_subscription          = 5
  max_subscriptions                       = 8
  max_unacked_messages_per_consumer       = 1000
  max_unacked_messages_per_subscription   = 5000
  max_message_size_bytes                  = 1048576
  compaction_threshold_bytes              = 104857600`
	auditPolicies = `
  message_ttl_seconds = 0
  deduplication       = false
  persistence = {
    bookkeeper_ensemble                 = 3
    bookkeeper_write_quorum             = 2
    bookkeeper_ack_quorum               = 2
    managed_ledger_max_mark_delete_rate = 0.5
  }
  delayed_delivery              = { active = true, tick_time_ms = 1000, max_delay_ms = 86400000 }
  inactive_topic_policies       = { delete_while_inactive = false, max_inactive_duration_seconds = 600 }
  schema_compatibility_strategy = "BACKWARD_TRANSITIVE"
  schema_validation_enforced    = true
  auto_subscription_creation    = false
  publish_rate                  = { messages = 1000 }
  dispatch_rate                 = { messages = 500, bytes = 1048576 }
  subscription_dispatch_rate    = { messages = 100, period_seconds = 2, relative_to_publish_rate = true }
  replicator_dispatch_rate      = { bytes = 10485760 }
  subscribe_rate                = { per_consumer = 10 }`
	// Some changed, the rest left out: those follow the namespace again.
	ordersUpdated = `
  message_ttl_seconds = 1200
  backlog_quota       = { message_age = { limit_time = 600, policy = "producer_exception" } }
  max_producers       = 11`
	auditUpdated = `
  persistence = {
    bookkeeper_ensemble     = 2
    bookkeeper_write_quorum = 2
    bookkeeper_ack_quorum   = 1
  }
  schema_compatibility_strategy = "FORWARD"
  dispatch_rate                 = { messages = 50 }`
)

// TestAccTopicPolicies: a topic's own policies made, read back through
// the admin API (in another region than the provider's, and through a
// partition's name), imported with an empty plan, repaired after drift,
// changed and removed (the topic follows its namespace again), refused
// at plan time when out of range, and removed with the topic.
func TestAccTopicPolicies(t *testing.T) {
	f := accTest(t)
	us, eu, ap := admin(t, f, 0), admin(t, f, 1), admin(t, f, 2)
	p := providerBlock(f, "5s")
	base := policiesBase("tf-topic-pol")
	const orders, audit = "/admin/v2/persistent/tf-topic-pol/ns/orders", "/admin/v2/persistent/tf-topic-pol/ns/audit"
	full := p + base + policyTopics(ordersPolicies, auditPolicies)
	updated := p + base + policyTopics(ordersUpdated, auditUpdated)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: append([]resource.TestStep{
			{
				Config: full + `
data "isobar_topic" "audit" {
  tenant    = isobar_topic.audit.tenant
  namespace = isobar_topic.audit.namespace
  name      = isobar_topic.audit.name
}`,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_topic.orders", "message_ttl_seconds", "600"),
					resource.TestCheckResourceAttr("isobar_topic.orders", "backlog_quota.destination_storage.limit_time", "-1"),
					resource.TestCheckResourceAttr("isobar_topic.orders", "max_message_size_bytes", "1048576"),
					resource.TestCheckResourceAttr("isobar_topic.audit", "message_ttl_seconds", "0"),
					resource.TestCheckResourceAttr("isobar_topic.audit", "publish_rate.bytes", "-1"),
					resource.TestCheckResourceAttr("isobar_topic.audit", "subscribe_rate.period_seconds", "30"),
					resource.TestCheckNoResourceAttr("isobar_topic.audit", "retention"),
					resource.TestCheckNoResourceAttr("isobar_topic.audit", "inactive_topic_policies.delete_mode"),
					resource.TestCheckResourceAttr("data.isobar_topic.audit", "persistence.managed_ledger_max_mark_delete_rate", "0.5"),
					resource.TestCheckResourceAttr("data.isobar_topic.audit", "schema_compatibility_strategy", "BACKWARD_TRANSITIVE"),
					resource.TestCheckNoResourceAttr("data.isobar_topic.audit", "max_producers"),
					// The global policies, read in eu-west, whichever region
					// the provider reached.
					expectPolicy(eu, orders+"/messageTTL?isGlobal=true", `600`),
					expectPolicy(eu, orders+"/retention?isGlobal=true", `{"retentionTimeInMinutes":1440,"retentionSizeInMB":512}`),
					expectPolicy(eu, orders+"/backlogQuotaMap?isGlobal=true", `{
						"destination_storage":{"limitSize":10485760,"limitTime":-1,"policy":"producer_request_hold"},
						"message_age":{"limitSize":-1,"limitTime":3600,"policy":"consumer_backlog_eviction"}}`),
					expectPolicy(eu, orders+"/deduplicationEnabled?isGlobal=true", `true`),
					expectPolicy(eu, orders+"/deduplicationSnapshotInterval?isGlobal=true", `60`),
					expectPolicy(eu, orders+"/syncReplication?isGlobal=true", `{"regions":1,"fallbackAfterSeconds":30}`),
					expectPolicy(eu, orders+"/maxProducers?isGlobal=true", `10`),
					expectPolicy(eu, orders+"/maxConsumers?isGlobal=true", `20`),
					expectPolicy(eu, orders+"/maxConsumersPerSubscription?isGlobal=true", `5`),
					expectPolicy(eu, orders+"/maxSubscriptionsPerTopic?isGlobal=true", `8`),
					expectPolicy(eu, orders+"/maxUnackedMessagesOnConsumer?isGlobal=true", `1000`),
					expectPolicy(eu, orders+"/maxUnackedMessagesOnSubscription?isGlobal=true", `5000`),
					expectPolicy(eu, orders+"/maxMessageSize?isGlobal=true", `1048576`),
					expectPolicy(eu, orders+"/compactionThreshold?isGlobal=true", `104857600`),
					// A partitioned topic's policies are its partitions', and
					// are in force in every region.
					expectPolicy(ap, orders+"-partition-1/retention?isGlobal=true", `{"retentionTimeInMinutes":1440,"retentionSizeInMB":512}`),
					expectPolicy(ap, orders+"-partition-0/maxProducers?applied=true", `10`),
					expectPolicy(eu, audit+"/messageTTL?isGlobal=true", `0`),
					expectPolicy(eu, audit+"/deduplicationEnabled?isGlobal=true", `false`),
					expectPolicy(eu, audit+"/persistence?isGlobal=true",
						`{"bookkeeperEnsemble":3,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":2,"managedLedgerMaxMarkDeleteRate":0.5}`),
					expectPolicy(eu, audit+"/delayedDelivery?isGlobal=true",
						`{"active":true,"tickTime":1000,"maxDeliveryDelayInMillis":86400000,"maxDelayInMillis":86400000}`),
					expectPolicy(eu, audit+"/inactiveTopicPolicies?isGlobal=true", `{"maxInactiveDurationSeconds":600,"deleteWhileInactive":false}`),
					expectPolicy(eu, audit+"/schemaCompatibilityStrategy?isGlobal=true", `"BACKWARD_TRANSITIVE"`),
					expectPolicy(eu, audit+"/schemaValidationEnforced?isGlobal=true", `true`),
					expectPolicy(eu, audit+"/autoSubscriptionCreation?isGlobal=true", `{"allowAutoSubscriptionCreation":false}`),
					expectPolicy(eu, audit+"/publishRate?isGlobal=true", `{"publishThrottlingRateInMsg":1000,"publishThrottlingRateInByte":-1}`),
					expectPolicy(eu, audit+"/dispatchRate?isGlobal=true",
						`{"dispatchThrottlingRateInMsg":500,"dispatchThrottlingRateInByte":1048576,"ratePeriodInSecond":1,"relativeToPublishRate":false}`),
					expectPolicy(eu, audit+"/subscriptionDispatchRate?isGlobal=true",
						`{"dispatchThrottlingRateInMsg":100,"dispatchThrottlingRateInByte":-1,"ratePeriodInSecond":2,"relativeToPublishRate":true}`),
					expectPolicy(eu, audit+"/replicatorDispatchRate?isGlobal=true",
						`{"dispatchThrottlingRateInMsg":-1,"dispatchThrottlingRateInByte":10485760,"ratePeriodInSecond":1,"relativeToPublishRate":false}`),
					expectPolicy(eu, audit+"/subscribeRate?isGlobal=true", `{"subscribeThrottlingRatePerConsumer":10,"ratePeriodInSecond":30}`),
					// What audit leaves out is its namespace's.
					expectPolicy(eu, audit+"/retention?isGlobal=true", ``),
					expectPolicy(eu, audit+"/retention?applied=true", `{"retentionTimeInMinutes":60,"retentionSizeInMB":100}`),
				),
			},
			// Imported, each gives an empty plan with the configuration
			// that states its policies; and every attribute reads back as
			// it was made.
			{ResourceName: "isobar_topic.orders", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "persistent://tf-topic-pol/ns/orders"},
			{ResourceName: "isobar_topic.audit", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "persistent://tf-topic-pol/ns/audit"},
			{ResourceName: "isobar_topic.orders", ImportState: true, ImportStateId: "persistent://tf-topic-pol/ns/orders", ImportStateVerify: true},
			{ResourceName: "isobar_topic.audit", ImportState: true, ImportStateId: "persistent://tf-topic-pol/ns/audit", ImportStateVerify: true},
			{
				// Drift, through another region's admin API: a TTL changed, a
				// quota removed, a limit the configuration leaves out set.
				PreConfig: func() {
					do(t, ap, http.MethodPost, orders+"/messageTTL?isGlobal=true", 5)
					do(t, ap, http.MethodDelete, orders+"/backlogQuota?backlogQuotaType=message_age&isGlobal=true", nil)
					do(t, ap, http.MethodPost, audit+"/maxProducers?isGlobal=true", 3)
				},
				Config: full,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_topic.orders", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("isobar_topic.audit", plancheck.ResourceActionUpdate),
					expectChange("isobar_topic.orders", "message_ttl_seconds", 5, 600),
					expectChange("isobar_topic.audit", "max_producers", 3, nil),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					expectPolicy(eu, orders+"/messageTTL?isGlobal=true", `600`),
					expectPolicy(eu, orders+"/backlogQuotaMap?isGlobal=true", `{
						"destination_storage":{"limitSize":10485760,"limitTime":-1,"policy":"producer_request_hold"},
						"message_age":{"limitSize":-1,"limitTime":3600,"policy":"consumer_backlog_eviction"}}`),
					expectPolicy(eu, audit+"/maxProducers?isGlobal=true", ``),
				),
			},
			{
				// Policies changed and removed: those removed are the
				// namespace's again (or the broker's).
				Config: updated,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_topic.orders", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("isobar_topic.audit", plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckNoResourceAttr("isobar_topic.orders", "retention"),
					resource.TestCheckNoResourceAttr("isobar_topic.orders", "backlog_quota.destination_storage"),
					resource.TestCheckResourceAttr("isobar_topic.audit", "persistence.managed_ledger_max_mark_delete_rate", "0"),
					expectPolicy(eu, orders+"/messageTTL?isGlobal=true", `1200`),
					expectPolicy(eu, orders+"/retention?isGlobal=true", ``),
					expectPolicy(ap, orders+"/retention?applied=true", `{"retentionTimeInMinutes":60,"retentionSizeInMB":100}`),
					expectPolicy(eu, orders+"/backlogQuotaMap?isGlobal=true", `{"message_age":{"limitSize":-1,"limitTime":600,"policy":"producer_exception"}}`),
					expectPolicy(eu, orders+"/deduplicationEnabled?isGlobal=true", ``),
					expectPolicy(eu, orders+"/syncReplication?isGlobal=true", ``),
					expectPolicy(eu, orders+"/maxProducers?isGlobal=true", `11`),
					expectPolicy(eu, orders+"/maxConsumers?isGlobal=true", ``),
					expectPolicy(eu, audit+"/messageTTL?isGlobal=true", ``),
					expectPolicy(ap, audit+"/messageTTL?applied=true", `3600`),
					expectPolicy(eu, audit+"/persistence?isGlobal=true",
						`{"bookkeeperEnsemble":2,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":1,"managedLedgerMaxMarkDeleteRate":0}`),
					expectPolicy(eu, audit+"/delayedDelivery?isGlobal=true", ``),
					expectPolicy(eu, audit+"/schemaCompatibilityStrategy?isGlobal=true", `"FORWARD"`),
					expectPolicy(eu, audit+"/subscribeRate?isGlobal=true", ``),
				),
			},
			{ResourceName: "isobar_topic.orders", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "persistent://tf-topic-pol/ns/orders"},
			{
				// Deleted out of band, the topic leaves its policies behind
				// (one of them set out of band); made again, it has those of
				// the configuration and no other.
				PreConfig: func() {
					do(t, ap, http.MethodPost, audit+"/maxConsumers?isGlobal=true", 7)
					// In us-east, where the provider made it (the other
					// regions have no copy before a message replicates).
					do(t, us, http.MethodDelete, audit+"?force=true", nil)
				},
				Config: updated,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("isobar_topic.audit", plancheck.ResourceActionCreate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					expectPolicy(eu, audit+"/maxConsumers?isGlobal=true", ``),
					expectPolicy(eu, audit+"/schemaCompatibilityStrategy?isGlobal=true", `"FORWARD"`),
				),
			},
			{
				// Beyond the broker's largest message: the server's reason.
				Config:      p + base + policyTopics(ordersUpdated+"\n  max_message_size_bytes = 2147483647", auditUpdated),
				ExpectError: regexp.MustCompile(`(?s)Cannot update the topic.*412.*` + words(`maxMessageSize 2147483647 is more than the broker's`)),
			},
			{
				// Nothing of the refused value was kept.
				Config: updated,
				Check:  expectPolicy(eu, orders+"/maxMessageSize?isGlobal=true", ``),
			},
		}, append(badTopicPolicies(p+base, ordersUpdated), resource.TestStep{
			// Topic policies outlive their topic on the server (until its
			// namespace goes); the provider removes them with it.
			Config: p + base,
			Check: resource.ComposeAggregateTestCheckFunc(
				expectPolicy(eu, orders+"/messageTTL?isGlobal=true", ``),
				expectPolicy(eu, orders+"/backlogQuotaMap?isGlobal=true", ``),
				expectPolicy(eu, orders+"/maxProducers?isGlobal=true", ``),
				expectPolicy(eu, audit+"/persistence?isGlobal=true", ``),
				expectPolicy(eu, audit+"/schemaCompatibilityStrategy?isGlobal=true", ``),
				expectPolicy(eu, audit+"/dispatchRate?isGlobal=true", ``),
			),
		})...),
	})
}

// badTopicPolicies are steps that give the topic "audit" policies out of
// range, each refused at plan time with a message that says why.
func badTopicPolicies(base, orders string) []resource.TestStep {
	var steps []resource.TestStep
	for _, c := range []struct{ policies, want string }{
		{`max_producers = -1`, `-1 is not from 0 to 2147483647`},
		{`message_ttl_seconds = 2147483648`, `2147483648 is not from 0 to 2147483647`},
		{`retention = { time_in_minutes = -2, size_in_mb = 1 }`, `-2 is not from -1 to`},
		{`delayed_delivery = { active = true, tick_time_ms = 86400001 }`, `86400001 is not from 0 to 86400000`},
		{`backlog_quota = { size = { limit_size = 1, policy = "producer_exception" } }`, `"size" is not one of destination_storage, message_age`},
		{`backlog_quota = { message_age = { limit_time = 10, policy = "drop" } }`, `drop is not one of producer_request_hold`},
		{`backlog_quota = {}`, `backlog_quota = {} sets no quota: leave backlog_quota out`},
		{`publish_rate = { messages = -2 }`, `-2 is not at least -1`},
		{`schema_compatibility_strategy = "UNDEFINED"`, `UNDEFINED is not one of ALWAYS_INCOMPATIBLE`},
		{`sync_replication = { regions = 0 }`, `0 is not from 1 to 64`},
		{`inactive_topic_policies = { delete_while_inactive = true, max_inactive_duration_seconds = 60, delete_mode = "never" }`,
			`never is not one of delete_when_no_subscriptions, delete_when_subscriptions_caught_up`},
		{`persistence = { bookkeeper_ensemble = 2, bookkeeper_write_quorum = 3, bookkeeper_ack_quorum = 1 }`,
			`bookkeeper_write_quorum 3 is more than bookkeeper_ensemble 2`},
		{`persistence = { bookkeeper_ensemble = 3, bookkeeper_write_quorum = 2, bookkeeper_ack_quorum = 3 }`,
			`bookkeeper_ack_quorum 3 is more than bookkeeper_write_quorum 2`},
		{`persistence = { bookkeeper_ensemble = 101, bookkeeper_write_quorum = 2, bookkeeper_ack_quorum = 1 }`, `101 is not from 1 to 100`},
		{`persistence = { bookkeeper_ensemble = 1, bookkeeper_write_quorum = 1, bookkeeper_ack_quorum = 1, managed_ledger_max_mark_delete_rate = -0.5 }`,
			`-0.5 is not at least 0`},
	} {
		steps = append(steps, resource.TestStep{
			Config:      base + policyTopics(orders, c.policies),
			ExpectError: regexp.MustCompile(words(c.want)),
		})
	}
	return steps
}

// TestAccTopicPoliciesImport imports a topic whose policies were set
// through the admin API, as an operator would (pulsar-admin's forms:
// the TTL as a query parameter, a bare strategy name), with a
// configuration that states them: the plan is empty.
func TestAccTopicPoliciesImport(t *testing.T) {
	f := accTest(t)
	us := admin(t, f, 0)
	p := providerBlock(f, "5s")
	base := policiesBase("tf-topic-imp")
	const legacy = "/admin/v2/persistent/tf-topic-imp/ns/legacy"
	topic := func(policies string) string {
		return fmt.Sprintf(`
resource "isobar_topic" "legacy" {
  tenant     = isobar_namespace.ns.tenant
  namespace  = isobar_namespace.ns.name
  name       = "legacy"
  partitions = 3
  %s
}
`, policies)
	}
	stated := topic(`
  message_ttl_seconds = 120
  retention           = { time_in_minutes = -1, size_in_mb = 1024 }
  backlog_quota       = { destination_storage = { limit_size = 1073741824, policy = "producer_exception" } }
  deduplication       = true
  max_consumers       = 4
  schema_compatibility_strategy = "ALWAYS_COMPATIBLE"
  delayed_delivery    = { active = false }`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: p + base + topic("")},
			{
				PreConfig: func() {
					ctx := context.Background()
					for _, r := range []client.Request{
						{Method: http.MethodPost, Path: legacy + "/messageTTL?messageTTL=120&isGlobal=true"},
						{Method: http.MethodPost, Path: legacy + "/retention?isGlobal=true", Body: map[string]int64{"retentionTimeInMinutes": -1, "retentionSizeInMB": 1024}},
						{Method: http.MethodPost, Path: legacy + "/backlogQuota?isGlobal=true", Body: map[string]any{"limitSize": 1073741824, "limitTime": -1, "policy": "producer_exception"}},
						{Method: http.MethodPost, Path: legacy + "/deduplicationEnabled?isGlobal=true", Body: true},
						{Method: http.MethodPost, Path: legacy + "-partition-2/maxConsumers?isGlobal=true", Body: 4},
						{Method: http.MethodPut, Path: legacy + "/schemaCompatibilityStrategy?isGlobal=true", Body: "ALWAYS_COMPATIBLE"},
						{Method: http.MethodPost, Path: legacy + "/delayedDelivery?isGlobal=true", Body: map[string]any{"active": false, "tickTime": 0, "maxDelayInMillis": 0}},
					} {
						if err := us.Do(ctx, r); err != nil {
							t.Fatal(err)
						}
					}
				},
				Config:          p + base + stated,
				ResourceName:    "isobar_topic.legacy",
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithID,
				ImportStateId:   "persistent://tf-topic-imp/ns/legacy",
			},
			{
				// The same configuration on the state made before: the
				// refreshed state matches it.
				Config: p + base + stated,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
			},
		},
	})
}

// words matches text in OpenTofu's output, which wraps long lines.
func words(text string) string {
	var out []string
	for _, w := range strings.Fields(text) {
		out = append(out, regexp.QuoteMeta(w))
	}
	return strings.Join(out, `\s+`)
}

// checkPolicy compares a topic policy read through the admin API with
// want, as JSON; want "" means the server answers none (204).
func checkPolicy(c *client.Client, path, want string) error {
	var got json.RawMessage
	if err := c.Get(context.Background(), path, &got); err != nil {
		return err
	}
	if want == "" || len(got) == 0 {
		if want != "" || len(got) != 0 {
			return fmt.Errorf("GET %s = %s, want %q", path, got, want)
		}
		return nil
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		return fmt.Errorf("want %s: %w", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		return fmt.Errorf("GET %s = %s, want %s", path, got, want)
	}
	return nil
}

func expectPolicy(c *client.Client, path, want string) resource.TestCheckFunc {
	return func(*terraform.State) error { return checkPolicy(c, path, want) }
}

// expectChange checks that the plan changes attr of the resource at
// address from before (the server's value, read in the refresh) to
// after; nil is null.
func expectChange(address, attr string, before, after any) plancheck.PlanCheck {
	return changeCheck{address, attr, before, after}
}

type changeCheck struct {
	address, attr string
	before, after any
}

func (c changeCheck) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != c.address || rc.Change == nil {
			continue
		}
		before, _ := rc.Change.Before.(map[string]any)
		after, _ := rc.Change.After.(map[string]any)
		if !sameJSON(before[c.attr], c.before) || !sameJSON(after[c.attr], c.after) {
			resp.Error = fmt.Errorf("%s.%s: planned %v -> %v, want %v -> %v", c.address, c.attr, before[c.attr], after[c.attr], c.before, c.after)
		}
		return
	}
	resp.Error = fmt.Errorf("%s: no change planned", c.address)
}
