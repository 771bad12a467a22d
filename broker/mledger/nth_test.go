package mledger

import (
	"math/rand/v2"
	"testing"

	"github.com/isobar-mq/isobar/broker/mledger/ackset"
)

// TestNthAfter checks nthAfter against a walk entry by entry, over every
// start position of testList, random acknowledged ranges and every n.
func TestNthAfter(t *testing.T) {
	var all []Position
	for p, ok := nextPosition(testList, pos(3, -1)); ok; p, ok = nextPosition(testList, p) {
		all = append(all, p)
	}
	r := rand.New(rand.NewPCG(1, 2))
	starts := append([]Position{pos(1, 4), pos(3, -1), pos(5, -1)}, all...)
	for round := 0; round < 200; round++ {
		start := starts[r.IntN(len(starts))]
		set := ackset.New(start)
		for _, p := range all {
			if p.Compare(start) > 0 && r.IntN(3) == 0 {
				if _, err := set.Ack(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		var unacked []Position
		for _, p := range all {
			if !set.IsAcked(p) {
				unacked = append(unacked, p)
			}
		}
		for n := int64(0); n <= int64(len(all))+1; n++ {
			got, ok := nthAfter(testList, set.MarkDelete(), set.Ranges(), n)
			var want Position
			wantOK := n >= 1 && n <= int64(len(unacked))
			if wantOK {
				want = unacked[n-1]
			}
			if ok != wantOK || got != want {
				t.Fatalf("from %v acked %v: nthAfter(%d) = %v %v, want %v %v", start, set, n, got, ok, want, wantOK)
			}
		}
	}
}

func TestNthEntries(t *testing.T) {
	m := &ManagedLedger{meta: topicMeta{Ledgers: testList}}
	m.lastConfirmed = pos(9, 0)
	for n, want := range map[int64]Position{1: pos(3, 0), 3: pos(7, 0), 6: pos(9, 0)} {
		if got, ok := m.NthEntry(n); !ok || got != want {
			t.Errorf("NthEntry(%d) = %v %v, want %v", n, got, ok, want)
		}
	}
	for n, want := range map[int64]Position{1: pos(9, 0), 2: pos(7, 2), 6: pos(3, 0)} {
		if got, ok := m.NthLastEntry(n); !ok || got != want {
			t.Errorf("NthLastEntry(%d) = %v %v, want %v", n, got, ok, want)
		}
	}
	for _, n := range []int64{0, -1, 7} {
		if _, ok := m.NthEntry(n); ok {
			t.Errorf("NthEntry(%d) found an entry", n)
		}
		if _, ok := m.NthLastEntry(n); ok {
			t.Errorf("NthLastEntry(%d) found an entry", n)
		}
	}
}
