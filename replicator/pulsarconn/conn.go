package pulsarconn

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// errConnLost marks the errors of operations cut short by a lost
// connection; they also wrap ErrClosed.
var errConnLost = errors.New("connection lost")

// conn is one connection to a broker: a reader goroutine that handles what
// the broker sends, writes of whole frames under wmu from any goroutine,
// and a keep-alive goroutine.
type conn struct {
	cl       *Client
	addr     string
	nc       net.Conn
	log      *slog.Logger
	maxFrame int
	done     chan struct{} // closed by fail

	// wmu serialises writes of whole frames.
	wmu sync.Mutex

	// mu guards the tables and err.
	mu        sync.Mutex
	err       error // why the connection failed; set once with done
	requests  map[uint64]chan *pb.BaseCommand
	producers map[uint64]*Producer
	consumers map[uint64]*Consumer
}

// dial connects to addr and does the CONNECT handshake; the caller starts
// the goroutines.
func (c *Client) dial(ctx context.Context, addr string) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pulsarconn: connect to %s: %w", addr, err)
	}
	if c.cfg.TLS != nil {
		cfg := c.cfg.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("pulsarconn: TLS handshake with %s: %w", addr, err)
		}
		nc = tc
	}
	cn := &conn{
		cl: c, addr: addr, nc: nc, maxFrame: c.cfg.MaxFrameSize,
		log:       c.log.With("broker", addr),
		done:      make(chan struct{}),
		requests:  map[uint64]chan *pb.BaseCommand{},
		producers: map[uint64]*Producer{},
		consumers: map[uint64]*Consumer{},
	}
	if err := cn.handshake(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("pulsarconn: connect to %s: %w", addr, err)
	}
	return cn, nil
}

func (cn *conn) handshake(ctx context.Context) (err error) {
	stop := context.AfterFunc(ctx, func() { cn.nc.SetDeadline(time.Now()) })
	defer func() {
		if !stop() && err == nil {
			// ctx ended just now: its deadline may hit the reader later.
			err = ctx.Err()
		}
		cn.nc.SetDeadline(time.Time{})
	}()
	if dl, ok := ctx.Deadline(); ok {
		cn.nc.SetDeadline(dl)
	}
	connect := &pb.CommandConnect{
		ClientVersion:   strp(clientVersion),
		ProtocolVersion: i32p(protocolVersion),
	}
	if ad, err := cn.cl.authData(); err != nil {
		return err
	} else if ad != nil {
		connect.AuthMethodName, connect.AuthData = ad.AuthMethodName, ad.AuthData
	}
	f, err := wire.AppendCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: connect})
	if err != nil {
		return err
	}
	if _, err := cn.nc.Write(f); err != nil {
		return withCtx(ctx, err)
	}
	raw, err := wire.ReadFrame(cn.nc, cn.maxFrame, nil)
	if err != nil {
		return withCtx(ctx, err)
	}
	fr, err := wire.DecodeFrame(raw)
	if err != nil {
		return err
	}
	switch fr.Cmd.GetType() {
	case pb.BaseCommand_CONNECTED:
		return nil
	case pb.BaseCommand_ERROR:
		e := fr.Cmd.GetError()
		return serverError(e.GetError(), e.GetMessage())
	default:
		return fmt.Errorf("%w: %v in reply to CONNECT", wire.ErrBadCommand, fr.Cmd.GetType())
	}
}

// withCtx prefers ctx's error to the I/O error its deadline caused.
func withCtx(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}

func (cn *conn) dead() bool {
	select {
	case <-cn.done:
		return true
	default:
		return false
	}
}

// fail closes the connection for err (once): pending requests end, the
// producers and consumers on it fail with ErrClosed.
func (cn *conn) fail(err error) {
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		return
	}
	cn.err = err
	close(cn.done)
	prods, cons := cn.producers, cn.consumers
	cn.producers, cn.consumers = map[uint64]*Producer{}, map[uint64]*Consumer{}
	cn.mu.Unlock()
	cn.nc.Close()
	cn.cl.forget(cn)
	if !errors.Is(err, ErrClosed) || errors.Is(err, errConnLost) {
		cn.log.Warn("connection closed", "err", err)
	}
	for _, p := range prods {
		p.fail(cn.lostErr())
	}
	for _, co := range cons {
		co.fail(cn.lostErr())
	}
}

// lostErr is the error of operations on a failed connection.
func (cn *conn) lostErr() error {
	cn.mu.Lock()
	err := cn.err
	cn.mu.Unlock()
	if errors.Is(err, ErrClosed) && !errors.Is(err, errConnLost) {
		return err // client closed
	}
	return fmt.Errorf("%w: %w to %s: %v", ErrClosed, errConnLost, cn.addr, err)
}

