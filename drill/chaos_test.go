package drill

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPlanIsTheSeeds(t *testing.T) {
	c := PlanConfig{Regions: []string{"r0", "r1", "r2"}, Duration: time.Minute}
	a, err := Plan(42, c)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Plan(42, c)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 42 gave two schedules:\n%v\n%v", a.Steps, b.Steps)
	}
	differ := 0
	for seed := uint64(0); seed < 20; seed++ {
		s, _ := Plan(seed, c)
		if !reflect.DeepEqual(s.Steps, a.Steps) {
			differ++
		}
	}
	if differ < 19 {
		t.Errorf("only %d of 20 seeds gave a schedule other than seed 42's", differ)
	}
}

// TestPlanConstraints draws many schedules of several shapes and walks
// each: never more than MaxFaults regions faulted (so never all), no
// region faulted twice at once, every fault undone by the right action
// within the duration and within its length bounds, injections at least
// EveryMin apart, only the allowed kinds, and exactly one planned move
// of the primary to another region, with neither faulted from the move
// to MoveHold after it.
func TestPlanConstraints(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    PlanConfig
		max  int
	}{
		{"three regions, a minute", PlanConfig{Regions: []string{"r0", "r1", "r2"}, Duration: time.Minute}, 2},
		{"three regions, CI", PlanConfig{Regions: []string{"r0", "r1", "r2"}, Duration: 25 * time.Second}, 2},
		{"two regions", PlanConfig{Regions: []string{"a", "b"}, Duration: time.Minute}, 1},
		{"five regions, kills only, dense", PlanConfig{Regions: []string{"a", "b", "c", "d", "e"}, Duration: 2 * time.Minute,
			Faults: []Fault{Kill}, EveryMin: time.Second, EveryMax: 2 * time.Second, Primary: "c"}, 2},
		{"three regions, three at once asked", PlanConfig{Regions: []string{"r0", "r1", "r2"}, Duration: time.Minute, MaxFaults: 3,
			EveryMin: time.Second, EveryMax: time.Second}, 2},
	} {
		faultsSeen := 0
		for seed := uint64(0); seed < 300; seed++ {
			s, err := Plan(seed, tc.c)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			faultsSeen += checkSchedule(t, fmt.Sprintf("%s, seed %d", tc.name, seed), s, tc.max)
		}
		if faultsSeen == 0 {
			t.Errorf("%s: no faults drawn in 300 seeds", tc.name)
		}
	}
}

// checkSchedule walks s and reports every broken constraint; it returns
// how many faults s holds.
func checkSchedule(t *testing.T, name string, s Schedule, maxAtOnce int) int {
	t.Helper()
	c := s.Config
	down := map[string]Step{} // region -> its fault
	var lastFault time.Duration = -1
	moves, faults, deletes := 0, 0, 0
	var move Step
	allowed := map[Action]bool{}
	for _, f := range c.Faults {
		allowed[Action(f)] = true
	}
	for i, st := range s.Steps {
		if i > 0 && st.At < s.Steps[i-1].At {
			t.Errorf("%s: step %d at %v before step %d at %v", name, i, st.At, i-1, s.Steps[i-1].At)
		}
		if st.At < 0 || st.At > c.Duration {
			t.Errorf("%s: step %+v outside 0..%v", name, st, c.Duration)
		}
		switch {
		case st.Action.IsFault():
			faults++
			if !allowed[st.Action] {
				t.Errorf("%s: %s not among %v", name, st.Action, c.Faults)
			}
			if _, ok := down[st.Region]; ok {
				t.Errorf("%s: %s faulted again at %v while faulted", name, st.Region, st.At)
			}
			if lastFault >= 0 && st.At-lastFault < c.EveryMin {
				t.Errorf("%s: faults at %v and %v, under %v apart", name, lastFault, st.At, c.EveryMin)
			}
			lastFault = st.At
			down[st.Region] = st
			if len(down) > maxAtOnce || len(down) >= len(c.Regions) {
				t.Errorf("%s: %d regions faulted at %v", name, len(down), st.At)
			}
			if moves == 1 && st.At < move.At+c.MoveHold && (st.Region == move.Region || st.Region == move.To) {
				t.Errorf("%s: %s faulted at %v, within the move's hold (move at %v)", name, st.Region, st.At, move.At)
			}
		case st.Action == Start || st.Action == Heal:
			f, ok := down[st.Region]
			if !ok || st.Action != undo(Fault(f.Action)) {
				t.Errorf("%s: %s of %s at %v undoes no fault of it (%+v)", name, st.Action, st.Region, st.At, f)
				continue
			}
			if l := st.At - f.At; l < c.LengthMin && st.At != c.Duration || l > c.LengthMax {
				t.Errorf("%s: %s of %s lasted %v", name, f.Action, st.Region, l)
			}
			delete(down, st.Region)
		case st.Action == Move:
			moves++
			move = st
			if st.Region != s.Primary || st.To == st.Region || !slices.Contains(c.Regions, st.To) {
				t.Errorf("%s: move %+v, primary %s", name, st, s.Primary)
			}
			for _, r := range []string{st.Region, st.To} {
				if _, ok := down[r]; ok {
					t.Errorf("%s: move at %v while %s is faulted", name, st.At, r)
				}
			}
		case st.Action == Delete:
			deletes++
			if _, ok := down[st.Region]; ok || !slices.Contains(c.Regions, st.Region) {
				t.Errorf("%s: delete through %s at %v, faulted or unknown", name, st.Region, st.At)
			}
			if st.At > c.Duration*deleteSpan/100 {
				t.Errorf("%s: delete at %v, past %d%% of %v", name, st.At, deleteSpan, c.Duration)
			}
		default:
			t.Errorf("%s: unknown step %+v", name, st)
		}
	}
	if want := max(c.Deletes, 0); deletes != want {
		t.Errorf("%s: %d deletes, want %d", name, deletes, want)
	}
	if len(down) != 0 {
		t.Errorf("%s: still faulted at the end: %v", name, down)
	}
	if moves != 1 {
		t.Errorf("%s: %d moves", name, moves)
	}
	return faults
}

