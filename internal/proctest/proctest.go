// Package proctest runs Isobar as real OS processes of the built isobar
// binary, for multi-process tests: it builds the binary once, writes each
// process's configuration file (the region.File shape), starts processes
// on free loopback ports, waits for their /readyz, and stops them with
// SIGTERM (a drain) or SIGKILL (a crash). Logs go to a file per process,
// printed when a test fails.
package proctest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary builds ./cmd/isobar once per test binary and returns its path.
// It skips the test when the go command is not available.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("go command not found: %w", err)
			return
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "isobar-proctest-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "isobar")
		cmd := exec.Command(goBin, "build", "-o", buildPath, "./cmd/isobar")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/isobar: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		if errors.Is(buildErr, exec.ErrNotFound) {
			t.Skipf("multi-process test: %v", buildErr)
		}
		t.Fatal(buildErr)
	}
	return buildPath
}

// FreePort returns a loopback port nothing listens on now, below the
// kernel's ephemeral range (so the outgoing connections of the processes
// under test, whose source ports come from that range, cannot take it
// before the process that is to listen on it starts) and never handed out
// before in this test binary.
func FreePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := portLow + rand.IntN(portHigh-portLow)
		if portsGiven[p] {
			continue
		}
		ln, err := net.Listen("tcp", Addr(p))
		if err != nil {
			continue
		}
		ln.Close()
		portsGiven[p] = true
		return p
	}
	t.Fatal("no free port")
	return 0
}

// The ports FreePort hands out: [portLow, portHigh), under Linux's default
// ephemeral range (32768-60999).
const (
	portLow  = 20000
	portHigh = 32000
)

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// Addr is 127.0.0.1:port.
func Addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// Proc is one process of the binary: a role command with its
// configuration file. It can be stopped and started again with the same
// arguments.
type Proc struct {
	t       testing.TB
	bin     string
	Name    string
	args    []string
	env     []string
	dir     string
	logPath string
	// ReadyURL is polled by WaitReady (a /readyz URL); empty: the
	// process counts as ready once it runs.
	ReadyURL string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the last run's exit error
}

// New prepares process name running `isobar <args...> --config <file>`
// where file holds config (marshalled as YAML; nil: no file). It does not
// start it.
func New(t testing.TB, bin, dir, name string, config map[string]any, args ...string) *Proc {
	t.Helper()
	pdir := filepath.Join(dir, name)
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &Proc{t: t, bin: bin, Name: name, dir: pdir, logPath: filepath.Join(pdir, "log")}
	if config != nil {
		raw, err := yaml.Marshal(config)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(pdir, "isobar.yaml")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	p.args = args
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			p.dumpLog()
		}
	})
	return p
}

// Dir is the process's own directory (its configuration and log).
func (p *Proc) Dir() string { return p.dir }

// SetEnv adds environment variables (KEY=value) for the next starts.
func (p *Proc) SetEnv(kv ...string) { p.env = append(p.env, kv...) }

// Start starts the process (it must not be running).
func (p *Proc) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		p.t.Fatalf("%s: already running", p.Name)
	}
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	fmt.Fprintf(log, "==== start %s %v\n", time.Now().Format(time.RFC3339Nano), p.args)
	cmd := exec.Command(p.bin, append([]string{"--log-level", "info"}, p.args...)...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		p.t.Fatalf("%s: start: %v", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		log.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
}

// Running reports whether the process runs.
func (p *Proc) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// WaitReady waits until ReadyURL answers 200 (or, without one, nothing),
// failing the test after timeout or when the process exits.
func (p *Proc) WaitReady(timeout time.Duration) {
	p.t.Helper()
	if err := p.AwaitReady(timeout); err != nil {
		p.t.Fatal(err)
	}
}

// AwaitReady is WaitReady returning the error.
func (p *Proc) AwaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if !p.Running() {
			return fmt.Errorf("%s exited (%v) before it was ready; log:\n%s", p.Name, p.ExitErr(), p.Tail(40))
		}
		if p.ReadyURL == "" || Ready(p.ReadyURL) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v (%s); log:\n%s", p.Name, timeout, p.ReadyURL, p.Tail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Ready reports whether url answers 200.
func Ready(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Kill stops the process with SIGKILL (a crash) and waits for it. It is a
// no-op when the process does not run.
func (p *Proc) Kill() {
	p.signal(syscall.SIGKILL)
	p.wait(time.Minute)
}

// Term sends SIGTERM (a graceful drain) and waits up to timeout for the
// process to exit; it returns the exit error (nil: status 0).
func (p *Proc) Term(timeout time.Duration) error {
	p.t.Helper()
	p.signal(syscall.SIGTERM)
	if !p.wait(timeout) {
		p.Kill()
		return fmt.Errorf("%s did not exit within %v of SIGTERM", p.Name, timeout)
	}
	return p.ExitErr()
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) { p.signal(sig) }

func (p *Proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		cmd.Process.Signal(sig)
	}
}

// wait waits for the process to exit, up to timeout; true when it did.
func (p *Proc) wait(timeout time.Duration) bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
	case <-time.After(timeout):
		return false
	}
	p.mu.Lock()
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	return true
}

// Wait waits for the process to exit on its own (a bad start) and
// returns its exit code, failing the test after timeout.
func (p *Proc) Wait(timeout time.Duration) int {
	p.t.Helper()
	if !p.wait(timeout) {
		p.t.Fatalf("%s still runs after %v", p.Name, timeout)
	}
	return ExitCode(p.ExitErr())
}

// ExitErr is the last run's exit error (nil: status 0).
func (p *Proc) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// ExitCode is the status of an exit error (0 for nil, -1 for a signal).
func ExitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// Restart kills the process if it runs, starts it and waits until ready.
func (p *Proc) Restart(timeout time.Duration) {
	p.t.Helper()
	p.Kill()
	p.Start()
	p.WaitReady(timeout)
}

// Log returns the process's whole log.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// Tail returns the last n lines of the log.
func (p *Proc) Tail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func (p *Proc) dumpLog() {
	p.t.Logf("---- %s (last lines of %s)\n%s", p.Name, p.logPath, p.Tail(60))
}

// Pid is the running process's id (0 when it does not run).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}
