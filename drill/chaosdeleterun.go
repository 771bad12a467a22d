package drill

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// deleteRetryEvery is the pause between a delete step's requests.
const deleteRetryEvery = time.Second

// maxOddAnswers is how many answers that are neither done nor pending
// (nor no answer at all) a delete step takes before it gives up.
const maxOddAnswers = 5

// deleteRequestTimeout bounds one admin request of a delete step (a
// delete waits up to 10 s for the other regions).
const deleteRequestTimeout = 30 * time.Second

// runDeletes takes the schedule's delete steps, one after the other, each
// no earlier than planned: the workload's own goroutine, beside the
// faults. After a delete step that did not finish it stops (the next
// one would find the topic in the same state). It returns the steps as
// taken; their records go to d.l.Deletes.
func (d *chaosDriver) runDeletes(ctx context.Context) []StepRecord {
	var out []StepRecord
	for _, st := range d.sched.Steps {
		if st.Action != Delete {
			continue
		}
		if err := pause(ctx, time.Until(d.l.Steady.Add(st.At))); err != nil {
			return out
		}
		rec := d.deleteAndRecreate(ctx, st, len(d.l.Deletes))
		d.l.Deletes = append(d.l.Deletes, rec)
		sr := StepRecord{Step: st, Done: rec.Started}
		if len(rec.Attempts) > 0 {
			sr.Asked = rec.Attempts[0].Asked
		}
		if sr.Done.IsZero() {
			sr.Done = time.Now()
		}
		out = append(out, sr)
		if rec.Started.IsZero() {
			d.log.Warn("chaos: delete step did not finish; no more deletes", "err", rec.Err)
			return out
		}
		d.log.Info("chaos: step", "action", Delete, "region", st.Region, "incarnation", rec.Incarnation,
			"requests", len(rec.Attempts), "completed_after", rec.Completed.Sub(sr.Asked).Round(time.Millisecond),
			"restarted_after", rec.Started.Sub(sr.Asked).Round(time.Millisecond))
	}
	return out
}

// deleteAndRecreate takes delete step st on incarnation inc of the delete
// topic: it stops that incarnation's clients, deletes the topic (force)
// through st.Region, or another region when a fault holds it, until the
// delete has finished everywhere (after each 503 trying a create, which
// must be refused while the delete is under way), creates the topic
// again and starts the next incarnation's clients. It gives up
// healTimeout after the schedule's end.
func (d *chaosDriver) deleteAndRecreate(ctx context.Context, st Step, inc int) DeleteRecord {
	rec := DeleteRecord{Step: st, Topic: d.delTopic, Incarnation: inc}
	topic := d.l.Topics[d.delTopic].Name
	path := "/admin/v2/" + strings.Replace(topic, "://", "/", 1)
	deadline := d.l.Steady.Add(d.cfg.Duration + healTimeout)

	// The incarnation's clients stop sending and receiving now, before
	// the delete, and close in the background, each apart (slowly while
	// its region is down): nothing of it is sent or delivered after.
	d.mu.Lock()
	old := d.incWorks[inc]
	delete(d.incWorks, inc)
	d.works = deleteWorks(d.works, old)
	d.mu.Unlock()
	for _, w := range old {
		w.halt()
	}
	stopped := time.Now()
	d.setIncarnationTimes(inc, func(c *ChaosClient) { c.Stopped = stopped })
	for _, w := range old {
		d.closing.Add(1)
		go func() {
			defer d.closing.Done()
			w.close()
		}()
	}

	giveUp := func(what string) bool {
		if ctx.Err() == nil && time.Now().Before(deadline) {
			return pause(ctx, deleteRetryEvery) != nil
		}
		last := rec.Attempts[len(rec.Attempts)-1]
		rec.Err = fmt.Sprintf("gave up %s after %d requests; the last, %s through %s, answered %d %s", what, len(rec.Attempts), last.Op, last.Region, last.Status, last.Body)
		return true
	}
	through, saw503, odd := st.Region, false, 0
	for rec.Completed.IsZero() {
		region := d.reachable(through)
		a := d.adminRequest(ctx, opDelete, region, http.MethodDelete, path+"?force=true")
		rec.Attempts = append(rec.Attempts, a)
		switch {
		case a.Status == http.StatusNoContent || a.Status == http.StatusNotFound && saw503:
			rec.Completed, through = a.Done, region
			continue
		case a.Status == http.StatusServiceUnavailable:
			saw503 = true
			c := d.adminRequest(ctx, opCreate, region, http.MethodPut, path)
			rec.Attempts = append(rec.Attempts, c)
			if c.Status/100 == 2 {
				rec.Completed, rec.Created, through = c.Done, c.Done, region
				continue
			}
		case a.Status != 0:
			// Neither done nor held up by a region: the checks fail it;
			// a few tries, not healTimeout's worth.
			if odd++; odd >= maxOddAnswers {
				rec.Err = fmt.Sprintf("gave up deleting after %d answers that were neither 204 nor 503", odd)
				return rec
			}
		}
		if giveUp("deleting") {
			return rec
		}
	}
	for rec.Created.IsZero() {
		region := d.reachable(through)
		c := d.adminRequest(ctx, opCreate, region, http.MethodPut, path)
		rec.Attempts = append(rec.Attempts, c)
		if c.Status/100 == 2 {
			rec.Created = c.Done
			break
		}
		if giveUp("creating") {
			return rec
		}
	}
	if err := d.startIncarnation(ctx, inc+1); err != nil {
		rec.Err = fmt.Sprintf("start incarnation %d: %v", inc+1, err)
		return rec
	}
	rec.Started = time.Now()
	d.setIncarnationTimes(inc+1, func(c *ChaosClient) { c.Started = rec.Started })
	return rec
}

