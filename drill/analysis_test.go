package drill

import (
	"slices"
	"testing"
	"time"
)

// base is the synthetic logs' time zero; at(ms) is a time after it.
var base = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

func k(p int, seq int64) Key { return Key{Producer: p, Seq: seq} }

func TestLongestGap(t *testing.T) {
	ts := []time.Time{at(100), at(200), at(900), at(1000)}
	for _, tc := range []struct {
		name     string
		from, to int
		want     int
	}{
		{"whole window", 0, 1000, 700},
		// The last success before the window anchors its first gap.
		{"anchored before the window", 250, 1000, 700},
		{"window inside a gap", 300, 400, 200},
		// A client that stopped succeeding counts up to the window's end.
		{"open gap at the end", 0, 2500, 1500},
		{"empty window", 500, 500, 0},
	} {
		if got := longestGap(ts, at(tc.from), at(tc.to)); got != time.Duration(tc.want)*time.Millisecond {
			t.Errorf("%s: longestGap = %v, want %dms", tc.name, got, tc.want)
		}
	}
	if got := longestGap(nil, at(0), at(300)); got != 300*time.Millisecond {
		t.Errorf("no successes: %v, want the whole window", got)
	}
	for _, tc := range []struct{ from, to, began int }{{0, 1000, 200}, {0, 2500, 1000}, {300, 400, 200}} {
		if began, _ := longestGapAt(ts, at(tc.from), at(tc.to)); !began.Equal(at(tc.began)) {
			t.Errorf("longestGapAt(%d, %d) began at %v, want %dms", tc.from, tc.to, began.Sub(base), tc.began)
		}
	}
}

func TestSwitchGap(t *testing.T) {
	ts := []time.Time{at(0), at(10), at(500), at(510), at(3000), at(3010)}
	// The longest gap ending after the fault, not the longest overall.
	before, after := switchGap(ts, at(1000), at(4000))
	if !before.Equal(at(510)) || !after.Equal(at(3000)) {
		t.Errorf("switchGap = %v, %v; want 510ms, 3000ms", before.Sub(base), after.Sub(base))
	}
	before, after = switchGap(ts, at(5), at(600))
	if !before.Equal(at(10)) || !after.Equal(at(500)) {
		t.Errorf("bounded by to: %v, %v; want 10ms, 500ms", before.Sub(base), after.Sub(base))
	}
	// Nothing after the fault: fenced is the last time, no first success.
	before, after = switchGap(ts, at(3500), at(9000))
	if !before.Equal(at(3010)) || !after.IsZero() {
		t.Errorf("no success after the fault: %v, %v", before.Sub(base), after)
	}
}

func TestSpreadP99(t *testing.T) {
	// 200 clients with longest gaps of 1..200 ms: p99 by nearest rank is
	// the 198th.
	var clients [][]time.Time
	for i := 1; i <= 200; i++ {
		clients = append(clients, []time.Time{at(0), at(i), at(200)})
	}
	s := spread(clients, at(0), at(200))
	// Client i's gaps are i and 200-i: its longest is max(i, 200-i).
	var want []int64
	for i := 1; i <= 200; i++ {
		want = append(want, int64(max(i, 200-i)))
	}
	slices.Sort(want)
	if s.Max != 200 || s.P99 != want[197] || s.Clients != 200 {
		t.Errorf("spread = %+v, want max 200, p99 %d", s, want[197])
	}
	if s := spread([][]time.Time{{at(0), at(40), at(100)}}, at(0), at(100)); s.Max != 60 || s.P99 != 60 {
		t.Errorf("one client: %+v, want 60/60", s)
	}
}

