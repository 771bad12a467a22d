package drill

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Bounds of the phases (docs/drills.md, "Phases").
const (
	// warmup is how long the workload runs steadily before the fault, so
	// that replication streams and the consumer is caught up.
	warmup = 2 * time.Second
	// startTimeout bounds the setup and the workload's first successes.
	startTimeout = time.Minute
	// failoverTimeout bounds, after the fault (plus any automatic
	// failover delay), the detection, the promotion and the first
	// publish through the new primary.
	failoverTimeout = 2 * time.Minute
	// healTimeout bounds the heal and the old primary's readiness after it.
	healTimeout = 2 * time.Minute
	// failbackHold is how long the workload runs after the fail-back
	// before it stops.
	failbackHold = 3 * time.Second
	// drainQuiet ends the drain, or the wait for a region's copy to be
	// complete, when it has not progressed for that long; drainTimeout
	// ends the drain anyway.
	drainQuiet   = 20 * time.Second
	drainTimeout = 2 * time.Minute
	// scanTimeout bounds each read of a region's copy; rescanEvery is
	// the pause between reads of a copy still missing messages.
	scanTimeout = 2 * time.Minute
	rescanEvery = time.Second
	// pollEvery is how often a condition is checked while awaited.
	pollEvery = 20 * time.Millisecond
)

// Run runs the drill cfg describes and returns its report. A drill that
// ran but did not pass returns its report (Passed false) and no error; an
// error means it could not run (a bad Config, the setup or the workload
// failing, ctx ending). Once the fault is injected, Run always undoes it
// before returning, even when ctx has ended.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RunID == "" {
		c.RunID = fmt.Sprintf("%s-%04x", time.Now().UTC().Format("20060102-150405"), rand.IntN(1<<16))
	}
	from, _ := c.Endpoints.Region(c.From)
	to, _ := c.Endpoints.Region(c.To)
	d := &driver{
		cfg:   c,
		log:   c.Logger.With("run", c.RunID),
		from:  from,
		to:    to,
		tel:   newTelemetry(c.MeterProvider, c.TracerProvider),
		ctl:   restClient(c.Endpoints.ControlURL, c.HTTPClient),
		fromA: restClient(from.webURL(), c.HTTPClient),
		toA:   restClient(to.webURL(), c.HTTPClient),
		topic: c.Topic,
	}
	if d.topic == "" {
		d.topic = "drill-" + c.RunID
	}
	if !strings.Contains(d.topic, "://") {
		d.topic = "persistent://" + c.Namespace + "/" + d.topic
	}
	return d.run(ctx)
}

// driver is one run of Run: it does the I/O and fills l.
type driver struct {
	cfg              Config
	log              *slog.Logger
	from, to         RegionEndpoint
	tel              *telemetry
	ctl, fromA, toA  *rest.Client
	topic            string
	l                Log
	rec              *recorder
	faulted, healed  bool
	watchStop        context.CancelFunc
	watchWG          sync.WaitGroup
	promotionByDrill bool
}

