// Command pulsarcheck is the compose test's Pulsar client: it produces
// messages in one region and consumes them in another with the real
// Pulsar Go client (github.com/apache/pulsar-client-go), in both
// directions at once, and reports whether every message arrived exactly
// once and in order. The test runs it on the host, through each region's
// proxy (published on 127.0.0.1; no hosts lines):
//
//	pulsarcheck -region us-east=pulsar://127.0.0.1:6650 \
//	            -region eu-west=pulsar://127.0.0.1:6750 \
//	            -namespace geo/replicated -round 3 -n 20
//
// For each ordered pair of regions (from, to) it uses the topic
// persistent://<namespace>/<from>-to-<to> and the durable subscription
// -subscription in region to, made at the first round at the earliest
// position. A round sends -n messages "r<round>-<i>" in from, then
// receives in to until it has all of them, acknowledging each (with the
// broker's response), then keeps receiving for -grace: any message of an
// earlier round, any message twice and any message out of order is an
// error. It prints one JSON line per direction and exits 0 when both are
// clean, 1 otherwise, 2 on bad flags. With -idle it only waits for a
// signal (the main process of a container to docker exec checks in).
//
// With -produce D it only produces, in the one region given, for D:
// messages at -rate a second to persistent://<namespace>/<region>-steady,
// each send waited for (up to its 30 s send timeout), and prints one JSON
// line counting the sends that failed; it exits 1 when any did. The
// compose test runs it while a metadata store member is down.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

type region struct{ name, url string }

type regionFlags []region

func (r *regionFlags) String() string { return fmt.Sprint(*r) }

func (r *regionFlags) Set(s string) error {
	name, url, ok := strings.Cut(s, "=")
	if !ok || name == "" || !strings.HasPrefix(url, "pulsar://") {
		return fmt.Errorf("%q is not name=pulsar://host:port[,host:port]", s)
	}
	*r = append(*r, region{name, url})
	return nil
}

// Result is what one direction of one round saw.
type Result struct {
	From       string   `json:"from"`
	To         string   `json:"to"`
	Topic      string   `json:"topic"`
	Round      int      `json:"round"`
	Sent       int      `json:"sent"`
	Received   int      `json:"received"`
	Missing    []int    `json:"missing,omitempty"`
	Duplicates []string `json:"duplicates,omitempty"`
	Unexpected []string `json:"unexpected,omitempty"`
	OutOfOrder []string `json:"outOfOrder,omitempty"`
	Errors     []string `json:"errors,omitempty"`
	SendMs     int64    `json:"sendMs"`
	ArriveMs   int64    `json:"arriveMs"`
}

// OK reports a clean round.
func (r *Result) OK() bool {
	return r.Sent == r.Received && len(r.Missing)+len(r.Duplicates)+len(r.Unexpected)+len(r.OutOfOrder)+len(r.Errors) == 0
}

type options struct {
	namespace, subscription string
	round, n                int
	grace                   time.Duration
	logger                  plog.Logger
}

