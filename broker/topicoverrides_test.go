package broker_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

// The policies a topic may set over its namespace's and the broker's
// that used to be stored only: unacknowledged messages per subscription,
// the de-duplication snapshot interval, delayed delivery and
// persistence. Each is set through the admin API, which applies a change
// to the loaded topic at once.

// adminOK sends one admin request and fails the test unless it answers
// want.
func adminOK(t *testing.T, method, url, body string, want int) {
	t.Helper()
	if status, reason := httpDo(t, method, url, body); status != want {
		t.Fatalf("%s %s %s: %d %q, want %d", method, url, body, status, reason, want)
	}
}

// receiveFrom receives from whichever of c1 and c2 has a message, until
// n messages came (failing after 10 s).
func receiveFrom(t *testing.T, n int, c1, c2 pulsar.Consumer) []pulsar.ConsumerMessage {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	got := make([]pulsar.ConsumerMessage, 0, n)
	for len(got) < n {
		select {
		case m := <-c1.Chan():
			got = append(got, m)
		case m := <-c2.Chan():
			got = append(got, m)
		case <-timer.C:
			t.Fatalf("received %d of %d messages", len(got), n)
		}
	}
	return got
}

// noneFrom checks that neither c1 nor c2 receives anything within d.
func noneFrom(t *testing.T, d time.Duration, c1, c2 pulsar.Consumer) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case m := <-c1.Chan():
		t.Fatalf("unexpected message %q", m.Payload())
	case m := <-c2.Chan():
		t.Fatalf("unexpected message %q", m.Payload())
	case <-timer.C:
	}
}

// A Shared subscription stops dispatching, to all its consumers, while
// it holds its limit of unacknowledged messages and goes on as they are
// acknowledged: the topic's maxUnackedMessagesOnSubscription over the
// namespace's maxUnackedMessagesPerSubscription over the broker's.
func TestMaxUnackedMessagesOnSubscription(t *testing.T) {
	e := startEnv(t, nil)
	srv := e.adminServer()
	const tp = "persistent://public/default/subunacked"
	tpURL := srv.URL + "/admin/v2/persistent/public/default/subunacked/maxUnackedMessagesOnSubscription"
	adminOK(t, "POST", srv.URL+"/admin/v2/namespaces/public/default/maxUnackedMessagesPerSubscription", "4", http.StatusNoContent)
	adminOK(t, "POST", tpURL, "3", http.StatusNoContent)
	// Refused values change nothing.
	adminOK(t, "POST", tpURL, "-1", http.StatusPreconditionFailed)
	adminOK(t, "POST", srv.URL+"/admin/v2/namespaces/public/default/maxUnackedMessagesPerSubscription", "-1", http.StatusPreconditionFailed)

	c := e.client()
	opts := pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s", Type: pulsar.Shared}
	c1, err := c.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2, err := c.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	produce(t, p, "u", 8, nil)

	// The topic's 3, across both consumers.
	held := receiveFrom(t, 3, c1, c2)
	noneFrom(t, time.Second, c1, c2)
	// An acknowledgement makes room for one more.
	must(t, held[0].Consumer.Ack(held[0].Message))
	held = append(held[1:], receiveFrom(t, 1, c1, c2)...)
	noneFrom(t, 500*time.Millisecond, c1, c2)
	// Without the topic's own limit the namespace's 4 is in force, at
	// once on the loaded topic.
	adminOK(t, "DELETE", tpURL, "", http.StatusNoContent)
	held = append(held, receiveFrom(t, 1, c1, c2)...)
	noneFrom(t, 500*time.Millisecond, c1, c2)
	// The topic's 0 is no limit, over the namespace's.
	adminOK(t, "POST", tpURL, "0", http.StatusNoContent)
	held = append(held, receiveFrom(t, 3, c1, c2)...)
	if len(held) != 7 {
		t.Fatalf("%d unacknowledged messages, want the 7 not acknowledged", len(held))
	}
	seen := map[string]bool{}
	for _, m := range held {
		seen[string(m.Payload())] = true
	}
	if len(seen) != 7 {
		t.Fatalf("received %v: duplicates", seen)
	}
}

