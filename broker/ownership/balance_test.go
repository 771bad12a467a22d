package ownership

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// region is a model of a region for the Balancer: each broker's bundles
// with their message rates; report builds the registrations as the
// brokers would publish them at now.
type region map[string]map[string]float64

func (g region) infos(now time.Time) []BrokerInfo {
	var out []BrokerInfo
	for id, bs := range g {
		r := &LoadReport{LastUpdate: now.UnixMilli(), LastStats: map[string]BundleLoad{}}
		for name, rate := range bs {
			r.LastStats[name] = BundleLoad{MsgRateIn: rate, Topics: 1}
			r.MsgRateIn += rate
		}
		out = append(out, BrokerInfo{ID: id, Report: r})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// apply carries out unload orders as the owners and the lookups would.
func (g region) apply(t *testing.T, ps []Planned) {
	t.Helper()
	for _, p := range ps {
		if p.Order.Op != OrderUnload {
			t.Fatalf("unexpected order %+v", p)
		}
		if p.Order.Destination == p.Order.Broker || p.Order.Destination == "" {
			t.Fatalf("bundle %s sent back to %q from %q", p.Bundle, p.Order.Destination, p.Order.Broker)
		}
		rate, ok := g[p.Order.Broker][p.Bundle]
		if !ok {
			t.Fatalf("order for %s on %s, which does not hold it", p.Bundle, p.Order.Broker)
		}
		delete(g[p.Order.Broker], p.Bundle)
		g[p.Order.Destination][p.Bundle] = rate
	}
}

func (g region) ratio() float64 {
	var sum, most float64
	for _, bs := range g {
		var s float64
		for _, r := range bs {
			s += r
		}
		sum += s
		most = max(most, s)
	}
	return most / (sum / float64(len(g)))
}

// skewed is a region of 3 brokers whose 12 bundles (1000 msg/s each) are
// all on a.
func skewed() region {
	g := region{"a": {}, "b": {}, "c": {}}
	for i := range 12 {
		g["a"][fmt.Sprintf("t/ns/0x%08x_0x%08x", i<<20, (i+1)<<20)] = 1000
	}
	return g
}

func TestBalancerConvergesWithoutMovingABundleTwice(t *testing.T) {
	g := skewed()
	bal := NewBalancer(BalanceConfig{Grace: time.Hour, Settle: 10 * time.Second})
	now := time.Unix(1_000_000, 0)
	moves := map[string]int{}
	for round := range 100 {
		ps := bal.Plan(g.infos(now), now)
		for _, p := range ps {
			moves[p.Bundle]++
			if moves[p.Bundle] > 1 {
				t.Fatalf("round %d: %s moved twice within the grace period", round, p.Bundle)
			}
		}
		g.apply(t, ps)
		now = now.Add(15 * time.Second)
	}
	if r := g.ratio(); r > 1.5 {
		t.Fatalf("after 100 rounds the most loaded broker carries %.2f× the mean: %v", r, g)
	}
}

func TestBalancerWaitsForReportsAfterActing(t *testing.T) {
	g := skewed()
	bal := NewBalancer(BalanceConfig{Grace: time.Hour, Settle: 10 * time.Second})
	now := time.Unix(1_000_000, 0)
	stale := g.infos(now)
	first := bal.Plan(stale, now)
	if len(first) == 0 {
		t.Fatal("a skewed region shed nothing")
	}
	// The same reports later (the brokers have not sampled since): a
	// second round would shed more of a's bundles on the old figures.
	if ps := bal.Plan(stale, now.Add(time.Minute)); len(ps) != 0 {
		t.Fatalf("shed again on reports older than the last round: %+v", ps)
	}
	// Fresh reports that still show the moved bundles on a (their
	// clients have not come back yet): the moved ones are in grace.
	later := now.Add(time.Minute)
	for _, p := range bal.Plan(g.infos(later), later) {
		if slices.ContainsFunc(first, func(f Planned) bool { return f.Bundle == p.Bundle }) {
			t.Fatalf("%s ordered to move again within the grace period", p.Bundle)
		}
	}
	// After the grace period a bundle may move again.
	if !bal.InGrace(first[0].Bundle, later) || bal.InGrace(first[0].Bundle, now.Add(time.Hour)) {
		t.Fatal("grace period not kept as configured")
	}
}

func TestBalancerBalancedRegionShedsNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bal := NewBalancer(BalanceConfig{Grace: time.Minute, Settle: 10 * time.Second})
	now := time.Unix(1_000_000, 0)
	for round := range 500 {
		// Three brokers with the same load, each bundle's rate jittering
		// by up to ±8 %: below the 10 % threshold, never shed.
		g := region{"a": {}, "b": {}, "c": {}}
		for _, id := range []string{"a", "b", "c"} {
			for i := range 4 {
				g[id][fmt.Sprintf("t/ns-%s/0x%08x_0x%08x", id, i<<20, (i+1)<<20)] = 2000 * (1 + (rng.Float64()*2-1)*0.08)
			}
		}
		if ps := bal.Plan(g.infos(now), now); len(ps) != 0 {
			t.Fatalf("round %d: a balanced region shed %+v (ratio %.3f)", round, ps, g.ratio())
		}
		now = now.Add(10 * time.Second)
	}
}

func TestBalancerLeavesDrainingBrokersOut(t *testing.T) {
	g := skewed()
	now := time.Unix(1_000_000, 0)
	infos := g.infos(now)
	for i := range infos {
		if infos[i].ID == "b" {
			infos[i].Draining = true
		}
	}
	ps := NewBalancer(BalanceConfig{}).Plan(infos, now)
	if len(ps) == 0 {
		t.Fatal("nothing shed")
	}
	for _, p := range ps {
		if p.Order.Destination != "c" {
			t.Fatalf("destination %q; want c (b drains, a sheds)", p.Order.Destination)
		}
	}
}

func TestBalancerSplitsHotBundles(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	rep := func(stats map[string]BundleLoad) []BrokerInfo {
		return []BrokerInfo{{ID: "a", Report: &LoadReport{LastUpdate: now.UnixMilli(), LastStats: stats}}, {ID: "b"}}
	}
	cfg := BalanceConfig{Split: SplitConfig{Enabled: true, MaxTopics: 4, MaxMsgRate: 5000, MaxBandwidthMbytes: 10, MaxBundles: 3}}
	stats := map[string]BundleLoad{
		"t/ns/0x00000000_0x40000000": {Topics: 5},                                    // too many topics
		"t/ns/0x40000000_0x80000000": {Topics: 2, MsgRateIn: 4000, MsgRateOut: 2000}, // too many messages
		"t/x/0x00000000_0x80000000":  {Topics: 2, MsgThroughputIn: 11e6},             // too many bytes
		"t/x/0x80000000_0xffffffff":  {Topics: 1, MsgRateIn: 1e6},                    // one topic: no use
		"t/y/0x00000000_0xffffffff":  {Topics: 3, MsgRateIn: 100},                    // cool
	}
	ps := NewBalancer(cfg).Plan(rep(stats), now)
	var got []string
	for _, p := range ps {
		if p.Order.Op != OrderSplit || p.Order.Broker != "a" {
			t.Fatalf("unexpected order %+v", p)
		}
		got = append(got, p.Bundle)
	}
	// t/ns has 2 bundles and may have 3: one split; t/x has 2, one split.
	want := []string{"t/ns/0x00000000_0x40000000", "t/x/0x00000000_0x80000000"}
	if !slices.Equal(got, want) {
		t.Fatalf("splits %v; want %v", got, want)
	}
	// Disabled: none.
	cfg.Split.Enabled = false
	if ps := NewBalancer(cfg).Plan(rep(stats), now); len(ps) != 0 {
		t.Fatalf("splits while disabled: %+v", ps)
	}
}

func TestDestination(t *testing.T) {
	cands := []Candidate{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	ids := func(cs []Candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	tests := []struct {
		name  string
		o     *Order
		cands []Candidate
		id    string
		rest  []string
	}{
		{"no order", nil, cands, "", []string{"a", "b", "c"}},
		{"split order", &Order{Op: OrderSplit, Broker: "a"}, cands, "", []string{"a", "b", "c"}},
		{"destination live", &Order{Op: OrderUnload, Broker: "a", Destination: "c"}, cands, "c", []string{"a", "b", "c"}},
		{"destination gone: not the shedder", &Order{Op: OrderUnload, Broker: "a", Destination: "z"}, cands, "", []string{"b", "c"}},
		{"the shedder is the only broker", &Order{Op: OrderUnload, Broker: "a", Destination: "z"}, cands[:1], "", []string{"a"}},
		{"destination is the shedder", &Order{Op: OrderUnload, Broker: "a", Destination: "a"}, cands, "", []string{"b", "c"}},
	}
	for _, tt := range tests {
		id, rest := Destination(tt.o, tt.cands)
		if id != tt.id || !slices.Equal(ids(rest), tt.rest) {
			t.Errorf("%s: got %q %v; want %q %v", tt.name, id, ids(rest), tt.id, tt.rest)
		}
	}
}

func TestParseBundleKey(t *testing.T) {
	ns, b, err := ParseBundleKey("t/ns/0x40000000_0x80000000")
	if err != nil || ns != "t/ns" || b.Lo != 0x40000000 || b.Hi != 0x80000000 {
		t.Fatalf("got %q %v %v", ns, b, err)
	}
	for _, bad := range []string{"", "t/ns", "t/ns/0x1", "t/ns/0x2_0x1", "ns/0x0_0x1", "t/ns/x_y", "t/ns/0x0_0x100000000"} {
		if _, _, err := ParseBundleKey(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestBalanceConfigValidate(t *testing.T) {
	err := BalanceConfig{Shed: ShedConfig{Threshold: -1, MinGap: -1}, Grace: -1, Split: SplitConfig{MaxTopics: -1, MaxMsgRate: -1, MaxBandwidthMbytes: -1, MaxBundles: -1}}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, f := range []string{"ThresholdShedderPercentage", "MinLoadGap", "GracePeriod", "MaxTopics", "MaxMsgRate", "MaxBandwidthMbytes", "MaximumBundles"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error does not name %s: %v", f, err)
		}
	}
	if err := (BalanceConfig{}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestBalancerSettlingIsBounded(t *testing.T) {
	g := region{"a": {"t/ns/0x00000000_0x10000000": 1000, "t/ns/0x10000000_0x20000000": 1000,
		"t/ns/0x20000000_0x30000000": 1000, "t/ns/0x30000000_0x40000000": 1000}, "b": {}}
	bal := NewBalancer(BalanceConfig{Grace: time.Hour, Settle: 10 * time.Second})
	now := time.Unix(1_000_000, 0)
	stale := g.infos(now)
	if len(bal.Plan(stale, now)) == 0 {
		t.Fatal("nothing shed")
	}
	// Nobody publishes again (say the orders failed): the wait ends after
	// 10×Settle.
	if ps := bal.Plan(stale, now.Add(99*time.Second)); len(ps) != 0 {
		t.Fatalf("acted before the settling wait ended: %+v", ps)
	}
	if ps := bal.Plan(stale, now.Add(100*time.Second)); len(ps) == 0 {
		t.Fatal("still waiting after 10×Settle")
	}
}
