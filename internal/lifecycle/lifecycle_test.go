package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// part is a component that records what happens to it.
type part struct {
	name     string
	log      *[]string
	mu       *sync.Mutex
	startErr error
	block    chan struct{} // Shutdown waits for it (or its ctx)
	ready    error
}

func (p *part) record(s string) {
	p.mu.Lock()
	*p.log = append(*p.log, p.name+" "+s)
	p.mu.Unlock()
}

func (p *part) Name() string { return p.name }
func (p *part) Start(context.Context) error {
	if p.startErr != nil {
		p.record("start failed")
		return p.startErr
	}
	p.record("start")
	return nil
}
func (p *part) Shutdown(ctx context.Context) error {
	p.record("shutdown")
	if p.block != nil {
		select {
		case <-p.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
func (p *part) Abort()                      { p.record("abort") }
func (p *part) Ready(context.Context) error { return p.ready }

func parts(names ...string) ([]*part, *[]string) {
	var log []string
	mu := &sync.Mutex{}
	var out []*part
	for _, n := range names {
		out = append(out, &part{name: n, log: &log, mu: mu})
	}
	return out, &log
}

func group(ps []*part) *Group {
	g := NewGroup("g")
	for _, p := range ps {
		g.Add(p)
	}
	return g
}

// A group starts its parts in order and stops them in reverse; when one
// fails to start, those already started are shut down and the error names
// the part.
func TestGroupOrderAndStartFailure(t *testing.T) {
	ps, log := parts("a", "b", "c")
	g := group(ps)
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(*log, ", "); got != "a start, b start, c start, c shutdown, b shutdown, a shutdown" {
		t.Fatalf("got %s", got)
	}

	ps, log = parts("a", "b", "c")
	ps[2].startErr = errors.New("boom")
	err := group(ps).Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "c: boom") {
		t.Fatalf("err %v", err)
	}
	if got := strings.Join(*log, ", "); got != "a start, b start, c start failed, b shutdown, a shutdown" {
		t.Fatalf("got %s", got)
	}

	ps, _ = parts("a", "b")
	ps[1].ready = errors.New("not registered")
	g = group(ps)
	g.Start(context.Background())
	if err := g.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "b: not registered") {
		t.Fatalf("ready: %v", err)
	}
}

func testRunner(sigs chan os.Signal, timeout time.Duration) (*Runner, string) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	return &Runner{
		Logger: slog.New(slog.DiscardHandler), HTTPAddr: addr, Signals: sigs, ShutdownTimeout: timeout,
		Health: NewHealth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "metric 1\n") })),
	}, "http://" + addr
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The runner serves health while the component runs, drains it on the
// first signal (readiness goes first) and aborts it on a second one.
func TestRunnerSignals(t *testing.T) {
	ps, log := parts("a", "b")
	ps[0].block = make(chan struct{}) // a drains until released
	sigs := make(chan os.Signal, 4)
	r, base := testRunner(sigs, time.Minute)
	ready := make(chan struct{})
	r.Ready = ready
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background(), group(ps)) }()
	<-ready
	if code, body := get(t, base+"/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("readyz %d %q", code, body)
	}
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	if code, body := get(t, base+"/metrics"); code != 200 || body != "metric 1\n" {
		t.Fatalf("metrics %d %q", code, body)
	}
	sigs <- syscall.SIGTERM
	waitFor(t, "b shut down", func() bool {
		ps[0].mu.Lock()
		defer ps[0].mu.Unlock()
		return strings.Contains(strings.Join(*log, ","), "a shutdown")
	})
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "shutting down") {
		t.Fatalf("readyz while draining: %d %q", code, body)
	}
	sigs <- syscall.SIGTERM // within DuplicateSignalWindow: the same keypress
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("a signal right after the first ended the drain: %v", err)
	default:
	}
	time.Sleep(DuplicateSignalWindow)
	sigs <- syscall.SIGINT
	if err := <-done; !errors.Is(err, ErrAborted) {
		t.Fatalf("second signal: %v, want ErrAborted", err)
	}
	if got := strings.Join(*log, ", "); got != "a start, b start, b shutdown, a shutdown, a abort" {
		t.Fatalf("got %s", got)
	}
}

// A drain that overruns ShutdownTimeout is aborted; one that finishes
// returns nil; a start failure is returned as is.
func TestRunnerDeadlineAndStartFailure(t *testing.T) {
	ps, log := parts("a")
	ps[0].block = make(chan struct{})
	sigs := make(chan os.Signal, 1)
	r, _ := testRunner(sigs, 200*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	r.Ready = ready
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, group(ps)) }()
	<-ready
	cancel()
	if err := <-done; !errors.Is(err, ErrAborted) {
		t.Fatalf("overrun drain: %v", err)
	}
	if got := strings.Join(*log, ", "); got != "a start, a shutdown, a abort" {
		t.Fatalf("got %s", got)
	}

	ps, _ = parts("a")
	r, _ = testRunner(make(chan os.Signal), time.Minute)
	ctx, cancel = context.WithCancel(context.Background())
	ready = make(chan struct{})
	r.Ready = ready
	go func() { done <- r.Run(ctx, group(ps)) }()
	<-ready
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("clean drain: %v", err)
	}

	ps, _ = parts("a")
	ps[0].startErr = errors.New("port in use")
	r, _ = testRunner(make(chan os.Signal), time.Minute)
	if err := r.Run(context.Background(), group(ps)); err == nil || !strings.Contains(err.Error(), "port in use") {
		t.Fatalf("start failure: %v", err)
	}
}

// startsUntilStopped is a component whose start waits for its context.
type startsUntilStopped struct{ started chan struct{} }

func (startsUntilStopped) Name() string { return "slow" }
func (c startsUntilStopped) Start(ctx context.Context) error {
	close(c.started)
	<-ctx.Done()
	return fmt.Errorf("registering: %w", ctx.Err())
}
func (startsUntilStopped) Shutdown(context.Context) error { return nil }
func (startsUntilStopped) Abort()                         {}

// A context that ends while the component starts stops the run cleanly,
// as a signal does: the start's error is not a failure.
func TestRunnerContextEndsWhileStarting(t *testing.T) {
	r, _ := testRunner(make(chan os.Signal), time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	c := startsUntilStopped{started: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, c) }()
	<-c.started
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stopped while starting: %v, want nil", err)
	}
}

// Retry stops at the first success, gives up after its attempts with the
// last error, and stops when its context ends.
func TestRetry(t *testing.T) {
	n := 0
	err := Retry(context.Background(), nil, "x", 5, time.Millisecond, func(context.Context) error {
		n++
		if n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("err %v after %d", err, n)
	}
	err = Retry(context.Background(), nil, "x", 3, time.Millisecond, func(context.Context) error { return errors.New("never") })
	if err == nil || !strings.Contains(err.Error(), "gave up after 3 attempts: never") {
		t.Fatalf("err %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = Retry(ctx, nil, "x", 1000, 20*time.Millisecond, func(context.Context) error { return errors.New("down") })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
}
