package bookie

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/bookie/proto"
)

// conn serves one client connection: a reader loop that decodes requests and
// dispatches them, and one writer goroutine that batches responses into few
// syscalls. At most maxInFlight requests are outstanding; the reader stops
// reading (TCP backpressure) when that many are in flight.
type conn struct {
	s      *Server
	nc     net.Conn
	logger *slog.Logger

	resp  chan response // encoded responses; capacity maxInFlight so producers never block
	slots chan struct{} // in-flight semaphore
	wg    sync.WaitGroup
	done  chan struct{} // closed when the writer exits

	// drainOnClose is set when the conn is closed with input unread (an
	// oversize frame): closing then would send a TCP reset that can destroy
	// the error reply before the peer reads it, so the conn half-closes and
	// discards input for a moment first. Only the read loop sets it.
	drainOnClose bool
}

func (s *Server) newConn(nc net.Conn) *conn {
	n := s.cfg.MaxInFlightPerConn
	return &conn{
		s:      s,
		nc:     nc,
		logger: s.logger.With("remote", nc.RemoteAddr().String()),
		resp:   make(chan response, n),
		slots:  make(chan struct{}, n),
		done:   make(chan struct{}),
	}
}

// serve runs the connection until the peer leaves, a protocol error occurs or
// ctx ends. It waits for every request it started.
func (c *conn) serve(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	go c.writeLoop()
	readLoopDone := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		select {
		case <-ctx.Done():
			c.nc.SetReadDeadline(time.Unix(1, 0))
		case <-c.done:
			c.nc.SetReadDeadline(time.Unix(1, 0))
		case <-readLoopDone:
		}
	}()
	c.readLoop(ctx)
	close(readLoopDone)
	<-watcherDone
	cancel() // ends long polls: the peer is gone or sent garbage
	c.wg.Wait()
	close(c.resp)
	<-c.done
	if c.drainOnClose && parent.Err() == nil {
		raw := c.nc
		if tc, ok := raw.(*tls.Conn); ok {
			tc.CloseWrite() // close_notify; what follows is discarded unread
			raw = tc.NetConn()
		}
		if tc, ok := raw.(*net.TCPConn); ok {
			tc.CloseWrite()
			raw.SetReadDeadline(time.Now().Add(time.Second))
			io.CopyN(io.Discard, raw, int64(c.s.cfg.MaxFrameSize)+64<<10)
		}
	}
	c.nc.Close()
}

func (c *conn) readLoop(ctx context.Context) {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	max := c.s.cfg.MaxFrameSize
	for {
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		frame, err := proto.ReadFrame(br, max, nil)
		if err != nil {
			<-c.slots
			if errors.Is(err, proto.ErrFrameTooLarge) {
				c.rejectOversize(br, err)
				return
			}
			if errors.Is(err, proto.ErrMalformed) {
				c.logger.Warn("closing connection on malformed frame", "err", err)
				return
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				c.logger.Debug("connection read ended", "err", err)
			}
			return
		}
		req, err := proto.DecodeRequest(frame)
		if err != nil {
			h, herr := proto.DecodeHeader(frame)
			if herr != nil {
				// Without a valid header there is no request id to answer.
				<-c.slots
				c.logger.Warn("closing connection on undecodable frame", "err", err)
				return
			}
			c.reply(&proto.Response{Op: proto.Op(h.Type &^ proto.RespBit), ID: h.ID, Status: proto.StatusBadRequest})
			if h.Type&proto.RespBit != 0 {
				return
			}
			continue
		}
		c.dispatch(ctx, &req)
	}
}

// rejectOversize answers an oversize frame with StatusTooLarge when its
// header can be read, then the connection is closed (the rest of the frame
// is never read).
func (c *conn) rejectOversize(br *bufio.Reader, cause error) {
	c.logger.Warn("closing connection on oversize frame", "err", cause)
	c.drainOnClose = true
	var hdr [proto.HeaderSize]byte
	c.nc.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return
	}
	h, err := proto.DecodeHeader(hdr[:])
	if err != nil {
		return
	}
	c.slots <- struct{}{}
	c.reply(&proto.Response{Op: proto.Op(h.Type &^ proto.RespBit), ID: h.ID, Status: proto.StatusTooLarge})
}

// response is an encoded response: its frame's head, and the payload
// that follows it on the wire, still in the buffer storage read it into.
type response struct{ head, payload []byte }

