package txn

import (
	"errors"
	"slices"
	"testing"

	"github.com/isobar-mq/isobar/errkind"
)

func ps(xs ...int64) []Position {
	out := make([]Position, len(xs))
	for i, x := range xs {
		out[i] = pos(1, x)
	}
	return out
}

func wantPending(t *testing.T, a *Acks, sub string, id ID, want []Position) {
	t.Helper()
	got, err := a.Ending(sub, id)
	if err != nil {
		t.Fatalf("ending %s %v: %v", sub, id, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pending %s %v: %v, want %v", sub, id, got, want)
	}
}

// TestAcksAdd: the conflicts an acknowledgement in a transaction meets.
func TestAcksAdd(t *testing.T) {
	x, y := ID{0, 1}, ID{0, 2}
	acked := func(p Position) bool { return p == pos(1, 9) }
	for _, c := range []struct {
		name     string
		sub      string
		id       ID
		ps       []Position
		conflict bool
	}{
		{"new positions", "s", y, ps(4, 5), false},
		{"acknowledged already", "s", y, ps(4, 9), true},
		{"pending in another transaction", "s", y, ps(2), true},
		{"reserved in another transaction", "s", y, ps(3), true},
		{"pending in the same transaction", "s", x, ps(1, 2, 4), false},
		{"reserved in the same transaction", "s", x, ps(3), false},
		{"another subscription", "t", y, ps(1, 2, 3), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := NewAcks()
			r, err := a.Add("s", x, ps(1, 2), acked, pos(1, 0))
			if err != nil {
				t.Fatal(err)
			}
			a.Confirm(r)
			if _, err := a.Add("s", x, ps(3), acked, pos(1, 0)); err != nil { // in flight
				t.Fatal(err)
			}
			before := snap(a)
			r, err = a.Add(c.sub, c.id, c.ps, acked, pos(1, 0))
			if c.conflict {
				if !errors.Is(err, errkind.ErrTransactionConflict) {
					t.Fatalf("want a conflict, got %v", err)
				}
				if after := snap(a); after != before {
					t.Fatalf("a refused add changed the state: %s, was %s", after, before)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a.Confirm(r)
		})
	}
}

// snap is a buffer snapshot with a's pending acknowledgements.
func snap(a *Acks) string { b := NewBuffer(); b.acks = a; return string(b.Snapshot()) }

// TestAcksReservation: a reservation confirmed is pending; one undone
// leaves nothing of its own, but keeps what a stored record (or another
// reservation) of the same transaction holds.
func TestAcksReservation(t *testing.T) {
	x := ID{0, 1}
	for _, c := range []struct {
		name  string
		steps func(a *Acks)
		want  []Position
	}{
		{"confirmed", func(a *Acks) {
			r, _ := a.Add("s", x, ps(1, 2, 2), nil, pos(1, 0))
			a.Confirm(r)
		}, ps(1, 2)},
		{"undone", func(a *Acks) {
			r, _ := a.Add("s", x, ps(1, 2), nil, pos(1, 0))
			a.Undo(r)
		}, ps()},
		{"undone over a stored one", func(a *Acks) {
			r, _ := a.Add("s", x, ps(1), nil, pos(1, 0))
			a.Confirm(r)
			r, _ = a.Add("s", x, ps(1, 2), nil, pos(1, 0))
			a.Undo(r)
		}, ps(1)},
		{"undone while another is stored", func(a *Acks) {
			r1, _ := a.Add("s", x, ps(1, 2), nil, pos(1, 0))
			r2, _ := a.Add("s", x, ps(2, 3), nil, pos(1, 0))
			a.Undo(r1)
			a.Confirm(r2)
		}, ps(2, 3)},
		{"settled twice", func(a *Acks) {
			r, _ := a.Add("s", x, ps(1), nil, pos(1, 0))
			a.Confirm(r)
			a.Undo(r)
		}, ps(1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := NewAcks()
			c.steps(a)
			wantPending(t, a, "s", x, c.want)
			if _, ok := a.Since(); ok {
				t.Fatal("a write still counted in flight")
			}
			a.End("s", x)
			if !a.Empty() {
				t.Fatal("state left after the end")
			}
		})
	}
}

// TestAcksEnd: an end takes the stored positions in order, waits while a
// record of the transaction is in flight, and forgets only its own.
func TestAcksEnd(t *testing.T) {
	x, y := ID{0, 1}, ID{1, 1}
	a := NewAcks()
	r, _ := a.Add("s", x, ps(5, 1), nil, pos(1, 0))
	a.Confirm(r)
	r, _ = a.Add("s", y, ps(2), nil, pos(1, 0))
	a.Confirm(r)
	wantPending(t, a, "s", x, ps(1, 5))
	wantPending(t, a, "s", ID{0, 9}, ps()) // unknown: nothing to do
	wantPending(t, a, "other", x, ps())
	inflight, _ := a.Add("s", x, ps(7), nil, pos(1, 6))
	if _, err := a.Ending("s", x); !errors.Is(err, errkind.ErrServiceNotReady) {
		t.Fatalf("end while a record is written: %v", err)
	}
	wantPending(t, a, "s", y, ps(2)) // another transaction is not held
	a.Confirm(inflight)
	wantPending(t, a, "s", x, ps(1, 5, 7))
	a.End("s", x)
	wantPending(t, a, "s", x, ps())
	if id, ok := a.PendingIn("s", pos(1, 2)); !ok || id != y {
		t.Fatal("the end of x forgot y's")
	}
	// The positions are free for another transaction now.
	if _, err := a.Add("s", y, ps(1, 5, 7), nil, pos(1, 8)); err != nil {
		t.Fatal(err)
	}
	a.End("s", x) // twice: nothing
}

// TestAcksSnapshotAt: a snapshot stands no later than the log's end when
// the oldest record in flight was reserved (the record lands after that,
// and is replayed).
func TestAcksSnapshotAt(t *testing.T) {
	x, y := ID{0, 1}, ID{0, 2}
	a := NewAcks()
	if got := a.SnapshotAt(pos(3, 9)); got != pos(3, 9) {
		t.Fatalf("nothing in flight: %v", got)
	}
	r1, _ := a.Add("s", x, ps(1), nil, pos(3, 4))
	r2, _ := a.Add("s", y, ps(2), nil, pos(3, 2))
	for _, c := range []struct{ at, want Position }{
		{pos(3, 9), pos(3, 2)},
		{pos(3, 2), pos(3, 2)},
		{pos(3, 1), pos(3, 1)}, // earlier than every write in flight: kept
	} {
		if got := a.SnapshotAt(c.at); got != c.want {
			t.Fatalf("at %v: %v, want %v", c.at, got, c.want)
		}
	}
	a.Confirm(r2)
	if got := a.SnapshotAt(pos(3, 9)); got != pos(3, 4) {
		t.Fatalf("after the oldest confirmed: %v", got)
	}
	// The snapshot has the stored acknowledgements, not those in flight.
	b := NewBuffer()
	b.acks = a
	r, err := RestoreBuffer(b.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	wantPending(t, r.Acks(), "s", y, ps(2))
	wantPending(t, r.Acks(), "s", x, ps())
	a.Undo(r1)
	if got := a.SnapshotAt(pos(3, 9)); got != pos(3, 9) {
		t.Fatalf("after all settled: %v", got)
	}
}

// TestAcksReplay: the log's records, replayed after a snapshot, rebuild
// the pending acknowledgements of the transactions not ended; a record
// replayed twice (in the snapshot and after it) changes nothing.
func TestAcksReplay(t *testing.T) {
	x, y, z := ID{0, 1}, ID{0, 2}, ID{1, 3}
	type rec struct {
		id      ID
		marker  int32
		payload []byte
	}
	log := []rec{
		{x, MarkerAck, EncodeAck("s", ps(1, 2))},
		{y, MarkerAck, EncodeAck("s", ps(3))},
		{z, MarkerAck, EncodeAck("t", ps(1))},
		{x, MarkerAck, EncodeAck("s", ps(4))},
		{y, MarkerAckEnd, EncodeAckEnd("s", Commit)},
		{z, MarkerAckEnd, EncodeAckEnd("s", Abort)}, // z is t's, not s's
		{x, 0, nil}, // x's message: the buffer's
		{y, MarkerCommit, nil},
	}
	for cut := range len(log) + 1 {
		// A snapshot after log[:cut], then the records from first on.
		for first := 0; first <= cut; first++ {
			b := NewBuffer()
			for i, r := range log[:cut] {
				if err := b.Replay(r.id, pos(1, int64(10+i)), r.marker, r.payload); err != nil {
					t.Fatal(err)
				}
			}
			b, err := RestoreBuffer(b.Snapshot())
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range log[first:] {
				if err := b.Replay(r.id, pos(1, int64(10+first+i)), r.marker, r.payload); err != nil {
					t.Fatal(err)
				}
			}
			wantPending(t, b.Acks(), "s", x, ps(1, 2, 4))
			wantPending(t, b.Acks(), "s", y, ps())
			wantPending(t, b.Acks(), "t", z, ps(1))
			if !b.Ongoing(x) || b.Ongoing(y) || b.Ongoing(z) {
				t.Fatalf("cut %d first %d: the pending-ack records changed the buffer's transactions", cut, first)
			}
		}
	}
	b := NewBuffer()
	if err := b.Replay(x, pos(1, 1), MarkerAck, []byte("{")); err == nil {
		t.Fatal("bad record accepted")
	}
}

// TestBufferSnapshotWithoutAcks: a snapshot written before pending acks
// were kept restores, with none.
func TestBufferSnapshotWithoutAcks(t *testing.T) {
	b, err := RestoreBuffer([]byte(`{"ongoing":[{"most":0,"least":1,"ledger":3,"entry":4}]}`))
	if err != nil {
		t.Fatal(err)
	}
	wantLimit(t, b, pos(3, 4), true)
	if !b.Acks().Empty() {
		t.Fatal("acks from nowhere")
	}
	r, _ := b.Acks().Add("s", ID{0, 1}, ps(1), nil, pos(3, 4))
	b.Acks().Confirm(r)
	if got := string(b.Snapshot()); got != `{"ongoing":[{"most":0,"least":1,"ledger":3,"entry":4}],"acks":[{"sub":"s","most":0,"least":1,"pos":[[1,1]]}]}` {
		t.Fatalf("snapshot %s", got)
	}
}

// TestMarkers: every marker of ours is a marker, skipped by the buffer;
// the records' payloads are compact JSON.
func TestMarkers(t *testing.T) {
	for _, c := range []struct {
		m    int32
		want bool
	}{{0, false}, {MarkerCommit, true}, {MarkerAbort, true}, {MarkerAck, true}, {MarkerAckEnd, true}, {10, false}} {
		if IsMarker(c.m) != c.want {
			t.Fatalf("IsMarker(%d) = %v", c.m, !c.want)
		}
		if NewBuffer().Skip(ID{0, 1}, true, IsMarker(c.m), false) != c.want {
			t.Fatalf("Skip of marker type %d", c.m)
		}
	}
	if got := string(EncodeAck("s", []Position{pos(7, 0), pos(7, 1)})); got != `{"sub":"s","pos":[[7,0],[7,1]]}` {
		t.Fatal(got)
	}
	if got := string(EncodeAckEnd("s", Abort)); got != `{"sub":"s","action":"abort"}` {
		t.Fatal(got)
	}
}

func TestAcksTransactions(t *testing.T) {
	x, y := ID{0, 1}, ID{0, 2}
	a := NewAcks()
	r, err := a.Add("s", x, ps(1, 2), nil, pos(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	a.Confirm(r)
	ry, err := a.Add("s", y, ps(3), nil, pos(1, 0)) // being written
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		step string
		do   func()
		s, t int
	}{
		{"x pending, y being written", func() {}, 2, 0},
		{"x ended", func() { a.End("s", x) }, 1, 0},
		{"y's record failed", func() { a.Undo(ry) }, 0, 0},
	} {
		c.do()
		if got := a.Transactions("s"); got != c.s {
			t.Errorf("%s: Transactions(s) = %d, want %d", c.step, got, c.s)
		}
		if got := a.Transactions("t"); got != c.t {
			t.Errorf("%s: Transactions(t) = %d, want %d", c.step, got, c.t)
		}
	}
}
