package replicator

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/replicator/frame"
	"github.com/isobar-mq/isobar/replicator/pulsarconn"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Table tests of the rules that need no I/O (rules.go).

func TestBackoffSteps(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name       string
		first, max time.Duration
		want       []time.Duration
	}{
		{"retries", minBackoff, 5 * time.Second, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms}},
		{"probes", min(minBackoff, 500*ms), 500 * ms, []time.Duration{100 * ms, 200 * ms, 400 * ms, 500 * ms, 500 * ms}},
		{"probes at a short interval", min(minBackoff, 50*ms), 50 * ms, []time.Duration{50 * ms, 50 * ms}},
		// The first delay is taken as it is even above max.
		{"max under the first delay", minBackoff, 30 * ms, []time.Duration{100 * ms, 30 * ms, 30 * ms}},
	} {
		b := newBackoff(tc.first, tc.max)
		var got []time.Duration
		for range tc.want {
			got = append(got, b.next())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		b.reset()
		if d := b.next(); d != tc.first {
			t.Errorf("%s: after reset %v, want %v", tc.name, d, tc.first)
		}
	}
}

func TestWarnDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		failing int
		since   time.Duration
		want    bool
	}{
		{1, 0, true},
		{2, time.Second, false},
		{7, 29 * time.Second, false},
		{8, 30 * time.Second, true},
	} {
		if got := warnDue(tc.failing, t0, t0.Add(tc.since)); got != tc.want {
			t.Errorf("failure %d, %v after the last warning: %v, want %v", tc.failing, tc.since, got, tc.want)
		}
	}
}

