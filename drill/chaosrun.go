package drill

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// ChaosConfig is one chaos drill (docs/drills.md, "Randomized drills").
type ChaosConfig struct {
	Endpoints Endpoints
	// Seed names the schedule (Plan): the same seed against the same
	// regions and Duration replays it.
	Seed uint64
	// Duration is how long faults are injected; the workload runs from
	// before it until the copies are read.
	Duration time.Duration
	// Faults are the kinds drawn (empty: kill, partition, blackhole).
	Faults []Fault
	// Deletes is how many times the delete topic is deleted and created
	// again (PlanConfig.Deletes: zero, one per 20 s of Duration;
	// negative, never).
	Deletes int
	// Tenant holds the drill's namespaces, one per kind of ChaosKinds:
	// <Tenant>/chaos-<kind>, created when missing.
	Tenant string
	// Rate is each producer's messages per second; zero means
	// DefaultChaosRate.
	Rate int
	// Partitions is the partition count of each namespace's partitioned
	// topic; zero means 2.
	Partitions int
	// ConvergeTimeout bounds the wait, after the last heal, for every
	// region's copies to hold the same messages; zero means 2 min.
	ConvergeTimeout time.Duration
	// MaxGap, when positive, fails the drill when a producer goes that
	// long without an acknowledged send.
	MaxGap time.Duration
	// RunID names the run in payloads, producer and topic names; empty
	// means one made from the start time.
	RunID string

	// Logger receives progress, ClientLogger the Pulsar clients' logs; nil
	// discards.
	Logger, ClientLogger *slog.Logger
	// HTTPClient makes the admin and fault-control requests; nil means
	// http.DefaultClient.
	HTTPClient *http.Client
}

// Defaults of ChaosConfig.
const (
	DefaultChaosRate            = 20
	DefaultChaosPartitions      = 2
	DefaultChaosConvergeTimeout = 2 * time.Minute
)

// settle is how long the workload runs on after the last heal, before it
// stops, so that every client is back and sending.
const settle = 3 * time.Second

func (c *ChaosConfig) plan() PlanConfig {
	var regions []string
	for _, r := range c.Endpoints.Regions {
		regions = append(regions, r.Name)
	}
	return PlanConfig{Regions: regions, Duration: c.Duration, Faults: c.Faults, Deletes: c.Deletes}
}

// Validate reports every problem of c at once, each naming its flag.
func (c *ChaosConfig) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Endpoints.ControlURL == "" {
		bad("endpoints", "no controlUrl: a drill needs a fault-control API (isobar dev's, or isobar fault-control's)")
	}
	for _, r := range c.Endpoints.Regions {
		if r.serviceURL() == "" || r.webURL() == "" {
			bad("endpoints", "region %q has no serviceUrl or webServiceUrl", r.Name)
		}
	}
	if c.Tenant == "" || strings.ContainsAny(c.Tenant, "/ ") {
		bad("tenant", "%q is not a tenant name", c.Tenant)
	}
	if c.Rate < 0 || c.Rate > 1000 {
		bad("rate", "%d is not within 1..1000 per producer", c.Rate)
	}
	if c.Partitions < 0 || c.Partitions > 16 {
		bad("partitions", "%d is not within 1..16", c.Partitions)
	}
	if c.ConvergeTimeout < 0 || c.MaxGap < 0 {
		bad("converge-timeout", "negative durations")
	}
	if strings.ContainsAny(c.RunID, " /") {
		errs = append(errs, fmt.Errorf("run id %q holds a space or a slash", c.RunID))
	}
	if err := c.plan().Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ChaosNamespace is the namespace of kind a chaos drill uses in tenant.
func ChaosNamespace(tenant string, kind NamespaceKind) string {
	return tenant + "/chaos-" + string(kind)
}