func (d *driver) run(ctx context.Context) (rep *Report, err error) {
	c := d.cfg
	ctx, span := d.tel.tracer.Start(ctx, "drill.failover", trace.WithAttributes(
		attribute.String("isobar.drill.run", c.RunID),
		attribute.String("pulsar.namespace", c.Namespace),
		attribute.String("isobar.fault", string(c.Fault)),
		attribute.String("isobar.source", c.From),
		attribute.String("isobar.dest", c.To),
	))
	defer span.End()
	started := time.Now()
	defer d.undoFault(ctx)

	if err := d.phase(ctx, "setup", d.setup); err != nil {
		return nil, err
	}
	d.rec = newRecorder(c.RunID, c.Producers)
	det := newDetector()
	d.rec.onSendError = func(at time.Time, err error) { det.report(at, "send error: "+err.Error()) }
	var w *workload
	if err := d.phase(ctx, "warmup", func(ctx context.Context) error {
		d.l.Start = time.Now()
		var err error
		w, err = startWorkload(ctx, c.Endpoints.MultiHostURL(), d.topic, d.rec, c.Producers, c.Rate, c.ClientLogger)
		if err != nil {
			return err
		}
		err = await(ctx, startTimeout, "every producer's first acknowledgement and the consumer's first delivery", func() bool {
			return d.rec.ackedSince(time.Time{}) && d.rec.deliveredSince(time.Time{})
		})
		if err != nil {
			return err
		}
		return pause(ctx, warmup)
	}); err != nil {
		if w != nil {
			w.close()
		}
		return nil, err
	}
	d.l.Steady = time.Now()
	d.log.Info("drill: workload steady", "topic", d.topic, "rate", c.Rate, "producers", c.Producers)

	wctx, stop := context.WithCancel(ctx)
	d.watchStop = stop
	d.watchWG.Add(1)
	go func() {
		defer d.watchWG.Done()
		det.watch(wctx, c.HTTPClient, c.From, d.from.webURL()+"/readyz", d.rec)
	}()
	defer d.stopWatch()

	// The fault, the failover, the heal. A phase that does not complete
	// fails the drill, which goes on to heal, drain and report.
	if err := d.phase(ctx, "fault", func(ctx context.Context) error {
		d.l.Fault = time.Now()
		det.arm(d.l.Fault)
		d.faulted = true // even a failed request may have reached the region
		return control(ctx, d.ctl, c.From, string(c.Fault))
	}); err != nil {
		w.close()
		return nil, err
	}
	d.log.Info("drill: fault injected", "fault", c.Fault, "region", c.From)
	d.step(ctx, "failover", func(ctx context.Context) error { return d.failover(ctx, det) })
	d.step(ctx, "hold", func(ctx context.Context) error { return pause(ctx, time.Until(d.l.Fault.Add(c.Duration))) })
	d.step(ctx, "scan-at-cut", func(ctx context.Context) error {
		start := time.Now()
		sc, err := d.scan(ctx, d.to, func(p Payload) bool { return p.Sent.After(start) })
		d.l.AtCut = sc
		return err
	})
	d.step(ctx, "heal", d.heal)
	d.stopWatch()
	d.l.Detected, d.l.DetectedBy = det.result()
	if ctx.Err() != nil {
		w.close()
		return nil, ctx.Err()
	}

	if c.FailBack {
		now := time.Now()
		d.step(ctx, "drain", func(ctx context.Context) error { return d.drain(ctx, now) })
		d.step(ctx, "scan", func(ctx context.Context) error {
			sc, err := d.scanComplete(ctx, d.to, now)
			d.l.Survivor = sc
			return err
		})
		d.step(ctx, "failback", d.failback)
	}
	d.step(ctx, "stop", func(ctx context.Context) error {
		d.l.Stop = time.Now()
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		return w.stopSending(sctx)
	})
	d.step(ctx, "drain", func(ctx context.Context) error { return d.drain(ctx, d.l.Stop) })
	final := d.to
	if c.FailBack {
		final = d.from
	}
	d.step(ctx, "scan", func(ctx context.Context) error {
		sc, err := d.scanComplete(ctx, final, d.l.Stop)
		if c.FailBack {
			d.l.FailbackCopy = sc
		} else {
			d.l.Survivor = sc
		}
		return err
	})
	w.close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	d.rec.fill(&d.l)
	d.l.Producers, d.l.Consumers = c.Producers, 1
	r := Analyze(&d.l, Limits{MaxRTOMS: c.MaxRTO.Milliseconds(), MaxLost: c.MaxLost})
	r.Drill, r.RunID, r.Namespace, r.Topic = "failover", c.RunID, c.Namespace, d.topic
	r.From, r.To, r.Fault, r.Rate = c.From, c.To, c.Fault, c.Rate
	r.SyncRegions = c.SyncRegions
	r.Promotion = "automatic"
	if d.promotionByDrill {
		r.Promotion = "drill"
	}
	r.DurationMS, r.Started = c.Duration.Milliseconds(), started
	d.tel.record(ctx, span, &r)
	return &r, nil
}

// phase runs f as a span.
func (d *driver) phase(ctx context.Context, name string, f func(context.Context) error) error {
	ctx, end := d.tel.phase(ctx, name)
	err := f(ctx)
	end(err)
	return err
}

