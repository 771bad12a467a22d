package drill

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// pending503 is what a delete answers while r1 has not deleted its copy.
const pending503 = `{"reason":"delete not finished everywhere: persistent://geo/chaos-active-active/del deleted in r0, but regions r1 have not deleted their copies within 10s (unreachable?): they will when they return"}`

// chaosDeleteLog is a clean synthetic log of a delete while r1 is
// partitioned: two regions, one topic with a producer and a consumer in
// each region per incarnation, five messages each; the first
// incarnation's clients stop at 3 s, the delete through r0 answers 503
// naming r1, a create is refused as being deleted, the delete retried
// after the heal answers 204, and the topic created again holds the
// second incarnation's messages in both regions.
func chaosDeleteLog() *ChaosLog {
	l := &ChaosLog{
		Regions: []string{"r0", "r1"},
		Topics:  []ChaosTopic{{Name: "del", Kind: ActiveActive}},
		Producers: []ChaosClient{{Topic: 0, Region: "r0", Stopped: at(3000)}, {Topic: 0, Region: "r1", Stopped: at(3000)},
			{Topic: 0, Region: "r0", Incarnation: 1, Started: at(15000)}, {Topic: 0, Region: "r1", Incarnation: 1, Started: at(15000)}},
		Consumers: []ChaosClient{{Topic: 0, Region: "r0", Stopped: at(3000)}, {Topic: 0, Region: "r1", Stopped: at(3000)},
			{Topic: 0, Region: "r0", Incarnation: 1, Started: at(15000)}, {Topic: 0, Region: "r1", Incarnation: 1, Started: at(15000)}},
		Start: at(0), Steady: at(500), Healed: at(19000), Stop: at(20000),
		Steps: []StepRecord{
			{Step: Step{At: 1500 * time.Millisecond, Action: Action(Partition), Region: "r1"}, Asked: at(2000), Done: at(2010)},
			{Step: Step{At: 2500 * time.Millisecond, Action: Delete, Region: "r0"}, Asked: at(3000), Done: at(15000)},
			{Step: Step{At: 7500 * time.Millisecond, Action: Heal, Region: "r1"}, Asked: at(8000), Done: at(8010)},
		},
		Deletes: []DeleteRecord{{
			Step: Step{At: 2500 * time.Millisecond, Action: Delete, Region: "r0"}, Topic: 0, Incarnation: 0,
			Attempts: []DeleteAttempt{
				{Op: opDelete, Region: "r0", Asked: at(3000), Done: at(13000), Status: 503, Body: pending503},
				{Op: opCreate, Region: "r0", Asked: at(13000), Done: at(13010), Status: 409,
					Body: `{"reason":"being deleted: topic del is being deleted in every region since ...; waiting for r1"}`},
				{Op: opDelete, Region: "r0", Asked: at(14000), Done: at(14100), Status: 204},
				{Op: opCreate, Region: "r0", Asked: at(14200), Done: at(14210), Status: 204},
			},
			Completed: at(14100), Created: at(14210), Started: at(15000),
		}},
	}
	for p := range 4 {
		from := 1000
		if p >= 2 {
			from = 16000
		}
		for seq := range int64(5) {
			l.Sends = append(l.Sends, Send{Key: k(p, seq), Sent: at(from + int(seq)*100), Acked: at(from + 10 + int(seq)*100)})
			l.Deliveries = append(l.Deliveries, Delivery{Key: k(p, seq), Consumer: p, At: at(from + 20 + int(seq)*100)})
		}
	}
	for _, region := range l.Regions {
		sc := &Scan{Region: region, Started: at(21000), Done: at(21100)}
		for seq := range int64(5) {
			sc.Copies = append(sc.Copies, Copy{Key: k(2, seq)}, Copy{Key: k(3, seq)})
		}
		l.Copies = append(l.Copies, ChaosCopy{Topic: 0, Scan: sc})
	}
	return l
}

