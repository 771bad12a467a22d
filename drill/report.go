package drill

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a drill's result, as `--json` writes it (docs/drills.md
// defines every field). Durations are whole milliseconds.
type Report struct {
	Drill     string `json:"drill"`
	RunID     string `json:"run_id"`
	Namespace string `json:"namespace"`
	Topic     string `json:"topic"`
	From      string `json:"from"`
	To        string `json:"to"`
	Fault     Fault  `json:"fault"`
	// Promotion is "drill" (set-primary by the drill) or "automatic".
	Promotion  string    `json:"promotion"`
	Rate       int       `json:"rate"`
	Producers  int       `json:"producers"`
	Consumers  int       `json:"consumers"`
	DurationMS int64     `json:"duration_ms"`
	Started    time.Time `json:"started"`

	Timeline Timeline `json:"timeline"`
	// Budget breaks the failover down (null when it did not complete).
	Budget *Budget `json:"rto_budget_ms"`
	// SyncRegions is the namespace's synchronous replication during the
	// run (0: asynchronous).
	SyncRegions int `json:"sync_regions"`

	RTOPublishMS Spread `json:"rto_publish_ms"`
	RTOConsumeMS Spread `json:"rto_consume_ms"`
	// RPOMessages and RPOMS are null when the new primary could not be
	// read before the heal.
	RPOMessages *int   `json:"rpo_messages"`
	RPOMS       *int64 `json:"rpo_ms"`

	Sent                 int `json:"sent"`
	Acknowledged         int `json:"acknowledged"`
	Delivered            int `json:"delivered"`
	Lost                 int `json:"lost"`
	Late                 int `json:"late"`
	DuplicatedRedelivery int `json:"duplicated_redelivery"`
	// InFlightAtCut and RedeliveryBound: see Analyze.
	InFlightAtCut   int `json:"in_flight_at_cut"`
	RedeliveryBound int `json:"redelivery_bound"`
	DuplicatedCopy  int `json:"duplicated_copy"`
	OrderViolations int `json:"order_violations"`
	Foreign         int `json:"foreign"`

	// Examples name a few of the messages behind the counts, for
	// looking into them.
	Examples Examples `json:"examples"`

	Survivor     *CopyReport  `json:"survivor"`
	ClientErrors ClientErrors `json:"client_errors"`
	Failback     *Failback    `json:"failback,omitempty"`

	Limits   Limits   `json:"limits"`
	Passed   bool     `json:"passed"`
	Failures []string `json:"failures"`
}

// Examples are up to maxExamples messages of each kind, named
// "p<producer>:<seq>", lowest first.
type Examples struct {
	Lost            []string `json:"lost"`
	DuplicatedCopy  []string `json:"duplicated_copy"`
	OrderViolations []string `json:"order_violations"`
}

// maxExamples bounds each list of Examples.
const maxExamples = 10

// String names k as Examples do.
func (k Key) String() string { return fmt.Sprintf("p%d:%d", k.Producer, k.Seq) }

// Point is a moment of the drill: when, its offset from the fault, and
// for some points how it came about.
type Point struct {
	At       time.Time `json:"at"`
	OffsetMS int64     `json:"offset_ms"`
	How      string    `json:"how,omitempty"`
}

// Timeline holds the drill's moments; a moment that did not happen is
// null.
type Timeline struct {
	Fault           *Point `json:"fault"`
	Detected        *Point `json:"detected"`
	Fenced          *Point `json:"fenced"`
	Promoted        *Point `json:"promoted"`
	Writable        *Point `json:"writable"`
	FirstPublishOK  *Point `json:"first_publish_ok"`
	FirstDeliveryOK *Point `json:"first_delivery_ok"`
	Healed          *Point `json:"healed"`
}

