package broker_test

import (
	"context"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/wire/pb"
)

// A PRODUCER whose id is already in use on the connection: for the same
// producer (a client asking again after giving up on the first answer)
// it is answered with success again, as Pulsar does, so the client does
// not stay refused; for another topic it is ProducerBusy.
func TestDuplicateProducerID(t *testing.T) {
	e := startEnv(t, nil)
	const tp = "persistent://public/default/dup-producer"
	c := dialRaw(t, e.url, true)
	producer := func(topic string, req uint64, name string) *pb.BaseCommand {
		p := &pb.CommandProducer{Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(req)}
		if name != "" {
			p.ProducerName = proto.String(name)
		}
		return &pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: p}
	}
	c.send(producer(tp, 1, ""))
	first := c.recv().Cmd
	if first.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("first PRODUCER: %v", first)
	}
	name := first.GetProducerSuccess().GetProducerName()
	c.send(producer(tp, 2, name))
	again := c.recv().Cmd
	if again.GetType() != pb.BaseCommand_PRODUCER_SUCCESS || again.GetProducerSuccess().GetRequestId() != 2 || again.GetProducerSuccess().GetProducerName() != name {
		t.Fatalf("the same PRODUCER again: %v", again)
	}
	c.send(producer("persistent://public/default/dup-other", 3, ""))
	other := c.recv().Cmd
	if other.GetType() != pb.BaseCommand_ERROR || other.GetError().GetError() != pb.ServerError_ProducerBusy {
		t.Fatalf("the id for another topic: %v", other)
	}
	// Closing it frees the id.
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(), CloseProducer: &pb.CommandCloseProducer{ProducerId: proto.Uint64(1), RequestId: proto.Uint64(4)}})
	if r := c.recv().Cmd; r.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("close: %v", r)
	}
}

// A SUBSCRIBE whose consumer id is already in use on the connection: for
// the same consumer (pulsar-client-go resubscribes on the connection it
// has when it reconnects a consumer, and retries until it is answered
// with success) it is success again, as Pulsar answers; for another
// subscription it is ConsumerBusy. The consumer keeps receiving.
func TestDuplicateConsumerID(t *testing.T) {
	e := startEnv(t, nil)
	const tp = "persistent://public/default/dup-consumer"
	c := dialRaw(t, e.url, true)
	if r := rawSubscribe(c, tp, "s", 1); r != nil {
		t.Fatalf("first SUBSCRIBE: %v", r)
	}
	if r := rawSubscribe(c, tp, "s", 1); r != nil {
		t.Fatalf("the same SUBSCRIBE again: %v", r)
	}
	wantRefused(t, "the id for another subscription", rawSubscribe(c, tp, "other", 1), pb.ServerError_ConsumerBusy, "consumer id 1 is already in use")

	// Still attached: a message produced now is delivered to it.
	p, err := e.client().CreateProducer(pulsar.ProducerOptions{Topic: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(10)}})
	for {
		f := c.recv()
		if f.Cmd.GetType() == pb.BaseCommand_MESSAGE {
			break
		}
	}
}
