package proctest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openFDs counts the open file descriptors of process pid.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("cannot count file descriptors: %v", err)
	}
	return len(es)
}

// TestProcessSurvivesFDExhaustion runs `isobar standalone` (a broker and
// its bookies in one process) under a lowered file-descriptor limit and
// floods its broker port with idle connections past the limit. While it
// cannot accept, /readyz must not say ready; once the flood's
// connections close, it must serve produce and consume again within 5 s
// (accept loops back off and resume; the bookies treat EMFILE as
// transient and never turn read-only for it). A storm of short-lived
// connections follows the flood.
func TestProcessSurvivesFDExhaustion(t *testing.T) {
	skipUnlessProcessTests(t)
	bin := Binary(t)
	dir := t.TempDir()
	bp, hp := FreePort(t), FreePort(t)
	p := New(t, bin, dir, "standalone", nil, "standalone", "--data-dir", filepath.Join(dir, "data"),
		"--broker-port", fmt.Sprint(bp), "--http-port", fmt.Sprint(hp))
	url, ready := fmt.Sprintf("pulsar://127.0.0.1:%d", bp), fmt.Sprintf("http://127.0.0.1:%d/readyz", hp)
	p.ReadyURL = ready
	p.Start()
	p.WaitReady(2 * time.Minute)
	const topic = "persistent://public/default/fds"
	c := client(t, url)
	sendN(t, c, topic, 0, 10)
	consumeN(t, c, topic, "s", 10, 0)
	c.Close()

	pid := p.Pid()
	limit := uint64(openFDs(t, pid) + 64)
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}, nil); err != nil {
		t.Skipf("cannot lower the process's file-descriptor limit: %v", err)
	}
	t.Logf("file-descriptor limit lowered to %d (%d open)", limit, openFDs(t, pid))

	// The flood: more idle connections than the process has descriptors
	// left. The kernel completes the handshakes (its backlog) whether or
	// not the process can accept them.
	var flood []net.Conn
	for i := 0; i < int(limit)+200; i++ {
		nc, err := net.DialTimeout("tcp", Addr(bp), time.Second)
		if err != nil {
			break
		}
		flood = append(flood, nc)
	}
	waitFor(t, 30*time.Second, "the process to run out of descriptors", func() bool { return openFDs(t, pid) >= int(limit)-2 })
	if Ready(ready) {
		t.Errorf("/readyz says ready while the process cannot accept connections (%d descriptors open, limit %d)", openFDs(t, pid), limit)
	}
	for _, nc := range flood {
		nc.Close()
	}
	t.Logf("flood of %d connections closed", len(flood))
	// Then a storm: connections opened and dropped as fast as 8 dialers
	// go, for two seconds.
	var wg sync.WaitGroup
	var stormed atomic.Int64
	stop := time.Now().Add(2 * time.Second)
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if nc, err := net.DialTimeout("tcp", Addr(bp), 200*time.Millisecond); err == nil {
					nc.Close()
					stormed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("storm of %d short connections", stormed.Load())
	start := time.Now()
	waitFor(t, 5*time.Second, "/readyz after the flood", func() bool { return Ready(ready) })
	c = client(t, url)
	defer c.Close()
	sendN(t, c, topic, 10, 10)
	consumeN(t, c, topic, "s", 10, 10)
	t.Logf("serving again %v after the flood ended", time.Since(start).Round(time.Millisecond))
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v to serve again after the flood, want at most 5s", took)
	}
}
