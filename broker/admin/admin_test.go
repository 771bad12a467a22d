package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/bookie/racks"
	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
	"google.golang.org/protobuf/proto"
)

type env struct {
	t      *testing.T
	srv    *httptest.Server
	topics *fakeTopics
	store  *policy.Store
}

func start(t *testing.T) *env {
	t.Helper()
	return startWith(t, nil)
}

// startWith is start with the server's configuration changed by
// configure (when not nil) before the server is made.
func startWith(t *testing.T, configure func(*admin.Config)) *env {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{Bookies: 0})
	ft := newFakeTopics()
	store, err := policy.New(c.Connect(), policy.Config{LocalCluster: "standalone",
		HasTopics: func(ctx context.Context, ns string) (bool, error) {
			for _, d := range []topic.Domain{topic.Persistent, topic.NonPersistent} {
				names, err := ft.ListTopics(ctx, ns, d)
				if err != nil || len(names) > 0 {
					return len(names) > 0, err
				}
			}
			return false, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.EnsureStandalone(context.Background(), "standalone", policy.ClusterData{
		ServiceURL: "http://127.0.0.1:8080", BrokerServiceURL: "pulsar://127.0.0.1:6650"}); err != nil {
		t.Fatal(err)
	}
	cfg := admin.Config{Policies: store, Broker: adminapi.Broker{Topics: ft}, Cluster: "standalone", Bookies: racks.NewStore(c.Connect(), "standalone")}
	if configure != nil {
		configure(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.New(cfg))
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, topics: ft, store: store}
}

// do sends one request (no redirects followed) and returns the status,
// body and headers. contentType defaults to application/json.
func (e *env) do(method, path, body string, contentType ...string) (int, string, http.Header) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if len(contentType) > 0 {
		req.Header.Set("Content-Type", contentType[0])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

type step struct {
	method, path, body string
	status             int
	want               string // substring of the body ("" = anything)
	contentType        string
}

func (e *env) run(steps []step) {
	e.t.Helper()
	for i, s := range steps {
		var ct []string
		if s.contentType != "" {
			ct = []string{s.contentType}
		}
		status, body, hdr := e.do(s.method, s.path, s.body, ct...)
		if status != s.status || !strings.Contains(body, s.want) {
			e.t.Fatalf("step %d: %s %s %s: got %d %s, want %d containing %q", i, s.method, s.path, s.body, status, body, s.status, s.want)
		}
		if status >= 400 && status != http.StatusTemporaryRedirect {
			var eb struct {
				Reason string `json:"reason"`
			}
			if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Reason == "" || hdr.Get("Content-Type") != "application/json" {
				e.t.Fatalf("step %d: error body %q is not {\"reason\":...} JSON", i, body)
			}
			for _, k := range errkind.Kinds() {
				if strings.Contains(eb.Reason, k.Error()) {
					e.t.Fatalf("step %d: reason %q names the error table's kind %v (the status says it)", i, eb.Reason, k.Name)
				}
			}
		}
	}
}

func TestClustersTenantsNamespaces(t *testing.T) {
	e := start(t)
	e.run([]step{
		{"GET", "/admin/v2/clusters", "", 200, `["standalone"]`, ""},
		{"GET", "/admin/v2/clusters/standalone", "", 200, `"serviceUrl":"http://127.0.0.1:8080"`, ""},
		{"GET", "/admin/v2/clusters/nope", "", 404, "not found", ""},
		{"PUT", "/admin/v2/clusters/west", `{"serviceUrl":"http://west:8080"}`, 204, "", ""},
		{"PUT", "/admin/v2/clusters/west", `{}`, 409, "", ""},
		{"PUT", "/admin/v2/clusters/bad%20name", `{}`, 412, "", ""},
		{"PUT", "/admin/v2/clusters/x", `{not json`, 400, "", ""},
		{"POST", "/admin/v2/clusters/west", `{"serviceUrl":"http://west2:8080"}`, 204, "", ""},
		{"POST", "/admin/v2/clusters/east", `{}`, 404, "", ""},
		{"GET", "/admin/v2/clusters/west", "", 200, "west2", ""},
		{"GET", "/admin/v2/brokers/standalone", "", 200, `["127.0.0.1:8080"]`, ""},
		{"GET", "/admin/v2/brokers/west", "", 307, "", ""},
		{"GET", "/admin/v2/brokers/nope", "", 404, "", ""},
		{"GET", "/admin/v2/brokers/health", "", 200, "ok", ""},
		{"GET", "/admin/v2/brokers/ready", "", 200, "ok", ""},

		{"GET", "/admin/v2/tenants", "", 200, `["public"]`, ""},
		{"PUT", "/admin/v2/tenants/acme", `{"adminRoles":["a"],"allowedClusters":["west"]}`, 204, "", ""},
		{"PUT", "/admin/v2/tenants/acme", `{}`, 409, "", ""},
		{"PUT", "/admin/v2/tenants/ghost", `{"allowedClusters":["nowhere"]}`, 412, "", ""},
		{"GET", "/admin/v2/tenants/acme", "", 200, `{"adminRoles":["a"],"allowedClusters":["west"]}`, ""},
		{"GET", "/admin/v2/tenants/nope", "", 404, "", ""},
		{"DELETE", "/admin/v2/clusters/west", "", 412, "", ""},

		// Namespaces: the client test suite's body.
		{"PUT", "/admin/v2/namespaces/public/ns1", `{"auth_policies":{"namespace_auth":{"anonymous":["produce","consume"]}},"replication_clusters":["standalone"]}`, 204, "", ""},
		{"PUT", "/admin/v2/namespaces/public/ns1", `null`, 409, "", ""},
		{"PUT", "/admin/v2/namespaces/nope/ns1", ``, 404, "", ""},
		{"PUT", "/admin/v2/namespaces/acme/ns", `{"replication_clusters":["standalone"]}`, 412, "allowed", ""},
		{"PUT", "/admin/v2/namespaces/acme/ns", ``, 412, "", ""}, // local cluster is not allowed for acme
		{"PUT", "/admin/v2/namespaces/acme/ns", `{"replication_clusters":["west"]}`, 204, "", ""},
		{"GET", "/admin/v2/namespaces/public", "", 200, `["public/default","public/ns1"]`, ""},
		{"GET", "/admin/v2/namespaces/nope", "", 404, "", ""},
		{"GET", "/admin/v2/namespaces/public/ns1", "", 200, `"auth_policies":{"namespace_auth":{"anonymous":["consume","produce"]}}`, ""},
		{"GET", "/admin/v2/namespaces/public/nope", "", 404, "", ""},
		{"DELETE", "/admin/v2/tenants/acme", "", 409, "", ""},

		// Policy sub-resources.
		{"GET", "/admin/v2/namespaces/public/ns1/retention", "", 200, "null", ""},
		{"POST", "/admin/v2/namespaces/public/ns1/retention", `{"retentionTimeInMinutes":60,"retentionSizeInMB":-1}`, 204, "", ""},
		{"GET", "/admin/v2/namespaces/public/ns1/retention", "", 200, `{"retentionTimeInMinutes":60,"retentionSizeInMB":-1}`, ""},
		{"POST", "/admin/v2/namespaces/public/ns1/retention", `{"retentionTimeInMinutes":-5}`, 412, "", ""},
		{"DELETE", "/admin/v2/namespaces/public/ns1/retention", "", 204, "", ""},
		{"GET", "/admin/v2/namespaces/public/ns1/retention", "", 200, "null", ""},
		{"POST", "/admin/v2/namespaces/public/ns1/messageTTL", `30`, 204, "", ""},
		{"GET", "/admin/v2/namespaces/public/ns1/messageTTL", "", 200, "30", ""},
		{"POST", "/admin/v2/namespaces/public/ns1/messageTTL", `"x"`, 400, "", ""},
		{"DELETE", "/admin/v2/namespaces/public/ns1/messageTTL", "", 204, "", ""},
		{"POST", "/admin/v2/namespaces/public/default/backlogQuota", `{"limit": "10240", "policy": "producer_request_hold"}`, 204, "", ""},
		{"GET", "/admin/v2/namespaces/public/default/backlogQuotaMap", "", 200, `{"destination_storage":{"limitSize":10240,"limitTime":0,"policy":"producer_request_hold"}}`, ""},
		{"POST", "/admin/v2/namespaces/public/default/backlogQuota?backlogQuotaType=message_age", `{"limitTime":60,"policy":"producer_exception"}`, 204, "", ""},
		{"POST", "/admin/v2/namespaces/public/default/backlogQuota?backlogQuotaType=bogus", `{"policy":"producer_exception"}`, 400, "", ""},
		{"POST", "/admin/v2/namespaces/public/default/backlogQuota", `{"policy":"drop"}`, 412, "", ""},
		{"DELETE", "/admin/v2/namespaces/public/default/backlogQuota", "", 204, "", ""},
		{"GET", "/admin/v2/namespaces/public/default/backlogQuotaMap", "", 200, `{"message_age":`, ""},
		{"POST", "/admin/v2/namespaces/public/ns1/deduplication", `true`, 204, "", ""},
		{"GET", "/admin/v2/namespaces/public/ns1/deduplication", "", 200, "true", ""},
		{"DELETE", "/admin/v2/namespaces/public/ns1/deduplication", "", 204, "", ""},
		{"POST", "/admin/v2/namespaces/public/ns1/autoTopicCreation", `{"allowAutoTopicCreation":true,"topicType":"partitioned","defaultNumPartitions":2}`, 204, "", ""},
		{"GET", "/admin/v2/namespaces/public/ns1/autoTopicCreation", "", 200, `"topicType":"partitioned"`, ""},
		{"POST", "/admin/v2/namespaces/public/ns1/autoTopicCreation", `{"allowAutoTopicCreation":true,"topicType":"weird"}`, 412, "", ""},
		{"GET", "/admin/v2/namespaces/public/ns1/replication", "", 200, `["standalone"]`, ""},
		{"POST", "/admin/v2/namespaces/public/ns1/replication", `["standalone","west"]`, 412, "allowed clusters", ""},
		{"POST", "/admin/v2/tenants/public", `{"allowedClusters":["standalone","west"]}`, 204, "", ""},
		{"POST", "/admin/v2/namespaces/public/ns1/replication", `["standalone","west"]`, 204, "", ""},
		{"POST", "/admin/v2/tenants/public", `{"allowedClusters":["standalone"]}`, 412, "", ""},
		{"POST", "/admin/v2/namespaces/public/ns1/replication", `["nowhere"]`, 412, "", ""},
		{"POST", "/admin/v2/namespaces/public/ns1/replication", `[]`, 412, "", ""},
		{"GET", "/admin/v2/namespaces/public/ns1/replication", "", 200, `["standalone","west"]`, ""},
		{"POST", "/admin/v2/namespaces/public/nope/messageTTL", `30`, 404, "", ""},

		// Unknown routes and methods answer JSON too.
		{"GET", "/admin/v2/nothing/here", "", 404, "", ""},
		{"PATCH", "/admin/v2/clusters/standalone", "", 405, "", ""},

		// Deletes.
		{"DELETE", "/admin/v2/namespaces/acme/ns", "", 204, "", ""},
		{"DELETE", "/admin/v2/tenants/acme", "", 204, "", ""},
		{"DELETE", "/admin/v2/tenants/acme", "", 404, "", ""},
		{"POST", "/admin/v2/namespaces/public/ns1/replication", `["standalone"]`, 204, "", ""},
		{"POST", "/admin/v2/tenants/public", `{"allowedClusters":["standalone"]}`, 204, "", ""},
		{"DELETE", "/admin/v2/clusters/west", "", 204, "", ""},
		{"DELETE", "/admin/v2/namespaces/public/ns1", "", 204, "", ""},
		{"DELETE", "/admin/v2/namespaces/public/ns1", "", 404, "", ""},
	})
}

func TestTopics(t *testing.T) {
	e := start(t)
	const p = "/admin/v2/persistent/public/default"
	e.run([]step{
		// The client test suite's bare-integer body and pulsaradmin's object.
		{"PUT", p + "/pt/partitions", `3`, 204, "", ""},
		{"PUT", p + "/pt/partitions", `3`, 409, "", ""},
		{"PUT", p + "/pt2/partitions", `{"properties":null,"partitions":2}`, 204, "", "application/vnd.partitioned-topic-metadata+json"},
		{"PUT", p + "/pt3/partitions", `0`, 412, "", ""},
		{"PUT", p + "/pt3/partitions", `-1`, 400, "", ""},
		{"PUT", p + "/pt3/partitions", `abc`, 400, "", ""},
		{"PUT", p + "/pt3-partition-1/partitions", `2`, 412, "", ""},
		{"PUT", "/admin/v2/persistent/public/nope/pt/partitions", `2`, 404, "", ""},
		{"GET", p + "/pt/partitions", "", 200, `{"partitions":3}`, ""},
		{"GET", p + "/plain/partitions", "", 200, `{"partitions":0}`, ""},
		{"GET", p + "/plain/partitions?checkAllowAutoCreation=true", "", 200, `{"partitions":0}`, ""},
		{"GET", "/admin/v2/persistent/public/nope/pt/partitions", "", 404, "", ""},
		{"POST", p + "/pt/partitions", `2`, 412, "", ""},
		{"POST", p + "/pt/partitions", `5`, 204, "", ""},
		{"POST", p + "/notpt/partitions", `5`, 404, "", ""},
		{"GET", p + "/pt/partitions", "", 200, `{"partitions":5}`, ""},
		{"GET", p + "/partitioned", "", 200, `["persistent://public/default/pt","persistent://public/default/pt2"]`, ""},
		{"GET", "/admin/v2/non-persistent/public/default/partitioned", "", 200, `[]`, ""},

		// Non-partitioned topics (body null, as httpPut(nil) sends).
		{"PUT", p + "/plain", `null`, 204, "", ""},
		{"PUT", p + "/plain", ``, 409, "", ""},
		{"PUT", p + "/pt", `null`, 409, "", ""},
		{"PUT", p + "/plain/partitions", `2`, 409, "", ""},
		{"PUT", "/admin/v2/persistent/public/nope/x", `null`, 404, "", ""},
		{"PUT", p + "/enc%3Aoded", `null`, 204, "", ""},
		{"GET", "/admin/v2/namespaces/public/default/topics?mode=PERSISTENT", "", 200, `"persistent://public/default/enc:oded"`, ""},
		{"GET", "/admin/v2/namespaces/public/default/topics", "", 200, `"persistent://public/default/pt-partition-4"`, ""},
		{"GET", "/admin/v2/namespaces/public/default/topics?mode=NON_PERSISTENT", "", 200, `[]`, ""},
		{"GET", "/admin/v2/namespaces/public/default/topics?mode=bogus", "", 400, "", ""},
		{"GET", "/admin/v2/namespaces/public/nope/topics", "", 404, "", ""},
		{"GET", p, "", 200, `"persistent://public/default/plain"`, ""},
		{"GET", "/admin/v2/persistent/public/nope", "", 404, "", ""},

		// Subscriptions.
		{"PUT", p + "/plain/subscription/s1", ``, 204, "", ""},
		{"PUT", p + "/plain/subscription/s2", `{"ledgerId":-1,"entryId":-1,"partitionIndex":-1}`, 204, "", ""},
		{"PUT", p + "/plain/subscription/s2", ``, 409, "", ""},
		{"PUT", p + "/plain/subscription/s3", `{"ledgerId":"x"}`, 400, "", ""},
		{"PUT", p + "/missing/subscription/s1", ``, 404, "", ""},
		{"GET", p + "/plain/subscriptions", "", 200, `["s1","s2"]`, ""},
		{"POST", p + "/plain/subscription/s1/skip/3", ``, 204, "", ""},
		{"POST", p + "/plain/subscription/s1/skip/x", ``, 400, "", ""},
		{"POST", p + "/plain/subscription/s1/skip_all", ``, 204, "", ""},
		{"POST", p + "/plain/subscription/nope/skip_all", ``, 404, "", ""},
		{"POST", p + "/plain/subscription/s1/resetcursor/1700000000000", ``, 204, "", ""},
		{"POST", p + "/plain/subscription/s1/resetcursor", `{"ledgerId":7,"entryId":2}`, 204, "", ""},
		{"POST", p + "/plain/subscription/s1/resetcursor", ``, 400, "", ""},
		{"DELETE", p + "/plain/subscription/s2?force=true", ``, 204, "", ""},
		{"DELETE", p + "/plain/subscription/s2", ``, 404, "", ""},
		{"PUT", p + "/pt/subscription/ps", ``, 204, "", ""},
		{"GET", p + "/pt/subscriptions", "", 200, `["ps"]`, ""},
		{"POST", p + "/pt/subscription/ps/skip/1", ``, 405, "", ""},
		{"POST", p + "/pt/subscription/ps/resetcursor", `{"ledgerId":1,"entryId":1}`, 405, "", ""},
		{"POST", p + "/pt/subscription/ps/resetcursor/5", ``, 204, "", ""},

		// Stats.
		{"GET", p + "/plain/stats", "", 200, `"publishers":[{"accessMode":"Shared"`, ""},
		{"GET", p + "/plain/stats", "", 200, `"consumers":[{`, ""},
		{"GET", p + "/missing/stats", "", 404, "", ""},
		{"GET", p + "/pt/partitioned-stats", "", 200, `"metadata":{"partitions":5}`, ""},
		{"GET", p + "/pt/partitioned-stats", "", 200, `"persistent://public/default/pt-partition-0":{`, ""},
		{"GET", p + "/plain/partitioned-stats", "", 404, "", ""},
		{"GET", p + "/pt/stats", "", 200, `"msgRateIn":50`, ""},
		{"GET", p + "/plain/internalStats", "", 200, `"lastConfirmedEntry":"7:2"`, ""},
		{"GET", p + "/pt/internalStats", "", 405, "", ""},
		{"GET", p + "/plain/lastMessageId", "", 200, `{"ledgerId":0,"entryId":0,"partitionIndex":0}`, ""},
		{"GET", p + "/pt/lastMessageId", "", 405, "", ""},
		{"PUT", p + "/plain/unload", ``, 204, "", ""},
		{"PUT", p + "/pt/unload", ``, 204, "", ""},
		{"POST", p + "/plain/terminate", ``, 200, `{"ledgerId":1,"entryId":-1,"partitionIndex":-1}`, ""},
		{"POST", p + "/pt/terminate", ``, 405, "", ""},
		{"POST", p + "/missing/terminate", ``, 404, "", ""},
		{"POST", p + "/pt/terminate/partitions", ``, 200, `"4":{"ledgerId":1,"entryId":-1,"partitionIndex":4}`, ""},
		{"POST", p + "/plain/terminate/partitions", ``, 400, "", ""},
		{"GET", "/lookup/v2/topic/persistent/public/default/plain", "", 200, `{"brokerUrl":"pulsar://127.0.0.1:6650","brokerUrlTls":"","httpUrl":"http://127.0.0.1:8080","httpUrlTls":""}`, ""},
		{"GET", "/lookup/v2/topic/persistent/public/default/a%2Fb", "", 412, "", ""},

		// Deletion.
		{"DELETE", p + "/pt", ``, 409, "", ""},
		{"DELETE", p + "/pt/partitions", ``, 204, "", ""},
		{"DELETE", p + "/pt/partitions", ``, 404, "", ""},
		{"DELETE", "/admin/v2/namespaces/public/default", ``, 409, "", ""},
		{"DELETE", p + "/plain?force=true", ``, 204, "", ""},
		{"DELETE", p + "/plain", ``, 404, "", ""},
	})
	calls := e.topics.Calls()
	for _, want := range []string{
		"create persistent://public/default/pt-partition-4",
		"subscribe persistent://public/default/plain s1 at latest",
		"subscribe persistent://public/default/plain s2 at -1:-1",
		"skip persistent://public/default/plain s1 3",
		"skip persistent://public/default/plain s1 -1",
		"reset persistent://public/default/plain s1 t=1700000000000",
		"reset persistent://public/default/plain s1 7:2",
		"unsubscribe persistent://public/default/plain s2 force=true",
		"subscribe persistent://public/default/pt-partition-3 ps at latest",
		"reset persistent://public/default/pt-partition-4 ps t=5",
		"unload persistent://public/default/pt-partition-2",
		"terminate persistent://public/default/plain",
		"terminate persistent://public/default/pt-partition-4",
		"delete persistent://public/default/pt-partition-0 force=false",
		"delete persistent://public/default/plain force=true",
	} {
		if !slices.Contains(calls, want) {
			t.Errorf("no call %q in %q", want, calls)
		}
	}
}

// Raising the partition count creates the new partitions and, on them,
// the existing subscriptions at the earliest position.
func TestUpdatePartitionsCopiesSubscriptions(t *testing.T) {
	e := start(t)
	const p = "/admin/v2/persistent/public/default"
	e.run([]step{
		{"PUT", p + "/grow/partitions", `2`, 204, "", ""},
		{"PUT", p + "/grow/subscription/sub", ``, 204, "", ""},
		{"POST", p + "/grow/partitions", `3`, 204, "", ""},
	})
	calls := e.topics.Calls()
	if !slices.Contains(calls, "create persistent://public/default/grow-partition-2") ||
		!slices.Contains(calls, "subscribe persistent://public/default/grow-partition-2 sub at -1:-1") {
		t.Fatalf("calls = %q", calls)
	}
}

func TestAutoCreatePartitioned(t *testing.T) {
	e := start(t)
	e.run([]step{
		{"POST", "/admin/v2/namespaces/public/default/autoTopicCreation", `{"allowAutoTopicCreation":true,"topicType":"partitioned","defaultNumPartitions":4}`, 204, "", ""},
		{"GET", "/admin/v2/persistent/public/default/auto/partitions", "", 200, `{"partitions":0}`, ""},
		{"GET", "/admin/v2/persistent/public/default/auto/partitions?checkAllowAutoCreation=true", "", 200, `{"partitions":4}`, ""},
		{"GET", "/admin/v2/persistent/public/default/auto/partitions", "", 200, `{"partitions":4}`, ""},
		{"PUT", "/admin/v2/persistent/public/default/exists", `null`, 204, "", ""},
		{"GET", "/admin/v2/persistent/public/default/exists/partitions?checkAllowAutoCreation=true", "", 200, `{"partitions":0}`, ""},
		{"GET", "/admin/v2/persistent/public/default/auto-partition-1/partitions?checkAllowAutoCreation=true", "", 200, `{"partitions":0}`, ""},
	})
}

func TestNotOwnerRedirects(t *testing.T) {
	e := start(t)
	e.topics.owner = "http://other:8080"
	status, _, hdr := e.do("GET", "/admin/v2/persistent/public/default/t/stats?x=1", "")
	if status != http.StatusTemporaryRedirect || hdr.Get("Location") != "http://other:8080/admin/v2/persistent/public/default/t/stats?x=1" {
		t.Fatalf("got %d Location %q", status, hdr.Get("Location"))
	}
}

func TestDeleteNamespaceForce(t *testing.T) {
	e := start(t)
	e.run([]step{
		{"PUT", "/admin/v2/namespaces/public/gone", `{}`, 204, "", ""},
		{"PUT", "/admin/v2/persistent/public/gone/a", `null`, 204, "", ""},
		{"PUT", "/admin/v2/non-persistent/public/gone/b/partitions", `2`, 204, "", ""},
		{"DELETE", "/admin/v2/namespaces/public/gone", ``, 409, "", ""},
		{"DELETE", "/admin/v2/namespaces/public/gone?force=true", ``, 204, "", ""},
		{"GET", "/admin/v2/namespaces/public/gone", ``, 404, "", ""},
	})
}

func TestNoTopicsConfigured(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Bookies: 0})
	store, err := policy.New(c.Connect(), policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.New(admin.Config{Policies: store, Cluster: "c"}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/admin/v2/persistent/public/default/t/stats")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
	// Permissions need the store only (a 404: the store has no namespace).
	resp, err = http.Get(srv.URL + "/admin/v2/persistent/public/default/t/permissions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("topic permissions without topics: status %d, want 404", resp.StatusCode)
	}
	if err := (admin.Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "admin.policies") || !strings.Contains(err.Error(), "admin.cluster") {
		t.Fatalf("Validate() = %v", err)
	}
}

func TestEntry(t *testing.T) {
	e := start(t)
	e.run([]step{{"PUT", "/admin/v2/persistent/public/default/e", `null`, 204, "", ""}})
	meta := &pb.MessageMetadata{ProducerName: proto.String("prod"), SequenceId: proto.Uint64(9), PublishTime: proto.Uint64(1700000000123),
		Properties: []*pb.KeyValue{{Key: proto.String("Some-Key"), Value: proto.String("v")}}, PartitionKey: proto.String("pk")}
	raw, err := wire.AppendEntry(nil, meta, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	var batch []byte
	for _, m := range []string{"one", "two"} {
		batch, err = wire.AppendBatchMessage(batch, &pb.SingleMessageMetadata{PayloadSize: proto.Int32(int32(len(m)))}, []byte(m))
		if err != nil {
			t.Fatal(err)
		}
	}
	bmeta := &pb.MessageMetadata{ProducerName: proto.String("prod"), SequenceId: proto.Uint64(10), PublishTime: proto.Uint64(1), NumMessagesInBatch: proto.Int32(2)}
	braw, err := wire.AppendEntry(nil, bmeta, batch)
	if err != nil {
		t.Fatal(err)
	}
	e.topics.mu.Lock()
	e.topics.entries["persistent://public/default/e 7:0"] = raw
	e.topics.entries["persistent://public/default/e 7:1"] = braw
	e.topics.entries["persistent://public/default/e 7:2"] = []byte{0, 0, 0, 99}
	e.topics.mu.Unlock()

	status, body, hdr := e.do("GET", "/admin/v2/persistent/public/default/e/ledger/7/entry/0", "")
	if status != 200 || body != "hello" || hdr.Get("X-Pulsar-Message-Id") != "7:0" ||
		hdr.Get("X-Pulsar-Publish-Time") != "2023-11-14T22:13:20.123Z" || hdr.Get("X-Pulsar-Property") != `{"Some-Key":"v"}` ||
		hdr.Get("X-Pulsar-Partition-Key") != "pk" || hdr.Get("X-Pulsar-Sequence-Id") != "9" {
		t.Fatalf("entry 7:0: %d %q %v", status, body, hdr)
	}
	status, body, hdr = e.do("GET", "/admin/v2/persistent/public/default/e/ledger/7/entry/1", "")
	if status != 200 || hdr.Get("X-Pulsar-Num-Batch-Message") != "2" || body != string(batch) {
		t.Fatalf("entry 7:1: %d %q %v", status, body, hdr)
	}
	e.run([]step{
		{"GET", "/admin/v2/persistent/public/default/e/ledger/7/entry/2", "", 500, "", ""},
		{"GET", "/admin/v2/persistent/public/default/e/ledger/7/entry/3", "", 404, "", ""},
		{"GET", "/admin/v2/persistent/public/default/e/ledger/x/entry/3", "", 400, "", ""},
	})
}

func TestUncleanPaths(t *testing.T) {
	e := start(t)
	e.run([]step{
		// What the client tests' topicPath helper produces before path.Join.
		{"PUT", "/admin/v2/persistent/public/default//dbl", `null`, 204, "", ""},
		{"GET", "/admin/v2/persistent/public/default//dbl/stats", "", 200, `"publishers"`, ""},
		{"GET", "/admin/v2/tenants/", "", 200, `["public"]`, ""},
	})
}

// An invalid topic or namespace name is 412 ("Topic name is not valid",
// "Namespace name is not valid" in Pulsar) on every path that takes one.
func TestInvalidNamesAre412(t *testing.T) {
	e := start(t)
	var steps []step
	topicPaths := []struct{ method, suffix, body string }{
		{"PUT", "", ""}, {"DELETE", "", ""},
		{"PUT", "/partitions", "2"}, {"POST", "/partitions", "3"}, {"GET", "/partitions", ""}, {"DELETE", "/partitions", ""},
		{"GET", "/stats", ""}, {"GET", "/partitioned-stats", ""}, {"GET", "/internalStats", ""},
		{"GET", "/subscriptions", ""}, {"PUT", "/subscription/s", ""}, {"DELETE", "/subscription/s", ""},
		{"POST", "/subscription/s/skip/1", ""}, {"POST", "/subscription/s/skip_all", ""},
		{"POST", "/subscription/s/resetcursor/0", ""}, {"POST", "/subscription/s/resetcursor", `{"ledgerId":1,"entryId":1}`},
		{"PUT", "/unload", ""}, {"GET", "/lastMessageId", ""},
		{"GET", "/replication", ""}, {"POST", "/replication", `["standalone"]`}, {"DELETE", "/replication", ""},
		{"GET", "/ledger/1/entry/1", ""},
	}
	for _, bad := range []string{"public/default/bad%20name", "public/default/a%2Fb", "public/bad%3Cns/x", "bad%20tenant/default/x"} {
		for _, d := range []string{"persistent", "non-persistent"} {
			for _, p := range topicPaths {
				steps = append(steps, step{p.method, "/admin/v2/" + d + "/" + bad + p.suffix, p.body, 412, "invalid name", ""})
			}
			steps = append(steps, step{"GET", "/lookup/v2/topic/" + d + "/" + bad, "", 412, "invalid name", ""})
		}
	}
	for _, ns := range []string{"public/bad%20ns", "bad%3Ctenant/default"} {
		for _, p := range []struct{ method, suffix, body string }{
			{"GET", "", ""}, {"PUT", "", ""}, {"DELETE", "", ""}, {"GET", "/topics", ""},
			{"GET", "/retention", ""}, {"POST", "/retention", `{"retentionTimeInMinutes":1,"retentionSizeInMB":1}`}, {"DELETE", "/retention", ""},
			{"GET", "/backlogQuotaMap", ""},
		} {
			steps = append(steps, step{p.method, "/admin/v2/namespaces/" + ns + p.suffix, p.body, 412, "invalid name", ""})
		}
		for _, d := range []string{"persistent", "non-persistent"} {
			steps = append(steps, step{"GET", "/admin/v2/" + d + "/" + ns, "", 412, "invalid name", ""},
				step{"GET", "/admin/v2/" + d + "/" + ns + "/partitioned", "", 412, "invalid name", ""})
		}
	}
	e.run(steps)
}
