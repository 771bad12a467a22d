package drill

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes r for people: the verdict and seed, the schedule as
// taken, every copy, then the measures and failures.
func (r *ChaosReport) WriteTable(w io.Writer) error {
	verdict := "PASSED"
	if !r.Passed {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "drill chaos %s: seed %d, regions %s, %d ms of faults, %d msg/s per producer: %s\n\n",
		r.RunID, r.Seed, strings.Join(r.Regions, ","), r.DurationMS, r.Rate, verdict)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "schedule\tplanned\ttaken\ttook")
	for _, s := range r.Schedule {
		what := fmt.Sprintf("%s %s", s.Action, s.Region)
		if s.To != "" {
			what += " -> " + s.To
		}
		taken, took := "-", "-"
		if s.TakenMS != nil {
			taken = fmt.Sprintf("%+d ms", *s.TakenMS)
		}
		if s.TookMS != nil {
			took = fmt.Sprintf("%d ms", *s.TookMS)
		}
		if s.Error != "" {
			took += " ERROR " + s.Error
		}
		fmt.Fprintf(tw, "  %s\t%+d ms\t%s\t%s\n", what, s.PlannedMS, taken, took)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "copy\tkind\tregion\tmessages\tdistinct\tmissing\tstored twice\tout of order\tlate\tconverged")
	for _, t := range r.Topics {
		for _, c := range t.Copies {
			state := "yes"
			if !t.Converged {
				state = "no"
			}
			if !c.Complete {
				state += " (read incomplete)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", t.Topic, t.Kind, c.Region, c.Messages, c.Distinct, c.Missing, c.DuplicatedCopy, c.OrderViolations, c.Late, state)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Deletes) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "delete\tthrough\tplanned\ttaken\tfirst answer\t503s\tcreates refused\tfinished after\tcreated again after")
		for _, d := range r.Deletes {
			taken, done, created := "-", "-", "-"
			if d.TakenMS != nil {
				taken = fmt.Sprintf("%+d ms", *d.TakenMS)
			}
			if d.CompletedMS != nil {
				done = fmt.Sprintf("%d ms", *d.CompletedMS)
			}
			if d.RecreatedMS != nil {
				created = fmt.Sprintf("%d ms", *d.RecreatedMS)
			}
			fmt.Fprintf(tw, "  %s #%d\t%s\t%+d ms\t%s\t%d\t%d\t%d\t%s\t%s\n", d.Topic, d.Incarnation, d.Region, d.PlannedMS, taken, d.FirstStatus, d.Unavailable, d.BeingDeleted, done, created)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "measure\tvalue")
	fmt.Fprintf(tw, "  sent / acknowledged / send errors\t%d / %d / %d\n", r.Sent, r.Acknowledged, r.SendErrors)
	fmt.Fprintf(tw, "  longest gap without an acknowledged send\t%d ms (all producers together)\n", r.LongestGapMS)
	for _, p := range r.Producers {
		inc := ""
		if p.Incarnation > 0 {
			inc = fmt.Sprintf(", incarnation %d", p.Incarnation)
		}
		fmt.Fprintf(tw, "    producer %d (%s, %s%s)\t%d ms from %+d ms; %d sent, %d acknowledged, %d send errors\n",
			p.ID, p.Kind, orMulti(p.Region), inc, p.LongestGapMS, p.LongestGapAtMS, p.Sent, p.Acknowledged, p.SendErrors)
	}
	fmt.Fprintf(tw, "  lost / stored twice / out of order\t%d / %d / %d\n", r.Lost, r.DuplicatedCopy, r.OrderViolations)
	fmt.Fprintf(tw, "  first delivered out of order\t%d\n", r.DeliveryOrderViolations)
	fmt.Fprintf(tw, "  late (counted apart)\t%d\n", r.Late)
	if len(r.Deletes) > 0 {
		fmt.Fprintf(tw, "  deletes finished / first answered 503 / longest\t%d of %d / %d / %d ms\n", r.DeletesCompleted, len(r.Deletes), r.DeletesFirst503, r.LongestDeleteMS)
		fmt.Fprintf(tw, "  resurrected (deleted messages seen after)\t%d\n", r.Resurrected)
	}
	ce := r.ClientErrors
	fmt.Fprintf(tw, "  client errors\tsend %d, receive %d, ack %d, producers closed %d, consumers closed %d\n",
		ce.Send, ce.Receive, ce.Ack, ce.ProducersClosed, ce.ConsumersClosed)
	for _, f := range r.Failures {
		fmt.Fprintf(tw, "  failure\t%s\n", strings.ReplaceAll(f, "\t", " "))
	}
	fmt.Fprintf(tw, "  replay\t--seed %d --duration %dms against the same regions\n", r.Seed, r.DurationMS)
	return tw.Flush()
}
