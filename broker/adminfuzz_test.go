package broker_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/globalconfig/schema"
)

// adminEnv is a broker with small limits (so that every request stays
// quick) and its admin server backed by the real policy store, which
// asks the broker whether a namespace has topics as a region does.
func adminEnv(t testing.TB) (*env, http.Handler) {
	t.Helper()
	var e *env
	e = startEnvWith(t, func(c *policy.Config) {
		c.MaxPartitions = 16
		c.MaxBundles = 16
		c.HasTopics = func(ctx context.Context, ns string) (bool, error) {
			ts, err := e.b.PersistentTopics(ctx, ns)
			return len(ts) > 0, err
		}
	}, func(c *setup) {
		c.Limits.MaxPartitionsPerTopic = 16
		c.Limits.MaxBundlesPerNamespace = 16
		c.Limits.MaxTopicsPerNamespace = 64
		c.Limits.MaxAdminRequestBytes = 64 << 10
	})
	schemas, err := schema.New(e.cl.Connect(), schema.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h := admin.New(admin.Config{Policies: e.pol, Broker: e.b.AdminAPI(), Cluster: "test", MaxRequestBytes: 64 << 10,
		AutoTopicCreation: policy.AutoTopicCreation{AllowAutoTopicCreation: true, TopicType: policy.TopicTypeNonPartitioned},
		Schemas:           schemas})
	return e, h
}

// adminSeeds are requests the fuzz target starts from: the hardening
// issue's examples, values at and beyond every limit, and ordinary calls.
var adminSeeds = []struct{ method, path, body string }{
	{"PUT", "/admin/v2/persistent/public/default/huge/partitions", "2147483647"},
	{"GET", "/admin/v2/persistent/public/default/huge/partitioned-stats", ""},
	{"DELETE", "/admin/v2/persistent/public/default/huge/partitions", ""},
	{"POST", "/admin/v2/namespaces/public/default/messageTTL", "18446744074"},
	{"POST", "/admin/v2/namespaces/public/default/messageTTL", "2147483647"},
	{"POST", "/admin/v2/namespaces/public/default/retention", `{"retentionTimeInMinutes":153722868,"retentionSizeInMB":9223372036854775807}`},
	{"POST", "/admin/v2/namespaces/public/default/backlogQuota", `{"limitSize":9223372036854775807,"limitTime":2147483648,"policy":"consumer_backlog_eviction"}`},
	{"POST", "/admin/v2/namespaces/public/default/autoTopicCreation", `{"allowAutoTopicCreation":true,"topicType":"partitioned","defaultNumPartitions":2147483647}`},
	{"PUT", "/admin/v2/namespaces/public/b", `{"bundles":{"numBundles":65537}}`},
	{"PUT", "/admin/v2/namespaces/public/c", `{"bundles":{"numBundles":16},"message_ttl_in_seconds":60}`},
	{"PUT", "/admin/v2/persistent/public/default/" + strings.Repeat("x", 300), ""},
	{"PUT", "/admin/v2/persistent/public/default/" + strings.Repeat("y", 225) + "/partitions", "1"},
	{"PUT", "/admin/v2/persistent/public/default/p/partitions", "16"},
	{"POST", "/admin/v2/persistent/public/default/p/partitions", "17"},
	{"GET", "/admin/v2/persistent/public/default/p/stats", ""},
	{"PUT", "/admin/v2/persistent/public/default/t/subscription/" + strings.Repeat("s", 300), ""},
	{"POST", "/admin/v2/persistent/public/default/t/subscription/s/skip/9223372036854775807", ""},
	{"POST", "/admin/v2/persistent/public/default/t/subscription/s/resetcursor/-9223372036854775808", ""},
	{"GET", "/admin/v2/persistent/public/default/t/ledger/9223372036854775807/entry/9223372036854775807", ""},
	{"PUT", "/admin/v2/persistent/public/default/m", `{"k":"v"}`},
	{"GET", "/admin/v2/persistent/public/default/m/subscription/s/position/9223372036854775807", ""},
	{"GET", "/admin/v2/persistent/public/default/m/subscription/" + strings.Repeat("s", 300) + "/position/1", ""},
	{"GET", "/admin/v2/persistent/public/default/m/examinemessage?initialPosition=earliest&messagePosition=9223372036854775807", ""},
	{"GET", "/admin/v2/persistent/public/default/m/messageid/9223372036854775807", ""},
	{"GET", "/admin/v2/non-persistent/public/default/m/messageid/0", ""},
	{"PUT", "/admin/v2/persistent/public/default/m/properties", `{"k":"` + strings.Repeat("v", 20<<10) + `"}`},
	{"DELETE", "/admin/v2/persistent/public/default/m/properties?key=k", ""},
	{"PUT", "/admin/v2/persistent/public/default/p/properties", `{"":"v"}`},
	{"PUT", "/admin/v2/tenants/" + strings.Repeat("t", 129), `{"allowedClusters":["test"]}`},
	{"PUT", "/admin/v2/clusters/" + strings.Repeat("c", 128), `{}`},
	{"DELETE", "/admin/v2/namespaces/public/c?force=true", ""},
	{"GET", "/admin/v2/namespaces/public/default/topics?mode=ALL", ""},
	{"GET", "/lookup/v2/topic/persistent/public/default/t", ""},
	{"PUT", "/admin/v2/namespaces/public/big", `{"x":"` + strings.Repeat("x", 70<<10) + `"}`},
	{"POST", "/admin/v2/namespaces/public/default/permissions/alice", `["produce","consume"]`},
	{"POST", "/admin/v2/namespaces/public/default/permissions/" + strings.Repeat("r", 257), `["consume"]`},
	{"POST", "/admin/v2/namespaces/public/default/permissions/bob", `["root",1]`},
	{"DELETE", "/admin/v2/namespaces/public/default/permissions/alice", ""},
	{"POST", "/admin/v2/namespaces/public/default/permissions/subscription/audit", `["alice","bob"]`},
	{"DELETE", "/admin/v2/namespaces/public/default/permissions/audit/bob", ""},
	{"GET", "/admin/v2/namespaces/public/default/permissions/subscription", ""},
	{"POST", "/admin/v2/persistent/public/default/t/permissions/alice", `["functions"]`},
	{"DELETE", "/admin/v2/persistent/public/default/t-partition-1/permissions/alice", ""},
	{"GET", "/admin/v2/non-persistent/public/default/t/permissions", ""},
	{"PUT", "/admin/v2/namespaces/public/auth", `{"auth_policies":{"destination_auth":{"persistent://public/auth/t":{"r":["produce","sinks"]}},"subscription_auth_roles":{"s":[]}}}`},
	{"POST", "/admin/v2/schemas/public/default/t/schema", `{"type":"AVRO","schema":"{\"type\":\"record\",\"name\":\"U\",\"fields\":[{\"name\":\"a\",\"type\":\"long\"}]}"}`},
	{"POST", "/admin/v2/schemas/public/default/t/compatibility", `{"type":"AVRO","schema":"{\"type\":\"record\",\"name\":\"U\",\"fields\":[{\"name\":\"b\",\"type\":[\"null\",{\"type\":\"array\",\"items\":\"U\"}]}]}"}`},
	{"POST", "/admin/v2/schemas/public/default/t/schema", `{"type":"JSON","schema":"{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[]}"}`},
	{"POST", "/admin/v2/schemas/public/default/t/version", `{"type":"STRING","schema":""}`},
	{"GET", "/admin/v2/schemas/public/default/t/schema/9223372036854775807", ""},
	{"GET", "/admin/v2/schemas/public/default/t-partition-1/schemas", ""},
	{"DELETE", "/admin/v2/schemas/public/default/t/schema?force=true", ""},
}

// FuzzAdminAPI sends any method, path and body to a real admin server over
// a real policy store (embedded etcd) and a real broker: it must never
// panic, never take long, and never answer 5xx, whatever it is sent.
func FuzzAdminAPI(f *testing.F) {
	for _, s := range adminSeeds {
		f.Add(s.method, s.path, []byte(s.body))
	}
	e, h := adminEnv(f)
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/admin/v2/" + path
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, "http://broker"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		start := time.Now()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %q (%d bytes): %d %s", method, path, len(body), rec.Code, truncate(rec.Body.String(), 500))
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("%s %q took %v", method, path, d)
		}
		if n := e.b.Panics(); n > 0 {
			t.Fatalf("%d panics in the broker", n)
		}
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
