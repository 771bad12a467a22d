package replicator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/replicator/frame"
	"github.com/isobar-mq/isobar/replicator/pulsarconn"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// In-memory fakes of the worker's seams: no NATS server, no brokers.
// They block only on channels, so testing/synctest drives their time.

const testTopic = "persistent://t/ns/orders"

// entry encodes a message as a producer stores it; edit adjusts its
// metadata.
func entry(t testing.TB, payload string, edit ...func(*pb.MessageMetadata)) []byte {
	t.Helper()
	producer, seq, at := "p", uint64(1), uint64(1700000000000)
	meta := &pb.MessageMetadata{ProducerName: &producer, SequenceId: &seq, PublishTime: &at}
	for _, fn := range edit {
		fn(meta)
	}
	b, err := wire.AppendEntry(nil, meta, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// payloadOf is an entry's payload.
func payloadOf(t testing.TB, data []byte) string {
	t.Helper()
	_, payload, err := wire.DecodeEntry(data)
	if err != nil {
		t.Fatal(err)
	}
	return string(payload)
}

// subState encodes a subscription-state record as the source broker
// sends it on a replication cursor.
func subState(t testing.TB, sub string) []byte {
	t.Helper()
	body, err := replication.EncodeSubState(replication.SubState{Subscription: sub, MarkDelete: map[string]replication.Position{"a": {Ledger: 1, Entry: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	return entry(t, string(body), func(m *pb.MessageMetadata) {
		k, v := replication.SubStateProperty, sub
		m.Properties = append(m.Properties, &pb.KeyValue{Key: &k, Value: &v})
	})
}

// fakeCursor is a topic's replication cursor in the local brokers: the
// entries appended so far and a mark-delete position; a subscription
// reads from the mark-delete position on (as a new consumer of a
// durable cursor does). Source and Cursor.
type fakeCursor struct {
	mu         sync.Mutex
	log        []pulsarconn.Entry
	markDelete int           // index of the first entry not acknowledged
	wake       chan struct{} // closed and replaced on every change
	subscribes []time.Time
	subErrs    []error // the next subscribes fail with these
	acks       []pulsarconn.MessageID
	ackTimes   []time.Time
	open       int // subscriptions not closed
	nextEntry  int64
	sessions   []*fakeSub
}

func newFakeCursor() *fakeCursor { return &fakeCursor{wake: make(chan struct{})} }

func (c *fakeCursor) changedLocked() {
	close(c.wake)
	c.wake = make(chan struct{})
}

// add appends entries (payloads) at ledger 1 and returns their ids.
func (c *fakeCursor) add(t testing.TB, payloads ...string) []pulsarconn.MessageID {
	var datas [][]byte
	for _, p := range payloads {
		datas = append(datas, entry(t, p))
	}
	return c.addRaw(datas...)
}

func (c *fakeCursor) addRaw(datas ...[]byte) []pulsarconn.MessageID {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []pulsarconn.MessageID
	for _, d := range datas {
		id := pulsarconn.MessageID{Ledger: 1, Entry: c.nextEntry}
		c.nextEntry++
		c.log = append(c.log, pulsarconn.Entry{ID: id, Data: d})
		ids = append(ids, id)
	}
	c.changedLocked()
	return ids
}

// addState appends a subscription-state record (a control message: not
// stored, not acknowledged, id all ones).
func (c *fakeCursor) addState(data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, pulsarconn.Entry{ID: pulsarconn.MessageID{Ledger: -1, Entry: -1}, Data: data, Control: true})
	c.changedLocked()
}

func (c *fakeCursor) Subscribe(ctx context.Context, o pulsarconn.SubscribeOptions) (Cursor, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subscribes = append(c.subscribes, time.Now())
	if len(c.subErrs) > 0 {
		err := c.subErrs[0]
		c.subErrs = c.subErrs[1:]
		return nil, err
	}
	c.open++
	s := &fakeSub{c: c, pos: c.markDelete, closed: make(chan struct{}), opts: o}
	c.sessions = append(c.sessions, s)
	return s, nil
}

// failReceive makes the open subscription's next Receive fail with err,
// as a broker closing the consumer would.
func (c *fakeCursor) failReceive(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sessions[len(c.sessions)-1].err = err
	c.changedLocked()
}

func (c *fakeCursor) acked() []pulsarconn.MessageID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]pulsarconn.MessageID(nil), c.acks...)
}

func (c *fakeCursor) subscribeTimes() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.subscribes...)
}

