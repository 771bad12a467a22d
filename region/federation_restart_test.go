package region_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/globalconfig"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/region"
)

// freeBlock returns the first of n consecutive free loopback ports.
func freeBlock(t *testing.T, n int) int {
	t.Helper()
	for range 100 {
		base := 20000 + rand.IntN(30000)
		ok := true
		var lns []net.Listener
		for p := base; p < base+n; p++ {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				ok = false
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			ln.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no block of free ports")
	return 0
}

// TestRegionRestartsWhileGlobalStoreDown: a region restarted while the
// global configuration store is down comes up from its persisted copy of
// the configuration, serves its clients and replicates; when the store
// returns, writes made in one region reach the other.
func TestRegionRestartsWhileGlobalStoreDown(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	// Mostly waiting out a 30 s outage: runs beside the other waiters.
	t.Parallel()
	f := startFederation(t, 2, func(i int, c *region.Config) {
		if i == 1 {
			base := freeBlock(t, 10)
			c.MetastorePort, c.BookiePort, c.BrokerPort, c.HTTPPort = base, base+2, base+5, base+6
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topicName = "persistent://acme/geo/restart"
	c0 := pulsarClient(t, f.Regions[0].Endpoints().ServiceURL)
	faultHold(t, c0, topicName)
	c1 := pulsarClient(t, f.Regions[1].Endpoints().ServiceURL)
	faultHold(t, c1, topicName)
	produce(t, c1, topicName, "r1", 0, 100)

	f.StopGlobal()
	if err := f.StopRegion(ctx, 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := f.StartRegion(ctx, "r1"); err != nil {
		t.Fatalf("region r1 restart with the global store down: %v", err)
	}
	t.Logf("r1 restarted in %v with the global store down", time.Since(start).Round(time.Millisecond))
	// What an operator's dashboard shows: the cache's synced gauge.
	synced := strings.ReplaceAll(globalconfig.MetricSynced, ".", "_")
	for _, b := range f.Regions[1].Brokers() {
		m, err := scrapeMetrics(b.WebServiceURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := m[synced]; !ok || v != 0 {
			t.Errorf("r1's broker %s: %s is %v (present %v) while the global store is down, want 0", b.WebServiceURL, synced, v, ok)
		}
	}
	c1 = pulsarClient(t, f.Regions[1].Endpoints().ServiceURL)
	produce(t, c1, topicName, "r1", 100, 100)
	if got := consumeAll(t, c0, topicName, 200, time.Minute); got.next["r1"] != 200 || len(got.errs) > 0 {
		t.Fatalf("r0: %d from r1, errors %v", got.next["r1"], got.errs)
	}
	if got := consumeAll(t, c1, topicName, 200, time.Minute); got.next["r1"] != 200 || len(got.errs) > 0 {
		t.Fatalf("r1: %d from r1, errors %v", got.next["r1"], got.errs)
	}

	if err := f.StartGlobal(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "a tenant created in r1 after the store returned", func() bool {
		wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
		defer wcancel()
		err := f.Regions[1].Policies().CreateTenant(wctx, "back", policy.TenantInfo{AdminRoles: []string{}, AllowedClusters: []string{"r0", "r1"}})
		return err == nil || errors.Is(err, policy.ErrExists)
	})
	waitFor(t, 30*time.Second, "the tenant in r0", func() bool {
		_, err := f.Regions[0].Policies().Tenant(ctx, "back")
		return err == nil
	})

}
