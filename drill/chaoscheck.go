package drill

import (
	"fmt"
	"slices"
	"time"
)

// ChaosTopic is one topic of a chaos drill's workload.
type ChaosTopic struct {
	// Name is the full topic name.
	Name string
	Kind NamespaceKind
	// Partitions is its partition count; 0 for a topic that is not
	// partitioned.
	Partitions int
}

// ChaosClient is a producer or consumer of a chaos drill: the topic it
// works on (an index into ChaosLog.Topics) and the region its client
// reaches, empty for a client that lists every region.
type ChaosClient struct {
	Topic  int
	Region string
	// Incarnation is the incarnation of the topic it works on: 0, or n
	// for the topic created again after its nth delete (DeleteRecord).
	Incarnation int
	// Started and Stopped bound the time it worked (zero: from Steady,
	// until Stop); a client of a later incarnation that never started
	// has both zero.
	Started, Stopped time.Time
}

// ChaosCopy is a read of one region's copy of one topic's partition.
type ChaosCopy struct {
	Topic     int
	Partition int
	// Scan is nil when the read could not be made at all.
	Scan *Scan
}

// StepRecord is a schedule's step as the driver took it: when it was
// asked for, when it returned, and its error.
type StepRecord struct {
	Step
	Asked, Done time.Time
	Err         string
}

// ChaosLog is everything a chaos drill recorded, the only input of
// CheckChaos. Producers and Consumers are indexed as Key.Producer and
// Delivery.Consumer.
type ChaosLog struct {
	Regions []string
	Topics  []ChaosTopic
	// Producers send to their topic; each topic's copies in every region
	// must end up holding everything they had acknowledged.
	Producers []ChaosClient
	Consumers []ChaosClient
	// Start is when the workload started, Steady when its warm-up ended
	// (the schedule's zero), Healed when the last step was taken and
	// every region was ready, Stop when the producers stopped sending.
	Start, Steady, Healed, Stop time.Time
	// Steps are the schedule's steps as taken.
	Steps []StepRecord

	Sends      []Send
	Deliveries []Delivery
	// Copies are the final reads of every region's copy of every topic
	// (each partition apart), after the convergence wait.
	Copies []ChaosCopy
	// Deletes are the delete steps as taken.
	Deletes []DeleteRecord

	Foreign                          int
	ReceiveErrors, AckErrors         int
	ProducersClosed, ConsumersClosed int

	// Errors are what went wrong in the run itself; each fails it.
	Errors []string
}

// ChaosLimits are the limits a chaos drill is judged against besides
// its invariants.
type ChaosLimits struct {
	// MaxGapMS is the longest time without an acknowledged send any
	// producer may have between the end of the warm-up and the stop; 0:
	// not judged.
	MaxGapMS int64 `json:"max_gap_ms"`
}

