package replicator

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/replicator/frame"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// The sink side's rules (docs/replication.md, step 4), through the
// seams: worker b serves on a fakeNet and writes to fakeBrokers.

// frameOf is the request of a frame of entries (positions 1:first on)
// from src to b.
func frameOf(t testing.TB, src string, first int64, datas ...[]byte) *nats.Msg {
	t.Helper()
	var es []frame.Entry
	raw := 0
	for i, d := range datas {
		es = append(es, frame.Entry{Pos: frame.Pos{Ledger: 1, Entry: first + int64(i)}, Data: d})
		raw += len(d)
	}
	body, _, err := frame.NewEncoder().Encode(nil, es)
	if err != nil {
		t.Fatal(err)
	}
	return frameRequest(src, "b", testTopic, es, raw, body)
}

func statesOf(t testing.TB, src string, datas ...[]byte) *nats.Msg {
	t.Helper()
	var es []frame.Entry
	for i, d := range datas {
		es = append(es, frame.Entry{Pos: frame.Pos{Entry: int64(i)}, Data: d})
	}
	body, _, err := frame.NewEncoder().Encode(nil, es)
	if err != nil {
		t.Fatal(err)
	}
	return statesRequest(src, "b", testTopic, len(datas), body)
}

// sinkB starts worker b's sink on net.
func sinkB(t testing.TB, cfg Config, net *fakeNet, brokers *fakeBrokers) *Worker {
	t.Helper()
	w := testWorker(t, "b", cfg, net, nil, brokers)
	if err := w.serve(); err != nil {
		t.Fatal(err)
	}
	return w
}

// ask sends msg on net and returns the refusal in its reply (nil: stored).
func ask(t testing.TB, net *fakeNet, msg *nats.Msg) error {
	t.Helper()
	reply, err := net.Request(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	return refusal(reply)
}

// A frame is stored in order through the (topic, source) replicator
// producer, each entry marked replicated from the source at its source
// position; a frame sent again stores nothing twice (the broker drops
// what it has and answers success).
func TestSinkStoresFrameInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, brokers := &fakeNet{}, newFakeBrokers()
		w := sinkB(t, Config{}, net, brokers)
		defer w.Close()

		f1 := frameOf(t, "a", 0, entry(t, "m0"), entry(t, "m1"), entry(t, "m2"))
		if err := ask(t, net, f1); err != nil {
			t.Fatal(err)
		}
		if err := ask(t, net, frameOf(t, "a", 3, entry(t, "m3"))); err != nil {
			t.Fatal(err)
		}
		if err := ask(t, net, f1); err != nil {
			t.Fatalf("a frame sent again: %v, want success", err)
		}
		if got := brokers.payloads(t); !slices.Equal(got, []string{"m0", "m1", "m2", "m3"}) {
			t.Fatalf("stored %v", got)
		}
		brokers.mu.Lock()
		defer brokers.mu.Unlock()
		if brokers.dups != 3 || brokers.created != 1 || !slices.IsSorted(brokers.seqs) {
			t.Fatalf("%d duplicates, %d producers, sequence ids %v", brokers.dups, brokers.created, brokers.seqs)
		}
		for i, e := range brokers.stored[testTopic] {
			meta, _, err := wire.DecodeEntry(e.data)
			if err != nil {
				t.Fatal(err)
			}
			var pos string
			for _, kv := range meta.GetProperties() {
				if kv.GetKey() == replication.SourcePositionProperty {
					pos = kv.GetValue()
				}
			}
			if meta.GetReplicatedFrom() != "a" || pos != (replication.Position{Ledger: 1, Entry: int64(i)}).String() || e.src != "a" {
				t.Fatalf("entry %d: replicated from %q at %q", i, meta.GetReplicatedFrom(), pos)
			}
		}
	})
}

