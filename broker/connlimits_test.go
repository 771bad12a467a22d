package broker_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// A connection that does not say CONNECT within HandshakeTimeout is
// closed, and one that announces a frame over 64 KiB before its CONNECT
// is refused at once (before the broker allocates anything for it).
func TestHandshakeBounds(t *testing.T) {
	e := startEnv(t, func(c *setup) { c.Limits.HandshakeTimeout = 300 * time.Millisecond })
	silent := dialRaw(t, e.url, false)
	start := time.Now()
	silent.expectClosed()
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a silent connection was closed after %v", took)
	}

	big := dialRaw(t, e.url, false)
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:4], 1<<20)
	big.write(hdr[:])
	fs := big.expectClosed()
	if len(fs) == 0 || fs[0].Cmd.GetError().GetError() != pb.ServerError_NotAllowedError {
		t.Fatalf("a 1 MiB frame before CONNECT: %v", fs)
	}
}

// Connections beyond MaxConnections (or MaxConnectionsPerIP) get
// TooManyRequests and are closed; once one closes, a new one is served.
func TestConnectionLimits(t *testing.T) {
	for _, perIP := range []bool{false, true} {
		e := startEnv(t, func(c *setup) {
			if perIP {
				c.Limits.MaxConnectionsPerIP = 2
			} else {
				c.Limits.MaxConnections = 2
			}
		})
		a := dialRaw(t, e.url, true)
		dialRaw(t, e.url, true)
		over := dialRaw(t, e.url, false)
		fs := over.expectClosed()
		if len(fs) == 0 || fs[0].Cmd.GetError().GetError() != pb.ServerError_TooManyRequests {
			t.Fatalf("perIP %v: the third connection got %v, want TooManyRequests", perIP, fs)
		}
		a.nc.Close()
		testWaitFor(t, "a slot after a connection closed", func() bool {
			c, err := tryDialConnected(e.url)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}
}

// blockingPlacement holds every lookup until release is closed.
type blockingPlacement struct{ release chan struct{} }

func (p blockingPlacement) Lookup(ctx context.Context, _ topic.Name, _ bool) (broker.LookupResult, error) {
	select {
	case <-p.release:
	case <-ctx.Done():
	}
	return broker.LookupResult{Self: true, ServiceURL: "pulsar://127.0.0.1:1"}, nil
}
func (blockingPlacement) Owns(topic.Name) bool                { return true }
func (blockingPlacement) OwnedEpoch(topic.Name) (int64, bool) { return 1, true }

// Lookups beyond MaxConcurrentLookups are shed with TooManyRequests
// (retriable) instead of queueing; so are requests beyond a connection's
// MaxPendingRequests. The requests that hold the slots are lookups the
// placement blocks until the test ends, so which request is shed does
// not depend on how fast the others are answered.
func TestLookupsAndPendingRequestsAreShed(t *testing.T) {
	lookup := func(c *rawConn, id uint64) {
		c.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
			Topic: proto.String("persistent://public/default/x"), RequestId: proto.Uint64(id)}})
	}
	shed := func(t *testing.T, c *rawConn, id uint64) {
		t.Helper()
		f := c.recv()
		if f.Cmd.GetError().GetRequestId() != id || f.Cmd.GetError().GetError() != pb.ServerError_TooManyRequests ||
			!wire.ErrorFor(f.Cmd.GetError().GetError()).Retriable {
			t.Fatalf("request %d: %v, want it shed (TooManyRequests)", id, f.Cmd)
		}
	}
	// connect starts a broker with these limits whose lookups block until
	// the test ends, and connects to it.
	connect := func(t *testing.T, lookups, pending int) *rawConn {
		release := make(chan struct{})
		e := startEnv(t, func(c *setup) {
			c.Limits.MaxConcurrentLookups = lookups
			c.Limits.MaxPendingRequests = pending
			c.Placement = blockingPlacement{release}
		})
		t.Cleanup(func() { close(release) })
		return dialRaw(t, e.url, true)
	}
	t.Run("lookups", func(t *testing.T) {
		c := connect(t, 2, 100)
		lookup(c, 1)
		lookup(c, 2)
		lookup(c, 3) // the third in progress: shed
		shed(t, c, 3)
	})
	t.Run("pending requests", func(t *testing.T) {
		c := connect(t, 100, 3)
		// Three lookups hold the connection's three slots: the next
		// request, of any kind, is shed.
		lookup(c, 1)
		lookup(c, 2)
		lookup(c, 3)
		c.send(&pb.BaseCommand{Type: pb.BaseCommand_GET_LAST_MESSAGE_ID.Enum(), GetLastMessageId: &pb.CommandGetLastMessageId{
			ConsumerId: proto.Uint64(99), RequestId: proto.Uint64(4)}})
		shed(t, c, 4)
	})
}

func testWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tryDialConnected connects and completes CONNECT, or says why not.
func tryDialConnected(url string) (net.Conn, error) {
	nc, err := net.Dial("tcp", strings.TrimPrefix(url, "pulsar://"))
	if err != nil {
		return nil, err
	}
	f, err := wire.AppendCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: proto.String("raw-test"), ProtocolVersion: proto.Int32(20)}})
	if err == nil {
		_, err = nc.Write(f)
	}
	if err == nil {
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		var raw []byte
		if raw, err = wire.ReadFrame(nc, 0, nil); err == nil {
			var fr wire.Frame
			if fr, err = wire.DecodeFrame(raw); err == nil && fr.Cmd.GetType() != pb.BaseCommand_CONNECTED {
				err = fmt.Errorf("got %v", fr.Cmd.GetType())
			}
		}
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}
