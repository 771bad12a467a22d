package topic

import (
	"errors"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, tt := range parseTests {
		f.Add(tt.in)
	}
	for _, s := range []string{
		"", "invalid://t/ns/x", "persistent://t/c/ns/x", "t/ns", "persistent://t/ns/x y",
		"persistent://public/default/", "non-persistent://t/ns/x-partition-3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("Parse(%q) = %v, not ErrInvalidName", s, err)
			}
			return
		}
		again, err := Parse(n.String())
		if err != nil || again != n {
			t.Fatalf("Parse(%q) = %#v, but Parse(%q) = %#v, %v", s, n, n.String(), again, err)
		}
		if p := n.Partition(); p >= 0 {
			if n.Base().Partitioned(p) != n {
				t.Fatalf("%v: Base().Partitioned(%d) = %v", n, p, n.Base().Partitioned(p))
			}
		} else if n.Base() != n {
			t.Fatalf("%v: not a partition but Base() = %v", n, n.Base())
		}
		if l := len(n.StorageName()); l > MaxNameLen {
			t.Fatalf("Parse(%q) accepted a storage name of %d bytes", s, l)
		}
		if p := n.Partition(); p >= 0 && n.Base().ValidPartitions(p+1) != nil {
			t.Fatalf("%v parses, but its base is not valid for %d partitions", n, p+1)
		}
		tn, ns, err := ParseNamespace(n.NamespaceName())
		if err != nil || tn != n.Tenant || ns != n.Namespace {
			t.Fatalf("ParseNamespace(%q) = %q, %q, %v", n.NamespaceName(), tn, ns, err)
		}
		_ = BundleFor(n, Bundles(DefaultBundles))
	})
}
