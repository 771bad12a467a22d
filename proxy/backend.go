package proxy

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// maxBackendFrame bounds a broker's answers on a lookup connection (a
// schema is the largest).
const maxBackendFrame = 32 << 20

// backend is a lookup connection from the proxy to one broker, for one
// client connection (it carries that client's identity): requests get
// request ids of its own, answers go to whoever waits for their id.
type backend struct {
	c      *clientConn
	broker string
	nc     net.Conn
	wmu    sync.Mutex // whole frames to nc

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan *pb.BaseCommand
	err     error         // why it died; set once with done
	done    chan struct{} // closed when it died
}

// handshake sends cc and waits for CONNECTED; a broker's ERROR is
// returned as an error of its code's kind.
func (bk *backend) handshake(cc *pb.CommandConnect, timeout time.Duration) error {
	bk.nc.SetDeadline(time.Now().Add(timeout))
	defer bk.nc.SetDeadline(time.Time{})
	if err := bk.writeCmd(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: cc}); err != nil {
		return fmt.Errorf("%w: proxy: broker %s: %w", errkind.ErrServiceNotReady, bk.broker, err)
	}
	raw, err := wire.ReadFrame(bk.nc, maxHandshakeFrame, nil)
	if err != nil {
		return fmt.Errorf("%w: proxy: broker %s did not answer CONNECT: %w", errkind.ErrServiceNotReady, bk.broker, err)
	}
	f, err := wire.DecodeFrame(raw)
	if err != nil {
		return fmt.Errorf("%w: proxy: broker %s: %w", errkind.ErrServiceNotReady, bk.broker, err)
	}
	switch f.Cmd.GetType() {
	case pb.BaseCommand_CONNECTED:
		return nil
	case pb.BaseCommand_ERROR:
		return serverError(f.Cmd.Error.GetError(), f.Cmd.Error.GetMessage())
	}
	return fmt.Errorf("%w: proxy: broker %s answered CONNECT with %v", errkind.ErrServiceNotReady, bk.broker, f.Cmd.GetType())
}

func (bk *backend) writeCmd(cmd *pb.BaseCommand) error {
	f, err := wire.AppendCommand(nil, cmd)
	if err != nil {
		return err
	}
	bk.wmu.Lock()
	defer bk.wmu.Unlock()
	bk.nc.SetWriteDeadline(time.Now().Add(requestTimeout))
	_, err = bk.nc.Write(f)
	return err
}

// request sends cmd with a fresh request id and returns the broker's
// answer to it (an ERROR included). A lost connection is
// ServiceNotReady, which the client retries.
func (bk *backend) request(ctx context.Context, cmd *pb.BaseCommand) (*pb.BaseCommand, error) {
	ch := make(chan *pb.BaseCommand, 1)
	bk.mu.Lock()
	if bk.err != nil {
		err := bk.err
		bk.mu.Unlock()
		return nil, fmt.Errorf("%w: proxy: connection to broker %s: %w", errkind.ErrServiceNotReady, bk.broker, err)
	}
	bk.nextID++
	id := bk.nextID
	bk.pending[id] = ch
	bk.mu.Unlock()
	defer func() {
		bk.mu.Lock()
		delete(bk.pending, id)
		bk.mu.Unlock()
	}()
	setRequestID(cmd, id)
	if err := bk.writeCmd(cmd); err != nil {
		bk.close(err)
		return nil, fmt.Errorf("%w: proxy: connection to broker %s: %w", errkind.ErrServiceNotReady, bk.broker, err)
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-bk.done:
		return nil, fmt.Errorf("%w: proxy: connection to broker %s lost: %w", errkind.ErrServiceNotReady, bk.broker, bk.err)
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: proxy: broker %s did not answer %v in time: %w", errkind.ErrServiceNotReady, bk.broker, cmd.GetType(), ctx.Err())
	}
}

// readLoop takes the broker's frames: answers to their waiters, pings
// answered, a credential challenge answered with the client's latest
// credentials (the broker checks them against the client's role).
func (bk *backend) readLoop() {
	for {
		raw, err := wire.ReadFrame(bk.nc, maxBackendFrame, nil)
		if err != nil {
			bk.close(err)
			return
		}
		f, err := wire.DecodeFrame(raw)
		if err != nil {
			bk.close(err)
			return
		}
		cmd := f.Cmd
		switch cmd.GetType() {
		case pb.BaseCommand_PING:
			_ = bk.writeCmd(&pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}})
		case pb.BaseCommand_PONG:
		case pb.BaseCommand_AUTH_CHALLENGE:
			method, data := bk.c.credentials()
			_ = bk.writeCmd(&pb.BaseCommand{Type: pb.BaseCommand_AUTH_RESPONSE.Enum(), AuthResponse: &pb.CommandAuthResponse{
				ClientVersion: bk.c.connect.ClientVersion, ProtocolVersion: bk.c.connect.ProtocolVersion,
				Response: &pb.AuthData{AuthMethodName: &method, AuthData: data},
			}})
		case pb.BaseCommand_ERROR:
			if cmd.Error.RequestId == nil {
				bk.close(serverError(cmd.Error.GetError(), cmd.Error.GetMessage()))
				return
			}
			bk.deliver(cmd)
		default:
			bk.deliver(cmd)
		}
	}
}

func (bk *backend) deliver(cmd *pb.BaseCommand) {
	id := requestID(cmd)
	bk.mu.Lock()
	ch := bk.pending[id]
	delete(bk.pending, id)
	bk.mu.Unlock()
	if ch != nil {
		ch <- cmd
	}
}

// dead reports whether the connection died.
func (bk *backend) dead() bool {
	select {
	case <-bk.done:
		return true
	default:
		return false
	}
}

// close ends the connection for err (once); waiting requests fail.
func (bk *backend) close(err error) {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	if bk.err != nil {
		return
	}
	bk.err = err
	close(bk.done)
	bk.nc.Close()
}