// step runs a phase after the fault: its error fails the drill but does
// not stop it.
func (d *driver) step(ctx context.Context, name string, f func(context.Context) error) {
	if ctx.Err() != nil {
		return
	}
	if err := d.phase(ctx, name, f); err != nil && ctx.Err() == nil {
		d.log.Warn("drill: phase failed", "phase", name, "err", err)
		d.l.Errors = append(d.l.Errors, fmt.Sprintf("%s: %v", name, err))
	}
}

func (d *driver) stopWatch() {
	if d.watchStop != nil {
		d.watchStop()
		d.watchWG.Wait()
	}
}

// setup prepares the namespace and waits until both regions see From as
// its primary.
func (d *driver) setup(ctx context.Context) error {
	c := d.cfg
	regions, err := controlRegions(ctx, d.ctl)
	if err != nil {
		return err
	}
	for _, r := range regions {
		if r.Name == c.From || r.Name == c.To {
			if !r.Up {
				return fmt.Errorf("drill: region %s is down: start it first (POST %s/regions/%s/start)", r.Name, c.Endpoints.ControlURL, r.Name)
			}
			if c.Fault != Kill && r.WAN == "" {
				return fmt.Errorf("drill: --fault %s needs WAN links, and region %s has none: start isobar dev with --wan-latency, or give it links or partition and heal commands in isobar fault-control's configuration", c.Fault, r.Name)
			}
			if r.WAN != "" && r.WAN != "up" {
				return fmt.Errorf("drill: region %s's WAN links are %s: heal them first (POST %s/regions/%s/heal)", r.Name, r.WAN, c.Endpoints.ControlURL, r.Name)
			}
		}
	}
	// A new namespace replicates to every region that is up, --from and
	// --to first (the order automatic failover tries them in).
	clusters := []string{c.From, c.To}
	for _, r := range regions {
		if r.Up && r.Name != c.From && r.Name != c.To {
			clusters = append(clusters, r.Name)
		}
	}
	views := []*rest.Client{d.fromA, d.toA}
	did, err := ensureNamespace(ctx, d.fromA, views, c.Namespace, clusters, c.AutoFailoverAfter)
	for _, s := range did {
		d.log.Info("drill: " + s)
	}
	if err != nil {
		return err
	}
	if err := setSyncReplication(ctx, d.fromA, c.Namespace, c.SyncRegions, c.SyncFallbackAfter); err != nil {
		return err
	}
	if c.SyncRegions > 0 {
		d.log.Info("drill: synchronous replication", "namespace", c.Namespace, "regions", c.SyncRegions, "fallbackAfter", c.SyncFallbackAfter)
	}
	if !c.Promote {
		f, err := latestPrimary(ctx, views, c.Namespace)
		if err != nil {
			return err
		}
		if f.AutoAfterSeconds == 0 && c.AutoFailoverAfter == 0 {
			return fmt.Errorf("drill: nothing would promote %s: namespace %s has no automatic failover; give --promote or --auto-failover-after", c.To, c.Namespace)
		}
	}
	return await(ctx, startTimeout, "both regions to see "+c.From+" as the primary", func() bool {
		for _, a := range views {
			if f, err := getPrimary(ctx, a, c.Namespace); err != nil || f.Primary != c.From {
				return false
			}
		}
		return true
	})
}