func TestKeepFor(t *testing.T) {
	from := "x"
	for _, tc := range []struct {
		name string
		data []byte
		want bool
	}{
		{"plain", entry(t, "m"), true},
		{"replicated from elsewhere", entry(t, "m", func(m *pb.MessageMetadata) { m.ReplicatedFrom = &from }), false},
		{"local only", entry(t, "m", func(m *pb.MessageMetadata) { m.ReplicateTo = []string{"__local__"} }), false},
		{"to the remote and another", entry(t, "m", func(m *pb.MessageMetadata) { m.ReplicateTo = []string{"c", "b"} }), true},
		{"to another only", entry(t, "m", func(m *pb.MessageMetadata) { m.ReplicateTo = []string{"c"} }), false},
		{"undecodable", []byte{1, 2, 3}, true},
	} {
		if got := keepFor("b", tc.data); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPreparedGathers(t *testing.T) {
	from := "x"
	id := func(e int64) pulsarconn.MessageID { return pulsarconn.MessageID{Ledger: 3, Entry: e} }
	var p prepared
	if p.pending() || p.full(2, 100) {
		t.Fatal("empty frame pending or full")
	}
	if p.add(pulsarconn.Entry{ID: id(0), Data: entry(t, "x", func(m *pb.MessageMetadata) { m.ReplicatedFrom = &from })}, "b") != true {
		t.Fatal("a replicated entry not skipped")
	}
	if !p.pending() || len(p.entries) != 0 || p.ack != id(0) {
		t.Fatalf("after a skipped entry: %+v, want only its position to acknowledge", p)
	}
	state := pulsarconn.Entry{ID: pulsarconn.MessageID{Ledger: -1, Entry: -1}, Data: []byte("state"), Control: true}
	if p.add(state, "b") {
		t.Fatal("a state skipped")
	}
	if p.ack != id(0) || len(p.states) != 1 {
		t.Fatalf("a state moved the acknowledgement: %+v", p)
	}
	if p.full(2, 100) {
		t.Fatal("full at 1 of 2")
	}
	d := entry(t, "m1")
	if p.add(pulsarconn.Entry{ID: id(1), Data: d}, "b") {
		t.Fatal("an entry skipped")
	}
	if p.ack != id(1) || p.raw != len(d) || len(p.entries) != 1 || p.entries[0].Pos != (frame.Pos{Ledger: 3, Entry: 1}) {
		t.Fatalf("after an entry: %+v", p)
	}
	if !p.full(2, 1000) {
		t.Fatal("an entry and a state: not full at 2 (states count)")
	}
	if p.full(3, 1000) || !p.full(3, len(d)) {
		t.Fatal("raw bytes limit")
	}
}

func TestRequests(t *testing.T) {
	es := []frame.Entry{{Pos: frame.Pos{Ledger: 4, Entry: 9}}, {Pos: frame.Pos{Ledger: 5, Entry: 0}}}
	m := frameRequest("a", "b", testTopic, es, 77, []byte("body"))
	h := m.Header
	if m.Subject != "isobar.repl.b.a" || string(m.Data) != "body" || h.Get(HeaderSource) != "a" || h.Get(HeaderTopic) != testTopic ||
		h.Get(HeaderFirst) != "4:9" || h.Get(HeaderLast) != "5:0" || h.Get(HeaderCount) != "2" || h.Get(HeaderRaw) != "77" || h.Get(HeaderKind) != "" {
		t.Errorf("frame request %s %v", m.Subject, h)
	}
	m = statesRequest("a", "b", testTopic, 3, []byte("s"))
	if m.Subject != "isobar.repl.b.a" || m.Header.Get(HeaderKind) != KindSubState || m.Header.Get(HeaderCount) != "3" || m.Header.Get(HeaderFirst) != "" {
		t.Errorf("states request %s %v", m.Subject, m.Header)
	}
	m = probeRequest("a", "b", testTopic)
	if m.Subject != "isobar.repl.b.a" || m.Header.Get(HeaderKind) != KindProbe || len(m.Data) != 0 || m.Header.Get(HeaderTopic) != testTopic {
		t.Errorf("probe %s %v", m.Subject, m.Header)
	}
	reply := probeRequest("b", "a", testTopic)
	reply.Header = nil
	if err := refusal(reply); err != nil {
		t.Errorf("a reply without Isobar-Error: %v", err)
	}
	reply.Header = map[string][]string{HeaderError: {"no"}}
	if err := refusal(reply); !errors.Is(err, ErrRefused) {
		t.Errorf("a reply with Isobar-Error: %v, want ErrRefused", err)
	}
}

func TestCheckReplicates(t *testing.T) {
	name, _ := topic.Parse(testTopic)
	for _, tc := range []struct {
		clusters []string
		ok       bool
	}{
		{[]string{"a", "b"}, true},
		{[]string{"b", "c", "a"}, true},
		{[]string{"b", "c"}, false},
		{[]string{"a", "c"}, false},
		{nil, false},
	} {
		if err := checkReplicates(name, "a", "b", tc.clusters); (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrBadFrame) {
			t.Errorf("clusters %v: %v", tc.clusters, err)
		}
	}
}

func TestMarkReplicatedBatch(t *testing.T) {
	n := int32(5)
	out, err := markReplicated("a", []frame.Entry{{Pos: frame.Pos{Ledger: 2, Entry: 3}, Data: entry(t, "batch", func(m *pb.MessageMetadata) { m.NumMessagesInBatch = &n })}})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].n != 5 || out[0].publish != 1700000000000 {
		t.Fatalf("%+v, want 5 messages published at the entry's time", out[0])
	}
}

// Rendezvous hashing: when a worker leaves, only the streams it held
// move; when one joins, only the streams it wins.
func TestOwnerMovesOnlyWhatItMust(t *testing.T) {
	workers := []string{"w1", "w2", "w3"}
	var keys []streamKey
	for i := range 200 {
		keys = append(keys, streamKey{Topic: fmt.Sprintf("persistent://t/ns/topic-%d", i), Remote: []string{"b", "c"}[i%2]})
	}
	held := map[string]int{}
	for _, k := range keys {
		before := Owner(k.Topic, k.Remote, workers)
		held[before]++
		if again := Owner(k.Topic, k.Remote, []string{"w3", "w1", "w2"}); again != before {
			t.Fatalf("%v: owner depends on the order of the workers", k)
		}
		if after := Owner(k.Topic, k.Remote, []string{"w1", "w3"}); before != "w2" && after != before {
			t.Fatalf("%v moved from %s to %s when w2 left", k, before, after)
		}
		if after := Owner(k.Topic, k.Remote, append(slices.Clone(workers), "w4")); after != before && after != "w4" {
			t.Fatalf("%v moved from %s to %s when w4 joined", k, before, after)
		}
	}
	for _, wk := range workers {
		if held[wk] < 30 {
			t.Fatalf("streams per worker %v: badly spread", held)
		}
	}
}
