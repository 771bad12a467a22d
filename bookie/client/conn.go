// Package client is the network side of the bookie protocol for ledger
// clients: a pipelined connection to one bookie (many requests in flight,
// matched to responses by request id, one reader and one batching writer
// goroutine) and a Pool of such connections keyed by address. It knows
// nothing about ledgers, quorums or metadata; package bookie/ledger builds
// those on top.
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/bookie/proto"
)

// Options shape a connection. The zero value of every field means the
// documented default.
type Options struct {
	// MaxInFlight bounds the requests outstanding on one connection. A call
	// that finds it full blocks until a request completes, its ctx ends or the
	// connection fails. Zero means 4096.
	MaxInFlight int
	// RequestTimeout fails a request that got no answer within it with
	// ErrRequestTimeout; the connection stays up (the bookie may be slow, not
	// gone). A long poll gets its poll timeout on top. Zero means 10s;
	// negative disables it (only ctx bounds a request then).
	RequestTimeout time.Duration
	// DialTimeout bounds connecting. Zero means 5s.
	DialTimeout time.Duration
	// WriteTimeout bounds one batched write; a write stalled this long fails
	// the connection. Zero means 10s.
	WriteTimeout time.Duration
	// MaxFrameSize bounds a response frame. Zero means proto.DefaultMaxFrameSize.
	MaxFrameSize int
	// RedialBackoff is how long a Pool keeps answering with the last dial
	// error for an address before dialing it again. Zero means 200ms.
	RedialBackoff time.Duration
	// Logger receives connection failures; nil discards them.
	Logger *slog.Logger
	// TLS, when set, makes Dial connect over TLS with (a clone of) it: the
	// bookie's certificate must chain to its RootCAs, and its client
	// certificate is what bookies that require one check. An empty
	// ServerName means the host of the bookie's address. Nil dials
	// plaintext.
	TLS *tls.Config
}

func (o Options) withDefaults() Options {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 4096
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 10 * time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = proto.DefaultMaxFrameSize
	}
	if o.RedialBackoff <= 0 {
		o.RedialBackoff = 200 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Conn is a pipelined connection to one bookie. It is safe for concurrent
// use. Requests are written in batches by one writer goroutine and answered
// (possibly out of order) through one reader goroutine; when the connection
// fails every pending request fails at once with ErrDisconnected and the Conn
// stays failed (dial a new one, or use a Pool).
type Conn struct {
	addr  string
	opts  Options
	nc    net.Conn
	slots chan struct{} // one token per outstanding request
	wake  chan struct{} // tells the writer that wbuf has frames
	done  chan struct{} // closed when the connection fails or closes
	wg    sync.WaitGroup
	// exited is closed when the last of the connection's goroutines returns.
	exited  chan struct{}
	running atomic.Int32

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*call
	wbuf    []byte // encoded frames not yet handed to the writer
	err     error  // why the connection ended; nil while it is up
	cause   error  // the failure behind an err wrapping ErrDisconnected
}

// call is one outstanding request.
type call struct {
	deadline time.Time // zero: none
	stop     func() bool
	cb       func(*proto.Response, error)
}

// Dial connects to the bookie at addr, over TLS when opts.TLS is set.
//
// Over TLS, Dial also waits for the bookie's answer to an Info request:
// with TLS 1.3 a client's handshake ends before the bookie has checked its
// certificate, so a bookie that refuses it (none when one is required, or
// one another CA signed) would otherwise fail only the first request. Any
// refusal comes back from Dial as an error wrapping ErrDisconnected that
// names the bookie, and a Pool then waits RedialBackoff before trying again.
func Dial(ctx context.Context, addr string, opts Options) (*Conn, error) {
	opts = opts.withDefaults()
	d := net.Dialer{Timeout: opts.DialTimeout, KeepAlive: 15 * time.Second}
	if opts.TLS == nil {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("%w: dial bookie %s: %v", ErrDisconnected, addr, err)
		}
		return NewConn(nc, addr, opts), nil
	}
	cfg := opts.TLS.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	// The dialer's timeout covers the handshake too.
	td := tls.Dialer{NetDialer: &d, Config: cfg}
	nc, err := td.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial bookie %s over TLS: %v", ErrDisconnected, addr, err)
	}
	c := NewConn(nc, addr, opts)
	pctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	if _, err := c.Info(pctx); err != nil && !isAnswer(err) {
		c.Close()
		if errors.Is(err, ErrDisconnected) {
			c.mu.Lock()
			cause := c.cause
			c.mu.Unlock()
			return nil, fmt.Errorf("%w: dial bookie %s over TLS: the bookie closed the connection after the handshake "+
				"(as it does when the client certificate is missing or signed by a CA it does not trust): %v", ErrDisconnected, addr, cause)
		}
		return nil, fmt.Errorf("%w: dial bookie %s over TLS: no answer after the handshake: %v", ErrDisconnected, addr, err)
	}
	return c, nil
}