// The de-duplication state is snapshotted at least every
// deduplicationSnapshotInterval seconds while entries are written, long
// before the 1000 entries of the count trigger, so a topic loaded again
// replays less: the namespace's interval applies unless the topic sets
// its own (0: by count only).
func TestDeduplicationSnapshotInterval(t *testing.T) {
	e := startEnv(t, nil)
	srv := e.adminServer()
	on := true
	must(t, e.pol.CreateNamespace(ctxT(t), "public/snap", &policy.Policies{DeduplicationEnabled: &on}))
	adminOK(t, "POST", srv.URL+"/admin/v2/namespaces/public/snap/deduplicationSnapshotInterval", "1", http.StatusNoContent)
	const timed, untimed = "persistent://public/snap/timed", "persistent://public/snap/untimed"
	adminOK(t, "POST", srv.URL+"/admin/v2/persistent/public/snap/untimed/deduplicationSnapshotInterval", "0", http.StatusNoContent)
	adminOK(t, "POST", srv.URL+"/admin/v2/persistent/public/snap/untimed/deduplicationSnapshotInterval", "-3", http.StatusPreconditionFailed)

	c := e.client()
	const n = 10
	for _, tp := range []string{timed, untimed} {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, Name: "dp", DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		produce(t, p, "d", n, nil)
		p.Close()
	}
	// replay is what loading the topic replays: the entries after the
	// snapshot's position.
	replay := func(tp string) int64 {
		name, _ := topic.Parse(tp)
		st, err := e.b.AdminAPI().Topics.InternalStats(ctxT(t), name)
		if err != nil {
			t.Fatal(err)
		}
		cur, ok := st.Cursors["isobar.dedup"]
		if !ok {
			t.Fatalf("%s has no de-duplication cursor: %+v", tp, st.Cursors)
		}
		return cur.NumberOfEntriesSinceFirstNotAckedMessage
	}
	testWaitFor(t, "the timed snapshot to cover every entry", func() bool { return replay(timed) == 0 })
	if r := replay(untimed); r != n {
		t.Fatalf("untimed topic: %d entries after its snapshot, want %d (no snapshot by time)", r, n)
	}
	// Loaded again, the timed topic replays nothing and the other all of
	// its entries; both still know the producer's last sequence id.
	for _, tp := range []string{timed, untimed} {
		name, _ := topic.Parse(tp)
		must(t, e.b.Unload(ctxT(t), name))
	}
	if r := replay(timed); r != 0 {
		t.Fatalf("timed topic loaded again replays %d entries, want 0", r)
	}
	if r := replay(untimed); r != n {
		t.Fatalf("untimed topic loaded again replays %d entries, want %d", r, n)
	}
	for _, tp := range []string{timed, untimed} {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, Name: "dp", DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		// The client numbers on from the last sequence id the broker
		// tells it.
		produce(t, p, "e", 1, nil)
		if got := p.LastSequenceID(); got != n {
			t.Fatalf("%s: sequence id %d after loading again, want %d", tp, got, n)
		}
		p.Close()
	}
}

