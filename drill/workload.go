package drill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// SubscriptionName is the durable subscription the workload's consumer
// uses: of type Failover, so that the subscription's messages reach one
// consumer at a time, in order (a second instance of the application
// would stand by).
const SubscriptionName = "drill"

// maxBehind is how far a producer may fall behind its schedule (while
// its client blocks, e.g. with a full pending queue) before it gives up
// the sends it missed rather than bursting to catch up.
const maxBehind = 100 * time.Millisecond

// recorder holds what the workload saw. Its mutex guards every field;
// the client's callbacks and the workload's goroutines write, the driver
// reads.
type recorder struct {
	run string

	mu sync.Mutex
	// sends[p][seq]: producer p's messages, in sequence order.
	sends [][]Send
	// pending[p] is the lowest sequence of producer p not yet completed
	// (acknowledged or failed).
	pending    []int64
	closed     []bool
	lastAck    []time.Time
	deliveries []Delivery
	// received holds every message delivered at least once.
	received                         map[Key]bool
	foreign                          int
	receiveErrors, ackErrors         int
	producersClosed, consumersClosed int
	// onSendError is told of each failed send (the fault detector).
	onSendError func(at time.Time, err error)
}

func newRecorder(run string, producers int) *recorder {
	return &recorder{
		run:      run,
		sends:    make([][]Send, producers),
		pending:  make([]int64, producers),
		closed:   make([]bool, producers),
		lastAck:  make([]time.Time, producers),
		received: map[Key]bool{},
	}
}

func (r *recorder) sent(p int, seq int64, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sends[p] = append(r.sends[p], Send{Key: Key{p, seq}, Sent: at})
}

func (r *recorder) completed(p int, seq int64, at time.Time, err error) {
	r.mu.Lock()
	s := &r.sends[p][seq]
	if err != nil {
		s.Err = err.Error()
		if errors.Is(err, pulsar.ErrProducerClosed) && !r.closed[p] {
			r.closed[p] = true
			r.producersClosed++
		}
	} else {
		s.Acked = at
		r.lastAck[p] = at
	}
	for r.pending[p] < int64(len(r.sends[p])) {
		q := r.sends[p][r.pending[p]]
		if q.Acked.IsZero() && q.Err == "" {
			break
		}
		r.pending[p]++
	}
	hook := r.onSendError
	r.mu.Unlock()
	if err != nil && hook != nil {
		hook(at, err)
	}
}

// oldestPending is the send time of the oldest message any producer is
// still waiting on (zero if none).
func (r *recorder) oldestPending() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var oldest time.Time
	for p, low := range r.pending {
		if low < int64(len(r.sends[p])) {
			if t := r.sends[p][low].Sent; oldest.IsZero() || t.Before(oldest) {
				oldest = t
			}
		}
	}
	return oldest
}

// pendingCount is how many sends still wait for their outcome.
func (r *recorder) pendingCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for p, ss := range r.sends {
		for _, s := range ss[r.pending[p]:] {
			if s.Acked.IsZero() && s.Err == "" {
				n++
			}
		}
	}
	return n
}

// ackedSince reports whether every producer has had an acknowledgement
// after t.
func (r *recorder) ackedSince(t time.Time) bool {
	return r.ackedSinceFirst(t, len(r.lastAck))
}

// ackedSinceFirst reports whether producers 0..n-1 have each had an
// acknowledgement after t.
func (r *recorder) ackedSinceFirst(t time.Time, n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.lastAck[:n] {
		if !a.After(t) {
			return false
		}
	}
	return true
}

// anyAckedSince reports whether some producer has had an
// acknowledgement after t.
func (r *recorder) anyAckedSince(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.lastAck {
		if a.After(t) {
			return true
		}
	}
	return false
}

// deliveredSince reports whether the consumer has received a message
// after t that was acknowledged after t.
func (r *recorder) deliveredSince(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.deliveries) - 1; i >= 0; i-- {
		d := r.deliveries[i]
		if !d.At.After(t) {
			return false
		}
		if d.Producer < len(r.sends) && d.Seq < int64(len(r.sends[d.Producer])) {
			if a := r.sends[d.Producer][d.Seq].Acked; a.After(t) {
				return true
			}
		}
	}
	return false
}

// undelivered counts the messages acknowledged before t that the
// consumer has not received.
func (r *recorder) undelivered(t time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ss := range r.sends {
		for _, s := range ss {
			if !s.Acked.IsZero() && s.Acked.Before(t) {
				if !r.received[s.Key] {
					n++
				}
			}
		}
	}
	return n
}

// ackedBefore returns the messages acknowledged before t.
func (r *recorder) ackedBefore(t time.Time) map[Key]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[Key]bool{}
	for _, ss := range r.sends {
		for _, s := range ss {
			if !s.Acked.IsZero() && s.Acked.Before(t) {
				out[s.Key] = true
			}
		}
	}
	return out
}

func (r *recorder) delivered(d Delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries = append(r.deliveries, d)
	r.received[d.Key] = true
}

