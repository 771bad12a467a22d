package dispatch

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func pos(e int64) Position { return Position{Ledger: 1, Entry: e} }

// entries are n plain entries from position from, with keys k<i%keys>
// when keys > 0.
func entries(from int64, n int, keys int) []Entry {
	var es []Entry
	for i := range n {
		e := Entry{Position: pos(from + int64(i)), Messages: 1}
		if keys > 0 {
			e.Key = fmt.Appendf(nil, "k%d", i%keys)
		}
		es = append(es, e)
	}
	return es
}

// round plans and assigns one round over a log ending at last, with es
// standing for what the plan read (new entries, or replayed ones looked
// up by position in es), and returns who got which position.
func round(t *testing.T, s *State, last int64, es []Entry) map[string][]int64 {
	t.Helper()
	pl, ok := s.Plan(Log{LastConfirmed: pos(last)}, 1)
	if !ok {
		return nil
	}
	var read []Entry
	if len(pl.Replay) > 0 {
		for _, p := range pl.Replay {
			i := slices.IndexFunc(es, func(e Entry) bool { return e.Position == p })
			read = append(read, es[i])
		}
	} else {
		for _, e := range es {
			if e.Position.Compare(pl.From) >= 0 && len(read) < pl.N {
				read = append(read, e)
			}
		}
	}
	next := pl.From
	if len(read) > 0 {
		next = pos(read[len(read)-1].Position.Entry + 1)
	}
	out, _ := s.Assign(pl, read, next, true, time.Unix(1000, 0), true)
	got := map[string][]int64{}
	for _, d := range out {
		got[d.Consumer.Name()] = append(got[d.Consumer.Name()], read[d.Index].Position.Entry)
	}
	return got
}

func attach(t *testing.T, s *State, kind Kind, c *Consumer, permits int64) *Consumer {
	t.Helper()
	if err := s.Attach(c, kind); err != nil {
		t.Fatalf("attach %s: %v", c.Name(), err)
	}
	s.Flow(c, permits)
	return c
}

func TestExclusiveDeliversToItsOneConsumer(t *testing.T) {
	s := New(Exclusive, -1, pos(0))
	a := attach(t, s, Exclusive, NewConsumer("a", 0, nil, false), 3)
	if err := s.Attach(NewConsumer("b", 0, nil, false), Exclusive); !errors.Is(err, ErrExclusive) {
		t.Fatalf("a second exclusive consumer: %v", err)
	}
	if err := s.Attach(NewConsumer("c", 0, nil, false), Shared); !errors.Is(err, ErrKindMismatch) {
		t.Fatalf("a shared consumer on an exclusive subscription: %v", err)
	}
	es := entries(0, 5, 0)
	if got := round(t, s, 4, es); !slices.Equal(got["a"], []int64{0, 1, 2}) {
		t.Fatalf("first round %v, want a: 0 1 2 (its 3 permits)", got)
	}
	if _, ok := s.Plan(Log{LastConfirmed: pos(4)}, 1); ok {
		t.Fatal("planned a round for a consumer without permits")
	}
	s.Flow(a, 10)
	if got := round(t, s, 4, es); !slices.Equal(got["a"], []int64{3, 4}) {
		t.Fatalf("after a flow %v, want a: 3 4", got)
	}
	if a.Unacked() != 5 || a.Permits() != 8 {
		t.Fatalf("unacked %d permits %d, want 5 and 8", a.Unacked(), a.Permits())
	}
	// Detached, what it held is delivered again, counted, to the next.
	s.Detach(a)
	b := attach(t, s, Exclusive, NewConsumer("b", 0, nil, false), 10)
	if got := round(t, s, 4, es); !slices.Equal(got["b"], []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("after the consumer changed %v, want b: 0..4", got)
	}
	if s.Redeliveries(pos(2)) != 1 || b.Unacked() != 5 {
		t.Fatalf("redeliveries %d, unacked %d", s.Redeliveries(pos(2)), b.Unacked())
	}
}

