package broker_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/topic"
)

// TestSubscriptionProperties: properties given when a subscription is
// made through the admin API (Pulsar's createSubscription body) are kept
// with it, on every partition of a partitioned topic; they are read back
// from GET .../subscription/{sub}/properties and the topic's stats, and
// replaced by PUT; they survive the topic's unload.
func TestSubscriptionProperties(t *testing.T) {
	e := startEnv(t, nil)
	ctx := ctxT(t)
	srv := e.adminServer()
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+"/admin/v2/persistent/public/default/"+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	props := func(path string) map[string]string {
		t.Helper()
		code, body := do("GET", path, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("GET %s: %s: %v", path, body, err)
		}
		return m
	}
	if code, body := do("PUT", "parted/partitions", "2"); code/100 != 2 {
		t.Fatalf("create partitioned: %d %s", code, body)
	}
	for _, tp := range []string{"plain", "parted"} {
		code, body := do("PUT", tp+"/subscription/s", `{"ledgerId":-1,"entryId":-1,"properties":{"isobar.initialPosition":"earliest","team":"a"}}`)
		if code != http.StatusNoContent {
			t.Fatalf("%s: create with properties: %d %s", tp, code, body)
		}
		if got := props(tp + "/subscription/s/properties"); got["isobar.initialPosition"] != "earliest" || got["team"] != "a" || len(got) != 2 {
			t.Fatalf("%s: properties %v", tp, got)
		}
		if code, body := do("PUT", tp+"/subscription/s/properties", `{"team":"b"}`); code != http.StatusNoContent {
			t.Fatalf("%s: replace: %d %s", tp, code, body)
		}
		if got := props(tp + "/subscription/s/properties"); got["team"] != "b" || len(got) != 1 {
			t.Fatalf("%s: properties after the replace %v", tp, got)
		}
		if code, body := do("PUT", tp+"/subscription/s/properties", `{"":"x"}`); code != http.StatusBadRequest {
			t.Errorf("%s: an empty key: %d %s", tp, code, body)
		}
	}
	// Every partition has them, and they survive an unload.
	for _, p := range []string{"parted-partition-0", "parted-partition-1", "plain"} {
		name, _ := topic.Parse("persistent://public/default/" + p)
		if err := e.b.AdminAPI().Topics.Unload(ctx, name); err != nil {
			t.Fatal(err)
		}
		code, body := do("GET", p+"/stats", "")
		if code != http.StatusOK || !strings.Contains(body, `"subscriptionProperties":{"team":"b"}`) {
			t.Errorf("%s stats after an unload: %d %s", p, code, body)
		}
	}
	if code, _ := do("GET", "plain/subscription/nope/properties", ""); code != http.StatusNotFound {
		t.Errorf("properties of a missing subscription: %d, want 404", code)
	}
}
