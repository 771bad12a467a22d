package drill

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Analyze turns what a drill recorded into its report, judged against
// lim. It reads no clock and does no I/O; the definitions are those of
// docs/drills.md:
//
//   - fenced: the last acknowledgement before the longest gap, in all
//     producers' acknowledgements together, that ends after the fault.
//     With one primary at a time, everything acknowledged up to it was
//     acknowledged by the old primary and everything after by the new
//     one. first_publish_ok is the acknowledgement that ends that gap.
//   - first_delivery_ok: the first delivery after the fault of a message
//     the new primary acknowledged (at or after first_publish_ok), which
//     only the new primary can have delivered.
//   - rto: per client, the longest time without a success (an
//     acknowledgement for a producer, a delivery for a consumer) from the
//     end of the warm-up to the fail-back (or the stop), a client that
//     stopped succeeding counting until then; max and p99 over clients.
//   - rpo: messages acknowledged up to fenced that were not in the new
//     primary's copy just before the heal; rpo_ms is the time from the
//     oldest of them to the fault (0 when all were acknowledged after
//     it).
//   - lost: acknowledged, never delivered.
//   - late: messages marked late in the new primary's copy (delivered
//     marked late, when it could not be read): a consumer whose
//     acknowledgements reached the new primary does not receive again
//     the part of the tail it had received from the old one.
//   - duplicated_copy: extra copies in the new primary's topic;
//     duplicated_redelivery: deliveries of a message beyond its number of
//     copies (at least one).
//   - in_flight_at_cut: messages first delivered from AckGrouping plus
//     the stream's lag (rpo_ms, or the median publish latency in the
//     second before the fault when that is longer: synchronous
//     replication) plus SubStateShipping before the fault to fenced:
//     their acknowledgements had not
//     left the client (grouped for AckGrouping), were still in the
//     replication stream (as far behind as the entries were at the cut),
//     or could not reach the new primary while the old one, cut off,
//     still served; likewise from AckGrouping before the fail-back's
//     request to its switch. redelivery_bound adds 100 ms of the
//     workload's acknowledged rate (in the second before the fault) per
//     switch: the bound on duplicated deliveries the drill judges.
//   - order_violations: per producer, first deliveries (not late) whose
//     sequence is below one delivered before.
func Analyze(l *Log, lim Limits) Report {
	r := Report{Limits: lim, Failures: []string{}, Producers: l.Producers, Consumers: l.Consumers}
	origin := l.Fault
	if origin.IsZero() {
		origin = l.Start
	}
	point := func(t time.Time, how string) *Point {
		if t.IsZero() {
			return nil
		}
		return &Point{At: t, OffsetMS: ms(t.Sub(origin)), How: how}
	}

	// Sends and acknowledgements.
	acked := make(map[Key]time.Time, len(l.Sends))
	perProducer := make([][]time.Time, l.Producers)
	var allAcks []time.Time
	last := l.Stop
	for _, s := range l.Sends {
		r.Sent++
		if s.Err != "" {
			r.ClientErrors.Send++
		}
		if s.Acked.IsZero() {
			continue
		}
		acked[s.Key] = s.Acked
		allAcks = append(allAcks, s.Acked)
		if s.Producer >= 0 && s.Producer < len(perProducer) {
			perProducer[s.Producer] = append(perProducer[s.Producer], s.Acked)
		}
		if s.Acked.After(last) {
			last = s.Acked
		}
	}
	r.Acknowledged = len(acked)
	sortTimes(allAcks)
	for _, ts := range perProducer {
		sortTimes(ts)
	}
	perConsumer := make([][]time.Time, l.Consumers)
	for _, d := range l.Deliveries {
		if d.Consumer >= 0 && d.Consumer < len(perConsumer) {
			perConsumer[d.Consumer] = append(perConsumer[d.Consumer], d.At)
		}
		if l.Stop.IsZero() && d.At.After(last) {
			last = d.At
		}
	}
	for _, ts := range perConsumer {
		sortTimes(ts)
	}

	// The windows: the failover's from the end of the warm-up to the
	// fail-back or the stop; the fail-back's from its request to the stop.
	winStart := l.Steady
	if winStart.IsZero() {
		winStart = l.Start
	}
	winEnd := l.Stop
	if winEnd.IsZero() {
		winEnd = last
	}
	mainEnd := winEnd
	if !l.FailbackStart.IsZero() {
		mainEnd = l.FailbackStart
	}

	fenced, firstOK := switchGap(allAcks, origin, mainEnd)
	var fbFenced, fbOK time.Time
	if !l.FailbackStart.IsZero() {
		fbFenced, fbOK = switchGap(allAcks, l.FailbackStart, winEnd)
	}
	r.Timeline = Timeline{
		Fault:          point(l.Fault, ""),
		Detected:       point(l.Detected, l.DetectedBy),
		Fenced:         point(fenced, ""),
		Promoted:       point(l.Promoted, l.PromotedBy),
		Writable:       point(l.Writable, "the drill's probe"),
		FirstPublishOK: point(firstOK, ""),
		Healed:         point(l.Healed, ""),
	}
	if !firstOK.IsZero() {
		for _, d := range l.Deliveries {
			if at, ok := acked[d.Key]; ok && !d.At.Before(origin) && !at.Before(firstOK) {
				r.Timeline.FirstDeliveryOK = point(d.At, "")
				break
			}
		}
	}
	r.RTOPublishMS = spread(perProducer, winStart, mainEnd)
	r.RTOConsumeMS = spread(perConsumer, winStart, mainEnd)
	r.Budget = budget(l.Fault, l.Promoted, l.Writable, fenced, firstOK, r.RTOPublishMS.Max)

	// RPO: acknowledged by the old primary, not in the new one at the cut.
	if l.AtCut != nil && !l.AtCut.Done.IsZero() && !fenced.IsZero() {
		inCut := make(map[Key]bool, len(l.AtCut.Copies))
		for _, c := range l.AtCut.Copies {
			inCut[c.Key] = true
		}
		n, oldest := 0, time.Time{}
		for k, at := range acked {
			if !at.After(fenced) && !inCut[k] {
				n++
				if oldest.IsZero() || at.Before(oldest) {
					oldest = at
				}
			}
		}
		var rpo int64
		if n > 0 && oldest.Before(l.Fault) {
			rpo = ms(l.Fault.Sub(oldest))
		}
		r.RPOMessages, r.RPOMS = &n, &rpo
	}

	// Deliveries: lost, late, duplicates, order.
	delivered := make(map[Key]int, len(acked))
	late := map[Key]bool{}
	order := orderCheck{}
	var lost, dupCopy, outOfOrder []Key
	for _, d := range l.Deliveries {
		first := delivered[d.Key] == 0
		delivered[d.Key]++
		if d.Late {
			late[d.Key] = true
		}
		if !first || d.Late {
			continue
		}
		if !order.inOrder(d.Key) {
			r.OrderViolations++
			outOfOrder = append(outOfOrder, d.Key)
		}
	}
	r.Delivered = len(delivered)
	r.Late = len(late)
	r.Foreign = l.Foreign
	for k := range acked {
		if delivered[k] == 0 {
			r.Lost++
			lost = append(lost, k)
		}
	}
	copies := map[Key]int{}
	for _, sc := range []*Scan{l.Survivor, l.FailbackCopy} {
		if sc == nil {
			continue
		}
		n := map[Key]int{}
		for _, c := range sc.Copies {
			n[c.Key]++
		}
		for k, c := range n {
			copies[k] = max(copies[k], c)
		}
	}
	for k, n := range delivered {
		r.DuplicatedRedelivery += max(0, n-max(1, copies[k]))
	}
	// How far behind the replication stream was at the cut: the RPO's
	// age, or, where publishes wait for it (synchronous replication, RPO
	// 0), their median latency in the second before the fault; plus the
	// subscription state's shipping interval.
	var lag time.Duration
	if r.RPOMS != nil {
		lag = time.Duration(*r.RPOMS) * time.Millisecond
	}
	lag = max(lag, publishLatency(l.Sends, l.Fault.Add(-time.Second), l.Fault)) + SubStateShipping
	r.InFlightAtCut, r.RedeliveryBound = redeliveryBound(l, allAcks, lag, fenced, fbFenced)
	r.Survivor = copyReport(l.Survivor, acked)
	if r.Survivor != nil {
		r.Late = r.Survivor.Late
		r.DuplicatedCopy = r.Survivor.DuplicatedCopy
		seen := map[Key]bool{}
		for _, c := range l.Survivor.Copies {
			if seen[c.Key] {
				dupCopy = append(dupCopy, c.Key)
			}
			seen[c.Key] = true
		}
	}
	r.Examples = Examples{Lost: examples(lost), DuplicatedCopy: examples(dupCopy), OrderViolations: examples(outOfOrder)}
	r.ClientErrors.Receive = l.ReceiveErrors
	r.ClientErrors.Ack = l.AckErrors
	r.ClientErrors.ProducersClosed = l.ProducersClosed
	r.ClientErrors.ConsumersClosed = l.ConsumersClosed

	if !l.FailbackStart.IsZero() {
		fb := &Failback{Requested: point(l.FailbackStart, "")}
		if !fbOK.IsZero() {
			fb.FirstPublishOK = point(fbOK, "")
		}
		fb.RTOPublishMS = spread(perProducer, l.FailbackStart, winEnd)
		fb.RTOConsumeMS = spread(perConsumer, l.FailbackStart, winEnd)
		for _, s := range l.Sends {
			if s.Err != "" && !s.Sent.Before(l.FailbackStart) {
				fb.SendErrors++
			}
		}
		fb.Copy = copyReport(l.FailbackCopy, acked)
		r.Failback = fb
	}

	// The verdict.
	fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }
	r.Failures = append(r.Failures, l.Errors...)
	if !l.Fault.IsZero() && firstOK.IsZero() {
		fail("no publish was acknowledged after the fault")
	}
	if r.RTOPublishMS.Max > lim.MaxRTOMS {
		fail("rto_publish_ms %d is over the limit of %d", r.RTOPublishMS.Max, lim.MaxRTOMS)
	}
	if r.Lost > lim.MaxLost {
		fail("%d acknowledged messages lost, over the limit of %d", r.Lost, lim.MaxLost)
	}
	if !l.Fault.IsZero() && r.DuplicatedRedelivery > r.RedeliveryBound {
		fail("duplicated_redelivery %d is over in_flight_at_cut + 100 ms of traffic per switch (%d)", r.DuplicatedRedelivery, r.RedeliveryBound)
	}
	if fb := r.Failback; fb != nil && fb.RTOPublishMS.Max > lim.MaxRTOMS {
		fail("fail-back rto_publish_ms %d is over the limit of %d", fb.RTOPublishMS.Max, lim.MaxRTOMS)
	}
	r.Passed = len(r.Failures) == 0
	return r
}

