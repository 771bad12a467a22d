package broker_test

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/compactor"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/metastore/metafault"
	"github.com/isobar-mq/isobar/topic"
)

// kv is a message as the tests compare them: key=value, and its id.
type kv struct {
	s  string
	id pulsar.MessageID
}

func (k kv) String() string { return k.s }

// put sends key=value (value "" is a deletion: an empty payload, with a
// property so the Go client hands it to consumers; key "" is none) and
// returns its id.
func put(t *testing.T, p pulsar.Producer, key, value string) pulsar.MessageID {
	t.Helper()
	m := &pulsar.ProducerMessage{Key: key, Payload: []byte(value)}
	if value == "" {
		m.Payload, m.Properties = nil, map[string]string{"op": "delete"}
	}
	id, err := p.Send(ctxT(t), m)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// putBatch sends key=value pairs in one batch.
func putBatch(t *testing.T, p pulsar.Producer, pairs ...string) []pulsar.MessageID {
	t.Helper()
	ids := make([]pulsar.MessageID, len(pairs))
	var wg sync.WaitGroup
	for i, pair := range pairs {
		k, v, _ := strings.Cut(pair, "=")
		m := &pulsar.ProducerMessage{Key: k, Payload: []byte(v)}
		if v == "" {
			m.Payload, m.Properties = nil, map[string]string{"op": "delete"}
		}
		wg.Add(1)
		p.SendAsync(ctxT(t), m, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("send %s: %v", pair, err)
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

func msgKV(m pulsar.Message) kv {
	return kv{s: m.Key() + "=" + string(m.Payload()), id: m.ID()}
}

// kvs are ms as key=value with their ids.
func kvs(ms []pulsar.Message) []kv {
	out := make([]kv, len(ms))
	for i, m := range ms {
		out[i] = msgKV(m)
	}
	return out
}

func strs(ks []kv) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.s
	}
	return out
}

func sameID(a, b pulsar.MessageID) bool {
	return a.LedgerID() == b.LedgerID() && a.EntryID() == b.EntryID() && a.BatchIdx() == b.BatchIdx()
}

// adminClient is pulsaradmin on e's admin API.
func (e *env) adminClient() pulsaradmin.Client {
	e.t.Helper()
	c, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: e.adminServer().URL})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// compactNow triggers a compaction of tp and waits for its status to
// say it ended; it returns that status.
func compactNow(t *testing.T, adm pulsaradmin.Client, tp string) utils.LongRunningProcessStatus {
	t.Helper()
	tn, err := utils.GetTopicName(tp)
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Compact(*tn); err != nil {
		t.Fatalf("compact %s: %v", tp, err)
	}
	return awaitCompaction(t, adm, tp)
}

// awaitCompaction waits until tp's compaction status is not RUNNING.
func awaitCompaction(t *testing.T, adm pulsaradmin.Client, tp string) utils.LongRunningProcessStatus {
	t.Helper()
	tn, _ := utils.GetTopicName(tp)
	var st utils.LongRunningProcessStatus
	testcluster.WaitFor(t, 20*time.Second, func() bool {
		var err error
		st, err = adm.Topics().CompactStatus(*tn)
		if err != nil {
			t.Fatalf("compaction status of %s: %v", tp, err)
		}
		return st.Status != utils.RUNNING
	})
	return st
}

// TestReadCompacted: keys overwritten (alone and in batches) and deleted
// compact to their latest values; a reader with ReadCompacted sees those,
// with their original message ids, then the messages after the horizon;
// a consumer without it sees everything; a durable ReadCompacted
// consumer reads the same and acknowledges; a seek to the start reads the
// compacted view again; after a broker restart the compacted view is
// still served.
func TestReadCompacted(t *testing.T) {
	e := startEnv(t, func(s *setup) { s.Ledger.MaxEntriesPerLedger = 4 })
	adm := e.adminClient()
	const tp = "persistent://public/default/compacted"
	c := e.client()
	single, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	batched, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, BatchingMaxPublishDelay: time.Hour, BatchingMaxMessages: 100, CompressionType: pulsar.LZ4})
	if err != nil {
		t.Fatal(err)
	}
	// A consumer that does not read compacted, there from the start.
	all, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "all", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]pulsar.MessageID{}
	ids["a=1"] = put(t, single, "a", "1")
	ids["b=1"] = put(t, single, "b", "1")
	bids := putBatch(t, batched, "c=1", "a=2", "d=1", "c=2")
	ids["d=1"], ids["c=2"] = bids[2], bids[3]
	put(t, single, "", "no key")
	put(t, single, "b", "")  // deletes b
	put(t, single, "e", "1") // e: set, then deleted in a batch
	bids = putBatch(t, batched, "e=", "f=1")
	ids["f=1"] = bids[1]
	ids["a=3"] = put(t, single, "a", "3")
	everything := []string{"a=1", "b=1", "c=1", "a=2", "d=1", "c=2", "=no key", "b=", "e=1", "e=", "f=1", "a=3"}

	if st := compactNow(t, adm, tp); st.Status != utils.SUCCESS {
		t.Fatalf("compaction: %+v", st)
	}
	compacted := []string{"d=1", "c=2", "f=1", "a=3"}
	checkIDs := func(what string, got []kv) {
		t.Helper()
		for _, k := range got {
			if want, ok := ids[k.s]; ok && !sameID(k.id, want) {
				t.Errorf("%s: %s has id %v, sent as %v", what, k.s, k.id, want)
			}
		}
	}
	newReader := func(c pulsar.Client) pulsar.Reader {
		r, err := c.CreateReader(pulsar.ReaderOptions{Topic: tp, StartMessageID: pulsar.EarliestMessageID(), ReadCompacted: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		return r
	}
	r := newReader(c)
	got := kvs(readAll(t, r))
	if !slices.Equal(strs(got), compacted) {
		t.Fatalf("ReadCompacted reader: %v, want %v", got, compacted)
	}
	checkIDs("ReadCompacted reader", got)

	// Messages after the horizon follow, as sent.
	ids["g=1"] = put(t, single, "g", "1")
	ids["a=4"] = put(t, single, "a", "4")
	after := []string{"g=1", "a=4"}
	if got := kvs(readAll(t, r)); !slices.Equal(strs(got), after) {
		t.Fatalf("ReadCompacted reader after the horizon: %v, want %v", got, after)
	}

	// The consumer that does not read compacted sees everything. Once it
	// acknowledged it, the ledgers up to the horizon are trimmed: what is
	// read compacted from now on comes from the compacted ledger only.
	got = kvs(receiveN(t, all, len(everything)+2, false))
	if want := append(slices.Clone(everything), after...); !slices.Equal(strs(got), want) {
		t.Fatalf("plain consumer: %v, want %v", got, want)
	}
	if err := all.AckIDCumulative(got[len(got)-1].id); err != nil {
		t.Fatal(err)
	}
	all.Close()
	testcluster.WaitFor(t, 10*time.Second, func() bool {
		st, err := e.b.AdminAPI().Topics.InternalStats(ctxT(t), mustParse(t, tp))
		return err == nil && len(st.Ledgers) > 0 && st.Ledgers[0].LedgerID > ids["d=1"].LedgerID()
	})

	// A durable consumer reading compacted, which acknowledges.
	dur, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "dur", Type: pulsar.Exclusive,
		ReadCompacted: true, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	got = kvs(receiveN(t, dur, len(compacted)+len(after), false))
	if want := append(slices.Clone(compacted), after...); !slices.Equal(strs(got), want) {
		t.Fatalf("durable ReadCompacted consumer: %v, want %v", got, want)
	}
	checkIDs("durable ReadCompacted consumer", got)
	if err := dur.AckIDCumulative(got[len(got)-1].id); err != nil {
		t.Fatal(err)
	}
	dur.Close()

	// A seek back to the start reads the compacted view again.
	if err := r.SeekByTime(time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	if got, want := strs(kvs(readAll(t, r))), append(slices.Clone(compacted), after...); !slices.Equal(got, want) {
		t.Fatalf("after a seek to the start: %v, want %v", got, want)
	}

	// The compacted view outlives the broker.
	e.b.Shutdown(ctxT(t))
	e.startBroker()
	c2 := e.client()
	got = kvs(readAll(t, newReader(c2)))
	if want := append(slices.Clone(compacted), after...); !slices.Equal(strs(got), want) {
		t.Fatalf("ReadCompacted reader after a restart: %v, want %v", got, want)
	}
	checkIDs("ReadCompacted reader after a restart", got)
	adm = e.adminClient()
	tn, _ := utils.GetTopicName(tp)
	if st, err := adm.Topics().CompactStatus(*tn); err != nil || st.Status != utils.NOTRUN {
		t.Fatalf("compaction status after a restart: %+v %v (Pulsar keeps it in memory: NOT_RUN)", st, err)
	}
	// Compacting again folds the messages after the old horizon in.
	if st := compactNow(t, adm, tp); st.Status != utils.SUCCESS {
		t.Fatalf("second compaction: %+v", st)
	}
	if got, want := strs(kvs(readAll(t, newReader(c2)))), []string{"d=1", "c=2", "f=1", "g=1", "a=4"}; !slices.Equal(got, want) {
		t.Fatalf("after the second compaction: %v, want %v", got, want)
	}
}

// TestCompactionThreshold: a namespace's compactionThreshold starts a
// compaction from the maintenance loop once the backlog compaction has
// not read exceeds it; a topic's own threshold (Pulsar's topic policy)
// wins over it, 0 turning it off.
func TestCompactionThreshold(t *testing.T) {
	e := startEnv(t, func(s *setup) { s.MaintenanceInterval = time.Hour }) // driven by MaintainOnce
	adm := e.adminClient()
	const tp = "persistent://public/default/auto"
	tn, _ := utils.GetTopicName(tp)
	p, err := e.client().CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	put(t, p, "a", "1")
	put(t, p, "a", "2")
	// No threshold: maintenance compacts nothing.
	e.b.MaintainOnce(ctxT(t))
	if st, err := adm.Topics().CompactStatus(*tn); err != nil || st.Status != utils.NOTRUN {
		t.Fatalf("without a threshold: %+v %v", st, err)
	}
	ns, _ := utils.GetNamespaceName("public/default")
	if err := adm.Namespaces().SetCompactionThreshold(*ns, 10); err != nil {
		t.Fatal(err)
	}
	e.b.MaintainOnce(ctxT(t))
	if st := awaitCompaction(t, adm, tp); st.Status != utils.SUCCESS {
		t.Fatalf("compaction by the namespace's threshold: %+v", st)
	}
	horizon := func() mledger.Position {
		t.Helper()
		st, err := e.b.AdminAPI().Topics.InternalStats(ctxT(t), mustParse(t, tp))
		if err != nil {
			t.Fatal(err)
		}
		cs, ok := st.Cursors[compactor.CursorName]
		if !ok {
			t.Fatalf("no %s cursor: %v", compactor.CursorName, st.Cursors)
		}
		var p mledger.Position
		fmt.Sscanf(cs.MarkDeletePosition, "%d:%d", &p.Ledger, &p.Entry)
		return p
	}
	h1 := horizon()
	last := put(t, p, "a", "3")
	if h1.Entry != last.EntryID()-1 {
		t.Fatalf("horizon %v, want the entry before %v", h1, last)
	}

	// The topic's own threshold of 0 turns it off for the topic.
	if err := adm.Topics().SetCompactionThreshold(*tn, 0); err != nil {
		t.Fatal(err)
	}
	if v, err := adm.Topics().GetCompactionThreshold(*tn, false); err != nil || v != 0 {
		t.Fatalf("topic threshold: %d %v", v, err)
	}
	e.b.MaintainOnce(ctxT(t))
	if st := awaitCompaction(t, adm, tp); st.Status != utils.SUCCESS || horizon() != h1 {
		t.Fatalf("with the topic's threshold 0: %+v, horizon %v (was %v)", st, horizon(), h1)
	}
	// And a topic threshold of its own compacts it.
	if err := adm.Topics().SetCompactionThreshold(*tn, 1); err != nil {
		t.Fatal(err)
	}
	e.b.MaintainOnce(ctxT(t))
	testcluster.WaitFor(t, 20*time.Second, func() bool { return horizon().Entry == last.EntryID() })
	if st := awaitCompaction(t, adm, tp); st.Status != utils.SUCCESS {
		t.Fatalf("compaction by the topic's threshold: %+v", st)
	}
}

func mustParse(t *testing.T, tp string) topic.Name {
	t.Helper()
	n, err := topic.Parse(tp)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCompactionPartitioned: compacting a partitioned topic compacts
// each partition (Pulsar's rule); each partition has its status, the
// partitioned topic none.
func TestCompactionPartitioned(t *testing.T) {
	e := startEnv(t, nil)
	adm := e.adminClient()
	const tp = "persistent://public/default/parts"
	tn, _ := utils.GetTopicName(tp)
	if err := adm.Topics().Create(*tn, 2); err != nil {
		t.Fatal(err)
	}
	p, err := e.client().CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		put(t, p, fmt.Sprint("k", i%3), fmt.Sprint(i))
	}
	if err := adm.Topics().Compact(*tn); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if st := awaitCompaction(t, adm, fmt.Sprintf("%s-partition-%d", tp, i)); st.Status != utils.SUCCESS {
			t.Fatalf("partition %d: %+v", i, st)
		}
	}
	if _, err := adm.Topics().CompactStatus(*tn); err == nil || !strings.Contains(err.Error(), "partitioned") {
		t.Fatalf("status of the partitioned topic: %v, want refused", err)
	}
	// One reader per partition (pulsar-client-go's HasNext over several
	// partitions races with itself under -race).
	var got []string
	for i := range 2 {
		r, err := e.client().CreateReader(pulsar.ReaderOptions{Topic: fmt.Sprintf("%s-partition-%d", tp, i), StartMessageID: pulsar.EarliestMessageID(), ReadCompacted: true})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strs(kvs(readAll(t, r)))...)
		r.Close()
	}
	slices.Sort(got)
	if want := []string{"k0=9", "k1=7", "k2=8"}; !slices.Equal(got, want) {
		t.Fatalf("ReadCompacted reader of the partitioned topic: %v, want %v", got, want)
	}
}

