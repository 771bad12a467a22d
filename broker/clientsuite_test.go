package broker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/internal/testcluster"
)

// produce sends n messages "<prefix>-i" synchronously-flushed and returns
// their ids.
func produce(t *testing.T, p pulsar.Producer, prefix string, n int, opts func(i int, m *pulsar.ProducerMessage)) []pulsar.MessageID {
	t.Helper()
	ctx := ctxT(t)
	ids := make([]pulsar.MessageID, n)
	var wg sync.WaitGroup
	for i := range n {
		m := &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%s-%d", prefix, i)}
		if opts != nil {
			opts(i, m)
		}
		wg.Add(1)
		p.SendAsync(ctx, m, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("send %d: %v", i, err)
				return
			}
			ids[i] = id
		})
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return ids
}

func receiveN(t *testing.T, c pulsar.Consumer, n int, ack bool) []pulsar.Message {
	t.Helper()
	ctx := ctxT(t)
	var out []pulsar.Message
	for len(out) < n {
		m, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("after %d of %d messages: %v", len(out), n, err)
		}
		out = append(out, m)
		if ack {
			if err := c.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// noMore checks that c receives nothing within d.
func noMore(t *testing.T, c pulsar.Consumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if m, err := c.Receive(ctx); err == nil {
		t.Fatalf("unexpected message %q (id %v)", m.Payload(), m.ID())
	}
}

func payloads(ms []pulsar.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Payload()))
	}
	return out
}

func names(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

func TestBatchingAndCompression(t *testing.T) {
	e := startEnv(t, nil)
	c := e.client()
	for _, ct := range []pulsar.CompressionType{pulsar.NoCompression, pulsar.LZ4, pulsar.ZLib, pulsar.ZSTD, pulsar.SNAPPY} {
		t.Run(fmt.Sprint(ct), func(t *testing.T) {
			topic := fmt.Sprintf("comp-%d", ct)
			cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, CompressionType: ct,
				BatchingMaxMessages: 50, BatchingMaxPublishDelay: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ids := produce(t, p, "b", 500, func(i int, m *pulsar.ProducerMessage) {
				m.Payload = append(m.Payload, strings.Repeat("x", i%100)...)
				m.Properties = map[string]string{"i": fmt.Sprint(i)}
			})
			batched := 0
			for _, id := range ids {
				if id.BatchIdx() > 0 {
					batched++
				}
			}
			if batched == 0 {
				t.Fatal("no message was sent in a batch")
			}
			got := receiveN(t, cons, 500, true)
			for i, m := range got {
				want := fmt.Sprintf("b-%d", i) + strings.Repeat("x", i%100)
				if string(m.Payload()) != want || m.Properties()["i"] != fmt.Sprint(i) {
					t.Fatalf("message %d: %q %v", i, m.Payload(), m.Properties())
				}
			}
		})
	}
}

func TestSharedSubscriptionSpreadsAndRedeliversOnClose(t *testing.T) {
	e := startEnv(t, nil)
	c := e.client()
	opts := pulsar.ConsumerOptions{Topic: "shared", SubscriptionName: "s", Type: pulsar.Shared, ReceiverQueueSize: 10}
	c1, err := c.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := c.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "shared", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	produce(t, p, "s", 100, nil)
	// c1 takes 5 without acking and closes: they go to c2.
	first := receiveN(t, c1, 5, false)
	c1.Close()
	seen := map[string]int{}
	for _, m := range first {
		seen[string(m.Payload())]++
	}
	ctx := ctxT(t)
	for len(seen) < 100 {
		m, err := c2.Receive(ctx)
		if err != nil {
			t.Fatalf("after %d distinct: %v", len(seen), err)
		}
		if slices.Contains(payloads(first), string(m.Payload())) && m.RedeliveryCount() == 0 {
			t.Errorf("%q redelivered with count 0", m.Payload())
		}
		seen[string(m.Payload())]++
		c2.Ack(m)
	}
	noMore(t, c2, 300*time.Millisecond)
}

func TestFailoverActiveConsumer(t *testing.T) {
	e := startEnv(t, nil)
	c := e.client()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "fo", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var mu sync.Mutex
	recv := map[string][]string{}
	mk := func(name string) pulsar.Consumer {
		k, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "fo", SubscriptionName: "s", Type: pulsar.Failover, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for m := range k.Chan() {
				mu.Lock()
				recv[name] = append(recv[name], string(m.Payload()))
				mu.Unlock()
				k.Ack(m)
			}
		}()
		return k
	}
	a := mk("a")
	b := mk("b")
	defer b.Close()
	produce(t, p, "x", 50, nil)
	testcluster.WaitFor(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(recv["a"]) == 50 })
	mu.Lock()
	if len(recv["b"]) != 0 {
		t.Fatalf("inactive consumer b received %v", recv["b"])
	}
	mu.Unlock()
	a.Close()
	produce(t, p, "y", 20, nil)
	testcluster.WaitFor(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(recv["b"]) == 20 })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(recv["a"], names("x", 50)) || !slices.Equal(recv["b"], names("y", 20)) {
		t.Fatalf("a=%v b=%v", recv["a"], recv["b"])
	}
}

