package policy

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/isobar-mq/isobar/topic"
)

// List returns the namespace's bundles: the ranges between its
// boundaries, or NumBundles equal ranges when there are no boundaries
// (a nil BundlesData or one that does not read: topic.DefaultBundles).
// The broker places topics by it.
func (b *BundlesData) List() []topic.Bundle {
	if b == nil {
		return topic.Bundles(topic.DefaultBundles)
	}
	if len(b.Boundaries) == 0 {
		if b.NumBundles <= 0 || b.NumBundles > topic.MaxBundles {
			return topic.Bundles(topic.DefaultBundles)
		}
		return topic.Bundles(b.NumBundles)
	}
	bounds := make([]uint32, len(b.Boundaries))
	for i, s := range b.Boundaries {
		v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(s), "0x"), 16, 32)
		if err != nil {
			return topic.Bundles(b.NumBundles)
		}
		bounds[i] = uint32(v)
	}
	bs, err := topic.FromBoundaries(bounds)
	if err != nil {
		return topic.Bundles(b.NumBundles)
	}
	return bs
}

// BundlesDataOf is the BundlesData of bundles, which must tile the hash
// space in order (as topic.Replace returns them).
func BundlesDataOf(bundles []topic.Bundle) *BundlesData {
	d := &BundlesData{NumBundles: len(bundles)}
	for _, v := range topic.Boundaries(bundles) {
		d.Boundaries = append(d.Boundaries, fmt.Sprintf("0x%08x", v))
	}
	return d
}
