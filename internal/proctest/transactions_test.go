package proctest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"
)

// The transactional workload of TestProcessTransactionsSurviveKills.
const (
	txnInputs  = 1200 // the input topic's backlog
	txnCount   = 1000 // transactions run
	txnWorkers = 64   // at once
	// txnKillAfter is how many commits have returned when the broker is
	// killed.
	txnKillAfter = 300
	// txnTimeout is the timeout of the transactions that are ended by
	// the client; txnOpenTimeout that of the ones left open.
	txnTimeout     = 30 * time.Second
	txnOpenTimeout = 10 * time.Second
	txnTopicIn     = "persistent://acme/txn/in"
	txnTopicOut    = "persistent://acme/txn/out"
	txnSub         = "work"
)

// What the client saw of one transaction.
type txnOutcome int

const (
	outcomeNone      txnOutcome = iota // never ended by the client: nothing sent, or an operation failed
	outcomeCommitted                   // Commit returned nil
	outcomeAborted                     // aborted on purpose (Abort sent; a commit never was)
	outcomeTimedOut                    // left open on purpose, for the coordinator to time out
	outcomeUnknown                     // Commit was sent and returned an error
)

func (o txnOutcome) String() string {
	return [...]string{"failed before its end", "committed", "aborted", "timed out", "unknown"}[o]
}

// txnJob is one transaction of the workload.
type txnJob struct {
	i       int
	input   string // the input message it received ("" none)
	output  string // the output message it sent, or tried to
	outcome txnOutcome
	err     error // the error that decided the outcome
}

// kind is what the job does at its end: every 10th aborts, one in a
// hundred is left open, the rest commit.
func (j *txnJob) kind() txnOutcome {
	switch {
	case j.i%100 == 50:
		return outcomeTimedOut
	case j.i%10 == 5:
		return outcomeAborted
	}
	return outcomeCommitted
}

// TestProcessTransactionsSurviveKills is the crash test of issue 31: a
// region of OS processes (one etcd member, 3 bookies, 2 brokers, with 2
// transaction coordinators) runs 1,000 consume-transform-produce
// transactions at once (the Pulsar Go client: receive one input message,
// send one output message and acknowledge the input in the transaction,
// then commit; every 10th aborts, a few are left to time out), and the
// broker owning the coordinators (the first case) or the one owning the
// input and output topics (the second) is SIGKILLed while the commits
// run, then restarted. Once every transaction has ended: every committed
// transaction's output is in the output topic exactly once, no aborted
// or timed-out one's is, a transaction whose commit failed (outcome
// unknown to the client) shows at most once; every input message has at
// most one output, its acknowledgement took effect exactly when that
// output is visible: the subscription delivers again, exactly once,
// every input message without a visible output and none with one.
func TestProcessTransactionsSurviveKills(t *testing.T) {
	skipUnlessProcessTests(t)
	for _, victim := range []string{"coordinator-owner", "topic-owner"} {
		t.Run(victim, func(t *testing.T) { testTransactionsSurviveKill(t, victim) })
	}
}