// ChaosReport is a chaos drill's result, as `--json` writes it
// (docs/drills.md, "Reading the chaos report").
type ChaosReport struct {
	Drill      string    `json:"drill"`
	RunID      string    `json:"run_id"`
	Seed       uint64    `json:"seed"`
	Regions    []string  `json:"regions"`
	DurationMS int64     `json:"duration_ms"`
	Rate       int       `json:"rate"`
	Started    time.Time `json:"started"`
	// Steady is when the warm-up ended: the zero of the schedule's
	// offsets.
	Steady time.Time `json:"steady"`
	// Schedule is every step, planned and as taken.
	Schedule []StepReport `json:"schedule"`

	Sent         int `json:"sent"`
	Acknowledged int `json:"acknowledged"`
	SendErrors   int `json:"send_errors"`
	// LongestGapMS is the longest time without any acknowledged send,
	// all producers together, from the end of the warm-up to the stop.
	LongestGapMS int64            `json:"longest_gap_ms"`
	Producers    []ProducerReport `json:"producers"`
	Consumers    []ConsumerReport `json:"consumers"`
	Topics       []TopicReport    `json:"topics"`

	// The invariants, summed over topics and regions.
	Lost                    int      `json:"lost"`
	DuplicatedCopy          int      `json:"duplicated_copy"`
	OrderViolations         int      `json:"order_violations"`
	DeliveryOrderViolations int      `json:"delivery_order_violations"`
	Late                    int      `json:"late"`
	NotConverged            []string `json:"not_converged"`
	Foreign                 int      `json:"foreign"`
	// Deletes are the delete steps; DeletesCompleted counts those that
	// finished in every region, DeletesFirst503 those whose first
	// request answered 503 (a region cut off), LongestDeleteMS the
	// longest from a first request to the delete finished.
	Deletes          []DeleteReport `json:"deletes"`
	DeletesCompleted int            `json:"deletes_completed"`
	DeletesFirst503  int            `json:"deletes_first_503"`
	LongestDeleteMS  int64          `json:"longest_delete_ms"`
	// Resurrected counts messages of a deleted incarnation seen after
	// the delete finished: delivered then, delivered to a later
	// incarnation's consumer, or in a final copy.
	Resurrected int `json:"resurrected"`
	// Examples name a few messages behind each count, as
	// "<topic> <region> p<producer>:<seq>".
	Examples     ChaosExamples `json:"examples"`
	ClientErrors ClientErrors  `json:"client_errors"`

	Limits   ChaosLimits `json:"limits"`
	Passed   bool        `json:"passed"`
	Failures []string    `json:"failures"`
}

// StepReport is one step of the schedule: planned offset, what, and
// when it was taken (offset from the schedule's start) and how long it
// took.
type StepReport struct {
	Step
	PlannedMS int64  `json:"planned_ms"`
	TakenMS   *int64 `json:"taken_ms"`
	TookMS    *int64 `json:"took_ms"`
	Error     string `json:"error,omitempty"`
}

// ProducerReport is one producer's sends.
type ProducerReport struct {
	ID           int           `json:"id"`
	Topic        string        `json:"topic"`
	Kind         NamespaceKind `json:"kind"`
	Region       string        `json:"region"`
	Incarnation  int           `json:"incarnation"`
	Sent         int           `json:"sent"`
	Acknowledged int           `json:"acknowledged"`
	SendErrors   int           `json:"send_errors"`
	LongestGapMS int64         `json:"longest_gap_ms"`
	// LongestGapAtMS is when that gap began (the acknowledgement before
	// it), from the end of the warm-up, as the schedule's offsets.
	LongestGapAtMS int64 `json:"longest_gap_at_ms"`
}

// ConsumerReport is one consumer's deliveries.
type ConsumerReport struct {
	ID              int    `json:"id"`
	Topic           string `json:"topic"`
	Region          string `json:"region"`
	Incarnation     int    `json:"incarnation"`
	Deliveries      int    `json:"deliveries"`
	Distinct        int    `json:"distinct"`
	OrderViolations int    `json:"order_violations"`
}

// TopicReport is one topic's copies, one per region.
type TopicReport struct {
	Topic      string            `json:"topic"`
	Kind       NamespaceKind     `json:"kind"`
	Partitions int               `json:"partitions"`
	Converged  bool              `json:"converged"`
	Copies     []ChaosCopyReport `json:"copies"`
}

// ChaosCopyReport is a region's copy of a topic (its partitions
// together): CopyReport's counts, with Missing the messages acknowledged
// and absent, and the order violations found in it.
type ChaosCopyReport struct {
	CopyReport
	OrderViolations int `json:"order_violations"`
}

// ChaosExamples are up to maxExamples messages of each violation.
type ChaosExamples struct {
	Lost            []string `json:"lost"`
	DuplicatedCopy  []string `json:"duplicated_copy"`
	OrderViolations []string `json:"order_violations"`
	Resurrected     []string `json:"resurrected"`
}

