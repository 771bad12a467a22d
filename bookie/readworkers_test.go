package bookie

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/client"
	"github.com/isobar-mq/isobar/bookie/vfs"
)

// gatedReads holds every entry log read (File.ReadAt of an entrylog-*.log)
// until the test lets it go, and records how many were held at once.
type gatedReads struct {
	armed   bool
	mu      sync.Mutex
	active  int
	max     int
	arrived chan struct{}
	release chan struct{}
}

func (g *gatedReads) MaybeError(op vfs.Op, path string) error {
	if op != vfs.OpRead || !strings.HasPrefix(filepath.Base(path), "entrylog-") || !strings.HasSuffix(path, ".log") {
		return nil
	}
	g.mu.Lock()
	if !g.armed {
		g.mu.Unlock()
		return nil
	}
	g.active++
	g.max = max(g.max, g.active)
	g.mu.Unlock()
	g.arrived <- struct{}{}
	<-g.release
	g.mu.Lock()
	g.active--
	g.mu.Unlock()
	return nil
}

// TestReadWorkersBoundConcurrentReads: with bookie.readWorkers 2, no more
// than two entry reads reach the disk at once, whatever the number asked
// for; the others wait and are served in turn.
func TestReadWorkersBoundConcurrentReads(t *testing.T) {
	g := &gatedReads{arrived: make(chan struct{}, 64), release: make(chan struct{})}
	cfg := testConfig(t, t.TempDir())
	cfg.FlushInterval = time.Hour
	cfg.WriteCacheMaxBytes = writeCacheBytes // flushed by flushWriteCache
	cfg.ReadWorkers = 2
	s := startServer(t, cfg, Deps{FS: vfs.NewErrorFS(vfs.Default, g)})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(g.release) }) }
	t.Cleanup(releaseAll) // before the server's shutdown, even on failure
	ctx := context.Background()
	c, err := client.Dial(ctx, s.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	const ledger, n = 7, 6
	for e := uint64(0); e < n; e++ {
		if err := c.Add(ctx, ledger, e, entry(ledger, e, int64(e)-1, "workers"), false); err != nil {
			t.Fatalf("add %d: %v", e, err)
		}
	}
	flushWriteCache(t, ctx, s, c, ledger+1) // the entries leave the write cache
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()

	errs := make(chan error, n)
	for e := uint64(0); e < n; e++ {
		c.ReadAsync(ctx, ledger, e, false, func(_ []byte, err error) { errs <- err })
	}
	// Every read is in flight at the bookie and two are at the disk; the
	// others must be waiting for a worker, not at the disk.
	// (The connection's read loop holds one more slot while it waits for
	// the next request.)
	waitFor(t, 30*time.Second, func() bool { return serverInFlight(s) == n+1 })
	for range 2 {
		select {
		case <-g.arrived:
		case <-time.After(30 * time.Second):
			t.Fatal("entry reads did not reach the disk")
		}
	}
	select {
	case <-g.arrived:
		t.Fatal("a third entry read reached the disk while two held both read workers")
	case <-time.After(200 * time.Millisecond):
	}
	releaseAll()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.max > 2 {
		t.Fatalf("%d entry reads at the disk at once, want at most readWorkers = 2", g.max)
	}
}

// serverInFlight counts the requests s has taken and not yet answered, over
// its connections.
func serverInFlight(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		n += len(c.slots)
	}
	return n
}
