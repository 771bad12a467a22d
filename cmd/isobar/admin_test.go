package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"net/http"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/region"
)

// adminRegion starts one region (etcd, bookies, one broker) on free ports
// and returns its admin and service URLs and its cluster name.
func adminRegion(t *testing.T) (adminURL, serviceURL, cluster string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := region.Start(ctx, region.Config{Name: "adm", DataDir: t.TempDir(), Brokers: 1}, region.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); err != nil {
			t.Errorf("region shutdown: %v", err)
		}
	})
	b := r.Brokers()[0]
	return b.WebServiceURL, b.ServiceURL, "adm"
}

// adminRunner drives `isobar admin` against one admin URL.
type adminRunner struct {
	t   *testing.T
	url string
}

func (a adminRunner) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return run(ctx, append([]string{"admin", "--admin-url", a.url}, args...)...)
}

// ok runs a command that must succeed and returns its output.
func (a adminRunner) ok(args ...string) string {
	a.t.Helper()
	out, err := a.run(args...)
	if err != nil {
		a.t.Fatalf("admin %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// json runs a read command with --json and decodes its output into v.
func (a adminRunner) json(v any, args ...string) {
	a.t.Helper()
	out := a.ok(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		a.t.Fatalf("admin %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// fails runs a command that must fail with exit code and mention every want.
func (a adminRunner) fails(code int, want []string, args ...string) {
	a.t.Helper()
	out, err := a.run(args...)
	if err == nil {
		a.t.Fatalf("admin %s: no error\n%s", strings.Join(args, " "), out)
	}
	if got := exitCode(err); got != code {
		a.t.Errorf("admin %s: exit %d (%v), want %d", strings.Join(args, " "), got, err, code)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			a.t.Errorf("admin %s: error %q does not mention %q", strings.Join(args, " "), err, w)
		}
	}
}

func TestAdminAgainstARegion(t *testing.T) {
	url, serviceURL, cluster := adminRegion(t)
	a := adminRunner{t, url}

	t.Run("clusters and brokers", func(t *testing.T) {
		a := adminRunner{t, url}
		var names []string
		a.json(&names, "clusters", "list")
		if !slices.Contains(names, cluster) {
			t.Errorf("clusters %v lack %s", names, cluster)
		}
		var cd struct {
			ServiceURL       string   `json:"serviceUrl"`
			BrokerServiceURL string   `json:"brokerServiceUrl"`
			Peers            []string `json:"peerClusterNames"`
		}
		a.json(&cd, "clusters", "get", cluster)
		if cd.ServiceURL != url || cd.BrokerServiceURL != serviceURL || cd.Peers == nil {
			t.Errorf("cluster %+v, want %s and %s", cd, url, serviceURL)
		}
		if out := a.ok("clusters", "get", cluster); !strings.Contains(out, "brokerServiceUrl:") || !strings.Contains(out, serviceURL) {
			t.Errorf("clusters get: %q", out)
		}
		var brokers []string
		a.json(&brokers, "brokers", "list", cluster)
		if len(brokers) != 1 || !strings.Contains(url, brokers[0]) {
			t.Errorf("brokers %v, admin URL %s", brokers, url)
		}
		if out := a.ok("brokers", "healthcheck"); out != "ok\n" {
			t.Errorf("healthcheck: %q", out)
		}
		var health map[string]string
		a.json(&health, "brokers", "healthcheck")
		if health["status"] != "ok" {
			t.Errorf("healthcheck --json: %v", health)
		}
		var active []string
		a.json(&active, "brokers", "list-active")
		if !slices.Equal(active, brokers) {
			t.Errorf("list-active %v, list %v", active, brokers)
		}
		var leader struct {
			ID  string `json:"brokerId"`
			URL string `json:"serviceUrl"`
		}
		a.json(&leader, "brokers", "leader-broker")
		if leader.ID != brokers[0] || !strings.Contains(leader.URL, leader.ID) {
			t.Errorf("leader %+v", leader)
		}
		var lr struct {
			Type string `json:"loadReportType"`
			URL  string `json:"webServiceUrl"`
			CPU  struct {
				Limit float64 `json:"limit"`
			} `json:"cpu"`
		}
		a.json(&lr, "brokers", "load-report")
		if lr.Type != "LocalBrokerData" || lr.CPU.Limit != 100 || !strings.Contains(lr.URL, brokers[0]) {
			t.Errorf("load-report %+v", lr)
		}
		if out := a.ok("brokers", "load-report"); !strings.Contains(out, "\ncpu ") || !strings.Contains(out, "\nmsgRateIn ") {
			t.Errorf("load-report: %q", out)
		}
		a.ok("brokers", "update-dynamic-config", "--config", "maxProducersPerTopic", "--value", "7")
		a.ok("brokers", "update-dynamic-config", "--config", "allowAutoSubscriptionCreation", "--value", "a/b")
		var dyn map[string]string
		a.json(&dyn, "brokers", "get-all-dynamic-config")
		if dyn["maxProducersPerTopic"] != "7" || dyn["allowAutoSubscriptionCreation"] != "a/b" {
			t.Errorf("dynamic config %v", dyn)
		}
		a.fails(1, []string{"412", "not a dynamic configuration"}, "brokers", "update-dynamic-config", "--config", "nope", "--value", "1")
		a.ok("brokers", "delete-dynamic-config", "--config", "maxProducersPerTopic")
		a.ok("brokers", "delete-dynamic-config", "--config", "allowAutoSubscriptionCreation")
		a.json(&dyn, "brokers", "get-runtime-config")
		if dyn["maxProducersPerTopic"] != "0" || dyn["allowAutoSubscriptionCreation"] != "true" {
			t.Errorf("runtime config %v", dyn)
		}
		// The URL also comes from the environment.
		t.Setenv("ISOBAR_ADMIN_URL", url)
		if out, err := run(context.Background(), "admin", "clusters", "list"); err != nil || !strings.Contains(out, cluster) {
			t.Errorf("ISOBAR_ADMIN_URL: %q %v", out, err)
		}
	})

	t.Run("bookies", func(t *testing.T) {
		a := adminRunner{t, url}
		var all struct {
			Bookies []struct {
				BookieID string `json:"bookieId"`
			} `json:"bookies"`
		}
		a.json(&all, "bookies", "list-bookies")
		if len(all.Bookies) == 0 {
			t.Fatal("list-bookies: none")
		}
		b := all.Bookies[0].BookieID
		if out := a.ok("bookies", "list-bookies"); !strings.Contains(out, b+"\n") {
			t.Errorf("list-bookies: %q lacks %s", out, b)
		}
		a.ok("bookies", "set-bookie-rack", "--bookie", b, "--group", "g1", "--rack", "/rack-1", "--hostname", "bk.example")
		var rc map[string]map[string]struct{ Rack, Hostname string }
		a.json(&rc, "bookies", "racks-info")
		if got := rc["g1"][b]; got.Rack != "/rack-1" || got.Hostname != "bk.example" {
			t.Errorf("racks-info: %+v", rc)
		}
		if out := a.ok("bookies", "racks-info"); !strings.Contains(out, "g1") || !strings.Contains(out, "/rack-1") {
			t.Errorf("racks-info: %q", out)
		}
		if out := a.ok("bookies", "get-bookie-rack", "-b", b, "--json"); !strings.Contains(out, `"rack": "/rack-1"`) {
			t.Errorf("get-bookie-rack: %q", out)
		}
		a.fails(2, []string{"--bookie: required"}, "bookies", "get-bookie-rack")
		a.fails(2, []string{"rack"}, "bookies", "set-bookie-rack", "-b", b, "--rack", "/a/b")
		a.fails(2, []string{"--bookie", "bad id"}, "bookies", "set-bookie-rack", "-b", "bad id")
		a.ok("bookies", "delete-bookie-rack", "--bookie", b)
		a.fails(1, []string{"404", "Bookie address not found: " + b}, "bookies", "get-bookie-rack", "-b", b)
		a.fails(1, []string{"404"}, "bookies", "delete-bookie-rack", "-b", b)

		// Automatic recovery's verbs.
		if out := a.ok("bookies", "list"); !strings.Contains(out, b+"\n") {
			t.Errorf("list: %q lacks %s", out, b)
		}
		var dec []string
		a.json(&dec, "bookies", "decommissioned")
		if len(dec) != 0 {
			t.Errorf("decommissioned: %v", dec)
		}
		var under []map[string]any
		a.json(&under, "bookies", "under-replicated")
		if len(under) != 0 {
			t.Errorf("under-replicated: %v", under)
		}
		if out := a.ok("bookies", "under-replicated"); !strings.Contains(out, "LEDGER") {
			t.Errorf("under-replicated: %q", out)
		}
		a.fails(1, []string{"404", "Bookie not found: nobody:1"}, "bookies", "decommission", "nobody:1")
		a.fails(2, []string{"bad id"}, "bookies", "decommission", "bad id")
		a.fails(2, []string{"<bookie>"}, "bookies", "decommission")
		a.fails(1, []string{"404", "not decommissioned"}, "bookies", "recommission", b)
		a.ok("bookies", "decommission", b)
		a.json(&dec, "bookies", "decommissioned")
		if !slices.Equal(dec, []string{b}) {
			t.Errorf("decommissioned: %v", dec)
		}
		a.ok("bookies", "recommission", b)
		if out := a.ok("bookies", "decommissioned"); strings.Contains(out, b) {
			t.Errorf("decommissioned after recommission: %q", out)
		}
	})

	t.Run("tenant namespace policy round trip", func(t *testing.T) {
		a := adminRunner{t, url}
		a.ok("tenants", "create", "acme", "--admin-roles", "ops,dev")
		var td struct {
			AdminRoles      []string `json:"adminRoles"`
			AllowedClusters []string `json:"allowedClusters"`
		}
		a.json(&td, "tenants", "get", "acme")
		if !slices.Equal(td.AdminRoles, []string{"ops", "dev"}) || !slices.Equal(td.AllowedClusters, []string{cluster}) {
			t.Errorf("created tenant %+v (allowed clusters default to every cluster)", td)
		}
		a.ok("tenants", "update", "acme", "--admin-roles", "ops")
		a.json(&td, "tenants", "get", "acme")
		if !slices.Equal(td.AdminRoles, []string{"ops"}) || !slices.Equal(td.AllowedClusters, []string{cluster}) {
			t.Errorf("updated tenant %+v: only the roles change", td)
		}
		var tenants []string
		a.json(&tenants, "tenants", "list")
		if !slices.Contains(tenants, "acme") {
			t.Errorf("tenants %v", tenants)
		}

		a.ok("namespaces", "create", "acme/ns", "--clusters", cluster)
		a.ok("namespaces", "create", "acme/bare")
		var nss []string
		a.json(&nss, "namespaces", "list", "acme")
		slices.Sort(nss)
		if !slices.Equal(nss, []string{"acme/bare", "acme/ns"}) {
			t.Errorf("namespaces %v", nss)
		}
		// Unset policies read as null, not as zero values.
		for _, verb := range []string{"get-retention", "get-message-ttl", "get-auto-topic-creation"} {
			if out := a.ok("namespaces", verb, "acme/bare", "--json"); strings.TrimSpace(out) != "null" {
				t.Errorf("%s of a fresh namespace: %q", verb, out)
			}
			if out := a.ok("namespaces", verb, "acme/bare"); !strings.Contains(out, "not set") {
				t.Errorf("%s of a fresh namespace: %q", verb, out)
			}
		}

		a.ok("namespaces", "set-retention", "acme/ns", "--time", "1h", "--size", "1G")
		a.ok("namespaces", "set-message-ttl", "acme/ns", "--ttl", "3600")
		a.ok("namespaces", "set-deduplication", "acme/ns", "--enable")
		a.ok("namespaces", "set-auto-topic-creation", "acme/ns", "--enable", "--type", "partitioned", "--num-partitions", "4")
		a.ok("namespaces", "set-clusters", "acme/ns", "--clusters", cluster)

		var ret struct {
			Minutes int   `json:"retentionTimeInMinutes"`
			MB      int64 `json:"retentionSizeInMB"`
		}
		a.json(&ret, "namespaces", "get-retention", "acme/ns")
		if ret.Minutes != 60 || ret.MB != 1024 {
			t.Errorf("retention %+v", ret)
		}
		var ttl int
		a.json(&ttl, "namespaces", "get-message-ttl", "acme/ns")
		if ttl != 3600 {
			t.Errorf("ttl %d", ttl)
		}
		var clusters []string
		a.json(&clusters, "namespaces", "get-clusters", "acme/ns")
		if !slices.Equal(clusters, []string{cluster}) {
			t.Errorf("clusters %v", clusters)
		}
		var pol struct {
			Clusters  []string `json:"replication_clusters"`
			Retention *struct {
				Minutes int `json:"retentionTimeInMinutes"`
			} `json:"retention_policies"`
			TTL   *int  `json:"message_ttl_in_seconds"`
			Dedup *bool `json:"deduplicationEnabled"`
			Auto  *struct {
				Allow      bool   `json:"allowAutoTopicCreation"`
				Type       string `json:"topicType"`
				Partitions int    `json:"defaultNumPartitions"`
			} `json:"autoTopicCreationOverride"`
		}
		a.json(&pol, "namespaces", "get-policies", "acme/ns")
		if !slices.Equal(pol.Clusters, []string{cluster}) || pol.Retention == nil || pol.Retention.Minutes != 60 ||
			pol.TTL == nil || *pol.TTL != 3600 || pol.Dedup == nil || !*pol.Dedup ||
			pol.Auto == nil || !pol.Auto.Allow || pol.Auto.Type != "partitioned" || pol.Auto.Partitions != 4 {
			t.Errorf("policies %+v", pol)
		}
		a.ok("namespaces", "set-max-producers-per-topic", "acme/ns", "--max-producers-per-topic", "5")
		a.ok("namespaces", "set-compaction-threshold", "acme/ns", "--threshold", "10M")
		a.ok("namespaces", "set-schema-compatibility-strategy", "acme/ns", "--compatibility", "full")
		a.ok("namespaces", "set-properties", "acme/ns", "-p", "a=1,b=2")
		a.ok("namespaces", "set-persistence", "acme/ns", "-e", "1", "-w", "1", "-a", "1")
		a.ok("namespaces", "set-bookie-affinity-group", "acme/ns", "--primary-group", "g1")
		a.fails(1, []string{"412", "maxConsumersPerTopic must be 0 or more"}, "namespaces", "set-max-consumers-per-topic", "acme/ns", "--max-consumers-per-topic", "-1")
		for verb, want := range map[string]string{"get-max-producers-per-topic": "5", "get-compaction-threshold": "10485760",
			"get-max-consumers-per-topic": "null", "get-schema-compatibility-strategy": `"FULL"`, "get-properties": `"b": "2"`,
			"get-persistence": `"bookkeeperEnsemble": 1`, "get-bookie-affinity-group": `"bookkeeperAffinityGroupPrimary": "g1"`} {
			if out := a.ok("namespaces", verb, "acme/ns", "--json"); !strings.Contains(out, want) {
				t.Errorf("%s: %q, want %q", verb, out, want)
			}
		}
		a.ok("namespaces", "remove-max-producers-per-topic", "acme/ns")
		a.ok("namespaces", "clear-properties", "acme/ns")
		a.ok("namespaces", "remove-persistence", "acme/ns")
		a.ok("namespaces", "delete-bookie-affinity-group", "acme/ns")
		if out := a.ok("namespaces", "get-max-producers-per-topic", "acme/ns"); out != "not set\n" {
			t.Errorf("after remove: %q", out)
		}
		human := a.ok("namespaces", "get-policies", "acme/ns")
		for _, w := range []string{"time 60 minutes, size 1024 MB", "3600s", "partitioned with 4 partitions"} {
			if !strings.Contains(human, w) {
				t.Errorf("get-policies does not show %q:\n%s", w, human)
			}
		}
		a.ok("namespaces", "set-deduplication", "acme/ns", "--disable")
		a.ok("namespaces", "set-auto-topic-creation", "acme/ns", "--disable")
		a.json(&pol, "namespaces", "get-policies", "acme/ns")
		if pol.Dedup == nil || *pol.Dedup || pol.Auto == nil || pol.Auto.Allow {
			t.Errorf("after --disable: policies %+v", pol)
		}

		// The server's refusals exit 1 with the status and its reason.
		a.fails(1, []string{"404", "acme/nope"}, "namespaces", "get-policies", "acme/nope")
		a.fails(1, []string{"404"}, "namespaces", "topics", "acme/nope")
		a.fails(1, []string{"409", "not empty"}, "tenants", "delete", "acme")
		a.fails(1, []string{"412", "nosuch"}, "namespaces", "set-clusters", "acme/ns", "--clusters", "nosuch")

		a.ok("namespaces", "delete", "acme/bare")
	})

	t.Run("partitioned topic", func(t *testing.T) {
		a := adminRunner{t, url}
		const pt = "persistent://acme/ns/orders"
		a.ok("topics", "create-partitioned-topic", pt, "-p", "3")
		var md struct {
			Partitions int `json:"partitions"`
		}
		a.json(&md, "topics", "get-partitioned-topic-metadata", pt)
		if md.Partitions != 3 {
			t.Errorf("partitions %d", md.Partitions)
		}
		a.ok("topics", "update-partitioned-topic", pt, "-p", "4")
		a.fails(1, []string{"412"}, "topics", "update-partitioned-topic", pt, "-p", "2")
		if out := a.ok("topics", "get-partitioned-topic-metadata", pt); !strings.Contains(out, "4") {
			t.Errorf("metadata: %q", out)
		}
		var list struct {
			Partitioned    []string `json:"partitioned"`
			NonPartitioned []string `json:"nonPartitioned"`
		}
		a.json(&list, "topics", "list", "acme/ns")
		if !slices.Equal(list.Partitioned, []string{pt}) || len(list.NonPartitioned) != 4 {
			t.Errorf("topics list %+v", list)
		}
		a.ok("topics", "create-subscription", pt, "-s", "billing")
		var ps struct {
			Metadata struct {
				Partitions int `json:"partitions"`
			} `json:"metadata"`
			Subscriptions map[string]any `json:"subscriptions"`
			Partitions    map[string]any `json:"partitions"`
		}
		a.json(&ps, "topics", "partitioned-stats", pt, "--per-partition")
		if ps.Metadata.Partitions != 4 || len(ps.Partitions) != 4 || ps.Subscriptions["billing"] == nil {
			t.Errorf("partitioned stats %+v", ps)
		}
		if out := a.ok("topics", "partitioned-stats", pt); !strings.Contains(out, "billing") {
			t.Errorf("partitioned-stats: %q", out)
		}
		a.fails(1, []string{"409"}, "topics", "delete", pt)
		a.ok("topics", "delete-partitioned-topic", pt)
		a.json(&md, "topics", "get-partitioned-topic-metadata", pt)
		if md.Partitions != 0 {
			t.Errorf("after delete: partitions %d", md.Partitions)
		}
	})

	t.Run("topic and subscriptions", func(t *testing.T) {
		a := adminRunner{t, url}
		const tp = "acme/ns/events"
		a.ok("topics", "create", tp)
		a.fails(1, []string{"409"}, "topics", "create", tp)
		a.ok("topics", "create-subscription", tp, "-s", "audit", "--messageId", "earliest")
		a.ok("topics", "create-subscription", tp, "-s", "late")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out, err := run(ctx, "client", "produce", tp, "--service-url", serviceURL, "-m", "x", "-n", "5", "--log-level", "error"); err != nil {
			t.Fatalf("produce: %v\n%s", err, out)
		}
		var subs []string
		a.json(&subs, "topics", "subscriptions", tp)
		if !slices.Equal(subs, []string{"audit", "late"}) {
			t.Errorf("subscriptions %v", subs)
		}

		type subStats struct {
			Backlog int64 `json:"msgBacklog"`
		}
		var st struct {
			In   int64               `json:"msgInCounter"`
			Subs map[string]subStats `json:"subscriptions"`
		}
		backlog := func(sub string) int64 {
			t.Helper()
			a.json(&st, "topics", "stats", tp)
			return st.Subs[sub].Backlog
		}
		a.ok("topics", "skip", tp, "-s", "audit", "-n", "2")
		if b := backlog("audit"); b != 3 || st.In != 5 {
			t.Errorf("after skipping 2 of 5: backlog %d, msgInCounter %d", b, st.In)
		}
		a.ok("topics", "reset-cursor", tp, "-s", "audit", "--time", "10m")
		if b := backlog("audit"); b != 5 {
			t.Errorf("after reset to 10m ago: backlog %d, want 5", b)
		}
		var last struct {
			Ledger int64 `json:"ledgerId"`
			Entry  int64 `json:"entryId"`
		}
		a.json(&last, "topics", "last-message-id", tp)
		if last.Entry != 4 {
			t.Errorf("last message id %+v", last)
		}
		if out := a.ok("topics", "last-message-id", tp); out != fmt.Sprintf("%d:%d\n", last.Ledger, last.Entry) {
			t.Errorf("last-message-id: %q", out)
		}
		a.ok("topics", "reset-cursor", tp, "-s", "audit", "--messageId", fmt.Sprintf("%d:%d", last.Ledger, 3))
		var is struct {
			Entries int64 `json:"numberOfEntries"`
			Cursors map[string]struct {
				MarkDelete string `json:"markDeletePosition"`
			} `json:"cursors"`
		}
		a.json(&is, "topics", "stats-internal", tp)
		if is.Entries != 5 || is.Cursors["audit"].MarkDelete != fmt.Sprintf("%d:2", last.Ledger) {
			t.Errorf("after reset to %d:3: internal stats %+v", last.Ledger, is)
		}
		a.ok("topics", "clear-backlog", tp, "-s", "audit")
		if b := backlog("audit"); b != 0 {
			t.Errorf("after clear-backlog: backlog %d", b)
		}
		human := a.ok("topics", "stats", tp)
		if !strings.Contains(human, "audit") || !strings.Contains(human, "msgInCounter") {
			t.Errorf("stats:\n%s", human)
		}
		if human := a.ok("topics", "stats-internal", tp); !strings.Contains(human, "audit") {
			t.Errorf("stats-internal:\n%s", human)
		}
		a.ok("topics", "unsubscribe", tp, "-s", "late")
		a.fails(1, []string{"404", "nosuch"}, "topics", "unsubscribe", tp, "-s", "nosuch")
		a.json(&subs, "topics", "subscriptions", tp)
		if !slices.Equal(subs, []string{"audit"}) {
			t.Errorf("after unsubscribe: %v", subs)
		}
		a.ok("topics", "unload", tp)
		if out := a.ok("topics", "terminate", tp); !strings.Contains(out, "terminated topic persistent://"+tp+" at ") {
			t.Errorf("terminate: %s", out)
		}
		var topics []string
		a.json(&topics, "namespaces", "topics", "acme/ns")
		if !slices.Equal(topics, []string{"persistent://" + tp}) {
			t.Errorf("namespace topics %v", topics)
		}
		a.ok("topics", "delete", tp, "--force")
		a.fails(1, []string{"404"}, "topics", "stats", tp)
	})

	t.Run("messages and properties", func(t *testing.T) {
		a := adminRunner{t, url}
		const tp = "acme/ns/msgs"
		a.ok("topics", "create", tp)
		a.ok("topics", "create-subscription", tp, "-s", "s", "--messageId", "earliest")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out, err := run(ctx, "client", "produce", tp, "--service-url", serviceURL, "-m", "x", "-n", "3", "--properties", "k=v", "--log-level", "error"); err != nil {
			t.Fatalf("produce: %v\n%s", err, out)
		}
		backlog := func() int64 {
			var st struct {
				Subs map[string]struct {
					Backlog int64 `json:"msgBacklog"`
				} `json:"subscriptions"`
			}
			a.json(&st, "topics", "stats", tp)
			return st.Subs["s"].Backlog
		}
		before := backlog()
		type message struct {
			ID      string            `json:"messageId"`
			Props   map[string]string `json:"properties"`
			Payload []byte            `json:"payload"`
		}
		var ms []message
		a.json(&ms, "topics", "peek-messages", tp, "-s", "s", "-n", "3")
		if len(ms) != 3 || ms[0].Props["k"] != "v" || string(ms[0].Payload) != "x" {
			t.Errorf("peek-messages: %+v", ms)
		}
		if after := backlog(); after != before || before == 0 {
			t.Errorf("backlog %d after peeking, %d before", after, before)
		}
		if out := a.ok("topics", "peek-messages", tp, "-s", "s"); !strings.Contains(out, "k:") || !strings.Contains(out, `"x"`) {
			t.Errorf("peek-messages:\n%s", out)
		}
		var m message
		a.json(&m, "topics", "examine-message", tp, "-i", "earliest", "-m", "1")
		if m.ID == "" || m.Props["publish-time"] == "" {
			t.Errorf("examine-message: %+v", m)
		}
		var id struct {
			Entry int64 `json:"entryId"`
		}
		a.json(&id, "topics", "get-message-id", tp, "-d", "10m")
		if id.Entry != 0 {
			t.Errorf("get-message-id 10m ago: %+v", id)
		}
		a.fails(1, []string{"404"}, "topics", "get-message-id", tp, "-d", time.Now().Add(time.Hour).Format(time.RFC3339))
		a.ok("topics", "update-properties", tp, "-p", "a=1,b=2")
		a.ok("topics", "remove-properties", tp, "-k", "a")
		var props map[string]string
		a.json(&props, "topics", "get-properties", tp)
		if len(props) != 1 || props["b"] != "2" {
			t.Errorf("properties %v, want b=2", props)
		}
		a.ok("topics", "delete", tp, "--force")
	})

	t.Run("primary", func(t *testing.T) {
		a := adminRunner{t, url}
		a.ok("namespaces", "create", "acme/prim")
		var f policy.Failover
		a.json(&f, "namespaces", "get-primary", "acme/prim")
		if f != (policy.Failover{Mode: policy.ActiveActive}) {
			t.Errorf("new namespace: %+v", f)
		}
		a.ok("namespaces", "set-primary", "acme/prim", cluster)
		a.json(&f, "namespaces", "get-primary", "acme/prim")
		if f != (policy.Failover{Mode: policy.ActiveStandby, Primary: cluster, Epoch: 1}) {
			t.Errorf("after set-primary: %+v", f)
		}
		if out := a.ok("namespaces", "get-primary", "acme/prim"); !strings.Contains(out, "active-standby") || !strings.Contains(out, cluster) {
			t.Errorf("get-primary: %q", out)
		}
		a.ok("namespaces", "set-primary", "acme/prim", cluster, "--auto-failover-after", "30s")
		a.json(&f, "namespaces", "get-primary", "acme/prim")
		if f != (policy.Failover{Mode: policy.ActiveStandby, Primary: cluster, Epoch: 1, AutoAfterSeconds: 30}) {
			t.Errorf("after --auto-failover-after: %+v", f)
		}
		a.fails(2, []string{"--auto-failover-after"}, "namespaces", "set-primary", "acme/prim", cluster, "--auto-failover-after", "2h")
		a.ok("namespaces", "set-primary", "acme/prim", cluster, "--auto-failover-after", "0s")
		f = policy.Failover{}
		a.fails(1, []string{"412", `"other" is not one of the replication clusters`}, "namespaces", "set-primary", "acme/prim", "other")
		a.fails(2, []string{"not both or neither"}, "namespaces", "set-primary", "acme/prim")
		a.fails(2, []string{"not both or neither"}, "namespaces", "set-primary", "acme/prim", cluster, "--active-active")
		a.ok("namespaces", "set-primary", "acme/prim", "--active-active")
		f = policy.Failover{}
		a.json(&f, "namespaces", "get-primary", "acme/prim")
		if f != (policy.Failover{Mode: policy.ActiveActive, Epoch: 2}) {
			t.Errorf("after --active-active: %+v", f)
		}
		// The REST shorthand: a bare region name.
		resp, err := http.Post(url+"/admin/v2/namespaces/acme/prim/primary", "application/json", strings.NewReader(`"`+cluster+`"`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		a.json(&f, "namespaces", "get-primary", "acme/prim")
		if resp.StatusCode != http.StatusNoContent || f != (policy.Failover{Mode: policy.ActiveStandby, Primary: cluster, Epoch: 3}) {
			t.Errorf("POST a bare name: %d, then %+v", resp.StatusCode, f)
		}

		// A topic's own mode and primary.
		const tp = "persistent://acme/prim/orders"
		if out := a.ok("topics", "get-primary", tp); !strings.Contains(out, "follows its namespace") {
			t.Errorf("a topic without its own: %q", out)
		}
		f = policy.Failover{}
		a.json(&f, "topics", "get-primary", tp, "--applied")
		if f != (policy.Failover{Mode: policy.ActiveStandby, Primary: cluster, Epoch: 3}) {
			t.Errorf("--applied without its own: %+v", f)
		}
		a.ok("topics", "set-primary", tp, "--active-active")
		f = policy.Failover{}
		a.json(&f, "topics", "get-primary", tp)
		if f != (policy.Failover{Mode: policy.ActiveActive, Epoch: 4}) {
			t.Errorf("after topics set-primary --active-active: %+v", f)
		}
		a.ok("topics", "set-primary", tp, cluster)
		a.json(&f, "topics", "get-primary", tp, "--applied")
		if f != (policy.Failover{Mode: policy.ActiveStandby, Primary: cluster, Epoch: 5}) {
			t.Errorf("after topics set-primary: %+v", f)
		}
		a.fails(1, []string{"412", `"other" is not one of the replication clusters`}, "topics", "set-primary", tp, "other")
		a.fails(1, []string{"412", "is a partition"}, "topics", "set-primary", tp+"-partition-0", cluster)
		a.fails(2, []string{"only a persistent topic"}, "topics", "set-primary", "non-persistent://acme/prim/orders", cluster)
		a.ok("topics", "remove-primary", tp)
		if out := a.ok("topics", "get-primary", tp); !strings.Contains(out, "follows its namespace") {
			t.Errorf("after remove-primary: %q", out)
		}
		a.ok("namespaces", "delete", "acme/prim")
	})

	t.Run("topic policies", func(t *testing.T) {
		a := adminRunner{t, url}
		const tp = "acme/ns/limited"
		// Unset policies read as null; set ones as set, in their scope.
		for _, verb := range []string{"get-max-producers", "get-message-ttl", "get-retention", "get-schema-compatibility-strategy"} {
			if out := a.ok("topics", verb, tp, "--json"); strings.TrimSpace(out) != "null" {
				t.Errorf("%s of a fresh topic: %q", verb, out)
			}
		}
		a.ok("topics", "set-max-producers", tp, "--max", "3")
		a.ok("topics", "set-max-producers", tp, "--max", "7", "--global")
		a.ok("topics", "set-message-ttl", tp, "--ttl", "1h")
		a.ok("topics", "set-retention", tp, "--time", "2h", "--size", "-1")
		a.ok("topics", "set-schema-compatibility-strategy", tp, "--strategy", "backward")
		a.ok("topics", "set-replication-clusters", tp, "--clusters", cluster)
		var n int
		if a.json(&n, "topics", "get-max-producers", tp); n != 3 {
			t.Errorf("local max producers %d, want 3", n)
		}
		if a.json(&n, "topics", "get-max-producers", tp, "--global"); n != 7 {
			t.Errorf("global max producers %d, want 7", n)
		}
		if a.json(&n, "topics", "get-message-ttl", tp); n != 3600 {
			t.Errorf("message TTL %d, want 3600", n)
		}
		if out := a.ok("topics", "get-retention", tp); !strings.Contains(out, "120 minutes") {
			t.Errorf("retention: %q", out)
		}
		if out := a.ok("topics", "get-schema-compatibility-strategy", tp); strings.TrimSpace(out) != "BACKWARD" {
			t.Errorf("schema compatibility strategy: %q", out)
		}
		var cl []string
		if a.json(&cl, "topics", "get-replication-clusters", tp); !slices.Equal(cl, []string{cluster}) {
			t.Errorf("replication clusters %v", cl)
		}
		a.fails(1, []string{"412"}, "topics", "set-max-message-size", tp, "--max", "1000000000")
		a.ok("topics", "remove-max-producers", tp)
		if a.json(&n, "topics", "get-max-producers", tp, "--applied"); n != 7 {
			t.Errorf("applied max producers without the local one: %d, want the global 7", n)
		}
		for _, verb := range []string{"remove-message-ttl", "remove-retention", "remove-schema-compatibility-strategy", "remove-replication-clusters"} {
			a.ok("topics", verb, tp)
		}
		a.ok("topics", "remove-max-producers", tp, "--global")
		if out := a.ok("topics", "get-message-ttl", tp); !strings.Contains(out, "not set") {
			t.Errorf("removed message TTL: %q", out)
		}
	})

	// Cleanup in dependency order, through the CLI.
	a.ok("namespaces", "delete", "acme/ns")
	a.ok("tenants", "delete", "acme")
	a.fails(1, []string{"404"}, "tenants", "get", "acme")
}

func TestAdminUsageErrors(t *testing.T) {
	// Nothing listens here: usage errors must not reach the server.
	a := adminRunner{t, "http://127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"tenants", "get"}, []string{"<tenant>"}},
		{[]string{"tenants", "get", "a", "b"}, []string{"<tenant>"}},
		{[]string{"tenants", "update", "t"}, []string{"nothing to update"}},
		{[]string{"tenants", "create", "bad/name"}, []string{"tenant"}},
		{[]string{"namespaces", "create", "noslash"}, []string{"tenant/namespace"}},
		{[]string{"namespaces", "set-retention", "t/ns", "--time", "1x"}, []string{"--time", "--size"}},
		{[]string{"namespaces", "set-retention", "t/ns", "--time", "1h", "--size", "10K"}, []string{"--size"}},
		{[]string{"namespaces", "set-message-ttl", "t/ns"}, []string{"--messageTTL (-ttl): required"}},
		{[]string{"namespaces", "set-message-ttl", "t/ns", "-ttl", "soon"}, []string{"--messageTTL", "soon"}},
		{[]string{"namespaces", "set-message-ttl", "t/ns", "--ttl", "soon"}, []string{"--ttl", "soon"}},
		{[]string{"namespaces", "set-message-ttl", "t/ns", "-ttl"}, []string{"--messageTTL", "needs an argument"}},
		{[]string{"namespaces", "set-message-ttl", "t/ns", "a/b", "-ttl", "1h"}, []string{"<tenant/namespace>"}},
		{[]string{"namespaces", "set-retention", "t/ns", "-t", "1h"}, []string{"--size"}},
		{[]string{"namespaces", "set-deduplication", "t/ns"}, []string{"--enable", "--disable"}},
		{[]string{"namespaces", "set-deduplication", "t/ns", "--enable", "--disable"}, []string{"exactly one"}},
		{[]string{"namespaces", "set-auto-topic-creation", "t/ns", "--enable", "--type", "partitioned"}, []string{"--num-partitions"}},
		{[]string{"namespaces", "set-auto-topic-creation", "t/ns", "--enable", "--type", "weird"}, []string{"--type"}},
		{[]string{"namespaces", "set-clusters", "t/ns"}, []string{"--clusters"}},
		{[]string{"topics", "create-partitioned-topic", "t", "-p", "0"}, []string{"-p/--partitions"}},
		{[]string{"topics", "create", "a/b"}, []string{"tenant/namespace/name"}},
		{[]string{"topics", "stats", "t", "--nope"}, []string{"unknown flag"}},
		{[]string{"topics", "skip", "t"}, []string{"-s/--subscription", "-n/--count"}},
		{[]string{"topics", "create-subscription", "t", "-s", "s", "--messageId", "middle"}, []string{"--messageId"}},
		{[]string{"topics", "reset-cursor", "t", "-s", "s"}, []string{"--time", "--messageId"}},
		{[]string{"topics", "reset-cursor", "t", "-s", "s", "--time", "1m", "--messageId", "1:2"}, []string{"exactly one"}},
		{[]string{"topics", "reset-cursor", "t", "-s", "s", "--messageId", "x"}, []string{"ledger:entry"}},
		{[]string{"topics", "peek-messages", "t", "-n", "0"}, []string{"-s/--subscription", "-n/--count"}},
		{[]string{"topics", "examine-message", "t", "-i", "middle", "-m", "0"}, []string{"--initialPosition", "--messagePosition"}},
		{[]string{"topics", "get-message-id", "t"}, []string{"--datetime", "required"}},
		{[]string{"topics", "get-message-id", "t", "-d", "soon"}, []string{"--datetime"}},
		{[]string{"topics", "update-properties", "t"}, []string{"--properties"}},
		{[]string{"topics", "update-properties", "t", "-p", "novalue"}, []string{"key=value"}},
		{[]string{"topics", "remove-properties", "t"}, []string{"--key"}},
		{[]string{"topics", "set-max-producers", "t"}, []string{"--max"}},
		{[]string{"topics", "set-max-consumers", "t", "--max", "-1"}, []string{"--max", "negative"}},
		{[]string{"topics", "set-message-ttl", "t"}, []string{"--ttl"}},
		{[]string{"topics", "set-retention", "t", "--time", "1h"}, []string{"--size"}},
		{[]string{"topics", "set-replication-clusters", "t"}, []string{"--clusters"}},
		{[]string{"topics", "set-schema-compatibility-strategy", "t", "--strategy", "sideways"}, []string{"--strategy"}},
		{[]string{"topics", "frobnicate"}, []string{"unknown command", "frobnicate"}},
		{[]string{"topics"}, []string{"missing command"}},
		{[]string{"bogus"}, []string{"unknown command"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			start := time.Now()
			adminRunner{t, a.url}.fails(2, tc.want, tc.args...)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v: a usage error must not wait for a server", d)
			}
		})
	}
	// A malformed URL is a usage error too; a dead server is a runtime one.
	out, err := run(context.Background(), "admin", "--admin-url", "localhost:8080", "clusters", "list")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "--admin-url") {
		t.Errorf("bad --admin-url: %v %q", err, out)
	}
	if _, err := a.run("clusters", "list"); err == nil || exitCode(err) != 1 {
		t.Errorf("unreachable server: %v, want exit 1", err)
	}
}

func TestParseRelativeTimeAndSize(t *testing.T) {
	for in, want := range map[string]int64{"30": 30, "30s": 30, "10m": 600, "2h": 7200, "1d": 86400, "1w": 604800, "1y": 365 * 86400, "1h30m": 5400} {
		if got, err := parseRelativeTime(in); err != nil || got != want {
			t.Errorf("parseRelativeTime(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-5m", "1x", "m"} {
		if got, err := parseRelativeTime(bad); err == nil {
			t.Errorf("parseRelativeTime(%q) = %d, want an error", bad, got)
		}
	}
	for in, want := range map[string]int64{"100": 100, "1k": 1 << 10, "500M": 500 << 20, "1G": 1 << 30, "2t": 2 << 40} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "G", "-1G", "1.5G", "10X"} {
		if got, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", bad, got)
		}
	}
}
