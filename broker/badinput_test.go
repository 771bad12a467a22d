package broker_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// rawConn is a hand-driven protocol connection for bad-input tests.
type rawConn struct {
	t        testing.TB
	nc       net.Conn
	deadline time.Time // if set, reads never wait past it
}

func dialRaw(t testing.TB, url string, connect bool) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(url, "pulsar://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &rawConn{t: t, nc: nc}
	if connect {
		c.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
			ClientVersion: proto.String("raw-test"), ProtocolVersion: proto.Int32(20)}})
		if f := c.recv(); f.Cmd.GetType() != pb.BaseCommand_CONNECTED {
			t.Fatalf("want CONNECTED, got %v", f.Cmd.GetType())
		}
	}
	return c
}

func (c *rawConn) send(cmd *pb.BaseCommand) {
	c.t.Helper()
	f, err := wire.AppendCommand(nil, cmd)
	if err != nil {
		c.t.Fatal(err)
	}
	c.write(f)
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads one frame, skipping PINGs; it fails the test on EOF.
func (c *rawConn) recv() wire.Frame {
	c.t.Helper()
	f, err := c.tryRecv()
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

func (c *rawConn) tryRecv() (wire.Frame, error) {
	for {
		if dl := time.Now().Add(10 * time.Second); c.deadline.IsZero() || dl.Before(c.deadline) {
			c.nc.SetReadDeadline(dl)
		}
		raw, err := wire.ReadFrame(c.nc, 0, nil)
		if err != nil {
			return wire.Frame{}, err
		}
		f, err := wire.DecodeFrame(raw)
		if err != nil {
			return f, err
		}
		if f.Cmd.GetType() != pb.BaseCommand_PING {
			return f, nil
		}
	}
}

// expectClosed reads until the broker closes the connection cleanly
// (EOF, never a reset) and returns the frames it sent before.
func (c *rawConn) expectClosed() []wire.Frame {
	c.t.Helper()
	var fs []wire.Frame
	for {
		f, err := c.tryRecv()
		if errors.Is(err, io.EOF) {
			return fs
		}
		if err != nil {
			c.t.Fatalf("want a clean close, got %v", err)
		}
		fs = append(fs, f)
	}
}

// alive checks the connection still answers PING.
func (c *rawConn) alive() {
	c.t.Helper()
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
	if f := c.recv(); f.Cmd.GetType() != pb.BaseCommand_PONG {
		c.t.Fatalf("want PONG, got %v", f.Cmd.GetType())
	}
}

func errorOf(t *testing.T, fs []wire.Frame) *pb.CommandError {
	t.Helper()
	for _, f := range fs {
		if f.Cmd.GetType() == pb.BaseCommand_ERROR {
			return f.Cmd.Error
		}
	}
	t.Fatalf("no ERROR among %d frames", len(fs))
	return nil
}

func TestBadInput(t *testing.T) {
	e := startEnv(t, func(c *setup) { c.MaxMessageSize = 4 << 10 })

	t.Run("command before CONNECT", func(t *testing.T) {
		c := dialRaw(t, e.url, false)
		c.send(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
		if e := errorOf(t, c.expectClosed()); !strings.Contains(e.GetMessage(), "CONNECT") {
			t.Fatalf("error %q", e.GetMessage())
		}
	})
	t.Run("HTTP garbage", func(t *testing.T) {
		c := dialRaw(t, e.url, false)
		c.write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		if e := errorOf(t, c.expectClosed()); !strings.Contains(e.GetMessage(), "too large") || strings.Contains(e.GetMessage(), "wire:") {
			t.Fatalf("error %q", e.GetMessage())
		}
	})
	t.Run("oversize frame is refused before it is read", func(t *testing.T) {
		c := dialRaw(t, e.url, true)
		big := make([]byte, 64<<10)
		binary.BigEndian.PutUint32(big, uint32(len(big)-4))
		c.write(big[:8])
		go c.nc.Write(big[8:]) // the broker drains the rest
		e := errorOf(t, c.expectClosed())
		if e.GetError() != pb.ServerError_NotAllowedError || !strings.Contains(e.GetMessage(), "max message size") {
			t.Fatalf("error %v %q", e.GetError(), e.GetMessage())
		}
	})
	t.Run("undecodable command", func(t *testing.T) {
		c := dialRaw(t, e.url, true)
		frame := []byte{0, 0, 0, 9, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff}
		c.write(frame)
		errorOf(t, c.expectClosed())
	})
	t.Run("unknown command keeps the connection", func(t *testing.T) {
		c := dialRaw(t, e.url, true)
		c.send(&pb.BaseCommand{Type: pb.BaseCommand_WATCH_TOPIC_LIST.Enum()})
		f := c.recv()
		if f.Cmd.GetType() != pb.BaseCommand_ERROR || f.Cmd.Error.GetError() != pb.ServerError_NotAllowedError {
			t.Fatalf("got %v", f.Cmd)
		}
		c.alive()
	})
	t.Run("invalid topic names", func(t *testing.T) {
		c := dialRaw(t, e.url, true)
		for i, name := range []string{"", "a/b", "persistent://t/ns/", "bogus://t/ns/x", "persistent://t/n s/x", strings.Repeat("x", 1000)} {
			id := uint64(100 + i)
			c.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{Topic: &name, RequestId: &id}})
			r := c.recv().Cmd.LookupTopicResponse
			if r.GetResponse() != pb.CommandLookupTopicResponse_Failed || r.GetError() != pb.ServerError_InvalidTopicName || r.GetRequestId() != id {
				t.Fatalf("lookup %q: %v", name, r)
			}
			c.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{Topic: &name, ProducerId: &id, RequestId: &id}})
			if r := c.recv().Cmd; r.GetType() != pb.BaseCommand_ERROR || r.Error.GetError() != pb.ServerError_InvalidTopicName {
				t.Fatalf("producer %q: %v", name, r)
			}
			sub := "s"
			c.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{Topic: &name, Subscription: &sub,
				SubType: pb.CommandSubscribe_Exclusive.Enum(), ConsumerId: &id, RequestId: &id}})
			if r := c.recv().Cmd; r.GetType() != pb.BaseCommand_ERROR || r.Error.GetError() != pb.ServerError_InvalidTopicName {
				t.Fatalf("subscribe %q: %v", name, r)
			}
		}
		c.alive()
	})
	t.Run("bad sends store nothing", func(t *testing.T) {
		const topic = "persistent://public/default/bad-sends"
		c := dialRaw(t, e.url, true)
		c.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
			Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)}})
		if r := c.recv().Cmd; r.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
			t.Fatalf("producer: %v", r)
		}
		meta := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1)}
		send := func(pid, seq uint64, payload []byte) []byte {
			f, err := wire.AppendPayloadCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
				ProducerId: &pid, SequenceId: &seq}}, meta, payload)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		// Corrupt checksum.
		f := send(1, 0, []byte("hello"))
		f[len(f)-1] ^= 1
		c.write(f)
		if r := c.recv().Cmd; r.GetType() != pb.BaseCommand_SEND_ERROR || r.SendError.GetError() != pb.ServerError_ChecksumError {
			t.Fatalf("corrupt send: %v", r)
		}
		// Unknown producer.
		c.write(send(9, 1, []byte("hello")))
		if r := c.recv().Cmd; r.GetType() != pb.BaseCommand_SEND_ERROR || r.SendError.GetProducerId() != 9 {
			t.Fatalf("unknown producer: %v", r)
		}
		// Oversize message (but within the frame padding).
		c.write(send(1, 2, bytes.Repeat([]byte("x"), 6<<10)))
		if r := c.recv().Cmd; r.GetType() != pb.BaseCommand_SEND_ERROR || !strings.Contains(r.SendError.GetMessage(), "maximum message size") {
			t.Fatalf("oversize: %v", r)
		}
		c.alive()
		// Nothing of it was stored.
		cl := e.client()
		r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if r.HasNext() {
			t.Fatal("a refused send was stored")
		}
	})
	t.Run("client refuses a message over the advertised size", func(t *testing.T) {
		cl := e.client()
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: "too-big", DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		_, err = p.Send(ctxT(t), &pulsar.ProducerMessage{Payload: make([]byte, 8<<10)})
		if !errors.Is(err, pulsar.ErrMessageTooLarge) {
			t.Fatalf("want ErrMessageTooLarge, got %v", err)
		}
	})
}

