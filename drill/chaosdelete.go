package drill

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Deletes and re-creates of a chaos drill (docs/drills.md, "Deletes and
// re-creates"): a Delete step deletes the delete topic through a
// region's admin API while the schedule goes on, retries until the
// delete has finished in every region, creates the topic again and
// starts its next incarnation's clients. An incarnation's producers and
// consumers are clients of their own (ChaosClient.Incarnation), so a
// message's producer tells which incarnation it was published to.

// DeleteAttempt is one admin request of a delete step: the delete
// (DELETE ...?force=true) or a create of the topic (PUT).
type DeleteAttempt struct {
	// Op is "delete" or "create".
	Op     string    `json:"op"`
	Region string    `json:"region"`
	Asked  time.Time `json:"asked"`
	Done   time.Time `json:"done"`
	// Status is the HTTP status; 0 when no answer came.
	Status int `json:"status"`
	// Body is the answer's text, or the error when none came.
	Body string `json:"body,omitempty"`
}

// The ops of DeleteAttempt.
const (
	opDelete = "delete"
	opCreate = "create"
)

// DeleteRecord is one delete step as the driver took it.
type DeleteRecord struct {
	Step
	// Topic is the topic deleted (an index into ChaosLog.Topics), and
	// Incarnation the incarnation deleted: its clients were stopped
	// before the first request.
	Topic       int
	Incarnation int
	Attempts    []DeleteAttempt
	// Completed is when the driver learnt that the delete had finished
	// in every region: the answer of the delete that said 204, of a
	// retried delete that said 404 (finished meanwhile), or of a create
	// that succeeded after a 503. Zero: never.
	Completed time.Time
	// Created is when the topic's create succeeded, Started when the
	// next incarnation's clients were all attached; zero: not.
	Created, Started time.Time
	// Err is why the driver gave up.
	Err string
}

// DeleteReport is one delete step in the report: what was planned, when
// the first request went (from the end of the warm-up), how long it took
// until the delete was finished everywhere and until the topic was
// created again (from the first request), how it went, and anything
// the checks did not expect.
type DeleteReport struct {
	Topic       string `json:"topic"`
	Incarnation int    `json:"incarnation"`
	Region      string `json:"region"`
	PlannedMS   int64  `json:"planned_ms"`
	TakenMS     *int64 `json:"taken_ms"`
	CompletedMS *int64 `json:"completed_ms"`
	RecreatedMS *int64 `json:"recreated_ms"`
	// FirstStatus is the first delete's answer (0: none came).
	FirstStatus int `json:"first_status"`
	// Unavailable counts the deletes answered 503 (regions pending),
	// BeingDeleted the creates refused with 409 while it was under way.
	Unavailable  int             `json:"unavailable"`
	BeingDeleted int             `json:"being_deleted"`
	Attempts     []DeleteAttempt `json:"attempts"`
	Unexpected   []string        `json:"unexpected"`
}

// deleteRecoveryGrace is how long after a fault was undone a region may
// still be named pending by a delete, or fail to answer one: a killed
// region starts its brokers, and a healed one catches up with the global
// store, before it applies the delete.
const deleteRecoveryGrace = 15 * time.Second

// incarnation is topic t's current incarnation: how many of its deletes
// finished.
func (l *ChaosLog) incarnation(t int) int {
	n := 0
	for _, d := range l.Deletes {
		if d.Topic == t && !d.Completed.IsZero() {
			n++
		}
	}
	return n
}

// current reports whether producer p works on its topic's current
// incarnation: whether what it had acknowledged must be in the copies.
func (l *ChaosLog) current(p int) bool {
	c := l.Producers[p]
	return c.Incarnation == l.incarnation(c.Topic)
}

// span is a time a region was faulted, from the fault asked for to
// deleteRecoveryGrace after it was undone (forever when it was not).
type span struct{ from, to time.Time }

// faultSpans are the regions' faulted spans, from the steps as taken.
func faultSpans(steps []StepRecord) map[string][]span {
	out := map[string][]span{}
	open := map[string]time.Time{}
	for _, s := range steps {
		switch {
		case s.Action.IsFault() && !s.Asked.IsZero():
			open[s.Region] = s.Asked
		case s.Action == Start || s.Action == Heal:
			from, ok := open[s.Region]
			if !ok {
				continue
			}
			delete(open, s.Region)
			to := s.Done
			if to.IsZero() || s.Err != "" {
				to = time.Unix(1<<40, 0)
			}
			out[s.Region] = append(out[s.Region], span{from, to.Add(deleteRecoveryGrace)})
		}
	}
	for r, from := range open {
		out[r] = append(out[r], span{from, time.Unix(1<<40, 0)})
	}
	return out
}

// faultedDuring reports whether region was faulted at some time of
// [from, to].
func faultedDuring(spans map[string][]span, region string, from, to time.Time) bool {
	return slices.ContainsFunc(spans[region], func(s span) bool { return !s.from.After(to) && !from.After(s.to) })
}

// pendingRE finds the regions a 503 of a delete names as pending
// (broker/fedelete.go: "regions r1, r2 have not deleted their copies",
// "regions r1 did not answer").
var pendingRE = regexp.MustCompile(`regions ([^ ,]+(?:, [^ ,]+)*) (?:have not|did not)`)

// pendingRegions are the regions body names as pending: its
// "pendingRegions" field, or else (a broker without it) its reason's
// words; nil when it names none.
func pendingRegions(body string) []string {
	var eb struct {
		PendingRegions []string `json:"pendingRegions"`
	}
	if json.Unmarshal([]byte(body), &eb) == nil && len(eb.PendingRegions) > 0 {
		return eb.PendingRegions
	}
	m := pendingRE.FindStringSubmatch(body)
	if m == nil {
		return nil
	}
	return strings.Split(m[1], ", ")
}

// checkDelete judges one delete step's requests: a delete answers 204
// (finished everywhere), or 503 naming only regions a fault touched
// during it, or, retried after a 503, 404 (finished meanwhile); a create
// made before the delete finished is refused with 409 "being deleted"
// and one made after succeeds; a request to a faulted region may get no
// answer at all. Anything else, or a delete that never finished or a
// topic never created again, is unexpected.
func checkDelete(d DeleteRecord, spans map[string][]span, steady time.Time, topic string) DeleteReport {
	r := DeleteReport{Topic: topic, Incarnation: d.Incarnation, Region: d.Region, PlannedMS: ms(d.At), Attempts: d.Attempts, Unexpected: []string{}}
	bad := func(a DeleteAttempt, format string, args ...any) {
		r.Unexpected = append(r.Unexpected, fmt.Sprintf("%s through %s at %+d ms: %s", a.Op, a.Region, ms(a.Asked.Sub(steady)), fmt.Sprintf(format, args...)))
	}
	var first time.Time
	saw503 := false
	for i, a := range d.Attempts {
		if i == 0 {
			first = a.Asked
			taken := ms(a.Asked.Sub(steady))
			r.TakenMS = &taken
			r.FirstStatus = a.Status
		}
		faulted := func(region string) bool { return faultedDuring(spans, region, a.Asked, a.Done) }
		body := strings.TrimSpace(a.Body)
		switch {
		case a.Status == 0:
			if !faulted(a.Region) {
				bad(a, "no answer, and no fault touched %s: %s", a.Region, body)
			}
		case a.Op == opDelete && a.Status == http.StatusNoContent:
		case a.Op == opDelete && a.Status == http.StatusServiceUnavailable:
			saw503 = true
			r.Unavailable++
			pending := pendingRegions(body)
			if len(pending) == 0 && !faulted(a.Region) {
				bad(a, "503 naming no pending region, and no fault touched %s: %s", a.Region, body)
			}
			for _, p := range pending {
				if !faulted(p) {
					bad(a, "503 naming %s pending, which no fault touched: %s", p, body)
				}
			}
		case a.Op == opDelete && a.Status == http.StatusNotFound && saw503:
		case a.Op == opCreate && a.Status == http.StatusConflict && strings.Contains(body, "being deleted") &&
			(d.Completed.IsZero() || a.Asked.Before(d.Completed)):
			r.BeingDeleted++
		case a.Op == opCreate && a.Status/100 == 2:
		default:
			bad(a, "%d %s", a.Status, body)
		}
	}
	if !d.Completed.IsZero() && !first.IsZero() {
		c := ms(d.Completed.Sub(first))
		r.CompletedMS = &c
	}
	if !d.Created.IsZero() && !first.IsZero() {
		c := ms(d.Created.Sub(first))
		r.RecreatedMS = &c
	}
	switch {
	case d.Err != "":
		r.Unexpected = append(r.Unexpected, d.Err)
	case len(d.Attempts) == 0:
		r.Unexpected = append(r.Unexpected, "no request was made")
	case d.Completed.IsZero():
		r.Unexpected = append(r.Unexpected, "the delete never finished in every region")
	case d.Created.IsZero():
		r.Unexpected = append(r.Unexpected, "the topic was never created again")
	}
	return r
}

// checkDeletes judges every delete step into r and counts resurrections:
// a message of a deleted incarnation delivered after its delete
// finished, or to a consumer of a later incarnation, or found in a
// region's final copy of its topic.
func checkDeletes(l *ChaosLog, r *ChaosReport, topicName func(int) string) (resurrected []string) {
	spans := faultSpans(l.Steps)
	r.Deletes = []DeleteReport{}
	for _, d := range l.Deletes {
		dr := checkDelete(d, spans, l.Steady, topicName(d.Topic))
		r.Deletes = append(r.Deletes, dr)
		if dr.CompletedMS != nil {
			r.DeletesCompleted++
			r.LongestDeleteMS = max(r.LongestDeleteMS, *dr.CompletedMS)
		}
		if dr.FirstStatus == http.StatusServiceUnavailable {
			r.DeletesFirst503++
		}
	}
	producer := func(k Key) (ChaosClient, bool) {
		if k.Producer < 0 || k.Producer >= len(l.Producers) {
			return ChaosClient{}, false
		}
		return l.Producers[k.Producer], true
	}
	for _, dv := range l.Deliveries {
		p, ok := producer(dv.Key)
		if !ok || dv.Consumer < 0 || dv.Consumer >= len(l.Consumers) {
			continue
		}
		c := l.Consumers[dv.Consumer]
		for _, d := range l.Deletes {
			if d.Topic != p.Topic || d.Completed.IsZero() || p.Incarnation > d.Incarnation {
				continue
			}
			if c.Incarnation > d.Incarnation || dv.At.After(d.Completed) {
				resurrected = append(resurrected, fmt.Sprintf("%s consumer %d %s", topicName(p.Topic), dv.Consumer, dv.Key))
				break
			}
		}
	}
	for _, c := range l.Copies {
		if c.Scan == nil {
			continue
		}
		inc := l.incarnation(c.Topic)
		for _, cp := range c.Scan.Copies {
			if p, ok := producer(cp.Key); ok && p.Topic == c.Topic && p.Incarnation < inc {
				resurrected = append(resurrected, fmt.Sprintf("%s %s %s", topicName(c.Topic), c.Scan.Region, cp.Key))
			}
		}
	}
	return resurrected
}
