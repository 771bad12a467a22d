package txn

import (
	"testing"
	"time"
)

// TestBufferStats: the counts and positions the admin API reports of a
// topic's buffer.
func TestBufferStats(t *testing.T) {
	b := NewBuffer()
	a, c := ID{0, 1}, ID{1, 7}
	if b.OngoingCount() != 0 {
		t.Fatal("empty buffer counts transactions")
	}
	b.Write(a, pos(5, 3))
	if _, ok := b.FirstEntry(a); ok || b.OngoingCount() != 1 {
		t.Fatal("an entry not stored yet has a position")
	}
	b.Written(a, pos(5, 6))
	b.Written(a, pos(5, 8))
	if p, ok := b.FirstEntry(a); !ok || p != pos(5, 6) {
		t.Fatalf("first entry %v %v, want 5:6", p, ok)
	}
	b.Write(c, pos(5, 8))
	b.Written(c, pos(6, 0)) // the first entry of a ledger
	if p, ok := b.FirstEntry(c); !ok || p != pos(6, 0) || b.OngoingCount() != 2 {
		t.Fatalf("first entry %v %v, count %d", p, ok, b.OngoingCount())
	}
	b.End(a, Commit, pos(6, 1))
	b.End(c, Abort, pos(6, 2))
	if _, ok := b.FirstEntry(a); ok || b.OngoingCount() != 0 {
		t.Fatal("ended transactions still ongoing")
	}
	if b.WasAborted(a) || !b.WasAborted(c) || b.WasAborted(ID{9, 9}) {
		t.Fatal("aborted")
	}
	b.Trim(pos(7, 0))
	if b.WasAborted(c) {
		t.Fatal("aborted kept after its ledger went")
	}
}

// TestCoordinatorStats: the counts the admin API reports of a
// coordinator, and the transactions it holds.
func TestCoordinatorStats(t *testing.T) {
	c := NewCoordinator(2, time.Hour)
	if s := c.Stats(); s.Next != 0 || s.Held != 0 {
		t.Fatalf("empty: %+v", s)
	}
	for range 3 {
		if _, _, err := c.New(t0, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	c.End(ID{2, 0}, Commit)
	c.Done(ID{2, 0})
	c.End(ID{2, 1}, Abort)
	if s := c.Stats(); s.Next != 3 || s.Held != 2 || s.Lowest != 1 {
		t.Fatalf("stats %+v, want next 3, 2 held from 1", s)
	}
	held := c.Held()
	if len(held) != 2 || held[0].ID != (ID{2, 1}) || held[0].Status != Aborting || held[1].ID != (ID{2, 2}) || held[1].Status != Open {
		t.Fatalf("held %+v", held)
	}
}
