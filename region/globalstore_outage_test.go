package region_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/region"
)

// TestAdminWritesWhileTheGlobalStoreIsUnreachable: two regions behind the
// emulated WAN; r0's link to the global configuration store is cut, then
// black-holed, then the store itself is stopped. Meanwhile an admin write
// through r0 (a namespace created, a namespace policy set) is answered 503
// naming the global configuration store, within the store's bound
// (policy.StoreTimeout, 4 s) and long before the client's own timeout;
// reads are served from r0's cache; r1, whose link is up, keeps writing
// during the link faults. Once the store is reachable again the next
// write through r0 succeeds at once and is read back.
//
// ISOBAR_GLOBAL_OUTAGE (e.g. 80s) holds each outage at least that long
// before it ends (by default it lasts as long as its requests take), for
// the numbers in docs/BENCHMARKS.md.
func TestAdminWritesWhileTheGlobalStoreIsUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	t.Parallel()
	var hold time.Duration
	if s := os.Getenv("ISOBAR_GLOBAL_OUTAGE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			t.Fatalf("ISOBAR_GLOBAL_OUTAGE=%q: want a duration", s)
		}
		hold = d
	}
	f := startFederationWith(t, 2, nil, region.Deps{}, func(c *region.FederationConfig) {
		c.WAN = &region.WANConfig{Latency: 20 * time.Millisecond}
	})
	web0 := f.Regions[0].Endpoints().WebServiceURL + "/admin/v2/"
	web1 := f.Regions[1].Endpoints().WebServiceURL + "/admin/v2/"
	const clientTimeout = 30 * time.Second
	hc := &http.Client{Timeout: clientTimeout}
	call := func(method, url, body string) (int, string, time.Duration) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: no answer after %v: %v", method, url, time.Since(start).Round(time.Millisecond), err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(start)
	}
	write := func(what, method, url, body string) time.Duration {
		t.Helper()
		st, b, took := call(method, url, body)
		if st/100 != 2 {
			t.Fatalf("%s: %s %s: %d %s after %v", what, method, url, st, b, took.Round(time.Millisecond))
		}
		return took
	}
	t.Logf("a write with the store reachable takes %v", write("baseline", "PUT", web0+"namespaces/acme/before", "").Round(time.Millisecond))

	link := f.WAN().Link("r0", region.GlobalStore)
	for _, fault := range []struct {
		name        string
		start, heal func() error
		linkOnly    bool // r1 still reaches the store
	}{
		{"cut", func() error { link.Cut(); return nil }, func() error { link.Up(); return nil }, true},
		{"blackhole", func() error { link.Blackhole(); return nil }, func() error { link.Up(); return nil }, true},
		{"stopped", func() error { f.StopGlobal(); return nil }, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			return f.StartGlobal(ctx)
		}, false},
	} {
		if err := fault.start(); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		for _, w := range []struct{ method, url, body string }{
			{"PUT", web0 + "namespaces/acme/during-" + fault.name, ""},
			{"POST", web0 + "namespaces/acme/geo/maxProducersPerTopic", "7"},
		} {
			st, b, took := call(w.method, w.url, w.body)
			if st != http.StatusServiceUnavailable || !strings.Contains(b, "global configuration store unreachable") {
				t.Fatalf("%s: %s %s: %d %s, want 503 naming the global configuration store", fault.name, w.method, w.url, st, b)
			}
			// Answered promptly: well before the client's own timeout.
			if took > clientTimeout/3 {
				t.Errorf("%s: %s %s: the 503 came after %v", fault.name, w.method, w.url, took.Round(time.Millisecond))
			}
			t.Logf("%s: %s %s: 503 after %v: %s", fault.name, w.method, strings.TrimPrefix(w.url, web0), took.Round(time.Millisecond), b)
		}
		// Reads come from r0's cache.
		for _, path := range []string{"namespaces/acme/geo", "namespaces/acme", "tenants", "clusters"} {
			if st, b, took := call("GET", web0+path, ""); st != http.StatusOK || took > time.Second {
				t.Errorf("%s: GET %s: %d %s after %v, want 200 from the cache", fault.name, path, st, b, took.Round(time.Millisecond))
			}
		}
		if fault.linkOnly {
			write(fault.name+": r1 during r0's fault", "PUT", web1+"namespaces/acme/r1-during-"+fault.name, "")
		}
		if rest := hold - time.Since(began); rest > 0 {
			time.Sleep(rest) // the outage's length is the scenario's clock
		}
		if err := fault.heal(); err != nil {
			t.Fatal(err)
		}
		outage := time.Since(began)
		took := write(fault.name+": the first write after the heal", "PUT", web0+"namespaces/acme/after-"+fault.name, "")
		t.Logf("%s: outage of %v; the first write after the heal took %v", fault.name, outage.Round(time.Millisecond), took.Round(time.Millisecond))
		if took > 5*time.Second {
			t.Errorf("%s: the first write after the heal took %v", fault.name, took.Round(time.Millisecond))
		}
		if st, b, _ := call("GET", web0+"namespaces/acme/after-"+fault.name, ""); st != http.StatusOK {
			t.Errorf("%s: read after the write: %d %s", fault.name, st, b)
		}
	}
	// Nothing refused was written.
	for _, ns := range []string{"during-cut", "during-blackhole", "during-stopped"} {
		if st, _, _ := call("GET", web0+"namespaces/acme/"+ns, ""); st != http.StatusNotFound {
			t.Errorf("namespace acme/%s: GET answered %d, want 404", ns, st)
		}
	}
}