// orderCheck holds, per producer, the highest sequence number of a
// stream of messages (first occurrences, not late) seen so far.
type orderCheck map[int]int64

// inOrder reports whether k comes after every message of its producer
// seen so far, and if so records it.
func (o orderCheck) inOrder(k Key) bool {
	if m, ok := o[k.Producer]; ok && k.Seq < m {
		return false
	}
	o[k.Producer] = k.Seq
	return true
}

// AckGrouping is how long pulsar-client-go holds acknowledgements before
// sending them (its default AckGroupingOptions.MaxTime; the drill's
// consumers keep the default).
const AckGrouping = 100 * time.Millisecond

// SubStateShipping is how long a broker may keep its consumers'
// acknowledgements before it ships them to the other regions (at most
// every 100 ms, docs/failover.md "Subscriptions follow the primary").
const SubStateShipping = 100 * time.Millisecond

// publishLatency is the median time from send to acknowledgement of the
// messages sent from from to to (zero when none was acknowledged).
func publishLatency(sends []Send, from, to time.Time) time.Duration {
	var ds []time.Duration
	for _, s := range sends {
		if !s.Acked.IsZero() && !s.Sent.Before(from) && s.Sent.Before(to) {
			ds = append(ds, s.Acked.Sub(s.Sent))
		}
	}
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// redeliveryBound counts the messages in flight at each switch (first
// delivered from AckGrouping, plus lag for the fault, before it began to
// its fenced point: the fault and fenced, the fail-back's request and
// fbFenced) and adds 100 ms of traffic per switch, at the acknowledged
// rate of the second before the fault.
func redeliveryBound(l *Log, allAcks []time.Time, lag time.Duration, fenced, fbFenced time.Time) (inFlight, bound int) {
	if l.Fault.IsZero() {
		return 0, 0
	}
	type window struct{ from, to time.Time }
	ws := []window{{l.Fault.Add(-AckGrouping - lag), fenced}}
	if !l.FailbackStart.IsZero() {
		ws = append(ws, window{l.FailbackStart.Add(-AckGrouping), fbFenced})
	}
	seen := map[Key]bool{}
	for _, d := range l.Deliveries {
		if seen[d.Key] {
			continue
		}
		seen[d.Key] = true
		for _, w := range ws {
			if !d.At.Before(w.from) && !d.At.After(w.to) {
				inFlight++
				break
			}
		}
	}
	from := l.Fault.Add(-time.Second)
	lo, _ := slices.BinarySearchFunc(allAcks, from, func(a, b time.Time) int { return a.Compare(b) })
	hi, _ := slices.BinarySearchFunc(allAcks, l.Fault, func(a, b time.Time) int { return a.Compare(b) })
	per100ms := int(math.Ceil(float64(hi-lo) / 10))
	return inFlight, inFlight + len(ws)*per100ms
}

// switchGap finds the longest gap between consecutive times (sorted)
// that ends after from and no later than to, and returns the times
// before and after it. With no time after from, before is the last time
// up to to and after is zero.
func switchGap(ts []time.Time, from, to time.Time) (before, after time.Time) {
	best := time.Duration(-1)
	for i := 1; i < len(ts); i++ {
		if !ts[i].After(from) || ts[i].After(to) {
			continue
		}
		if g := ts[i].Sub(ts[i-1]); g > best {
			best, before, after = g, ts[i-1], ts[i]
		}
	}
	if best >= 0 {
		return before, after
	}
	for _, t := range ts {
		if !t.After(to) {
			before = t
		}
	}
	return before, time.Time{}
}

// longestGap is the longest time without a success (ts sorted) within
// [from, to]: from the last success before from (or from itself) to the
// next, and so on, up to to.
func longestGap(ts []time.Time, from, to time.Time) time.Duration {
	_, d := longestGapAt(ts, from, to)
	return d
}

// longestGapAt is longestGap and when that gap began (the success before
// it, or from); the first such gap when several are as long.
func longestGapAt(ts []time.Time, from, to time.Time) (time.Time, time.Duration) {
	if !to.After(from) {
		return from, 0
	}
	prev := from
	i, _ := slices.BinarySearchFunc(ts, from, func(a, b time.Time) int { return a.Compare(b) })
	if i > 0 {
		prev = ts[i-1]
	}
	var longest time.Duration
	began := prev
	for ; i < len(ts) && !ts[i].After(to); i++ {
		if g := ts[i].Sub(prev); g > longest {
			longest, began = g, prev
		}
		prev = ts[i]
	}
	if g := to.Sub(prev); g > longest {
		longest, began = g, prev
	}
	return began, longest
}

// spread is the worst and the p99 (nearest rank) of each client's
// longest gap within [from, to].
func spread(clients [][]time.Time, from, to time.Time) Spread {
	if len(clients) == 0 {
		return Spread{}
	}
	gaps := make([]int64, len(clients))
	for i, ts := range clients {
		gaps[i] = ms(longestGap(ts, from, to))
	}
	slices.Sort(gaps)
	rank := int(math.Ceil(0.99*float64(len(gaps)))) - 1
	return Spread{Max: gaps[len(gaps)-1], P99: gaps[max(rank, 0)], Clients: len(gaps)}
}

func copyReport(sc *Scan, acked map[Key]time.Time) *CopyReport {
	if sc == nil {
		return nil
	}
	c := &CopyReport{Region: sc.Region, Complete: !sc.Done.IsZero(), Messages: len(sc.Copies)}
	seen := make(map[Key]bool, len(sc.Copies))
	late := map[Key]bool{}
	var dups []Key
	for _, cp := range sc.Copies {
		if cp.Late && !late[cp.Key] {
			late[cp.Key] = true
			c.Late++
		}
		if seen[cp.Key] {
			c.DuplicatedCopy++
			dups = append(dups, cp.Key)
			continue
		}
		seen[cp.Key] = true
	}
	if len(dups) > 0 {
		c.DuplicatedExamples = examples(dups)
	}
	c.Distinct = len(seen)
	for k, at := range acked {
		if at.Before(sc.Started) && !seen[k] {
			c.Missing++
		}
	}
	return c
}

// examples names the lowest maxExamples distinct keys of ks.
func examples(ks []Key) []string {
	slices.SortFunc(ks, func(a, b Key) int {
		return cmp.Or(cmp.Compare(a.Producer, b.Producer), cmp.Compare(a.Seq, b.Seq))
	})
	ks = slices.Compact(ks)
	out := []string{}
	for _, k := range ks[:min(len(ks), maxExamples)] {
		out = append(out, k.String())
	}
	return out
}

func sortTimes(ts []time.Time) { slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) }) }

// ms rounds d to whole milliseconds.
func ms(d time.Duration) int64 { return d.Round(time.Millisecond).Milliseconds() }

// budget breaks a failover down (Budget), or nil when one of its moments
// is missing. The new primary was writable at the probe's answer or the
// workload's first publish through it, whichever came first. A moment
// earlier than the one before it (the probe can answer before the drill
// hears of its own promotion) counts as zero.
func budget(fault, promoted, writable, fenced, firstOK time.Time, rtoMax int64) *Budget {
	if fault.IsZero() || promoted.IsZero() || writable.IsZero() || firstOK.IsZero() {
		return nil
	}
	// The workload's own first publish through the new primary shows it
	// writable too (the probe may be in a try that began too early).
	if firstOK.Before(writable) {
		writable = firstOK
	}
	step := func(from, to time.Time) int64 { return max(0, ms(to.Sub(from))) }
	b := &Budget{Promotion: step(fault, promoted), Fence: step(promoted, writable), Client: step(writable, firstOK)}
	if !fenced.IsZero() {
		b.Slowest = max(0, rtoMax-ms(firstOK.Sub(fenced)))
	}
	return b
}
