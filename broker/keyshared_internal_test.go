package broker

import (
	"testing"

	"github.com/isobar-mq/isobar/wire/pb"
)

// The auto-split ranges always cover the hash space, and a joining
// consumer takes the upper half of the largest range.
func TestKeyRangesSplitAndMerge(t *testing.T) {
	s := &subscription{subType: pb.CommandSubscribe_Key_Shared}
	a, b, c := &consumer{name: "a"}, &consumer{name: "b"}, &consumer{name: "c"}
	check := func(want ...keyRange) {
		t.Helper()
		if len(s.keyRanges) != len(want) {
			t.Fatalf("ranges %v, want %v", s.keyRanges, want)
		}
		for i := range want {
			if s.keyRanges[i] != want[i] {
				t.Fatalf("ranges %v, want %v", s.keyRanges, want)
			}
		}
	}
	s.keyAddLocked(a)
	check(keyRange{65535, a})
	s.keyAddLocked(b)
	check(keyRange{32767, a}, keyRange{65535, b})
	s.keyAddLocked(c)
	check(keyRange{16383, a}, keyRange{32767, c}, keyRange{65535, b})
	s.keyRemoveLocked(c) // its range goes to the next one
	check(keyRange{16383, a}, keyRange{65535, b})
	s.keyRemoveLocked(b) // the last range goes to the one before
	check(keyRange{65535, a})
}
