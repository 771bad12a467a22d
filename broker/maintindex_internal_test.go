package broker

import (
	"slices"
	"testing"
)

func TestDueQueue(t *testing.T) {
	var q dueQueue[string]
	if got := q.popDue(100); got != nil {
		t.Fatalf("empty queue: %v due", got)
	}
	q.add("a", 30)
	q.add("b", 10)
	q.add("c", 20)
	q.add("a", 5)  // moved earlier: due at 5 only
	q.add("c", 50) // moved later
	q.add("b", 10) // the same again: one entry
	if q.len() != 3 {
		t.Fatalf("len %d, want 3", q.len())
	}
	if got := q.popDue(4); len(got) != 0 {
		t.Fatalf("at 4: %v due, want none", got)
	}
	if got := q.popDue(30); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("at 30: %v due, want [a b]", got)
	}
	q.remove("c")
	if got := q.popDue(100); len(got) != 0 || q.len() != 0 {
		t.Fatalf("at 100 after removing c: %v due, %d left; want none", got, q.len())
	}
	// Many reschedules leave stale entries; they are dropped and the heap
	// does not grow without bound.
	for i := range 1000 {
		q.add("x", int64(1000+i))
		q.popDue(int64(500 + i/2))
	}
	if len(q.h) > 200 {
		t.Fatalf("%d heap entries for one key", len(q.h))
	}
	if got := q.popDue(5000); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("at 5000: %v due, want [x]", got)
	}
}