// TestCompactionBadInput: compacting a topic that does not exist is 404
// and a compaction already running 409 (Pulsar's wording); read_compacted
// is refused on a Shared subscription (Pulsar's error) and on a
// non-persistent topic; the compaction cursor's name cannot be
// subscribed to; a negative or malformed compactionThreshold is refused
// (400, or 412 for a well-formed but invalid value, as the other
// policies) and stores nothing.
func TestCompactionBadInput(t *testing.T) {
	var fm *metafault.Meta
	var lc *ledger.Client
	e := startEnv(t, func(s *setup) {
		if lc == nil {
			fm = metafault.Wrap(s.Meta, nil)
			var err error
			if lc, err = ledger.NewClient(fm, ledger.Config{Region: s.Region, Logger: s.Logger, RequestTimeout: 5 * time.Second}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lc.Close() })
		}
		s.Ledgers = lc
	})
	srv := e.adminServer()
	base := srv.URL + "/admin/v2/persistent/public/default/"
	if code, reason := httpDo(t, http.MethodPut, base+"nosuch/compaction", ""); code != http.StatusNotFound {
		t.Fatalf("compact a topic that does not exist: %d %q, want 404", code, reason)
	}
	if code, reason := httpDo(t, http.MethodGet, base+"nosuch/compaction", ""); code != http.StatusNotFound {
		t.Fatalf("status of a topic that does not exist: %d %q, want 404", code, reason)
	}

	const tp = "persistent://public/default/bad"
	c := e.client()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	put(t, p, "a", "1")

	// A compaction held in phase two (its ledger's creation blocked):
	// a second request is 409.
	entered, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	t.Cleanup(func() { released.Do(func() { close(release) }) })
	ledgersPrefix := metastore.RegionPrefix(e.cl.Region) + "ledgers/"
	fm.Set(metafault.InjectorFunc(func(op metafault.Op, key string) error {
		if op == metafault.OpCreate && strings.HasPrefix(key, ledgersPrefix) {
			once.Do(func() { close(entered) })
			<-release
		}
		return nil
	}))
	if code, reason := httpDo(t, http.MethodPut, base+"bad/compaction", ""); code != http.StatusNoContent {
		t.Fatalf("compact: %d %q", code, reason)
	}
	<-entered
	if code, reason := httpDo(t, http.MethodGet, base+"bad/compaction", ""); code != http.StatusOK {
		t.Fatalf("status while running: %d %q", code, reason)
	}
	if code, reason := httpDo(t, http.MethodPut, base+"bad/compaction", ""); code != http.StatusConflict || reason != "Compaction already in progress" {
		t.Fatalf("compact while running: %d %q, want 409 Compaction already in progress", code, reason)
	}
	released.Do(func() { close(release) })
	fm.Set(nil)
	if st := awaitCompaction(t, e.adminClient(), tp); st.Status != utils.SUCCESS {
		t.Fatalf("the held compaction: %+v", st)
	}

	// read_compacted where Pulsar refuses it.
	_, err = c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "shared", Type: pulsar.Shared, ReadCompacted: true})
	if err == nil || !strings.Contains(err.Error(), "readCompacted only allowed on failover or exclusive subscriptions") {
		t.Fatalf("ReadCompacted on a Shared subscription: %v", err)
	}
	_, err = c.Subscribe(pulsar.ConsumerOptions{Topic: "non-persistent://public/default/np", SubscriptionName: "s", ReadCompacted: true})
	if err == nil || !strings.Contains(err.Error(), "non-persistent") {
		t.Fatalf("ReadCompacted on a non-persistent topic: %v", err)
	}
	_, err = c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: compactor.CursorName})
	if err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("subscribing to %s: %v", compactor.CursorName, err)
	}

	// compactionThreshold: refused values store nothing.
	for _, body := range []string{"-1", `"10"`, "1.5", "null", ""} {
		if code, reason := httpDo(t, http.MethodPost, base+"bad/compactionThreshold", body); code != http.StatusBadRequest && code != http.StatusPreconditionFailed || reason == "" {
			t.Fatalf("topic compactionThreshold %q: %d %q, want 400 or 412 with a reason", body, code, reason)
		}
		if body == "null" || body == "" {
			continue // (the namespace's PUT takes those as a removal)
		}
		if code, reason := httpDo(t, http.MethodPut, srv.URL+"/admin/v2/namespaces/public/default/compactionThreshold", body); code != http.StatusBadRequest && code != http.StatusPreconditionFailed || reason == "" {
			t.Fatalf("namespace compactionThreshold %q: %d %q, want 400 or 412 with a reason", body, code, reason)
		}
	}
	tps, _, err := e.pol.TopicPoliciesIn(ctxT(t), mustParse(t, tp), policy.LocalScope)
	if err != nil || tps.CompactionThreshold != nil {
		t.Fatalf("topic policies after refused thresholds: %+v %v", tps, err)
	}
	ns, err := e.pol.Namespace(ctxT(t), "public/default")
	if err != nil || ns.CompactionThreshold != nil {
		t.Fatalf("namespace policies after refused thresholds: %+v %v", ns.CompactionThreshold, err)
	}
}