func (r *recorder) count(f func(r *recorder)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// fill copies what was recorded into l.
func (r *recorder) fill(l *Log) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.Sends = l.Sends[:0]
	for _, ss := range r.sends {
		l.Sends = append(l.Sends, ss...)
	}
	l.Deliveries = append([]Delivery(nil), r.deliveries...)
	l.Foreign = r.foreign
	l.ReceiveErrors, l.AckErrors = r.receiveErrors, r.ackErrors
	l.ProducersClosed, l.ConsumersClosed = r.producersClosed, r.consumersClosed
}

// workload is the application the drill watches: producers sending keyed
// drill payloads at a steady rate and a consumer acknowledging
// everything, all through one client.
type workload struct {
	rec       *recorder
	client    pulsar.Client
	ownClient bool // close closes client
	spec      workloadSpec
	producers []pulsar.Producer
	consumer  pulsar.Consumer

	stopSend chan struct{}
	stopOnce sync.Once      // closes stopSend
	sendWG   sync.WaitGroup // the producers' loops
	inflight sync.WaitGroup // sends whose callback has not run
	recvStop context.CancelFunc
	recvWG   sync.WaitGroup
}

// workloadSpec is what one client of a workload does on one topic.
type workloadSpec struct {
	topic string
	// producers are the recorder's producers this client sends for (their
	// payloads' and names' numbers); each sends one message every
	// interval.
	producers []int
	interval  time.Duration
	// subscription, when set, is the durable Failover subscription of
	// the consumer, which records its deliveries as consumer.
	subscription string
	consumer     int
	// keyBySeq gives each message its sequence number as key (spreading
	// a producer's messages over a partitioned topic's partitions)
	// rather than the producer's name.
	keyBySeq bool
}

// newClient is a Pulsar client with the library's default settings but
// for its logger.
func newClient(url string, logger *slog.Logger) (pulsar.Client, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, Logger: plog.NewLoggerWithSlog(logger)})
	if err != nil {
		return nil, fmt.Errorf("drill: pulsar client for %s: %w", url, err)
	}
	return c, nil
}

// startWorkload subscribes the consumer (from the earliest message),
// creates the producers and starts sending rate messages per second in
// all, through a client of its own.
func startWorkload(ctx context.Context, url, topic string, rec *recorder, producers, rate int, logger *slog.Logger) (*workload, error) {
	client, err := newClient(url, logger)
	if err != nil {
		return nil, err
	}
	spec := workloadSpec{topic: topic, subscription: SubscriptionName,
		interval: time.Duration(float64(time.Second) * float64(producers) / float64(rate))}
	for i := range producers {
		spec.producers = append(spec.producers, i)
	}
	w, err := attachWorkload(ctx, client, rec, spec)
	if err != nil {
		client.Close()
		return nil, err
	}
	w.ownClient = true
	return w, nil
}

