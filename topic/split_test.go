package topic

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestSplitRange(t *testing.T) {
	tests := []struct {
		b      Bundle
		lo, hi Bundle
		err    bool
	}{
		{Bundle{0, 0x40000000}, Bundle{0, 0x20000000}, Bundle{0x20000000, 0x40000000}, false},
		{Bundle{0xc0000000, math.MaxUint32}, Bundle{0xc0000000, 0xdfffffff}, Bundle{0xdfffffff, math.MaxUint32}, false},
		{Bundle{10, 12}, Bundle{10, 11}, Bundle{11, 12}, false},
		{Bundle{10, 11}, Bundle{}, Bundle{}, true},
		{Bundle{10, 10}, Bundle{}, Bundle{}, true},
	}
	for _, tt := range tests {
		lo, hi, err := SplitRange(tt.b)
		if tt.err {
			if !errors.Is(err, ErrUnsplittable) {
				t.Errorf("SplitRange(%s) err %v; want ErrUnsplittable", tt.b, err)
			}
			continue
		}
		if err != nil || lo != tt.lo || hi != tt.hi {
			t.Errorf("SplitRange(%s) = %s %s %v; want %s %s", tt.b, lo, hi, err, tt.lo, tt.hi)
		}
	}
}

func TestSplitByTopicCount(t *testing.T) {
	b := Bundle{0, 0x40000000}
	lo, hi, err := SplitByTopicCount(b, []uint32{5, 100, 100, 7, 0x3fffffff, 0x50000000})
	// distinct in b: 5 7 100 0x3fffffff; the boundary lies in (7, 100].
	if err != nil || lo != (Bundle{0, 54}) || hi != (Bundle{54, 0x40000000}) {
		t.Fatalf("= %s %s %v", lo, hi, err)
	}
	// Each half holds half of the hashes.
	for _, h := range []uint32{5, 7} {
		if !lo.Contains(h) {
			t.Errorf("%d not in the lower half", h)
		}
	}
	for _, h := range []uint32{100, 0x3fffffff} {
		if !hi.Contains(h) {
			t.Errorf("%d not in the upper half", h)
		}
	}
	// Adjacent hashes still split.
	if lo, hi, err := SplitByTopicCount(b, []uint32{8, 9}); err != nil || lo.Hi != 9 || !lo.Contains(8) || !hi.Contains(9) {
		t.Errorf("adjacent: %s %s %v", lo, hi, err)
	}
	for _, hs := range [][]uint32{nil, {3}, {3, 3, 3}, {3, 0x50000000}} {
		if _, _, err := SplitByTopicCount(b, hs); !errors.Is(err, ErrUnsplittable) {
			t.Errorf("%v: err %v; want ErrUnsplittable", hs, err)
		}
	}
}

func TestReplaceAndBoundaries(t *testing.T) {
	bs := Bundles(4)
	lo, hi, _ := SplitRange(bs[1])
	got, err := Replace(bs, bs[1], lo, hi)
	if err != nil || len(got) != 5 || got[1] != lo || got[2] != hi || got[0] != bs[0] || got[4] != bs[3] {
		t.Fatalf("Replace = %v, %v", got, err)
	}
	if len(bs) != 4 || bs[1] != (Bundle{0x40000000, 0x80000000}) {
		t.Fatalf("Replace changed its input: %v", bs)
	}
	back, err := FromBoundaries(Boundaries(got))
	if err != nil || !slices.Equal(back, got) {
		t.Fatalf("FromBoundaries(Boundaries) = %v, %v", back, err)
	}
	if _, err := Replace(bs, Bundle{1, 2}, Bundle{1, 2}, Bundle{2, 2}); err == nil {
		t.Error("Replace of an unknown bundle succeeded")
	}
	if _, err := Replace(bs, bs[0], Bundle{0, 5}, Bundle{6, bs[0].Hi}); err == nil {
		t.Error("Replace with halves that do not tile succeeded")
	}
	for _, b := range [][]uint32{nil, {0}, {1, math.MaxUint32}, {0, 5}, {0, 5, 5, math.MaxUint32}} {
		if _, err := FromBoundaries(b); err == nil {
			t.Errorf("FromBoundaries(%v) succeeded", b)
		}
	}
}