// CheckChaos judges what a chaos drill recorded. It reads no clock and
// does no I/O. For every topic, in every region's copy (its partitions'
// reads together):
//
//   - lost: a message its producer had acknowledged is absent;
//   - duplicated_copy: a message is there more than once (in one
//     partition or in two);
//   - order_violations: in one partition, a message (its first copy, not
//     marked late) whose sequence is below one of the same producer
//     stored before it; late messages, the old primary's tail, are
//     counted apart in late;
//   - converged: every region's copy holds the same messages, each read
//     completely.
//
// On a topic deleted and created again, the acknowledged messages are
// those of its current incarnation; those of the incarnations deleted
// must not come back (resurrected, and the delete steps' requests are
// judged: checkDelete).
//
// Also: first deliveries to each consumer out of producer order within a
// partition (delivery_order_violations, late ones apart), send errors,
// and the longest time without an acknowledged send, per producer and
// all together, from Steady to Stop (judged against lim.MaxGapMS when
// set). Errors of the run itself, and steps that failed, fail it too.
func CheckChaos(l *ChaosLog, lim ChaosLimits) ChaosReport {
	r := ChaosReport{Drill: "chaos", Regions: l.Regions, Steady: l.Steady, Limits: lim, Failures: []string{}, NotConverged: []string{}}
	fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }
	r.Failures = append(r.Failures, l.Errors...)
	for _, s := range l.Steps {
		sr := StepReport{Step: s.Step, PlannedMS: ms(s.At), Error: s.Err}
		if !s.Asked.IsZero() && !l.Steady.IsZero() {
			taken := ms(s.Asked.Sub(l.Steady))
			sr.TakenMS = &taken
		}
		if !s.Done.IsZero() && !s.Asked.IsZero() {
			took := ms(s.Done.Sub(s.Asked))
			sr.TookMS = &took
		}
		r.Schedule = append(r.Schedule, sr)
		if s.Err != "" {
			fail("step %s %s at %d ms: %s", s.Action, s.Region, sr.PlannedMS, s.Err)
		}
	}

	// Sends.
	topicName := func(i int) string {
		if i >= 0 && i < len(l.Topics) {
			return l.Topics[i].Name
		}
		return fmt.Sprintf("topic %d", i)
	}
	acked := make([]map[Key]time.Time, len(l.Topics))
	for i := range acked {
		acked[i] = map[Key]time.Time{}
	}
	perProducer := make([][]time.Time, len(l.Producers))
	r.Producers = make([]ProducerReport, len(l.Producers))
	for i, p := range l.Producers {
		r.Producers[i] = ProducerReport{ID: i, Topic: topicName(p.Topic), Region: p.Region, Incarnation: p.Incarnation}
		if p.Topic >= 0 && p.Topic < len(l.Topics) {
			r.Producers[i].Kind = l.Topics[p.Topic].Kind
		}
	}
	var allAcks []time.Time
	for _, s := range l.Sends {
		r.Sent++
		if s.Producer < 0 || s.Producer >= len(l.Producers) {
			continue
		}
		pr := &r.Producers[s.Producer]
		pr.Sent++
		if s.Err != "" {
			r.SendErrors++
			pr.SendErrors++
		}
		if s.Acked.IsZero() {
			continue
		}
		r.Acknowledged++
		pr.Acknowledged++
		if t := l.Producers[s.Producer].Topic; t >= 0 && t < len(acked) && l.current(s.Producer) {
			acked[t][s.Key] = s.Acked
		}
		perProducer[s.Producer] = append(perProducer[s.Producer], s.Acked)
		allAcks = append(allAcks, s.Acked)
	}
	sortTimes(allAcks)
	r.LongestGapMS = ms(longestGap(allAcks, l.Steady, l.Stop))
	for i, ts := range perProducer {
		sortTimes(ts)
		p := l.Producers[i]
		if p.Incarnation > 0 && p.Started.IsZero() {
			continue // never started: its topic's delete did not finish
		}
		from, to := l.Steady, l.Stop
		if p.Started.After(from) {
			from = p.Started
		}
		if !p.Stopped.IsZero() && p.Stopped.Before(to) {
			to = p.Stopped
		}
		began, gap := longestGapAt(ts, from, to)
		r.Producers[i].LongestGapMS, r.Producers[i].LongestGapAtMS = ms(gap), ms(began.Sub(l.Steady))
		if lim.MaxGapMS > 0 && r.Producers[i].LongestGapMS > lim.MaxGapMS {
			fail("producer %d (%s, %s): %d ms without an acknowledged send, over the limit of %d", i, r.Producers[i].Topic, orMulti(r.Producers[i].Region), r.Producers[i].LongestGapMS, lim.MaxGapMS)
		}
	}

	// Copies.
	var lostEx, dupEx, orderEx []string
	name := func(t int, region string, ks []Key) []string {
		var out []string
		for _, k := range ks {
			out = append(out, fmt.Sprintf("%s %s %s", topicName(t), region, k))
		}
		return out
	}
	for t, tp := range l.Topics {
		tr := TopicReport{Topic: tp.Name, Kind: tp.Kind, Partitions: tp.Partitions, Converged: true}
		parts := max(tp.Partitions, 1)
		var sets []map[Key]bool
		for _, region := range l.Regions {
			merged := &Scan{Region: region}
			reads, complete, done := 0, true, time.Time{}
			order := map[int]orderCheck{}
			var outOfOrder []Key
			for _, c := range l.Copies {
				if c.Topic != t || c.Scan == nil || c.Scan.Region != region {
					continue
				}
				reads++
				if c.Scan.Done.IsZero() {
					complete = false
				} else if c.Scan.Done.After(done) {
					done = c.Scan.Done
				}
				if merged.Started.IsZero() || c.Scan.Started.Before(merged.Started) {
					merged.Started = c.Scan.Started
				}
				oc := order[c.Partition]
				if oc == nil {
					oc = orderCheck{}
					order[c.Partition] = oc
				}
				seen := map[Key]bool{}
				for _, cp := range c.Scan.Copies {
					merged.Copies = append(merged.Copies, cp)
					first := !seen[cp.Key]
					seen[cp.Key] = true
					if first && !cp.Late && !oc.inOrder(cp.Key) {
						outOfOrder = append(outOfOrder, cp.Key)
					}
				}
				merged.Foreign += c.Scan.Foreign
			}
			if complete && reads == parts {
				merged.Done = done
			}
			cr := copyReport(merged, acked[t])
			// Every acknowledged message counts, whenever the read began.
			keys := map[Key]bool{}
			for _, cp := range merged.Copies {
				keys[cp.Key] = true
			}
			cr.Missing = 0
			var missing []Key
			for k := range acked[t] {
				if !keys[k] {
					cr.Missing++
					missing = append(missing, k)
				}
			}
			ccr := ChaosCopyReport{CopyReport: *cr, OrderViolations: len(outOfOrder)}
			tr.Copies = append(tr.Copies, ccr)
			r.Lost += cr.Missing
			r.DuplicatedCopy += cr.DuplicatedCopy
			r.OrderViolations += len(outOfOrder)
			r.Late += cr.Late
			r.Foreign += merged.Foreign
			lostEx = append(lostEx, name(t, region, missing)...)
			dupEx = append(dupEx, name(t, region, duplicatedKeys(merged.Copies))...)
			orderEx = append(orderEx, name(t, region, outOfOrder)...)
			if !cr.Complete {
				tr.Converged = false
			}
			sets = append(sets, keys)
		}
		for _, s := range sets[1:] {
			if len(s) != len(sets[0]) || !containsAll(s, sets[0]) {
				tr.Converged = false
			}
		}
		if !tr.Converged {
			r.NotConverged = append(r.NotConverged, tp.Name)
		}
		r.Topics = append(r.Topics, tr)
	}

	// Deliveries.
	r.Consumers = make([]ConsumerReport, len(l.Consumers))
	for i, c := range l.Consumers {
		r.Consumers[i] = ConsumerReport{ID: i, Topic: topicName(c.Topic), Region: c.Region, Incarnation: c.Incarnation}
	}
	type stream struct{ consumer, partition int }
	delivered := map[int]map[Key]bool{}
	order := map[stream]orderCheck{}
	for _, d := range l.Deliveries {
		if d.Consumer < 0 || d.Consumer >= len(l.Consumers) {
			continue
		}
		cr := &r.Consumers[d.Consumer]
		cr.Deliveries++
		if delivered[d.Consumer] == nil {
			delivered[d.Consumer] = map[Key]bool{}
		}
		if delivered[d.Consumer][d.Key] {
			continue
		}
		delivered[d.Consumer][d.Key] = true
		cr.Distinct++
		if d.Late {
			continue
		}
		st := stream{d.Consumer, d.Partition}
		if order[st] == nil {
			order[st] = orderCheck{}
		}
		if !order[st].inOrder(d.Key) {
			cr.OrderViolations++
			r.DeliveryOrderViolations++
		}
	}
	r.Foreign += l.Foreign
	r.ClientErrors = ClientErrors{Send: r.SendErrors, Receive: l.ReceiveErrors, Ack: l.AckErrors,
		ProducersClosed: l.ProducersClosed, ConsumersClosed: l.ConsumersClosed}
	resurrected := checkDeletes(l, &r, topicName)
	r.Resurrected = len(resurrected)
	r.Examples = ChaosExamples{Lost: firstStrings(lostEx), DuplicatedCopy: firstStrings(dupEx), OrderViolations: firstStrings(orderEx),
		Resurrected: firstStrings(resurrected)}

	if r.Lost > 0 {
		fail("%d acknowledged messages missing from a region's copy (e.g. %v)", r.Lost, r.Examples.Lost)
	}
	if r.DuplicatedCopy > 0 {
		fail("%d messages stored more than once in a copy (e.g. %v)", r.DuplicatedCopy, r.Examples.DuplicatedCopy)
	}
	if r.OrderViolations > 0 {
		fail("%d messages stored out of their producer's order (e.g. %v)", r.OrderViolations, r.Examples.OrderViolations)
	}
	if r.DeliveryOrderViolations > 0 {
		fail("%d messages first delivered out of their producer's order", r.DeliveryOrderViolations)
	}
	if r.Resurrected > 0 {
		fail("%d messages of a deleted incarnation seen after its delete finished (e.g. %v)", r.Resurrected, r.Examples.Resurrected)
	}
	for _, d := range r.Deletes {
		for _, u := range d.Unexpected {
			fail("delete of %s (incarnation %d, planned %d ms through %s): %s", d.Topic, d.Incarnation, d.PlannedMS, d.Region, u)
		}
	}
	if len(r.NotConverged) > 0 {
		fail("regions' copies differ or were not read completely: %v", r.NotConverged)
	}
	if len(l.Sends) == 0 || r.Acknowledged == 0 {
		fail("no send was acknowledged")
	}
	r.Passed = len(r.Failures) == 0
	return r
}

// duplicatedKeys are the keys found more than once in cs.
func duplicatedKeys(cs []Copy) []Key {
	seen := map[Key]bool{}
	var out []Key
	for _, c := range cs {
		if seen[c.Key] {
			out = append(out, c.Key)
		}
		seen[c.Key] = true
	}
	slices.SortFunc(out, compareKeys)
	return slices.Compact(out)
}

func compareKeys(a, b Key) int {
	if a.Producer != b.Producer {
		return a.Producer - b.Producer
	}
	return int(min(max(a.Seq-b.Seq, -1), 1))
}

func containsAll(s, of map[Key]bool) bool {
	for k := range of {
		if !s[k] {
			return false
		}
	}
	return true
}

// firstStrings sorts ss and keeps the first maxExamples.
func firstStrings(ss []string) []string {
	slices.Sort(ss)
	return append([]string{}, ss[:min(len(ss), maxExamples)]...)
}

func orMulti(region string) string {
	if region == "" {
		return "every region"
	}
	return region
}