// killLog is a synthetic unplanned failover. Two producers send every
// 10 ms (producer 1 3 ms after producer 0) from 0 to 6 s; the old
// primary acknowledges within 5 ms until it dies at 2 s; the new one
// acknowledges from 4.7 s on (the queued sends first). At the cut the
// new primary lacks the old one's tail: producer 0's 190..199 and
// producer 1's 195..199. The consumer received producer 0's tail from
// the old primary but not producer 1's; after the switch it gets
// producer 0's 180..189 again from the new primary's copy; after the heal the
// tail arrives late. Besides: producer 1's 300 is never delivered (lost),
// producer 0's 250 comes before its 249 (one order violation), and the
// survivor stores producer 0's 10 twice.
func killLog() *Log {
	l := &Log{
		Producers: 2, Consumers: 1,
		Start: at(0), Steady: at(1000), Fault: at(2000),
		Detected: at(2100), DetectedBy: "probe",
		Promoted: at(2500), PromotedBy: "drill",
		Healed: at(7000), Stop: at(6000),
	}
	ack := map[Key]time.Time{}
	for i := range 600 {
		for p := range 2 {
			sent := i*10 + p*3
			a := sent + 5
			if a > 1999 {
				a = max(a, 4700+(i-200))
			}
			l.Sends = append(l.Sends, Send{Key: k(p, int64(i)), Sent: at(sent), Acked: at(a)})
			ack[k(p, int64(i))] = at(a)
		}
	}
	tail := func(key Key) bool {
		return key.Producer == 0 && key.Seq >= 190 && key.Seq < 200 || key.Producer == 1 && key.Seq >= 195 && key.Seq < 200
	}
	deliver := func(key Key, ms int, late bool) {
		l.Deliveries = append(l.Deliveries, Delivery{Key: key, At: at(ms), Late: late})
	}
	// Before the fault, in acknowledgement order (producer 1's tail not
	// yet received).
	for i := range 200 {
		for p := range 2 {
			key := k(p, int64(i))
			if a := ack[key]; a.Before(at(2000)) && !(p == 1 && i >= 195) {
				deliver(key, int(a.Sub(base).Milliseconds())+2, false)
			}
		}
	}
	// The replay from the new primary's copy.
	for i := 180; i < 190; i++ {
		deliver(k(0, int64(i)), 4600+i-180, false)
	}
	// New messages, in acknowledgement order, but 250 before 249.
	for i := 200; i < 600; i++ {
		for p := range 2 {
			key := k(p, int64(i))
			switch {
			case key == k(1, 300):
				continue
			case key == k(0, 249):
				key = k(0, 250)
			case key == k(0, 250):
				key = k(0, 249)
			}
			deliver(key, int(ack[k(p, int64(i))].Sub(base).Milliseconds())+2, false)
		}
	}
	// The tail, late, after the heal.
	var tailKeys []Key
	for _, s := range l.Sends {
		if tail(s.Key) {
			tailKeys = append(tailKeys, s.Key)
			deliver(s.Key, 7100, true)
		}
	}
	l.AtCut = &Scan{Region: "r1", Started: at(5500), Done: at(5600)}
	l.Survivor = &Scan{Region: "r1", Started: at(8000), Done: at(8100)}
	for _, s := range l.Sends {
		if !tail(s.Key) {
			l.AtCut.Copies = append(l.AtCut.Copies, Copy{Key: s.Key})
			l.Survivor.Copies = append(l.Survivor.Copies, Copy{Key: s.Key})
		}
		if s.Key == k(0, 10) {
			l.Survivor.Copies = append(l.Survivor.Copies, Copy{Key: s.Key})
		}
	}
	for _, key := range tailKeys {
		l.Survivor.Copies = append(l.Survivor.Copies, Copy{Key: key, Late: true})
	}
	return l
}