// A WaitForExclusive producer is answered "not ready" while another
// producer has the topic, and "ready" (same request) once it leaves.
func TestWaitForExclusiveProducer(t *testing.T) {
	e := startEnv(t, nil)
	const tp = "persistent://public/default/wait-excl"
	mk := func(c *rawConn, id uint64, mode pb.ProducerAccessMode) {
		c.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
			Topic: proto.String(tp), ProducerId: &id, RequestId: &id, ProducerAccessMode: mode.Enum()}})
	}
	c1, c2 := dialRaw(t, e.url, true), dialRaw(t, e.url, true)
	mk(c1, 1, pb.ProducerAccessMode_Exclusive)
	if r := c1.recv().Cmd; !r.GetProducerSuccess().GetProducerReady() {
		t.Fatalf("first producer: %v", r)
	}
	mk(c2, 7, pb.ProducerAccessMode_WaitForExclusive)
	if r := c2.recv().Cmd; r.GetType() != pb.BaseCommand_PRODUCER_SUCCESS || r.ProducerSuccess.GetProducerReady() || r.ProducerSuccess.GetRequestId() != 7 {
		t.Fatalf("waiting producer, first answer: %v", r)
	}
	c1.send(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(), CloseProducer: &pb.CommandCloseProducer{ProducerId: proto.Uint64(1), RequestId: proto.Uint64(2)}})
	if r := c2.recv().Cmd; !r.GetProducerSuccess().GetProducerReady() || r.ProducerSuccess.GetRequestId() != 7 {
		t.Fatalf("waiting producer, second answer: %v", r)
	}
	meta := &pb.MessageMetadata{ProducerName: proto.String("w"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1)}
	f, err := wire.AppendPayloadCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
		ProducerId: proto.Uint64(7), SequenceId: proto.Uint64(0)}}, meta, []byte("mine now"))
	if err != nil {
		t.Fatal(err)
	}
	c2.write(f)
	if r := c2.recv().Cmd; r.GetType() != pb.BaseCommand_SEND_RECEIPT {
		t.Fatalf("send: %v", r)
	}
}