// setIncarnationTimes applies set to the delete topic's producers of
// incarnation inc.
func (d *chaosDriver) setIncarnationTimes(inc int, set func(*ChaosClient)) {
	for i := range d.l.Producers {
		if p := &d.l.Producers[i]; p.Topic == d.delTopic && p.Incarnation == inc {
			set(p)
		}
	}
	for i := range d.l.Consumers {
		if c := &d.l.Consumers[i]; c.Topic == d.delTopic && c.Incarnation == inc {
			set(c)
		}
	}
}

// deleteWorks is ws without those of gone.
func deleteWorks(ws, gone []*workload) []*workload {
	out := ws[:0:0]
	for _, w := range ws {
		keep := true
		for _, g := range gone {
			keep = keep && w != g
		}
		if keep {
			out = append(out, w)
		}
	}
	return out
}

// reachable is region when no fault holds it, or else the first region
// that none does.
func (d *chaosDriver) reachable(region string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.faulted[region]; !ok {
		return region
	}
	for _, r := range d.l.Regions {
		if _, ok := d.faulted[r]; !ok {
			return r
		}
	}
	return region
}

// adminRequest makes one admin request of a delete step to region and
// records it.
func (d *chaosDriver) adminRequest(ctx context.Context, op, region, method, path string) DeleteAttempt {
	a := DeleteAttempt{Op: op, Region: region, Asked: time.Now()}
	base := ""
	for _, r := range d.cfg.Endpoints.Regions {
		if r.Name == region {
			base = strings.TrimRight(r.webURL(), "/")
		}
	}
	rctx, cancel := context.WithTimeout(ctx, deleteRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, base+path, nil)
	if err != nil {
		a.Body = err.Error()
		a.Done = time.Now()
		return a
	}
	hc := d.cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		a.Body = err.Error()
		a.Done = time.Now()
		return a
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	a.Status, a.Body, a.Done = resp.StatusCode, strings.TrimSpace(string(b)), time.Now()
	d.log.Info("chaos: delete step request", "op", op, "region", region, "status", a.Status, "took", a.Done.Sub(a.Asked).Round(time.Millisecond), "body", a.Body)
	return a
}
