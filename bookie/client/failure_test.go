package client_test

// These tests cover the client's own handling of a broken connection, which
// a real bookie cannot be made to produce on demand: a peer that vanishes,
// goes silent or sends garbage. The peer here is the far end of net.Pipe; it
// only reads (so writes do not block) and never answers.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/client"
	"github.com/isobar-mq/isobar/bookie/proto"
)

// silentPeer reads and counts request frames and never answers.
type silentPeer struct {
	nc     net.Conn
	mu     sync.Mutex
	frames int
	done   chan struct{}
}

func newSilentPeer(t *testing.T, opts client.Options) (*client.Conn, *silentPeer) {
	a, b := net.Pipe()
	p := &silentPeer{nc: b, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		br := bufio.NewReader(b)
		for {
			if _, err := proto.ReadFrame(br, proto.DefaultMaxFrameSize, nil); err != nil {
				return
			}
			p.mu.Lock()
			p.frames++
			p.mu.Unlock()
		}
	}()
	c := client.NewConn(a, "pipe", opts)
	t.Cleanup(func() {
		c.Close()
		b.Close()
		<-p.done
	})
	return c, p
}

func (p *silentPeer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frames
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPeerCloseFailsAllPending(t *testing.T) {
	c, p := newSilentPeer(t, client.Options{RequestTimeout: -1})
	const n = 100
	errs := make(chan error, n)
	for i := range uint64(n) {
		c.AddAsync(context.Background(), 1, i, entry(1, i, -1, "x"), false, func(err error) { errs <- err })
	}
	waitUntil(t, func() bool { return p.count() == n })
	start := time.Now()
	p.nc.Close()
	for range n {
		select {
		case err := <-errs:
			if !errors.Is(err, client.ErrDisconnected) {
				t.Fatalf("pending add: %v", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("pending adds not failed promptly")
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("failing pending requests took %v", d)
	}
	if c.InFlight() != 0 {
		t.Fatalf("%d slots still held", c.InFlight())
	}
	<-c.Done()
	if err := c.Add(context.Background(), 1, 0, entry(1, 0, -1, "x"), false); !errors.Is(err, client.ErrDisconnected) {
		t.Fatalf("add on failed connection: %v", err)
	}
}

func TestSilentPeerTimesOut(t *testing.T) {
	c, _ := newSilentPeer(t, client.Options{RequestTimeout: 50 * time.Millisecond})
	start := time.Now()
	err := c.Add(context.Background(), 1, 0, entry(1, 0, -1, "x"), false)
	if !errors.Is(err, client.ErrRequestTimeout) || !client.IsBookieFailure(err) {
		t.Fatalf("add to a silent peer: %v", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 2*time.Second {
		t.Fatalf("timed out after %v", d)
	}
	// A long poll gets its poll timeout on top.
	start = time.Now()
	if _, err := c.ReadLAC(context.Background(), 1, 0, 200*time.Millisecond); !errors.Is(err, client.ErrRequestTimeout) {
		t.Fatalf("long poll: %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("long poll timed out after %v, before its poll timeout", d)
	}
	if c.Err() != nil || c.InFlight() != 0 {
		t.Fatalf("a timeout must not fail the connection: %v, in flight %d", c.Err(), c.InFlight())
	}
}

func TestContextEndsRequest(t *testing.T) {
	c, p := newSilentPeer(t, client.Options{RequestTimeout: -1})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c.Read(ctx, 1, 0, false); errc <- err }()
	waitUntil(t, func() bool { return p.count() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("read: %v", err)
	}
	if c.InFlight() != 0 || c.Err() != nil {
		t.Fatalf("in flight %d, err %v", c.InFlight(), c.Err())
	}
	// An already-ended ctx fails the call without sending.
	if err := c.Add(ctx, 1, 0, entry(1, 0, -1, "x"), false); !errors.Is(err, context.Canceled) {
		t.Fatalf("add with ended ctx: %v", err)
	}
}

func TestGarbageFailsConnection(t *testing.T) {
	a, b := net.Pipe()
	c := client.NewConn(a, "pipe", client.Options{})
	defer c.Close()
	errc := make(chan error, 1)
	go func() { _, err := c.Info(context.Background()); errc <- err }()
	go func() {
		// Read the request, answer with a frame of an unknown version.
		proto.ReadFrame(b, proto.DefaultMaxFrameSize, nil)
		b.Write([]byte{0, 0, 0, 12, 9, 0x86, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	}()
	if err := <-errc; !errors.Is(err, client.ErrDisconnected) {
		t.Fatalf("info: %v", err)
	}
	b.Close()
}

func TestCloseFailsPending(t *testing.T) {
	c, p := newSilentPeer(t, client.Options{})
	errc := make(chan error, 1)
	c.AddAsync(context.Background(), 1, 0, entry(1, 0, -1, "x"), false, func(err error) { errc <- err })
	waitUntil(t, func() bool { return p.count() == 1 })
	c.Close()
	if err := <-errc; !errors.Is(err, client.ErrClosed) {
		t.Fatalf("pending add after Close: %v", err)
	}
	if err := c.Add(context.Background(), 1, 0, entry(1, 0, -1, "x"), false); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("add after Close: %v", err)
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 20 {
		a, b := net.Pipe()
		c := client.NewConn(a, "pipe", client.Options{RequestTimeout: time.Second})
		errc := make(chan error, 1)
		c.AddAsync(context.Background(), 1, 0, entry(1, 0, -1, "x"), false, func(err error) { errc <- err })
		go io.Copy(io.Discard, b)
		c.Close()
		if err := <-errc; !errors.Is(err, client.ErrClosed) {
			t.Fatal(err)
		}
		b.Close()
	}
	waitUntil(t, func() bool { return runtime.NumGoroutine() <= before })
}
