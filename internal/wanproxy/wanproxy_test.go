package wanproxy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// server is a TCP server on 127.0.0.1 for the proxy to forward to.
type server struct {
	ln      net.Listener
	accepts atomic.Int64
	ends    chan error // how each handled connection ended
	wg      sync.WaitGroup
	mu      sync.Mutex
	open    map[net.Conn]bool
}

// startServer runs handle for every accepted connection until the test
// ends; handle's result is sent to ends.
func startServer(t *testing.T, handle func(net.Conn) error) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln, ends: make(chan error, 64), open: map[net.Conn]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepts.Add(1)
			s.mu.Lock()
			s.open[c] = true
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				err := handle(c)
				c.Close()
				s.mu.Lock()
				delete(s.open, c)
				s.mu.Unlock()
				select {
				case s.ends <- err:
				default:
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.open {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *server) addr() string { return s.ln.Addr().String() }

// echo writes back everything it reads.
func echo(c net.Conn) error {
	_, err := io.Copy(c, c)
	return err
}

func newLink(t *testing.T, target string) *Link {
	t.Helper()
	l, err := Listen("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ping sends msg and reads it back from an echo server.
func ping(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	if string(buf) != msg {
		t.Fatalf("echo: got %q, want %q", buf, msg)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func isEOFOrReset(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// readEnd reads from c until an error and returns it, failing on a
// timeout.
func readEnd(t *testing.T, c net.Conn) error {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, c)
	if err == nil {
		err = io.EOF
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("connection not closed")
	}
	return err
}

// expectSilence checks that reading c for 300 ms yields neither a byte nor
// an end of stream.
func expectSilence(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	n, err := c.Read(make([]byte, 64))
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, err %v; want a timeout", n, err)
	}
}

func TestEchoIntact(t *testing.T) {
	t.Parallel()
	srv := startServer(t, echo)
	l := newLink(t, srv.addr())
	c := dial(t, l.Addr())

	const size = 8 << 20
	data := make([]byte, size)
	rand.Read(data)
	werr := make(chan error, 1)
	go func() {
		// Uneven writes exercise chunking.
		rest := data
		for i := 1; len(rest) > 0; i++ {
			n := min(len(rest), 1+(i*7919)%(64<<10))
			if _, err := c.Write(rest[:n]); err != nil {
				werr <- err
				return
			}
			rest = rest[n:]
		}
		werr <- nil
	}()
	got := make([]byte, size)
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("echoed data differs from the data sent")
	}
	// The link counts a chunk after its write returns, so the client may
	// read the last bytes before they are counted: await the counters.
	waitFor(t, "every byte counted", func() bool {
		st := l.Stats()
		return st.ToTarget == size && st.ToClient == size
	})
	if st := l.Stats(); st.ToTarget != size || st.ToClient != size || st.Accepted != 1 || st.Open != 1 {
		t.Fatalf("stats %+v", st)
	}
	c.Close()
	waitFor(t, "connection to end", func() bool { return l.Stats().Open == 0 })
}

func TestHalfCloseForwardedAfterQueuedBytes(t *testing.T) {
	t.Parallel()
	srv := startServer(t, echo)
	l := newLink(t, srv.addr())
	l.SetLatency(20 * time.Millisecond)
	c := dial(t, l.Addr())

	data := make([]byte, 256<<10)
	rand.Read(data)
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes back, want the %d sent", len(got), len(data))
	}
	waitFor(t, "connection to end", func() bool { return l.Stats().Open == 0 })
}

func TestLatency(t *testing.T) {
	t.Parallel()
	srv := startServer(t, echo)
	l := newLink(t, srv.addr())
	c := dial(t, l.Addr())
	ping(t, c, "warm")

	// Applies to an existing connection...
	l.SetLatency(50 * time.Millisecond)
	start := time.Now()
	ping(t, c, "ping")
	if rtt := time.Since(start); rtt < 100*time.Millisecond {
		t.Fatalf("round trip on an existing connection took %v, want >= 100ms", rtt)
	}
	// ...and to a new one.
	start = time.Now()
	ping(t, dial(t, l.Addr()), "ping")
	if rtt := time.Since(start); rtt < 100*time.Millisecond {
		t.Fatalf("round trip on a new connection took %v, want >= 100ms", rtt)
	}
}

// sink counts the bytes it reads until EOF and sends the count.
func sink(counts chan<- int64) func(net.Conn) error {
	return func(c net.Conn) error {
		n, err := io.Copy(io.Discard, c)
		counts <- n
		return err
	}
}

// sendAll writes n random bytes to c and half-closes it.
func sendAll(c net.Conn, n int) error {
	buf := make([]byte, n)
	rand.Read(buf)
	if _, err := c.Write(buf); err != nil {
		return err
	}
	return c.(*net.TCPConn).CloseWrite()
}

func TestBandwidth(t *testing.T) {
	t.Parallel()
	counts := make(chan int64, 1)
	srv := startServer(t, sink(counts))
	l := newLink(t, srv.addr())
	l.SetBandwidth(1 << 20)
	c := dial(t, l.Addr())

	start := time.Now()
	if err := sendAll(c, 2<<20); err != nil {
		t.Fatal(err)
	}
	if n := <-counts; n != 2<<20 {
		t.Fatalf("sink got %d bytes, want %d", n, 2<<20)
	}
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Fatalf("2 MiB at 1 MiB/s took %v, want >= 1.5s", d)
	}
}

func TestBandwidthSharedByConnections(t *testing.T) {
	t.Parallel()
	counts := make(chan int64, 2)
	srv := startServer(t, sink(counts))
	l := newLink(t, srv.addr())
	l.SetBandwidth(1 << 20)
	c1, c2 := dial(t, l.Addr()), dial(t, l.Addr())

	start := time.Now()
	errs := make(chan error, 2)
	for _, c := range []net.Conn{c1, c2} {
		go func() { errs <- sendAll(c, 1<<20) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if n := <-counts; n != 1<<20 {
			t.Fatalf("sink got %d bytes, want %d", n, 1<<20)
		}
	}
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Fatalf("2 × 1 MiB at 1 MiB/s took %v, want >= 1.5s", d)
	}
}

func TestLossDelaysAndKeepsOrder(t *testing.T) {
	t.Parallel()
	srv := startServer(t, echo)
	l := newLink(t, srv.addr())
	c := dial(t, l.Addr())
	ping(t, c, "warm")

	// Every chunk lost: each direction waits a retransmission delay.
	l.SetLoss(1)
	start := time.Now()
	ping(t, c, "ping")
	if rtt := time.Since(start); rtt < 2*minRetransmit {
		t.Fatalf("round trip with every chunk lost took %v, want >= %v", rtt, 2*minRetransmit)
	}

	// Some chunks lost: stalls, but nothing reordered.
	l.SetLoss(0.3)
	data := make([]byte, 128<<10)
	rand.Read(data)
	werr := make(chan error, 1)
	go func() {
		for i := 0; i < len(data); i += 1 << 10 {
			if _, err := c.Write(data[i : i+1<<10]); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	got := make([]byte, len(data))
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("data reordered or altered under loss")
	}
}

func TestCut(t *testing.T) {
	t.Parallel()
	srv := startServer(t, echo)
	l := newLink(t, srv.addr())
	c := dial(t, l.Addr())
	ping(t, c, "ping")

	l.Cut()
	if s := l.State(); s != StateCut {
		t.Fatalf("state %v, want cut", s)
	}
	// Both ends of the open connection see it end.
	if err := readEnd(t, c); !isEOFOrReset(err) {
		t.Fatalf("client read: %v, want EOF or reset", err)
	}
	select {
	case err := <-srv.ends:
		if err != nil && !isEOFOrReset(err) {
			t.Fatalf("target side ended with %v, want EOF or reset", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("target side of the connection not closed")
	}

	// A new connection is accepted, then ended at once, never forwarded.
	accepts := srv.accepts.Load()
	c2 := dial(t, l.Addr())
	if err := readEnd(t, c2); !isEOFOrReset(err) {
		t.Fatalf("new connection read: %v, want EOF or reset", err)
	}
	if n := srv.accepts.Load(); n != accepts {
		t.Fatalf("target accepted %d connections during the cut", n-accepts)
	}
	waitFor(t, "no open connection", func() bool { return l.Stats().Open == 0 })
	if st := l.Stats(); st.Accepted != 2 {
		t.Fatalf("stats %+v, want 2 accepted", st)
	}

	l.Up()
	if s := l.State(); s != StateUp {
		t.Fatalf("state %v, want up", s)
	}
	ping(t, dial(t, l.Addr()), "again")
}

func TestBlackhole(t *testing.T) {
	t.Parallel()
	srv := startServer(t, echo)
	l := newLink(t, srv.addr())
	c := dial(t, l.Addr())
	ping(t, c, "warm")

	l.Blackhole()
	if s := l.State(); s != StateBlackhole {
		t.Fatalf("state %v, want blackhole", s)
	}
	// The open connection stays open but nothing moves.
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatal(err)
	}
	expectSilence(t, c)

	// A new connection is accepted but not dialled upstream.
	accepts := srv.accepts.Load()
	c2 := dial(t, l.Addr())
	if _, err := io.WriteString(c2, "hello"); err != nil {
		t.Fatal(err)
	}
	expectSilence(t, c2)
	if n := srv.accepts.Load(); n != accepts {
		t.Fatalf("target accepted %d connections during the black hole", n-accepts)
	}
	if st := l.Stats(); st.Open != 2 {
		t.Fatalf("stats %+v, want 2 open", st)
	}

	// Up: both connections resume, nothing lost.
	l.Up()
	buf := make([]byte, 5)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, buf[:4]); err != nil || string(buf[:4]) != "ping" {
		t.Fatalf("held connection after Up: %q, %v", buf[:4], err)
	}
	c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c2, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("held new connection after Up: %q, %v", buf, err)
	}
	ping(t, c, "more")
	ping(t, c2, "more")
}

func TestCutDuringBlackholeResetsHeldConnections(t *testing.T) {
	t.Parallel()
	srv := startServer(t, echo)
	l := newLink(t, srv.addr())
	c := dial(t, l.Addr())
	ping(t, c, "warm")

	l.Blackhole()
	c2 := dial(t, l.Addr())
	waitFor(t, "held connection", func() bool { return l.Stats().Open == 2 })
	l.Cut()
	for _, conn := range []net.Conn{c, c2} {
		if err := readEnd(t, conn); !isEOFOrReset(err) {
			t.Fatalf("read: %v, want EOF or reset", err)
		}
	}
	waitFor(t, "no open connection", func() bool { return l.Stats().Open == 0 })
}

func TestUnreachableTarget(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close()
	l := newLink(t, target)
	if err := readEnd(t, dial(t, l.Addr())); !isEOFOrReset(err) {
		t.Fatalf("read: %v, want EOF or reset", err)
	}
	waitFor(t, "no open connection", func() bool { return l.Stats().Open == 0 })
}

func TestSettingsClamped(t *testing.T) {
	t.Parallel()
	srv := startServer(t, echo)
	l := newLink(t, srv.addr())
	l.SetLatency(-time.Second)
	l.SetBandwidth(-1)
	l.SetLoss(-0.5)
	ping(t, dial(t, l.Addr()), "ping")
	if l.Target() != srv.addr() {
		t.Fatalf("Target() = %q, want %q", l.Target(), srv.addr())
	}
	for s, want := range map[State]string{StateUp: "up", StateCut: "cut", StateBlackhole: "blackhole"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(s), s.String(), want)
		}
	}
}

