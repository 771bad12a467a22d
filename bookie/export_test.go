package bookie

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/client"
)

// Test-only operations on a running bookie. They live here, compiled only
// into the package's tests, not in the production API.

// SetReadOnly forces the bookie into read-only mode (or releases the force).
func (s *Server) SetReadOnly(on bool) {
	s.forceReadOnly.Store(on)
	s.refreshReadOnly()
}

// writeCacheBytes is the write cache size (Config.WriteCacheMaxBytes) of
// the tests that flush with flushWriteCache.
const writeCacheBytes = 64 << 10

// flushWriteCache moves the entries in s's write cache to ledger storage
// as a full cache does: on a bookie configured with WriteCacheMaxBytes =
// writeCacheBytes (and a FlushInterval longer than the test), it adds an
// entry that size to ledger fill through c and waits until the write
// cache is empty.
func flushWriteCache(t *testing.T, ctx context.Context, s *Server, c *client.Conn, fill uint64) {
	t.Helper()
	if err := c.Add(ctx, fill, 0, entry(fill, 0, -1, strings.Repeat("f", writeCacheBytes)), false); err != nil {
		t.Fatalf("add filling the write cache: %v", err)
	}
	waitFor(t, 10*time.Second, func() bool {
		_, flush := s.store.QueueDepths()
		return flush == 0
	})
}
