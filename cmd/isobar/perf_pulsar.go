package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// withPulsarPerf adds `produce` and `consume` (like pulsar-perf) to the
// `isobar perf` command and returns it.
func withPulsarPerf(perf *cobra.Command, g *globalFlags) *cobra.Command {
	perf.AddCommand(newPerfProduceCmd(g), newPerfConsumeCmd(g))
	return perf
}

type perfProduceFlags struct {
	connFlags
	adminURL         string
	numTopics        int
	rate             float64
	size             int
	batchMaxMessages uint
	disableBatching  bool
	batchMaxDelay    time.Duration
	partitions       int
	producers        int
	duration         time.Duration
	count            int64
	maxPending       int
	seed             uint64
	interval         time.Duration
	asJSON           bool
}

// perfProduceSingleDash are pulsar-perf produce's flags of more than one
// letter after a single dash.
var perfProduceSingleDash = map[string]string{
	"time": "test-duration", "np": "partitions", "au": "admin-url",
	"bm": "batch-max-messages", "db": "disable-batching",
}

func newPerfProduceCmd(g *globalFlags) *cobra.Command {
	f := &perfProduceFlags{}
	cmd := &cobra.Command{
		Use:   "produce <topic>...",
		Short: "Publish at a rate (default 100 msg/s, -r 0: flat out) and report msg/s, MB/s and publish latency",
		Long: `Publish JSON-like payloads of -s bytes with varied field values
(deterministic for a --seed) from -n producers per topic, like pulsar-perf
produce, whose flags these are. With -t N and one topic name, the topics
are name-0 ... name-(N-1). Progress goes to stderr every --report-interval,
the summary to stdout (--json: as JSON). Publish latency is from SendAsync
to the broker's receipt. MB = 10^6 bytes. The run ends after -time, after
-m messages or at an interrupt, whichever comes first.`,
		Args: perfTopicArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			topics, err := f.validate(cmd, args)
			if err != nil {
				return err
			}
			logger, err := g.logger()
			if err != nil {
				return err
			}
			if f.partitions > 0 {
				for _, topic := range topics {
					if err := createPartitionedTopic(cmd.Context(), f.adminURL, topic, f.partitions, cmd.ErrOrStderr()); err != nil {
						return err
					}
				}
			}
			client, err := newPulsarClient(f.connFlags, logger, min(f.producers*len(topics), 8))
			if err != nil {
				return err
			}
			defer client.Close()
			sum, err := runPerfProduce(cmd.Context(), client, topics, f, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := printPerfSummary(cmd.OutOrStdout(), sum, f.asJSON); err != nil {
				return err
			}
			if sum.Errors > 0 {
				return fmt.Errorf("%d of %d sends failed", sum.Errors, sum.Messages+sum.Errors)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	f.bindPerf(fl)
	fl.StringVar(&f.adminURL, "admin-url", "http://localhost:8080", "admin REST URL, for -np; also -au")
	fl.IntVarP(&f.numTopics, "num-topics", "t", 1, "number of topics")
	alias(fl, "num-topics", "num-topic")
	fl.Float64VarP(&f.rate, "rate", "r", 100, "messages per second across all producers and topics; 0 = as fast as possible")
	fl.IntVarP(&f.size, "size", "s", 1024, "payload size in bytes")
	fl.UintVar(&f.batchMaxMessages, "batch-max-messages", 1000, "messages per batch; also -bm")
	fl.BoolVar(&f.disableBatching, "disable-batching", false, "send every message on its own; also -db")
	f.batchMaxDelay = time.Millisecond
	fl.VarP(millisValue{&f.batchMaxDelay}, "batch-time-window", "b", "longest a batch waits to fill: milliseconds, or a duration like 500us")
	alias(fl, "batch-time-window", "batch-max-delay")
	fl.IntVar(&f.partitions, "partitions", 0, "if >0, first create each topic with this many partitions; also -np")
	fl.IntVarP(&f.producers, "num-producers", "n", 1, "producers per topic")
	alias(fl, "num-producers", "producers")
	fl.Var(secondsValue{&f.duration}, "test-duration", "run time: seconds, or a duration like 30s; 0 = until -m or an interrupt; also -time")
	alias(fl, "test-duration", "duration")
	fl.Int64VarP(&f.count, "num-messages", "m", 0, "stop after this many messages in all (0 = no limit)")
	fl.IntVarP(&f.maxPending, "max-outstanding", "o", 1000, "unacknowledged messages per producer before sends block")
	alias(fl, "max-outstanding", "max-pending")
	fl.Uint64Var(&f.seed, "seed", 1, "payload generator seed")
	fl.DurationVar(&f.interval, "report-interval", 5*time.Second, "progress report period")
	fl.BoolVar(&f.asJSON, "json", false, "print the summary as JSON")
	return singleDash(cmd, perfProduceSingleDash)
}

func (f *perfProduceFlags) validate(cmd *cobra.Command, args []string) ([]string, error) {
	var errs []error
	if err := validateServiceURL(f.serviceURL); err != nil {
		errs = append(errs, err)
	}
	topics, err := perfTopics(cmd, args, f.numTopics)
	if err != nil {
		errs = append(errs, err)
	}
	if f.rate < 0 || math.IsNaN(f.rate) || math.IsInf(f.rate, 0) {
		errs = append(errs, fmt.Errorf("%s: %v must be 0 or positive", flagAs(cmd, "rate"), f.rate))
	}
	if f.size < 1 || f.size > 64<<20 {
		errs = append(errs, fmt.Errorf("%s: %d is not in 1..%d", flagAs(cmd, "size"), f.size, 64<<20))
	}
	if f.batchMaxDelay <= 0 {
		errs = append(errs, fmt.Errorf("%s: %v must be positive", flagAs(cmd, "batch-time-window", "batch-max-delay"), f.batchMaxDelay))
	}
	if f.partitions < 0 {
		errs = append(errs, fmt.Errorf("-np/--partitions: %d is negative", f.partitions))
	}
	if f.partitions > 0 {
		if err := validateAdminURL(f.adminURL); err != nil {
			errs = append(errs, err)
		}
	}
	if f.producers < 1 || f.producers > 1000 {
		errs = append(errs, fmt.Errorf("%s: %d is not in 1..1000", flagAs(cmd, "num-producers", "producers"), f.producers))
	}
	if f.count < 0 {
		errs = append(errs, fmt.Errorf("-m/--num-messages: %d is negative", f.count))
	}
	if f.duration < 0 {
		errs = append(errs, fmt.Errorf("%s: %v is negative", flagAs(cmd, "test-duration", "duration"), f.duration))
	}
	if f.maxPending < 1 {
		errs = append(errs, fmt.Errorf("%s: %d must be at least 1", flagAs(cmd, "max-outstanding", "max-pending"), f.maxPending))
	}
	if f.interval <= 0 {
		errs = append(errs, fmt.Errorf("--report-interval: %v must be positive", f.interval))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, usageError{err}
	}
	return topics, nil
}

// perfTopicArgs wants at least one topic.
func perfTopicArgs(_ *cobra.Command, args []string) error {
	if len(args) == 0 {
		return usageError{errors.New("want at least one topic argument")}
	}
	return nil
}

// perfTopics are the topics of a run, as pulsar-perf names them: the n
// given, or name-0 ... name-(n-1) for one name and -t n.
func perfTopics(cmd *cobra.Command, args []string, n int) ([]string, error) {
	switch {
	case n < 1:
		return nil, fmt.Errorf("%s: %d must be at least 1", flagAs(cmd, "num-topics", "num-topic"), n)
	case len(args) == n:
		return args, nil
	case len(args) == 1:
		topics := make([]string, n)
		for i := range topics {
			topics[i] = fmt.Sprintf("%s-%d", args[0], i)
		}
		return topics, nil
	}
	return nil, fmt.Errorf("%s: %d, but %d topics given", flagAs(cmd, "num-topics", "num-topic"), n, len(args))
}

// bindPerf binds the connection flags as pulsar-perf has them: -u for
// --service-url, which defaults to $ISOBAR_SERVICE_URL when it is set.
func (c *connFlags) bindPerf(fl *pflag.FlagSet) {
	tmp := pflag.NewFlagSet("conn", pflag.ContinueOnError)
	c.bind(tmp)
	tmp.VisitAll(func(f *pflag.Flag) {
		if f.Name == "service-url" {
			if v, ok := os.LookupEnv("ISOBAR_SERVICE_URL"); ok && v != "" {
				f.Value.Set(v)
				f.DefValue = v
			}
			if f.Shorthand == "" {
				f.Shorthand = "u"
			}
			if !strings.Contains(f.Usage, "ISOBAR_SERVICE_URL") {
				f.Usage += " (env ISOBAR_SERVICE_URL)"
			}
		}
		fl.AddFlag(f)
	})
}

// secondsValue is a duration flag that takes pulsar-perf's plain seconds
// ("30") or a Go duration ("30s", "2m").
type secondsValue struct{ d *time.Duration }

func (v secondsValue) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

func (v secondsValue) Set(s string) error {
	d, err := unitDuration(s, time.Second)
	if err != nil {
		return fmt.Errorf("%q is not seconds or a duration like 30s, 5m", s)
	}
	*v.d = d
	return nil
}

func (v secondsValue) Type() string { return "seconds" }

// millisValue is a duration flag that takes pulsar-perf's plain
// milliseconds ("1", "0.5") or a Go duration ("500us").
type millisValue struct{ d *time.Duration }

func (v millisValue) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

func (v millisValue) Set(s string) error {
	d, err := unitDuration(s, time.Millisecond)
	if err != nil {
		return fmt.Errorf("%q is not milliseconds or a duration like 500us, 2ms", s)
	}
	*v.d = d
	return nil
}

func (v millisValue) Type() string { return "millis" }

// unitDuration reads a number of units or a Go duration.
func unitDuration(s string, unit time.Duration) (time.Duration, error) {
	if n, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(n) && !math.IsInf(n, 0) && math.Abs(n) < float64(math.MaxInt64/unit) {
		return time.Duration(n * float64(unit)), nil
	}
	return time.ParseDuration(s)
}

func validateAdminURL(s string) error {
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
		return fmt.Errorf("--admin-url: %q is not http:// or https://", s)
	}
	return nil
}

// createPartitionedTopic creates topic with n partitions through the admin
// REST API; a topic that already exists is reported and kept.
func createPartitionedTopic(ctx context.Context, adminURL, topic string, n int, progress io.Writer) error {
	p, err := restTopicPath(topic)
	if err != nil {
		return usageError{err}
	}
	u := strings.TrimRight(adminURL, "/") + "/admin/v2/" + p + "/partitions"
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, strings.NewReader(strconv.Itoa(n)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("create partitioned topic: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode/100 == 2:
		fmt.Fprintf(progress, "created %s with %d partitions\n", topic, n)
		return nil
	case resp.StatusCode == http.StatusConflict:
		fmt.Fprintf(progress, "%s already exists; using it as it is\n", topic)
		return nil
	}
	return fmt.Errorf("create partitioned topic: PUT %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
}

// runPerfProduce publishes until the duration, the count or ctx ends,
// then flushes and waits for every receipt.
func runPerfProduce(ctx context.Context, client pulsar.Client, topics []string, f *perfProduceFlags, progress io.Writer) (perfSummary, error) {
	producers := make([]pulsar.Producer, 0, f.producers*len(topics))
	defer func() {
		for _, p := range producers {
			p.Close()
		}
	}()
	for _, topic := range topics {
		for i := 0; i < f.producers; i++ {
			p, err := client.CreateProducer(pulsar.ProducerOptions{
				Topic:                   topic,
				DisableBatching:         f.disableBatching || f.batchMaxMessages == 0,
				BatchingMaxMessages:     f.batchMaxMessages,
				BatchingMaxPublishDelay: f.batchMaxDelay,
				BatchingMaxSize:         uint(max(128<<10, 2*f.size)),
				MaxPendingMessages:      f.maxPending,
			})
			if err != nil {
				return perfSummary{}, fmt.Errorf("create producer %d on %s: %w", i, topic, err)
			}
			producers = append(producers, p)
		}
	}

	runCtx := ctx
	if f.duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	st := newPerfStats()
	stopReport := startReporter(st, "produce", f.interval, progress)
	start := time.Now()
	var claimed atomic.Int64
	var pending sync.WaitGroup
	var senders sync.WaitGroup
	for i, p := range producers {
		senders.Add(1)
		go func() {
			defer senders.Done()
			gen := newPayloadGen(f.seed+uint64(i), f.size)
			perProducer := f.rate / float64(len(producers))
			for k := 0; ; k++ {
				if runCtx.Err() != nil {
					return
				}
				if f.count > 0 && claimed.Add(1) > f.count {
					return
				}
				if perProducer > 0 {
					due := start.Add(time.Duration(float64(k) / perProducer * float64(time.Second)))
					if !sleepUntil(runCtx, due) {
						return
					}
				}
				payload := gen.next()
				pending.Add(1)
				sent := time.Now()
				// Background: an interrupt stops new sends, not those in flight.
				p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: payload},
					func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
						st.record(time.Since(sent), len(payload), err)
						pending.Done()
					})
			}
		}()
	}
	senders.Wait()
	for _, p := range producers {
		if err := p.Flush(); err != nil {
			fmt.Fprintf(progress, "flush: %v\n", err)
		}
	}
	pending.Wait()
	elapsed := time.Since(start)
	stopReport()
	return st.summary(strings.Join(topics, ","), "publish", elapsed), nil
}

// sleepUntil waits for t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

type perfConsumeFlags struct {
	connFlags
	numTopics     int
	consumers     int
	subscriptions []string
	subType       string
	position      string
	rate          float64
	duration      time.Duration
	count         int64
	queue         int
	interval      time.Duration
	asJSON        bool
}

// perfConsumeSingleDash are pulsar-perf consume's flags of more than one
// letter after a single dash.
var perfConsumeSingleDash = map[string]string{
	"time": "test-duration", "ss": "subscriptions", "st": "subscription-type", "sp": "subscription-position",
}

func newPerfConsumeCmd(g *globalFlags) *cobra.Command {
	f := &perfConsumeFlags{}
	cmd := &cobra.Command{
		Use:   "consume <topic>...",
		Short: "Consume and acknowledge; report msg/s, MB/s and end-to-end latency",
		Long: `Consume with -n consumers on each subscription (-ss) of each topic, like
pulsar-perf consume, whose flags these are, until -time, -m messages or an
interrupt. End-to-end latency is the receive time minus the message's
publish time (millisecond resolution; the producer's clock). Progress goes
to stderr, the summary to stdout.`,
		Args: perfTopicArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			topics, st, pos, err := f.validate(cmd, args)
			if err != nil {
				return err
			}
			logger, err := g.logger()
			if err != nil {
				return err
			}
			client, err := newPulsarClient(f.connFlags, logger, 1)
			if err != nil {
				return err
			}
			defer client.Close()
			sum, err := runPerfConsume(cmd.Context(), client, topics, f, st, pos, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return printPerfSummary(cmd.OutOrStdout(), sum, f.asJSON)
		},
	}
	fl := cmd.Flags()
	f.bindPerf(fl)
	fl.IntVarP(&f.numTopics, "num-topics", "t", 1, "number of topics")
	alias(fl, "num-topics", "num-topic")
	fl.IntVarP(&f.consumers, "num-consumers", "n", 1, "consumers per subscription (one with Exclusive)")
	fl.StringSliceVar(&f.subscriptions, "subscriptions", []string{"sub"}, "subscriptions, comma-separated; also -ss")
	alias(fl, "subscriptions", "subscription-name")
	fl.VarP(fl.Lookup("subscriptions").Value, "subscriber-name", "s", "same as --subscriptions") // pulsar-perf's hidden -s
	fl.Lookup("subscriber-name").Hidden = true
	fl.StringVar(&f.subType, "subscription-type", "Exclusive", "Exclusive, Shared, Failover or KeyShared; also -st")
	fl.StringVar(&f.position, "subscription-position", "Latest", "where a new subscription starts: Earliest or Latest; also -sp")
	fl.Float64VarP(&f.rate, "rate", "r", 0, "messages per second each consumer takes at most (0: no limit), to act as a slow consumer")
	fl.Var(secondsValue{&f.duration}, "test-duration", "run time: seconds, or a duration like 30s; 0 = until -m or an interrupt; also -time")
	alias(fl, "test-duration", "duration")
	fl.Int64VarP(&f.count, "num-messages", "m", 0, "stop after this many messages in all (0 = no limit)")
	fl.IntVarP(&f.queue, "receiver-queue-size", "q", 1000, "receiver queue size")
	alias(fl, "receiver-queue-size", "receiver-queue")
	fl.DurationVar(&f.interval, "report-interval", 5*time.Second, "progress report period")
	fl.BoolVar(&f.asJSON, "json", false, "print the summary as JSON")
	return singleDash(cmd, perfConsumeSingleDash)
}

func (f *perfConsumeFlags) validate(cmd *cobra.Command, args []string) ([]string, pulsar.SubscriptionType, pulsar.SubscriptionInitialPosition, error) {
	var errs []error
	if err := validateServiceURL(f.serviceURL); err != nil {
		errs = append(errs, err)
	}
	topics, err := perfTopics(cmd, args, f.numTopics)
	if err != nil {
		errs = append(errs, err)
	}
	subsFlag := flagAs(cmd, "subscriptions", "subscription-name", "subscriber-name")
	if len(f.subscriptions) == 0 {
		errs = append(errs, fmt.Errorf("%s: at least one subscription", subsFlag))
	}
	for _, s := range f.subscriptions {
		if s == "" {
			errs = append(errs, fmt.Errorf("%s: a subscription name must not be empty", subsFlag))
		}
	}
	st, err := parseSubscriptionType(f.subType)
	if err != nil {
		errs = append(errs, fmt.Errorf("-st/--subscription-type: %q is not Exclusive, Shared, Failover or KeyShared", f.subType))
	}
	if f.consumers < 1 || f.consumers > 1000 {
		errs = append(errs, fmt.Errorf("-n/--num-consumers: %d is not in 1..1000", f.consumers))
	} else if st == pulsar.Exclusive && f.consumers > 1 {
		errs = append(errs, fmt.Errorf("-n/--num-consumers: %d, but an Exclusive subscription takes one consumer", f.consumers))
	}
	pos, err := parseInitialPosition(f.position)
	if err != nil {
		errs = append(errs, fmt.Errorf("-sp/--subscription-position: %q is not Earliest or Latest", f.position))
	}
	if f.rate < 0 || math.IsNaN(f.rate) || math.IsInf(f.rate, 0) {
		errs = append(errs, fmt.Errorf("-r/--rate: %v must be 0 or positive", f.rate))
	}
	if f.duration < 0 {
		errs = append(errs, fmt.Errorf("%s: %v is negative", flagAs(cmd, "test-duration", "duration"), f.duration))
	}
	if f.count < 0 {
		errs = append(errs, fmt.Errorf("-m/--num-messages: %d is negative", f.count))
	}
	if f.queue < 1 {
		errs = append(errs, fmt.Errorf("%s: %d must be at least 1", flagAs(cmd, "receiver-queue-size", "receiver-queue"), f.queue))
	}
	if f.interval <= 0 {
		errs = append(errs, fmt.Errorf("--report-interval: %v must be positive", f.interval))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, 0, 0, usageError{err}
	}
	return topics, st, pos, nil
}

// runPerfConsume runs f.consumers consumers on each subscription of each
// topic until the duration, the count or ctx ends.
func runPerfConsume(ctx context.Context, client pulsar.Client, topics []string, f *perfConsumeFlags,
	st pulsar.SubscriptionType, pos pulsar.SubscriptionInitialPosition, progress io.Writer) (perfSummary, error) {
	var consumers []pulsar.Consumer
	defer func() {
		for _, c := range consumers {
			c.Close()
		}
	}()
	for _, topic := range topics {
		for _, sub := range f.subscriptions {
			for range f.consumers {
				c, err := client.Subscribe(pulsar.ConsumerOptions{
					Topic:                       topic,
					SubscriptionName:            sub,
					Type:                        st,
					SubscriptionInitialPosition: pos,
					ReceiverQueueSize:           f.queue,
				})
				if err != nil {
					return perfSummary{}, fmt.Errorf("subscribe %s to %s: %w", sub, topic, err)
				}
				consumers = append(consumers, c)
			}
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if f.duration > 0 {
		runCtx, cancel = context.WithTimeout(runCtx, f.duration)
		defer cancel()
	}
	stats := newPerfStats()
	stopReport := startReporter(stats, "consume", f.interval, progress)
	start := time.Now()
	var claimed atomic.Int64
	errs := make(chan error, len(consumers))
	var wg sync.WaitGroup
	for _, c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				if f.rate > 0 && !sleepUntil(runCtx, start.Add(time.Duration(float64(k)/f.rate*float64(time.Second)))) {
					return
				}
				msg, err := c.Receive(runCtx)
				if err != nil {
					if runCtx.Err() == nil {
						errs <- fmt.Errorf("receive: %w", err)
						cancel()
					}
					return
				}
				last := false
				if f.count > 0 {
					n := claimed.Add(1)
					if n > f.count {
						return // one too many: left unacknowledged
					}
					last = n == f.count
				}
				stats.record(max(time.Since(msg.PublishTime()), 0), len(msg.Payload()), nil)
				if err := c.Ack(msg); err != nil {
					errs <- fmt.Errorf("ack: %w", err)
					cancel()
					return
				}
				if last {
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopReport()
	select {
	case err := <-errs:
		return perfSummary{}, err
	default:
	}
	return stats.summary(strings.Join(topics, ","), "end_to_end", elapsed), nil
}

// perfStats collects what a perf run reports. Callbacks from several
// producer goroutines record into it.
type perfStats struct {
	mu            sync.Mutex // guards everything below
	interval      *latencyHist
	total         *latencyHist
	intervalMsgs  int64
	intervalBytes int64
	totalMsgs     int64
	totalBytes    int64
	errors        int64
	firstErr      error
}

func newPerfStats() *perfStats {
	return &perfStats{interval: newLatencyHist(), total: newLatencyHist()}
}

func (s *perfStats) record(lat time.Duration, size int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errors++
		if s.firstErr == nil {
			s.firstErr = err
		}
		return
	}
	s.interval.record(lat)
	s.intervalMsgs++
	s.intervalBytes += int64(size)
}

// takeInterval returns the counts since the last call and folds them into
// the totals.
func (s *perfStats) takeInterval() (msgs, bytes, errs int64, h *latencyHist, firstErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h = s.interval
	msgs, bytes = s.intervalMsgs, s.intervalBytes
	s.total.merge(h)
	s.totalMsgs += msgs
	s.totalBytes += bytes
	s.interval = newLatencyHist()
	s.intervalMsgs, s.intervalBytes = 0, 0
	errs, firstErr = s.errors, s.firstErr
	s.firstErr = nil // report each first error once
	return msgs, bytes, errs, h, firstErr
}

// startReporter prints a progress line every interval until the returned
// stop function is called (which waits for the goroutine).
func startReporter(s *perfStats, what string, interval time.Duration, w io.Writer) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				msgs, bytes, errs, h, firstErr := s.takeInterval()
				secs := now.Sub(last).Seconds()
				last = now
				fmt.Fprintf(w, "%s: %9.1f msg/s %8.2f MB/s  latency ms p50 %s p99 %s p99.9 %s max %s  errors %d\n",
					what, float64(msgs)/secs, float64(bytes)/secs/1e6,
					fmtMs(h.quantile(0.5)), fmtMs(h.quantile(0.99)), fmtMs(h.quantile(0.999)), fmtMs(h.max), errs)
				if firstErr != nil {
					fmt.Fprintf(w, "%s: error: %v\n", what, firstErr)
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}

func (s *perfStats) summary(topic, kind string, elapsed time.Duration) perfSummary {
	s.takeInterval()
	s.mu.Lock()
	defer s.mu.Unlock()
	secs := elapsed.Seconds()
	sum := perfSummary{
		Topic:       topic,
		Messages:    s.totalMsgs,
		Bytes:       s.totalBytes,
		Errors:      s.errors,
		Seconds:     round3(secs),
		LatencyKind: kind,
		Latency: latencySummary{
			P50:  ms(s.total.quantile(0.5)),
			P99:  ms(s.total.quantile(0.99)),
			P999: ms(s.total.quantile(0.999)),
			Max:  ms(s.total.max),
			Mean: ms(s.total.mean()),
		},
	}
	if secs > 0 {
		sum.MsgPerSec = round3(float64(s.totalMsgs) / secs)
		sum.MBPerSec = round3(float64(s.totalBytes) / secs / 1e6)
	}
	return sum
}

// perfSummary is the final result of `isobar perf produce|consume`.
type perfSummary struct {
	Topic       string         `json:"topic"`
	Messages    int64          `json:"messages"`
	Bytes       int64          `json:"bytes"`
	Errors      int64          `json:"errors"`
	Seconds     float64        `json:"seconds"`
	MsgPerSec   float64        `json:"msg_per_sec"`
	MBPerSec    float64        `json:"mb_per_sec"`
	LatencyKind string         `json:"latency_kind"` // "publish" or "end_to_end"
	Latency     latencySummary `json:"latency_ms"`
}

type latencySummary struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func printPerfSummary(w io.Writer, s perfSummary, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(s)
	}
	_, err := fmt.Fprintf(w, "%s: %d messages, %d bytes in %.1fs: %.1f msg/s, %.2f MB/s, %d errors\n"+
		"%s latency ms: p50 %.3f p99 %.3f p99.9 %.3f max %.3f mean %.3f\n",
		s.Topic, s.Messages, s.Bytes, s.Seconds, s.MsgPerSec, s.MBPerSec, s.Errors,
		s.LatencyKind, s.Latency.P50, s.Latency.P99, s.Latency.P999, s.Latency.Max, s.Latency.Mean)
	return err
}

func ms(d time.Duration) float64   { return round3(float64(d) / float64(time.Millisecond)) }
func fmtMs(d time.Duration) string { return strconv.FormatFloat(ms(d), 'f', 2, 64) }
func round3(x float64) float64     { return math.Round(x*1000) / 1000 }

// latencyHist is a log-linear histogram of durations in microseconds, in
// the style of HdrHistogram: values below 2^histSubBits are exact, larger
// ones fall into buckets 1/2^(histSubBits-1) of their magnitude wide, so a
// quantile is off by less than 1/64 (1.6%). Memory is fixed (histBuckets
// counters) whatever the number of samples; values above histMaxMicros
// (about 12.7 days) are clamped.
type latencyHist struct {
	counts [histBuckets]uint64
	n      uint64
	sum    time.Duration
	max    time.Duration
}

const (
	histSubBits   = 7
	histHalf      = 1 << (histSubBits - 1)
	histMaxShift  = 34
	histBuckets   = (histMaxShift+1)*histHalf + histHalf
	histMaxMicros = 1<<(histMaxShift+histSubBits) - 1
)

func newLatencyHist() *latencyHist { return &latencyHist{} }

func histBucket(us uint64) int {
	if us > histMaxMicros {
		us = histMaxMicros
	}
	if us < 1<<histSubBits {
		return int(us)
	}
	shift := bits.Len64(us) - histSubBits
	return shift*histHalf + int(us>>shift)
}

// histUpper is the largest microsecond value that lands in bucket i.
func histUpper(i int) uint64 {
	if i < 1<<histSubBits {
		return uint64(i)
	}
	shift := (i - histHalf) / histHalf
	mant := uint64(i - shift*histHalf)
	return (mant+1)<<shift - 1
}

func (h *latencyHist) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[histBucket(uint64(d/time.Microsecond))]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

func (h *latencyHist) merge(o *latencyHist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

func (h *latencyHist) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// quantile returns the q-quantile (0 < q ≤ 1): the upper edge of the
// bucket holding the ceil(q·n)-th smallest sample, capped at the maximum.
func (h *latencyHist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			if i == histBuckets-1 {
				return h.max // the last bucket also holds clamped values
			}
			return min(time.Duration(histUpper(i))*time.Microsecond, h.max)
		}
	}
	return h.max
}

// payloadGen makes deterministic JSON documents of an exact size whose
// field values vary from message to message, so that payloads neither
// repeat nor compress unrealistically well. Sizes below ~40 bytes give
// random lowercase text instead of JSON.
type payloadGen struct {
	rng  *rand.Rand
	size int
	seq  uint64
}

func newPayloadGen(seed uint64, size int) *payloadGen {
	return &payloadGen{rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), size: size}
}