// Budget is where a failover's seconds went, in milliseconds: from the
// fault to the promotion (detecting the fault and deciding: the drill's
// own detection and set-primary, or the federation's automatic failover:
// the primary's presence ending and the delay), from the promotion to the
// new primary writing (the old primary's fences ending and the new one's
// taken: Timeline.Writable), and from then to the workload's first
// publish through it (the redirect and the client's reconnection
// backoff). Slowest is how much longer the slowest producer took than
// the first (rto_publish_ms.max less the first one's gap).
type Budget struct {
	Promotion int64 `json:"promotion"`
	Fence     int64 `json:"fence"`
	Client    int64 `json:"client"`
	Slowest   int64 `json:"slowest"`
}

// Spread is, over clients, the longest gap between successes each one
// had: the worst and the 99th percentile (nearest rank).
type Spread struct {
	Max     int64 `json:"max"`
	P99     int64 `json:"p99"`
	Clients int   `json:"clients"`
}

// CopyReport is what a scan of a region's copy of the topic found.
type CopyReport struct {
	Region   string `json:"region"`
	Complete bool   `json:"complete"`
	// Messages counts this run's messages in the copy, Distinct the
	// different ones, DuplicatedCopy the extra copies (Messages -
	// Distinct).
	Messages       int `json:"messages"`
	Distinct       int `json:"distinct"`
	DuplicatedCopy int `json:"duplicated_copy"`
	// DuplicatedExamples names up to 10 of the messages found more than
	// once, as Examples does.
	DuplicatedExamples []string `json:"duplicated_examples,omitempty"`
	// Missing counts messages acknowledged before the scan started that
	// are not in the copy.
	Missing int `json:"missing"`
	// Late counts the distinct messages in the copy carrying
	// LateProperty.
	Late int `json:"late"`
}

// ClientErrors counts what the application's clients saw fail.
type ClientErrors struct {
	Send            int `json:"send"`
	Receive         int `json:"receive"`
	Ack             int `json:"ack"`
	ProducersClosed int `json:"producers_closed"`
	ConsumersClosed int `json:"consumers_closed"`
}

// Failback is the planned move back to the old primary and what the
// workload saw of it.
type Failback struct {
	Requested      *Point      `json:"requested"`
	FirstPublishOK *Point      `json:"first_publish_ok"`
	RTOPublishMS   Spread      `json:"rto_publish_ms"`
	RTOConsumeMS   Spread      `json:"rto_consume_ms"`
	SendErrors     int         `json:"send_errors"`
	Copy           *CopyReport `json:"copy"`
}

// Limits are what a drill must stay within to pass.
type Limits struct {
	MaxRTOMS int64 `json:"max_rto_ms"`
	MaxLost  int   `json:"max_lost"`
}