func testTransactionsSurviveKill(t *testing.T, victim string) {
	began := time.Now()
	// One broker first: the coordinators' bundles are placed on it; the
	// second one then takes the topics' bundle, as the least loaded.
	f := StartFederation(t, Layout{
		Regions: []string{"east"}, Metastores: 1, Bookies: 3, Brokers: 1,
		BrokerLeaseTTL: 5 * time.Second,
		BrokerConfig: map[string]any{
			"transactions": map[string]any{"enabled": true, "coordinators": 2},
		},
	}, t.TempDir())
	r := f.Regions[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tcTopics := []string{pulsar.TransactionCoordinatorAssign + "-partition-0", pulsar.TransactionCoordinatorAssign + "-partition-1"}
	for _, tc := range tcTopics {
		placeOn(t, ctx, r, tc, 0)
	}
	f.AddBroker(r)
	if err := Admin(ctx, r.HTTPURLs[0], http.MethodPut, "/admin/v2/tenants/acme", map[string]any{"allowedClusters": []string{"east"}, "adminRoles": []string{}}, nil); err != nil {
		t.Fatal(err)
	}
	// One bundle, so that both topics have the same owner; de-duplication
	// on, so that a send the producer repeats after a crash is stored
	// once.
	if err := Admin(ctx, r.HTTPURLs[0], http.MethodPut, "/admin/v2/namespaces/acme/txn", map[string]any{"bundles": map[string]any{"numBundles": 1}, "deduplicationEnabled": true}, nil); err != nil {
		t.Fatal(err)
	}
	placeOn(t, ctx, r, txnTopicIn, 1)
	owners := map[string]int{}
	for _, name := range append(append([]string{}, tcTopics...), txnTopicIn, txnTopicOut) {
		i, err := r.Owner(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		owners[name] = i
	}
	if owners[tcTopics[0]] != 0 || owners[tcTopics[1]] != 0 || owners[txnTopicIn] != 1 || owners[txnTopicOut] != 1 {
		t.Fatalf("placement: want the coordinators on broker 0 and the topics on broker 1, have %v", owners)
	}
	killed := r.Brokers[0]
	if victim == "topic-owner" {
		killed = r.Brokers[1]
	}
	t.Logf("region ready in %v; coordinators on %s, topics on %s; will kill %s", time.Since(began).Round(time.Millisecond), r.Brokers[0].Name, r.Brokers[1].Name, killed.Name)

	client, err := pulsar.NewClient(pulsar.ClientOptions{
		URL: r.ServiceURL(), EnableTransaction: true,
		OperationTimeout: time.Minute, ConnectionTimeout: 5 * time.Second,
		Logger: txnLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	consumer, err := client.Subscribe(pulsar.ConsumerOptions{
		Topic: txnTopicIn, SubscriptionName: txnSub, Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	inputs := make([]string, txnInputs)
	func() {
		// One message an entry: a transaction acknowledges an entry (the
		// client sends nothing for a message of a batch until the whole
		// batch is acknowledged).
		p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: txnTopicIn, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var wg sync.WaitGroup
		var failed atomic.Int32
		for i := range inputs {
			inputs[i] = fmt.Sprintf("in-%04d", i)
			wg.Add(1)
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(inputs[i])}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil {
					failed.Add(1)
				}
				wg.Done()
			})
		}
		wg.Wait()
		if failed.Load() > 0 {
			t.Fatalf("%d input messages not sent", failed.Load())
		}
	}()
	// A producer per worker, each sending one message at a time: the Go
	// client (v0.19.0) numbers a message before it queues it, so
	// concurrent sends on one producer may go out of sequence order, and
	// de-duplication then drops the late one as a duplicate (answered
	// -1:-1: the send succeeds, the message is lost; apache/pulsar-client-go
	// issue 1407, pull request 1411).
	producers := make([]pulsar.Producer, txnWorkers)
	for i := range producers {
		if producers[i], err = client.CreateProducer(pulsar.ProducerOptions{Topic: txnTopicOut, DisableBatching: true, SendTimeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
		defer producers[i].Close()
	}

	// The workload.
	jobs := make([]*txnJob, txnCount)
	next := make(chan *txnJob, txnCount)
	for i := range jobs {
		jobs[i] = &txnJob{i: i}
		next <- jobs[i]
	}
	close(next)
	var commits atomic.Int32
	var wg sync.WaitGroup
	workStart := time.Now()
	for _, producer := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				runTxnJob(ctx, client, consumer, producer, j)
				if j.outcome == outcomeCommitted {
					commits.Add(1)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	finished := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}

	waitFor(t, 2*time.Minute, fmt.Sprintf("%d commits", txnKillAfter), func() bool { return commits.Load() >= txnKillAfter || finished() })
	if finished() {
		t.Fatalf("the workload ended before the kill (%d commits)", commits.Load())
	}
	killedAt := time.Now()
	atKill := commits.Load()
	killed.Kill()
	t.Logf("SIGKILL %s after %d commits (%v into the workload)", killed.Name, atKill, killedAt.Sub(workStart).Round(time.Millisecond))
	// Down until the workload goes on without it, then back.
	waitFor(t, 2*time.Minute, "commits after the kill", func() bool { return commits.Load() >= atKill+100 || finished() })
	resumed := time.Since(killedAt)
	killed.Start()
	killed.WaitReady(90 * time.Second)
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the workload did not finish within 3 minutes of the restart (%d commits)", commits.Load())
	}
	workTook := time.Since(workStart)
	consumer.Close()
	for _, p := range producers {
		p.Close()
	}

	// Settled: no coordinator holds a transaction, the output topic has
	// none ongoing.
	settleStart := time.Now()
	var lastState string
	waitFor(t, 2*time.Minute, "every transaction ended (coordinators and the output topic's buffer)", func() bool {
		ok, state := txnSettled(ctx, r)
		lastState = state
		return ok
	})
	t.Logf("settled %v after the workload (%s)", time.Since(settleStart).Round(time.Millisecond), lastState)

	// What was seen.
	vclient, err := pulsar.NewClient(pulsar.ClientOptions{URL: r.ServiceURL(), OperationTimeout: time.Minute, Logger: txnLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer vclient.Close()
	committed := map[string]bool{}
	for _, j := range jobs {
		if j.outcome == outcomeCommitted {
			committed[j.output] = true
		}
	}
	outputs := readAllOutputs(t, ctx, vclient, committed)
	visible := map[string]int{} // input -> outputs of it visible
	for out := range outputs {
		in, _, ok := strings.Cut(out, "|")
		if !ok {
			t.Errorf("unexpected output message %q", out)
			continue
		}
		visible[in] += outputs[out]
	}
	expectAgain := map[string]bool{}
	for _, in := range inputs {
		if visible[in] == 0 {
			expectAgain[in] = true
		}
	}
	again := drainInput(t, ctx, vclient, len(expectAgain))

	// Exactly these properties.
	counts := map[txnOutcome]int{}
	var unknownCommitted, unknownAborted int
	bad := 0
	report := func(format string, args ...any) {
		bad++
		if bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	for _, j := range jobs {
		counts[j.outcome]++
		n := 0
		if j.output != "" {
			n = outputs[j.output]
		}
		switch j.outcome {
		case outcomeCommitted:
			if n != 1 {
				report("transaction %d committed: its output %q is visible %d times, want once", j.i, j.output, n)
			}
		case outcomeUnknown:
			if n > 1 {
				report("transaction %d (commit failed: %v): its output %q is visible %d times, want at most once", j.i, j.err, j.output, n)
			}
			if n == 1 {
				unknownCommitted++
			} else {
				unknownAborted++
			}
		default:
			if n != 0 {
				report("transaction %d %s (%v): its output %q is visible %d times, want never", j.i, j.outcome, j.err, j.output, n)
			}
		}
	}
	for out, n := range outputs {
		i, err := strconv.Atoi(out[strings.LastIndexByte(out, '|')+1:])
		if err != nil || i < 0 || i >= len(jobs) || jobs[i].output != out {
			report("output %q (%d times) was sent by no transaction", out, n)
		}
	}
	for _, in := range inputs {
		if visible[in] > 1 {
			report("input %s has %d visible outputs, want at most one", in, visible[in])
		}
		switch {
		case visible[in] > 0 && again[in] > 0:
			report("input %s: an output of it is visible, yet it was delivered again %d times (its acknowledgement did not take effect)", in, again[in])
		case visible[in] == 0 && again[in] != 1:
			report("input %s: no output of it is visible, and it was delivered again %d times, want once", in, again[in])
		}
	}
	for in, n := range again {
		if !strings.HasPrefix(in, "in-") {
			report("unexpected input message %q delivered %d times", in, n)
		}
	}
	if bad > 20 {
		t.Errorf("... %d violations in all", bad)
	}
	if counts[outcomeCommitted] < txnCount/2 {
		t.Errorf("only %d of %d transactions committed", counts[outcomeCommitted], txnCount)
	}
	t.Logf("%s: %d transactions in %v (SIGKILL after %d commits, %d more %v later): %d committed, %d aborted, %d timed out, %d failed before their end, %d unknown (%d of them committed, %d aborted); %d outputs visible; %d inputs delivered again; case took %v",
		victim, txnCount, workTook.Round(time.Millisecond), atKill, 100, resumed.Round(time.Millisecond),
		counts[outcomeCommitted], counts[outcomeAborted], counts[outcomeTimedOut], counts[outcomeNone], counts[outcomeUnknown],
		unknownCommitted, unknownAborted, len(outputs), len(again), time.Since(began).Round(time.Second))
	if t.Failed() {
		var errs []string
		for _, j := range jobs {
			if j.err != nil && len(errs) < 10 {
				errs = append(errs, fmt.Sprintf("%d %s: %v", j.i, j.outcome, j.err))
			}
		}
		t.Logf("some of the errors the client saw:\n%s", strings.Join(errs, "\n"))
	}
}

// runTxnJob runs one transaction of the workload and records what the
// client saw.
func runTxnJob(ctx context.Context, client pulsar.Client, consumer pulsar.Consumer, producer pulsar.Producer, j *txnJob) {
	timeout := txnTimeout
	if j.kind() == outcomeTimedOut {
		timeout = txnOpenTimeout
	}
	var txn pulsar.Transaction
	var err error
	for {
		// A failed NEW_TXN leaves nothing behind but, perhaps, an
		// empty transaction that its coordinator times out.
		if txn, err = client.NewTransaction(timeout); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		j.err = err
		return
	}
	fail := func(err error) {
		j.err = err
		_ = txn.Abort(ctx) // best effort: a commit is never sent
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	msg, err := consumer.Receive(rctx)
	cancel()
	if err != nil {
		fail(fmt.Errorf("receive: %w", err))
		return
	}
	j.input = string(msg.Payload())
	j.output = fmt.Sprintf("%s|%d", j.input, j.i)
	if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(j.output), Transaction: txn}); err != nil {
		fail(fmt.Errorf("send: %w", err))
		return
	}
	if err := consumer.AckWithTxn(msg, txn); err != nil {
		fail(fmt.Errorf("ack: %w", err))
		return
	}
	switch j.kind() {
	case outcomeTimedOut:
		j.outcome = outcomeTimedOut
	case outcomeAborted:
		j.outcome = outcomeAborted
		j.err = txn.Abort(ctx)
	default:
		if s := txn.GetState(); s != pulsar.TxnOpen {
			fail(fmt.Errorf("not committed: the transaction is %v", s))
			return
		}
		if err := txn.Commit(ctx); err != nil {
			j.outcome, j.err = outcomeUnknown, err
			return
		}
		j.outcome = outcomeCommitted
	}
}

// placeOn makes broker want of r own topic's bundle: it asks want to look
// the topic up until want names itself (and so takes the bundle).
func placeOn(t *testing.T, ctx context.Context, r *Region, name string, want int) {
	t.Helper()
	path := "/lookup/v2/topic/persistent/" + strings.TrimPrefix(name, "persistent://")
	var got string
	deadline := time.Now().Add(30 * time.Second)
	for {
		var res struct {
			BrokerURL string `json:"brokerUrl"`
		}
		if err := Admin(ctx, r.HTTPURLs[want], http.MethodGet, path, nil, &res); err != nil {
			got = err.Error()
		} else if got = res.BrokerURL; got == r.ServiceURLs[want] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not placed on %s within 30s (last answer %q)", name, r.Brokers[want].Name, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// txnSettled reports whether no coordinator of r holds a transaction and
// the output topic's buffer has none ongoing, asking any live broker.
func txnSettled(ctx context.Context, r *Region) (bool, string) {
	var state []string
	for _, u := range r.HTTPURLs {
		var stats map[string]struct {
			OngoingTxnSize int64 `json:"ongoingTxnSize"`
			LeastSigBits   int64 `json:"leastSigBits"`
		}
		if err := Admin(ctx, u, http.MethodGet, "/admin/v3/transactions/coordinatorStats", nil, &stats); err != nil {
			state = append(state, err.Error())
			continue
		}
		var tb struct {
			OngoingTxnSize int64 `json:"ongoingTxnSize"`
		}
		if err := Admin(ctx, u, http.MethodGet, "/admin/v3/transactions/transactionBufferStats/"+strings.TrimPrefix(txnTopicOut, "persistent://"), nil, &tb); err != nil {
			state = append(state, err.Error())
			continue
		}
		ids := make([]string, 0, len(stats))
		for id := range stats {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		var parts []string
		ongoing := tb.OngoingTxnSize
		for _, id := range ids {
			parts = append(parts, fmt.Sprintf("coordinator %s: %d ongoing of %d", id, stats[id].OngoingTxnSize, stats[id].LeastSigBits+1))
			ongoing += stats[id].OngoingTxnSize
		}
		parts = append(parts, fmt.Sprintf("output buffer: %d ongoing", tb.OngoingTxnSize))
		return len(stats) == 2 && ongoing == 0, strings.Join(parts, "; ")
	}
	return false, strings.Join(state, "; ")
}

// readAllOutputs reads the output topic from the earliest message,
// counting each payload, until every output in want has come and then
// nothing more for a few seconds (or nothing at all for 30s). It does
// not stop at HasNext: the last message id may name an aborted
// transaction's message, which is never delivered (docs/transactions.md,
// Status).
func readAllOutputs(t *testing.T, ctx context.Context, client pulsar.Client, want map[string]bool) map[string]int {
	t.Helper()
	reader, err := client.CreateReader(pulsar.ReaderOptions{Topic: txnTopicOut, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	out := map[string]int{}
	missing := len(want)
	for {
		wait := 30 * time.Second
		if missing == 0 {
			wait = 3 * time.Second // only extras would come now
		}
		rctx, cancel := context.WithTimeout(ctx, wait)
		m, err := reader.Next(rctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("reading the output topic after %d messages: %v", len(out), err)
		}
		p := string(m.Payload())
		if out[p] == 0 && want[p] {
			missing--
		}
		out[p]++
	}
	if reader.HasNext() {
		t.Logf("the output topic's reader still has a next message by the last message id, though none came (%d read)", len(out))
	}
	return out
}

// drainInput receives from the input subscription with a new consumer:
// want messages, then whatever else arrives within a few seconds.
func drainInput(t *testing.T, ctx context.Context, client pulsar.Client, want int) map[string]int {
	t.Helper()
	c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: txnTopicIn, SubscriptionName: txnSub, Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := map[string]int{}
	n := 0
	for {
		wait := 15 * time.Second
		if n >= want {
			wait = 3 * time.Second // only extras would come now
		}
		rctx, cancel := context.WithTimeout(ctx, wait)
		m, err := c.Receive(rctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("draining the input subscription after %d messages: %v", n, err)
		}
		got[string(m.Payload())]++
		n++
		c.Ack(m)
	}
	if n != want {
		t.Errorf("the input subscription delivered %d messages again, want %d", n, want)
	}
	return got
}

// txnLogger keeps the Pulsar client's logs out of the test's output: the
// crash makes it log many expected errors (reconnections, failed acks).
func txnLogger() plog.Logger {
	l := logrus.New()
	l.SetLevel(logrus.FatalLevel)
	return plog.NewLoggerWithLogrus(l)
}
