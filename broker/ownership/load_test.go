package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/topic"
)

func TestLoadReportUsage(t *testing.T) {
	tests := []struct {
		name string
		rep  *LoadReport
		want int
	}{
		{"nil", nil, 0},
		{"idle", &LoadReport{CPU: ResourceUsage{Usage: 9.9, Limit: 100}}, 0},
		{"cpu", &LoadReport{CPU: ResourceUsage{Usage: 45, Limit: 100}}, 4},
		{"messages in and out together", &LoadReport{MsgRateIn: 600, MsgRateOut: 1500}, 2},
		{"bytes", &LoadReport{MsgThroughputIn: 3 << 20}, 3},
		{"all", &LoadReport{CPU: ResourceUsage{Usage: 100}, MsgRateIn: 1000, MsgThroughputOut: 1 << 20}, 12},
		{"negative stays zero", &LoadReport{CPU: ResourceUsage{Usage: -50}}, 0},
	}
	for _, tt := range tests {
		if got := tt.rep.Usage(); got != tt.want {
			t.Errorf("%s: Usage = %d; want %d", tt.name, got, tt.want)
		}
	}
}

func TestShouldPublish(t *testing.T) {
	t0 := time.Unix(1000, 0)
	base := &LoadReport{CPU: ResourceUsage{Usage: 20}, MsgRateIn: 100, NumTopics: 10, Bundles: []string{"t/n/0x00000000_0x40000000"}}
	with := func(f func(*LoadReport)) *LoadReport {
		c := *base
		f(&c)
		return &c
	}
	tests := []struct {
		name string
		pub  *LoadReport
		cur  *LoadReport
		at   time.Duration // since publication
		want bool
	}{
		{"first sample", nil, base, 0, true},
		{"unchanged", base, with(func(*LoadReport) {}), time.Minute, false},
		{"small change", base, with(func(r *LoadReport) { r.MsgRateIn = 109; r.CPU.Usage = 21 }), time.Minute, false},
		{"rate over the threshold", base, with(func(r *LoadReport) { r.MsgRateIn = 111 }), time.Minute, true},
		{"cpu over the threshold", base, with(func(r *LoadReport) { r.CPU.Usage = 17 }), time.Minute, true},
		{"topics over the threshold", base, with(func(r *LoadReport) { r.NumTopics = 12 }), time.Minute, true},
		{"from zero", base, with(func(r *LoadReport) { r.MsgRateOut = 1 }), time.Minute, true},
		{"bundle gained", base, with(func(r *LoadReport) { r.Bundles = append([]string{"a/b/0x00000000_0xffffffff"}, r.Bundles...) }), time.Minute, true},
		{"max interval", base, with(func(*LoadReport) {}), 15 * time.Minute, true},
	}
	for _, tt := range tests {
		if got := shouldPublish(tt.pub, t0, tt.cur, t0.Add(tt.at), 10, 15*time.Minute); got != tt.want {
			t.Errorf("%s: shouldPublish = %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestLoadReportConfigValidate(t *testing.T) {
	if err := (LoadReportConfig{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	err := LoadReportConfig{Interval: time.Millisecond, Threshold: 101, MaxInterval: -1}.Validate()
	for _, f := range []string{"interval", "threshold", "maxInterval"} {
		if err == nil || !strings.Contains(err.Error(), "loadReports."+f) {
			t.Errorf("error %v does not name %s", err, f)
		}
	}
}

// TestLoadReportsSteerPlacement: a broker's sampled load is published in
// its registration, and new bundles go to the broker whose score (owned
// bundles plus usage) is lowest, although it already owns more bundles.
func TestLoadReportsSteerPlacement(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cfgA, cfgB := config(c, "a", 7200), config(c, "b", 7300)
	cfgA.LoadReports.Interval = 100 * time.Millisecond
	cfgB.LoadReports.Interval = 100 * time.Millisecond
	a, b := start(t, cfgA), start(t, cfgB)
	testcluster.WaitFor(t, 5*time.Second, func() bool { return len(a.candidatesIDs()) == 2 && len(b.candidatesIDs()) == 2 })

	// b owns one bundle before any load is reported.
	bundles := topic.Bundles(8)
	if owner := lookup(t, b, bundles[0], true); owner.ID != "b" {
		t.Fatalf("authoritative lookup at b: owner %s", owner.ID)
	}
	// a is busy: 75 % CPU and 3000 msg/s in is 7 + 3 = 10 usage points.
	var busy atomic.Bool
	busy.Store(true)
	a.SetLoadSource(func() LoadReport {
		if busy.Load() {
			return LoadReport{CPU: ResourceUsage{Usage: 75, Limit: 100}, MsgRateIn: 3000, NumTopics: 5}
		}
		return LoadReport{CPU: ResourceUsage{Limit: 100}}
	})
	b.SetLoadSource(func() LoadReport { return LoadReport{CPU: ResourceUsage{Usage: 1, Limit: 100}} })

	// The report is in a's registration in etcd, in Pulsar's shape.
	testcluster.WaitFor(t, 5*time.Second, func() bool {
		kv, err := c.Meta.Get(context.Background(), BrokerKey(c.Region, "a"))
		if err != nil {
			return false
		}
		var info struct {
			Report map[string]any `json:"loadReport"`
		}
		return json.Unmarshal(kv.Value, &info) == nil && info.Report["msgRateIn"] == 3000.0 &&
			info.Report["loadReportType"] == LoadReportType && info.Report["webServiceUrl"] == cfgA.Self.HTTPURL
	})
	testcluster.WaitFor(t, 5*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.brokers["a"].Report.Usage() == 10
	})
	if rep, ok := a.LoadReport(); !ok || rep.NumTopics != 5 || rep.LastUpdate == 0 {
		t.Fatalf("a's own report = %+v, %v", rep, ok)
	}

	// Both brokers place the next bundles on b (score 1.. against 10).
	for _, bu := range bundles[1:5] {
		if owner := follow(t, bu, a, a, b); owner.ID != "b" {
			t.Fatalf("%s placed on %s; want the idle b", bu, owner.ID)
		}
		testcluster.WaitFor(t, 5*time.Second, func() bool { return cachedLoad(a, "b") == len(b.Owned()) })
	}
	if len(a.Owned()) != 0 || len(b.Owned()) != 5 {
		t.Fatalf("a owns %d, b owns %d; want 0 and 5", len(a.Owned()), len(b.Owned()))
	}

	// a goes idle: its next report (a change over the threshold) brings
	// the following bundles back to it.
	busy.Store(false)
	testcluster.WaitFor(t, 5*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.brokers["a"].Report.Usage() == 0
	})
	if owner := follow(t, bundles[5], b, a, b); owner.ID != "a" {
		t.Fatalf("%s placed on %s; want a, now idle", bundles[5], owner.ID)
	}
}

// TestSplitHandsOverOrChangesNothing: Split creates the halves' keys
// before commit and drops the parent after; a failing commit, or a half
// owned already, leaves the parent owned and no half.
func TestSplitHandsOverOrChangesNothing(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	a := start(t, config(c, "a", 7400))
	ctx := context.Background()
	parent := topic.Bundles(4)[1]
	lo, hi, _ := topic.SplitRange(parent)
	if owner := lookup(t, a, parent, true); owner.ID != "a" {
		t.Fatal(owner)
	}
	key := func(b topic.Bundle) string { k, _ := OwnershipKey(c.Region, ns, b); return k }

	// A failing commit: nothing changes.
	boom := errors.New("boom")
	var sawHalves bool
	err := a.Split(ctx, ns, parent, lo, hi, time.Hour, func(context.Context) error {
		sawHalves = keyExists(t, c, key(lo)) && keyExists(t, c, key(hi))
		return boom
	})
	if !errors.Is(err, boom) || !sawHalves {
		t.Fatalf("Split = %v; halves existed at commit: %v", err, sawHalves)
	}
	if !a.Owns(ns, parent) || a.Owns(ns, lo) || a.Owns(ns, hi) || keyExists(t, c, key(lo)) || keyExists(t, c, key(hi)) {
		t.Fatal("a failed split changed the ownership")
	}
	// Not a split of the parent; not owned.
	if err := a.Split(ctx, ns, parent, lo, topic.Bundle{Lo: hi.Lo + 1, Hi: hi.Hi}, time.Hour, nil); !errors.Is(err, ErrInvalidBundle) {
		t.Fatalf("halves that do not tile: %v", err)
	}
	if err := a.Split(ctx, ns, lo, topic.Bundle{Lo: lo.Lo, Hi: lo.Lo + 5}, topic.Bundle{Lo: lo.Lo + 5, Hi: lo.Hi}, time.Hour, nil); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("split of a bundle not owned: %v", err)
	}
	// A half owned already: a conflict, nothing changes.
	if _, err := c.Meta.Put(ctx, key(hi), []byte(`{"broker":"zz"}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Split(ctx, ns, parent, lo, hi, time.Hour, func(context.Context) error { return nil }); !errors.Is(err, ErrSplitConflict) {
		t.Fatalf("Split with a half taken: %v", err)
	}
	if !a.Owns(ns, parent) || a.Owns(ns, lo) || keyExists(t, c, key(lo)) {
		t.Fatal("a conflicting split changed the ownership")
	}
	if err := c.Meta.Delete(ctx, key(hi)); err != nil {
		t.Fatal(err)
	}
	// A split that commits: both halves owned, the parent not, and its
	// key gone after the grace.
	if err := a.Split(ctx, ns, parent, lo, hi, 100*time.Millisecond, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if !a.Owns(ns, lo) || !a.Owns(ns, hi) || a.Owns(ns, parent) {
		t.Fatal("after the split: the halves are not owned, or the parent still is")
	}
	testcluster.WaitFor(t, 5*time.Second, func() bool { return !keyExists(t, c, key(parent)) })
	if a.lost.len() != 0 {
		t.Fatalf("losses: %v", a.lost.got)
	}
	if got := a.Owned(); len(got) != 2 {
		t.Fatalf("owned after the split: %v", got)
	}
}
