package proctest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"
)

// Load is a steady stream of keyed messages: one producer per source
// topic (in its own region), and one Exclusive consumer per (topic,
// region) receiving it, each recording what happened and when.
type Load struct {
	t       testing.TB
	keys    int
	every   time.Duration
	clients map[string]pulsar.Client // by region
	prods   []*loadProducer
	cons    []*loadConsumer
	// prodStop and consStop end the producers and the consumers; pwg and
	// cwg wait for them.
	prodStop, consStop chan struct{}
	pwg, cwg           sync.WaitGroup
}

// Source is a topic produced in one region.
type Source struct {
	Region string // where its producer runs
	Topic  string // full persistent:// name
}

type loadProducer struct {
	src  Source
	p    pulsar.Producer
	mu   sync.Mutex
	next int
	acks []event // time and payload of each acknowledged send
	errs []error
}

type event struct {
	at      time.Time
	payload string
	id      string // message id (deliveries)
	redel   uint32 // redelivery count (deliveries)
}

type loadConsumer struct {
	region string
	topic  string
	c      pulsar.Consumer
	mu     sync.Mutex
	got    []event
}

// quietLogger keeps the Pulsar client's reconnection chatter out of test
// output.
func quietLogger() plog.Logger {
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	return plog.NewLoggerWithLogrus(l)
}

// StartLoad connects to every region (serviceURL by region name), creates
// the consumers of every source in every region in `regions`, then the
// producers, and starts sending a message every every per producer with
// keys k0..k<keys-1>.
func StartLoad(t testing.TB, serviceURLs map[string]string, sources []Source, keys int, every time.Duration) *Load {
	t.Helper()
	l := &Load{t: t, keys: keys, every: every, clients: map[string]pulsar.Client{},
		prodStop: make(chan struct{}), consStop: make(chan struct{})}
	for region, url := range serviceURLs {
		c, err := pulsar.NewClient(pulsar.ClientOptions{
			URL: url, OperationTimeout: 30 * time.Second, ConnectionTimeout: 5 * time.Second, Logger: quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		l.clients[region] = c
	}
	t.Cleanup(l.close)
	for _, src := range sources {
		for region, c := range l.clients {
			cons, err := c.Subscribe(pulsar.ConsumerOptions{
				Topic: src.Topic, SubscriptionName: "load", Type: pulsar.Exclusive,
				SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
			})
			if err != nil {
				t.Fatalf("subscribe to %s in %s: %v", src.Topic, region, err)
			}
			lc := &loadConsumer{region: region, topic: src.Topic, c: cons}
			l.cons = append(l.cons, lc)
		}
	}
	for _, src := range sources {
		p, err := l.clients[src.Region].CreateProducer(pulsar.ProducerOptions{
			Topic: src.Topic, Name: "load-" + src.Region, DisableBatching: true, SendTimeout: 30 * time.Second,
		})
		if err != nil {
			t.Fatalf("producer on %s in %s: %v", src.Topic, src.Region, err)
		}
		l.prods = append(l.prods, &loadProducer{src: src, p: p})
	}
	for _, lc := range l.cons {
		l.cwg.Add(1)
		go func() { defer l.cwg.Done(); l.consume(lc) }()
	}
	for _, lp := range l.prods {
		l.pwg.Add(1)
		go func() { defer l.pwg.Done(); l.produce(lp) }()
	}
	return l
}

func (l *Load) produce(lp *loadProducer) {
	tick := time.NewTicker(l.every)
	defer tick.Stop()
	for {
		select {
		case <-l.prodStop:
			return
		case <-tick.C:
		}
		lp.mu.Lock()
		seq := lp.next
		lp.next++
		lp.mu.Unlock()
		key := "k" + strconv.Itoa(seq%l.keys)
		payload := fmt.Sprintf("%s|%s|%d", lp.src.Region, key, seq)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := lp.p.Send(ctx, &pulsar.ProducerMessage{Key: key, Payload: []byte(payload)})
		cancel()
		lp.mu.Lock()
		if err != nil {
			lp.errs = append(lp.errs, fmt.Errorf("%s seq %d: %w", lp.src.Topic, seq, err))
		} else {
			lp.acks = append(lp.acks, event{at: time.Now(), payload: payload})
		}
		lp.mu.Unlock()
	}
}

func (l *Load) consume(lc *loadConsumer) {
	for {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-l.consStop:
			case <-ctx.Done():
			}
			cancel()
		}()
		m, err := lc.c.Receive(ctx)
		stopped := ctx.Err() != nil
		cancel()
		if err != nil {
			if stopped {
				return
			}
			continue
		}
		lc.mu.Lock()
		lc.got = append(lc.got, event{at: time.Now(), payload: string(m.Payload()), id: m.ID().String(), redel: m.RedeliveryCount()})
		lc.mu.Unlock()
		lc.c.Ack(m)
	}
}

// StopProducing stops the producers (the consumers go on) and waits for
// their last sends.
func (l *Load) StopProducing() {
	select {
	case <-l.prodStop:
	default:
		close(l.prodStop)
	}
	l.pwg.Wait()
}

func (l *Load) close() {
	l.StopProducing()
	select {
	case <-l.consStop:
	default:
		close(l.consStop)
	}
	l.cwg.Wait()
	for _, c := range l.clients {
		c.Close()
	}
}

