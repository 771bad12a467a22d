package storage

import (
	"context"
	"errors"
	"testing"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

func TestFencing(t *testing.T) {
	cfg := smallConfig(vfs.Default, t.TempDir())
	ctx := context.Background()
	s := openT(t, cfg)
	mustAdd(t, s, 1, 0, []byte("before fence"))
	if s.Fenced(1) {
		t.Fatal("fenced before Fence")
	}
	if err := s.Fence(ctx, 1); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store, next uint64) {
		t.Helper()
		if !s.Fenced(1) {
			t.Fatal("not fenced")
		}
		if err := addWait(s, 1, next, []byte("stale writer"), false); !errors.Is(err, ErrFenced) {
			t.Fatalf("non-recovery add to a fenced ledger: %v", err)
		}
		if err := addWait(s, 1, next, []byte("recovery"), true); err != nil {
			t.Fatalf("recovery add to a fenced ledger: %v", err)
		}
		expectRead(t, s, 1, next, []byte("recovery"))
		expectRead(t, s, 1, 0, []byte("before fence"))
	}
	check(s, 1)

	// The fence survives a crash (journal replay, no checkpoint).
	crashStop(s)
	s = openT(t, cfg)
	check(s, 2)

	// And a checkpoint (the index header holds it) plus a clean restart.
	checkpointT(t, s)
	s.Close()
	s = openT(t, cfg)
	check(s, 3)
	if last, _ := s.LastEntryID(1); last != 3 {
		t.Fatalf("LastEntryID = %d", last)
	}
}

func TestFenceUnknownLedger(t *testing.T) {
	cfg := smallConfig(vfs.NewStrictMem(), "/d")
	s := openT(t, cfg)
	if err := s.Fence(context.Background(), 42); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		if last, err := s.LastEntryID(42); err != nil || last != -1 {
			t.Fatalf("LastEntryID = %d, %v; want -1", last, err)
		}
		if !s.Fenced(42) {
			t.Fatal("not fenced")
		}
		if _, err := s.Read(42, 0); !errors.Is(err, ErrNoEntry) {
			t.Fatalf("read: %v", err)
		}
	}
	check(s)
	checkpointT(t, s)
	s.Close()
	s = openT(t, cfg)
	check(s)
}

func TestFenceRacesAdds(t *testing.T) {
	// Adds racing a fence either land before it or fail; none is acked
	// after Fence has returned.
	s := openT(t, smallConfig(vfs.NewStrictMem(), "/d"))
	const n = 2000
	results := make(chan error, n)
	go func() {
		for e := range uint64(n) {
			s.Add(5, e, []byte("x"), false, func(err error) { results <- err })
		}
	}()
	if err := s.Fence(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	fencedAt, _ := s.LastEntryID(5)
	okAfter := 0
	for range n {
		err := <-results
		if err != nil && !errors.Is(err, ErrFenced) {
			t.Fatal(err)
		}
		if err == nil {
			okAfter++
		}
	}
	if last, _ := s.LastEntryID(5); last != fencedAt {
		t.Fatalf("entries acked after the fence returned: last %d, at fence %d", last, fencedAt)
	}
	if int64(okAfter) != fencedAt+1 {
		t.Fatalf("%d adds succeeded but the last entry is %d", okAfter, fencedAt)
	}
}

func TestDeleteThenRecreate(t *testing.T) {
	cfg := smallConfig(vfs.NewStrictMem(), "/d")
	ctx := context.Background()
	s := openT(t, cfg)
	for e := range uint64(10) {
		mustAdd(t, s, 3, e, payload(3, e, 0, 100))
	}
	checkpointT(t, s)
	if err := s.Fence(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(3, 0); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("read after delete: %v", err)
	}
	// Re-created before the delete is flushed: the old index must not leak
	// through, and the new incarnation is not fenced.
	mustAdd(t, s, 3, 5, []byte("new"))
	check := func(s *Store) {
		t.Helper()
		if s.Fenced(3) {
			t.Fatal("fence survived the delete")
		}
		for e := range uint64(10) {
			if e == 5 {
				continue
			}
			if _, err := s.Read(3, e); !errors.Is(err, ErrNoEntry) {
				t.Fatalf("old entry %d visible after delete: %v", e, err)
			}
		}
		expectRead(t, s, 3, 5, []byte("new"))
		if last, _ := s.LastEntryID(3); last != 5 {
			t.Fatalf("LastEntryID = %d", last)
		}
	}
	check(s)
	checkpointT(t, s)
	check(s)
	s.Close()
	s = openT(t, cfg)
	check(s)
}