func TestFailoverActiveConsumer(t *testing.T) {
	for _, c := range []struct {
		partition int
		consumers []*Consumer
		want      string
	}{
		{-1, []*Consumer{NewConsumer("b", 0, nil, false), NewConsumer("a", 0, nil, false)}, "a"},
		{-1, []*Consumer{NewConsumer("a", 1, nil, false), NewConsumer("b", 0, nil, false)}, "b"},
		{-1, []*Consumer{NewConsumer("z", -5, nil, false), NewConsumer("a", 0, nil, false)}, "z"},
		{3, []*Consumer{NewConsumer("a", 0, nil, false), NewConsumer("b", 0, nil, false)}, "b"},
		{4, []*Consumer{NewConsumer("c", 0, nil, false), NewConsumer("a", 0, nil, false), NewConsumer("b", 0, nil, false)}, "b"},
	} {
		s := New(Failover, c.partition, pos(0))
		for _, k := range c.consumers {
			attach(t, s, Failover, k, 10)
		}
		if got := s.UpdateActive(); got.Name() != c.want {
			t.Errorf("partition %d, consumers %v: active %s, want %s", c.partition, names(c.consumers), got.Name(), c.want)
		}
		for _, k := range c.consumers {
			if k.Active() != (k.Name() == c.want) || s.Eligible(k) != k.Active() {
				t.Errorf("%s: active %v eligible %v", k.Name(), k.Active(), s.Eligible(k))
			}
		}
	}

	// A new active consumer gets what the old one held.
	s := New(Failover, -1, pos(0))
	b := attach(t, s, Failover, NewConsumer("b", 0, nil, false), 10)
	s.UpdateActive()
	es := entries(0, 3, 0)
	if got := round(t, s, 2, es); !slices.Equal(got["b"], []int64{0, 1, 2}) {
		t.Fatalf("got %v", got)
	}
	a := attach(t, s, Failover, NewConsumer("a", 0, nil, false), 10)
	if s.UpdateActive() != a || b.Unacked() != 0 {
		t.Fatalf("active %s, b holds %d", s.UpdateActive().Name(), b.Unacked())
	}
	if got := round(t, s, 2, es); !slices.Equal(got["a"], []int64{0, 1, 2}) || len(got["b"]) > 0 {
		t.Fatalf("after the switch %v, want a: 0 1 2", got)
	}
}

func names(cs []*Consumer) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name())
	}
	return out
}

func TestSharedRoundRobinByPriority(t *testing.T) {
	s := New(Shared, -1, pos(0))
	a := attach(t, s, Shared, NewConsumer("a", 0, nil, false), 2)
	b := attach(t, s, Shared, NewConsumer("b", 0, nil, false), 2)
	attach(t, s, Shared, NewConsumer("low", 1, nil, false), 10)
	es := entries(0, 6, 0)
	got := round(t, s, 5, es)
	if !slices.Equal(got["a"], []int64{0, 2}) || !slices.Equal(got["b"], []int64{1, 3}) || !slices.Equal(got["low"], []int64{4, 5}) {
		t.Fatalf("got %v: want a 0 2, b 1 3 (priority 0 round robin), low 4 5 once they are full", got)
	}
	// Acknowledged entries are owed to no one; unacknowledged limits.
	s.Ack([]Position{pos(0)})
	if a.Unacked() != 1 || b.Unacked() != 2 {
		t.Fatalf("unacked a %d b %d", a.Unacked(), b.Unacked())
	}
	s.SetLimits(Limits{PerConsumer: 2})
	s.Flow(a, 5)
	s.Flow(b, 5)
	es = entries(6, 4, 0)
	got = round(t, s, 9, es)
	if !slices.Equal(got["a"], []int64{6}) || len(got["b"]) > 0 {
		t.Fatalf("with 2 unacked per consumer %v: want a 6 only (b holds 2), low the rest", got)
	}
	s.SetLimits(Limits{PerSubscription: s.pendingCount()})
	if _, ok := s.Plan(Log{LastConfirmed: pos(9)}, 1); ok {
		t.Fatal("planned a round with the subscription at its unacked limit")
	}
}

func (s *State) pendingCount() int { return len(s.pending) }

func TestKeySharedAutoSplitAndOrder(t *testing.T) {
	s := New(KeyShared, -1, pos(0))
	a := attach(t, s, KeyShared, NewConsumer("a", 0, nil, false), 100)
	b := attach(t, s, KeyShared, NewConsumer("b", 0, nil, false), 100)
	if len(s.keyRanges) != 2 || s.keyRanges[0].end != KeyHashRange/2-1 || s.keyRanges[0].c != a || s.keyRanges[1].c != b {
		t.Fatalf("ranges %+v, want a the lower half, b the upper", s.keyRanges)
	}
	es := entries(0, 40, 8)
	got := round(t, s, 39, es)
	for name, ps := range got {
		for _, p := range ps {
			if owner := s.KeyOwnerName(es[p].Key); owner != name {
				t.Fatalf("entry %d (key %s) went to %s, its key's owner is %s", p, es[p].Key, name, owner)
			}
		}
	}
	if len(got["a"])+len(got["b"]) != 40 {
		t.Fatalf("got %v", got)
	}
	// A consumer that cannot take an entry blocks its later ones this
	// round (order per key), while the other's keep going.
	s2 := New(KeyShared, -1, pos(0))
	a2 := attach(t, s2, KeyShared, NewConsumer("a", 0, nil, false), 1)
	attach(t, s2, KeyShared, NewConsumer("b", 0, nil, false), 100)
	es = entries(0, 40, 8)
	got = round(t, s2, 39, es)
	if len(got["a"]) != 1 || got["a"][0] != firstOf(s2, es, "a") {
		t.Fatalf("a with one permit got %v, want only its first entry %d", got["a"], firstOf(s2, es, "a"))
	}
	s2.Flow(a2, 100)
	got = round(t, s2, 39, es) // the replayed entries, in order
	if !slices.IsSorted(got["a"]) || len(got["a"]) == 0 {
		t.Fatalf("a's entries delivered again %v: want them all, in order", got["a"])
	}
	// Leaving, a consumer's range goes to its neighbour.
	s.Detach(b)
	if len(s.keyRanges) != 1 || s.keyRanges[0].c != a || s.keyRanges[0].end != KeyHashRange-1 {
		t.Fatalf("after b left: %+v", s.keyRanges)
	}
}

