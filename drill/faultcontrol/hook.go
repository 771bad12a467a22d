package faultcontrol

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxHookOutput bounds the output of a hook kept for its error: the first
// this many bytes, stdout and stderr together.
const maxHookOutput = 4 << 10

// hookWaitDelay is how long a hook's output pipes may stay open after the
// hook exits (a daemon it started that kept them) before they are closed.
const hookWaitDelay = 5 * time.Second

// runHook runs argv, without a shell, in a process group of its own (so
// a Ctrl-C meant for the fault-control process does not reach what the
// hook starts), until it exits or ctx ends; then the whole group is
// killed. A hook that fails, or does not exit in time, is an error
// saying how, with its output.
func runHook(ctx context.Context, argv []string) error {
	start := time.Now()
	var out boundedBuffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = hookWaitDelay
	err := cmd.Run()
	took := time.Since(start).Round(time.Millisecond)
	if err == nil {
		return nil
	}
	how := err.Error()
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		how = "did not exit in time and was killed"
	case ctx.Err() != nil:
		how = "was stopped: " + ctx.Err().Error()
	case errors.Is(err, exec.ErrWaitDelay):
		// It exited well, but something it started kept its output
		// open: what that writes is lost, not the hook's result.
		return nil
	}
	return fmt.Errorf("%s %s after %v; output: %s", quoteArgv(argv), how, took, out.String())
}

// quoteArgv shows a command as one would type it.
func quoteArgv(argv []string) string {
	var parts []string
	for _, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$") {
			a = fmt.Sprintf("%q", a)
		}
		parts = append(parts, a)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// boundedBuffer keeps the first maxHookOutput bytes written to it and
// counts the rest.
type boundedBuffer struct {
	mu      sync.Mutex
	buf     []byte
	dropped int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(len(p), maxHookOutput-len(b.buf))
	b.buf = append(b.buf, p[:n]...)
	b.dropped += len(p) - n
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(string(b.buf))
	if s == "" {
		s = "(none)"
	}
	if b.dropped > 0 {
		s += fmt.Sprintf(" ... (%d more bytes)", b.dropped)
	}
	return s
}