func main() {
	var regions regionFlags
	o := options{}
	flag.Var(&regions, "region", "name=pulsar://host:port[,host:port] (exactly two)")
	flag.StringVar(&o.namespace, "namespace", "geo/replicated", "namespace replicated to both regions")
	flag.StringVar(&o.subscription, "subscription", "pulsarcheck", "durable subscription in the consuming region")
	flag.IntVar(&o.round, "round", 0, "round number (messages are r<round>-<i>)")
	flag.IntVar(&o.n, "n", 20, "messages per direction")
	timeout := flag.Duration("timeout", 2*time.Minute, "bound on the whole check")
	flag.DurationVar(&o.grace, "grace", 2*time.Second, "how long to wait for unexpected extra messages after the last expected one")
	verbose := flag.Bool("v", false, "log the Pulsar client's warnings")
	produceFor := flag.Duration("produce", 0, "only produce in the one -region for this long, counting failed sends")
	rate := flag.Int("rate", 20, "with -produce: messages a second")
	idle := flag.Bool("idle", false, "do nothing until SIGTERM or SIGINT (the main process of a container the checks are run in with docker exec)")
	flag.Parse()
	if *idle {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		<-ctx.Done()
		return
	}
	if *produceFor > 0 {
		if len(regions) != 1 || *rate < 1 || flag.NArg() != 0 {
			fmt.Fprintln(os.Stderr, "pulsarcheck: -produce wants one -region, -rate >= 1 and no arguments")
			os.Exit(2)
		}
		o.logger = plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		r := produce(ctx, regions[0], o, *produceFor, *rate)
		json.NewEncoder(os.Stdout).Encode(r)
		if r.Failed > 0 || r.Sent == 0 {
			os.Exit(1)
		}
		return
	}
	if len(regions) != 2 || o.n < 1 || o.round < 0 || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "pulsarcheck: want two -region flags, -n >= 1, -round >= 0 and no arguments")
		flag.Usage()
		os.Exit(2)
	}
	lvl := slog.LevelError
	if *verbose {
		lvl = slog.LevelWarn
	}
	o.logger = plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})))
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	results := make([]*Result, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = check(ctx, regions[i], regions[1-i], o)
		}()
	}
	wg.Wait()
	ok := true
	enc := json.NewEncoder(os.Stdout)
	for _, r := range results {
		enc.Encode(r)
		ok = ok && r.OK()
	}
	if !ok {
		os.Exit(1)
	}
}

// check runs one round of from -> to.
func check(ctx context.Context, from, to region, o options) *Result {
	res := &Result{From: from.name, To: to.name, Round: o.round,
		Topic: fmt.Sprintf("persistent://%s/%s-to-%s", o.namespace, from.name, to.name)}
	fail := func(format string, args ...any) *Result {
		res.Errors = append(res.Errors, fmt.Sprintf(format, args...))
		return res
	}
	cc, err := newClient(to.url, o.logger)
	if err != nil {
		return fail("client for %s: %v", to.name, err)
	}
	defer cc.Close()
	pc, err := newClient(from.url, o.logger)
	if err != nil {
		return fail("client for %s: %v", from.name, err)
	}
	defer pc.Close()

	// Subscribe first: at round 0 this makes the subscription, at the
	// earliest position, before anything is sent.
	var consumer pulsar.Consumer
	err = retry(ctx, func() (err error) {
		consumer, err = cc.Subscribe(pulsar.ConsumerOptions{
			Topic: res.Topic, SubscriptionName: o.subscription, Type: pulsar.Exclusive,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
			AckWithResponse:             true,
		})
		return err
	})
	if err != nil {
		return fail("subscribe in %s: %v", to.name, err)
	}
	defer consumer.Close()
	var producer pulsar.Producer
	err = retry(ctx, func() (err error) {
		producer, err = pc.CreateProducer(pulsar.ProducerOptions{Topic: res.Topic, SendTimeout: 30 * time.Second})
		return err
	})
	if err != nil {
		return fail("producer in %s: %v", from.name, err)
	}
	defer producer.Close()

	start := time.Now()
	for i := range o.n {
		payload := fmt.Sprintf("r%d-%d", o.round, i)
		if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(payload)}); err != nil {
			// A message whose send failed may or may not be stored:
			// the check cannot tell a loss from a duplicate any more.
			return fail("send %s in %s: %v", payload, from.name, err)
		}
		res.Sent++
	}
	res.SendMs = time.Since(start).Milliseconds()

	seen := make([]bool, o.n)
	last := -1
	receive := func(ctx context.Context) error {
		msg, err := consumer.Receive(ctx)
		if err != nil {
			return err
		}
		payload := string(msg.Payload())
		round, i, ok := parse(payload)
		switch {
		case !ok || round != o.round || i >= o.n:
			res.Unexpected = append(res.Unexpected, payload)
		case seen[i]:
			res.Duplicates = append(res.Duplicates, payload)
		default:
			seen[i] = true
			res.Received++
			if i < last {
				res.OutOfOrder = append(res.OutOfOrder, fmt.Sprintf("%s after r%d-%d", payload, o.round, last))
			}
			last = max(last, i)
		}
		if err := consumer.Ack(msg); err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("ack %s in %s: %v", payload, to.name, err))
		}
		return nil
	}
	for res.Received < o.n {
		if err := receive(ctx); err != nil {
			res.ArriveMs = time.Since(start).Milliseconds()
			for i, ok := range seen {
				if !ok {
					res.Missing = append(res.Missing, i)
				}
			}
			return fail("receive in %s: %v (%d of %d)", to.name, err, res.Received, o.n)
		}
	}
	res.ArriveMs = time.Since(start).Milliseconds()
	// Anything more is a duplicate or a message of another round.
	gctx, cancel := context.WithTimeout(ctx, o.grace)
	defer cancel()
	for {
		if err := receive(gctx); err != nil {
			if gctx.Err() == nil {
				res.Errors = append(res.Errors, fmt.Sprintf("receive in %s: %v", to.name, err))
			}
			return res
		}
	}
}