// attachWorkload starts spec on client (which it does not close):
// subscribes the consumer, if any, from the earliest message, creates
// the producers and starts sending.
func attachWorkload(ctx context.Context, client pulsar.Client, rec *recorder, spec workloadSpec) (*workload, error) {
	w := &workload{rec: rec, client: client, spec: spec, stopSend: make(chan struct{})}
	if spec.subscription != "" {
		err := retry(ctx, func() (err error) {
			w.consumer, err = client.Subscribe(pulsar.ConsumerOptions{
				Topic:                       spec.topic,
				SubscriptionName:            spec.subscription,
				Type:                        pulsar.Failover,
				SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
			})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("drill: subscribe to %s: %w", spec.topic, err)
		}
	}
	for _, i := range spec.producers {
		var p pulsar.Producer
		err := retry(ctx, func() (err error) {
			p, err = client.CreateProducer(pulsar.ProducerOptions{Topic: spec.topic, Name: fmt.Sprintf("drill-%s-%d", rec.run, i)})
			return err
		})
		if err != nil {
			w.close()
			return nil, fmt.Errorf("drill: producer %d on %s: %w", i, spec.topic, err)
		}
		w.producers = append(w.producers, p)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.recvStop = cancel
	if w.consumer != nil {
		w.recvWG.Add(1)
		go w.receive(rctx)
	}
	for j, p := range w.producers {
		w.sendWG.Add(1)
		go w.send(ctx, spec.producers[j], p, spec.interval)
	}
	return w, nil
}

// retry calls f until it succeeds, ctx ends or startTimeout passes.
// The client gives up creating a producer or consumer on the first
// ServiceNotReady, which a region answers while it takes in a change of
// primary (the drill may just have moved the namespace's primary back).
func retry(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(startTimeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		if perr := pause(ctx, 250*time.Millisecond); perr != nil {
			return err
		}
	}
}

// send is producer i's loop: one message every interval, on schedule;
// sends missed while the client blocked are skipped, not caught up.
func (w *workload) send(ctx context.Context, i int, p pulsar.Producer, interval time.Duration) {
	defer w.sendWG.Done()
	tick := max(interval, time.Millisecond)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	key := fmt.Sprintf("p%d", i)
	start := time.Now()
	var slots, seq int64
	for {
		select {
		case <-w.stopSend:
			return
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		due := int64(time.Since(start)/interval) + 1 - slots
		if limit := int64(maxBehind/interval) + 1; due > limit {
			slots += due - limit
			due = limit
		}
		for ; due > 0; due-- {
			slots++
			now := time.Now()
			n := seq
			seq++
			w.rec.sent(i, n, now)
			w.inflight.Add(1)
			payload := AppendPayload(nil, Payload{Run: w.rec.run, Producer: i, Seq: n, Sent: now})
			if w.spec.keyBySeq {
				key = strconv.FormatInt(n, 10)
			}
			p.SendAsync(context.WithoutCancel(ctx), &pulsar.ProducerMessage{Payload: payload, Key: key}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				w.rec.completed(i, n, time.Now(), err)
				w.inflight.Done()
			})
		}
	}
}

// receive is the consumer's loop: record and acknowledge every message.
func (w *workload) receive(ctx context.Context) {
	defer w.recvWG.Done()
	for {
		m, err := w.consumer.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var pe *pulsar.Error
			if errors.As(err, &pe) && pe.Result() == pulsar.ConsumerClosed {
				w.rec.count(func(r *recorder) { r.consumersClosed++ })
				return
			}
			w.rec.count(func(r *recorder) { r.receiveErrors++ })
			continue
		}
		at := time.Now()
		p, perr := ParsePayload(m.Payload())
		if perr != nil || p.Run != w.rec.run || p.Producer >= len(w.rec.sends) {
			w.rec.count(func(r *recorder) { r.foreign++ })
		} else {
			_, late := m.Properties()[LateProperty]
			w.rec.delivered(Delivery{Key: Key{p.Producer, p.Seq}, Consumer: w.spec.consumer, Partition: partitionOf(m.Topic()), At: at, Late: late})
		}
		if err := w.consumer.Ack(m); err != nil {
			w.rec.count(func(r *recorder) { r.ackErrors++ })
		}
	}
}

// stopSending stops the producers' loops and waits until every send has
// its outcome (the client's send timeout bounds it) or ctx ends.
func (w *workload) stopSending(ctx context.Context) error {
	w.stopOnce.Do(func() { close(w.stopSend) })
	w.sendWG.Wait()
	done := make(chan struct{})
	go func() {
		w.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("drill: %d sends still without an outcome: %w", w.rec.pendingCount(), ctx.Err())
	}
}

// halt stops the producers' loops and the consumer's receiving at once:
// nothing more is sent or recorded as delivered. The sends under way
// complete when the producers close.
func (w *workload) halt() {
	w.stopOnce.Do(func() { close(w.stopSend) })
	w.sendWG.Wait()
	if w.recvStop != nil {
		w.recvStop()
		w.recvWG.Wait()
	}
}

// close stops receiving and closes the clients.
func (w *workload) close() {
	if w.recvStop != nil {
		w.recvStop()
		w.recvWG.Wait()
	}
	for _, p := range w.producers {
		p.Close()
	}
	if w.consumer != nil {
		w.consumer.Close()
	}
	if w.ownClient {
		w.client.Close()
	}
}

// partitionOf is the partition number of a partition's topic name
// ("...-partition-3"), 0 for any other topic.
func partitionOf(topic string) int {
	i := strings.LastIndex(topic, partitionSuffix)
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(topic[i+len(partitionSuffix):])
	if err != nil {
		return 0
	}
	return n
}

// partitionSuffix joins a partitioned topic's name and a partition's
// number.
const partitionSuffix = "-partition-"

// scanTopic reads region's copy of topic from its earliest message with a
// Reader of a client of that region alone, until it has read everything
// (HasNext) or stop says so of a message of this run.
func scanTopic(ctx context.Context, url, region, topic, run string, producers int, logger *slog.Logger, stop func(Payload) bool) (*Scan, error) {
	sc := &Scan{Region: region, Started: time.Now()}
	client, err := newClient(url, logger)
	if err != nil {
		return sc, err
	}
	defer client.Close()
	rd, err := client.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		return sc, fmt.Errorf("drill: reader of %s in %s: %w", topic, region, err)
	}
	defer rd.Close()
	for rd.HasNext() {
		m, err := rd.Next(ctx)
		if err != nil {
			return sc, fmt.Errorf("drill: read %s in %s: %w", topic, region, err)
		}
		p, perr := ParsePayload(m.Payload())
		if perr != nil || p.Run != run || p.Producer >= producers {
			sc.Foreign++
			continue
		}
		_, late := m.Properties()[LateProperty]
		sc.Copies = append(sc.Copies, Copy{Key: Key{p.Producer, p.Seq}, Late: late})
		if stop != nil && stop(p) {
			break
		}
	}
	sc.Done = time.Now()
	return sc, nil
}
