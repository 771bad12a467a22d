package replicator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/isobar-mq/isobar/internal/natsembed"
	"github.com/isobar-mq/isobar/replicator/frame"
)

// One suite for the Transport contract, run against NATSTransport on an
// embedded NATS server and against the tests' fakeNet, so that what the
// other tests learn from the fake holds for NATS.

func TestTransportNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, err := natsembed.Start(ctx, natsembed.Config{Region: "b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	testTransport(t, NATSTransport(nc))
}

func TestTransportFake(t *testing.T) { testTransport(t, &fakeNet{}) }

func testTransport(t *testing.T, tr Transport) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tr.Request(ctx, probeRequest("a", "b", testTopic)); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("request nobody serves: %v, want no responders", err)
	}
	seen := make(chan *nats.Msg, 10)
	sub, err := tr.QueueServe(Subject("b", "*"), SinkQueue, func(req *nats.Msg, respond func(*nats.Msg)) {
		seen <- req
		switch req.Header.Get(HeaderKind) {
		case KindProbe:
			respond(nil)
		case KindSubState: // never answered
		default:
			go func() { // from another goroutine
				r := nats.NewMsg("")
				r.Header.Set(HeaderError, "no: "+req.Header.Get(HeaderFirst))
				respond(r)
			}()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// A probe: an empty reply.
	reply, err := tr.Request(ctx, probeRequest("a", "b", testTopic))
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if len(reply.Header) != 0 || len(reply.Data) != 0 {
		t.Fatalf("probe reply %v %q, want an empty one", reply.Header, reply.Data)
	}
	if req := <-seen; req.Subject != "isobar.repl.b.a" || req.Header.Get(HeaderTopic) != testTopic {
		t.Fatalf("served %s %v", req.Subject, req.Header)
	}
	// A frame: subject, headers and body arrive; the reply's headers
	// come back.
	f := frameRequest("a", "b", testTopic, frameEntries(2), 10, []byte("body"))
	reply, err = tr.Request(ctx, f)
	if err != nil {
		t.Fatalf("frame: %v", err)
	}
	if refusal(reply) == nil || reply.Header.Get(HeaderError) != "no: 1:0" {
		t.Fatalf("frame reply %v", reply.Header)
	}
	if req := <-seen; string(req.Data) != "body" || req.Header.Get(HeaderLast) != "1:1" || req.Header.Get(HeaderCount) != "2" {
		t.Fatalf("served %q %v", req.Data, req.Header)
	}
	// Unanswered: the context ends it, not no responders.
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = tr.Request(short, statesRequest("a", "b", testTopic, 1, []byte("s")))
	cancelShort()
	if err == nil || errors.Is(err, nats.ErrNoResponders) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unanswered: %v, want the deadline", err)
	}
	<-seen
	// Gone: no responders again.
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := tr.Request(ctx, probeRequest("a", "b", testTopic))
		if errors.Is(err, nats.ErrNoResponders) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after unsubscribing: %v, want no responders", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func frameEntries(n int) []frame.Entry {
	es := make([]frame.Entry, n)
	for i := range es {
		es[i] = frame.Entry{Pos: frame.Pos{Ledger: 1, Entry: int64(i)}}
	}
	return es
}