func TestAnalyzeUnplannedFailover(t *testing.T) {
	r := Analyze(killLog(), Limits{MaxRTOMS: 10000, MaxLost: 0})
	tl := r.Timeline
	for _, c := range []struct {
		name string
		p    *Point
		want int64
	}{
		{"fault", tl.Fault, 0}, {"detected", tl.Detected, 100}, {"promoted", tl.Promoted, 500},
		// The last acknowledgement before the switch: producer 1's 199
		// (sent 1993 ms); the first after it: both producers' 200.
		{"fenced", tl.Fenced, -2}, {"first_publish_ok", tl.FirstPublishOK, 2700},
		// The replay (4.6 s) does not count: the first delivery of a
		// message the new primary acknowledged does (4700 + 2).
		{"first_delivery_ok", tl.FirstDeliveryOK, 2702},
		{"healed", tl.Healed, 5000},
	} {
		if c.p == nil {
			t.Errorf("%s: missing", c.name)
			continue
		}
		if c.p.OffsetMS != c.want {
			t.Errorf("%s: offset %d ms, want %d", c.name, c.p.OffsetMS, c.want)
		}
	}
	if tl.Detected.How != "probe" || tl.Promoted.How != "drill" {
		t.Errorf("how: %q, %q", tl.Detected.How, tl.Promoted.How)
	}
	// Producer 0: 1995 -> 4700; producer 1: 1998 -> 4700.
	if r.RTOPublishMS != (Spread{Max: 2705, P99: 2705, Clients: 2}) {
		t.Errorf("rto_publish_ms %+v", r.RTOPublishMS)
	}
	// The consumer: producer 0's 199 at 1997 ms, then the replay at 4.6 s.
	if r.RTOConsumeMS != (Spread{Max: 2603, P99: 2603, Clients: 1}) {
		t.Errorf("rto_consume_ms %+v", r.RTOConsumeMS)
	}
	// The tail: 15 messages, the oldest producer 0's 190 acknowledged at
	// 1905 ms.
	if r.RPOMessages == nil || *r.RPOMessages != 15 || r.RPOMS == nil || *r.RPOMS != 95 {
		t.Errorf("rpo %v messages, %v ms; want 15, 95", deref(r.RPOMessages), deref(r.RPOMS))
	}
	if r.Sent != 1200 || r.Acknowledged != 1200 || r.Delivered != 1199 {
		t.Errorf("sent %d, acknowledged %d, delivered %d", r.Sent, r.Acknowledged, r.Delivered)
	}
	if r.Lost != 1 || !slices.Equal(r.Examples.Lost, []string{"p1:300"}) {
		t.Errorf("lost %d %v, want p1:300", r.Lost, r.Examples.Lost)
	}
	if r.Late != 15 {
		t.Errorf("late %d, want 15", r.Late)
	}
	// Redelivered: the replay of producer 0's 180..189 (10), and producer
	// 0's tail, which the old primary had delivered (10).
	if r.DuplicatedRedelivery != 20 {
		t.Errorf("duplicated_redelivery %d, want 20", r.DuplicatedRedelivery)
	}
	// In flight: first delivered from 1705 ms (100 ms of ack grouping,
	// the rpo's 95 ms and 100 ms of state shipping before the fault) to
	// fenced (1998 ms). The second before the fault acknowledged 200
	// messages: 20 per 100 ms.
	if r.InFlightAtCut != 55 || r.RedeliveryBound != 75 {
		t.Errorf("in_flight_at_cut %d, redelivery_bound %d; want 55, 75", r.InFlightAtCut, r.RedeliveryBound)
	}
	if r.DuplicatedCopy != 1 || !slices.Equal(r.Examples.DuplicatedCopy, []string{"p0:10"}) {
		t.Errorf("duplicated_copy %d %v, want p0:10", r.DuplicatedCopy, r.Examples.DuplicatedCopy)
	}
	if !slices.Equal(r.Survivor.DuplicatedExamples, []string{"p0:10"}) {
		t.Errorf("survivor's duplicated_examples %v, want p0:10", r.Survivor.DuplicatedExamples)
	}
	// Producer 0's 249 after its 250; producer 1's late tail is not
	// counted though it comes after its 599.
	if r.OrderViolations != 1 || !slices.Equal(r.Examples.OrderViolations, []string{"p0:249"}) {
		t.Errorf("order_violations %d %v, want p0:249", r.OrderViolations, r.Examples.OrderViolations)
	}
	if s := r.Survivor; s == nil || !s.Complete || s.Messages != 1201 || s.Distinct != 1200 || s.Missing != 0 || s.Late != 15 {
		t.Errorf("survivor %+v", s)
	}
	if r.Passed || !slices.Equal(r.Failures, []string{"1 acknowledged messages lost, over the limit of 0"}) {
		t.Errorf("passed %v, failures %q", r.Passed, r.Failures)
	}
	// The consumer's acknowledgements reached the new primary: it does
	// not receive producer 0's tail again. The copy still counts it late.
	l := killLog()
	l.Deliveries = slices.DeleteFunc(l.Deliveries, func(d Delivery) bool { return d.Late && d.Producer == 0 })
	if r := Analyze(l, Limits{MaxRTOMS: 10000}); r.Late != 15 || r.DuplicatedRedelivery != 10 || r.Lost != 1 {
		t.Errorf("tail not delivered again: late %d, redelivered %d, lost %d; want 15, 10, 1", r.Late, r.DuplicatedRedelivery, r.Lost)
	}
	// A consumer that starts over from the beginning after the switch (its
	// subscription's state did not follow) is over the bound.
	l = killLog()
	for i := range 150 {
		l.Deliveries = append(l.Deliveries, Delivery{Key: k(1, int64(i)), At: at(4700)})
	}
	if r := Analyze(l, Limits{MaxRTOMS: 10000, MaxLost: 1}); r.Passed || r.DuplicatedRedelivery != 170 ||
		!slices.Equal(r.Failures, []string{"duplicated_redelivery 170 is over in_flight_at_cut + 100 ms of traffic per switch (75)"}) {
		t.Errorf("a consumer starting over: redelivered %d, failures %q", r.DuplicatedRedelivery, r.Failures)
	}
	if r := Analyze(killLog(), Limits{MaxRTOMS: 10000, MaxLost: 1}); !r.Passed {
		t.Errorf("with --max-lost 1: failures %q", r.Failures)
	}
	if r := Analyze(killLog(), Limits{MaxRTOMS: 2000, MaxLost: 1}); r.Passed {
		t.Error("passed with --max-rto 2s and a 2.7 s gap")
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestAnalyzeNoFailover: a fault after which nothing is acknowledged
// again fails with the open gap as the RTO and no first success.
func TestAnalyzeNoFailover(t *testing.T) {
	l := &Log{Producers: 1, Consumers: 1, Start: at(0), Steady: at(100), Fault: at(1000), Stop: at(5000)}
	for i := range 100 {
		s := Send{Key: k(0, int64(i)), Sent: at(i * 20)}
		if i*20 < 1000 {
			s.Acked = at(i*20 + 3)
			l.Deliveries = append(l.Deliveries, Delivery{Key: s.Key, At: at(i*20 + 5)})
		} else if i == 99 {
			s.Err = "send timeout"
		}
		l.Sends = append(l.Sends, s)
	}
	l.Errors = []string{"failover: gave up"}
	r := Analyze(l, Limits{MaxRTOMS: 10000})
	if r.Timeline.FirstPublishOK != nil || r.Timeline.FirstDeliveryOK != nil || r.Timeline.Fenced == nil || r.Timeline.Fenced.OffsetMS != -17 {
		t.Errorf("timeline %+v", r.Timeline)
	}
	if r.RTOPublishMS.Max != 4017 || r.ClientErrors.Send != 1 || r.RPOMessages != nil {
		t.Errorf("rto %+v, send errors %d, rpo %v", r.RTOPublishMS, r.ClientErrors.Send, r.RPOMessages)
	}
	want := []string{"failover: gave up", "no publish was acknowledged after the fault"}
	if r.Passed || !slices.Equal(r.Failures, want) {
		t.Errorf("failures %q, want %q", r.Failures, want)
	}
}

// TestAnalyzeFailback: the fail-back's gap is measured in its own window
// and does not count in the failover's.
func TestAnalyzeFailback(t *testing.T) {
	l := &Log{Producers: 1, Consumers: 1, Start: at(0), Steady: at(100), Fault: at(1000),
		Promoted: at(1100), Healed: at(3000), FailbackStart: at(4000), Stop: at(6000)}
	for i := range 300 {
		a := i*20 + 2
		switch {
		case a > 1000 && a < 1400: // the failover's gap: 982 -> 1400
			a = 1400
		case a > 4000 && a < 4500: // the fail-back's: 3982 -> 4500
			a = 4500
		}
		s := Send{Key: k(0, int64(i)), Sent: at(i * 20), Acked: at(a)}
		l.Sends = append(l.Sends, s)
		l.Deliveries = append(l.Deliveries, Delivery{Key: s.Key, At: at(a + 1)})
	}
	l.FailbackCopy = &Scan{Region: "r0", Started: at(7000), Done: at(7100)}
	for _, s := range l.Sends {
		l.FailbackCopy.Copies = append(l.FailbackCopy.Copies, Copy{Key: s.Key})
	}
	r := Analyze(l, Limits{MaxRTOMS: 500})
	if r.RTOPublishMS.Max != 418 || r.Timeline.FirstPublishOK.OffsetMS != 400 {
		t.Errorf("failover rto %+v, first publish %+v", r.RTOPublishMS, r.Timeline.FirstPublishOK)
	}
	fb := r.Failback
	if fb == nil || fb.RTOPublishMS.Max != 518 || fb.FirstPublishOK == nil || fb.FirstPublishOK.OffsetMS != 3500 || fb.Requested.OffsetMS != 3000 {
		t.Fatalf("failback %+v", fb)
	}
	if fb.Copy == nil || fb.Copy.Region != "r0" || fb.Copy.Distinct != 300 || fb.Copy.Missing != 0 {
		t.Errorf("failback copy %+v", fb.Copy)
	}
	if r.Passed || !slices.Equal(r.Failures, []string{"fail-back rto_publish_ms 518 is over the limit of 500"}) {
		t.Errorf("failures %q", r.Failures)
	}
}

// TestBudget: the failover's parts from its moments; none without every
// moment; a moment before the one it follows counts as zero.
func TestBudget(t *testing.T) {
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	if b := budget(at(0), at(400), time.Time{}, at(-5), at(2000), 2010); b != nil {
		t.Fatalf("without a writable moment: %+v", b)
	}
	b := budget(at(0), at(400), at(2100), at(-5), at(2300), 2900)
	if want := (Budget{Promotion: 400, Fence: 1700, Client: 200, Slowest: 595}); *b != want {
		t.Fatalf("budget %+v, want %+v", *b, want)
	}
	// The workload got through before the probe did.
	b = budget(at(0), at(400), at(3000), at(-5), at(2300), 2900)
	if want := (Budget{Promotion: 400, Fence: 1900, Client: 0, Slowest: 595}); *b != want {
		t.Fatalf("budget %+v, want %+v", *b, want)
	}
	// The probe answered before the drill heard of its promotion.
	b = budget(at(0), at(400), at(350), time.Time{}, at(500), 600)
	if want := (Budget{Promotion: 400, Fence: 0, Client: 150}); *b != want {
		t.Fatalf("budget %+v, want %+v", *b, want)
	}
}

// TestPublishLatency: the median send-to-acknowledgement time of the
// messages sent in a window (the stream's lag under synchronous
// replication, where the RPO is 0).
func TestPublishLatency(t *testing.T) {
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	sends := []Send{
		{Sent: at(0), Acked: at(150)},
		{Sent: at(10), Acked: at(130)},
		{Sent: at(20), Acked: at(300)},
		{Sent: at(30)},                    // never acknowledged
		{Sent: at(2000), Acked: at(2001)}, // outside the window
	}
	if got := publishLatency(sends, at(0), at(1000)); got != 150*time.Millisecond {
		t.Fatalf("median %v, want 150ms", got)
	}
	if got := publishLatency(sends, at(5000), at(6000)); got != 0 {
		t.Fatalf("no sends: %v", got)
	}
}
