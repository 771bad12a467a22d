package client

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Pool shares one connection per bookie address. A connection that failed is
// replaced by a new dial on the next Get; after a failed dial, Get answers
// with that error for Options.RedialBackoff before dialing again, so a dead
// bookie costs its callers nothing but the first dial.
type Pool struct {
	opts Options

	mu      sync.Mutex
	closed  bool
	slots   map[string]*poolSlot
	retired []*Conn // failed connections whose goroutines may still be ending
}

type poolSlot struct {
	conn     *Conn
	dialing  chan struct{} // closed when the dial in progress ends; nil when none
	err      error         // last dial error
	failedAt time.Time
}

// NewPool makes an empty pool; connections are dialed on first use.
func NewPool(opts Options) *Pool {
	return &Pool{opts: opts.withDefaults(), slots: make(map[string]*poolSlot)}
}

// Get returns a live connection to addr, dialing one if needed. Concurrent
// callers for the same address share one dial.
func (p *Pool) Get(ctx context.Context, addr string) (*Conn, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, fmt.Errorf("bookie %s: pool: %w", addr, ErrClosed)
		}
		s := p.slots[addr]
		if s == nil {
			s = &poolSlot{}
			p.slots[addr] = s
		}
		if s.conn != nil && s.conn.Err() == nil {
			c := s.conn
			p.mu.Unlock()
			return c, nil
		}
		if s.dialing != nil {
			ch := s.dialing
			p.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("bookie %s: waiting for dial: %w", addr, ctx.Err())
			}
		}
		if s.err != nil && time.Since(s.failedAt) < p.opts.RedialBackoff {
			err := s.err
			p.mu.Unlock()
			return nil, err
		}
		if s.conn != nil {
			p.retireLocked(s.conn)
			s.conn = nil
		}
		ch := make(chan struct{})
		s.dialing = ch
		p.mu.Unlock()

		conn, err := Dial(ctx, addr, p.opts)

		p.mu.Lock()
		s.dialing = nil
		close(ch)
		if err != nil {
			if ctx.Err() == nil {
				s.err, s.failedAt = err, time.Now()
			}
			p.mu.Unlock()
			return nil, err
		}
		if p.closed {
			p.mu.Unlock()
			conn.Close()
			return nil, fmt.Errorf("bookie %s: pool: %w", addr, ErrClosed)
		}
		s.conn, s.err = conn, nil
		p.mu.Unlock()
		return conn, nil
	}
}

// Close closes every connection; pending requests fail with ErrClosed and
// later Gets fail.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	var conns []*Conn
	for _, s := range p.slots {
		if s.conn != nil {
			conns = append(conns, s.conn)
		}
	}
	conns = append(conns, p.retired...)
	p.slots, p.retired = nil, nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	return nil
}

// retireLocked keeps a failed connection until its goroutines have ended, so
// Close can wait for them; ended ones are forgotten.
func (p *Pool) retireLocked(c *Conn) {
	keep := p.retired[:0]
	for _, r := range p.retired {
		select {
		case <-r.exited:
		default:
			keep = append(keep, r)
		}
	}
	p.retired = append(keep, c)
}