func firstOf(s *State, es []Entry, name string) int64 {
	for _, e := range es {
		if s.KeyOwnerName(e.Key) == name {
			return e.Position.Entry
		}
	}
	return -1
}

func TestKeySharedStickyRanges(t *testing.T) {
	for _, c := range []struct {
		ranges [][2]int32
		ok     bool
	}{
		{[][2]int32{{0, 100}}, true},
		{[][2]int32{{0, 10}, {20, 30}}, true},
		{[][2]int32{{5, 4}}, false},
		{[][2]int32{{-1, 4}}, false},
		{[][2]int32{{0, KeyHashRange}}, false},
		{[][2]int32{{0, 10}, {10, 20}}, false},
		{[][2]int32{{0, 10}, {200, 300}}, false}, // overlaps the other consumer's 200..300
	} {
		s := New(KeyShared, -1, pos(0))
		attach(t, s, KeyShared, NewConsumer("other", 0, [][2]int32{{200, 300}}, false), 1)
		err := s.Attach(NewConsumer("c", 0, c.ranges, false), KeyShared)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrRanges) {
			t.Errorf("ranges %v: %v, want ok %v", c.ranges, err, c.ok)
		}
	}
	// A sticky consumer gets exactly the keys whose hash is in its range.
	s := New(KeyShared, -1, pos(0))
	k := []byte("some-key")
	h := KeyHash(k)
	attach(t, s, KeyShared, NewConsumer("sticky", 0, [][2]int32{{h, h}}, false), 10)
	if s.KeyOwnerName(k) != "sticky" || s.KeyOwnerName([]byte("another")) == "sticky" && KeyHash([]byte("another")) != h {
		t.Fatal("the sticky range does not decide")
	}
}

func TestRedeliveryAndSeek(t *testing.T) {
	s := New(Shared, -1, pos(0))
	a := attach(t, s, Shared, NewConsumer("a", 0, nil, false), 10)
	es := entries(0, 4, 0)
	round(t, s, 3, es)
	if n := s.Redeliver(a, []Position{pos(1), pos(9)}); n != 1 {
		t.Fatalf("redelivered %d, want 1 (9 is not a's)", n)
	}
	s.Flow(a, 1)
	if got := round(t, s, 3, es); !slices.Equal(got["a"], []int64{1}) || s.Redeliveries(pos(1)) != 1 {
		t.Fatalf("redelivery round %v, count %d", got, s.Redeliveries(pos(1)))
	}
	if n := s.Redeliver(a, nil); n != 4 {
		t.Fatalf("redeliver all: %d, want 4", n)
	}
	s.AckCumulative(pos(2))
	pl, _ := s.Plan(Log{LastConfirmed: pos(3)}, 1)
	if !slices.Equal(pl.Replay, []Position{pos(3)}) {
		t.Fatalf("replay after a cumulative ack to 2: %v", pl.Replay)
	}
	// A round planned before a seek hands nothing out.
	s.Seek(pos(2))
	if out, _ := s.Assign(pl, es[3:], pos(4), true, time.Unix(1000, 0), true); len(out) != 0 || s.ReadPos() != pos(2) {
		t.Fatalf("a stale round delivered %v; read position %v", out, s.ReadPos())
	}
	if got := round(t, s, 3, es); !slices.Equal(got["a"], []int64{2, 3}) {
		t.Fatalf("after the seek %v, want 2 3", got)
	}
}

