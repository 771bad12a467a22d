package topic

import (
	"fmt"
	"hash/crc32"
	"math"
	"sort"
)

// DefaultBundles is the number of bundles a new namespace gets, like
// Pulsar's defaultNumberOfNamespaceBundles.
const DefaultBundles = 4

// MaxBundles bounds the number of bundles of a namespace.
const MaxBundles = 1 << 16

// Bundle is a range of the 32-bit hash space: [Lo, Hi), except that the
// last bundle of a namespace (Hi == 0xffffffff) also holds Hi.
type Bundle struct {
	Lo, Hi uint32
}

// String formats b as Pulsar names bundles: "0x00000000_0x40000000".
func (b Bundle) String() string {
	return fmt.Sprintf("0x%08x_0x%08x", b.Lo, b.Hi)
}

// Contains reports whether hash h falls in b.
func (b Bundle) Contains(h uint32) bool {
	return b.Lo <= h && (h < b.Hi || h == math.MaxUint32 && b.Hi == math.MaxUint32)
}

// Bundles splits the hash space into n bundles in ascending order, each
// 2^32/n hashes wide except the last, which takes the rounding remainder
// and ends at 0xffffffff inclusive (as Pulsar's admin API computes
// boundaries). n <= 0 means DefaultBundles; n > MaxBundles panics.
func Bundles(n int) []Bundle {
	if n <= 0 {
		n = DefaultBundles
	}
	if n > MaxBundles {
		panic(fmt.Sprintf("topic: %d bundles, more than %d", n, MaxBundles))
	}
	seg := uint64(1<<32) / uint64(n)
	bs := make([]Bundle, n)
	for i := range bs {
		bs[i] = Bundle{Lo: uint32(seg * uint64(i)), Hi: uint32(seg * uint64(i+1))}
	}
	bs[n-1].Hi = math.MaxUint32
	return bs
}

// Hash is the bundle hash of a topic: CRC-32 (IEEE) of its full name in
// UTF-8, as Pulsar's namespace service places topics in bundles, so a topic
// lands in the bundle Pulsar would put it in. (Murmur3 is what Pulsar uses
// for message keys, not for bundles.)
func Hash(n Name) uint32 {
	return crc32.ChecksumIEEE([]byte(n.String()))
}

// BundleFor returns the bundle of bundles that holds Hash(n). bundles must
// be sorted and tile the hash space, as Bundles returns them; it panics if
// no bundle holds the hash.
func BundleFor(n Name, bundles []Bundle) Bundle {
	h := Hash(n)
	i := search(bundles, h)
	if i < 0 {
		panic(fmt.Sprintf("topic: no bundle holds hash 0x%08x of %s", h, n))
	}
	return bundles[i]
}

// search returns the index of the bundle of sorted bundles that holds h,
// or -1.
func search(bundles []Bundle, h uint32) int {
	i := sort.Search(len(bundles), func(i int) bool {
		return bundles[i].Hi > h || bundles[i].Hi == math.MaxUint32
	})
	if i == len(bundles) || !bundles[i].Contains(h) {
		return -1
	}
	return i
}
