package broker_test

import (
	"testing"

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
