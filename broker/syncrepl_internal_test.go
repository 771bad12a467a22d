package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/broker/mledger"
)

// recorder makes acknowledgements that record their names in order.
type recorder struct{ got []string }

func (r *recorder) ack(name string) func() { return func() { r.got = append(r.got, name) } }

func (r *recorder) run(acks []func()) {
	for _, a := range acks {
		a()
	}
}

// TestSyncQueue: acknowledgements leave in log order once the number of
// regions the policy asks for confirmed their positions; fewer remotes
// than asked means all of them; the fallback releases everything after
// its time and stays degraded until the regions reach where the log
// was then.
func TestSyncQueue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	remotes := []string{"b", "c"}

	t.Run("two of two", func(t *testing.T) {
		var r recorder
		q := syncQueue{regions: 2}
		r.run(q.hold(syncWaiter{pos: pos(1, 0), since: t0, ack: r.ack("m0")}, remotes))
		r.run(q.hold(syncWaiter{pos: pos(1, 1), since: t0, ack: r.ack("m1")}, remotes))
		q.confirm("b", pos(1, 1))
		r.run(q.release(remotes))
		if len(r.got) != 0 {
			t.Fatalf("released %v with one region of two", r.got)
		}
		q.confirm("c", pos(1, 0))
		r.run(q.release(remotes))
		if !slices.Equal(r.got, []string{"m0"}) {
			t.Fatalf("released %v, want m0", r.got)
		}
		q.confirm("c", pos(0, 7)) // older: ignored
		q.confirm("c", pos(2, 0))
		r.run(q.release(remotes))
		if !slices.Equal(r.got, []string{"m0", "m1"}) || len(q.waiting) != 0 {
			t.Fatalf("released %v, waiting %d", r.got, len(q.waiting))
		}
	})

	t.Run("one of two", func(t *testing.T) {
		var r recorder
		q := syncQueue{regions: 1}
		r.run(q.hold(syncWaiter{pos: pos(1, 0), since: t0, ack: r.ack("m0")}, remotes))
		q.confirm("c", pos(1, 0))
		r.run(q.release(remotes))
		if !slices.Equal(r.got, []string{"m0"}) {
			t.Fatalf("released %v", r.got)
		}
	})

	t.Run("more regions asked than remotes", func(t *testing.T) {
		var r recorder
		q := syncQueue{regions: 3}
		r.run(q.hold(syncWaiter{pos: pos(1, 0), since: t0, ack: r.ack("m0")}, remotes))
		q.confirm("b", pos(1, 0))
		r.run(q.release(remotes))
		if len(r.got) != 0 {
			t.Fatalf("released %v before both remotes", r.got)
		}
		q.confirm("c", pos(1, 0))
		r.run(q.release(remotes))
		if !slices.Equal(r.got, []string{"m0"}) {
			t.Fatalf("released %v", r.got)
		}
	})

	t.Run("no remotes", func(t *testing.T) {
		var r recorder
		q := syncQueue{regions: 1}
		r.run(q.hold(syncWaiter{pos: pos(1, 0), since: t0, ack: r.ack("m0")}, nil))
		if !slices.Equal(r.got, []string{"m0"}) {
			t.Fatalf("released %v", r.got)
		}
	})

	t.Run("confirmed before held", func(t *testing.T) {
		var r recorder
		q := syncQueue{regions: 1}
		q.confirm("b", pos(3, 3))
		r.run(q.hold(syncWaiter{pos: pos(3, 2), since: t0, ack: r.ack("m0")}, remotes))
		if !slices.Equal(r.got, []string{"m0"}) {
			t.Fatalf("released %v", r.got)
		}
	})

	t.Run("hold forever", func(t *testing.T) {
		var r recorder
		q := syncQueue{regions: 1}
		r.run(q.hold(syncWaiter{pos: pos(1, 0), since: t0, ack: r.ack("m0")}, remotes))
		if _, ok := q.nextExpiry(time.Time{}); ok {
			t.Fatal("a timer without a fallback")
		}
		acks, fell := q.expire(t0.Add(time.Hour), pos(1, 0), time.Time{})
		if fell || len(acks) != 0 {
			t.Fatal("fell back without a fallback")
		}
	})

	t.Run("fallback", func(t *testing.T) {
		var r recorder
		q := syncQueue{regions: 1, fallback: 5 * time.Second}
		r.run(q.hold(syncWaiter{pos: pos(1, 0), since: t0, ack: r.ack("m0")}, remotes))
		r.run(q.hold(syncWaiter{pos: pos(1, 1), since: t0.Add(time.Second), ack: r.ack("m1")}, remotes))
		if at, ok := q.nextExpiry(time.Time{}); !ok || !at.Equal(t0.Add(5*time.Second)) {
			t.Fatalf("next expiry %v %v", at, ok)
		}
		if acks, fell := q.expire(t0.Add(4*time.Second), pos(1, 1), time.Time{}); fell || len(acks) != 0 {
			t.Fatal("fell back early")
		}
		acks, fell := q.expire(t0.Add(5*time.Second), pos(1, 4), time.Time{})
		r.run(acks)
		if !fell || !slices.Equal(r.got, []string{"m0", "m1"}) || !q.degraded {
			t.Fatalf("fell %v, released %v, degraded %v", fell, r.got, q.degraded)
		}
		// Degraded: not held.
		r.run(q.hold(syncWaiter{pos: pos(1, 5), since: t0.Add(6 * time.Second), ack: r.ack("m2")}, remotes))
		if !slices.Equal(r.got, []string{"m0", "m1", "m2"}) {
			t.Fatalf("released %v", r.got)
		}
		q.confirm("b", pos(1, 3))
		if q.recover(remotes) {
			t.Fatal("recovered before reaching where it fell back")
		}
		q.confirm("b", pos(1, 4))
		if !q.recover(remotes) || q.degraded {
			t.Fatal("not recovered at where it fell back")
		}
		r.run(q.hold(syncWaiter{pos: pos(1, 9), since: t0.Add(7 * time.Second), ack: r.ack("m3")}, remotes))
		if len(r.got) != 3 || len(q.waiting) != 1 {
			t.Fatalf("after recovering: released %v, waiting %d", r.got, len(q.waiting))
		}
	})

	// The bound is on how long the regions have been unreachable: a
	// waiter that arrives after the regions it needs were gone for the
	// bound is released at once; while enough are reachable the bound
	// counts from its arrival.
	t.Run("fallback counts from when the regions went", func(t *testing.T) {
		three := []string{"a", "b", "c"}
		q := syncQueue{regions: 2, fallback: time.Second}
		for _, c := range []struct {
			gone map[string]time.Time
			want time.Time
		}{
			{nil, time.Time{}},
			{map[string]time.Time{"a": t0}, time.Time{}}, // two of three reachable: enough
			{map[string]time.Time{"a": t0, "c": t0.Add(3 * time.Second)}, t0.Add(3 * time.Second)},
			{map[string]time.Time{"a": t0.Add(5 * time.Second), "b": t0, "c": t0.Add(time.Second)}, t0.Add(time.Second)},
		} {
			if got := q.blockedSince(three, c.gone); !got.Equal(c.want) {
				t.Errorf("gone %v: blocked since %v, want %v", c.gone, got, c.want)
			}
		}
		var r recorder
		r.run(q.hold(syncWaiter{pos: pos(1, 0), since: t0.Add(10 * time.Second), ack: r.ack("m0")}, three))
		blocked := t0.Add(3 * time.Second)
		if at, ok := q.nextExpiry(blocked); !ok || !at.Equal(t0.Add(4*time.Second)) {
			t.Fatalf("next expiry %v %v, want the bound after the regions went", at, ok)
		}
		if at, _ := q.nextExpiry(t0.Add(11 * time.Second)); !at.Equal(t0.Add(11 * time.Second)) {
			t.Fatalf("next expiry %v: the regions going after the waiter came must not move it later", at)
		}
		acks, fell := q.expire(t0.Add(10*time.Second), pos(1, 0), blocked)
		r.run(acks)
		if !fell || !slices.Equal(r.got, []string{"m0"}) {
			t.Fatalf("fell %v, released %v: a waiter behind regions gone for the bound is released at once", fell, r.got)
		}
	})

	t.Run("horizon", func(t *testing.T) {
		q := syncQueue{}
		q.confirm("a", pos(5, 0))
		q.confirm("b", pos(3, 0))
		q.confirm("c", pos(4, 0))
		for n, want := range map[int]mledger.Position{1: pos(5, 0), 2: pos(4, 0), 3: pos(3, 0)} {
			if h, ok := q.horizon([]string{"a", "b", "c"}, n); !ok || h != want {
				t.Errorf("horizon of %d: %v %v, want %v", n, h, ok, want)
			}
		}
		if h, ok := q.horizon([]string{"a", "z"}, 2); !ok || h != noPosition {
			t.Errorf("an unconfirmed remote: %v %v", h, ok)
		}
	})
}