// TestCloseLeavesNoGoroutines is not parallel: it counts the goroutines of
// the whole process.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	srv := startServer(t, echo)
	baseline := runtime.NumGoroutine()

	l, err := Listen("127.0.0.1:0", srv.addr())
	if err != nil {
		t.Fatal(err)
	}
	l.SetLatency(10 * time.Millisecond)
	l.SetBandwidth(256 << 10)
	l.SetLoss(0.1)

	idle := dial(t, l.Addr())
	ping(t, idle, "ping")

	// A connection in the middle of a transfer it never reads back.
	busy := dial(t, l.Addr())
	wrote := make(chan error, 1)
	go func() {
		_, err := busy.Write(make([]byte, 8<<20))
		wrote <- err
	}()
	waitFor(t, "transfer to start", func() bool { return l.Stats().ToTarget > 0 })

	// A connection held by a black hole.
	l.Blackhole()
	dial(t, l.Addr())
	waitFor(t, "3 open connections", func() bool { return l.Stats().Open == 3 })

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if st := l.Stats(); st.Open != 0 {
		t.Fatalf("stats after Close %+v, want 0 open", st)
	}
	<-wrote // the writer ends, one way or the other
	if _, err := net.Dial("tcp", l.Addr()); err == nil {
		t.Fatal("closed link still accepts connections")
	}
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= baseline })
}