func (c *fakeCursor) openSubs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

type fakeSub struct {
	c      *fakeCursor
	pos    int
	err    error
	closed chan struct{}
	opts   pulsarconn.SubscribeOptions
}

func (s *fakeSub) Receive(ctx context.Context) (pulsarconn.Entry, error) {
	for {
		s.c.mu.Lock()
		if s.err != nil {
			err := s.err
			s.c.mu.Unlock()
			return pulsarconn.Entry{}, err
		}
		if s.pos < len(s.c.log) {
			e := s.c.log[s.pos]
			s.pos++
			s.c.mu.Unlock()
			return e, nil
		}
		wake := s.c.wake
		s.c.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return pulsarconn.Entry{}, ctx.Err()
		case <-s.closed:
			return pulsarconn.Entry{}, pulsarconn.ErrClosed
		}
	}
}

func (s *fakeSub) AckCumulative(ctx context.Context, id pulsarconn.MessageID) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.acks = append(s.c.acks, id)
	s.c.ackTimes = append(s.c.ackTimes, time.Now())
	for i, e := range s.c.log {
		if !e.Control && e.ID == id && i+1 > s.c.markDelete {
			s.c.markDelete = i + 1
		}
	}
	return nil
}

func (s *fakeSub) Close(context.Context) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
		s.c.open--
	}
	return nil
}

// fakeBrokers are the destination region's brokers as a sink writes to
// them: per topic, the entries stored in order and, per source region,
// the highest source position stored, at or below which a copy is
// dropped and answered with success (docs/replication.md, step 5).
// Sink and Writer.
type fakeBrokers struct {
	mu       sync.Mutex
	stored   map[string][]storedEntry // by topic
	states   map[string][][]byte      // subscription states applied, by topic
	hwm      map[string]frame.Pos     // by topic + "|" + source
	dups     int
	created  int
	closed   int
	failNext int // the next sends fail
	hold     chan struct{}
	seqs     []uint64
}

type storedEntry struct {
	data []byte
	src  string
	pos  frame.Pos
}

func newFakeBrokers() *fakeBrokers {
	return &fakeBrokers{stored: map[string][]storedEntry{}, states: map[string][][]byte{}, hwm: map[string]frame.Pos{}}
}

