package txn

import (
	"errors"
	"testing"

	"github.com/isobar-mq/isobar/errkind"
)

func pos(l, e int64) Position { return Position{Ledger: l, Entry: e} }

func wantLimit(t *testing.T, b *Buffer, want Position, held bool) {
	t.Helper()
	got, ok := b.Limit()
	if ok != held || ok && got != want {
		t.Fatalf("limit %v %v, want %v %v", got, ok, want, held)
	}
}

func TestBuffer(t *testing.T) {
	b := NewBuffer()
	a, c := ID{0, 1}, ID{0, 2}
	wantLimit(t, b, Position{}, false)
	// a writes when the log ends at 5:3; its entry lands at 5:6 (two
	// other entries were queued before it).
	if err := b.Write(a, pos(5, 3)); err != nil {
		t.Fatal(err)
	}
	wantLimit(t, b, pos(5, 3), true)
	b.Written(a, pos(5, 6))
	wantLimit(t, b, pos(5, 5), true)
	b.Written(a, pos(5, 9)) // a later entry of a changes nothing
	wantLimit(t, b, pos(5, 5), true)
	// c starts later: a still holds the limit.
	b.Write(c, pos(5, 9))
	b.Written(c, pos(5, 10))
	wantLimit(t, b, pos(5, 5), true)
	// a commits: c holds it now.
	b.End(a, Commit, pos(5, 11))
	wantLimit(t, b, pos(5, 9), true)
	if b.Skip(a, true, false, false) {
		t.Fatal("committed entry skipped")
	}
	if !b.Skip(a, true, true, false) {
		t.Fatal("marker delivered")
	}
	// c aborts: nothing holds the limit, c's entries are skipped, unless
	// replicated from another region.
	b.End(c, Abort, pos(5, 12))
	wantLimit(t, b, Position{}, false)
	if !b.Skip(c, true, false, false) || b.Skip(c, true, false, true) || b.Skip(c, false, false, false) {
		t.Fatal("skip of aborted entries")
	}
	// An aborted transaction writes no more.
	if err := b.Write(c, pos(5, 12)); !errors.Is(err, errkind.ErrTransactionConflict) {
		t.Fatalf("write after abort: %v", err)
	}
	if b.Ongoing(c) || b.Empty() {
		t.Fatal("state")
	}
	// Trimming the ledger before the abort marker forgets it.
	b.Trim(pos(5, 12))
	if b.Empty() {
		t.Fatal("trimmed too much")
	}
	b.Trim(pos(6, 0))
	if !b.Empty() {
		t.Fatal("aborted set kept after its ledger went")
	}
}

// TestBufferEntryZero: a transaction whose first entry opens a ledger
// holds dispatch before it: (ledger, -1) orders before (ledger, 0).
func TestBufferEntryZero(t *testing.T) {
	b := NewBuffer()
	a := ID{1, 1}
	b.Write(a, pos(4, 20))
	b.Written(a, pos(7, 0))
	lim, _ := b.Limit()
	if lim != pos(7, -1) || lim.Compare(pos(7, 0)) >= 0 || lim.Compare(pos(4, 20)) <= 0 {
		t.Fatalf("limit %v", lim)
	}
}

// TestBufferReplay: reading the log back, from a snapshot, rebuilds the
// same state.
func TestBufferReplay(t *testing.T) {
	a, c, d := ID{0, 1}, ID{0, 2}, ID{1, 3}
	b := NewBuffer()
	b.Replay(a, pos(1, 0), 0, nil)
	b.Replay(c, pos(1, 1), 0, nil)
	b.Replay(a, pos(1, 2), 0, nil)
	snap := b.Snapshot()
	b.Replay(c, pos(1, 3), MarkerAbort, nil)
	b.Replay(d, pos(1, 4), 0, nil)
	b.Replay(a, pos(1, 5), MarkerCommit, nil)
	wantLimit(t, b, pos(1, 3), true)
	if !b.Skip(c, true, false, false) {
		t.Fatal("aborted c delivered")
	}
	r, err := RestoreBuffer(snap)
	if err != nil {
		t.Fatal(err)
	}
	wantLimit(t, r, pos(1, -1), true)
	r.Replay(c, pos(1, 3), MarkerAbort, nil)
	r.Replay(d, pos(1, 4), 0, nil)
	r.Replay(a, pos(1, 5), MarkerCommit, nil)
	if string(r.Snapshot()) != string(b.Snapshot()) {
		t.Fatalf("restored and replayed %s, want %s", r.Snapshot(), b.Snapshot())
	}
	// An entry of an aborted transaction read back does not reopen it.
	r.Replay(c, pos(1, 6), 0, nil)
	if r.Ongoing(c) {
		t.Fatal("aborted transaction reopened")
	}
	if _, err := RestoreBuffer([]byte("{")); err == nil {
		t.Fatal("bad snapshot accepted")
	}
}
