package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/bookie/racks"
	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/globalconfig/schema"
	"github.com/isobar-mq/isobar/globalconfig/schema/compat"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/topic"
)

// TestEndpointAuthorization calls admin endpoints of every kind as every
// kind of role, through token authentication, and checks who is refused
// (401 without a valid token, 403 without the right, with a reason) and
// that a refused call changes nothing: neither the configuration store
// nor the broker is touched.
func TestEndpointAuthorization(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Bookies: 0})
	ft := newFakeTopics()
	store, err := policy.New(c.Connect(), policy.Config{LocalCluster: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := store.EnsureStandalone(ctx, "standalone", policy.ClusterData{ServiceURL: "http://127.0.0.1:8080", BrokerServiceURL: "pulsar://127.0.0.1:6650"}); err != nil {
		t.Fatal(err)
	}
	if err := store.CreateTenant(ctx, "acme", policy.TenantInfo{AdminRoles: []string{"acme-admin"}, AllowedClusters: []string{"standalone"}}); err != nil {
		t.Fatal(err)
	}
	if err := store.CreateTenant(ctx, "other", policy.TenantInfo{AdminRoles: []string{"other-admin"}, AllowedClusters: []string{"standalone"}}); err != nil {
		t.Fatal(err)
	}
	if err := store.CreateNamespace(ctx, "acme/app", nil); err != nil {
		t.Fatal(err)
	}
	if err := store.GrantNamespacePermission(ctx, "acme/app", "writer", []string{"produce"}); err != nil {
		t.Fatal(err)
	}
	if err := store.GrantNamespacePermission(ctx, "acme/app", "reader", []string{"consume"}); err != nil {
		t.Fatal(err)
	}
	tp, _ := topic.Parse("persistent://acme/app/t")
	if err := ft.CreateTopic(ctx, tp); err != nil {
		t.Fatal(err)
	}
	if err := ft.CreateSubscription(ctx, tp, "s", nil); err != nil {
		t.Fatal(err)
	}

	secret := auth.NewSecretKey()
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	os.WriteFile(keyFile, secret, 0o600)
	srv, err := auth.NewServer(auth.Config{AuthenticationEnabled: true, AuthorizationEnabled: true,
		Token: auth.TokenConfig{SecretKey: keyFile}, SuperUserRoles: []string{"root"}})
	if err != nil {
		t.Fatal(err)
	}
	schemas, err := schema.New(c.Connect(), schema.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := schemas.Add(ctx, tp, compat.Full, schema.Info{Type: "STRING"}); err != nil {
		t.Fatal(err)
	}
	bookies := racks.NewStore(c.Connect(), "standalone")
	ledgers, err := ledger.NewClient(c.Connect(), ledger.Config{Region: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledgers.Close() })
	cfg := admin.Config{Policies: store, Broker: adminapi.Broker{Topics: ft, Brokers: newFakeBrokers(ft)}, Cluster: "standalone", Authz: auth.NewAuthorizer(srv, policy.AuthSource{Store: store}), Schemas: schemas, Bookies: bookies,
		Recovery: ledger.Operations{Client: ledgers}}
	hs := httptest.NewServer(srv.HTTP(admin.New(cfg)))
	t.Cleanup(hs.Close)

	call := func(tok, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	token := func(role string) string {
		s, _ := auth.Sign(auth.HS256, secret, role, time.Now().Add(time.Hour))
		return s
	}

	// Who may call what: each level lists the roles allowed.
	roles := []string{"root", "acme-admin", "other-admin", "writer", "reader", "nobody"}
	levels := map[string][]string{
		"any":     roles,
		"super":   {"root"},
		"tadmin":  {"root", "acme-admin"},
		"lookup":  {"root", "acme-admin", "writer", "reader"},
		"consume": {"root", "acme-admin", "reader"},
		"produce": {"root", "acme-admin", "writer"},
	}
	const ns, tt, sc = "/admin/v2/namespaces/acme/app", "/admin/v2/persistent/acme/app/t", "/admin/v2/schemas/acme/app/t"
	endpoints := []struct{ method, path, body, level string }{
		{"GET", "/admin/v2/clusters", "", "any"},
		{"GET", "/admin/v2/clusters/standalone", "", "any"},
		{"PUT", "/admin/v2/clusters/evil", `{"serviceUrl":"http://x:8080"}`, "super"},
		{"POST", "/admin/v2/clusters/standalone", `{"serviceUrl":"http://y:8080"}`, "super"},
		{"DELETE", "/admin/v2/clusters/none", "", "super"},
		{"GET", "/admin/v2/tenants", "", "super"},
		{"GET", "/admin/v2/tenants/acme", "", "tadmin"},
		{"PUT", "/admin/v2/tenants/evil", `{"allowedClusters":["standalone"]}`, "super"},
		{"POST", "/admin/v2/tenants/acme", `{"adminRoles":["acme-admin"],"allowedClusters":["standalone"]}`, "super"},
		{"DELETE", "/admin/v2/tenants/none", "", "super"},
		{"GET", "/admin/v2/namespaces/acme", "", "tadmin"},
		{"PUT", "/admin/v2/namespaces/acme/evil", "", "tadmin"},
		{"GET", ns, "", "tadmin"},
		{"DELETE", "/admin/v2/namespaces/acme/none", "", "tadmin"},
		{"POST", ns + "/messageTTL", "60", "tadmin"},
		{"GET", ns + "/messageTTL", "", "tadmin"},
		{"POST", ns + "/maxProducersPerTopic", "5", "tadmin"},
		{"GET", ns + "/maxConsumersPerTopic", "", "tadmin"},
		{"PUT", ns + "/compactionThreshold", "100", "tadmin"},
		{"PUT", ns + "/schemaCompatibilityStrategy", `"FULL"`, "tadmin"},
		{"POST", ns + "/schemaValidationEnforced", "true", "tadmin"},
		{"GET", ns + "/schemaValidationEnforced", "", "tadmin"},
		{"PUT", ns + "/schemaAutoUpdateCompatibilityStrategy", `"Backward"`, "tadmin"},
		{"GET", ns + "/schemaAutoUpdateCompatibilityStrategy", "", "tadmin"},
		{"POST", ns + "/isAllowAutoUpdateSchema", "false", "tadmin"},
		{"GET", ns + "/isAllowAutoUpdateSchema", "", "tadmin"},
		{"POST", ns + "/subscriptionAuthMode", `"None"`, "tadmin"}, // (Prefix would refuse the subscription rows below)
		{"GET", ns + "/subscriptionAuthMode", "", "tadmin"},
		{"POST", ns + "/encryptionRequired", `"true"`, "tadmin"},
		{"GET", ns + "/encryptionRequired", "", "tadmin"},
		{"PUT", ns + "/properties", `{"k":"v"}`, "tadmin"},
		{"PUT", ns + "/property/k2/v2", "", "tadmin"},
		{"DELETE", ns + "/property/k", "", "tadmin"},
		{"POST", ns + "/persistence", `{"bookkeeperEnsemble":1,"bookkeeperWriteQuorum":1,"bookkeeperAckQuorum":1}`, "tadmin"},
		{"POST", ns + "/persistence/bookieAffinity", `{"bookkeeperAffinityGroupPrimary":"g"}`, "tadmin"},
		{"GET", ns + "/permissions", "", "tadmin"},
		{"POST", ns + "/permissions/intruder", `["produce","consume"]`, "tadmin"},
		{"DELETE", ns + "/permissions/ungranted", "", "tadmin"},
		{"PUT", ns + "/unload", "", "super"},
		{"PUT", ns + "/0x00000000_0x40000000/unload", "", "super"},
		{"POST", ns + "/clearBacklog", "", "tadmin"},
		{"POST", ns + "/clearBacklog/s", "", "tadmin"},
		{"POST", ns + "/0x00000000_0x40000000/clearBacklog", "", "tadmin"},
		{"POST", ns + "/0x00000000_0x40000000/clearBacklog/s", "", "tadmin"},
		{"POST", ns + "/unsubscribe/s", "", "tadmin"},
		{"POST", ns + "/0x00000000_0x40000000/unsubscribe/s", "", "tadmin"},
		{"DELETE", ns + "/0x40000000_0x80000000", "", "tadmin"},
		{"POST", ns + "/inactiveTopicPolicies", `{"maxInactiveDurationSeconds":60}`, "tadmin"},
		{"GET", ns + "/inactiveTopicPolicies", "", "tadmin"},
		{"DELETE", ns + "/inactiveTopicPolicies", "", "tadmin"},
		{"POST", ns + "/antiAffinity", `"g"`, "tadmin"},
		{"GET", ns + "/antiAffinity", "", "tadmin"},
		{"DELETE", ns + "/antiAffinity", "", "tadmin"},
		{"GET", "/admin/v2/namespaces/standalone/antiAffinity/g?property=acme", "", "tadmin"},
		{"GET", "/admin/v2/persistent/acme/app", "", "consume"}, // list: consume on the namespace
		{"PUT", "/admin/v2/persistent/acme/app/evil", "", "tadmin"},
		{"DELETE", "/admin/v2/persistent/acme/app/none", "", "tadmin"},
		{"GET", tt + "/stats", "", "lookup"},
		{"GET", tt + "/internalStats", "", "lookup"},
		{"GET", tt + "/subscriptions", "", "lookup"},
		{"PUT", tt + "/subscription/evil", "", "consume"},
		{"DELETE", tt + "/subscription/none", "", "consume"},
		{"POST", tt + "/subscription/s/skip_all", "", "consume"},
		{"GET", tt + "/subscription/s/position/1", "", "consume"},
		{"GET", tt + "/examinemessage?initialPosition=earliest", "", "lookup"},
		{"GET", tt + "/messageid/0", "", "lookup"},
		{"GET", tt + "/properties", "", "lookup"},
		{"PUT", tt + "/properties", `{"a":"b"}`, "tadmin"},
		{"DELETE", tt + "/properties?key=a", "", "tadmin"},
		{"PUT", tt + "/unload", "", "tadmin"},
		{"POST", tt + "/terminate", "", "tadmin"},
		{"GET", tt + "/permissions", "", "tadmin"},
		{"POST", tt + "/permissions/intruder", `["consume"]`, "tadmin"},
		{"POST", tt + "/maxProducers", "3", "tadmin"},
		{"POST", tt + "/messageTTL?messageTTL=60&isGlobal=true", "", "tadmin"},
		{"PUT", tt + "/schemaCompatibilityStrategy", `"FORWARD"`, "tadmin"},
		{"GET", tt + "/retention?applied=true", "", "tadmin"},
		{"DELETE", tt + "/dispatchRate", "", "tadmin"},
		{"POST", tt + "/replication", `["standalone"]`, "tadmin"},
		{"POST", tt + "/inactiveTopicPolicies", `{"maxInactiveDurationSeconds":60}`, "tadmin"},
		{"GET", tt + "/inactiveTopicPolicies?applied=true", "", "tadmin"},
		{"GET", "/lookup/v2/topic/persistent/acme/app/t", "", "lookup"},
		{"GET", sc + "/schema", "", "lookup"},
		{"GET", sc + "/schema/0", "", "lookup"},
		{"GET", sc + "/schemas", "", "lookup"},
		{"POST", sc + "/compatibility", `{"type":"INT64","schema":""}`, "lookup"},
		{"POST", sc + "/version", `{"type":"STRING","schema":""}`, "lookup"},
		// (Refused as incompatible once allowed, so the order does not
		// matter.)
		{"POST", sc + "/schema", `{"type":"INT64","schema":""}`, "produce"},
		{"DELETE", "/admin/v2/schemas/acme/app/none/schema", "", "tadmin"},
		{"GET", "/admin/v2/brokers/health", "", "any"},
		{"GET", "/admin/v2/brokers/standalone", "", "super"},
		{"GET", "/admin/v2/brokers", "", "super"},
		{"GET", "/admin/v2/brokers/leaderBroker", "", "super"},
		{"GET", "/admin/v2/brokers/configuration", "", "super"},
		{"GET", "/admin/v2/brokers/configuration/values", "", "super"},
		{"GET", "/admin/v2/brokers/configuration/runtime", "", "super"},
		{"POST", "/admin/v2/brokers/configuration/maxProducersPerTopic/5", "", "super"},
		{"DELETE", "/admin/v2/brokers/configuration/maxProducersPerTopic", "", "super"},
		{"GET", "/admin/v2/bookies/all", "", "super"},
		{"GET", "/admin/v2/bookies/racks-info", "", "super"},
		{"GET", "/admin/v2/bookies/racks-info/b1", "", "super"},
		{"POST", "/admin/v2/bookies/racks-info/b1?group=g1", `{"rack":"/r1"}`, "super"},
		{"DELETE", "/admin/v2/bookies/racks-info/b2", "", "super"},
		{"POST", "/admin/v2/bookies/decommission/b1", "", "super"},
		{"DELETE", "/admin/v2/bookies/decommission/b1", "", "super"},
		{"GET", "/admin/v2/bookies/decommissioned", "", "super"},
		{"GET", "/admin/v2/bookies/under-replicated", "", "super"},
		{"GET", "/admin/v3/transactions/transactionMetadata/0/1", "", "any"},
		{"GET", "/admin/v3/transactions/coordinatorStats", "", "any"},
		{"GET", "/admin/v3/transactions/coordinatorStats?coordinatorId=0", "", "any"},
		{"GET", "/admin/v3/transactions/slowTransactions/1000", "", "super"},
		{"GET", "/admin/v3/transactions/slowTransactions/1000?coordinatorId=0", "", "super"},
		{"GET", "/admin/v3/transactions/transactionBufferStats/acme/app/t", "", "lookup"},
		{"GET", "/admin/v3/transactions/transactionInBufferStats/acme/app/t/0/1", "", "lookup"},
		{"GET", "/admin/v3/transactions/pendingAckStats/acme/app/t/s", "", "lookup"},
		{"GET", "/admin/v3/transactions/transactionInPendingAckStats/acme/app/t/s/0/1", "", "lookup"},
	}

	snapshot := func() any {
		tenants, _ := store.Tenants(ctx)
		var out []any
		for _, tn := range tenants {
			ti, _ := store.Tenant(ctx, tn)
			nss, _ := store.Namespaces(ctx, tn)
			out = append(out, tn, ti, nss)
			for _, n := range nss {
				p, _ := store.Namespace(ctx, n)
				b, _ := json.Marshal(p)
				out = append(out, string(b))
			}
		}
		for _, sc := range []policy.TopicScope{policy.LocalScope, policy.GlobalScope} {
			tpol, _, _ := store.TopicPoliciesIn(ctx, tp, sc)
			b, _ := json.Marshal(tpol)
			out = append(out, string(b))
		}
		cl, _ := store.Cluster(ctx, "standalone")
		vs, _ := schemas.All(ctx, tp)
		ri, _ := bookies.Read(ctx)
		dec, _ := ledger.Operations{Client: ledgers}.Decommissioned(ctx)
		return append(out, cl, vs, ri, dec)
	}

	// Refusals first: every refused call leaves everything as it was.
	before := snapshot()
	ft.Calls() // (drains the broker's call log)
	forged, _ := auth.Sign(auth.HS256, auth.NewSecretKey(), "root", time.Time{})
	expired, _ := auth.Sign(auth.HS256, secret, "root", time.Now().Add(-time.Minute))
	for _, e := range endpoints {
		for name, tok := range map[string]string{"no token": "", "forged": forged, "expired": expired, "malformed": "a.b.c"} {
			if code, body := call(tok, e.method, e.path, e.body); code != 401 || !strings.Contains(body, "reason") {
				t.Errorf("%s %s %s: %d %s, want 401 with a reason", name, e.method, e.path, code, body)
			}
		}
		for _, r := range roles {
			if slices.Contains(levels[e.level], r) {
				continue
			}
			code, body := call(token(r), e.method, e.path, e.body)
			if code != 403 || !strings.Contains(body, r) {
				t.Errorf("role %s %s %s: %d %s, want 403 naming the role", r, e.method, e.path, code, body)
			}
		}
	}
	if after := snapshot(); !reflect.DeepEqual(before, after) {
		t.Fatalf("refused calls changed the state:\nbefore %v\nafter  %v", before, after)
	}
	if calls := ft.Calls(); len(calls) > 0 {
		t.Fatalf("refused calls reached the broker: %v", calls)
	}
	// The allowed roles get past authorization (whatever the endpoint
	// then answers: 404 for what does not exist, say). The calls leave
	// the tenant's admins and the grants as they are, so the order of the
	// list does not matter.
	for _, e := range endpoints {
		for _, r := range levels[e.level] {
			if code, body := call(token(r), e.method, e.path, e.body); code == 401 || code == 403 {
				t.Errorf("role %s %s %s: %d %s, want it allowed", r, e.method, e.path, code, body)
			}
		}
	}
}