// failover waits for the promotion of To (making it, with Promote, once
// the fault is detected) and for the first publish it acknowledges. The
// rest of the workload (other producers, the consumer) may take longer;
// the fault lasts its --duration whether or not they have.
func (d *driver) failover(ctx context.Context, det *detector) error {
	c := d.cfg
	f, err := getPrimary(ctx, d.toA, c.Namespace)
	if err != nil {
		return err
	}
	limit := failoverTimeout + time.Duration(f.AutoAfterSeconds)*time.Second
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	promotedAlready := false
	if c.Promote {
		// The namespace may fail over by itself first (automatic failover
		// set by an earlier run): then there is nothing to promote.
		if err := await(ctx, limit, "the fault to be detected", func() bool {
			select {
			case <-det.done:
				return true
			default:
			}
			f, err := getPrimary(ctx, d.toA, c.Namespace)
			promotedAlready = err == nil && f.Primary == c.To
			return promotedAlready
		}); err != nil {
			return fmt.Errorf("drill: the fault was not detected within %v", limit)
		}
	}
	if c.Promote && !promotedAlready {
		at, how := det.result()
		d.log.Info("drill: fault detected", "after", at.Sub(d.l.Fault).Round(time.Millisecond), "by", how)
		for {
			err := setPrimary(ctx, d.toA, c.Namespace, c.To)
			if err == nil {
				break
			}
			d.log.Warn("drill: promotion refused, retrying", "err", err)
			if perr := pause(ctx, 250*time.Millisecond); perr != nil {
				return fmt.Errorf("drill: promote %s: %w", c.To, err)
			}
		}
		d.l.Promoted, d.l.PromotedBy = time.Now(), "set-primary "+c.To+" by the drill"
		d.promotionByDrill = true
	} else {
		if err := await(ctx, limit, "automatic failover to "+c.To, func() bool {
			if promotedAlready {
				return true
			}
			f, err := getPrimary(ctx, d.toA, c.Namespace)
			return err == nil && f.Primary == c.To
		}); err != nil {
			return err
		}
		d.l.Promoted, d.l.PromotedBy = time.Now(), "automatic failover, seen by the drill"
	}
	d.log.Info("drill: promoted", "region", c.To, "after", d.l.Promoted.Sub(d.l.Fault).Round(time.Millisecond))
	promoted := d.l.Promoted
	probed := make(chan time.Time, 1)
	pctx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	go func() { probed <- probeWritable(pctx, d.to.serviceURL(), d.topic+"-probe", d.cfg.ClientLogger) }()
	if err := await(ctx, limit, "a publish through "+c.To, func() bool { return d.rec.anyAckedSince(promoted) }); err != nil {
		return err
	}
	// The probe answers within moments of the workload's first publish,
	// or it is told to stop; either way Writable says what it saw.
	select {
	case d.l.Writable = <-probed:
	case <-time.After(probeGrace):
		stopProbe()
		d.l.Writable = <-probed
	}
	if !d.l.Writable.IsZero() {
		d.log.Info("drill: new primary writable", "after", d.l.Writable.Sub(d.l.Fault).Round(time.Millisecond))
	}
	return nil
}

// probeGrace is how long after the workload's first publish through the
// new primary the drill waits for its probe.
const probeGrace = 5 * time.Second

// probeWritable publishes, through a client that reaches only the new
// primary's broker at url, to topic (the drill's own, beside the
// workload's) until a publish is acknowledged, and returns when it was
// (zero when ctx ended first). A producer that arrives before the new
// primary holds its fence is held until it does, so the acknowledgement
// comes within a round trip of the fence being taken. Each try is
// bounded, so a redirect to the old primary (the new one has not seen
// its promotion yet) costs at most a try.
func probeWritable(ctx context.Context, url, topic string, logger *slog.Logger) time.Time {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, Logger: plog.NewLoggerWithSlog(logger),
		OperationTimeout: 2 * time.Second, ConnectionTimeout: time.Second})
	if err != nil {
		return time.Time{}
	}
	defer client.Close()
	for ctx.Err() == nil {
		p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, SendTimeout: 2 * time.Second, DisableBatching: true})
		if err == nil {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err = p.Send(sctx, &pulsar.ProducerMessage{Payload: []byte("probe")})
			at := time.Now()
			cancel()
			p.Close()
			if err == nil {
				return at
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(writableProbeEvery):
		}
	}
	return time.Time{}
}

// writableProbeEvery is the pause between probeWritable's tries.
const writableProbeEvery = 50 * time.Millisecond

// heal undoes the fault and waits until From is ready again.
func (d *driver) heal(ctx context.Context) error {
	c := d.cfg
	action := "heal"
	if c.Fault == Kill {
		action = "start"
	}
	ctx, cancel := context.WithTimeout(ctx, healTimeout)
	defer cancel()
	if err := control(ctx, d.ctl, c.From, action); err != nil {
		return err
	}
	d.healed = true
	d.l.Healed = time.Now()
	d.log.Info("drill: healed", "region", c.From, "after", d.l.Healed.Sub(d.l.Fault).Round(time.Millisecond))
	return await(ctx, healTimeout, c.From+" to be ready", func() bool {
		return ready(ctx, d.cfg.HTTPClient, d.from.webURL()+"/readyz") == nil
	})
}

