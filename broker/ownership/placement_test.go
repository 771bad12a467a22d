package ownership

import (
	"fmt"
	"testing"
)

func TestPlace(t *testing.T) {
	key := "t/ns/0x00000000_0x40000000"
	// Which of two equal brokers wins depends on the key; compute it once
	// so the table states the rule rather than a hash value.
	tieWinner := "a"
	if score(key, "b") > score(key, "a") {
		tieWinner = "b"
	}
	tests := []struct {
		name  string
		cands []Candidate
		want  string
		ok    bool
	}{
		{"none", nil, "", false},
		{"one", []Candidate{{"a", 7, 0}}, "a", true},
		{"fewest wins", []Candidate{{"a", 3, 0}, {"b", 1, 0}, {"c", 2, 0}}, "b", true},
		{"fewest wins whatever the order", []Candidate{{"c", 2, 0}, {"b", 1, 0}, {"a", 3, 0}}, "b", true},
		{"tie broken by hash", []Candidate{{"a", 1, 0}, {"b", 1, 0}}, tieWinner, true},
		{"tie broken by hash, reversed", []Candidate{{"b", 1, 0}, {"a", 1, 0}}, tieWinner, true},
		{"loaded loser of the tie still loses", []Candidate{{"a", 1, 0}, {"b", 1, 0}, {"c", 2, 0}}, tieWinner, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Place(key, tt.cands)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Place = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestPlaceSpreads checks that ties go to different brokers for different
// bundles, roughly evenly, and that the answer does not depend on order.
func TestPlaceSpreads(t *testing.T) {
	ids := []string{"broker-1", "broker-2", "broker-3", "broker-4"}
	count := map[string]int{}
	const n = 4000
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("tenant/ns-%d/0x%08x_0x%08x", i%13, i, i+1)
		cands := make([]Candidate, len(ids))
		for j, id := range ids {
			cands[j] = Candidate{ID: id}
		}
		got, _ := Place(key, cands)
		for j := range cands { // reversed order, same answer
			cands[j] = Candidate{ID: ids[len(ids)-1-j]}
		}
		if again, _ := Place(key, cands); again != got {
			t.Fatalf("%s: %s in one order, %s in another", key, got, again)
		}
		count[got]++
	}
	for _, id := range ids {
		if c := count[id]; c < n/4*8/10 || c > n/4*12/10 {
			t.Errorf("%s got %d of %d bundles; want about %d", id, c, n, n/4)
		}
	}
}

// TestPlaceStable checks the rendezvous property: removing a broker moves
// only the bundles it would have had.
func TestPlaceStable(t *testing.T) {
	all := []Candidate{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	without := []Candidate{{ID: "a"}, {ID: "c"}}
	for i := 0; i < 500; i++ {
		key := fmt.Sprintf("t/n/%d", i)
		before, _ := Place(key, all)
		after, _ := Place(key, without)
		if before != "b" && after != before {
			t.Fatalf("%s moved from %s to %s when b left", key, before, after)
		}
	}
}

// TestPlaceAntiAffinity: a bundle of a namespace in an anti-affinity
// group goes to a broker that owns no bundle of another namespace of the
// group, however loaded; when every broker owns some, to those owning the
// fewest, and then by load as usual.
func TestPlaceAntiAffinity(t *testing.T) {
	key := "t/ns/0x00000000_0x40000000"
	tests := []struct {
		name  string
		cands []Candidate
		want  string
	}{
		{"the only free broker wins over lighter ones",
			[]Candidate{{ID: "a", Load: 0, AntiAffinity: 1}, {ID: "b", Load: 9, AntiAffinity: 0}, {ID: "c", Load: 1, AntiAffinity: 2}}, "b"},
		{"among free brokers, the least loaded",
			[]Candidate{{ID: "a", Load: 5}, {ID: "b", Load: 9}, {ID: "c", Load: 1, AntiAffinity: 1}}, "a"},
		{"every broker has one: the fewest, then load",
			[]Candidate{{ID: "a", Load: 0, AntiAffinity: 2}, {ID: "b", Load: 7, AntiAffinity: 1}, {ID: "c", Load: 3, AntiAffinity: 1}}, "c"},
		{"order does not matter",
			[]Candidate{{ID: "c", Load: 3, AntiAffinity: 1}, {ID: "b", Load: 7, AntiAffinity: 1}, {ID: "a", Load: 0, AntiAffinity: 2}}, "c"},
		{"no group: load alone",
			[]Candidate{{ID: "a", Load: 2}, {ID: "b", Load: 1}}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := Place(key, tt.cands); got != tt.want || !ok {
				t.Errorf("Place = %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}
