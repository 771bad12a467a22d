package broker

import (
	"fmt"
	"math"
	"testing"

	"github.com/isobar-mq/isobar/topic"
)

func TestBundleIndex(t *testing.T) {
	bs := topic.Bundles(4)
	for _, h := range []uint32{0, 1, 0x3fffffff, 0x40000000, 0x7fffffff, 0xbfffffff, 0xc0000000, math.MaxUint32} {
		want := -1
		for i, b := range bs {
			if b.Contains(h) {
				want = i
			}
		}
		if got := bundleIndex(bs, h); got != want || got < 0 {
			t.Errorf("bundleIndex(%#x) = %d, want %d", h, got, want)
		}
	}
	if got := bundleIndex(nil, 5); got != -1 {
		t.Errorf("bundleIndex(nil) = %d, want -1", got)
	}
}

// countsOf counts hashes by bundle the slow way.
func countsOf(bs []topic.Bundle, hs []uint32) map[topic.Bundle]int {
	out := map[topic.Bundle]int{}
	for _, h := range hs {
		for _, b := range bs {
			if b.Contains(h) {
				out[b]++
			}
		}
	}
	return out
}

func TestBundleCounts(t *testing.T) {
	var c bundleCounts
	four := topic.Bundles(4)
	var hs []uint32
	for i := range 100 {
		n, err := topic.Parse(fmt.Sprintf("persistent://t/ns/x-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, topic.Hash(n))
	}
	check := func(what string, bs []topic.Bundle, live []uint32) {
		t.Helper()
		want := countsOf(bs, live)
		for _, b := range bs {
			if got := c.of("t/ns", b); got != want[b] {
				t.Errorf("%s: bundle %s: %d topics, want %d", what, b, got, want[b])
			}
		}
	}
	// Added while the bundles were not known: counted only by recount.
	c.add("t/ns", hs[0], nil, 1)
	if c.current("t/ns", four) {
		t.Fatal("counts current although a topic was added without bundles")
	}
	c.recount("t/ns", four, hs[:1])
	for _, h := range hs[1:] {
		c.add("t/ns", h, four, 1)
	}
	if !c.current("t/ns", four) || c.total != 100 {
		t.Fatalf("current %v, total %d; want true, 100", c.current("t/ns", four), c.total)
	}
	check("all added", four, hs)
	for _, h := range hs[:30] {
		c.add("t/ns", h, four, -1)
	}
	check("30 removed", four, hs[30:])
	// A split: the counts are stale until counted again.
	split := append([]topic.Bundle{{Lo: four[0].Lo, Hi: four[0].Lo + (four[0].Hi-four[0].Lo)/2}, {Lo: four[0].Lo + (four[0].Hi-four[0].Lo)/2, Hi: four[0].Hi}}, four[1:]...)
	if c.current("t/ns", split) {
		t.Fatal("counts current against other bundles")
	}
	c.recount("t/ns", split, hs[30:])
	check("after the split", split, hs[30:])
	c.add("t/ns", hs[0], split, 1)
	check("added after the split", split, append([]uint32{hs[0]}, hs[30:]...))
	// A topic added against the old bundles (read before the split) makes
	// the counts stale again.
	c.add("t/ns", hs[1], four, 1)
	if c.current("t/ns", split) {
		t.Fatal("counts current after an add against other bundles")
	}
	// The last topic gone: the namespace is forgotten.
	for _, h := range append([]uint32{hs[0], hs[1]}, hs[30:]...) {
		c.add("t/ns", h, split, -1)
	}
	if len(c.ns) != 0 || c.total != 0 {
		t.Fatalf("%d namespaces, %d topics left; want none", len(c.ns), c.total)
	}
}