// write sends one whole frame.
func (cn *conn) write(frame []byte) error {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	if cn.dead() {
		return cn.lostErr()
	}
	cn.nc.SetWriteDeadline(time.Now().Add(cn.cl.cfg.OperationTimeout))
	if _, err := cn.nc.Write(frame); err != nil {
		cn.fail(fmt.Errorf("%w: write: %w", errConnLost, err))
		return cn.lostErr()
	}
	return nil
}

// writeCmd sends a simple command.
func (cn *conn) writeCmd(cmd *pb.BaseCommand) error {
	f, err := wire.AppendCommand(nil, cmd)
	if err != nil {
		return err
	}
	return cn.write(f)
}

// request sends cmd, which carries request id reqID, and waits for the
// broker's final reply to it; an ERROR reply is returned as its error.
func (cn *conn) request(ctx context.Context, reqID uint64, cmd *pb.BaseCommand) (*pb.BaseCommand, error) {
	ch := make(chan *pb.BaseCommand, 1)
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		return nil, cn.lostErr()
	}
	cn.requests[reqID] = ch
	cn.mu.Unlock()
	defer func() {
		cn.mu.Lock()
		delete(cn.requests, reqID)
		cn.mu.Unlock()
	}()
	if err := cn.writeCmd(cmd); err != nil {
		return nil, err
	}
	select {
	case resp := <-ch:
		if e := resp.GetError(); resp.GetType() == pb.BaseCommand_ERROR && e != nil {
			return nil, serverError(e.GetError(), e.GetMessage())
		}
		return resp, nil
	case <-cn.done:
		return nil, cn.lostErr()
	case <-ctx.Done():
		return nil, fmt.Errorf("pulsarconn: %v request %d: %w", cmd.GetType(), reqID, ctx.Err())
	}
}

// resolve hands a reply to the request waiting for it, if any.
func (cn *conn) resolve(reqID uint64, cmd *pb.BaseCommand) {
	cn.mu.Lock()
	ch := cn.requests[reqID]
	delete(cn.requests, reqID)
	cn.mu.Unlock()
	if ch == nil {
		cn.log.Debug("reply to no request", "type", cmd.GetType(), "request", reqID)
		return
	}
	ch <- cmd // buffered, one reply per request
}

func (cn *conn) producer(id uint64) *Producer {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.producers[id]
}

func (cn *conn) consumer(id uint64) *Consumer {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.consumers[id]
}

// register adds a producer or consumer to the tables; false when the
// connection has failed.
func (cn *conn) register(p *Producer, co *Consumer) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.err != nil {
		return false
	}
	if p != nil {
		cn.producers[p.id] = p
	}
	if co != nil {
		cn.consumers[co.id] = co
	}
	return true
}

func (cn *conn) unregisterProducer(p *Producer) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.producers[p.id] == p {
		delete(cn.producers, p.id)
	}
}

func (cn *conn) unregisterConsumer(co *Consumer) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.consumers[co.id] == co {
		delete(cn.consumers, co.id)
	}
}

// keepAlive pings the broker until the connection fails.
func (cn *conn) keepAlive() {
	t := time.NewTicker(keepAliveInterval)
	defer t.Stop()
	for {
		select {
		case <-cn.done:
			return
		case <-t.C:
		}
		cn.writeCmd(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
	}
}

// readLoop handles frames until the connection fails; a frame that does
// not decode fails it.
func (cn *conn) readLoop() {
	var buf []byte
	for {
		cn.nc.SetReadDeadline(time.Now().Add(3 * keepAliveInterval))
		raw, err := wire.ReadFrame(cn.nc, cn.maxFrame, buf)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: closed by the broker", errConnLost)
			} else {
				err = fmt.Errorf("%w: read: %w", errConnLost, err)
			}
			cn.fail(err)
			return
		}
		buf = raw
		f, err := wire.DecodeFrame(raw)
		if err == nil {
			err = cn.handle(f)
		}
		if err != nil {
			cn.fail(fmt.Errorf("%w: bad frame from the broker: %w", errConnLost, err))
			return
		}
	}
}

