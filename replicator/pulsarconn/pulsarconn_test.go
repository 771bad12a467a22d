package pulsarconn_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/isobar-mq/isobar/replicator/pulsarconn"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// region is an in-process region: embedded etcd, three bookies and one
// broker on a loopback port.
type region struct {
	t   testing.TB
	b   *broker.Broker
	url string
}

func startRegion(t testing.TB) *region {
	t.Helper()
	return startRegionTLS(t, nil)
}

// startRegionTLS is startRegion with the broker also serving tlsLn (when
// not nil) and advertising it as its TLS URL.
func startRegionTLS(t testing.TB, tlsLn net.Listener) *region {
	t.Helper()
	cl := testcluster.Start(t, testcluster.Options{Bookies: 3})
	lc, err := ledger.NewClient(cl.Connect(), ledger.Config{Region: cl.Region, Logger: cl.Logger(), RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close() })
	pol, err := policy.New(cl.Connect(), policy.Config{LocalCluster: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := pol.EnsureStandalone(context.Background(), "test", policy.ClusterData{ServiceURL: "http://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "pulsar://" + ln.Addr().String()
	bc := broker.Config{Region: cl.Region, ServiceURL: url}
	if tlsLn != nil {
		bc.ServiceURLTLS = "pulsar+ssl://" + tlsLn.Addr().String()
	}
	b, err := broker.New(bc, broker.Deps{
		Meta:    cl.Connect(),
		Ledgers: lc,
		Logger:  cl.Logger(),
		Namespaces: broker.PolicyNamespaces{Store: pol, Default: policy.AutoTopicCreation{
			AllowAutoTopicCreation: true, TopicType: policy.TopicTypeNonPartitioned}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Start()
	go b.Serve(ln)
	if tlsLn != nil {
		go b.Serve(tlsLn)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	return &region{t: t, b: b, url: url}
}

// pulsarClient returns a pulsar-client-go client of the region.
func (r *region) pulsarClient() pulsar.Client {
	r.t.Helper()
	l := logrus.New()
	l.SetLevel(logrus.WarnLevel)
	c, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:               r.url,
		OperationTimeout:  15 * time.Second,
		ConnectionTimeout: 5 * time.Second,
		Logger:            plog.NewLoggerWithLogrus(l),
	})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(c.Close)
	return c
}

// client returns a pulsarconn client of the region.
func (r *region) client(t testing.TB) *pulsarconn.Client {
	t.Helper()
	c, err := pulsarconn.New(pulsarconn.Config{ServiceURL: r.url, OperationTimeout: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rawEntry builds an entry as a producer would send it.
func rawEntry(t testing.TB, seq int, payload string) []byte {
	t.Helper()
	data, err := wire.AppendEntry(nil, &pb.MessageMetadata{
		ProducerName: proto.String("raw"),
		SequenceId:   proto.Uint64(uint64(seq)),
		PublishTime:  proto.Uint64(uint64(time.Now().UnixMilli())),
	}, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// produceRaw sends n raw entries "<prefix>-i" and returns their positions.
func produceRaw(t testing.TB, p *pulsarconn.Producer, prefix string, n int) []pulsarconn.MessageID {
	t.Helper()
	var mu sync.Mutex
	var ids []pulsarconn.MessageID
	var errs []error
	for i := range n {
		p.SendAsync(rawEntry(t, i, fmt.Sprintf("%s-%d", prefix, i)), uint64(i), 1, nil, func(id pulsarconn.MessageID, err error) {
			mu.Lock()
			defer mu.Unlock()
			ids = append(ids, id)
			errs = append(errs, err)
		})
	}
	if err := p.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(ids) != n {
		t.Fatalf("%d callbacks, want %d", len(ids), n)
	}
	for i := 1; i < n; i++ {
		if !less(ids[i-1], ids[i]) {
			t.Fatalf("callbacks out of order: %v then %v", ids[i-1], ids[i])
		}
	}
	return ids
}

func less(a, b pulsarconn.MessageID) bool {
	return a.Ledger < b.Ledger || a.Ledger == b.Ledger && a.Entry < b.Entry
}

// payloadOf returns the payload of a single-message entry.
func payloadOf(t testing.TB, e pulsarconn.Entry) string {
	t.Helper()
	_, payload, err := wire.DecodeEntry(e.Data)
	if err != nil {
		t.Fatalf("entry %v: %v", e.ID, err)
	}
	return string(payload)
}

func waitForNoGoroutines(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, stacks := ourGoroutines()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of the client left after Close:\n%s", n, stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ourGoroutines counts the goroutines running code of package pulsarconn.
func ourGoroutines() (int, string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var ours []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "isobar/replicator/pulsarconn.") {
			ours = append(ours, g)
		}
	}
	return len(ours), strings.Join(ours, "\n\n")
}

func TestAgainstBroker(t *testing.T) {
	r := startRegion(t)

	t.Run("RawToPulsarClient", func(t *testing.T) {
		ctx := ctxT(t)
		const topic, n = "persistent://public/default/raw-out", 50
		c := r.client(t)
		p, err := c.CreateProducer(ctx, pulsarconn.ProducerOptions{Topic: topic, Name: "raw-test"})
		if err != nil {
			t.Fatal(err)
		}
		ids := produceRaw(t, p, "m", n)
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}

		cons, err := r.pulsarClient().Subscribe(pulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		for i := range n {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("m-%d", i); string(m.Payload()) != want {
				t.Fatalf("message %d: got %q want %q", i, m.Payload(), want)
			}
			if got := (pulsarconn.MessageID{Ledger: m.ID().LedgerID(), Entry: m.ID().EntryID()}); got != ids[i] {
				t.Fatalf("message %d at %v, receipt said %v", i, got, ids[i])
			}
			if m.ProducerName() != "raw" {
				t.Fatalf("producer name %q, want the entry's own %q", m.ProducerName(), "raw")
			}
		}
	})

	t.Run("PulsarClientBatchesToRaw", func(t *testing.T) {
		ctx := ctxT(t)
		const topic, n = "persistent://public/default/batches-in", 95
		prod, err := r.pulsarClient().CreateProducer(pulsar.ProducerOptions{
			Topic: topic, BatchingMaxMessages: 10, BatchingMaxPublishDelay: time.Hour,
		})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		entries := map[pulsarconn.MessageID]bool{}
		for i := range n {
			prod.SendAsync(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "b-%d", i)}, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				entries[pulsarconn.MessageID{Ledger: id.LedgerID(), Entry: id.EntryID()}] = true
				mu.Unlock()
			})
		}
		if err := prod.Flush(); err != nil {
			t.Fatal(err)
		}
		prod.Close()
		mu.Lock()
		nEntries := len(entries)
		mu.Unlock()
		if nEntries >= n {
			t.Fatalf("%d entries for %d messages: not batched", nEntries, n)
		}

		c := r.client(t)
		sub := pulsarconn.SubscribeOptions{
			Topic: topic, Subscription: "raw", ConsumerName: "w",
			Type: pb.CommandSubscribe_Failover, InitialPosition: pb.CommandSubscribe_Earliest, ReceiverQueue: 4,
		}
		co, err := c.Subscribe(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		var got []pulsarconn.Entry
		msgs := 0
		for range nEntries {
			e, err := co.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !entries[e.ID] {
				t.Fatalf("entry %v was not produced", e.ID)
			}
			if len(got) > 0 && !less(got[len(got)-1].ID, e.ID) {
				t.Fatalf("entry %v after %v", e.ID, got[len(got)-1].ID)
			}
			meta, payload, err := wire.DecodeEntry(e.Data)
			if err != nil {
				t.Fatalf("entry %v: %v", e.ID, err)
			}
			batch, err := wire.DecodeBatch(payload, int(meta.GetNumMessagesInBatch()))
			if err != nil {
				t.Fatalf("entry %v: %v", e.ID, err)
			}
			for _, m := range batch {
				if want := fmt.Sprintf("b-%d", msgs); string(m.Payload) != want {
					t.Fatalf("message %d: got %q want %q", msgs, m.Payload, want)
				}
				msgs++
			}
			got = append(got, e)
		}
		if msgs != n {
			t.Fatalf("%d messages in %d entries, want %d", msgs, len(got), n)
		}
		if !co.Active() {
			t.Fatal("the only Failover consumer is not active")
		}

		// Ack up to the middle entry; a new subscription resumes after it.
		mid := len(got) / 2
		if err := co.AckCumulative(ctx, got[mid].ID); err != nil {
			t.Fatal(err)
		}
		if err := co.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := co.Receive(ctx); !errors.Is(err, pulsarconn.ErrClosed) {
			t.Fatalf("Receive after Close: %v, want ErrClosed", err)
		}
		co, err = c.Subscribe(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		defer co.Close(ctx)
		e, err := co.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if e.ID != got[mid+1].ID || !bytes.Equal(e.Data, got[mid+1].Data) {
			t.Fatalf("resumed at %v, want %v", e.ID, got[mid+1].ID)
		}
	})

	t.Run("Failover", func(t *testing.T) {
		ctx := ctxT(t)
		const topic, n = "persistent://public/default/failover", 10
		c := r.client(t)
		sub := func(name string) *pulsarconn.Consumer {
			co, err := c.Subscribe(ctx, pulsarconn.SubscribeOptions{
				Topic: topic, Subscription: "fo", ConsumerName: name,
				Type: pb.CommandSubscribe_Failover, InitialPosition: pb.CommandSubscribe_Earliest,
			})
			if err != nil {
				t.Fatal(err)
			}
			return co
		}
		a, b := sub("a"), sub("b") // the broker picks the first by name
		defer b.Close(ctx)
		waitFor(t, 10*time.Second, "a active", func() bool { return a.Active() && !b.Active() })

		p, err := c.CreateProducer(ctx, pulsarconn.ProducerOptions{Topic: topic})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		ids := produceRaw(t, p, "f", n)
		for i := range n {
			e, err := a.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if e.ID != ids[i] || payloadOf(t, e) != fmt.Sprintf("f-%d", i) {
				t.Fatalf("a got %v %q, want %v", e.ID, payloadOf(t, e), ids[i])
			}
		}
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if e, err := b.Receive(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("inactive consumer received %v, %v", e.ID, err)
		}

		if err := a.Close(ctx); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "b active", b.Active)
		for i := range n {
			e, err := b.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if e.ID != ids[i] || payloadOf(t, e) != fmt.Sprintf("f-%d", i) {
				t.Fatalf("b got %v %q, want %v", e.ID, payloadOf(t, e), ids[i])
			}
		}
		if err := b.AckCumulative(ctx, ids[n-1]); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Errors", func(t *testing.T) {
		ctx := ctxT(t)
		c := r.client(t)
		const topic = "persistent://public/default/errors"
		p, err := c.CreateProducer(ctx, pulsarconn.ProducerOptions{Topic: topic, Name: "dup"})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		if _, err := c.CreateProducer(ctx, pulsarconn.ProducerOptions{Topic: topic, Name: "dup"}); !errors.Is(err, errkind.ErrProducerBusy) {
			t.Fatalf("second producer named dup: %v, want ErrProducerBusy", err)
		}
		co, err := c.Subscribe(ctx, pulsarconn.SubscribeOptions{Topic: topic, Subscription: "ex"})
		if err != nil {
			t.Fatal(err)
		}
		defer co.Close(ctx)
		if !co.Active() {
			t.Fatal("exclusive consumer not active")
		}
		if _, err := c.Subscribe(ctx, pulsarconn.SubscribeOptions{Topic: topic, Subscription: "ex"}); !errors.Is(err, errkind.ErrConsumerBusy) {
			t.Fatalf("second exclusive consumer: %v, want ErrConsumerBusy", err)
		}
		if _, err := c.Subscribe(ctx, pulsarconn.SubscribeOptions{Topic: "persistent://nope/x/y", Subscription: "s"}); err == nil {
			t.Fatal("subscribe to a topic of an unknown tenant succeeded")
		}
	})

	t.Run("CloseLeavesNoGoroutines", func(t *testing.T) {
		ctx := ctxT(t)
		c, err := pulsarconn.New(pulsarconn.Config{ServiceURL: r.url})
		if err != nil {
			t.Fatal(err)
		}
		const topic = "persistent://public/default/leak"
		co, err := c.Subscribe(ctx, pulsarconn.SubscribeOptions{Topic: topic, Subscription: "s"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.CreateProducer(ctx, pulsarconn.ProducerOptions{Topic: topic})
		if err != nil {
			t.Fatal(err)
		}
		produceRaw(t, p, "l", 3)
		if n, _ := ourGoroutines(); n == 0 {
			t.Fatal("no goroutines of the client found: the check is broken")
		}
		recvErr := make(chan error, 1)
		go func() {
			for {
				if _, err := co.Receive(ctx); err != nil {
					recvErr <- err
					return
				}
			}
		}()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-recvErr; !errors.Is(err, pulsarconn.ErrClosed) {
			t.Fatalf("Receive after Client.Close: %v, want ErrClosed", err)
		}
		var cbErr error
		p.SendAsync(rawEntry(t, 9, "late"), 9, 1, nil, func(_ pulsarconn.MessageID, err error) { cbErr = err })
		if !errors.Is(cbErr, pulsarconn.ErrClosed) {
			t.Fatalf("send after Client.Close: %v, want ErrClosed", cbErr)
		}
		waitForNoGoroutines(t)
	})
}

func TestBrokerShutdown(t *testing.T) {
	r := startRegion(t)
	ctx := ctxT(t)
	c := r.client(t)
	const topic = "persistent://public/default/shutdown"
	co, err := c.Subscribe(ctx, pulsarconn.SubscribeOptions{Topic: topic, Subscription: "s"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateProducer(ctx, pulsarconn.ProducerOptions{Topic: topic, Name: "shutdown-test"})
	if err != nil {
		t.Fatal(err)
	}
	produceRaw(t, p, "before", 5)

	// Sends in flight while the broker goes: every callback runs.
	var mu sync.Mutex
	results := 0
	for i := range 200 {
		p.SendAsync(rawEntry(t, 100+i, "during"), uint64(100+i), 1, nil, func(pulsarconn.MessageID, error) {
			mu.Lock()
			results++
			mu.Unlock()
		})
	}
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := r.b.Shutdown(sctx); err != nil {
		t.Logf("shutdown: %v", err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if results != 200 {
		t.Fatalf("%d callbacks for 200 sends", results)
	}
	mu.Unlock()
	errc := make(chan error, 1)
	p.SendAsync(rawEntry(t, 1000, "after"), 1000, 1, nil, func(_ pulsarconn.MessageID, err error) { errc <- err })
	select {
	case err := <-errc:
		if !errors.Is(err, pulsarconn.ErrClosed) {
			t.Fatalf("send after shutdown: %v, want ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("send after shutdown: no callback")
	}

	for {
		e, err := co.Receive(ctx)
		if errors.Is(err, pulsarconn.ErrClosed) {
			break
		}
		if err != nil {
			t.Fatalf("Receive after shutdown: %v, want ErrClosed", err)
		}
		if s := payloadOf(t, e); !strings.HasPrefix(s, "before") && s != "during" {
			t.Fatalf("unexpected entry %q", s)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitForNoGoroutines(t)
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  pulsarconn.Config
		want []string
	}{
		{pulsarconn.Config{ServiceURL: "pulsar://h:6650"}, nil},
		{pulsarconn.Config{}, []string{"ServiceURL"}},
		{pulsarconn.Config{ServiceURL: "http://h:1", OperationTimeout: -1, MaxFrameSize: -1, ConnectTimeout: -1},
			[]string{"ServiceURL", "OperationTimeout", "MaxFrameSize", "ConnectTimeout"}},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != (len(tc.want) == 0) {
			t.Fatalf("%+v: %v", tc.cfg, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %v does not name %s", tc.cfg, err, w)
			}
		}
	}
}

// fakeBroker serves one connection: it answers CONNECT with input (mode
// 0), or plays along until the first FLOW and then sends input (mode 1);
// then it closes the connection.
func fakeBroker(nc net.Conn, url string, mode byte, input []byte) {
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	reply := func(cmd *pb.BaseCommand) bool {
		f, err := wire.AppendCommand(nil, cmd)
		if err != nil {
			return false
		}
		_, err = nc.Write(f)
		return err == nil
	}
	for {
		raw, err := wire.ReadFrame(nc, 0, nil)
		if err != nil {
			return
		}
		f, err := wire.DecodeFrame(raw)
		if err != nil {
			return
		}
		switch cmd := f.Cmd; cmd.GetType() {
		case pb.BaseCommand_CONNECT:
			if mode == 0 {
				nc.Write(input)
				return
			}
			if !reply(&pb.BaseCommand{Type: pb.BaseCommand_CONNECTED.Enum(), Connected: &pb.CommandConnected{
				ServerVersion: proto.String("fake"), ProtocolVersion: proto.Int32(21)}}) {
				return
			}
		case pb.BaseCommand_LOOKUP:
			if !reply(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: &pb.CommandLookupTopicResponse{
				RequestId: proto.Uint64(cmd.LookupTopic.GetRequestId()), Response: pb.CommandLookupTopicResponse_Connect.Enum(),
				BrokerServiceUrl: proto.String(url)}}) {
				return
			}
		case pb.BaseCommand_SUBSCRIBE:
			if !reply(&pb.BaseCommand{Type: pb.BaseCommand_SUCCESS.Enum(), Success: &pb.CommandSuccess{
				RequestId: proto.Uint64(cmd.Subscribe.GetRequestId())}}) {
				return
			}
		case pb.BaseCommand_FLOW:
			nc.Write(input)
			return
		}
	}
}

// FuzzClientConn feeds arbitrary bytes to the client as the broker's side
// of a connection: the client must not panic or hang.
func FuzzClientConn(f *testing.F) {
	cmd := func(c *pb.BaseCommand) []byte {
		b, err := wire.AppendCommand(nil, c)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	connected := cmd(&pb.BaseCommand{Type: pb.BaseCommand_CONNECTED.Enum(), Connected: &pb.CommandConnected{
		ServerVersion: proto.String("fake"), ProtocolVersion: proto.Int32(21)}})
	entry := rawEntry(f, 1, "hello")
	msg, err := wire.AppendEntryCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_MESSAGE.Enum(), Message: &pb.CommandMessage{
		ConsumerId: proto.Uint64(1), MessageId: &pb.MessageIdData{LedgerId: proto.Uint64(3), EntryId: proto.Uint64(4)},
	}}, nil, entry)
	if err != nil {
		f.Fatal(err)
	}
	ping := cmd(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
	active := cmd(&pb.BaseCommand{Type: pb.BaseCommand_ACTIVE_CONSUMER_CHANGE.Enum(), ActiveConsumerChange: &pb.CommandActiveConsumerChange{
		ConsumerId: proto.Uint64(1), IsActive: proto.Bool(true)}})
	closeCons := cmd(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(), CloseConsumer: &pb.CommandCloseConsumer{
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(0)}})
	f.Add(byte(0), connected)
	f.Add(byte(0), []byte{0, 0, 0, 1, 0})
	f.Add(byte(1), msg)
	f.Add(byte(1), join(ping, active, msg, msg, closeCons))
	f.Add(byte(1), msg[:len(msg)-3])
	bad := bytes.Clone(msg)
	bad[len(bad)-1] ^= 0xff // checksum mismatch
	f.Add(byte(1), bad)
	f.Add(byte(1), []byte{0xff, 0xff, 0xff, 0xff})

	f.Fuzz(func(t *testing.T, mode byte, input []byte) {
		mode %= 2
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "pulsar://" + ln.Addr().String()
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				nc, err := ln.Accept()
				if err != nil {
					return
				}
				wg.Go(func() { fakeBroker(nc, url, mode, input) })
			}
		})
		defer wg.Wait()
		defer ln.Close()

		c, err := pulsarconn.New(pulsarconn.Config{
			ServiceURL: url, OperationTimeout: 300 * time.Millisecond, ConnectTimeout: time.Second, MaxFrameSize: 1 << 20,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		co, err := c.Subscribe(ctx, pulsarconn.SubscribeOptions{Topic: "persistent://t/n/x", Subscription: "s", ReceiverQueue: 2})
		if err != nil {
			return
		}
		for {
			e, err := co.Receive(ctx)
			if err != nil {
				if !errors.Is(err, pulsarconn.ErrClosed) {
					t.Fatalf("Receive: %v, want ErrClosed once the fake broker hangs up", err)
				}
				break
			}
			_ = co.Active()
			if e.Data == nil {
				t.Fatal("entry without data")
			}
		}
		co.AckCumulative(ctx, pulsarconn.MessageID{Ledger: 1, Entry: 2})
		co.Close(ctx)
	})
}

func join(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// fakeServe serves a scripted broker on a loopback port: it answers
// CONNECT and hands every other frame to handle with a reply function.
func fakeServe(t *testing.T, handle func(reply func(*pb.BaseCommand), f wire.Frame)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer nc.Close()
				var wmu sync.Mutex
				reply := func(cmd *pb.BaseCommand) {
					b, err := wire.AppendCommand(nil, cmd)
					if err != nil {
						t.Error(err)
						return
					}
					wmu.Lock()
					defer wmu.Unlock()
					nc.Write(b)
				}
				for {
					raw, err := wire.ReadFrame(nc, 0, nil)
					if err != nil {
						return
					}
					f, err := wire.DecodeFrame(raw)
					if err != nil {
						t.Errorf("client sent a bad frame: %v", err)
						return
					}
					if f.Cmd.GetType() == pb.BaseCommand_CONNECT {
						if v := f.Cmd.Connect.GetProtocolVersion(); v != 21 {
							t.Errorf("protocol version %d", v)
						}
						reply(&pb.BaseCommand{Type: pb.BaseCommand_CONNECTED.Enum(), Connected: &pb.CommandConnected{
							ServerVersion: proto.String("fake"), ProtocolVersion: proto.Int32(21)}})
						continue
					}
					handle(reply, f)
				}
			})
		}
	})
	return "pulsar://" + ln.Addr().String()
}

// TestProducerProtocol drives a producer through a redirected lookup, a
// producer that is not ready at first, a receipt, a send error and the
// close that follows, against a scripted broker.
func TestProducerProtocol(t *testing.T) {
	var mu sync.Mutex
	var sends []*pb.CommandSend
	closed := make(chan uint64, 1)
	owner := fakeServe(t, func(reply func(*pb.BaseCommand), f wire.Frame) {
		switch cmd := f.Cmd; cmd.GetType() {
		case pb.BaseCommand_LOOKUP:
			if !cmd.LookupTopic.GetAuthoritative() {
				t.Error("lookup after a redirect is not authoritative")
			}
			reply(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: &pb.CommandLookupTopicResponse{
				RequestId: proto.Uint64(cmd.LookupTopic.GetRequestId()), Response: pb.CommandLookupTopicResponse_Connect.Enum()}})
		case pb.BaseCommand_PRODUCER:
			for _, ready := range []bool{false, true} {
				reply(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER_SUCCESS.Enum(), ProducerSuccess: &pb.CommandProducerSuccess{
					RequestId: proto.Uint64(cmd.Producer.GetRequestId()), ProducerName: proto.String("given"), ProducerReady: proto.Bool(ready)}})
			}
		case pb.BaseCommand_SEND:
			mu.Lock()
			sends = append(sends, cmd.Send)
			mu.Unlock()
			s := cmd.Send
			switch s.GetSequenceId() {
			case 1:
				reply(&pb.BaseCommand{Type: pb.BaseCommand_SEND_RECEIPT.Enum(), SendReceipt: &pb.CommandSendReceipt{
					ProducerId: s.ProducerId, SequenceId: s.SequenceId,
					MessageId: &pb.MessageIdData{LedgerId: proto.Uint64(5), EntryId: proto.Uint64(1)}}})
			case 2:
				reply(wire.NewSendErrorCommand(s.GetProducerId(), 2, fmt.Errorf("%w: disk on fire", errkind.ErrPersistence)))
			}
		case pb.BaseCommand_CLOSE_PRODUCER:
			closed <- cmd.CloseProducer.GetProducerId()
			reply(&pb.BaseCommand{Type: pb.BaseCommand_SUCCESS.Enum(), Success: &pb.CommandSuccess{RequestId: cmd.CloseProducer.RequestId}})
		}
	})
	front := fakeServe(t, func(reply func(*pb.BaseCommand), f wire.Frame) {
		if cmd := f.Cmd; cmd.GetType() == pb.BaseCommand_LOOKUP {
			reply(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: &pb.CommandLookupTopicResponse{
				RequestId: proto.Uint64(cmd.LookupTopic.GetRequestId()), Response: pb.CommandLookupTopicResponse_Redirect.Enum(),
				BrokerServiceUrl: proto.String(owner), Authoritative: proto.Bool(true)}})
		}
	})

	ctx := ctxT(t)
	c, err := pulsarconn.New(pulsarconn.Config{ServiceURL: front, OperationTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p, err := c.CreateProducer(ctx, pulsarconn.ProducerOptions{Topic: "persistent://t/n/x"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "given" || p.LastSequenceID() != -1 {
		t.Fatalf("producer name %q, last sequence id %d", p.Name(), p.LastSequenceID())
	}
	type result struct {
		seq uint64
		id  pulsarconn.MessageID
		err error
	}
	results := make(chan result, 3)
	src := &pulsarconn.MessageID{Ledger: 7, Entry: 8}
	for seq := uint64(1); seq <= 3; seq++ {
		p.SendAsync(rawEntry(t, int(seq), "x"), seq, 10, src, func(id pulsarconn.MessageID, err error) {
			results <- result{seq, id, err}
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r1, r2, r3 := <-results, <-results, <-results
	if r1.seq != 1 || r1.err != nil || r1.id != (pulsarconn.MessageID{Ledger: 5, Entry: 1}) {
		t.Errorf("first callback: %+v", r1)
	}
	if r2.seq != 2 || !errors.Is(r2.err, errkind.ErrPersistence) || !strings.Contains(r2.err.Error(), "disk on fire") {
		t.Errorf("second callback: %+v, want the broker's PersistenceError", r2)
	}
	if r3.seq != 3 || !errors.Is(r3.err, pulsarconn.ErrClosed) {
		t.Errorf("third callback: %+v, want ErrClosed after the send error", r3)
	}
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("no CLOSE_PRODUCER after the send error")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range sends {
		if s.GetNumMessages() != 10 || s.GetMessageId().GetLedgerId() != 7 || s.GetMessageId().GetEntryId() != 8 {
			t.Errorf("SEND %d: num_messages %d, message_id %v", s.GetSequenceId(), s.GetNumMessages(), s.GetMessageId())
		}
	}
}

// TestTLS: the client connects over TLS (pulsar+ssl://), follows the
// broker's TLS URL in lookups, and produces and consumes; a client that
// does not trust the broker's CA fails at the handshake, saying so.
func TestTLS(t *testing.T) {
	now := time.Now()
	ca, err := tlsfiles.NewCA("test CA", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := tlsfiles.Issue(ca, "broker", []string{"127.0.0.1"}, false, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(srv.Cert, srv.Key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	startRegionTLS(t, ln)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.Cert)
	url := "pulsar+ssl://" + ln.Addr().String()

	other, _ := tlsfiles.NewCA("other CA", now.Add(-time.Hour), now.Add(time.Hour))
	otherPool := x509.NewCertPool()
	otherPool.AppendCertsFromPEM(other.Cert)
	bad, err := pulsarconn.New(pulsarconn.Config{ServiceURL: url, TLS: &tls.Config{RootCAs: otherPool}, OperationTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.CreateProducer(context.Background(), pulsarconn.ProducerOptions{Topic: "persistent://public/default/tls"}); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("untrusted CA: %v", err)
	}
	if _, err := pulsarconn.New(pulsarconn.Config{ServiceURL: "pulsar://" + ln.Addr().String(), TLS: &tls.Config{RootCAs: pool}}); err == nil {
		t.Fatal("a pulsar:// URL with TLS was accepted")
	}
	c, err := pulsarconn.New(pulsarconn.Config{ServiceURL: url, TLS: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.CreateProducer(context.Background(), pulsarconn.ProducerOptions{Topic: "persistent://public/default/tls"})
	if err != nil {
		t.Fatalf("producer over TLS: %v", err)
	}
	defer p.Close(context.Background())
}
