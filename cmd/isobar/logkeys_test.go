package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/region"
)

// keyCheck is a slog handler that records every log line whose keys
// repeat (broker=b1 ... broker=b1): a logger given .With of a key its
// parent already has.
type keyCheck struct {
	prefix string   // the open groups, "g1.g2."
	keys   []string // from WithAttrs, prefixed
	out    *dupLog
}

type dupLog struct {
	mu    sync.Mutex // guards below
	lines int
	dups  map[string]string // key list -> one message
}

func (h keyCheck) Enabled(context.Context, slog.Level) bool { return true }

func (h keyCheck) WithAttrs(as []slog.Attr) slog.Handler {
	n := h
	n.keys = slices.Clone(h.keys)
	for _, a := range as {
		n.keys = append(n.keys, h.prefix+a.Key)
	}
	return n
}

func (h keyCheck) WithGroup(g string) slog.Handler {
	n := h
	n.prefix = h.prefix + g + "."
	return n
}

func (h keyCheck) Handle(_ context.Context, r slog.Record) error {
	keys := slices.Clone(h.keys)
	r.Attrs(func(a slog.Attr) bool {
		keys = append(keys, h.prefix+a.Key)
		return true
	})
	seen := map[string]bool{}
	var dup []string
	for _, k := range keys {
		if seen[k] {
			dup = append(dup, k)
		}
		seen[k] = true
	}
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.lines++
	if len(dup) > 0 {
		h.out.dups[strings.Join(keys, " ")] = fmt.Sprintf("%q repeats %v", r.Message, dup)
	}
	return nil
}

// TestStartedRegionLogsNoKeyTwice starts a federation of two regions
// (the global store; per region etcd, bookies, a broker, NATS and a
// replicator) with a debug logger, sends messages through a replicated
// topic and stops it: no line may carry a key twice.
func TestStartedRegionLogsNoKeyTwice(t *testing.T) {
	out := &dupLog{dups: map[string]string{}}
	logger := slog.New(keyCheck{out: out})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	f, err := region.StartFederation(ctx, region.FederationConfig{
		Regions:   []region.Config{{Name: "ka", DataDir: dir + "/ka", Brokers: 1}, {Name: "kb", DataDir: dir + "/kb", Brokers: 1}},
		GlobalDir: dir + "/global",
	}, region.Deps{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	const topic = "persistent://public/default/keys-topic"
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: f.Regions[0].Brokers()[0].ServiceURL, Logger: quietPulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := pulsar.NewClient(pulsar.ClientOptions{URL: f.Regions[1].Brokers()[0].ServiceURL, Logger: quietPulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	consumer, err := remote.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
		m, err := consumer.Receive(ctx) // replicated to the other region
		if err != nil {
			t.Fatal(err)
		}
		consumer.Ack(m)
	}
	producer.Close()
	consumer.Close()
	client.Close()
	remote.Close()
	if err := f.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if out.lines == 0 {
		t.Fatal("the federation logged nothing: the logger was not used")
	}
	for keys, what := range out.dups {
		t.Errorf("%s (keys: %s)", what, keys)
	}
	t.Logf("%d log lines", out.lines)
}