var (
	genWords = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel india juliet
		kilo lima mike november oscar papa quebec romeo sierra tango uniform victor whiskey
		xray yankee zulu amber basalt cobalt dune ember fjord glacier harbor iris jade kelp
		lagoon meadow nectar onyx pebble quartz reef saffron tundra umber violet willow`)
	genRegions = []string{"eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-south-1", "ap-northeast-1", "sa-east-1"}
	genLevels  = []string{"debug", "info", "info", "info", "warn", "error"}
	genEvents  = []string{"page_view", "click", "purchase", "signup", "logout", "search", "add_to_cart"}
)

// next returns a new payload of exactly the generator's size.
func (g *payloadGen) next() []byte {
	g.seq++
	r := g.rng
	b := make([]byte, 0, g.size+32)
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, g.seq, 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, 1_767_225_600_000+int64(g.seq)*1000+r.Int64N(1000), 10)
	full := len(b)
	b = append(b, `,"user":"u`...)
	b = strconv.AppendUint(b, r.Uint64N(1_000_000), 10)
	b = append(b, `","event":"`...)
	b = append(b, genEvents[r.IntN(len(genEvents))]...)
	b = append(b, `","region":"`...)
	b = append(b, genRegions[r.IntN(len(genRegions))]...)
	b = append(b, `","level":"`...)
	b = append(b, genLevels[r.IntN(len(genLevels))]...)
	b = append(b, `","amount":`...)
	b = strconv.AppendFloat(b, float64(r.IntN(10_000_000))/100, 'f', 2, 64)
	b = append(b, `,"ok":`...)
	b = strconv.AppendBool(b, r.IntN(10) != 0)
	b = append(b, `,"session":"`...)
	b = strconv.AppendUint(b, r.Uint64(), 16)
	b = append(b, '"')
	const textOpen, textClose = `,"text":"`, `"}`
	if len(b)+len(textOpen)+len(textClose) > g.size {
		b = b[:full] // too small for every field: keep seq and ts only
	}
	if len(b)+len(textOpen)+len(textClose) > g.size {
		b = b[:0]
		for len(b) < g.size {
			b = append(b, byte('a'+r.IntN(26)))
		}
		return b
	}
	b = append(b, textOpen...)
	limit := g.size - len(textClose)
	for {
		w := genWords[r.IntN(len(genWords))]
		if len(b)+1+len(w) > limit {
			break
		}
		if b[len(b)-1] != '"' {
			b = append(b, ' ')
		}
		b = append(b, w...)
	}
	for len(b) < limit {
		b = append(b, byte('a'+r.IntN(26)))
	}
	return append(b, textClose...)
}