// parse splits "r<round>-<i>".
func parse(payload string) (round, i int, ok bool) {
	r, n, found := strings.Cut(strings.TrimPrefix(payload, "r"), "-")
	if !found || !strings.HasPrefix(payload, "r") {
		return 0, 0, false
	}
	round, err1 := strconv.Atoi(r)
	i, err2 := strconv.Atoi(n)
	return round, i, err1 == nil && err2 == nil && i >= 0
}

func newClient(url string, logger plog.Logger) (pulsar.Client, error) {
	return pulsar.NewClient(pulsar.ClientOptions{
		URL:               url,
		ConnectionTimeout: 5 * time.Second,
		OperationTimeout:  15 * time.Second,
		Logger:            logger,
	})
}

// retry calls op until it succeeds or ctx ends (a restarted broker may
// still be handing its bundles over when the check starts).
func retry(ctx context.Context, op func() error) error {
	for {
		err := op()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Steady is what -produce saw.
type Steady struct {
	Region string   `json:"region"`
	Topic  string   `json:"topic"`
	Sent   int      `json:"sent"`
	Failed int      `json:"failed"`
	Errors []string `json:"errors,omitempty"` // the first few
	// SlowestMs is the longest a send waited for its receipt.
	SlowestMs int64 `json:"slowestMs"`
}

// produce sends in region r for d at rate messages a second, one send at
// a time, and counts the sends that fail.
func produce(ctx context.Context, r region, o options, d time.Duration, rate int) *Steady {
	res := &Steady{Region: r.name, Topic: fmt.Sprintf("persistent://%s/%s-steady", o.namespace, r.name)}
	failed := func(err error) {
		res.Failed++
		if len(res.Errors) < 5 {
			res.Errors = append(res.Errors, err.Error())
		}
	}
	c, err := newClient(r.url, o.logger)
	if err != nil {
		failed(err)
		return res
	}
	defer c.Close()
	var producer pulsar.Producer
	if err := retry(ctx, func() (err error) {
		producer, err = c.CreateProducer(pulsar.ProducerOptions{Topic: res.Topic, SendTimeout: 30 * time.Second})
		return err
	}); err != nil {
		failed(fmt.Errorf("producer: %w", err))
		return res
	}
	defer producer.Close()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.After(d)
	for i := 0; ; i++ {
		select {
		case <-end:
			return res
		case <-ctx.Done():
			failed(ctx.Err())
			return res
		case <-tick.C:
		}
		st := time.Now()
		if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("steady-%d", i))}); err != nil {
			failed(fmt.Errorf("send %d: %w", i, err))
			continue
		}
		res.Sent++
		res.SlowestMs = max(res.SlowestMs, time.Since(st).Milliseconds())
	}
}