// undoFault heals the fault if it was injected and not healed yet, with
// a context of its own: a drill never leaves a region down or cut off.
func (d *driver) undoFault(ctx context.Context) {
	if !d.faulted || d.healed {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
	defer cancel()
	action := "heal"
	if d.cfg.Fault == Kill {
		action = "start"
	}
	if err := control(ctx, d.ctl, d.cfg.From, action); err != nil {
		d.log.Error("drill: could not undo the fault", "region", d.cfg.From, "err", err)
	}
}

// failback moves the primary back to From (planned) and keeps the
// workload running through it.
func (d *driver) failback(ctx context.Context) error {
	c := d.cfg
	d.l.FailbackStart = time.Now()
	if err := setPrimary(ctx, d.fromA, c.Namespace, c.From); err != nil {
		return err
	}
	var seen time.Time
	if err := await(ctx, failoverTimeout, c.From+" to be the primary again", func() bool {
		f, err := getPrimary(ctx, d.fromA, c.Namespace)
		seen = time.Now()
		return err == nil && f.Primary == c.From
	}); err != nil {
		return err
	}
	if err := await(ctx, failoverTimeout, "publishes and deliveries through "+c.From, func() bool {
		return d.rec.ackedSince(seen) && d.rec.deliveredSince(seen)
	}); err != nil {
		return err
	}
	d.log.Info("drill: failed back", "region", c.From, "after", time.Since(d.l.FailbackStart).Round(time.Millisecond))
	return pause(ctx, failbackHold)
}

// drain waits until the consumer has received every message
// acknowledged before t; it gives up when that has not progressed for
// drainQuiet, or after drainTimeout.
func (d *driver) drain(ctx context.Context, t time.Time) error {
	left, best, progress := 0, -1, time.Now()
	err := await(ctx, drainTimeout, "the consumer to receive every acknowledged message", func() bool {
		left = d.rec.undelivered(t)
		if best < 0 || left < best {
			best, progress = left, time.Now()
		}
		return left == 0 || time.Since(progress) > drainQuiet
	})
	if err == nil && left > 0 {
		d.log.Warn("drill: drain gave up", "undelivered", left, "no_progress_for", drainQuiet)
	}
	return err
}

// scanComplete reads region's copy of the topic until it holds every
// message acknowledged before t: the old primary's tail reaches the new
// one some time after the heal, and a consumer whose acknowledgements
// travelled with it does not receive that tail again, so only the copy
// itself tells when it is there. It reads again every rescanEvery and
// gives up, returning the last read, when the count missing has not
// dropped for drainQuiet.
func (d *driver) scanComplete(ctx context.Context, r RegionEndpoint, t time.Time) (*Scan, error) {
	want := d.rec.ackedBefore(t)
	best, progress := -1, time.Now()
	for {
		sc, err := d.scan(ctx, r, nil)
		if err != nil {
			return sc, err
		}
		missing := len(want)
		for _, c := range sc.Copies {
			if want[c.Key] {
				missing--
				delete(want, c.Key)
			}
		}
		if missing == 0 {
			return sc, nil
		}
		if best < 0 || missing < best {
			best, progress = missing, time.Now()
		}
		if time.Since(progress) > drainQuiet {
			d.log.Warn("drill: copy incomplete", "region", r.Name, "missing", missing, "no_progress_for", drainQuiet)
			return sc, nil
		}
		want = d.rec.ackedBefore(t)
		if err := pause(ctx, rescanEvery); err != nil {
			return sc, err
		}
	}
}

func (d *driver) scan(ctx context.Context, r RegionEndpoint, stop func(Payload) bool) (*Scan, error) {
	ctx, cancel := context.WithTimeout(ctx, scanTimeout)
	defer cancel()
	sc, err := scanTopic(ctx, r.serviceURL(), r.Name, d.topic, d.cfg.RunID, d.cfg.Producers, d.cfg.ClientLogger, stop)
	if err == nil {
		d.log.Info("drill: scanned", "region", r.Name, "messages", len(sc.Copies), "took", sc.Done.Sub(sc.Started).Round(time.Millisecond))
	}
	return sc, err
}

// await checks cond every pollEvery until it holds, timeout passes or ctx
// ends.
func await(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drill: gave up after %v waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// pause lets a phase run for d (the workload keeps running meanwhile);
// it returns early with ctx's error.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