// WriteTable writes r for people: the timeline, then the measures.
func (r *Report) WriteTable(w io.Writer) error {
	verdict := "PASSED"
	if !r.Passed {
		verdict = "FAILED"
	}
	promo := "promoted by the drill"
	if r.Promotion == "automatic" {
		promo = "automatic failover"
	}
	fmt.Fprintf(w, "drill failover %s: %s %s -> %s, %s: %s\n", r.RunID, r.Fault, r.From, r.To, promo, verdict)
	repl := "asynchronous replication"
	if r.SyncRegions > 0 {
		repl = fmt.Sprintf("synchronous replication to %d region(s)", r.SyncRegions)
	}
	fmt.Fprintf(w, "topic %s, %d msg/s, %d producers, %d consumer, %s\n\n", r.Topic, r.Rate, r.Producers, r.Consumers, repl)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "timeline\tfrom fault\tat")
	points := []namedPoint{
		{"fault", r.Timeline.Fault}, {"detected", r.Timeline.Detected}, {"fenced", r.Timeline.Fenced},
		{"promoted", r.Timeline.Promoted}, {"new primary writable", r.Timeline.Writable}, {"first publish ok", r.Timeline.FirstPublishOK},
		{"first delivery ok", r.Timeline.FirstDeliveryOK}, {"healed", r.Timeline.Healed},
	}
	if r.Failback != nil {
		points = append(points, namedPoint{"fail-back requested", r.Failback.Requested},
			namedPoint{"fail-back publish ok", r.Failback.FirstPublishOK})
	}
	for _, pt := range points {
		if pt.p == nil {
			fmt.Fprintf(tw, "  %s\t-\t-\n", pt.name)
			continue
		}
		how := ""
		if pt.p.How != "" {
			how = " (" + pt.p.How + ")"
		}
		fmt.Fprintf(tw, "  %s\t%+d ms\t%s%s\n", pt.name, pt.p.OffsetMS, pt.p.At.Format("15:04:05.000"), how)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "measure\tvalue")
	fmt.Fprintf(tw, "  rto publish (max / p99)\t%d / %d ms (limit %d ms)\n", r.RTOPublishMS.Max, r.RTOPublishMS.P99, r.Limits.MaxRTOMS)
	fmt.Fprintf(tw, "  rto consume (max / p99)\t%d / %d ms\n", r.RTOConsumeMS.Max, r.RTOConsumeMS.P99)
	if b := r.Budget; b != nil {
		fmt.Fprintf(tw, "  rto budget\tpromotion %d + fence %d + client %d ms (slowest producer %d ms more)\n", b.Promotion, b.Fence, b.Client, b.Slowest)
	} else {
		fmt.Fprintf(tw, "  rto budget\tnot measured\n")
	}
	if r.RPOMessages != nil && r.RPOMS != nil {
		fmt.Fprintf(tw, "  rpo\t%d messages, %d ms\n", *r.RPOMessages, *r.RPOMS)
	} else {
		fmt.Fprintf(tw, "  rpo\tnot measured\n")
	}
	fmt.Fprintf(tw, "  sent / acknowledged / delivered\t%d / %d / %d\n", r.Sent, r.Acknowledged, r.Delivered)
	fmt.Fprintf(tw, "  lost\t%d (limit %d)\n", r.Lost, r.Limits.MaxLost)
	fmt.Fprintf(tw, "  late\t%d\n", r.Late)
	fmt.Fprintf(tw, "  duplicated (redelivery / copy)\t%d / %d\n", r.DuplicatedRedelivery, r.DuplicatedCopy)
	fmt.Fprintf(tw, "  in flight / bound\t%d / %d\n", r.InFlightAtCut, r.RedeliveryBound)
	fmt.Fprintf(tw, "  order violations\t%d\n", r.OrderViolations)
	ce := r.ClientErrors
	fmt.Fprintf(tw, "  client errors\tsend %d, receive %d, ack %d, producers closed %d, consumers closed %d\n",
		ce.Send, ce.Receive, ce.Ack, ce.ProducersClosed, ce.ConsumersClosed)
	for _, c := range []*CopyReport{r.Survivor, r.failbackCopy()} {
		if c == nil {
			continue
		}
		state := ""
		if !c.Complete {
			state = ", incomplete"
		}
		fmt.Fprintf(tw, "  copy in %s\t%d messages, %d distinct, %d missing, %d late%s\n", c.Region, c.Messages, c.Distinct, c.Missing, c.Late, state)
	}
	if fb := r.Failback; fb != nil {
		fmt.Fprintf(tw, "  fail-back rto publish (max / p99)\t%d / %d ms\n", fb.RTOPublishMS.Max, fb.RTOPublishMS.P99)
		fmt.Fprintf(tw, "  fail-back rto consume (max / p99)\t%d / %d ms\n", fb.RTOConsumeMS.Max, fb.RTOConsumeMS.P99)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(tw, "  failure\t%s\n", strings.ReplaceAll(f, "\t", " "))
	}
	return tw.Flush()
}

type namedPoint struct {
	name string
	p    *Point
}

func (r *Report) failbackCopy() *CopyReport {
	if r.Failback == nil {
		return nil
	}
	return r.Failback.Copy
}
