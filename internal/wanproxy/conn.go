package wanproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// conn is one proxied connection: the accepted client connection and, once
// dialled, the upstream connection to the target.
type conn struct {
	link   *Link
	client net.Conn
	ctx    context.Context // cancelled on teardown; bounds the dial
	cancel context.CancelFunc
	done   chan struct{} // closed on teardown
	halves atomic.Int32  // directions whose EOF has been forwarded

	once     sync.Once
	mu       sync.Mutex
	dead     bool
	upstream net.Conn
}

func newConn(l *Link, client net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{link: l, client: client, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// run holds the connection while the link is a black hole, dials the
// target, then starts the two directions.
func (c *conn) run() {
	l := c.link
	defer l.wg.Done()
	for {
		v := l.view()
		if v.state == StateUp {
			break
		}
		if v.state == StateCut {
			c.teardown(true)
			return
		}
		select {
		case <-v.changed:
		case <-c.done:
			return
		}
	}
	d := net.Dialer{Timeout: dialTimeout}
	up, err := d.DialContext(c.ctx, "tcp", l.target)
	if err != nil {
		// The client sees its connection end (EOF), as for a cut.
		c.teardown(false)
		return
	}
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		resetConn(up)
		return
	}
	c.upstream = up
	c.mu.Unlock()

	for dir, ends := range [2][2]net.Conn{toTarget: {c.client, up}, toClient: {up, c.client}} {
		p := &pipe{
			c:     c,
			dir:   dir,
			src:   ends[0],
			dst:   ends[1],
			queue: make(chan item, maxQueueItems),
			space: make(chan struct{}, 1),
		}
		l.wg.Add(2)
		go p.read()
		go p.write()
	}
}

// teardown closes both ends of the connection, once; with reset, the peers
// get a TCP reset instead of an orderly close.
func (c *conn) teardown(reset bool) {
	c.once.Do(func() {
		c.cancel()
		c.mu.Lock()
		c.dead = true
		up := c.upstream
		c.mu.Unlock()
		for _, nc := range []net.Conn{c.client, up} {
			if nc == nil {
				continue
			}
			if reset {
				resetConn(nc)
			} else {
				nc.Close()
			}
		}
		close(c.done)
		c.link.mu.Lock()
		delete(c.link.conns, c)
		c.link.mu.Unlock()
	})
}

// resetConn closes nc so that its peer gets a reset (RST), not a FIN.
func resetConn(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	nc.Close()
}

// item is one entry of a direction's queue: a chunk of data, or the end of
// the stream (EOF when err is nil and eof is set, a failure otherwise).
type item struct {
	data   []byte
	readAt time.Time
	extra  time.Duration // retransmission delay of a "lost" chunk
	eof    bool
	err    error
}

// pipe is one direction of a connection: read copies chunks from src into
// queue, write delivers them to dst when due.
type pipe struct {
	c        *conn
	dir      int
	src, dst net.Conn
	queue    chan item
	inflight atomic.Int64  // bytes queued and not yet written
	space    chan struct{} // signalled when inflight decreases
}

func (p *pipe) read() {
	defer p.c.link.wg.Done()
	buf := make([]byte, chunkSize)
	for {
		n, err := p.src.Read(buf)
		if n > 0 {
			it := item{data: append([]byte(nil), buf[:n]...), readAt: time.Now(), extra: p.c.link.lossDelay()}
			if !p.acquire(n) || !p.enqueue(it) {
				return
			}
		}
		if err != nil {
			end := item{readAt: time.Now()}
			if errors.Is(err, io.EOF) {
				end.eof = true
			} else {
				end.err = err
			}
			p.enqueue(end)
			return
		}
	}
}

// acquire waits until n more bytes fit in the queue's budget. It returns
// false if the connection was torn down.
func (p *pipe) acquire(n int) bool {
	// Only this goroutine adds to inflight, so check-then-add is safe.
	for q := p.inflight.Load(); q > 0 && q+int64(n) > maxQueueBytes; q = p.inflight.Load() {
		select {
		case <-p.space:
		case <-p.c.done:
			return false
		}
	}
	p.inflight.Add(int64(n))
	return true
}

func (p *pipe) release(n int) {
	p.inflight.Add(-int64(n))
	select {
	case p.space <- struct{}{}:
	default:
	}
}

func (p *pipe) enqueue(it item) bool {
	select {
	case p.queue <- it:
		return true
	case <-p.c.done:
		return false
	}
}

func (p *pipe) write() {
	defer p.c.link.wg.Done()
	for {
		var it item
		select {
		case it = <-p.queue:
		case <-p.c.done:
			return
		}
		if !p.awaitDue(it) {
			return
		}
		switch {
		case it.err != nil:
			// The source failed (reset): pass the failure on.
			p.c.teardown(true)
			return
		case it.eof:
			if cw, ok := p.dst.(interface{ CloseWrite() error }); ok {
				if err := cw.CloseWrite(); err != nil {
					p.c.teardown(true)
					return
				}
			}
			if p.c.halves.Add(1) == 2 {
				p.c.teardown(false)
			}
			return
		}
		if !p.send(it.data) {
			return
		}
	}
}

// awaitDue waits until the link is not a black hole and it is due: read
// time plus the current latency plus its loss delay. It returns false if
// the connection was torn down.
func (p *pipe) awaitDue(it item) bool {
	for {
		v := p.c.link.view()
		var t *time.Timer
		var timer <-chan time.Time
		if v.state == StateUp {
			wait := time.Until(it.readAt.Add(v.latency + it.extra))
			if wait <= 0 {
				return true
			}
			t = time.NewTimer(wait)
			timer = t.C
		}
		// Not due yet, or a black hole, or cut (a cut tears the
		// connection down): wait for the time or a change.
		select {
		case <-timer:
		case <-v.changed:
		case <-p.c.done:
		}
		if t != nil {
			t.Stop()
		}
		select {
		case <-p.c.done:
			return false
		default:
		}
	}
}

// send writes data to dst, paced by the link's bandwidth in this direction,
// stopping while the link is a black hole. It returns false if the
// connection was torn down.
func (p *pipe) send(data []byte) bool {
	l := p.c.link
	for len(data) > 0 {
		if !p.awaitUp() {
			return false
		}
		n, at, gen := l.reserve(p.dir, len(data))
		if !p.awaitSlot(at, gen) {
			continue // became a black hole: wait and book again
		}
		select {
		case <-p.c.done:
			return false
		default:
		}
		if _, err := p.dst.Write(data[:n]); err != nil {
			p.c.teardown(true)
			return false
		}
		l.addForwarded(p.dir, n)
		p.release(n)
		data = data[n:]
	}
	return true
}

// awaitUp waits while the link is not up. It returns false if the
// connection was torn down.
func (p *pipe) awaitUp() bool {
	for {
		v := p.c.link.view()
		if v.state == StateUp {
			return true
		}
		select {
		case <-v.changed:
		case <-p.c.done:
			return false
		}
	}
}

// awaitSlot waits until at, the time booked for the next piece. It returns
// true when the piece may be written now: the time came, the bandwidth
// changed (the booking is void) or the connection was torn down (send
// notices); false when the link stopped being up.
func (p *pipe) awaitSlot(at time.Time, gen uint64) bool {
	if at.IsZero() {
		return true
	}
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	for {
		v := p.c.link.view()
		if v.state != StateUp {
			return false
		}
		if v.bwGen != gen {
			return true
		}
		select {
		case <-t.C:
			return true
		case <-v.changed:
		case <-p.c.done:
			return true
		}
	}
}
