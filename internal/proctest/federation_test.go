package proctest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// skipUnlessProcessTests skips the multi-process suites under -short and
// where ISOBAR_PROCESS_TESTS=0.
func skipUnlessProcessTests(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process suite: skipped with -short")
	}
	if os.Getenv("ISOBAR_PROCESS_TESTS") == "0" {
		t.Skip("multi-process suite: ISOBAR_PROCESS_TESTS=0")
	}
}

// fullLayout is the federation of the deployment acceptance: two regions,
// each with 3 etcd members, 3 bookies, 2 brokers, NATS and a replicator,
// and a 3-member global store: 23 processes of the built binary.
func fullLayout() Layout {
	return Layout{
		Regions: []string{"east", "west"}, Global: 3,
		Metastores: 3, Bookies: 3, Brokers: 2, Replicators: 1,
		BrokerLeaseTTL: 5 * time.Second,
	}
}

// TestProcessFederationSurvivesKills runs the full layout under a steady
// keyed load produced in both regions (de-duplication on) and consumed in
// both, and SIGKILLs one process of each role in turn: an etcd member of
// a region, a global-store member, a bookie, the broker owning a loaded
// topic, the replicator, a NATS server. Each comes back after a while.
// Then every acknowledged message must have reached both regions, none
// stored twice, each key in order; redeliveries are counted. The test
// prints how long each kill interrupted publishing and delivery.
func TestProcessFederationSurvivesKills(t *testing.T) {
	skipUnlessProcessTests(t)
	f := StartFederation(t, fullLayout(), t.TempDir())
	f.Replicate(t, "acme", "geo")
	east, west := f.Regions[0], f.Regions[1]
	sources := []Source{
		{Region: "east", Topic: "persistent://acme/geo/from-east"},
		{Region: "west", Topic: "persistent://acme/geo/from-west"},
	}
	l := StartLoad(t, map[string]string{"east": east.ServiceURL(), "west": west.ServiceURL()}, sources, 8, 20*time.Millisecond)
	waitProgress(t, l, 200, time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	type kill struct {
		what string
		proc func() *Proc
	}
	kills := []kill{
		{"east etcd member", func() *Proc { return east.Meta.Members[1] }},
		{"global store member", func() *Proc { return f.Global.Members[2] }},
		{"east bookie", func() *Proc { return east.Bookies[0] }},
		{"east broker owning from-east", func() *Proc {
			i, err := east.Owner(ctx, sources[0].Topic)
			if err != nil || i < 0 {
				t.Fatalf("owner of %s: %v", sources[0].Topic, err)
			}
			return east.Brokers[i]
		}},
		{"east replicator", func() *Proc { return east.Replicators[0] }},
		{"west NATS server", func() *Proc { return west.NATS }},
	}
	for _, k := range kills {
		p := k.proc()
		from := time.Now()
		p.Kill()
		// Down for a while under load, then back.
		time.Sleep(5 * time.Second)
		p.Start()
		p.WaitReady(90 * time.Second)
		// Flowing again: more acknowledgements and deliveries than
		// before the restart.
		acked, delivered := l.Acked(), l.Delivered()
		waitFor(t, 2*time.Minute, k.what+": load flowing again", func() bool {
			return l.Acked() > acked+50 && l.Delivered() > delivered+100
		})
		pub, del := l.Gaps(from, time.Now())
		t.Logf("SIGKILL %-30s (%s): longest publish gap %v, longest delivery gap %v", k.what, p.Name, pub.Round(time.Millisecond), del.Round(time.Millisecond))
	}
	l.StopProducing()
	if err := l.WaitDelivered(3 * time.Minute); err != nil {
		t.Errorf("after the kills: %v", err)
	}
	r := l.Check()
	t.Logf("acknowledged %d, delivered %d (both regions), redeliveries %d, send errors %d", r.Acked, r.Delivered, r.Redeliveries, len(l.SendErrors()))
	assertReport(t, r)
}

func assertReport(t *testing.T, r Report) {
	t.Helper()
	if len(r.Lost) > 0 {
		t.Errorf("%d acknowledged messages lost, e.g. %v", len(r.Lost), head(r.Lost))
	}
	if len(r.Duplicates) > 0 {
		t.Errorf("%d messages stored twice, e.g. %v", len(r.Duplicates), head(r.Duplicates))
	}
	if len(r.OrderViolations) > 0 {
		t.Errorf("%d per-key order violations, e.g. %v", len(r.OrderViolations), head(r.OrderViolations))
	}
}

func head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}

// waitProgress waits until at least n messages were acknowledged and
// delivered.
func waitProgress(t *testing.T, l *Load, n int, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("%d messages acknowledged and delivered", n), func() bool {
		return l.Acked() >= n && l.Delivered() >= n
	})
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestProcessRollingRestart restarts every broker and then every bookie of
// a region, one at a time, with SIGTERM (each drains), waiting for its
// /readyz before the next, under a steady load: no send may fail and no
// acknowledged message may be lost. It reports the longest publish gap.
func TestProcessRollingRestart(t *testing.T) {
	skipUnlessProcessTests(t)
	f := StartFederation(t, Layout{
		Regions: []string{"east"}, Global: 1, Metastores: 1, Bookies: 3, Brokers: 2,
		BrokerLeaseTTL: 5 * time.Second,
	}, t.TempDir())
	f.Replicate(t, "acme", "roll")
	east := f.Regions[0]
	var sources []Source
	for i := range 4 {
		sources = append(sources, Source{Region: "east", Topic: fmt.Sprintf("persistent://acme/roll/t%d", i)})
	}
	l := StartLoad(t, map[string]string{"east": east.ServiceURL()}, sources, 8, 20*time.Millisecond)
	waitProgress(t, l, 200, time.Minute)
	start := time.Now()
	for _, p := range append(append([]*Proc{}, east.Brokers...), east.Bookies...) {
		from := time.Now()
		if err := p.Term(time.Minute); err != nil {
			t.Fatalf("%s: SIGTERM: %v\n%s", p.Name, err, p.Tail(30))
		}
		took := time.Since(from)
		p.Start()
		p.WaitReady(90 * time.Second)
		acked := l.Acked()
		waitFor(t, time.Minute, p.Name+" restarted: load flowing", func() bool { return l.Acked() > acked+100 })
		pub, del := l.Gaps(from, time.Now())
		t.Logf("rolling restart of %-16s: drained in %v; longest publish gap %v, longest delivery gap %v", p.Name, took.Round(time.Millisecond), pub.Round(time.Millisecond), del.Round(time.Millisecond))
	}
	pub, _ := l.Gaps(start, time.Now())
	l.StopProducing()
	if errs := l.SendErrors(); len(errs) > 0 {
		t.Errorf("%d sends failed during the rolling restart, e.g. %v", len(errs), errs[0])
	}
	if err := l.WaitDelivered(2 * time.Minute); err != nil {
		t.Errorf("after the rolling restart: %v", err)
	}
	r := l.Check()
	t.Logf("rolling restart of %d brokers and %d bookies: longest publish gap %v; acknowledged %d, delivered %d, redeliveries %d",
		len(east.Brokers), len(east.Bookies), pub.Round(time.Millisecond), r.Acked, r.Delivered, r.Redeliveries)
	assertReport(t, r)
}