func TestPlanValidate(t *testing.T) {
	three := []string{"r0", "r1", "r2"}
	for _, tc := range []struct {
		c    PlanConfig
		want string // "" passes
	}{
		{PlanConfig{Regions: three, Duration: 25 * time.Second}, ""},
		{PlanConfig{Regions: []string{"r0"}, Duration: time.Minute}, "at least two"},
		{PlanConfig{Regions: []string{"r0", "r0"}, Duration: time.Minute}, "repeated"},
		{PlanConfig{Regions: three, Duration: 5 * time.Second}, "--duration"},
		{PlanConfig{Regions: three, Duration: time.Minute, Faults: []Fault{"flood"}}, "--faults"},
		{PlanConfig{Regions: three, Duration: time.Minute, Primary: "r9"}, "primary"},
		{PlanConfig{Regions: three, Duration: time.Minute, EveryMin: 5 * time.Second, EveryMax: time.Second}, "out of range"},
		{PlanConfig{Regions: three, Duration: time.Minute, Deletes: 101}, "--deletes"},
		{PlanConfig{Regions: three, Duration: 10 * time.Second, Deletes: 100}, ""},
	} {
		err := tc.c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
}

// chaosLog is a clean synthetic log: two regions, an active-active
// topic with a producer in each region and a partitioned active-standby
// topic (two partitions) with one producer, ten messages each, every
// copy complete and in order, one consumer per region on the first.
func chaosLog() *ChaosLog {
	l := &ChaosLog{
		Regions:   []string{"r0", "r1"},
		Topics:    []ChaosTopic{{Name: "aa", Kind: ActiveActive}, {Name: "as", Kind: ActiveStandby, Partitions: 2}},
		Producers: []ChaosClient{{Topic: 0, Region: "r0"}, {Topic: 0, Region: "r1"}, {Topic: 1}},
		Consumers: []ChaosClient{{Topic: 0, Region: "r0"}, {Topic: 0, Region: "r1"}},
		Start:     at(0), Steady: at(1000), Healed: at(1900), Stop: at(2000),
		Steps: []StepRecord{{Step: Step{At: 2 * time.Second, Action: Action(Kill), Region: "r1"}, Asked: at(3000), Done: at(3010)}},
	}
	for p := range 3 {
		for seq := range int64(10) {
			l.Sends = append(l.Sends, Send{Key: k(p, seq), Sent: at(1000 + int(seq)*100), Acked: at(1010 + int(seq)*100)})
		}
	}
	for _, region := range l.Regions {
		sc := &Scan{Region: region, Started: at(11000), Done: at(11100)}
		for seq := range int64(10) {
			sc.Copies = append(sc.Copies, Copy{Key: k(0, seq)}, Copy{Key: k(1, seq)})
		}
		l.Copies = append(l.Copies, ChaosCopy{Topic: 0, Scan: sc})
		for part := range 2 {
			sc := &Scan{Region: region, Started: at(11000), Done: at(11100)}
			for seq := int64(part); seq < 10; seq += 2 {
				sc.Copies = append(sc.Copies, Copy{Key: k(2, seq)})
			}
			l.Copies = append(l.Copies, ChaosCopy{Topic: 1, Partition: part, Scan: sc})
		}
	}
	for c := range 2 {
		for seq := range int64(10) {
			l.Deliveries = append(l.Deliveries, Delivery{Key: k(0, seq), Consumer: c, At: at(1020 + int(seq)*100)})
		}
	}
	return l
}

// copyOf is the scan of region's copy of topic's partition in l.
func copyOf(l *ChaosLog, topic, part int, region string) *Scan {
	for _, c := range l.Copies {
		if c.Topic == topic && c.Partition == part && c.Scan.Region == region {
			return c.Scan
		}
	}
	panic("no such copy")
}

func TestCheckChaos(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(l *ChaosLog)
		lim    ChaosLimits
		check  func(r ChaosReport) bool
		failed string // "" passes
	}{
		{"clean", func(*ChaosLog) {}, ChaosLimits{}, func(r ChaosReport) bool {
			return r.Acknowledged == 30 && r.Lost == 0 && len(r.NotConverged) == 0 && len(r.Topics) == 2 && r.Topics[1].Copies[1].Distinct == 10 &&
				r.LongestGapMS == 100 && r.Producers[2].LongestGapMS == 100 && r.Producers[2].LongestGapAtMS == 10 && r.Schedule[0].TakenMS != nil && *r.Schedule[0].TakenMS == 2000
		}, ""},
		{"lost in one region", func(l *ChaosLog) {
			sc := copyOf(l, 0, 0, "r1")
			sc.Copies = slices.DeleteFunc(sc.Copies, func(c Copy) bool { return c.Key == k(0, 5) })
		}, ChaosLimits{}, func(r ChaosReport) bool {
			return r.Lost == 1 && r.Topics[0].Copies[1].Missing == 1 && slices.Equal(r.Examples.Lost, []string{"aa r1 p0:5"}) && slices.Equal(r.NotConverged, []string{"aa"})
		}, "1 acknowledged messages missing"},
		{"lost from a partition", func(l *ChaosLog) {
			for _, region := range l.Regions {
				sc := copyOf(l, 1, 1, region)
				sc.Copies = sc.Copies[:len(sc.Copies)-1]
			}
		}, ChaosLimits{}, func(r ChaosReport) bool { return r.Lost == 2 && len(r.NotConverged) == 0 }, "missing"},
		{"stored twice", func(l *ChaosLog) {
			sc := copyOf(l, 0, 0, "r0")
			sc.Copies = append(sc.Copies, Copy{Key: k(1, 3)})
		}, ChaosLimits{}, func(r ChaosReport) bool {
			return r.DuplicatedCopy == 1 && r.OrderViolations == 0 && slices.Equal(r.Examples.DuplicatedCopy, []string{"aa r0 p1:3"}) && len(r.NotConverged) == 0
		}, "stored more than once"},
		{"stored in two partitions", func(l *ChaosLog) {
			sc := copyOf(l, 1, 1, "r1")
			sc.Copies = append(sc.Copies, Copy{Key: k(2, 8)})
		}, ChaosLimits{}, func(r ChaosReport) bool { return r.DuplicatedCopy == 1 && r.OrderViolations == 1 }, "stored more than once"},
		{"out of order", func(l *ChaosLog) {
			sc := copyOf(l, 0, 0, "r1")
			sc.Copies[6], sc.Copies[8] = sc.Copies[8], sc.Copies[6] // p0:3 and p0:4
		}, ChaosLimits{}, func(r ChaosReport) bool {
			return r.OrderViolations == 1 && r.Topics[0].Copies[1].OrderViolations == 1 && slices.Equal(r.Examples.OrderViolations, []string{"aa r1 p0:3"}) && len(r.NotConverged) == 0
		}, "out of their producer's order"},
		{"late tail is counted apart", func(l *ChaosLog) {
			for _, region := range l.Regions {
				sc := copyOf(l, 0, 0, region)
				i := slices.Index(sc.Copies, Copy{Key: k(0, 2)})
				sc.Copies = append(slices.Delete(sc.Copies, i, i+1), Copy{Key: k(0, 2), Late: true})
			}
		}, ChaosLimits{}, func(r ChaosReport) bool { return r.Late == 2 && r.OrderViolations == 0 }, ""},
		{"partitions interleave", func(l *ChaosLog) {}, ChaosLimits{}, func(r ChaosReport) bool { return r.OrderViolations == 0 }, ""},
		{"not converged: an unacknowledged message in one region", func(l *ChaosLog) {
			l.Sends = append(l.Sends, Send{Key: k(1, 10), Sent: at(2000), Err: "timeout"})
			sc := copyOf(l, 0, 0, "r1")
			sc.Copies = append(sc.Copies, Copy{Key: k(1, 10)})
		}, ChaosLimits{}, func(r ChaosReport) bool {
			return r.Lost == 0 && r.SendErrors == 1 && r.Producers[1].SendErrors == 1 && slices.Equal(r.NotConverged, []string{"aa"})
		}, "copies differ"},
		{"not converged: a read incomplete", func(l *ChaosLog) { copyOf(l, 1, 0, "r0").Done = time.Time{} }, ChaosLimits{},
			func(r ChaosReport) bool { return !r.Topics[1].Converged && !r.Topics[1].Copies[0].Complete }, "copies differ"},
		{"not converged: a partition not read", func(l *ChaosLog) {
			l.Copies = slices.DeleteFunc(l.Copies, func(c ChaosCopy) bool { return c.Topic == 1 && c.Partition == 1 && c.Scan.Region == "r1" })
		}, ChaosLimits{}, func(r ChaosReport) bool { return !r.Topics[1].Converged && r.Lost == 5 }, "copies differ"},
		{"delivered out of order", func(l *ChaosLog) {
			l.Deliveries[3].Key, l.Deliveries[4].Key = l.Deliveries[4].Key, l.Deliveries[3].Key
		}, ChaosLimits{}, func(r ChaosReport) bool { return r.DeliveryOrderViolations == 1 && r.Consumers[0].OrderViolations == 1 }, "first delivered out of"},
		{"delivered again is no violation", func(l *ChaosLog) {
			l.Deliveries = append(l.Deliveries, Delivery{Key: k(0, 1), Consumer: 1, At: at(5000)})
		}, ChaosLimits{}, func(r ChaosReport) bool { return r.Consumers[1].Deliveries == 11 && r.Consumers[1].Distinct == 10 }, ""},
		{"a step failed", func(l *ChaosLog) { l.Steps[0].Err = "409 region busy" }, ChaosLimits{},
			func(r ChaosReport) bool { return r.Schedule[0].Error != "" }, "step kill r1 at 2000 ms: 409"},
		{"run error", func(l *ChaosLog) { l.Errors = append(l.Errors, "converge: gave up") }, ChaosLimits{},
			func(ChaosReport) bool { return true }, "converge: gave up"},
		{"gap over the limit", func(l *ChaosLog) {}, ChaosLimits{MaxGapMS: 50},
			func(r ChaosReport) bool { return len(r.Failures) == 3 }, "100 ms without an acknowledged send"},
		{"nothing acknowledged", func(l *ChaosLog) {
			for i := range l.Sends {
				l.Sends[i].Acked = time.Time{}
			}
		}, ChaosLimits{}, func(r ChaosReport) bool { return r.Lost == 0 }, "no send was acknowledged"},
	} {
		l := chaosLog()
		tc.change(l)
		r := CheckChaos(l, tc.lim)
		if tc.failed == "" && !r.Passed || tc.failed != "" && (r.Passed || !strings.Contains(strings.Join(r.Failures, "\n"), tc.failed)) {
			t.Errorf("%s: passed %v, failures %q; want %q", tc.name, r.Passed, r.Failures, tc.failed)
		}
		if !tc.check(r) {
			t.Errorf("%s: report %+v", tc.name, r)
		}
	}
}
