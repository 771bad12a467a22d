package topic

import (
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"testing"
)

func TestBundlesDefault(t *testing.T) {
	var got []string
	for _, b := range Bundles(DefaultBundles) {
		got = append(got, b.String())
	}
	want := []string{
		"0x00000000_0x40000000",
		"0x40000000_0x80000000",
		"0x80000000_0xc0000000",
		"0xc0000000_0xffffffff",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Bundles(4) = %v, want %v", got, want)
	}
	if fmt.Sprint(Bundles(0)) != fmt.Sprint(Bundles(DefaultBundles)) {
		t.Errorf("Bundles(0) = %v, want the default", Bundles(0))
	}
}

func TestBundlesOdd(t *testing.T) {
	for n, want := range map[int]string{
		1: "[0x00000000_0xffffffff]",
		2: "[0x00000000_0x80000000 0x80000000_0xffffffff]",
		3: "[0x00000000_0x55555555 0x55555555_0xaaaaaaaa 0xaaaaaaaa_0xffffffff]",
	} {
		if got := fmt.Sprint(Bundles(n)); got != want {
			t.Errorf("Bundles(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestBundlesTooMany(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Bundles(MaxBundles+1) did not panic")
		}
	}()
	Bundles(MaxBundles + 1)
}

// TestBundlesTile checks that bundles tile [0, 2^32) and that every hash,
// including the edges, lands in exactly one bundle, the one BundleFor's
// search picks.
func TestBundlesTile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 4, 5, 7, 16, 100, 1000} {
		bs := Bundles(n)
		if len(bs) != n {
			t.Fatalf("Bundles(%d) has %d bundles", n, len(bs))
		}
		if bs[0].Lo != 0 || bs[n-1].Hi != math.MaxUint32 {
			t.Errorf("Bundles(%d) spans %v..%v", n, bs[0], bs[n-1])
		}
		for i := range bs {
			if bs[i].Lo >= bs[i].Hi {
				t.Errorf("Bundles(%d)[%d] = %v is empty", n, i, bs[i])
			}
			if i > 0 && bs[i].Lo != bs[i-1].Hi {
				t.Errorf("Bundles(%d): gap or overlap between %v and %v", n, bs[i-1], bs[i])
			}
		}
		hashes := []uint32{0, 1, math.MaxUint32, math.MaxUint32 - 1}
		for _, b := range bs {
			hashes = append(hashes, b.Lo, b.Lo-1, b.Hi, b.Hi-1)
		}
		for range 2000 {
			hashes = append(hashes, rng.Uint32())
		}
		for _, h := range hashes {
			in := -1
			for i, b := range bs {
				if b.Contains(h) {
					if in >= 0 {
						t.Fatalf("Bundles(%d): hash 0x%08x in %v and %v", n, h, bs[in], b)
					}
					in = i
				}
			}
			if in < 0 {
				t.Fatalf("Bundles(%d): hash 0x%08x in no bundle", n, h)
			}
			if got := search(bs, h); got != in {
				t.Fatalf("Bundles(%d): search(0x%08x) = %d, want %d", n, h, got, in)
			}
		}
	}
}

func TestBundleFor(t *testing.T) {
	bs := Bundles(DefaultBundles)
	base, err := Parse("persistent://public/default/orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []Name{base, base.Partitioned(0), base.Partitioned(1), base.Partitioned(2)} {
		h := crc32.ChecksumIEEE([]byte(n.String()))
		if Hash(n) != h {
			t.Errorf("Hash(%v) = 0x%08x, want CRC-32 of the full name 0x%08x", n, Hash(n), h)
		}
		b := BundleFor(n, bs)
		if !b.Contains(h) {
			t.Errorf("BundleFor(%v) = %v does not hold 0x%08x", n, b, h)
		}
	}
	// Short and full forms of one topic hash alike.
	short, _ := Parse("orders")
	if BundleFor(short, bs) != BundleFor(base, bs) || Hash(short) != Hash(base) {
		t.Error("short and full names hash differently")
	}
}

// TestBundleForPinned pins placements (CRC-32 IEEE of the full name, as
// Pulsar's java.util.zip.CRC32 computes it) so that a change of hash or
// name format, which would move topics between owners, is noticed.
func TestBundleForPinned(t *testing.T) {
	bs := Bundles(DefaultBundles)
	for _, tt := range []struct {
		name   string
		hash   uint32
		bundle string
	}{
		{"orders", 0xb135b9dc, "0x80000000_0xc0000000"},
		{"persistent://public/default/orders-partition-0", 0x5af6c8d5, "0x40000000_0x80000000"},
		{"persistent://public/default/orders-partition-1", 0x2df1f843, "0x00000000_0x40000000"},
		{"public/default/orders-partition-2", 0xb4f8a9f9, "0x80000000_0xc0000000"},
	} {
		n, err := Parse(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if h, b := Hash(n), BundleFor(n, bs).String(); h != tt.hash || b != tt.bundle {
			t.Errorf("%s: hash 0x%08x in %s, want 0x%08x in %s", n, h, b, tt.hash, tt.bundle)
		}
	}
}

func TestBundleForSpread(t *testing.T) {
	bs := Bundles(DefaultBundles)
	counts := map[Bundle]int{}
	const n = 4000
	for i := range n {
		name, err := Parse(fmt.Sprintf("my-topic-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		counts[BundleFor(name, bs)]++
	}
	for _, b := range bs {
		if c := counts[b]; c < n/4*8/10 || c > n/4*12/10 {
			t.Errorf("bundle %v got %d of %d topics", b, c, n)
		}
	}
}

func TestBundleForNoBundle(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("BundleFor with no bundles did not panic")
		}
	}()
	BundleFor(Name{Persistent, "t", "ns", "x"}, nil)
}