func TestCheckChaosDeletes(t *testing.T) {
	attempt := func(l *ChaosLog, i int) *DeleteAttempt { return &l.Deletes[0].Attempts[i] }
	for _, tc := range []struct {
		name   string
		change func(l *ChaosLog)
		check  func(r ChaosReport) bool
		failed string // "" passes
	}{
		{"clean", func(*ChaosLog) {}, func(r ChaosReport) bool {
			d := r.Deletes[0]
			return r.Lost == 0 && r.Acknowledged == 20 && len(r.NotConverged) == 0 && r.Resurrected == 0 &&
				r.DeletesCompleted == 1 && r.DeletesFirst503 == 1 && r.LongestDeleteMS == 11100 &&
				d.FirstStatus == 503 && d.Unavailable == 1 && d.BeingDeleted == 1 && *d.TakenMS == 2500 && *d.CompletedMS == 11100 && *d.RecreatedMS == 11210 &&
				r.Producers[0].LongestGapMS == 1590 && r.Producers[2].LongestGapMS == 3590 && r.Producers[2].Incarnation == 1
		}, ""},
		{"resurrected in a copy", func(l *ChaosLog) {
			sc := l.Copies[1].Scan
			sc.Copies = append(sc.Copies, Copy{Key: k(1, 3)})
		}, func(r ChaosReport) bool {
			return r.Resurrected == 1 && slices.Equal(r.Examples.Resurrected, []string{"del r1 p1:3"})
		}, "1 messages of a deleted incarnation"},
		{"delivered to the next incarnation's consumer", func(l *ChaosLog) {
			l.Deliveries = append(l.Deliveries, Delivery{Key: k(0, 2), Consumer: 3, At: at(16600)})
		}, func(r ChaosReport) bool { return r.Resurrected == 1 }, "deleted incarnation"},
		{"delivered to the old consumer after the delete finished", func(l *ChaosLog) {
			l.Deliveries = append(l.Deliveries, Delivery{Key: k(1, 4), Consumer: 1, At: at(14500)})
		}, func(r ChaosReport) bool { return r.Resurrected == 1 }, "deleted incarnation"},
		{"delivered to the old consumer before the delete finished", func(l *ChaosLog) {
			l.Deliveries = append(l.Deliveries, Delivery{Key: k(1, 4), Consumer: 1, At: at(13500)})
		}, func(r ChaosReport) bool { return r.Resurrected == 0 }, ""},
		{"503 naming a region no fault touched", func(l *ChaosLog) {
			attempt(l, 0).Body = strings.Replace(pending503, "regions r1", "regions r0, r1", 1)
		}, func(r ChaosReport) bool { return len(r.Deletes[0].Unexpected) == 1 }, "503 naming r0 pending, which no fault touched"},
		{"503 with no fault at all", func(l *ChaosLog) { l.Steps = l.Steps[1:2] },
			func(r ChaosReport) bool { return true }, "503 naming r1 pending"},
		{"503 naming a region healed within the grace", func(l *ChaosLog) {
			l.Steps[2].Done = at(2500)
		}, func(r ChaosReport) bool { return true }, ""},
		{"a create after the delete finished refused", func(l *ChaosLog) {
			d := &l.Deletes[0]
			d.Attempts = slices.Insert(d.Attempts, 3, DeleteAttempt{Op: opCreate, Region: "r0", Asked: at(14150), Done: at(14160), Status: 409, Body: "being deleted"})
		}, func(r ChaosReport) bool { return r.Deletes[0].BeingDeleted == 1 }, "create through r0 at +13650 ms: 409 being deleted"},
		{"a create after a 503 succeeds: finished meanwhile", func(l *ChaosLog) {
			d := &l.Deletes[0]
			d.Attempts = d.Attempts[:2]
			d.Attempts[1].Status, d.Attempts[1].Body = 204, ""
			d.Completed, d.Created = d.Attempts[1].Done, d.Attempts[1].Done
		}, func(r ChaosReport) bool { return *r.Deletes[0].CompletedMS == 10010 }, ""},
		{"404 after a 503: finished meanwhile", func(l *ChaosLog) { attempt(l, 2).Status = 404 },
			func(r ChaosReport) bool { return true }, ""},
		{"404 first", func(l *ChaosLog) {
			d := &l.Deletes[0]
			d.Attempts = d.Attempts[2:]
			d.Attempts[0].Status = 404
		}, func(r ChaosReport) bool { return r.Deletes[0].FirstStatus == 404 }, "delete through r0 at +13500 ms: 404"},
		{"no answer from a faulted region", func(l *ChaosLog) {
			attempt(l, 0).Region, attempt(l, 0).Status, attempt(l, 0).Body = "r1", 0, "connection refused"
		}, func(r ChaosReport) bool { return r.DeletesFirst503 == 0 }, ""},
		{"no answer from a region no fault touched", func(l *ChaosLog) {
			attempt(l, 2).Status, attempt(l, 2).Body = 0, "connection refused"
		}, func(r ChaosReport) bool { return true }, "no answer, and no fault touched r0"},
		{"a 500", func(l *ChaosLog) { attempt(l, 0).Status = 500 }, func(r ChaosReport) bool { return true }, "delete through r0 at +2500 ms: 500"},
		{"never finished", func(l *ChaosLog) {
			d := &l.Deletes[0]
			d.Attempts = d.Attempts[:2]
			d.Completed, d.Created, d.Started = time.Time{}, time.Time{}, time.Time{}
			l.Producers[2].Started, l.Producers[3].Started = time.Time{}, time.Time{}
		}, func(r ChaosReport) bool {
			return r.DeletesCompleted == 0 && r.Deletes[0].CompletedMS == nil && r.Producers[2].LongestGapMS == 0
		},
			"never finished in every region"},
		{"gave up", func(l *ChaosLog) { l.Deletes[0].Err = "gave up creating" }, func(r ChaosReport) bool { return true }, "gave up creating"},
	} {
		l := chaosDeleteLog()
		tc.change(l)
		r := CheckChaos(l, ChaosLimits{})
		if tc.failed == "" && !r.Passed || tc.failed != "" && (r.Passed || !strings.Contains(strings.Join(r.Failures, "\n"), tc.failed)) {
			t.Errorf("%s: passed %v, failures %q; want %q", tc.name, r.Passed, r.Failures, tc.failed)
		}
		if !tc.check(r) {
			t.Errorf("%s: report %+v", tc.name, r)
		}
	}
}