func TestKeySharedKeepsKeysOnOneConsumerInOrder(t *testing.T) {
	e := startEnv(t, nil)
	c := e.client()
	opts := pulsar.ConsumerOptions{Topic: "ks", SubscriptionName: "s", Type: pulsar.KeyShared}
	var ks []pulsar.Consumer
	for range 3 {
		k, err := c.Subscribe(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		ks = append(ks, k)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "ks", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 300
	produce(t, p, "k", n, func(i int, m *pulsar.ProducerMessage) { m.Key = fmt.Sprintf("key-%d", i%10) })
	var mu sync.Mutex
	owner := map[string]int{}
	perKey := map[string][]string{}
	total := 0
	var wg sync.WaitGroup
	for i, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for {
				m, err := k.Receive(ctx)
				if err != nil {
					return
				}
				k.Ack(m)
				mu.Lock()
				if o, ok := owner[m.Key()]; ok && o != i {
					t.Errorf("key %s on consumers %d and %d", m.Key(), o, i)
				}
				owner[m.Key()] = i
				perKey[m.Key()] = append(perKey[m.Key()], string(m.Payload()))
				total++
				done := total == n
				mu.Unlock()
				if done {
					return
				}
			}
		}()
	}
	testcluster.WaitFor(t, 20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return total == n })
	wg.Wait()
	used := map[int]bool{}
	for key, ps := range perKey {
		used[owner[key]] = true
		var want []string
		var k int
		fmt.Sscanf(key, "key-%d", &k)
		for i := k; i < n; i += 10 {
			want = append(want, fmt.Sprintf("k-%d", i))
		}
		if !slices.Equal(ps, want) {
			t.Errorf("key %s out of order: %v", key, ps)
		}
	}
	if len(used) < 2 {
		t.Errorf("all keys went to %d consumer(s)", len(used))
	}
}

func TestNackRedeliveryCountAndDLQ(t *testing.T) {
	e := startEnv(t, nil)
	c := e.client()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: "dlq-src", SubscriptionName: "s", Type: pulsar.Shared,
		NackRedeliveryDelay: 50 * time.Millisecond,
		DLQ:                 &pulsar.DLQPolicy{MaxDeliveries: 3, DeadLetterTopic: "dlq-dead"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	dead, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "dlq-dead", SubscriptionName: "d", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "dlq-src", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	produce(t, p, "d", 3, nil)
	ctx := ctxT(t)
	counts := map[string][]uint32{}
	for received := 0; received < 9; received++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("after %d: %v", received, err)
		}
		counts[string(m.Payload())] = append(counts[string(m.Payload())], m.RedeliveryCount())
		cons.Nack(m)
	}
	for k, cs := range counts {
		if !slices.Equal(cs, []uint32{0, 1, 2}) {
			t.Errorf("%s: redelivery counts %v, want [0 1 2]", k, cs)
		}
	}
	got := payloads(receiveN(t, dead, 3, true))
	slices.Sort(got)
	if !slices.Equal(got, names("d", 3)) {
		t.Fatalf("dead letters %v", got)
	}
	noMore(t, cons, 300*time.Millisecond)
}

