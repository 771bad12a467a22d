package broker_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// FuzzServeConn feeds arbitrary bytes to a connected broker connection:
// the broker must answer or close cleanly, never panic (recovered panics
// are counted and fail the run).
func FuzzServeConn(f *testing.F) {
	frame := func(cmd *pb.BaseCommand) []byte {
		b, err := wire.AppendCommand(nil, cmd)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add(frame(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}))
	f.Add(frame(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{Topic: proto.String("fz"), RequestId: proto.Uint64(1)}}))
	f.Add(frame(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{Topic: proto.String("fz"), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(2)}}))
	f.Add(frame(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: proto.Uint64(7), MessagePermits: proto.Uint32(5)}}))
	f.Add(frame(&pb.BaseCommand{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{ConsumerId: proto.Uint64(7), AckType: pb.CommandAck_Individual.Enum()}}))
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff})
	e := startEnv(f, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		c := dialRaw(t, e.url, true)
		c.write(data)
		// End the input: the broker must answer what it parsed and close.
		c.nc.(*net.TCPConn).CloseWrite()
		c.deadline = time.Now().Add(5 * time.Second)
		for {
			if _, err := c.tryRecv(); err != nil && !errors.Is(err, wire.ErrChecksumMismatch) {
				break
			}
		}
		if n := e.b.Panics(); n > 0 {
			t.Fatalf("%d panics recovered in command handlers", n)
		}
	})
}