// A frame that fails any check is refused with the reason in
// Isobar-Error, and nothing of it is stored.
func TestSinkRefusesBadFrames(t *testing.T) {
	from := "x"
	for _, tc := range []struct {
		name string
		msg  func(t *testing.T) *nats.Msg
		want string
	}{
		{"own region", func(t *testing.T) *nats.Msg {
			m := frameOf(t, "a", 0, entry(t, "m0"))
			m.Header.Set(HeaderSource, "b")
			return m
		}, "source region"},
		{"subject of another source", func(t *testing.T) *nats.Msg {
			m := frameOf(t, "a", 0, entry(t, "m0"))
			m.Subject = Subject("b", "c")
			return m
		}, "does not match"},
		{"non-persistent topic", func(t *testing.T) *nats.Msg {
			m := frameOf(t, "a", 0, entry(t, "m0"))
			m.Header.Set(HeaderTopic, "non-persistent://t/ns/orders")
			return m
		}, "not a persistent topic"},
		{"unknown kind", func(t *testing.T) *nats.Msg {
			m := frameOf(t, "a", 0, entry(t, "m0"))
			m.Header.Set(HeaderKind, "bogus")
			return m
		}, "unknown kind"},
		{"source outside the replication clusters", func(t *testing.T) *nats.Msg {
			return frameOf(t, "d", 0, entry(t, "m0"))
		}, "does not replicate between d and b"},
		{"corrupt body", func(t *testing.T) *nats.Msg {
			m := frameOf(t, "a", 0, entry(t, "m0"))
			m.Data = m.Data[:len(m.Data)-1]
			return m
		}, "bad frame"},
		{"entry replicated already", func(t *testing.T) *nats.Msg {
			return frameOf(t, "a", 0, entry(t, "m0"), entry(t, "m1", func(m *pb.MessageMetadata) { m.ReplicatedFrom = &from }))
		}, "entry 1 (1:1) is already replicated from x"},
		{"entry that does not decode", func(t *testing.T) *nats.Msg {
			return frameOf(t, "a", 0, entry(t, "m0"), []byte{0, 0})
		}, "entry 1"},
		{"state of another subscription", func(t *testing.T) *nats.Msg {
			st := subState(t, "s1")
			meta, payload, _ := wire.DecodeEntry(st)
			k, v := replication.SubStateProperty, "s2"
			meta.Properties = []*pb.KeyValue{{Key: &k, Value: &v}}
			bad, _ := wire.AppendEntry(nil, meta, payload)
			return statesOf(t, "a", subState(t, "s0"), bad)
		}, "subscription state 1: marked \"s2\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net, brokers := &fakeNet{}, newFakeBrokers()
				w := sinkB(t, Config{}, net, brokers)
				defer w.Close()
				err := ask(t, net, tc.msg(t))
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("reply %v, want a refusal with %q", err, tc.want)
				}
				brokers.mu.Lock()
				defer brokers.mu.Unlock()
				if brokers.created != 0 || len(brokers.seqs) != 0 {
					t.Fatalf("%d producers, %d sends for a refused frame", brokers.created, len(brokers.seqs))
				}
			})
		})
	}
}

// A topic's own replication clusters replace its namespace's at the
// sink too.
func TestSinkTopicReplicationClusters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, brokers := &fakeNet{}, newFakeBrokers()
		w := testWorker(t, "b", Config{}, net, nil, brokers)
		w.deps.Policies = fakePolicies{clusters: []string{"a", "b"}, topics: map[string][]string{testTopic: {"b", "c"}}}
		if err := w.serve(); err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := ask(t, net, frameOf(t, "a", 0, entry(t, "m0"))); err == nil || !strings.Contains(err.Error(), "does not replicate") {
			t.Fatalf("from a: %v, want refused (the topic replicates across b and c)", err)
		}
		if err := ask(t, net, frameOf(t, "c", 0, entry(t, "m0"))); err != nil {
			t.Fatalf("from c: %v", err)
		}
	})
}