// reply encodes r and queues it for the writer. It never blocks: a slot was
// taken for the request, and the queue holds as many responses as there are slots.
func (c *conn) reply(r *proto.Response) {
	head, payload := proto.AppendResponseHead(nil, r)
	c.resp <- response{head, payload}
}

// writevMin is the payload size from which a response's payload is
// handed to the kernel from its own buffer (writev) rather than copied
// after its head; writeBatch is how much the writer gathers before it
// writes when more responses are queued.
const (
	writevMin  = 16 << 10
	writeBatch = 1 << 20
)

// writeLoop writes the queued responses: heads and small payloads
// copied into one buffer, large payloads (entries read) from their own,
// all of a batch in one writev.
func (c *conn) writeLoop() {
	defer close(c.done)
	var (
		buf     []byte      // heads and small payloads of the batch
		mark    int         // where buf's piece not yet in bufs starts
		bufs    net.Buffers // the batch: pieces of buf and large payloads
		pending int
		failed  bool
	)
	for r := range c.resp {
		<-c.slots
		if failed {
			continue
		}
		buf = append(buf, r.head...)
		if len(r.payload) < writevMin {
			buf = append(buf, r.payload...)
		} else {
			bufs = append(bufs, buf[mark:], r.payload)
			mark = len(buf)
		}
		pending += len(r.head) + len(r.payload)
		if len(c.resp) > 0 && pending < writeBatch && len(bufs) < 64 {
			continue
		}
		if len(buf) > mark {
			bufs = append(bufs, buf[mark:])
		}
		batch := bufs // WriteTo consumes its receiver
		if _, err := batch.WriteTo(c.nc); err != nil {
			failed = true
		}
		clear(bufs) // let the payloads go
		bufs, pending, mark = bufs[:0], 0, 0
		buf = buf[:0]
		if cap(buf) > writeBatch {
			buf = nil
		}
	}
}

// dispatch serves one request. Fast paths run inline; anything that may wait
// (fsync, disk reads, long polls) runs on its own goroutine owned by the conn.
func (c *conn) dispatch(ctx context.Context, req *proto.Request) {
	switch req.Op {
	case proto.OpAdd:
		// The journal answers later, from its own goroutine: the conn
		// waits for that answer before it closes its response queue.
		start := time.Now()
		c.wg.Add(1)
		var once sync.Once
		finish := func(r *proto.Response) {
			once.Do(func() {
				c.s.metrics.addDone(start, r.Status)
				c.reply(r)
				c.wg.Done()
			})
		}
		c.safely(req, finish, func() { c.s.handleAdd(req, finish) })
	case proto.OpInfo:
		c.safely(req, c.reply, func() { c.reply(c.s.handleInfo(req)) })
	case proto.OpRead, proto.OpReadLAC, proto.OpFence, proto.OpDelete:
		reply := c.reply
		if req.Op == proto.OpRead {
			start := time.Now()
			reply = func(r *proto.Response) {
				c.s.metrics.readDone(start, r.Status)
				c.reply(r)
			}
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if req.Op == proto.OpRead {
				// A read waits for a read worker, parked: only
				// ReadWorkers reads compete with adds for the CPU.
				select {
				case c.s.readSlots <- struct{}{}:
					defer func() { <-c.s.readSlots }()
				case <-ctx.Done():
					reply(&proto.Response{Op: req.Op, ID: req.ID, Ledger: req.Ledger, Status: proto.StatusOf(ctx.Err())})
					return
				}
			}
			c.safely(req, reply, func() { reply(c.s.handleSlow(ctx, req)) })
		}()
	default:
		c.reply(&proto.Response{Op: req.Op, ID: req.ID, Ledger: req.Ledger, Status: proto.StatusUnknownOp})
	}
}

// safely runs fn and turns a panic into a StatusInternal reply and a log
// line: no panic reaches the peer or kills the process.
func (c *conn) safely(req *proto.Request, reply func(*proto.Response), fn func()) {
	defer func() {
		if p := recover(); p != nil {
			c.logger.Error("panic serving request", "op", req.Op.String(), "ledger", req.Ledger,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			reply(&proto.Response{Op: req.Op, ID: req.ID, Ledger: req.Ledger, Status: proto.StatusInternal})
		}
	}()
	fn()
}