func TestSeekByIDAndTime(t *testing.T) {
	e := startEnv(t, nil)
	c := e.client()
	// The Go client filters the seek message itself unless inclusive.
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "seek", SubscriptionName: "s", StartMessageIDInclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "seek", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ids := produce(t, p, "a", 10, nil)
	mid := time.Now()
	// Publish times are in milliseconds: make sure the next ones are later.
	testcluster.WaitFor(t, time.Second, func() bool { return time.Since(mid) > 5*time.Millisecond })
	produce(t, p, "b", 10, nil)
	receiveN(t, cons, 20, true)
	if err := cons.Seek(ids[4]); err != nil {
		t.Fatal(err)
	}
	got := payloads(receiveN(t, cons, 16, true))
	want := append(names("a", 10)[4:], names("b", 10)...)
	if !slices.Equal(got, want) {
		t.Fatalf("after seek to id: %v", got)
	}
	if err := cons.SeekByTime(mid.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	got = payloads(receiveN(t, cons, 10, true))
	if !slices.Equal(got, names("b", 10)) {
		t.Fatalf("after seek by time: %v", got)
	}
}

func TestReaderFromEarliestLatestAndID(t *testing.T) {
	e := startEnv(t, nil)
	c := e.client()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "rd", BatchingMaxMessages: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ids := produce(t, p, "r", 20, nil)
	ctx := ctxT(t)
	read := func(r pulsar.Reader, n int) []string {
		var out []string
		for len(out) < n {
			m, err := r.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(m.Payload()))
		}
		return out
	}
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: "rd", StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	if got := read(r, 20); !slices.Equal(got, names("r", 20)) {
		t.Fatalf("earliest: %v", got)
	}
	if r.HasNext() {
		t.Fatal("HasNext after reading everything")
	}
	r.Close()
	r, err = c.CreateReader(pulsar.ReaderOptions{Topic: "rd", StartMessageID: ids[9]})
	if err != nil {
		t.Fatal(err)
	}
	if got := read(r, 10); !slices.Equal(got, names("r", 20)[10:]) {
		t.Fatalf("from id 9 (exclusive): %v", got)
	}
	r.Close()
	r, err = c.CreateReader(pulsar.ReaderOptions{Topic: "rd", StartMessageID: ids[9], StartMessageIDInclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := read(r, 11); !slices.Equal(got, names("r", 20)[9:]) {
		t.Fatalf("from id 9 inclusive: %v", got)
	}
	r.Close()
	r, err = c.CreateReader(pulsar.ReaderOptions{Topic: "rd", StartMessageID: pulsar.LatestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	produce(t, p, "late", 3, nil)
	if got := read(r, 3); !slices.Equal(got, names("late", 3)) {
		t.Fatalf("latest: %v", got)
	}
}

func TestDelayedDelivery(t *testing.T) {
	e := startEnv(t, nil)
	c := e.client()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "delay", SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "delay", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := time.Now()
	produce(t, p, "late", 1, func(_ int, m *pulsar.ProducerMessage) { m.DeliverAfter = 700 * time.Millisecond })
	produce(t, p, "now", 1, nil)
	got := receiveN(t, cons, 2, true)
	if string(got[0].Payload()) != "now-0" || string(got[1].Payload()) != "late-0" {
		t.Fatalf("order %v", payloads(got))
	}
	// deliver_at_time has millisecond precision (the client truncates).
	if d := time.Since(start); d < 700*time.Millisecond-2*time.Millisecond {
		t.Fatalf("delayed message arrived after %v", d)
	}
}

func TestRegexConsumer(t *testing.T) {
	e := startEnv(t, nil)
	c := e.client()
	for _, tp := range []string{"rx-a", "rx-b", "other"} {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp})
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{TopicsPattern: "persistent://public/default/rx-.*", SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for _, tp := range []string{"rx-a", "rx-b", "other"} {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp})
		if err != nil {
			t.Fatal(err)
		}
		produce(t, p, tp, 2, nil)
		p.Close()
	}
	got := payloads(receiveN(t, cons, 4, true))
	slices.Sort(got)
	if want := []string{"rx-a-0", "rx-a-1", "rx-b-0", "rx-b-1"}; !slices.Equal(got, want) {
		t.Fatalf("got %v", got)
	}
	noMore(t, cons, 300*time.Millisecond)
}

func TestCumulativeAckAndRedeliverAll(t *testing.T) {
	e := startEnv(t, nil)
	c := e.client()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "cum", SubscriptionName: "s", Type: pulsar.Exclusive})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "cum", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	produce(t, p, "c", 10, nil)
	got := receiveN(t, cons, 10, false)
	if err := cons.AckCumulative(got[5]); err != nil {
		t.Fatal(err)
	}
	cons.Close()
	// Reconnect: 6..9 come again.
	cons, err = c.Subscribe(pulsar.ConsumerOptions{Topic: "cum", SubscriptionName: "s", Type: pulsar.Exclusive})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if got := payloads(receiveN(t, cons, 4, true)); !slices.Equal(got, names("c", 10)[6:]) {
		t.Fatalf("after cumulative ack of 5: %v", got)
	}
}

// TestBatchIndexAck: a consumer with batch-index acknowledgement on
// acknowledges some messages of batches; the broker keeps which, and a new
// consumer of the subscription gets each partly acknowledged batch again
// with its ack set, so only the messages not acknowledged reach the
// application.
func TestBatchIndexAck(t *testing.T) {
	e := startEnv(t, nil)
	c := e.client()
	const topicName = "batch-index"
	subscribe := func() pulsar.Consumer {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "s", Type: pulsar.Shared,
			EnableBatchIndexAcknowledgment: true, AckGroupingOptions: &pulsar.AckGroupingOptions{MaxSize: 1000, MaxTime: 10 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	cons := subscribe()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topicName, BatchingMaxMessages: 10, BatchingMaxPublishDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		p.SendAsync(ctxT(t), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("b-%02d", i))}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
			}
		})
	}
	p.Flush()
	wg.Wait()
	// Acknowledge every third message: each batch of 10 is left partly
	// acknowledged.
	var want []string
	for _, m := range receiveN(t, cons, 30, false) {
		if m.ID().BatchSize() != 10 {
			t.Fatalf("message %s in a batch of %d, want 10", m.Payload(), m.ID().BatchSize())
		}
		var i int
		fmt.Sscanf(string(m.Payload()), "b-%d", &i)
		if i%3 == 0 {
			if err := cons.Ack(m); err != nil {
				t.Fatal(err)
			}
		} else {
			want = append(want, string(m.Payload()))
		}
	}
	cons.Close()
	cons = subscribe()
	defer cons.Close()
	got := payloads(receiveN(t, cons, len(want), true))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("after acknowledging every third message, got again %v, want %v", got, want)
	}
	noMore(t, cons, 300*time.Millisecond)
}