// TestCompactionCrashKeepsHorizon: a broker that stops in the middle of
// a compaction (Abort, as a crash: every entry written to the new
// compacted ledger, its close held at the metadata store through the
// metafault seam) leaves the previous compaction in force: after a
// restart a ReadCompacted reader gets the first compaction's view and,
// uncompacted, what came after its horizon; the next compaction then
// succeeds. What this shows is the switch's atomicity as the store sees
// it: the aborted broker's goroutine still runs its cleanup once
// released (a real crash would leave the half-written ledger orphaned,
// which changes nothing the topic reads).
func TestCompactionCrashKeepsHorizon(t *testing.T) {
	var fm *metafault.Meta
	var lc *ledger.Client
	e := startEnv(t, func(s *setup) {
		if lc == nil {
			fm = metafault.Wrap(s.Meta, nil)
			var err error
			if lc, err = ledger.NewClient(fm, ledger.Config{Region: s.Region, Logger: s.Logger, RequestTimeout: 5 * time.Second}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lc.Close() })
		}
		s.Ledgers = lc
	})
	adm := e.adminClient()
	const tp = "persistent://public/default/crash"
	p, err := e.client().CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	put(t, p, "a", "1")
	put(t, p, "b", "1")
	put(t, p, "a", "2")
	if st := compactNow(t, adm, tp); st.Status != utils.SUCCESS {
		t.Fatalf("first compaction: %+v", st)
	}
	put(t, p, "b", "2")
	put(t, p, "c", "1")
	put(t, p, "b", "3")

	// The second compaction writes its ledger, then its close (a CAS of
	// the ledger's metadata) is held: the broker crashes there.
	entered, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	t.Cleanup(func() { released.Do(func() { close(release) }) })
	ledgersPrefix := metastore.RegionPrefix(e.cl.Region) + "ledgers/"
	fm.Set(metafault.InjectorFunc(func(op metafault.Op, key string) error {
		if op == metafault.OpCAS && strings.HasPrefix(key, ledgersPrefix) {
			once.Do(func() { close(entered) })
			<-release
			return metafault.ErrInjected
		}
		return nil
	}))
	tn, _ := utils.GetTopicName(tp)
	if err := adm.Topics().Compact(*tn); err != nil {
		t.Fatal(err)
	}
	<-entered
	e.b.Abort()
	released.Do(func() { close(release) })
	fm.Set(nil)

	e.startBroker()
	r, err := e.client().CreateReader(pulsar.ReaderOptions{Topic: tp, StartMessageID: pulsar.EarliestMessageID(), ReadCompacted: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, want := strs(kvs(readAll(t, r))), []string{"b=1", "a=2", "b=2", "c=1", "b=3"}; !slices.Equal(got, want) {
		t.Fatalf("after the crash: %v, want the first compaction's view then the rest as sent %v", got, want)
	}
	adm = e.adminClient()
	if st := compactNow(t, adm, tp); st.Status != utils.SUCCESS {
		t.Fatalf("compaction after the crash: %+v", st)
	}
	r2, err := e.client().CreateReader(pulsar.ReaderOptions{Topic: tp, StartMessageID: pulsar.EarliestMessageID(), ReadCompacted: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if got, want := strs(kvs(readAll(t, r2))), []string{"a=2", "c=1", "b=3"}; !slices.Equal(got, want) {
		t.Fatalf("after the next compaction: %v, want %v", got, want)
	}
}

// TestTableViewOnCompactedTopic: pulsar-client-go's TableView (a
// ReadCompacted reader looping on HasNext) loads a compacted topic whose
// last message is a deletion inside the compacted view: the last message
// id a ReadCompacted consumer is told is the view's last, so HasNext
// ends instead of waiting for a message the view no longer has.
func TestTableViewOnCompactedTopic(t *testing.T) {
	e := startEnv(t, nil)
	adm := e.adminClient()
	const tp = "persistent://public/default/table"
	c := e.client()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true, Schema: pulsar.NewStringSchema(nil)})
	if err != nil {
		t.Fatal(err)
	}
	put(t, p, "a", "1")
	put(t, p, "b", "1")
	put(t, p, "a", "") // the last message deletes a
	if st := compactNow(t, adm, tp); st.Status != utils.SUCCESS {
		t.Fatalf("compaction: %+v", st)
	}
	type result struct {
		tv  pulsar.TableView
		err error
	}
	done := make(chan result, 1)
	go func() {
		tv, err := c.CreateTableView(pulsar.TableViewOptions{Topic: tp, Schema: pulsar.NewStringSchema(nil), SchemaValueType: reflect.TypeOf(new(string))})
		done <- result{tv, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the table view did not finish loading the compacted topic")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.tv.Close()
	if keys := r.tv.Keys(); !slices.Equal(keys, []string{"b"}) {
		t.Fatalf("table view keys %v, want [b]", keys)
	}
	if v, ok := r.tv.Get("b").(*string); !ok || *v != "1" {
		t.Fatalf("table view b = %v, want 1", r.tv.Get("b"))
	}
}
