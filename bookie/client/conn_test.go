package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/client"
	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/internal/testcluster"
)

func dial(t *testing.T, addr string, opts client.Options) *client.Conn {
	t.Helper()
	c, err := client.Dial(context.Background(), addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func entry(ledger, id uint64, lac int64, data string) []byte {
	return proto.AppendEntry(nil, ledger, id, lac, uint64(len(data)), []byte(data))
}

func TestConnOperations(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, testcluster.Options{Bookies: 1, Region: "r1"})
	addr := cl.Bookie(0).Addr()
	c := dial(t, addr, client.Options{})
	ctx := context.Background()

	info, err := c.Info(ctx)
	if err != nil || info.ID != cl.Bookie(0).ID() || info.TotalBytes == 0 || info.ReadOnly {
		t.Fatalf("info %+v, %v", info, err)
	}

	const ledger = 11
	for i := range uint64(5) {
		if err := c.Add(ctx, ledger, i, entry(ledger, i, int64(i)-1, fmt.Sprint("entry-", i)), false); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
	raw, err := c.Read(ctx, ledger, 3, false)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := proto.DecodeEntry(raw); err != nil || string(e.Data) != "entry-3" || e.LAC != 2 {
		t.Fatalf("read back %+v, %v", e, err)
	}
	// An add of an existing entry overwrites it.
	if err := c.Add(ctx, ledger, 3, entry(ledger, 3, 2, "again"), false); err != nil {
		t.Fatal(err)
	}
	if raw, _ := c.Read(ctx, ledger, 3, false); !bytes.Equal(raw, entry(ledger, 3, 2, "again")) {
		t.Fatal("overwrite not visible")
	}

	_, err = c.Read(ctx, ledger, 99, false)
	var se *client.StatusError
	if !errors.Is(err, proto.ErrNoEntry) || !errors.As(err, &se) || se.Entry != 99 || se.Addr != addr {
		t.Fatalf("missing entry: %v", err)
	}
	if _, err := c.Read(ctx, 12345, 0, false); !errors.Is(err, proto.ErrNoLedger) {
		t.Fatalf("unknown ledger: %v", err)
	}
	if err := c.Add(ctx, ledger, 7, entry(ledger, 8, 0, "x"), false); !errors.Is(err, proto.ErrBadRequest) {
		t.Fatalf("mismatched header: %v", err)
	}
	if err := c.Add(ctx, ledger, 7, []byte("short"), false); !errors.Is(err, proto.ErrBadRequest) {
		t.Fatalf("undecodable entry: %v", err)
	}

	if lac, err := c.ReadLAC(ctx, ledger, -1, 0); err != nil || lac != 3 {
		t.Fatalf("ReadLAC = %d, %v; want 3", lac, err)
	}
	if _, err := c.ReadLAC(ctx, 999, -1, 0); !errors.Is(err, proto.ErrNoLedger) {
		t.Fatalf("ReadLAC unknown ledger: %v", err)
	}
	lac, err := c.ReadLAC(ctx, ledger, 3, 50*time.Millisecond)
	if !errors.Is(err, proto.ErrTimeout) || lac != 3 {
		t.Fatalf("long poll timeout: %d, %v", lac, err)
	}

	// A long poll answers as soon as a newer LAC arrives.
	type res struct {
		lac int64
		err error
	}
	ch := make(chan res, 1)
	go func() {
		l, err := c.ReadLAC(ctx, ledger, 3, 10*time.Second)
		ch <- res{l, err}
	}()
	testcluster.WaitFor(t, 5*time.Second, func() bool { return c.InFlight() == 1 })
	if err := c.Add(ctx, ledger, 5, entry(ledger, 5, 4, "entry-5"), false); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.err != nil || r.lac != 4 {
			t.Fatalf("long poll = %d, %v; want 4", r.lac, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long poll did not answer")
	}

	// Fencing: plain adds are refused, recovery adds accepted.
	if lac, err := c.Fence(ctx, ledger); err != nil || lac != 4 {
		t.Fatalf("fence = %d, %v", lac, err)
	}
	err = c.Add(ctx, ledger, 6, entry(ledger, 6, 5, "late"), false)
	if !errors.Is(err, proto.ErrFenced) || !errors.As(err, &se) || se.Status != proto.StatusFenced || client.IsBookieFailure(err) {
		t.Fatalf("add on fenced ledger: %v", err)
	}
	if err := c.Add(ctx, ledger, 6, entry(ledger, 6, 5, "recovered"), true); err != nil {
		t.Fatalf("recovery add: %v", err)
	}
	// Fencing an unknown ledger creates it fenced.
	if lac, err := c.Fence(ctx, 4242); err != nil || lac != -1 {
		t.Fatalf("fence unknown = %d, %v", lac, err)
	}
	if err := c.Add(ctx, 4242, 0, entry(4242, 0, -1, "x"), false); !errors.Is(err, proto.ErrFenced) {
		t.Fatalf("add after fencing an unknown ledger: %v", err)
	}
	// Read with the fence flag.
	if err := c.Add(ctx, 77, 0, entry(77, 0, -1, "x"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, 77, 0, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Add(ctx, 77, 1, entry(77, 1, 0, "y"), false); !errors.Is(err, proto.ErrFenced) {
		t.Fatalf("add after fencing read: %v", err)
	}

	if err := c.Delete(ctx, ledger); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, ledger, 0, false); !errors.Is(err, proto.ErrNoLedger) && !errors.Is(err, proto.ErrNoEntry) {
		t.Fatalf("read after delete: %v", err)
	}
	if c.Err() != nil {
		t.Fatalf("connection failed: %v", c.Err())
	}
}

func TestConnPipelining(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, testcluster.Options{Bookies: 1})
	const maxInFlight = 16
	c := dial(t, cl.Bookie(0).Addr(), client.Options{MaxInFlight: maxInFlight})
	ctx := context.Background()
	const n = 2000
	var (
		wg       sync.WaitGroup
		failures atomic.Int32
		peak     atomic.Int32
	)
	// One goroutine issues every add; it blocks whenever 16 are in flight.
	for i := range uint64(n) {
		wg.Add(1)
		c.AddAsync(ctx, 5, i, entry(5, i, int64(i)-1, fmt.Sprintf("payload %d", i)), false, func(err error) {
			if err != nil {
				failures.Add(1)
				t.Error(err)
			}
			wg.Done()
		})
		if f := int32(c.InFlight()); f > peak.Load() {
			peak.Store(f)
		}
	}
	wg.Wait()
	if failures.Load() != 0 {
		t.Fatalf("%d adds failed", failures.Load())
	}
	if p := peak.Load(); p > maxInFlight || p < 2 {
		t.Errorf("peak in flight %d; want 2..%d", p, maxInFlight)
	}
	// Concurrent readers on the same connection get their own answers.
	var rg sync.WaitGroup
	for g := range 8 {
		rg.Go(func() {
			for i := uint64(g); i < n; i += 8 {
				raw, err := c.Read(ctx, 5, i, false)
				if err != nil {
					t.Error(err)
					return
				}
				if e, err := proto.DecodeEntry(raw); err != nil || e.ID != i || string(e.Data) != fmt.Sprintf("payload %d", i) {
					t.Errorf("entry %d: got %+v %v", i, e, err)
					return
				}
			}
		})
	}
	rg.Wait()
}

func TestConnInFlightBound(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, testcluster.Options{Bookies: 1})
	c := dial(t, cl.Bookie(0).Addr(), client.Options{MaxInFlight: 2})
	pollCtx, cancelPolls := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { c.ReadLAC(pollCtx, 1, 100, 30*time.Second) })
	}
	testcluster.WaitFor(t, 5*time.Second, func() bool { return c.InFlight() == 2 })
	// Full: a third request waits for a slot until its ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Info(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("request on a full connection: %v", err)
	}
	if time.Since(start) < 90*time.Millisecond {
		t.Fatal("did not wait for a slot")
	}
	// Abandoning the polls frees their slots.
	cancelPolls()
	wg.Wait()
	if _, err := c.Info(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestConnBookieStops(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, testcluster.Options{Bookies: 1})
	b := cl.Bookie(0)
	c := dial(t, b.Addr(), client.Options{})
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := c.ReadLAC(context.Background(), 1, 100, 2*time.Second)
			errs <- err
		}()
	}
	testcluster.WaitFor(t, 5*time.Second, func() bool { return c.InFlight() == 3 })
	start := time.Now()
	b.Stop()
	for range 3 {
		select {
		case err := <-errs:
			// The stopping bookie answers them (timeout, shutdown) or drops the connection.
			if !errors.Is(err, proto.ErrTimeout) && !errors.Is(err, proto.ErrShutdown) && !errors.Is(err, client.ErrDisconnected) {
				t.Fatalf("pending request on a stopping bookie: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("pending requests did not end")
		}
	}
	testcluster.WaitFor(t, 15*time.Second, func() bool { return c.Err() != nil })
	if !errors.Is(c.Err(), client.ErrDisconnected) {
		t.Fatalf("Err = %v", c.Err())
	}
	if _, err := c.Info(context.Background()); !errors.Is(err, client.ErrDisconnected) || !client.IsBookieFailure(err) {
		t.Fatalf("request on a failed connection: %v", err)
	}
	t.Logf("connection failed %v after the stop began", time.Since(start))
}

func TestPoolRedials(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, testcluster.Options{Bookies: 1})
	b := cl.Bookie(0)
	p := client.NewPool(client.Options{RedialBackoff: 50 * time.Millisecond})
	defer p.Close()
	ctx := context.Background()
	c1, err := p.Get(ctx, b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if c2, _ := p.Get(ctx, b.Addr()); c2 != c1 {
		t.Fatal("pool dialed a second connection to a live bookie")
	}
	b.Stop()
	testcluster.WaitFor(t, 10*time.Second, func() bool { return c1.Err() != nil })
	if _, err := p.Get(ctx, b.Addr()); !errors.Is(err, client.ErrDisconnected) {
		t.Fatalf("Get of a stopped bookie: %v", err)
	}
	b.Start()
	var c3 *client.Conn
	testcluster.WaitFor(t, 10*time.Second, func() bool {
		c3, err = p.Get(ctx, b.Addr())
		return err == nil
	})
	if c3 == c1 {
		t.Fatal("pool returned the failed connection")
	}
	if _, err := c3.Info(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := p.Get(ctx, b.Addr()); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, err := c3.Info(ctx); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("request on a closed pool's connection: %v", err)
	}
}

func TestPoolConcurrentGetSharesOneDial(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, testcluster.Options{Bookies: 1})
	p := client.NewPool(client.Options{})
	defer p.Close()
	conns := make([]*client.Conn, 16)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			c, err := p.Get(context.Background(), cl.Bookie(0).Addr())
			if err != nil {
				t.Error(err)
			}
			conns[i] = c
		})
	}
	wg.Wait()
	for _, c := range conns {
		if c != conns[0] {
			t.Fatal("concurrent Gets dialed more than one connection")
		}
	}
}

// TestConnOverClosedPeer: a connection whose peer has already closed fails
// at once and closes cleanly (its read loop may end before the others
// start).
func TestConnOverClosedPeer(t *testing.T) {
	t.Parallel()
	for range 500 {
		a, b := net.Pipe()
		b.Close()
		c := client.NewConn(a, "closed-peer", client.Options{})
		<-c.Done()
		if err := c.Err(); !errors.Is(err, client.ErrDisconnected) {
			t.Fatalf("err %v, want ErrDisconnected", err)
		}
		c.Close()
	}
}