// RunChaos plans the schedule of cfg.Seed, runs the workload through it
// and reports. A drill that ran but did not pass returns its report
// (Passed false) and no error; an error means it could not run. Every
// fault injected is undone before RunChaos returns, even when ctx has
// ended.
func RunChaos(ctx context.Context, cfg ChaosConfig) (*ChaosReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg
	c.Rate = cmp.Or(c.Rate, DefaultChaosRate)
	c.Partitions = cmp.Or(c.Partitions, DefaultChaosPartitions)
	c.ConvergeTimeout = cmp.Or(c.ConvergeTimeout, DefaultChaosConvergeTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RunID == "" {
		c.RunID = fmt.Sprintf("%s-%04x", time.Now().UTC().Format("20060102-150405"), rand.IntN(1<<16))
	}
	sched, err := Plan(c.Seed, c.plan())
	if err != nil {
		return nil, err
	}
	d := &chaosDriver{cfg: c, sched: sched, log: c.Logger.With("run", c.RunID), ctl: restClient(c.Endpoints.ControlURL, c.HTTPClient),
		faulted: map[string]Fault{}, incWorks: map[int][]*workload{}, delTopic: -1}
	for _, r := range c.Endpoints.Regions {
		d.admins = append(d.admins, restClient(r.webURL(), c.HTTPClient))
	}
	for _, st := range sched.Steps {
		d.log.Info("chaos: planned", "at", st.At, "action", st.Action, "region", st.Region, "to", st.To)
	}
	started := time.Now()
	defer d.undoAll(ctx)
	rep, err := d.run(ctx)
	if err != nil {
		return nil, err
	}
	rep.RunID, rep.Seed, rep.DurationMS, rep.Rate, rep.Started = c.RunID, c.Seed, c.Duration.Milliseconds(), c.Rate, started
	return rep, nil
}

// chaosDriver is one run of RunChaos: it does the I/O and fills l.
type chaosDriver struct {
	cfg    ChaosConfig
	sched  Schedule
	log    *slog.Logger
	ctl    *rest.Client
	admins []*rest.Client // by region, as in the endpoints
	l      ChaosLog
	rec    *recorder
	// initialProducers and initialConsumers are how many clients start
	// with the workload (the first of l.Producers and l.Consumers); the
	// later incarnations' clients follow them.
	initialProducers, initialConsumers int
	// delTopic is the delete topic's index in l.Topics (-1: none).
	delTopic int
	// byRegion are the Pulsar clients, by region ("": every region).
	byRegion map[string]pulsar.Client
	// closing waits for the workloads of deleted incarnations to close.
	closing sync.WaitGroup

	mu sync.Mutex
	// faulted holds the regions faulted and not undone yet.
	faulted map[string]Fault
	// works are the workloads running (not those of a deleted
	// incarnation), incWorks the delete topic's by incarnation.
	works    []*workload
	incWorks map[int][]*workload
}

func (d *chaosDriver) run(ctx context.Context) (*ChaosReport, error) {
	c := d.cfg
	for _, r := range c.Endpoints.Regions {
		d.l.Regions = append(d.l.Regions, r.Name)
	}
	if err := d.setup(ctx); err != nil {
		return nil, err
	}
	d.planClients()
	d.rec = newRecorder(c.RunID, len(d.l.Producers))
	d.l.Start = time.Now()
	clients, err := d.startWorkloads(ctx)
	deleting := make(chan struct{})
	close(deleting) // until the deletes start
	defer func() {
		// Undo first: a client closes slowly while its region is down.
		d.undoAll(ctx)
		<-deleting
		d.mu.Lock()
		works := d.works
		d.works = nil
		d.mu.Unlock()
		for _, w := range works {
			w.close()
		}
		d.closing.Wait()
		for _, cl := range clients {
			cl.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	err = await(ctx, startTimeout, "every producer's first acknowledgement and every consumer's first delivery", func() bool {
		return d.rec.ackedSinceFirst(time.Time{}, d.initialProducers) && d.rec.everyConsumerDelivered(d.initialConsumers)
	})
	if err == nil {
		err = pause(ctx, warmup)
	}
	if err != nil {
		return nil, err
	}
	d.l.Steady = time.Now()
	d.log.Info("chaos: workload steady", "producers", len(d.l.Producers), "consumers", len(d.l.Consumers), "rate", c.Rate)

	deleting = make(chan struct{})
	var deleteSteps []StepRecord
	go func() {
		defer close(deleting)
		deleteSteps = d.runDeletes(ctx)
	}()
	for _, st := range d.sched.Steps {
		if st.Action == Delete {
			continue
		}
		if err := pause(ctx, time.Until(d.l.Steady.Add(st.At))); err != nil {
			return nil, err
		}
		d.l.Steps = append(d.l.Steps, d.take(ctx, st))
	}
	// The schedule lasts its whole duration, whenever its last step was.
	if err := pause(ctx, time.Until(d.l.Steady.Add(c.Duration))); err != nil {
		return nil, err
	}
	if err := await(ctx, healTimeout, "every region to be ready", func() bool {
		for _, r := range c.Endpoints.Regions {
			if ready(ctx, c.HTTPClient, r.webURL()+"/readyz") != nil {
				return false
			}
		}
		return true
	}); err != nil {
		d.l.Errors = append(d.l.Errors, "heal: "+err.Error())
	}
	// The deletes end by themselves: each gives up after healTimeout
	// past the schedule's end.
	select {
	case <-deleting:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	d.l.Steps = append(d.l.Steps, deleteSteps...)
	slices.SortStableFunc(d.l.Steps, func(a, b StepRecord) int { return cmp.Compare(a.At, b.At) })
	d.l.Healed = time.Now()
	d.log.Info("chaos: every region healed and ready")
	if err := pause(ctx, settle); err != nil {
		return nil, err
	}

	d.l.Stop = time.Now()
	d.mu.Lock()
	works := slices.Clone(d.works)
	d.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	var wg sync.WaitGroup
	errs := make([]error, len(works))
	for i, w := range works {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.stopSending(sctx)
		}()
	}
	wg.Wait()
	cancel()
	if err := errors.Join(errs...); err != nil {
		d.l.Errors = append(d.l.Errors, "stop: "+err.Error())
	}
	d.log.Info("chaos: producers stopped; waiting for the regions' copies to converge")
	d.converge(ctx)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	d.rec.fillChaos(&d.l)
	r := CheckChaos(&d.l, ChaosLimits{MaxGapMS: c.MaxGap.Milliseconds()})
	return &r, nil
}

// setup checks the regions and prepares a namespace of every kind.
func (d *chaosDriver) setup(ctx context.Context) error {
	c := d.cfg
	regions, err := controlRegions(ctx, d.ctl)
	if err != nil {
		return err
	}
	wan := slices.ContainsFunc(d.sched.Steps, func(s Step) bool { return s.Action == Action(Partition) || s.Action == Action(Blackhole) })
	for _, r := range regions {
		if !r.Up {
			return fmt.Errorf("drill: region %s is down: start it first (POST %s/regions/%s/start)", r.Name, c.Endpoints.ControlURL, r.Name)
		}
		if wan && r.WAN == "" {
			return fmt.Errorf("drill: the schedule partitions or black-holes regions, and region %s has no WAN links: start isobar dev with --wan-latency, give it links in isobar fault-control's configuration, or drill with --faults kill", r.Name)
		}
		if r.WAN != "" && r.WAN != "up" {
			return fmt.Errorf("drill: region %s's WAN links are %s: heal them first (POST %s/regions/%s/heal)", r.Name, r.WAN, c.Endpoints.ControlURL, r.Name)
		}
	}
	admin := d.admins[0]
	clusters := d.l.Regions // the primary, the first region, first
	for _, kind := range ChaosKinds {
		ns := ChaosNamespace(c.Tenant, kind)
		var did []string
		var err error
		switch kind {
		case ActiveStandby, Sync:
			did, err = ensureNamespace(ctx, admin, d.admins, ns, clusters, 0)
			if err == nil && kind == Sync {
				err = setChaosSync(ctx, admin, d.admins, ns)
			}
			if err == nil {
				err = await(ctx, startTimeout, "every region to see "+d.sched.Primary+" as the primary of "+ns, func() bool {
					for _, a := range d.admins {
						if f, err := getPrimary(ctx, a, ns); err != nil || f.Primary != d.sched.Primary {
							return false
						}
					}
					return true
				})
			}
		case ActiveActive:
			did, err = ensureActiveActive(ctx, admin, d.admins, ns, clusters)
		default:
			err = fmt.Errorf("drill: no workload for namespace kind %s", kind)
		}
		for _, s := range did {
			d.log.Info("chaos: " + s)
		}
		if err == nil {
			err = setRetention(ctx, admin, d.admins, ns)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ensureActiveActive makes ns an active-active namespace replicated to
// clusters (all of them, at least) with de-duplication on, so that a
// producer's resent messages are stored once.
func ensureActiveActive(ctx context.Context, c *rest.Client, views []*rest.Client, ns string, clusters []string) ([]string, error) {
	did, pol, created, err := ensureTenantAndNamespace(ctx, c, ns, clusters)
	if err != nil {
		return did, err
	}
	if !created {
		if slices.ContainsFunc(clusters, func(r string) bool { return !slices.Contains(pol.ReplicationClusters, r) }) {
			return did, fmt.Errorf("drill: namespace %s replicates to %s, not to every region (%s): use another --tenant or add them (isobar admin namespaces set-clusters)",
				ns, strings.Join(pol.ReplicationClusters, ", "), strings.Join(clusters, ", "))
		}
		f, err := latestPrimary(ctx, views, ns)
		if err != nil {
			return did, err
		}
		if f.Mode != "" && f.Mode != policy.ActiveActive {
			if err := c.DeleteWithContext(ctx, primaryPath(ns)); err != nil {
				return did, fmt.Errorf("drill: make %s active-active: %w", ns, err)
			}
			did = append(did, fmt.Sprintf("made %s active-active (it was %s)", ns, f.Mode))
		}
	}
	if err := c.PostWithContext(ctx, "/admin/v2/namespaces/"+ns+"/deduplication", true); err != nil {
		return did, fmt.Errorf("drill: de-duplication of %s: %w", ns, err)
	}
	return did, nil
}

// setChaosSync gives ns the sync kind's synchronous replication
// (ChaosSync) and waits until every region in views serves it.
func setChaosSync(ctx context.Context, c *rest.Client, views []*rest.Client, ns string) error {
	path := "/admin/v2/namespaces/" + ns + "/syncReplication"
	if err := c.PostWithContext(ctx, path, ChaosSync); err != nil {
		return fmt.Errorf("drill: synchronous replication of %s: %w", ns, err)
	}
	return await(ctx, startTimeout, "every region to see the synchronous replication of "+ns, func() bool {
		for _, v := range views {
			var got map[string]int
			if err := v.GetWithContext(ctx, path, &got); err != nil || !maps.Equal(got, ChaosSync) {
				return false
			}
		}
		return true
	})
}

// chaosRetention keeps what the drill's consumers acknowledged: the
// checks read every region's copy from its first message, and without
// retention a region drops the acknowledged ledgers it closes (on every
// restart).
var chaosRetention = map[string]int{"retentionTimeInMinutes": 24 * 60, "retentionSizeInMB": 1024}

// setRetention sets chaosRetention on ns through c and waits until every
// region in views serves it, before the drill's topics load.
func setRetention(ctx context.Context, c *rest.Client, views []*rest.Client, ns string) error {
	path := "/admin/v2/namespaces/" + ns + "/retention"
	if err := c.PostWithContext(ctx, path, chaosRetention); err != nil {
		return fmt.Errorf("drill: retention of %s: %w", ns, err)
	}
	return await(ctx, startTimeout, "every region to see the retention of "+ns, func() bool {
		for _, v := range views {
			var got map[string]int
			if err := v.GetWithContext(ctx, path, &got); err != nil || !maps.Equal(got, chaosRetention) {
				return false
			}
		}
		return true
	})
}

// planClients lays out the workload in d.l: per namespace kind a plain
// and a partitioned topic; on an active-active topic a producer and a
// consumer in every region (its client reaching that region alone); on
// an active-standby topic one producer whose client lists every region,
// and a consumer in every region. Each consumer has a subscription of
// its own, named for its region.
func (d *chaosDriver) planClients() {
	c := d.cfg
	for _, kind := range ChaosKinds {
		ns := ChaosNamespace(c.Tenant, kind)
		for _, parts := range []int{0, c.Partitions} {
			name := "persistent://" + ns + "/chaos-" + c.RunID
			if parts > 0 {
				name += "-p"
			}
			t := len(d.l.Topics)
			d.l.Topics = append(d.l.Topics, ChaosTopic{Name: name, Kind: kind, Partitions: parts})
			switch {
			case kind.standby():
				d.l.Producers = append(d.l.Producers, ChaosClient{Topic: t})
			default:
				for _, r := range d.l.Regions {
					d.l.Producers = append(d.l.Producers, ChaosClient{Topic: t, Region: r})
				}
			}
			for _, r := range d.l.Regions {
				d.l.Consumers = append(d.l.Consumers, ChaosClient{Topic: t, Region: r})
			}
		}
	}
	deletes := 0
	for _, st := range d.sched.Steps {
		if st.Action == Delete {
			deletes++
		}
	}
	d.initialProducers, d.initialConsumers = len(d.l.Producers), len(d.l.Consumers)
	if deletes == 0 {
		return
	}
	// The delete topic: active-active, a producer and a consumer in
	// every region, per incarnation; the first incarnation's start with
	// the workload.
	d.delTopic = len(d.l.Topics)
	d.l.Topics = append(d.l.Topics, ChaosTopic{Name: "persistent://" + ChaosNamespace(c.Tenant, ActiveActive) + "/chaos-" + c.RunID + "-del", Kind: ActiveActive})
	d.initialProducers += len(d.l.Regions)
	d.initialConsumers += len(d.l.Regions)
	for inc := range deletes + 1 {
		for _, r := range d.l.Regions {
			d.l.Producers = append(d.l.Producers, ChaosClient{Topic: d.delTopic, Region: r, Incarnation: inc})
		}
		for _, r := range d.l.Regions {
			d.l.Consumers = append(d.l.Consumers, ChaosClient{Topic: d.delTopic, Region: r, Incarnation: inc})
		}
	}
}

// startWorkloads creates the partitioned topics, a client per region and
// one listing every region, and starts the workload planClients laid
// out (the first incarnation of the delete topic).
func (d *chaosDriver) startWorkloads(ctx context.Context) ([]pulsar.Client, error) {
	c := d.cfg
	for _, t := range d.l.Topics {
		if t.Partitions > 0 {
			if err := d.createPartitioned(ctx, t.Name, t.Partitions); err != nil {
				return nil, err
			}
		}
	}
	byRegion := map[string]pulsar.Client{}
	var clients []pulsar.Client
	for _, r := range c.Endpoints.Regions {
		cl, err := newClient(r.serviceURL(), c.ClientLogger)
		if err != nil {
			return clients, err
		}
		byRegion[r.Name] = cl
		clients = append(clients, cl)
	}
	multi, err := newClient(c.Endpoints.MultiHostURL(), c.ClientLogger)
	if err != nil {
		return clients, err
	}
	byRegion[""] = multi
	clients = append(clients, multi)
	d.byRegion = byRegion
	return clients, d.startIncarnation(ctx, 0)
}

// startIncarnation starts the clients planClients laid out for
// incarnation inc of their topics (0: every topic's first): one workload
// per topic and client, its consumer, then its producers.
func (d *chaosDriver) startIncarnation(ctx context.Context, inc int) error {
	c := d.cfg
	type slot struct {
		topic  int
		region string
	}
	specs := map[slot]*workloadSpec{}
	var order []slot
	spec := func(topic int, region string) *workloadSpec {
		s := slot{topic, region}
		if specs[s] == nil {
			t := d.l.Topics[topic]
			specs[s] = &workloadSpec{topic: t.Name, interval: time.Second / time.Duration(c.Rate), keyBySeq: t.Partitions > 0}
			order = append(order, s)
		}
		return specs[s]
	}
	for i, cn := range d.l.Consumers {
		if cn.Incarnation == inc {
			sp := spec(cn.Topic, cn.Region)
			sp.subscription, sp.consumer = "chaos-"+cn.Region, i
		}
	}
	for i, p := range d.l.Producers {
		if p.Incarnation == inc {
			sp := spec(p.Topic, p.Region)
			sp.producers = append(sp.producers, i)
		}
	}
	for _, s := range order {
		w, err := attachWorkload(ctx, d.byRegion[s.region], d.rec, *specs[s])
		if err != nil {
			return err
		}
		d.mu.Lock()
		d.works = append(d.works, w)
		if s.topic == d.delTopic {
			d.incWorks[inc] = append(d.incWorks[inc], w)
		}
		d.mu.Unlock()
	}
	return nil
}

// createPartitioned creates topic with n partitions and waits until every
// region knows it (the metadata is global; a region that had not seen it
// would create the topic unpartitioned on a client's lookup).
func (d *chaosDriver) createPartitioned(ctx context.Context, topic string, n int) error {
	path := "/admin/v2/" + strings.Replace(topic, "://", "/", 1) + "/partitions"
	if err := d.admins[0].PutWithContext(ctx, path, n); err != nil {
		return fmt.Errorf("drill: create %s with %d partitions: %w", topic, n, err)
	}
	return await(ctx, startTimeout, "every region to know "+topic+"'s partitions", func() bool {
		for _, a := range d.admins {
			var meta struct {
				Partitions int `json:"partitions"`
			}
			if err := a.GetWithContext(ctx, path, &meta); err != nil || meta.Partitions != n {
				return false
			}
		}
		return true
	})
}

// take takes one step of the schedule. A step that fails is recorded and
// fails the drill; the schedule goes on.
func (d *chaosDriver) take(ctx context.Context, st Step) StepRecord {
	rec := StepRecord{Step: st, Asked: time.Now()}
	sctx, cancel := context.WithTimeout(ctx, healTimeout)
	defer cancel()
	var err error
	switch {
	case st.Action == Move:
		for _, kind := range ChaosKinds {
			if kind.standby() && err == nil {
				err = setPrimary(sctx, d.admin(st.To), ChaosNamespace(d.cfg.Tenant, kind), st.To)
			}
		}
	case st.Action.IsFault():
		d.mu.Lock()
		d.faulted[st.Region] = Fault(st.Action) // even a failed request may have reached it
		d.mu.Unlock()
		err = control(sctx, d.ctl, st.Region, string(st.Action))
	default:
		err = control(sctx, d.ctl, st.Region, string(st.Action))
		if err == nil {
			d.mu.Lock()
			delete(d.faulted, st.Region)
			d.mu.Unlock()
		}
	}
	rec.Done = time.Now()
	if err != nil {
		rec.Err = err.Error()
		d.log.Warn("chaos: step failed", "action", st.Action, "region", st.Region, "err", err)
	} else {
		d.log.Info("chaos: step", "action", st.Action, "region", st.Region, "to", st.To,
			"late_by", rec.Asked.Sub(d.l.Steady.Add(st.At)).Round(time.Millisecond), "took", rec.Done.Sub(rec.Asked).Round(time.Millisecond))
	}
	return rec
}

func (d *chaosDriver) admin(region string) *rest.Client {
	for i, r := range d.cfg.Endpoints.Regions {
		if r.Name == region {
			return d.admins[i]
		}
	}
	return d.admins[0]
}

// undoAll undoes every fault still in place, with a context of its own: a
// drill never leaves a region down or cut off.
func (d *chaosDriver) undoAll(ctx context.Context) {
	d.mu.Lock()
	left := maps.Clone(d.faulted)
	d.mu.Unlock()
	for region, f := range left {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
		if err := control(ctx, d.ctl, region, string(undo(f))); err != nil {
			d.log.Error("chaos: could not undo a fault", "region", region, "fault", f, "err", err)
		} else {
			d.mu.Lock()
			delete(d.faulted, region)
			d.mu.Unlock()
		}
		cancel()
	}
}

// converge reads every region's copy of every topic until, for each
// topic, every region's copy holds every acknowledged message and the
// same messages as the others; it gives up when that has not come closer
// for drainQuiet, or after ConvergeTimeout. The last reads go to d.l.
func (d *chaosDriver) converge(ctx context.Context) {
	deadline := time.Now().Add(d.cfg.ConvergeTimeout)
	best, progress := -1, time.Now()
	for {
		copies := d.readAll(ctx)
		d.l.Copies = copies
		off := d.divergence(copies)
		if off == 0 {
			d.log.Info("chaos: every region's copies converged")
			return
		}
		if best < 0 || off < best {
			best, progress = off, time.Now()
		}
		if time.Since(progress) > drainQuiet || time.Now().After(deadline) {
			d.log.Warn("chaos: copies did not converge", "differences", off)
			return
		}
		if pause(ctx, rescanEvery) != nil {
			return
		}
	}
}

// readAll reads every region's copy of every topic's partitions, the
// regions in parallel.
func (d *chaosDriver) readAll(ctx context.Context) []ChaosCopy {
	c := d.cfg
	out := make([][]ChaosCopy, len(c.Endpoints.Regions))
	var wg sync.WaitGroup
	for i, r := range c.Endpoints.Regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t, tp := range d.l.Topics {
				for part := range max(tp.Partitions, 1) {
					name := tp.Name
					if tp.Partitions > 0 {
						name = fmt.Sprintf("%s%s%d", tp.Name, partitionSuffix, part)
					}
					sctx, cancel := context.WithTimeout(ctx, scanTimeout)
					sc, err := scanTopic(sctx, r.serviceURL(), r.Name, name, c.RunID, len(d.l.Producers), c.ClientLogger, nil)
					cancel()
					if err != nil {
						d.log.Warn("chaos: read failed", "region", r.Name, "topic", name, "err", err)
						sc.Done = time.Time{}
					}
					out[i] = append(out[i], ChaosCopy{Topic: t, Partition: part, Scan: sc})
				}
			}
		}()
	}
	wg.Wait()
	return slices.Concat(out...)
}

// divergence counts, over topics and regions, acknowledged messages
// missing from a copy, messages one copy holds and another does not,
// and reads that did not complete: zero when converged.
func (d *chaosDriver) divergence(copies []ChaosCopy) int {
	acked := make([]map[Key]bool, len(d.l.Topics))
	for t := range acked {
		acked[t] = map[Key]bool{}
	}
	d.rec.mu.Lock()
	for p, ss := range d.rec.sends {
		if !d.l.current(p) {
			continue // of a deleted incarnation
		}
		for _, s := range ss {
			if !s.Acked.IsZero() {
				acked[d.l.Producers[p].Topic][s.Key] = true
			}
		}
	}
	d.rec.mu.Unlock()
	held := map[[2]any]map[Key]bool{}
	union := make([]map[Key]bool, len(d.l.Topics))
	for t := range union {
		union[t] = map[Key]bool{}
	}
	off := 0
	for _, c := range copies {
		if c.Scan.Done.IsZero() {
			off++
		}
		k := [2]any{c.Topic, c.Scan.Region}
		if held[k] == nil {
			held[k] = map[Key]bool{}
		}
		for _, cp := range c.Scan.Copies {
			held[k][cp.Key] = true
			union[c.Topic][cp.Key] = true
		}
	}
	for t := range d.l.Topics {
		for k := range acked[t] {
			union[t][k] = true
		}
		for _, r := range d.l.Regions {
			h := held[[2]any{t, r}]
			for k := range union[t] {
				if !h[k] {
					off++
				}
			}
		}
	}
	return off
}

// everyConsumerDelivered reports whether consumers 0..n-1 have each
// received a message.
func (r *recorder) everyConsumerDelivered(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make([]bool, n)
	left := n
	for _, d := range r.deliveries {
		if d.Consumer < n && !seen[d.Consumer] {
			seen[d.Consumer] = true
			left--
		}
	}
	return left == 0
}

// fillChaos copies what was recorded into l.
func (r *recorder) fillChaos(l *ChaosLog) {
	var fl Log
	r.fill(&fl)
	l.Sends, l.Deliveries, l.Foreign = fl.Sends, fl.Deliveries, fl.Foreign
	l.ReceiveErrors, l.AckErrors = fl.ReceiveErrors, fl.AckErrors
	l.ProducersClosed, l.ConsumersClosed = fl.ProducersClosed, fl.ConsumersClosed
}