func TestPlanLimits(t *testing.T) {
	s := New(Shared, -1, pos(5))
	if _, ok := s.Plan(Log{LastConfirmed: pos(9)}, 1); ok {
		t.Fatal("planned without consumers")
	}
	attach(t, s, Shared, NewConsumer("a", 0, nil, false), 1000)
	pl, ok := s.Plan(Log{LastConfirmed: pos(9)}, 10)
	if !ok || pl.From != pos(5) || pl.N != MaxReadBatch {
		t.Fatalf("plan %+v %v: want %d entries from 5", pl, ok, MaxReadBatch)
	}
	if pl, _ := s.Plan(Log{LastConfirmed: pos(9)}, 100); pl.N != 10 {
		t.Fatalf("at 100 messages an entry, 1000 permits read %d entries, want 10", pl.N)
	}
	if _, ok := s.Plan(Log{LastConfirmed: pos(4)}, 1); ok {
		t.Fatal("planned past the end of the log")
	}
	if _, ok := s.Plan(Log{LastConfirmed: pos(9), Limit: pos(4), HasLimit: true}, 1); ok {
		t.Fatal("planned past the synchronous replication limit")
	}
	if !s.Drained(pos(4)) || s.Drained(pos(5)) {
		t.Fatal("Drained")
	}
}

func TestDelayedDelivery(t *testing.T) {
	now := time.Unix(1000, 0)
	s := New(Shared, -1, pos(0))
	attach(t, s, Shared, NewConsumer("a", 0, nil, false), 10)
	es := entries(0, 3, 0)
	es[1].DeliverAt = now.Add(time.Minute)
	got := round(t, s, 2, es)
	if !slices.Equal(got["a"], []int64{0, 2}) || s.Delayed() != 1 {
		t.Fatalf("got %v, delayed %d", got, s.Delayed())
	}
	if at, ok := s.NextDelayed(); !ok || !at.Equal(now.Add(time.Minute)) {
		t.Fatalf("next delayed %v %v", at, ok)
	}
	s.PromoteDelayed(now, false)
	if s.Delayed() != 1 {
		t.Fatal("promoted before its time")
	}
	s.PromoteDelayed(now.Add(time.Minute), false)
	if got := round(t, s, 2, es); !slices.Equal(got["a"], []int64{1}) {
		t.Fatalf("after its time %v", got)
	}
	// Exclusive subscriptions ignore deliver-at times.
	x := New(Exclusive, -1, pos(0))
	attach(t, x, Exclusive, NewConsumer("a", 0, nil, false), 10)
	if got := round(t, x, 2, es); !slices.Equal(got["a"], []int64{0, 1, 2}) {
		t.Fatalf("exclusive %v", got)
	}
}

func TestAssignSkipsWhatIsNotOwed(t *testing.T) {
	s := New(Shared, -1, pos(0))
	attach(t, s, Shared, NewConsumer("a", 0, nil, false), 10)
	es := entries(0, 5, 0)
	es[0].Gone, es[1].Acked, es[2].Bad, es[3].Covered = true, true, true, true
	pl, _ := s.Plan(Log{LastConfirmed: pos(4)}, 1)
	out, covered := s.Assign(pl, es, pos(5), true, time.Unix(1000, 0), true)
	if len(out) != 1 || out[0].Index != 4 || !slices.Equal(covered, []Position{pos(3)}) || s.ReadPos() != pos(5) {
		t.Fatalf("out %v covered %v read position %v", out, covered, s.ReadPos())
	}
}

func TestOfferNonPersistent(t *testing.T) {
	s := New(Shared, -1, pos(0))
	if s.Offer(nil, 1) != nil {
		t.Fatal("offered to no one")
	}
	a := attach(t, s, Shared, NewConsumer("a", 0, nil, false), 1)
	if s.Offer(nil, 1) != a || s.Offer(nil, 1) != nil || a.Unacked() != 0 {
		t.Fatal("Offer: one permit, one message, nothing owed")
	}
}

// The auto-split ranges always cover the hash space, and a joining
// consumer takes the upper half of the largest range.
func TestKeyRangesSplitAndMerge(t *testing.T) {
	s := New(KeyShared, -1, pos(0))
	a, b, c := NewConsumer("a", 0, nil, false), NewConsumer("b", 0, nil, false), NewConsumer("c", 0, nil, false)
	check := func(want ...keyRange) {
		t.Helper()
		if !slices.Equal(s.keyRanges, want) {
			t.Fatalf("ranges %v, want %v", s.keyRanges, want)
		}
	}
	attach(t, s, KeyShared, a, 0)
	check(keyRange{65535, a})
	attach(t, s, KeyShared, b, 0)
	check(keyRange{32767, a}, keyRange{65535, b})
	attach(t, s, KeyShared, c, 0)
	check(keyRange{16383, a}, keyRange{32767, c}, keyRange{65535, b})
	s.Detach(c) // its range goes to the next one
	check(keyRange{16383, a}, keyRange{65535, b})
	s.Detach(b) // the last range goes to the one before
	check(keyRange{65535, a})
}