// isAnswer reports whether err is a bookie's answer (a *StatusError): the
// connection works.
func isAnswer(err error) bool {
	var se *StatusError
	return errors.As(err, &se)
}

// NewConn runs the protocol over a connection the caller made (tests hand it
// one end of net.Pipe). addr names the peer in errors.
func NewConn(nc net.Conn, addr string, opts Options) *Conn {
	opts = opts.withDefaults()
	c := &Conn{
		addr:    addr,
		opts:    opts,
		nc:      nc,
		slots:   make(chan struct{}, opts.MaxInFlight),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		pending: make(map[uint64]*call),
		exited:  make(chan struct{}),
	}
	loops := []func(){c.readLoop, c.writeLoop}
	if opts.RequestTimeout > 0 {
		loops = append(loops, c.sweepLoop)
	}
	// Count them all before any starts: a read loop that fails at once (the
	// peer already closed) must not see the count reach zero while the
	// others are still to start.
	c.running.Store(int32(len(loops)))
	for _, fn := range loops {
		c.spawn(fn)
	}
	return c
}

// spawn runs fn on a goroutine owned by the connection (Close waits for
// it); c.running counts it already.
func (c *Conn) spawn(fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			if c.running.Add(-1) == 0 {
				close(c.exited)
			}
		}()
		fn()
	}()
}

// Addr is the bookie's address.
func (c *Conn) Addr() string { return c.addr }

// Err is why the connection ended (wrapping ErrDisconnected or ErrClosed),
// or nil while it is up.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Done is closed when the connection fails or is closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// InFlight is the number of outstanding requests.
func (c *Conn) InFlight() int { return len(c.slots) }

// Close fails every pending request with ErrClosed, closes the connection and
// waits for its goroutines. It must not be called from a request callback.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	c.wg.Wait()
	return nil
}

// start registers a request and queues its frame. cb is called exactly once
// unless start returns an error (then it is never called). extra lengthens
// the request timeout (long polls).
func (c *Conn) start(ctx context.Context, req *proto.Request, extra time.Duration, cb func(*proto.Response, error)) error {
	select {
	case c.slots <- struct{}{}:
	default:
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("bookie %s: %s: waiting for an in-flight slot: %w", c.addr, req.Op, ctx.Err())
		case <-c.done:
			return c.Err()
		}
	}
	cl := &call{cb: cb}
	if c.opts.RequestTimeout > 0 {
		cl.deadline = time.Now().Add(c.opts.RequestTimeout + extra)
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		<-c.slots
		return err
	}
	c.nextID++
	id := c.nextID
	req.ID = id
	c.pending[id] = cl
	signal := len(c.wbuf) == 0
	c.wbuf = proto.AppendRequest(c.wbuf, req)
	if ctx.Done() != nil {
		op := req.Op
		cl.stop = context.AfterFunc(ctx, func() {
			c.finish(id, nil, fmt.Errorf("bookie %s: %s: %w", c.addr, op, ctx.Err()))
		})
	}
	c.mu.Unlock()
	if signal {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// finish completes request id once; later completions of the same id (a
// response after a timeout, say) are dropped.
func (c *Conn) finish(id uint64, resp *proto.Response, err error) {
	c.mu.Lock()
	cl, ok := c.pending[id]
	if ok {
		delete(c.pending, id)
	}
	c.mu.Unlock()
	if !ok {
		return
	}
	if cl.stop != nil {
		cl.stop()
	}
	<-c.slots // free the slot first so cb may issue the next request
	cl.cb(resp, err)
}

// fail ends the connection and fails every pending request, oldest first.
func (c *Conn) fail(cause error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	if errors.Is(cause, ErrClosed) {
		c.err = fmt.Errorf("bookie %s: %w", c.addr, ErrClosed)
	} else {
		c.err = fmt.Errorf("%w: bookie %s: %v", ErrDisconnected, c.addr, cause)
		c.cause = cause
		c.opts.Logger.Debug("bookie connection failed", "bookie", c.addr, "err", cause)
	}
	err := c.err
	calls := c.pending
	c.pending = make(map[uint64]*call)
	c.wbuf = nil
	close(c.done)
	c.mu.Unlock()
	c.nc.Close()
	ids := make([]uint64, 0, len(calls))
	for id := range calls {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		cl := calls[id]
		if cl.stop != nil {
			cl.stop()
		}
		<-c.slots
		cl.cb(nil, err)
	}
}

// ownFrame is the frame size from which a response is read into a
// buffer of its own, which its payload then keeps; smaller ones share one
// buffer and their payload is copied out.
const ownFrame = 16 << 10

func (c *Conn) readLoop() {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var shared []byte
	for {
		buf, own := shared, false
		// The bookie is trusted with the size it announces (up to
		// MaxFrameSize): a large frame (an entry read) is read straight
		// into a buffer of that size, not through a growing one.
		if hdr, err := br.Peek(4); err == nil {
			if n := binary.BigEndian.Uint32(hdr); n >= ownFrame && int64(n) <= int64(c.opts.MaxFrameSize) {
				buf, own = make([]byte, 0, n), true
			}
		}
		frame, err := proto.ReadFrame(br, c.opts.MaxFrameSize, buf)
		if err != nil {
			c.fail(err)
			return
		}
		resp, err := proto.DecodeResponse(frame)
		if err != nil {
			c.fail(err)
			return
		}
		if !own {
			shared = frame // reused for the next frame: the payload is copied
			if len(resp.Payload) > 0 {
				resp.Payload = bytes.Clone(resp.Payload)
			}
		}
		c.finish(resp.ID, &resp, nil)
	}
}

// writeLoop hands everything queued since its last write to the kernel in
// one write, so a burst of requests costs few syscalls.
func (c *Conn) writeLoop() {
	var spare []byte
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.mu.Lock()
		buf := c.wbuf
		c.wbuf = spare[:0]
		c.mu.Unlock()
		if len(buf) == 0 {
			spare = buf
			continue
		}
		c.nc.SetWriteDeadline(time.Now().Add(c.opts.WriteTimeout))
		if _, err := c.nc.Write(buf); err != nil {
			c.fail(err)
			return
		}
		if cap(buf) > 8<<20 {
			buf = nil // let a burst's buffer go
		}
		spare = buf
	}
}