// Acked is how many sends have been acknowledged so far, in all.
func (l *Load) Acked() int {
	n := 0
	for _, lp := range l.prods {
		lp.mu.Lock()
		n += len(lp.acks)
		lp.mu.Unlock()
	}
	return n
}

// Delivered is how many messages have been delivered so far, in all.
func (l *Load) Delivered() int {
	n := 0
	for _, lc := range l.cons {
		lc.mu.Lock()
		n += len(lc.got)
		lc.mu.Unlock()
	}
	return n
}

// SendErrors are the sends that failed, in all.
func (l *Load) SendErrors() []error {
	var out []error
	for _, lp := range l.prods {
		lp.mu.Lock()
		out = append(out, lp.errs...)
		lp.mu.Unlock()
	}
	return out
}

// WaitDelivered waits until every acknowledged message has reached every
// consumer (the producers must be stopped), or timeout.
func (l *Load) WaitDelivered(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		missing := l.missing()
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New(missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (l *Load) missing() string {
	for _, lp := range l.prods {
		lp.mu.Lock()
		acked := append([]event{}, lp.acks...)
		lp.mu.Unlock()
		for _, lc := range l.cons {
			if lc.topic != lp.src.Topic {
				continue
			}
			lc.mu.Lock()
			have := map[string]bool{}
			for _, e := range lc.got {
				have[e.payload] = true
			}
			lc.mu.Unlock()
			n := 0
			first := ""
			for _, a := range acked {
				if !have[a.payload] {
					if n == 0 {
						first = a.payload
					}
					n++
				}
			}
			if n > 0 {
				return fmt.Sprintf("%s in %s: %d of %d acknowledged messages not delivered (first %s)", lc.topic, lc.region, n, len(acked), first)
			}
		}
	}
	return ""
}

// Report is what a check of the load found.
type Report struct {
	Acked, Delivered int
	// Lost are acknowledged messages never delivered somewhere.
	Lost []string
	// Duplicates are messages stored twice (delivered under two message
	// ids in one region): a broken exactly-once.
	Duplicates []string
	// Redeliveries are deliveries of a message id already delivered to
	// the same consumer (after a reconnection or a broker failover).
	Redeliveries int
	// OrderViolations are keys whose messages arrived out of order.
	OrderViolations []string
}

// Check verifies the whole history: every acknowledged message was
// delivered to every consumer of its topic, none was stored twice, and
// each key's messages arrived in order (a redelivered message id, already
// seen, is counted and does not count against order).
func (l *Load) Check() Report {
	var r Report
	acked := map[string][]string{} // topic -> payloads
	for _, lp := range l.prods {
		lp.mu.Lock()
		for _, a := range lp.acks {
			acked[lp.src.Topic] = append(acked[lp.src.Topic], a.payload)
		}
		r.Acked += len(lp.acks)
		lp.mu.Unlock()
	}
	for _, lc := range l.cons {
		lc.mu.Lock()
		got := append([]event{}, lc.got...)
		lc.mu.Unlock()
		r.Delivered += len(got)
		where := lc.topic + " in " + lc.region
		ids := map[string]string{} // payload -> first message id
		seenID := map[string]bool{}
		last := map[string]int{} // key -> last first-seen seq
		for _, e := range got {
			if seenID[e.id] {
				r.Redeliveries++
				continue
			}
			seenID[e.id] = true
			if prev, ok := ids[e.payload]; ok && prev != e.id {
				r.Duplicates = append(r.Duplicates, fmt.Sprintf("%s: %s as %s and %s", where, e.payload, prev, e.id))
				continue
			}
			ids[e.payload] = e.id
			parts := strings.Split(e.payload, "|")
			if len(parts) != 3 {
				continue
			}
			seq, _ := strconv.Atoi(parts[2])
			if p, ok := last[parts[1]]; ok && seq <= p {
				r.OrderViolations = append(r.OrderViolations, fmt.Sprintf("%s: key %s: %d after %d", where, parts[1], seq, p))
			}
			last[parts[1]] = seq
		}
		for _, p := range acked[lc.topic] {
			if _, ok := ids[p]; !ok {
				r.Lost = append(r.Lost, where+": "+p)
			}
		}
	}
	return r
}

// Gaps returns the longest pause in acknowledgements and in deliveries
// (per consumer, the longest of them) between from and to.
func (l *Load) Gaps(from, to time.Time) (publish, deliver time.Duration) {
	gap := func(evs []event) time.Duration {
		var times []time.Time
		for _, e := range evs {
			if !e.at.Before(from) && e.at.Before(to) {
				times = append(times, e.at)
			}
		}
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		if len(times) == 0 {
			return to.Sub(from)
		}
		longest := times[0].Sub(from)
		for i := 1; i < len(times); i++ {
			longest = max(longest, times[i].Sub(times[i-1]))
		}
		return longest
	}
	for _, lp := range l.prods {
		lp.mu.Lock()
		publish = max(publish, gap(lp.acks))
		lp.mu.Unlock()
	}
	for _, lc := range l.cons {
		lc.mu.Lock()
		deliver = max(deliver, gap(lc.got))
		lc.mu.Unlock()
	}
	return publish, deliver
}