func TestPendingRegions(t *testing.T) {
	for _, tc := range []struct {
		body string
		want []string
	}{
		{pending503, []string{"r1"}},
		{`{"reason":"delete not finished everywhere: …","pendingRegions":["r1","r2"]}`, []string{"r1", "r2"}},
		{"x deleted in r0, but regions r1, r2 have not deleted their copies within 10s", []string{"r1", "r2"}},
		{"namespace a/b not deleted: regions eu-west did not answer within 10s", []string{"eu-west"}},
		{"delete of x: context deadline exceeded", nil},
	} {
		if got := pendingRegions(tc.body); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.body, got, tc.want)
		}
	}
}

// TestPlanDeletes: the delete steps' count follows Deletes and
// Duration, and most land inside a fault.
func TestPlanDeletes(t *testing.T) {
	three := []string{"r0", "r1", "r2"}
	for _, tc := range []struct {
		c    PlanConfig
		want int
	}{
		{PlanConfig{Regions: three, Duration: 25 * time.Second}, 1},
		{PlanConfig{Regions: three, Duration: time.Minute}, 3},
		{PlanConfig{Regions: three, Duration: time.Minute, Deletes: 5}, 5},
		{PlanConfig{Regions: three, Duration: time.Minute, Deletes: -1}, 0},
		{PlanConfig{Regions: three, Duration: 10 * time.Second, Deletes: 100}, 100},
	} {
		during, all := 0, 0
		for seed := range uint64(100) {
			s, err := Plan(seed, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			down := map[string]bool{}
			n := 0
			for _, st := range s.Steps {
				switch {
				case st.Action.IsFault():
					down[st.Region] = true
				case st.Action == Start || st.Action == Heal:
					delete(down, st.Region)
				case st.Action == Delete:
					n++
					all++
					if len(down) > 0 {
						during++
					}
				}
			}
			if n != tc.want {
				t.Fatalf("%+v seed %d: %d deletes, want %d", tc.c, seed, n, tc.want)
			}
		}
		if all > 0 && tc.want <= 5 && during*2 < all { // (dense deletes outnumber the faults)
			t.Errorf("%+v: %d of %d deletes while a region is faulted", tc.c, during, all)
		}
	}
	// The faults of a seed do not depend on the deletes.
	a, _ := Plan(7, PlanConfig{Regions: three, Duration: time.Minute, Deletes: -1})
	b, _ := Plan(7, PlanConfig{Regions: three, Duration: time.Minute, Deletes: 4})
	if got := slices.DeleteFunc(b.Steps, func(s Step) bool { return s.Action == Delete }); !slices.Equal(got, a.Steps) {
		t.Errorf("seed 7: the deletes changed the other steps:\n%v\n%v", a.Steps, got)
	}
}
