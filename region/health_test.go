package region_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/region"
)

func httpStatus(url string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHealthTellsTheTruth: /readyz and /admin/v2/brokers/health answer 200
// only while the broker can serve: they fail while too few bookies are up
// for a new ledger and while the metadata store cannot be written, and
// recover with them. The health check round-trips an entry through the
// broker's heartbeat ledger.
func TestHealthTellsTheTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("region test: skipped with -short")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := region.Start(ctx, region.Config{Name: "health", DataDir: t.TempDir(), Bookies: 3}, region.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	web := r.Endpoints().WebServiceURL
	ready, health := web+"/readyz", web+"/admin/v2/brokers/health"
	expect := func(what string, want int, contains string) {
		t.Helper()
		faultWaitFor(t, 60*time.Second, what, func() bool {
			c1, b1 := httpStatus(ready)
			c2, b2 := httpStatus(health)
			return c1 == want && c2 == want && strings.Contains(b1+b2, contains)
		})
	}
	expect("healthy at start", 200, "ready")
	for i := 0; i < 2; i++ {
		if err := r.StopBookie(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	expect("unhealthy with one bookie of three", 503, "writable bookies")
	for i := 0; i < 2; i++ {
		if err := r.StartBookie(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	expect("healthy with the bookies back", 200, "ok")
	if err := r.StopMetastore(ctx); err != nil {
		t.Fatal(err)
	}
	expect("unhealthy without the metadata store", 503, "metadata store")
	if err := r.StartMetastore(ctx); err != nil {
		t.Fatal(err)
	}
	expect("healthy with the metadata store back", 200, "ok")
}
