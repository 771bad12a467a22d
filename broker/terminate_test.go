package broker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire/pb"
)

// TestTerminate: a terminated topic keeps what was sent, answers the last
// message's id, refuses further sends (the producer is closed with
// ErrTopicTerminated) and new producers, tells a consumer that read
// everything that it reached the end, and stays terminated after the
// broker restarts.
func TestTerminate(t *testing.T) {
	e := startEnv(t, nil)
	ctx := ctxT(t)
	const tp = "persistent://public/default/terminated"
	name, _ := topic.Parse(tp)
	c := e.client()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	ids := produce(t, p, "m", 5, nil)
	last, err := e.b.AdminAPI().Topics.Terminate(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if last.LedgerID != ids[4].LedgerID() || last.EntryID != ids[4].EntryID() {
		t.Fatalf("terminate answered %+v, the last message is %v", last, ids[4])
	}
	// The broker closed the producer; while the client reconnects (and
	// is refused with TopicTerminatedError) a send waits in its event
	// queue, which pulsar-client-go v0.19.0 never fails when the producer
	// then closes (apache/pulsar-client-go#1332): such a send is given up
	// after a while and the next one tried. None may succeed, and one
	// must be refused as terminated or closed.
	for attempt := 1; ; attempt++ {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := p.Send(sctx, &pulsar.ProducerMessage{Payload: []byte("late")})
		cancel()
		if errors.Is(err, pulsar.ErrTopicTerminated) || errors.Is(err, pulsar.ErrProducerClosed) {
			break
		}
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			t.Fatalf("send after terminate (attempt %d): %v, want the topic terminated", attempt, err)
		}
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp}); err == nil || !strings.Contains(err.Error(), "TopicTerminated") {
		t.Fatalf("new producer: %v, want TopicTerminatedError", err)
	}
	if again, err := e.b.AdminAPI().Topics.Terminate(ctx, name); err != nil || again != last {
		t.Fatalf("terminate again: %+v %v", again, err)
	}

	// A consumer reads the five messages, then hears of the end.
	r := dialRaw(t, e.url, true)
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{Topic: proto.String(tp),
		Subscription: proto.String("s"), SubType: pb.CommandSubscribe_Exclusive.Enum(), ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1),
		InitialPosition: pb.CommandSubscribe_Earliest.Enum()}})
	if f := r.recv(); f.Cmd.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("subscribe: %v", f.Cmd)
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(100)}})
	got := 0
	for {
		f := r.recv()
		if f.Cmd.GetType() == pb.BaseCommand_MESSAGE {
			got++
			continue
		}
		if f.Cmd.GetType() != pb.BaseCommand_REACHED_END_OF_TOPIC || f.Cmd.GetReachedEndOfTopic().GetConsumerId() != 1 {
			t.Fatalf("after %d messages: %v, want REACHED_END_OF_TOPIC", got, f.Cmd)
		}
		break
	}
	if got != 5 {
		t.Fatalf("%d messages before the end, want 5", got)
	}

	// The termination is stored with the topic.
	e.b.Shutdown(ctx)
	e.startBroker()
	if _, err := e.client().CreateProducer(pulsar.ProducerOptions{Topic: tp}); err == nil || !strings.Contains(err.Error(), "TopicTerminated") {
		t.Fatalf("producer after a restart: %v, want TopicTerminatedError", err)
	}
}