// sweepLoop fails requests past their deadline.
func (c *Conn) sweepLoop() {
	every := min(max(c.opts.RequestTimeout/10, 5*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	var expired []uint64
	for {
		select {
		case <-c.done:
			return
		case now := <-t.C:
			expired = expired[:0]
			c.mu.Lock()
			for id, cl := range c.pending {
				if !cl.deadline.IsZero() && now.After(cl.deadline) {
					expired = append(expired, id)
				}
			}
			c.mu.Unlock()
			slices.Sort(expired)
			for _, id := range expired {
				c.finish(id, nil, fmt.Errorf("%w: bookie %s: no answer within %v", ErrRequestTimeout, c.addr, c.opts.RequestTimeout))
			}
		}
	}
}

// check turns a response into an error: a non-OK status becomes a
// *StatusError, a response of the wrong kind ErrBadResponse.
func (c *Conn) check(resp *proto.Response, op proto.Op, ledger, entry uint64) error {
	if resp.Op != op {
		return fmt.Errorf("%w: bookie %s answered a %s request with %s", ErrBadResponse, c.addr, op, resp.Op)
	}
	if resp.Status != proto.StatusOK {
		return &StatusError{Addr: c.addr, Op: op, Ledger: ledger, Entry: entry, Status: resp.Status}
	}
	return nil
}

// AddAsync sends an add of an encoded entry (proto.AppendEntry) and calls cb
// exactly once with the outcome: on the connection's goroutines, or on the
// calling goroutine when the request cannot be sent. cb must not block.
// AddAsync blocks while MaxInFlight requests are outstanding; ctx bounds that
// wait and the request. recovery sets proto.FlagRecovery (accepted on a
// fenced ledger).
func (c *Conn) AddAsync(ctx context.Context, ledger, entry uint64, payload []byte, recovery bool, cb func(error)) {
	req := proto.Request{Op: proto.OpAdd, Ledger: ledger, Entry: entry, Payload: payload}
	if recovery {
		req.Flags = proto.FlagRecovery
	}
	err := c.start(ctx, &req, 0, func(resp *proto.Response, err error) {
		if err == nil {
			err = c.check(resp, proto.OpAdd, ledger, entry)
		}
		cb(err)
	})
	if err != nil {
		cb(err)
	}
}

// Add is AddAsync waiting for the answer.
func (c *Conn) Add(ctx context.Context, ledger, entry uint64, payload []byte, recovery bool) error {
	ch := make(chan error, 1)
	c.AddAsync(ctx, ledger, entry, payload, recovery, func(err error) { ch <- err })
	return <-ch
}

// ReadAsync reads an entry and calls cb once with the stored bytes (entry
// header and data, as written; the caller verifies them with
// proto.DecodeEntry). fence fences the ledger first. Blocking and callback
// rules are those of AddAsync.
func (c *Conn) ReadAsync(ctx context.Context, ledger, entry uint64, fence bool, cb func([]byte, error)) {
	req := proto.Request{Op: proto.OpRead, Ledger: ledger, Entry: entry}
	if fence {
		req.Flags = proto.FlagFence
	}
	err := c.start(ctx, &req, 0, func(resp *proto.Response, err error) {
		if err == nil {
			err = c.check(resp, proto.OpRead, ledger, entry)
		}
		if err != nil {
			cb(nil, err)
			return
		}
		cb(resp.Payload, nil)
	})
	if err != nil {
		cb(nil, err)
	}
}

// Read is ReadAsync waiting for the answer.
func (c *Conn) Read(ctx context.Context, ledger, entry uint64, fence bool) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	c.ReadAsync(ctx, ledger, entry, fence, func(b []byte, err error) { ch <- result{b, err} })
	r := <-ch
	return r.b, r.err
}

// ReadLAC returns the highest last-add-confirmed the bookie has seen for the
// ledger. With timeout > 0 the bookie holds the request until that LAC is
// greater than prevLAC; if the timeout passes first the current LAC comes
// back with an error wrapping proto.ErrTimeout. A ledger the bookie does not have
// gives -1 and proto.ErrNoLedger (without a timeout).
func (c *Conn) ReadLAC(ctx context.Context, ledger uint64, prevLAC int64, timeout time.Duration) (int64, error) {
	ms := timeout.Milliseconds()
	if timeout > 0 && ms == 0 {
		ms = 1
	}
	if ms > 1<<31 {
		ms = 1 << 31
	}
	req := proto.Request{Op: proto.OpReadLAC, Ledger: ledger, PrevLAC: prevLAC, Timeout: uint32(ms)}
	type result struct {
		lac int64
		err error
	}
	ch := make(chan result, 1)
	err := c.start(ctx, &req, timeout, func(resp *proto.Response, err error) {
		if err != nil {
			ch <- result{-1, err}
			return
		}
		ch <- result{resp.LAC, c.check(resp, proto.OpReadLAC, ledger, 0)}
	})
	if err != nil {
		return -1, err
	}
	r := <-ch
	return r.lac, r.err
}

// Fence fences the ledger on the bookie (from now on only recovery adds are
// accepted) and returns the highest LAC the bookie has seen for it.
func (c *Conn) Fence(ctx context.Context, ledger uint64) (int64, error) {
	resp, err := c.roundTrip(ctx, &proto.Request{Op: proto.OpFence, Ledger: ledger})
	if err != nil {
		return -1, err
	}
	return resp.LAC, nil
}

// Delete deletes the ledger's entries from the bookie.
func (c *Conn) Delete(ctx context.Context, ledger uint64) error {
	_, err := c.roundTrip(ctx, &proto.Request{Op: proto.OpDelete, Ledger: ledger})
	return err
}

// Info is what a bookie says about itself.
type Info struct {
	ID         string
	TotalBytes uint64
	FreeBytes  uint64
	ReadOnly   bool
}

// Info asks the bookie for its id, disk space and read-only state.
func (c *Conn) Info(ctx context.Context) (Info, error) {
	resp, err := c.roundTrip(ctx, &proto.Request{Op: proto.OpInfo})
	if err != nil {
		return Info{}, err
	}
	return Info{ID: string(resp.Payload), TotalBytes: resp.Total, FreeBytes: resp.Free, ReadOnly: resp.ReadOnly}, nil
}

func (c *Conn) roundTrip(ctx context.Context, req *proto.Request) (*proto.Response, error) {
	type result struct {
		resp *proto.Response
		err  error
	}
	ch := make(chan result, 1)
	op, ledger, entry := req.Op, req.Ledger, req.Entry
	err := c.start(ctx, req, 0, func(resp *proto.Response, err error) {
		if err == nil {
			err = c.check(resp, op, ledger, entry)
		}
		ch <- result{resp, err}
	})
	if err != nil {
		return nil, err
	}
	r := <-ch
	return r.resp, r.err
}
