package region_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/nats-io/nats.go"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/replicator"
	"github.com/isobar-mq/isobar/replicator/frame"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type topicStats struct {
	MsgInCounter int64                     `json:"msgInCounter"`
	Repl         map[string]map[string]any `json:"replication"`
}

func getStats(t *testing.T, r *region.Region, topicPath string) topicStats {
	t.Helper()
	resp, err := http.Get(r.Endpoints().WebServiceURL + "/admin/v2/persistent/" + topicPath + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var st topicStats
	if resp.StatusCode != 200 {
		t.Fatalf("stats %s: %d %s", topicPath, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestReplicationBadInput: namespaces naming unknown or disallowed
// clusters, and corrupt, truncated, oversize, misaddressed or duplicate
// replication frames, get clear errors and leave nothing applied.
func TestReplicationBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	f := startFederation(t, 2, func(i int, c *region.Config) {
		c.Replicator.MaxFrameBytes = 64 << 10
	})
	r0, r1 := f.Regions[0], f.Regions[1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("namespace clusters", func(t *testing.T) {
		pol := r0.Policies()
		if err := pol.CreateTenant(ctx, "only0", policy.TenantInfo{AdminRoles: []string{}, AllowedClusters: []string{"r0"}}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			ns       string
			clusters []string
			want     string
		}{
			{"acme/unknown", []string{"r0", "nowhere"}, `cluster "nowhere" does not exist`},
			{"only0/disallowed", []string{"r0", "r1"}, "not in the tenant's allowed clusters"},
		} {
			err := pol.CreateNamespace(ctx, tc.ns, &policy.Policies{ReplicationClusters: tc.clusters})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("create %s with %v: got %v, want an error containing %q", tc.ns, tc.clusters, err, tc.want)
			}
			if _, err := pol.Namespace(ctx, tc.ns); err == nil {
				t.Errorf("namespace %s exists after a refused create", tc.ns)
			}
		}
		// Through the admin API of the other region: a 412 with the reason,
		// and the namespace keeps its clusters.
		body, _ := json.Marshal([]string{"r0", "r1", "nowhere"})
		resp, err := http.Post(r1.Endpoints().WebServiceURL+"/admin/v2/namespaces/acme/geo/replication", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 || !strings.Contains(string(msg), "nowhere") {
			t.Errorf("set replication with an unknown cluster: %d %s", resp.StatusCode, msg)
		}
		p, err := r1.Policies().Namespace(ctx, "acme/geo")
		if err != nil || !slices.Equal(p.ReplicationClusters, []string{"r0", "r1"}) {
			t.Errorf("acme/geo replication clusters after a refused change: %v, %v", p, err)
		}
	})

	t.Run("frames", func(t *testing.T) {
		nc, err := nats.Connect(r1.Endpoints().NATSURL)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		const topicName = "persistent://acme/geo/frames"
		entry := func(i int) []byte {
			b, err := wire.AppendEntry(nil, &pb.MessageMetadata{
				ProducerName: strp("p"), SequenceId: u64p(uint64(i)), PublishTime: u64p(uint64(time.Now().UnixMilli())),
			}, []byte(fmt.Sprintf("frame:%d", i)))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		enc := frame.NewEncoder()
		good, _, err := enc.Encode(nil, []frame.Entry{{Pos: frame.Pos{Ledger: 7, Entry: 0}, Data: entry(0)}, {Pos: frame.Pos{Ledger: 7, Entry: 1}, Data: entry(1)}})
		if err != nil {
			t.Fatal(err)
		}
		badEntry, _, _ := enc.Encode(nil, []frame.Entry{{Pos: frame.Pos{Ledger: 8, Entry: 0}, Data: entry(2)}, {Pos: frame.Pos{Ledger: 8, Entry: 1}, Data: []byte{0, 0, 0, 99, 1}}})
		big := make([]frame.Entry, 0, 200)
		for i := range 200 {
			d := entry(1000 + i)
			noise := make([]byte, 1024)
			rand.Read(noise)
			d = append(d, noise...)
			big = append(big, frame.Entry{Pos: frame.Pos{Ledger: 9, Entry: int64(i)}, Data: d})
		}
		oversize, _, _ := enc.Encode(nil, big)
		corrupt := bytes.Clone(good)
		corrupt[len(corrupt)-3] ^= 0xff
		send := func(subject, src, topicName string, data []byte, kind ...string) string {
			t.Helper()
			m := nats.NewMsg(subject)
			m.Data = data
			m.Header.Set(replicator.HeaderSource, src)
			m.Header.Set(replicator.HeaderTopic, topicName)
			if len(kind) > 0 {
				m.Header.Set(replicator.HeaderKind, kind[0])
			}
			reply, err := nc.RequestMsg(m, 20*time.Second)
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			return reply.Header.Get(replicator.HeaderError)
		}
		sub := replicator.Subject("r1", "r0")
		for _, tc := range []struct {
			name, subject, src, topic string
			data                      []byte
			want                      string
		}{
			{"corrupt", sub, "r0", topicName, corrupt, "corrupt"},
			{"truncated", sub, "r0", topicName, good[:len(good)/2], "corrupt"},
			{"oversize", sub, "r0", topicName, oversize, "too large"},
			{"undecodable entry", sub, "r0", topicName, badEntry, "entry 1"},
			{"bad topic", sub, "r0", "persistent://acme/geo/../x", good, "not a persistent topic name"},
			{"not replicated here", sub, "r0", "persistent://only0/x/t", good, "namespace"},
			{"source is the sink", replicator.Subject("r1", "r1"), "r1", topicName, good, "source region"},
			{"subject mismatch", sub, "r2", topicName, good, "does not match"},
		} {
			if got := send(tc.subject, tc.src, tc.topic, tc.data); !strings.Contains(got, tc.want) {
				t.Errorf("%s: reply error %q, want it to contain %q", tc.name, got, tc.want)
			}
		}
		// Subscription-state records (docs/failover.md): each is checked
		// by the sink and again by the broker; none is stored.
		state := func(sub string, payload []byte, mark bool) []byte {
			meta := &pb.MessageMetadata{ProducerName: strp("isobar.substate"), SequenceId: u64p(0), PublishTime: u64p(uint64(time.Now().UnixMilli()))}
			if mark {
				meta.Properties = []*pb.KeyValue{{Key: strp(replication.SubStateProperty), Value: strp(sub)}}
			}
			b, err := wire.AppendEntry(nil, meta, payload)
			if err != nil {
				t.Fatal(err)
			}
			f, _, err := enc.Encode(nil, []frame.Entry{{Pos: frame.Pos{Entry: 0}, Data: b}})
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		okState := func(sub string) []byte {
			b, err := replication.EncodeSubState(replication.SubState{Subscription: sub, MarkDelete: map[string]replication.Position{"r0": {Ledger: 7, Entry: 0}}})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		for _, tc := range []struct {
			name, kind string
			data       []byte
			want       string
		}{
			{"unknown kind", "acks", state("s", okState("s"), true), "unknown kind"},
			{"state not marked", replicator.KindSubState, state("s", okState("s"), false), `marked ""`},
			{"state marked for another subscription", replicator.KindSubState, state("t", okState("s"), true), `marked "t"`},
			{"state that does not decode", replicator.KindSubState, state("s", []byte("{"), true), "bad subscription state"},
			{"state of a reserved subscription", replicator.KindSubState, state("isobar.dedup", okState("isobar.dedup"), true), "reserved"},
		} {
			if got := send(sub, "r0", topicName, tc.data, tc.kind); !strings.Contains(got, tc.want) {
				t.Errorf("%s: reply error %q, want it to contain %q", tc.name, got, tc.want)
			}
		}
		// Nothing of the refused frames was stored: the only entries the
		// topic gets are the good frame's, once, even when sent twice.
		for range 2 {
			if got := send(sub, "r0", topicName, good); got != "" {
				t.Fatalf("good frame refused: %s", got)
			}
		}
		// A good state is applied, not stored: the subscription exists in
		// r1 with r0's first message (7:0) acknowledged.
		if got := send(sub, "r0", topicName, state("from-r0", okState("from-r0"), true), replicator.KindSubState); got != "" {
			t.Fatalf("good state refused: %s", got)
		}
		st, err := faultTopicStats(ctx, r1, topicName, nil)
		if s, ok := st.Subscriptions["from-r0"]; err != nil || !ok || s.MsgBacklog != 1 {
			t.Errorf("r1's from-r0 after r0's state: %+v (%v), want a backlog of 1", st.Subscriptions, err)
		}
		c := pulsarClient(t, r1.Endpoints().ServiceURL)
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "check", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		for i := range 2 {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Payload()) != fmt.Sprintf("frame:%d", i) || m.GetReplicatedFrom() != "r0" {
				t.Fatalf("message %d: %q from %q", i, m.Payload(), m.GetReplicatedFrom())
			}
		}
		qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
		defer qcancel()
		if m, err := cons.Receive(qctx); err == nil {
			t.Errorf("extra message %q", m.Payload())
		}
	})

	t.Run("only replicators send replicated entries", func(t *testing.T) {
		c := pulsarClient(t, r0.Endpoints().ServiceURL)
		_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://acme/geo/names", Name: "isobar.repl.r0"})
		if err == nil || !strings.Contains(err.Error(), "this cluster") {
			t.Errorf("replicator producer naming the local cluster: %v", err)
		}
	})
}

// TestReplicationDisabledPerMessage: a message sent with replication
// disabled stays in its region; the others go.
func TestReplicationDisabledPerMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	f := startFederation(t, 2, nil)
	const topicName = "persistent://acme/geo/local-only"
	c0 := pulsarClient(t, f.Regions[0].Endpoints().ServiceURL)
	p, err := c0.CreateProducer(pulsar.ProducerOptions{Topic: topicName, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 10 {
		_, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("r0:%d", i)), DisableReplication: i%2 == 1})
		if err != nil {
			t.Fatal(err)
		}
	}
	c1 := pulsarClient(t, f.Regions[1].Endpoints().ServiceURL)
	cons, err := c1.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "check", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for i := 0; i < 10; i += 2 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("r0:%d", i); string(m.Payload()) != want {
			t.Fatalf("got %q, want %q", m.Payload(), want)
		}
	}
	qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
	defer qcancel()
	if m, err := cons.Receive(qctx); err == nil {
		t.Errorf("message sent with replication disabled arrived: %q", m.Payload())
	}
}

// TestReplicationAddRemoveRegion: adding a cluster to a namespace at
// runtime replicates its topics there from the earliest retained entry;
// removing it stops replication and releases the replication cursor,
// while what the removed region already has stays there.
func TestReplicationAddRemoveRegion(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	t.Parallel()
	f := startFederation(t, 3, func(_ int, c *region.Config) {
		c.Broker.MaintenanceInterval = 200 * time.Millisecond // drops a removed region's cursor
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r0, r2 := f.Regions[0], f.Regions[2]
	if err := f.EnsureReplicated(ctx, "acme", "pair", []string{"r0", "r1"}); err != nil {
		t.Fatal(err)
	}
	const topicName = "persistent://acme/pair/grow"
	c0 := pulsarClient(t, r0.Endpoints().ServiceURL)
	produce(t, c0, topicName, "r0", 0, 100)

	// Add r2: it gets the 100 retained messages and what follows.
	if _, err := r0.Policies().UpdateNamespace(ctx, "acme/pair", func(p *policy.Policies) error {
		p.ReplicationClusters = append(p.ReplicationClusters, "r2")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	produce(t, c0, topicName, "r0", 100, 100)
	c2 := pulsarClient(t, r2.Endpoints().ServiceURL)
	got := consumeAll(t, c2, topicName, 200, time.Minute)
	if len(got.errs) > 0 || got.next["r0"] != 200 {
		t.Fatalf("r2 after the add: %d from r0, errors %v", got.next["r0"], got.errs)
	}
	waitFor(t, 30*time.Second, "r0's replication section to list r2", func() bool {
		_, ok := getStats(t, r0, "acme/pair/grow").Repl["r2"]
		return ok
	})

	// Remove r2: no more replication to it, its cursor is gone after the
	// next maintenance pass (every 200ms here), and r2 keeps what it has.
	if _, err := r0.Policies().UpdateNamespace(ctx, "acme/pair", func(p *policy.Policies) error {
		p.ReplicationClusters = slices.DeleteFunc(p.ReplicationClusters, func(c string) bool { return c == "r2" })
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "r0's replication section to drop r2", func() bool {
		_, ok := getStats(t, r0, "acme/pair/grow").Repl["r2"]
		return !ok
	})
	produce(t, c0, topicName, "r0", 200, 50)
	c1 := pulsarClient(t, f.Regions[1].Endpoints().ServiceURL)
	if got := consumeAll(t, c1, topicName, 250, time.Minute); got.next["r0"] != 250 || len(got.errs) > 0 {
		t.Fatalf("r1: %d from r0, errors %v", got.next["r0"], got.errs)
	}
	cons, err := c2.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "after", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	n := 0
	for {
		qctx, qcancel := context.WithTimeout(ctx, 3*time.Second)
		m, err := cons.Receive(qctx)
		qcancel()
		if err != nil {
			break
		}
		var seq int
		if _, err := fmt.Sscanf(string(m.Payload()), "r0:%d", &seq); err != nil || seq >= 200 {
			t.Fatalf("r2 got %q after it was removed", m.Payload())
		}
		n++
	}
	if n != 200 {
		t.Errorf("r2 holds %d messages after the removal, want the 200 it had", n)
	}
}

func strp(s string) *string { return &s }
func u64p(v uint64) *uint64 { return &v }

// TestTopicReplicationOverride: a topic's own replication clusters
// replace its namespace's, through the admin API of any region: a topic
// kept local does not leave its region, a topic widened to a third region
// reaches it, and removing the override makes the topic follow its
// namespace again. Bad overrides are refused whole.
func TestTopicReplicationOverride(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	t.Parallel()
	f := startFederation(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r0, r1, r2 := f.Regions[0], f.Regions[1], f.Regions[2]
	if err := f.EnsureReplicated(ctx, "acme", "pair", []string{"r0", "r1"}); err != nil {
		t.Fatal(err)
	}
	post := func(r *region.Region, path string, body any) (int, string) {
		b, _ := json.Marshal(body)
		resp, err := http.Post(r.Endpoints().WebServiceURL+"/admin/v2/persistent/"+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(msg)
	}
	// Refused: an unknown cluster, an empty list.
	if code, msg := post(r1, "acme/pair/local/replication", []string{"r0", "nowhere"}); code < 400 || code >= 500 || !strings.Contains(msg, "nowhere") {
		t.Errorf("override with an unknown cluster: %d %s", code, msg)
	}
	if code, msg := post(r1, "acme/pair/local/replication", []string{}); code < 400 || code >= 500 {
		t.Errorf("empty override: %d %s", code, msg)
	}
	// Set through r1, for topics produced in r0.
	if code, msg := post(r1, "acme/pair/local/replication", []string{"r0"}); code/100 != 2 {
		t.Fatalf("keep local: %d %s", code, msg)
	}
	if code, msg := post(r1, "acme/pair/wide/replication", []string{"r0", "r1", "r2"}); code/100 != 2 {
		t.Fatalf("widen: %d %s", code, msg)
	}
	waitFor(t, 10*time.Second, "the overrides in r0", func() bool {
		cs, err := r0.Policies().ReplicationClusters(ctx, mustTopic(t, "persistent://acme/pair/wide"))
		return err == nil && len(cs) == 3
	})
	c0 := pulsarClient(t, r0.Endpoints().ServiceURL)
	c1 := pulsarClient(t, r1.Endpoints().ServiceURL)
	c2 := pulsarClient(t, r2.Endpoints().ServiceURL)
	for _, c := range []pulsar.Client{c1, c2} {
		faultHold(t, c, "persistent://acme/pair/wide")
		faultHold(t, c, "persistent://acme/pair/local")
	}
	produce(t, c0, "persistent://acme/pair/local", "r0", 0, 50)
	produce(t, c0, "persistent://acme/pair/wide", "r0", 0, 50)
	for _, c := range []pulsar.Client{c1, c2} {
		if got := consumeAll(t, c, "persistent://acme/pair/wide", 50, time.Minute); got.next["r0"] != 50 {
			t.Fatalf("wide topic: %d of 50", got.next["r0"])
		}
	}
	// Nothing of the local topic left r0 (the replication of "wide" above
	// shows the workers are running).
	if got := countAvailable(t, c1, "persistent://acme/pair/local"); got != 0 {
		t.Errorf("r1 got %d messages of a topic kept in r0", got)
	}
	// Back to the namespace's clusters: r1 gets what follows, and the
	// retained backlog (the replication cursor starts at the earliest
	// retained entry).
	req, _ := http.NewRequest("DELETE", r2.Endpoints().WebServiceURL+"/admin/v2/persistent/acme/pair/local/replication", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("remove override: %v %v", resp, err)
	}
	resp.Body.Close()
	produce(t, c0, "persistent://acme/pair/local", "r0", 50, 10)
	if got := consumeAll(t, c1, "persistent://acme/pair/local", 60, time.Minute); got.next["r0"] != 60 {
		t.Fatalf("local topic after the override was removed: %d of 60 in r1", got.next["r0"])
	}
}

func mustTopic(t *testing.T, s string) topic.Name {
	t.Helper()
	n, err := topic.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// countAvailable counts the messages a new subscription at the earliest
// position receives within 3 s.
func countAvailable(t *testing.T, c pulsar.Client, topicName string) int {
	t.Helper()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "count", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	n := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		m, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			return n
		}
		cons.Ack(m)
		n++
	}
}