// A store that fails refuses the frame and discards the producer; the
// frame sent again goes through a new one and is stored whole, in order.
func TestSinkStoreFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, brokers := &fakeNet{}, newFakeBrokers()
		w := sinkB(t, Config{}, net, brokers)
		defer w.Close()

		brokers.failNext = 1
		f := frameOf(t, "a", 0, entry(t, "m0"), entry(t, "m1"))
		if err := ask(t, net, f); err == nil || !strings.Contains(err.Error(), "store on "+testTopic) {
			t.Fatalf("reply %v, want the store's failure", err)
		}
		if err := ask(t, net, f); err != nil {
			t.Fatal(err)
		}
		if got := brokers.payloads(t); !slices.Equal(got, []string{"m0", "m1"}) {
			t.Fatalf("stored %v", got)
		}
		brokers.mu.Lock()
		defer brokers.mu.Unlock()
		if brokers.created != 2 || brokers.closed != 1 {
			t.Fatalf("%d producers made, %d closed; want the failed one replaced", brokers.created, brokers.closed)
		}
	})
}

// Subscription states are checked and handed to the broker through the
// replicator producer, marked replicated, never stored as entries.
func TestSinkAppliesStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, brokers := &fakeNet{}, newFakeBrokers()
		w := sinkB(t, Config{}, net, brokers)
		defer w.Close()
		if err := ask(t, net, statesOf(t, "a", subState(t, "s1"), subState(t, "s2"))); err != nil {
			t.Fatal(err)
		}
		brokers.mu.Lock()
		defer brokers.mu.Unlock()
		if len(brokers.states[testTopic]) != 2 || len(brokers.stored[testTopic]) != 0 {
			t.Fatalf("%d states applied, %d entries stored", len(brokers.states[testTopic]), len(brokers.stored[testTopic]))
		}
		for _, d := range brokers.states[testTopic] {
			if meta, _, err := wire.DecodeEntry(d); err != nil || meta.GetReplicatedFrom() != "a" {
				t.Fatalf("state %v, %v: want replicated from a", meta, err)
			}
		}
	})
}

// A probe is answered at once with an empty reply, without a
// SinkConcurrency slot: while every slot applies a frame it is still
// answered; it waits only behind a frame waiting for a slot.
func TestSinkAnswersProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, brokers := &fakeNet{}, newFakeBrokers()
		brokers.hold = make(chan struct{})
		w := sinkB(t, Config{SinkConcurrency: 1}, net, brokers)
		defer w.Close()

		probe := func(wait time.Duration) error {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			reply, err := net.Request(ctx, probeRequest("a", "b", testTopic))
			if err == nil && (len(reply.Header) != 0 || len(reply.Data) != 0) {
				t.Fatalf("probe reply %v %q, want empty", reply.Header, reply.Data)
			}
			return err
		}
		done := make(chan error, 2)
		send := func(m *nats.Msg) { // not ask: no t.Fatal off the test goroutine
			reply, err := net.Request(context.Background(), m)
			if err == nil {
				err = refusal(reply)
			}
			done <- err
		}
		go send(frameOf(t, "a", 0, entry(t, "m0")))
		synctest.Wait() // the frame holds the only slot
		if err := probe(time.Millisecond); err != nil {
			t.Fatalf("probe while the slot is busy: %v", err)
		}
		go send(frameOf(t, "a", 1, entry(t, "m1")))
		synctest.Wait() // a frame waits for the slot
		if err := probe(time.Second); err == nil {
			t.Fatal("probe answered while a frame waits for a slot ahead of it")
		}
		close(brokers.hold)
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if err := probe(time.Millisecond); err != nil {
			t.Fatal(err)
		}
		brokers.mu.Lock()
		defer brokers.mu.Unlock()
		if brokers.created != 1 {
			t.Fatalf("%d producers", brokers.created)
		}
	})
}