// delayedProducer makes a producer that does not batch (a batch takes
// the deliver-at time of its first message).
func delayedProducer(t *testing.T, c pulsar.Client, tp string) pulsar.Producer {
	t.Helper()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true, SendTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func sharedConsumer(t *testing.T, c pulsar.Client, tp string) pulsar.Consumer {
	t.Helper()
	k, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

// Delayed delivery follows the topic's delayedDelivery, else its
// namespace's, else the broker's (on, broker.limits.maxDeliveryDelay):
// off delivers at once, maxDeliveryDelayInMillis refuses longer delays,
// tickTime makes deliveries up to one tick late, never early.
func TestDelayedDeliveryPolicy(t *testing.T) {
	e := startEnv(t, func(c *setup) { c.Limits.MaxDeliveryDelay = time.Hour })
	srv := e.adminServer()
	must(t, e.pol.CreateNamespace(ctxT(t), "public/delay", nil))
	nsURL := srv.URL + "/admin/v2/namespaces/public/delay/delayedDelivery"
	topicURL := func(local string) string {
		return srv.URL + "/admin/v2/persistent/public/delay/" + local + "/delayedDelivery"
	}
	adminOK(t, "POST", nsURL, `{"active":false,"tickTime":0,"maxDeliveryDelayInMillis":0}`, http.StatusNoContent)
	adminOK(t, "POST", nsURL, `{"active":true,"tickTime":-1}`, http.StatusBadRequest)
	if status, body := httpGet(t, nsURL); status != http.StatusOK || !strings.Contains(body, `"active":false`) {
		t.Fatalf("namespace delayed delivery: %d %s", status, body)
	}
	c := e.client()

	t.Run("off", func(t *testing.T) {
		// The namespace's: delivered at once, and the broker's longest
		// delay is not checked (as Pulsar, with delayed delivery off).
		const tp = "persistent://public/delay/off"
		k := sharedConsumer(t, c, tp)
		p := delayedProducer(t, c, tp)
		produce(t, p, "now", 1, func(_ int, m *pulsar.ProducerMessage) { m.DeliverAfter = 2 * time.Hour })
		receiveN(t, k, 1, true)
	})

	t.Run("maxDeliveryDelay", func(t *testing.T) {
		// The topic's, on, with a longest delay of 1 s over the broker's
		// hour.
		const tp = "persistent://public/delay/max"
		adminOK(t, "POST", topicURL("max"), `{"active":true,"tickTime":0,"maxDeliveryDelayInMillis":1000}`, http.StatusNoContent)
		k := sharedConsumer(t, c, tp)
		p := delayedProducer(t, c, tp)
		_, err := p.Send(ctxT(t), &pulsar.ProducerMessage{Payload: []byte("far"), DeliverAfter: time.Minute})
		if err == nil {
			t.Fatal("a delay of a minute was accepted with a topic maximum of 1s")
		}
		p = delayedProducer(t, c, tp)
		sent := time.Now()
		produce(t, p, "near", 1, func(_ int, m *pulsar.ProducerMessage) { m.DeliverAfter = 300 * time.Millisecond })
		ms := receiveN(t, k, 1, true)
		if got := string(ms[0].Payload()); got != "near-0" {
			t.Fatalf("received %q, want near-0 (the refused message is not stored)", got)
		}
		// The deliver-at time travels in whole milliseconds (the client
		// truncates), so it may fall up to 1 ms before sent+300ms.
		if early := time.Since(sent); early < 299*time.Millisecond {
			t.Fatalf("delivered after %v, before its delay of 300ms", early)
		}
	})

	t.Run("tickTime", func(t *testing.T) {
		// A tick of 2 s: a message due 200 ms after a multiple of 2 s
		// of the clock comes at the next multiple, 1.8 s late, not
		// before.
		const tp = "persistent://public/delay/tick"
		const tick = 2 * time.Second
		adminOK(t, "POST", topicURL("tick"), `{"active":true,"tickTime":2000}`, http.StatusNoContent)
		k := sharedConsumer(t, c, tp)
		p := delayedProducer(t, c, tp)
		ms := tick.Milliseconds()
		due := time.UnixMilli((time.Now().UnixMilli()/ms+2)*ms + 200)
		produce(t, p, "tick", 1, func(_ int, m *pulsar.ProducerMessage) { m.DeliverAt = due })
		receiveN(t, k, 1, true)
		late := time.Since(due)
		if late < tick-300*time.Millisecond {
			t.Fatalf("delivered %v after its deliver-at time; with a tick of %v it is due at the next tick, 1.8s after", late, tick)
		}
		if late > tick+3*time.Second {
			t.Fatalf("delivered %v after its deliver-at time, more than a tick late", late)
		}
	})

	t.Run("changeReachesLoadedTopic", func(t *testing.T) {
		// On for the topic: a message waits for its hour; turned off,
		// it is delivered at once.
		const tp = "persistent://public/delay/change"
		adminOK(t, "POST", topicURL("change"), `{"active":true}`, http.StatusNoContent)
		k := sharedConsumer(t, c, tp)
		p := delayedProducer(t, c, tp)
		produce(t, p, "later", 1, func(_ int, m *pulsar.ProducerMessage) { m.DeliverAfter = 30 * time.Minute })
		noMore(t, k, time.Second)
		adminOK(t, "POST", topicURL("change"), `{"active":false}`, http.StatusNoContent)
		receiveN(t, k, 1, true)
		// Removed, the namespace's (off) applies.
		adminOK(t, "DELETE", topicURL("change"), "", http.StatusNoContent)
		produce(t, p, "now", 1, func(_ int, m *pulsar.ProducerMessage) { m.DeliverAfter = 30 * time.Minute })
		receiveN(t, k, 1, true)
	})
}

// httpGet answers a GET's status and body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// A topic's persistence policy shapes its new ledgers over its
// namespace's: on load, and on a loaded topic from its next ledger.
func TestTopicPersistencePolicy(t *testing.T) {
	e := startEnv(t, func(c *setup) { c.Ledger.MaxEntriesPerLedger = 5 })
	srv := e.adminServer()
	setNS(t, e, "public/default", func(p *policy.Policies) {
		p.Persistence = &policy.PersistencePolicies{BookkeeperEnsemble: 3, BookkeeperWriteQuorum: 2, BookkeeperAckQuorum: 2}
	})
	const tp = "persistent://public/default/tpers"
	url := srv.URL + "/admin/v2/persistent/public/default/tpers/persistence"
	adminOK(t, "POST", url, `{"bookkeeperEnsemble":3,"bookkeeperWriteQuorum":3,"bookkeeperAckQuorum":1}`, http.StatusNoContent)
	// Refused: nothing stored, the policy set stays.
	for _, bad := range []string{
		`{"bookkeeperEnsemble":1,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":1}`,
		`{"bookkeeperEnsemble":3,"bookkeeperWriteQuorum":1,"bookkeeperAckQuorum":2}`,
		`{"bookkeeperEnsemble":-1,"bookkeeperWriteQuorum":-1,"bookkeeperAckQuorum":-1}`,
		`{"bookkeeperEnsemble":2,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":2,"managedLedgerMaxMarkDeleteRate":-1}`,
	} {
		adminOK(t, "POST", url, bad, http.StatusBadRequest)
	}
	if status, body := httpGet(t, url); status != http.StatusOK || !strings.Contains(body, `"bookkeeperWriteQuorum":3`) {
		t.Fatalf("topic persistence after refused input: %d %s", status, body)
	}

	p, err := e.client().CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	name, _ := topic.Parse(tp)
	lastLedger := func(want [3]int) {
		t.Helper()
		st, err := e.b.AdminAPI().Topics.InternalStats(ctxT(t), name)
		if err != nil || len(st.Ledgers) == 0 {
			t.Fatalf("internal stats: %+v %v", st, err)
		}
		md, _, err := e.lc.Metadata(ctxT(t), uint64(st.Ledgers[len(st.Ledgers)-1].LedgerID))
		if err != nil {
			t.Fatal(err)
		}
		if got := [3]int{md.EnsembleSize, md.WriteQuorum, md.AckQuorum}; got != want {
			t.Fatalf("ledger %d (the last of %d): E/Qw/Qa = %v, want %v", st.Ledgers[len(st.Ledgers)-1].LedgerID, len(st.Ledgers), got, want)
		}
	}
	// Loaded with the topic's policy.
	produce(t, p, "a", 1, nil)
	lastLedger([3]int{3, 3, 1})
	// Changed on the loaded topic: its next ledger (after 5 entries).
	adminOK(t, "POST", url, `{"bookkeeperEnsemble":2,"bookkeeperWriteQuorum":1,"bookkeeperAckQuorum":1}`, http.StatusNoContent)
	produce(t, p, "b", 5, nil)
	lastLedger([3]int{2, 1, 1})
	// Removed: the namespace's.
	adminOK(t, "DELETE", url, "", http.StatusNoContent)
	produce(t, p, "c", 5, nil)
	lastLedger([3]int{3, 2, 2})
	// The namespace's changed: the loaded topic's next ledger once the
	// maintenance round brings the change.
	setNS(t, e, "public/default", func(p *policy.Policies) {
		p.Persistence = &policy.PersistencePolicies{BookkeeperEnsemble: 2, BookkeeperWriteQuorum: 2, BookkeeperAckQuorum: 1}
	})
	e.b.MaintainOnce(ctxT(t))
	produce(t, p, "d", 5, nil)
	lastLedger([3]int{2, 2, 1})
}