func (b *fakeBrokers) CreateProducer(ctx context.Context, o pulsarconn.ProducerOptions) (Writer, error) {
	src, ok := replication.ProducerSource(o.Name)
	if !ok {
		return nil, fmt.Errorf("producer %q is not a replicator's", o.Name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.created++
	return &fakeWriter{b: b, topic: o.Topic, src: src}, nil
}

func (b *fakeBrokers) payloads(t testing.TB) []string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, e := range b.stored[testTopic] {
		out = append(out, payloadOf(t, e.data))
	}
	return out
}

type fakeWriter struct {
	b          *fakeBrokers
	topic, src string
	closed     bool
	// broken: a send failed; as the broker's chain of replicated adds,
	// every later send of this producer fails too (docs/replication.md,
	// step 5), until a new producer connects.
	broken bool
}

func (w *fakeWriter) SendAsync(data []byte, seq uint64, n int, sourceID *pulsarconn.MessageID, cb func(pulsarconn.MessageID, error)) {
	b := w.b
	b.mu.Lock()
	hold := b.hold
	b.mu.Unlock()
	if hold != nil {
		<-hold
	}
	b.mu.Lock()
	b.seqs = append(b.seqs, seq)
	var err error
	switch {
	case w.closed:
		err = pulsarconn.ErrClosed
	case w.broken:
		err = errors.New("fake broker: chain broken")
	case b.failNext > 0:
		b.failNext--
		w.broken = true
		err = errors.New("fake broker: add failed")
	case sourceID == nil: // a subscription state: applied, not stored
		b.states[w.topic] = append(b.states[w.topic], data)
	default:
		pos := frame.Pos{Ledger: sourceID.Ledger, Entry: sourceID.Entry}
		k := w.topic + "|" + w.src
		if hwm, ok := b.hwm[k]; ok && !hwm.Less(pos) {
			b.dups++
			break
		}
		b.hwm[k] = pos
		b.stored[w.topic] = append(b.stored[w.topic], storedEntry{data: data, src: w.src, pos: pos})
	}
	b.mu.Unlock()
	cb(pulsarconn.MessageID{}, err)
}

func (w *fakeWriter) Close(context.Context) error {
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	if !w.closed {
		w.closed = true
		w.b.closed++
	}
	return nil
}

// fakePolicies replicate every namespace across clusters, but for the
// topics with their own list.
type fakePolicies struct {
	clusters []string
	topics   map[string][]string
}

func (p fakePolicies) Namespace(ctx context.Context, ns string) (*policy.Policies, error) {
	return &policy.Policies{ReplicationClusters: p.clusters}, nil
}

func (p fakePolicies) TopicPolicies(ctx context.Context, name topic.Name) (policy.TopicPolicies, bool, error) {
	c, ok := p.topics[name.String()]
	return policy.TopicPolicies{ReplicationClusters: c}, ok, nil
}

func (p fakePolicies) ReplicationClusters(ctx context.Context, name topic.Name) ([]string, error) {
	if c, ok := p.topics[name.String()]; ok {
		return c, nil
	}
	return p.clusters, nil
}

// fakeRemote is a remote region as a source stream's Transport sees
// it: probes are answered at once (or never, while probesHang), frame
// requests wait for the test to answer them on calls, and while
// unreachable every request fails at once with no responders.
type fakeRemote struct {
	mu          sync.Mutex
	unreachable bool
	probesHang  bool
	probeDelay  time.Duration // probes are answered this late
	probeReply  *nats.Msg     // nil: an empty reply
	probes      []time.Time
	noResponder []time.Time // requests refused with no responders
	calls       chan *call
}

type call struct {
	msg   *nats.Msg
	at    time.Time
	reply chan *nats.Msg
}

func newFakeRemote() *fakeRemote { return &fakeRemote{calls: make(chan *call)} }

func (r *fakeRemote) setUnreachable(v bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unreachable = v
}

func (r *fakeRemote) Request(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	r.mu.Lock()
	if r.unreachable {
		r.noResponder = append(r.noResponder, time.Now())
		r.mu.Unlock()
		return nil, nats.ErrNoResponders
	}
	probe, hang, probeReply, delay := msg.Header.Get(HeaderKind) == KindProbe, r.probesHang, r.probeReply, r.probeDelay
	if probe {
		r.probes = append(r.probes, time.Now())
	}
	r.mu.Unlock()
	if probe && delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if probe && !hang {
		if probeReply != nil {
			return probeReply, nil
		}
		return nats.NewMsg(""), nil
	}
	if probe {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	c := &call{msg: msg, at: time.Now(), reply: make(chan *nats.Msg, 1)}
	select {
	case r.calls <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case m := <-c.reply:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *fakeRemote) QueueServe(string, string, Handler) (Subscription, error) {
	return nil, errors.New("fakeRemote serves nothing")
}

func (r *fakeRemote) probeTimes() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.probes...)
}

// next waits for the next frame request (none within d fails the test).
func (r *fakeRemote) next(t testing.TB, d time.Duration) *call {
	t.Helper()
	select {
	case c := <-r.calls:
		return c
	case <-time.After(d):
		t.Fatalf("no request within %v", d)
		return nil
	}
}

// none checks that no frame request comes within d.
func (r *fakeRemote) none(t testing.TB, d time.Duration, why string) {
	t.Helper()
	select {
	case c := <-r.calls:
		t.Fatalf("%s: got a request for %s..%s", why, c.msg.Header.Get(HeaderFirst), c.msg.Header.Get(HeaderLast))
	case <-time.After(d):
	}
}

func (c *call) ok()               { c.reply <- nats.NewMsg("") }
func (c *call) refuse(why string) { m := nats.NewMsg(""); m.Header.Set(HeaderError, why); c.reply <- m }

// entries decodes the frame a request carries.
func (c *call) entries(t testing.TB) []frame.Entry {
	t.Helper()
	es, err := frame.NewDecoder(frame.Limits{}).Decode(c.msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// payloads are the payloads of the frame a request carries.
func (c *call) payloads(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, e := range c.entries(t) {
		out = append(out, payloadOf(t, e.Data))
	}
	return out
}

// fakeNet is a NATS super-cluster in memory: a request goes to one of
// the queue subscriptions whose subject matches, delivered in order on
// the subscription's own goroutine; none matching, or the link cut,
// fails it with no responders. loseReplies drops the replies of the
// next frame requests (applied, never answered).
type fakeNet struct {
	mu          sync.Mutex
	subs        []*fakeNetSub
	cut         bool
	loseReplies int
}

type fakeNetSub struct {
	subject string
	h       Handler
	in      chan delivery
	done    chan struct{}
	once    sync.Once
}

type delivery struct {
	msg     *nats.Msg
	respond func(*nats.Msg)
}

func subjectMatches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	if len(p) != len(s) {
		return false
	}
	for i := range p {
		if p[i] != "*" && p[i] != s[i] {
			return false
		}
	}
	return true
}

func (n *fakeNet) Request(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	n.mu.Lock()
	var sub *fakeNetSub
	for _, s := range n.subs {
		if subjectMatches(s.subject, msg.Subject) {
			sub = s
			break
		}
	}
	lose := false
	if sub != nil && msg.Header.Get(HeaderKind) != KindProbe && n.loseReplies > 0 {
		n.loseReplies--
		lose = true
	}
	cut := n.cut
	n.mu.Unlock()
	if sub == nil || cut {
		return nil, nats.ErrNoResponders
	}
	replies := make(chan *nats.Msg, 1)
	d := delivery{
		msg: &nats.Msg{Subject: msg.Subject, Reply: "_INBOX.fake", Header: msg.Header, Data: msg.Data},
		respond: func(m *nats.Msg) {
			if m == nil {
				m = nats.NewMsg("")
			}
			if !lose {
				replies <- m
			}
		},
	}
	select {
	case sub.in <- d:
	case <-sub.done:
		return nil, nats.ErrNoResponders
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case m := <-replies:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (n *fakeNet) QueueServe(subject, queue string, h Handler) (Subscription, error) {
	s := &fakeNetSub{subject: subject, h: h, in: make(chan delivery, 64), done: make(chan struct{})}
	n.mu.Lock()
	n.subs = append(n.subs, s)
	n.mu.Unlock()
	go func() {
		for {
			select {
			case d := <-s.in:
				s.h(d.msg, d.respond)
			case <-s.done:
				return
			}
		}
	}()
	return &fakeNetSubscription{n: n, s: s}, nil
}

type fakeNetSubscription struct {
	n *fakeNet
	s *fakeNetSub
}

func (u *fakeNetSubscription) Drain() error { return u.Unsubscribe() }

func (u *fakeNetSubscription) Unsubscribe() error {
	u.n.mu.Lock()
	defer u.n.mu.Unlock()
	for i, s := range u.n.subs {
		if s == u.s {
			u.n.subs = append(u.n.subs[:i], u.n.subs[i+1:]...)
			break
		}
	}
	u.s.once.Do(func() { close(u.s.done) })
	return nil
}

// testWorker makes a worker of region with the fakes (no registration,
// no assignment); the test starts the streams and the sink it needs.
func testWorker(t testing.TB, region string, cfg Config, tr Transport, src Source, sink Sink) *Worker {
	t.Helper()
	cfg.Region, cfg.ID, cfg.ServiceURL = region, region+"-w1", "pulsar://unused:6650"
	if src == nil {
		src = newFakeCursor()
	}
	if sink == nil {
		sink = newFakeBrokers()
	}
	w, err := newWorker(cfg, Deps{
		Transport: tr, Meta: nopMeta{}, Policies: fakePolicies{clusters: []string{"a", "b", "c"}},
		Source: src, Sink: sink,
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// startStream runs the stream of (testTopic, remote) on w until w closes.
func startStream(w *Worker, remote string) *stream {
	k := streamKey{Topic: testTopic, Remote: remote}
	st := &StreamStats{Topic: k.Topic, Remote: remote}
	w.mu.Lock()
	w.stats[k] = st
	w.mu.Unlock()
	s := newStream(w, k, st)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		s.run()
	}()
	return s
}

// nopMeta stands in for the metadata store of a worker that neither
// registers nor assigns (any call panics).
type nopMeta struct{ metastore.Meta }
