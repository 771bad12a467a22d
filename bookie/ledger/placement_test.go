package ledger

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func bookies(spec ...string) []BookieInfo {
	// spec: "id/rack", "id/rack/ro" for read-only, "id" for no rack.
	var out []BookieInfo
	for _, s := range spec {
		var b BookieInfo
		parts := splitSlash(s)
		b.ID, b.Address = parts[0], parts[0]
		if len(parts) > 1 {
			b.Rack = parts[1]
		}
		if len(parts) > 2 && parts[2] == "ro" {
			b.ReadOnly = true
		}
		out = append(out, b)
	}
	return out
}

func splitSlash(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func racksOf(cands []BookieInfo, ids []string) []string {
	var out []string
	for _, id := range ids {
		for _, b := range cands {
			if b.ID == id {
				out = append(out, b.Rack)
			}
		}
	}
	return out
}

func TestPlace(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cands     []BookieInfo
		n         int
		exclude   []string
		want      []string // nil: only check the error / racks
		wantRacks []string
		wantErr   error
	}{
		{name: "no racks, by id", cands: bookies("c", "a", "b", "d"), n: 3, want: []string{"a", "b", "c"}},
		{name: "exactly enough", cands: bookies("a", "b", "c"), n: 3, want: []string{"a", "b", "c"}},
		{name: "too few", cands: bookies("a", "b"), n: 3, wantErr: ErrNotEnoughBookies},
		{name: "read-only ones do not count", cands: bookies("a", "b/r/ro", "c"), n: 3, wantErr: ErrNotEnoughBookies},
		{name: "read-only skipped", cands: bookies("a", "b//ro", "c", "d"), n: 3, want: []string{"a", "c", "d"}},
		{name: "excluded skipped", cands: bookies("a", "b", "c", "d"), n: 3, exclude: []string{"a"}, want: []string{"b", "c", "d"}},
		{name: "duplicates count once", cands: bookies("a", "a", "b"), n: 3, wantErr: ErrNotEnoughBookies},
		{name: "one per rack first", cands: bookies("a1/r1", "a2/r1", "b1/r2", "b2/r2", "c1/r3", "c2/r3"), n: 3,
			want: []string{"a1", "b1", "c1"}, wantRacks: []string{"r1", "r2", "r3"}},
		{name: "racks alternate", cands: bookies("a1/r1", "a2/r1", "b1/r2", "b2/r2", "c1/r3", "c2/r3"), n: 6,
			wantRacks: []string{"r1", "r2", "r3", "r1", "r2", "r3"}},
		{name: "uneven racks", cands: bookies("a1/r1", "a2/r1", "a3/r1", "b1/r2"), n: 4,
			wantRacks: []string{"r1", "r2", "r1", "r1"}},
		{name: "two racks", cands: bookies("a1/r1", "a2/r1", "b1/r2", "b2/r2"), n: 4,
			wantRacks: []string{"r1", "r2", "r1", "r2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Place(tc.cands, tc.n, tc.exclude, nil)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.n {
				t.Fatalf("got %v, want %d bookies", got, tc.n)
			}
			if tc.want != nil && !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if tc.wantRacks != nil && !slices.Equal(racksOf(tc.cands, got), tc.wantRacks) {
				t.Errorf("racks %v, want %v", racksOf(tc.cands, got), tc.wantRacks)
			}
		})
	}
}

// TestPlaceRandomized checks the invariants over many seeds: distinct,
// writable, not excluded, and write sets spread over racks whenever the racks
// are balanced.
func TestPlaceRandomized(t *testing.T) {
	cands := bookies("a1/r1", "a2/r1", "a3/r1", "b1/r2", "b2/r2", "b3/r2", "c1/r3", "c2/r3", "c3/r3", "x/r3/ro")
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		got, err := Place(cands, 3, []string{"a1"}, rng)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, id := range got {
			if seen[id] || id == "a1" || id == "x" {
				t.Fatalf("seed %d: bad ensemble %v", seed, got)
			}
			seen[id] = true
		}
		r := racksOf(cands, got)
		if r[0] == r[1] || r[1] == r[2] || r[0] == r[2] {
			t.Fatalf("seed %d: ensemble %v on racks %v", seed, got, r)
		}
	}
}

func TestReplace(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cands    []BookieInfo
		ensemble []string
		failed   []int
		qw       int
		exclude  []string
		want     map[int]string
		wantErr  error
	}{
		{name: "only candidate", cands: bookies("a", "b", "c", "d"), ensemble: []string{"a", "b", "c"}, failed: []int{1}, qw: 2,
			want: map[int]string{1: "d"}},
		{name: "none outside the ensemble", cands: bookies("a", "b", "c"), ensemble: []string{"a", "b", "c"}, failed: []int{1}, qw: 2,
			wantErr: ErrNotEnoughBookies},
		{name: "excluded and read-only are no candidates", cands: bookies("a", "b", "c", "d", "e//ro"), ensemble: []string{"a", "b", "c"},
			failed: []int{0}, qw: 2, exclude: []string{"d"}, wantErr: ErrNotEnoughBookies},
		{name: "dead bookie not listed", cands: bookies("a", "c", "d"), ensemble: []string{"a", "b", "c"}, failed: []int{1}, qw: 2,
			want: map[int]string{1: "d"}},
		{name: "two failures, two candidates", cands: bookies("a", "b", "c", "d", "e"), ensemble: []string{"a", "b", "c"}, failed: []int{0, 2}, qw: 2,
			want: map[int]string{0: "d", 2: "e"}},
		{name: "two failures, one candidate", cands: bookies("a", "b", "c", "d"), ensemble: []string{"a", "b", "c"}, failed: []int{0, 2}, qw: 2,
			want: map[int]string{0: "d"}},
		{name: "prefers a rack the neighbours lack",
			cands:    bookies("a/r1", "b/r2", "c/r3", "d/r1", "e/r3", "f/r4"),
			ensemble: []string{"a", "b", "c"}, failed: []int{1}, qw: 2,
			want: map[int]string{1: "f"}},
		{name: "prefers the rack of the failed bookie over a neighbour's",
			cands:    bookies("a/r1", "b/r2", "c/r3", "d/r1", "e/r2"),
			ensemble: []string{"a", "b", "c"}, failed: []int{1}, qw: 2,
			want: map[int]string{1: "e"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Replace(tc.cands, tc.ensemble, tc.failed, tc.qw, tc.exclude, nil)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}
