package storage

import (
	"fmt"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// A flush writes a ledger's index slots as one span when its ids are dense
// but not consecutive (a bookie of a striped ensemble). A later flush whose
// span covers slots an earlier flush wrote must keep them: here the first
// flush writes entries 1, 4, 7 and the second 0, 2, 3, 5, 6, 8 of the same
// ledger, then every entry must read back, before and after a restart.
func TestIndexSpanWriteKeepsEarlierSlots(t *testing.T) {
	cfg := smallConfig(vfs.Default, t.TempDir())
	cfg.FlushInterval = time.Hour
	s := openT(t, cfg)
	data := func(e uint64) []byte { return []byte(fmt.Sprintf("entry-%d", e)) }
	for _, e := range []uint64{1, 4, 7} {
		mustAdd(t, s, 9, e, data(e))
	}
	checkpointT(t, s)
	for _, e := range []uint64{0, 2, 3, 5, 6, 8} {
		mustAdd(t, s, 9, e, data(e))
	}
	// A sparse ledger takes the per-run path in the same flush.
	for _, e := range []uint64{0, 500, 1000} {
		mustAdd(t, s, 10, e, data(e))
	}
	checkpointT(t, s)
	check := func(s *Store) {
		for e := uint64(0); e <= 8; e++ {
			expectRead(t, s, 9, e, data(e))
		}
		for _, e := range []uint64{0, 500, 1000} {
			expectRead(t, s, 10, e, data(e))
		}
		if _, err := s.Read(10, 1); err == nil {
			t.Fatal("gap entry of a sparse ledger reads back")
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, cfg)
	check(s)
}
