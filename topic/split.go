package topic

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// The bundle split algorithms, by Pulsar's names (splitAlgorithmName).
const (
	SplitRangeEquallyDivide      = "range_equally_divide"
	SplitTopicCountEquallyDivide = "topic_count_equally_divide"
)

// ErrUnsplittable is returned for a bundle an algorithm cannot split: a
// range too narrow to halve, or fewer than two distinct topic hashes.
var ErrUnsplittable = errors.New("bundle cannot be split")

// SplitRange halves b at its middle hash (Pulsar's range_equally_divide):
// [Lo, mid) and [mid, Hi), where mid = Lo + (Hi-Lo)/2. A bundle fewer than
// two hashes wide is ErrUnsplittable.
func SplitRange(b Bundle) (Bundle, Bundle, error) {
	if b.Hi <= b.Lo || b.Hi-b.Lo < 2 {
		return Bundle{}, Bundle{}, fmt.Errorf("%w: %s is too small to split", ErrUnsplittable, b)
	}
	mid := b.Lo + (b.Hi-b.Lo)/2
	return Bundle{b.Lo, mid}, Bundle{mid, b.Hi}, nil
}

// SplitByTopicCount splits b so that each half holds about half of the
// given topic hashes (Pulsar's topic_count_equally_divide): sorted and
// without duplicates, the boundary lies just above the middle hash of the
// lower half, halfway to the first hash of the upper half. Hashes outside
// b are ignored; fewer than two distinct ones are ErrUnsplittable.
func SplitByTopicCount(b Bundle, hashes []uint32) (Bundle, Bundle, error) {
	var hs []uint32
	for _, h := range hashes {
		if b.Contains(h) {
			hs = append(hs, h)
		}
	}
	slices.Sort(hs)
	hs = slices.Compact(hs)
	if len(hs) < 2 {
		return Bundle{}, Bundle{}, fmt.Errorf("%w: %s holds %d topic(s) of distinct hashes; need at least 2", ErrUnsplittable, b, len(hs))
	}
	lo, hi := hs[len(hs)/2-1], hs[len(hs)/2]
	mid := lo + (hi-lo)/2 + 1 // lo < mid <= hi
	return Bundle{b.Lo, mid}, Bundle{mid, b.Hi}, nil
}

// Replace returns bundles with parent replaced by its two halves, lo and
// hi, which must tile it; an error when parent is not one of bundles.
func Replace(bundles []Bundle, parent, lo, hi Bundle) ([]Bundle, error) {
	i := slices.Index(bundles, parent)
	if i < 0 {
		return nil, fmt.Errorf("bundle %s is not one of the namespace's bundles", parent)
	}
	if lo.Lo != parent.Lo || lo.Hi != hi.Lo || hi.Hi != parent.Hi || lo.Hi <= lo.Lo || hi.Hi <= hi.Lo {
		return nil, fmt.Errorf("%s and %s do not split %s", lo, hi, parent)
	}
	if len(bundles)+1 > MaxBundles {
		return nil, fmt.Errorf("%w: a namespace has at most %d bundles", ErrUnsplittable, MaxBundles)
	}
	out := make([]Bundle, 0, len(bundles)+1)
	out = append(out, bundles[:i]...)
	out = append(out, lo, hi)
	return append(out, bundles[i+1:]...), nil
}

// FromBoundaries returns the bundles between ascending boundaries, the
// first 0 and the last 0xffffffff (Pulsar's BundlesData.boundaries); an
// error when they are not so.
func FromBoundaries(bounds []uint32) ([]Bundle, error) {
	if len(bounds) < 2 || len(bounds)-1 > MaxBundles {
		return nil, fmt.Errorf("%d boundaries: want 2 to %d", len(bounds), MaxBundles+1)
	}
	if bounds[0] != 0 || bounds[len(bounds)-1] != math.MaxUint32 {
		return nil, fmt.Errorf("boundaries run from 0x%08x to 0x%08x; want 0x00000000 to 0xffffffff", bounds[0], bounds[len(bounds)-1])
	}
	out := make([]Bundle, len(bounds)-1)
	for i := range out {
		if bounds[i+1] <= bounds[i] {
			return nil, fmt.Errorf("boundary %d (0x%08x) is not above the previous one", i+1, bounds[i+1])
		}
		out[i] = Bundle{bounds[i], bounds[i+1]}
	}
	return out, nil
}

// Boundaries is the inverse of FromBoundaries.
func Boundaries(bundles []Bundle) []uint32 {
	out := make([]uint32, 0, len(bundles)+1)
	for _, b := range bundles {
		out = append(out, b.Lo)
	}
	if len(bundles) > 0 {
		out = append(out, bundles[len(bundles)-1].Hi)
	}
	return out
}
