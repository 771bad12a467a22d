package ledger

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/isobar-mq/isobar/bookie/racks"
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
			got, err := Place(tc.cands, tc.n, tc.exclude, Affinity{}, nil)
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
		got, err := Place(cands, 3, []string{"a1"}, Affinity{}, rng)
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
			got, err := Replace(tc.cands, tc.ensemble, tc.failed, tc.qw, tc.exclude, Affinity{}, nil)
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

// inGroup is bookies(spec...) in group g.
func inGroup(g string, spec ...string) []BookieInfo {
	out := bookies(spec...)
	for i := range out {
		out[i].Group = g
	}
	return out
}

func groupsOf(cands []BookieInfo, ids []string) []string {
	var out []string
	for _, id := range ids {
		for _, b := range cands {
			if b.ID == id {
				out = append(out, b.Group)
			}
		}
	}
	return out
}

// TestPlaceAffinity: the tiers of Affinity, as Pulsar's
// IsolatedBookieEnsemblePlacementPolicy chooses bookies: the primary
// groups', the secondary groups' only when the primary groups have fewer
// live bookies than the ensemble, those of no group, never another
// group's.
func TestPlaceAffinity(t *testing.T) {
	g1g2 := slices.Concat(inGroup("g1", "a", "b"), inGroup("g2", "c", "d"))
	g1 := Affinity{Primary: []string{"g1"}}
	g1then2 := Affinity{Primary: []string{"g1"}, Secondary: []string{"g2"}}
	for _, tc := range []struct {
		name       string
		cands      []BookieInfo
		n          int
		exclude    []string
		a          Affinity
		want       []string // nil: only check the groups / error
		wantGroups []string
		wantErr    error
	}{
		{name: "primary only", cands: g1g2, n: 2, a: g1, want: []string{"a", "b"}},
		{name: "primary enough: secondary unused", cands: g1g2, n: 2, a: g1then2, want: []string{"a", "b"}},
		{name: "primary short: secondary fills", cands: g1g2, n: 3, a: g1then2, wantGroups: []string{"g1", "g1", "g2"}},
		{name: "primary short, no secondary: error", cands: g1g2, n: 3, a: g1, wantErr: ErrNotEnoughBookies},
		{name: "both short: error, no fallback", cands: slices.Concat(g1g2, inGroup("g3", "e")), n: 5, a: g1then2, wantErr: ErrNotEnoughBookies},
		{name: "several primary groups", cands: slices.Concat(g1g2, inGroup("g3", "e")), n: 3,
			a: Affinity{Primary: []string{"g1", "g3"}}, want: []string{"a", "b", "e"}},
		{name: "no group: after the groups", cands: slices.Concat(g1g2, bookies("x")), n: 3, a: g1, want: []string{"a", "b", "x"}},
		{name: "no group: after the secondary", cands: slices.Concat(g1g2, bookies("x")), n: 4, a: g1then2, wantGroups: []string{"g1", "g1", "g2", "g2"}},
		{name: "unknown group: only bookies of no group", cands: slices.Concat(g1g2, bookies("x", "y")), n: 2,
			a: Affinity{Primary: []string{"nope"}}, want: []string{"x", "y"}},
		{name: "read-only primary does not count", cands: slices.Concat(inGroup("g1", "a", "b//ro"), inGroup("g2", "c", "d")), n: 2,
			a: g1then2, wantGroups: []string{"g1", "g2"}},
		{name: "excluded primary still counts as live", cands: g1g2, n: 2, exclude: []string{"a"}, a: g1then2,
			wantErr: ErrNotEnoughBookies},
		{name: "no affinity: any group", cands: g1g2, n: 4, want: []string{"a", "b", "c", "d"}},
		{name: "racks within the tier", cands: inGroup("g1", "a/r1", "b/r1", "c/r2", "d/r3"), n: 3, a: g1,
			want: []string{"a", "c", "d"}},
		{name: "later tier starts on an unused rack",
			cands: slices.Concat(inGroup("g1", "a/r1", "b/r2"), inGroup("g2", "c/r1", "d/r2", "e/r3")), n: 3, a: g1then2,
			want: []string{"a", "b", "e"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Place(tc.cands, tc.n, tc.exclude, tc.a, nil)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got %v, err %v, want %v", got, err, tc.wantErr)
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
			if tc.wantGroups != nil && !slices.Equal(groupsOf(tc.cands, got), tc.wantGroups) {
				t.Errorf("got %v in groups %v, want %v", got, groupsOf(tc.cands, got), tc.wantGroups)
			}
		})
	}
}

// TestReplaceAffinity: replacements come from the same tiers, the
// primary groups' first whatever the racks.
func TestReplaceAffinity(t *testing.T) {
	g1then2 := Affinity{Primary: []string{"g1"}, Secondary: []string{"g2"}}
	for _, tc := range []struct {
		name     string
		cands    []BookieInfo
		ensemble []string
		failed   []int
		a        Affinity
		want     map[int]string
		wantErr  error
	}{
		{name: "primary has a spare", cands: slices.Concat(inGroup("g1", "a", "b", "c"), inGroup("g2", "d")),
			ensemble: []string{"a", "b"}, failed: []int{1}, a: g1then2, want: map[int]string{1: "c"}},
		{name: "primary has a spare on the neighbour's rack: still preferred",
			cands:    slices.Concat(inGroup("g1", "a/r1", "b/r2", "c/r1"), inGroup("g2", "d/r3")),
			ensemble: []string{"a", "b"}, failed: []int{1}, a: g1then2, want: map[int]string{1: "c"}},
		{name: "primary bookie dead: secondary", cands: slices.Concat(inGroup("g1", "a"), inGroup("g2", "d")),
			ensemble: []string{"a", "b"}, failed: []int{1}, a: g1then2, want: map[int]string{1: "d"}},
		{name: "primary bookie alive but failing: primary counts E live, no secondary",
			cands:    slices.Concat(inGroup("g1", "a", "b"), inGroup("g2", "d")),
			ensemble: []string{"a", "b"}, failed: []int{1}, a: g1then2, wantErr: ErrNotEnoughBookies},
		{name: "no secondary: none", cands: slices.Concat(inGroup("g1", "a"), inGroup("g2", "d")),
			ensemble: []string{"a", "b"}, failed: []int{1}, a: Affinity{Primary: []string{"g1"}}, wantErr: ErrNotEnoughBookies},
		{name: "no group before another group: never", cands: slices.Concat(inGroup("g1", "a"), inGroup("g3", "z"), bookies("x")),
			ensemble: []string{"a", "b"}, failed: []int{1}, a: Affinity{Primary: []string{"g1"}}, want: map[int]string{1: "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Replace(tc.cands, tc.ensemble, tc.failed, 2, nil, tc.a, nil)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got %v, err %v, want %v", got, err, tc.wantErr)
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

// TestWithRacks: racks-info's group and rack win over the configured
// ones; an entry without a rack keeps the configured rack.
func TestWithRacks(t *testing.T) {
	bs := slices.Concat(inGroup("cfg", "a/r1"), bookies("b/r2", "c/r3"))
	got := WithRacks(bs, racks.Config{"g1": {"a": {Rack: "/x"}}, "g2": {"b": {}}})
	want := []BookieInfo{
		{ID: "a", Address: "a", Rack: "/x", Group: "g1"},
		{ID: "b", Address: "b", Rack: "r2", Group: "g2"},
		{ID: "c", Address: "c", Rack: "r3"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if bs[0].Group != "cfg" || bs[0].Rack != "r1" {
		t.Fatalf("the input changed: %+v", bs[0])
	}
}
