package bookie

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/isobar-mq/isobar/bookie/client"
	"github.com/isobar-mq/isobar/bookie/proto"
)

// TestMixedSizeReadsPipelined: entries on both sides of the sizes from
// which the bookie writes a payload from its own buffer (writevMin) and
// the client reads a response into its own (client's ownFrame), read
// many at once on one connection so that responses of every size share
// the writer's batches, come back byte for byte, each to its request;
// then again from the entry logs after a restart.
func TestMixedSizeReadsPipelined(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	sizes := []int{0, 1, 100, writevMin - 100, writevMin - 1, writevMin, writevMin + 1, 64 << 10, 300 << 10, 5, 200 << 10, 7}
	rng := rand.New(rand.NewPCG(1, 2))
	const ledger = 9
	var entries [][]byte
	for i := range 60 {
		data := make([]byte, sizes[i%len(sizes)])
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		entries = append(entries, proto.AppendEntry(nil, ledger, uint64(i), int64(i)-1, uint64(len(data)), data))
	}
	ctx := context.Background()
	readAll := func(s *Server) {
		t.Helper()
		c, err := client.Dial(ctx, s.Addr(), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var wg sync.WaitGroup
		errs := make(chan error, 3*len(entries))
		for round := range 3 {
			for i, want := range entries {
				wg.Go(func() {
					got, err := c.Read(ctx, ledger, uint64(i), false)
					if err != nil {
						errs <- fmt.Errorf("round %d entry %d: %w", round, i, err)
						return
					}
					if !bytes.Equal(got, want) {
						errs <- fmt.Errorf("round %d entry %d: got %d bytes, want %d (or different content)", round, i, len(got), len(want))
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}

	s := startServer(t, cfg, Deps{})
	c, err := client.Dial(ctx, s.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		if err := c.Add(ctx, ledger, uint64(i), e, false); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
	c.Close()
	readAll(s) // from the memtable
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	readAll(startServer(t, cfg, Deps{})) // from the entry logs
}
