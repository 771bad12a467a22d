package region_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/region"
)

// adminCall sends one admin request and returns the status and body.
func adminCall(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
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

// storedIn returns the bytes region r stores for topic path
// ("acme/geo/x"), 0 when it has no copy or no longer serves it.
func storedIn(t *testing.T, r *region.Region, path string) int64 {
	t.Helper()
	code, body := adminCall(t, "GET", r.Endpoints().WebServiceURL+"/admin/v2/persistent/"+path+"/internalStats", "")
	if code == http.StatusNotFound || code == http.StatusConflict && strings.Contains(body, "being deleted") {
		return 0 // no copy, or one no longer served (deleted or being deleted)
	}
	if code != http.StatusOK {
		t.Fatalf("%s internal stats in %s: %d %s", path, r.Name(), code, body)
	}
	var st struct {
		TotalSize int64 `json:"totalSize"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	return st.TotalSize
}

// TestDeletesReachEveryRegion is the reproduction of the issue "deletes
// that reach every region", through the admin API, with two and three
// regions: a topic and a one-partition topic with messages everywhere,
// deleted through one region, are gone from every region; created again,
// every copy starts empty and a subscription from earliest gets only
// what is published after. A subscription deleted through one region goes
// from every region. A namespace delete without force is refused
// while any region holds a topic of it, naming the region; with force it
// empties every region.
func TestDeletesReachEveryRegion(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	t.Parallel()
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d regions", n), func(t *testing.T) {
			f := startFederation(t, n, nil)
			r0 := f.Regions[0]
			web := func(r *region.Region) string { return r.Endpoints().WebServiceURL + "/admin/v2/" }
			clients := map[string]pulsar.Client{}
			for _, r := range f.Regions {
				clients[r.Name()] = pulsarClient(t, r.Endpoints().ServiceURL)
			}
			const plain, parted = "acme/geo/plain", "acme/geo/parted"
			topics := []string{"persistent://" + plain, "persistent://" + parted + "-partition-0"}
			create := func() {
				t.Helper()
				if code, body := adminCall(t, "PUT", web(r0)+"persistent/"+plain, ""); code/100 != 2 {
					t.Fatalf("create %s: %d %s", plain, code, body)
				}
				if code, body := adminCall(t, "PUT", web(r0)+"persistent/"+parted+"/partitions", "1"); code/100 != 2 {
					t.Fatalf("create %s: %d %s", parted, code, body)
				}
			}
			create()
			for _, tp := range topics {
				produce(t, clients["r0"], tp, "r0", 0, 3)
			}
			// Every region holds the three messages of each.
			for _, r := range f.Regions[1:] {
				for _, tp := range topics {
					if got := consumeAll(t, clients[r.Name()], tp, 3, time.Minute); got.next["r0"] != 3 {
						t.Fatalf("%s in %s: %d of 3 before the delete", tp, r.Name(), got.next["r0"])
					}
				}
			}

			// Deleted through the last region.
			last := f.Regions[n-1]
			if code, body := adminCall(t, "DELETE", web(last)+"persistent/"+plain+"?force=true", ""); code != http.StatusNoContent {
				t.Fatalf("delete %s: %d %s", plain, code, body)
			}
			if code, body := adminCall(t, "DELETE", web(last)+"persistent/"+parted+"/partitions?force=true", ""); code != http.StatusNoContent {
				t.Fatalf("delete %s: %d %s", parted, code, body)
			}
			for _, r := range f.Regions {
				for _, p := range []string{plain, parted + "-partition-0"} {
					if b := storedIn(t, r, p); b != 0 {
						t.Errorf("%s still stores %d bytes of %s after the delete returned", r.Name(), b, p)
					}
				}
			}

			// Created again: every copy starts empty, and only what is
			// published now arrives anywhere.
			create()
			for _, tp := range topics {
				produce(t, clients["r0"], tp, "new", 0, 2)
			}
			for _, r := range f.Regions {
				for _, tp := range topics {
					got := consumeAll(t, clients[r.Name()], tp, 2, time.Minute)
					if got.next["r0"] != 0 || got.next["new"] != 2 {
						t.Errorf("%s in %s after the re-create: %v, want only the 2 new messages", tp, r.Name(), got.next)
					}
				}
			}

			// A subscription deleted through one region goes from every
			// region (consumeAll made "check" in each).
			if code, body := adminCall(t, "DELETE", web(last)+"persistent/"+plain+"/subscription/check?force=true", ""); code != http.StatusNoContent {
				t.Fatalf("delete subscription: %d %s", code, body)
			}
			for _, r := range f.Regions {
				code, body := adminCall(t, "GET", web(r)+"persistent/"+plain+"/subscriptions", "")
				if code != http.StatusOK || strings.Contains(body, `"check"`) {
					t.Errorf("%s subscriptions after the delete: %d %s", r.Name(), code, body)
				}
			}

			// A namespace whose topics live in another region.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var names []string
			for _, r := range f.Regions {
				names = append(names, r.Name())
			}
			if err := f.EnsureReplicated(ctx, "acme", "gone", names); err != nil {
				t.Fatal(err)
			}
			produce(t, clients[last.Name()], "persistent://acme/gone/t", last.Name(), 0, 3)
			waitFor(t, time.Minute, "acme/gone/t in r0", func() bool { return storedIn(t, r0, "acme/gone/t") > 0 })
			code, body := adminCall(t, "DELETE", web(r0)+"namespaces/acme/gone", "")
			if code != http.StatusConflict || !strings.Contains(body, "persistent://acme/gone/t") || !strings.Contains(body, last.Name()) {
				t.Fatalf("delete of a namespace with topics, without force: %d %s, want 409 naming the topic and the regions", code, body)
			}
			if code, body := adminCall(t, "DELETE", web(r0)+"namespaces/acme/gone?force=true", ""); code != http.StatusNoContent {
				t.Fatalf("delete of the namespace with force: %d %s", code, body)
			}
			if err := f.EnsureReplicated(ctx, "acme", "gone", names); err != nil {
				t.Fatal(err)
			}
			// A tenant with force: its namespaces with force, everywhere.
			if code, body := adminCall(t, "PUT", web(r0)+"tenants/doomed", fmt.Sprintf(`{"allowedClusters":[%q%s]}`, names[0], func() string {
				out := ""
				for _, n := range names[1:] {
					out += fmt.Sprintf(",%q", n)
				}
				return out
			}())); code/100 != 2 {
				t.Fatalf("create tenant: %d %s", code, body)
			}
			if err := f.EnsureReplicated(ctx, "doomed", "ns", names); err != nil {
				t.Fatal(err)
			}
			produce(t, clients[last.Name()], "persistent://doomed/ns/t", last.Name(), 0, 2)
			waitFor(t, time.Minute, "doomed/ns/t in r0", func() bool { return storedIn(t, r0, "doomed/ns/t") > 0 })
			if code, body := adminCall(t, "DELETE", web(r0)+"tenants/doomed?force=true", ""); code != http.StatusNoContent {
				t.Fatalf("delete of the tenant with force: %d %s", code, body)
			}
			// (Each region reads tenants from its cache of the global
			// store, which follows the delete a moment later.)
			for _, r := range f.Regions {
				waitFor(t, 10*time.Second, r.Name()+" to see the tenant gone", func() bool {
					code, _ := adminCall(t, "GET", web(r)+"tenants/doomed", "")
					return code == http.StatusNotFound
				})
			}

			for _, r := range f.Regions {
				if b := storedIn(t, r, "acme/gone/t"); b != 0 {
					t.Errorf("%s stores %d bytes of acme/gone/t after the namespace was deleted and created again", r.Name(), b)
				}
				if got := countAvailable(t, clients[r.Name()], "persistent://acme/gone/t"); got != 0 {
					t.Errorf("%s delivers %d messages of the deleted namespace's topic", r.Name(), got)
				}
			}
		})
	}
}

// TestDeleteWhileARegionIsPartitioned: a delete through r0 while r1 is
// cut off answers 503 naming r1 (r0's copy is gone, r1's waits); the
// topic cannot be created again meanwhile, and r1's entries of the
// deleted copy, produced during the partition, never reach r0. Once the
// partition heals, r1 deletes its copy, the delete retried completes, and
// the topic created again starts empty in both regions.
func TestDeleteWhileARegionIsPartitioned(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	t.Parallel()
	f := startFederationWith(t, 2, nil, region.Deps{}, func(c *region.FederationConfig) {
		c.WAN = &region.WANConfig{Latency: 5 * time.Millisecond}
	})
	r0, r1 := f.Regions[0], f.Regions[1]
	c0, c1 := pulsarClient(t, r0.Endpoints().ServiceURL), pulsarClient(t, r1.Endpoints().ServiceURL)
	const path, tp = "acme/geo/cut", "persistent://acme/geo/cut"
	web0 := r0.Endpoints().WebServiceURL + "/admin/v2/persistent/" + path
	if code, body := adminCall(t, "PUT", web0, ""); code/100 != 2 {
		t.Fatalf("create: %d %s", code, body)
	}
	produce(t, c0, tp, "r0", 0, 3)
	if got := consumeAll(t, c1, tp, 3, time.Minute); got.next["r0"] != 3 {
		t.Fatalf("r1 before the partition: %v", got.next)
	}

	if err := f.WAN().Partition("r1"); err != nil {
		t.Fatal(err)
	}
	produce(t, c1, tp, "r1", 0, 2) // r1 keeps serving its copy, which is being deleted
	start := time.Now()
	code, body := adminCall(t, "DELETE", web0+"?force=true", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"pendingRegions":["r1"]`) {
		t.Fatalf("delete with r1 cut off: %d %s, want 503 naming r1 as pending", code, body)
	}
	t.Logf("delete answered %d after %v: %s", code, time.Since(start).Round(time.Millisecond), body)
	if b := storedIn(t, r0, path); b != 0 {
		t.Errorf("r0 still stores %d bytes after the delete", b)
	}
	if code, body := adminCall(t, "PUT", web0, ""); code != http.StatusConflict || !strings.Contains(body, "r1") {
		t.Errorf("create while r1 has not deleted its copy: %d %s, want 409 naming r1", code, body)
	}

	if err := f.WAN().Heal("r1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "r1 to delete its copy", func() bool { return storedIn(t, r1, path) == 0 })
	if code, body := adminCall(t, "DELETE", web0+"?force=true", ""); code != http.StatusNoContent {
		t.Fatalf("delete retried after the heal: %d %s", code, body)
	}
	if code, body := adminCall(t, "PUT", web0, ""); code/100 != 2 {
		t.Fatalf("create again: %d %s", code, body)
	}
	produce(t, c0, tp, "new", 0, 2)
	for name, c := range map[string]pulsar.Client{"r0": c0, "r1": c1} {
		got := consumeAll(t, c, tp, 2, time.Minute)
		if got.next["new"] != 2 || got.next["r0"] != 0 || got.next["r1"] != 0 {
			t.Errorf("%s after the re-create: %v, want only the 2 new messages", name, got.next)
		}
	}
}

// TestDeleteWhileARegionIsDown: a delete through r0 while r1 is down
// answers 503 naming r1. When r1 starts again, none of its brokers has
// the topic loaded, and the delete gate keeps anyone from loading it:
// r1's owner loads it past the gate to delete it (the chaos drill's
// deletes found it waiting forever), the delete retried completes, and
// the topic created again starts empty in both regions.
func TestDeleteWhileARegionIsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	t.Parallel()
	f := startFederation(t, 2, nil)
	r0 := f.Regions[0]
	c0 := pulsarClient(t, r0.Endpoints().ServiceURL)
	const path, tp = "acme/geo/down", "persistent://acme/geo/down"
	web0 := r0.Endpoints().WebServiceURL + "/admin/v2/persistent/" + path
	if code, body := adminCall(t, "PUT", web0, ""); code/100 != 2 {
		t.Fatalf("create: %d %s", code, body)
	}
	produce(t, c0, tp, "r0", 0, 3)
	c1 := pulsarClient(t, f.Regions[1].Endpoints().ServiceURL)
	if got := consumeAll(t, c1, tp, 3, time.Minute); got.next["r0"] != 3 {
		t.Fatalf("r1 before the kill: %v", got.next)
	}
	c1.Close()

	if err := f.KillRegion("r1"); err != nil {
		t.Fatal(err)
	}
	code, body := adminCall(t, "DELETE", web0+"?force=true", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "r1") {
		t.Fatalf("delete with r1 down: %d %s, want 503 naming r1", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := f.StartRegion(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the delete retried to complete", func() bool {
		code, _ := adminCall(t, "DELETE", web0+"?force=true", "")
		return code == http.StatusNoContent || code == http.StatusNotFound
	})
	if code, body := adminCall(t, "PUT", web0, ""); code/100 != 2 {
		t.Fatalf("create again: %d %s", code, body)
	}
	produce(t, c0, tp, "new", 0, 2)
	c1 = pulsarClient(t, f.Regions[1].Endpoints().ServiceURL)
	for name, c := range map[string]pulsar.Client{"r0": c0, "r1": c1} {
		got := consumeAll(t, c, tp, 2, time.Minute)
		if got.next["new"] != 2 || got.next["r0"] != 0 {
			t.Errorf("%s after the re-create: %v, want only the 2 new messages", name, got.next)
		}
	}
}