// handle acts on one frame from the broker.
func (cn *conn) handle(f wire.Frame) error {
	cmd := f.Cmd
	switch cmd.GetType() {
	case pb.BaseCommand_PING:
		return cn.writeCmd(&pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}})
	case pb.BaseCommand_PONG, pb.BaseCommand_CONNECTED:
	case pb.BaseCommand_AUTH_CHALLENGE:
		// The token expired: answer with the current one.
		ad, err := cn.cl.authData()
		if err != nil || ad == nil {
			return fmt.Errorf("auth challenge: no token to answer with (%v)", err)
		}
		return cn.writeCmd(&pb.BaseCommand{Type: pb.BaseCommand_AUTH_RESPONSE.Enum(), AuthResponse: &pb.CommandAuthResponse{
			ClientVersion: strp(clientVersion), ProtocolVersion: i32p(protocolVersion), Response: ad,
		}})
	case pb.BaseCommand_SUCCESS:
		cn.resolve(cmd.Success.GetRequestId(), cmd)
	case pb.BaseCommand_ERROR:
		id := cmd.Error.GetRequestId()
		if id == 0 {
			return serverError(cmd.Error.GetError(), cmd.Error.GetMessage())
		}
		cn.resolve(id, cmd)
	case pb.BaseCommand_LOOKUP_RESPONSE:
		cn.resolve(cmd.LookupTopicResponse.GetRequestId(), cmd)
	case pb.BaseCommand_PRODUCER_SUCCESS:
		if !cmd.ProducerSuccess.GetProducerReady() {
			// Another PRODUCER_SUCCESS follows once it is ready.
			cn.log.Debug("producer waiting", "request", cmd.ProducerSuccess.GetRequestId())
			return nil
		}
		cn.resolve(cmd.ProducerSuccess.GetRequestId(), cmd)
	case pb.BaseCommand_ACK_RESPONSE:
		if r := cmd.AckResponse; r.RequestId != nil {
			cn.resolve(r.GetRequestId(), cmd)
		}
	case pb.BaseCommand_SEND_RECEIPT:
		r := cmd.SendReceipt
		if p := cn.producer(r.GetProducerId()); p != nil {
			p.receipt(r.GetSequenceId(), msgID(r.GetMessageId()), nil)
		}
	case pb.BaseCommand_SEND_ERROR:
		r := cmd.SendError
		if p := cn.producer(r.GetProducerId()); p != nil {
			p.receipt(r.GetSequenceId(), MessageID{}, serverError(r.GetError(), r.GetMessage()))
		}
	case pb.BaseCommand_CLOSE_PRODUCER:
		if p := cn.producer(cmd.CloseProducer.GetProducerId()); p != nil {
			cn.unregisterProducer(p)
			p.fail(fmt.Errorf("%w: producer %d closed by the broker", ErrClosed, p.id))
		}
	case pb.BaseCommand_CLOSE_CONSUMER:
		if co := cn.consumer(cmd.CloseConsumer.GetConsumerId()); co != nil {
			cn.unregisterConsumer(co)
			co.fail(fmt.Errorf("%w: consumer %d closed by the broker", ErrClosed, co.id))
		}
	case pb.BaseCommand_MESSAGE:
		m := cmd.Message
		co := cn.consumer(m.GetConsumerId())
		if co == nil {
			cn.log.Debug("message for no consumer", "consumer", m.GetConsumerId())
			return nil
		}
		if f.Entry == nil {
			return fmt.Errorf("%w: MESSAGE without a payload", wire.ErrMalformed)
		}
		id := msgID(m.GetMessageId())
		return co.deliver(Entry{
			ID:              id,
			Data:            bytes.Clone(f.Entry),
			RedeliveryCount: m.GetRedeliveryCount(),
			Control:         id.Ledger == replication.ControlID && id.Entry == replication.ControlID,
		}, int(f.Metadata.GetNumMessagesInBatch()))
	case pb.BaseCommand_ACTIVE_CONSUMER_CHANGE:
		if co := cn.consumer(cmd.ActiveConsumerChange.GetConsumerId()); co != nil {
			co.setActive(cmd.ActiveConsumerChange.GetIsActive())
		}
	default:
		cn.log.Debug("ignoring command", "type", cmd.GetType())
	}
	return nil
}

func msgID(id *pb.MessageIdData) MessageID {
	return MessageID{Ledger: int64(id.GetLedgerId()), Entry: int64(id.GetEntryId())}
}

func (id MessageID) toPB() *pb.MessageIdData {
	return &pb.MessageIdData{LedgerId: u64p(uint64(id.Ledger)), EntryId: u64p(uint64(id.Entry))}
}

func strp(s string) *string { return &s }
func i32p(v int32) *int32   { return &v }
func u64p(v uint64) *uint64 { return &v }
func boolp(b bool) *bool    { return &b }

// authData is the client's credentials, nil without a token.
func (c *Client) authData() (*pb.AuthData, error) {
	if c.cfg.Token == nil {
		return nil, nil
	}
	tok, err := c.cfg.Token()
	if err != nil {
		return nil, fmt.Errorf("pulsarconn: token: %w", err)
	}
	return &pb.AuthData{AuthMethodName: strp("token"), AuthData: []byte(tok)}, nil
}
