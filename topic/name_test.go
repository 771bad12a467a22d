package topic

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

var parseTests = []struct {
	in        string
	want      Name
	partition int
	base      string
}{
	{"persistent://my-tenant/my-ns/my-topic", Name{Persistent, "my-tenant", "my-ns", "my-topic"}, -1, "persistent://my-tenant/my-ns/my-topic"},
	{"non-persistent://my-tenant/my-ns/my-topic", Name{NonPersistent, "my-tenant", "my-ns", "my-topic"}, -1, "non-persistent://my-tenant/my-ns/my-topic"},
	{"my-topic", Name{Persistent, "public", "default", "my-topic"}, -1, "persistent://public/default/my-topic"},
	{"my-topic-1732871234", Name{Persistent, "public", "default", "my-topic-1732871234"}, -1, "persistent://public/default/my-topic-1732871234"},
	{"my-tenant/my-namespace/my-topic", Name{Persistent, "my-tenant", "my-namespace", "my-topic"}, -1, "persistent://my-tenant/my-namespace/my-topic"},
	{"my-topic-partition-5", Name{Persistent, "public", "default", "my-topic-partition-5"}, 5, "persistent://public/default/my-topic"},
	{"persistent://public/default/t-partition-0", Name{Persistent, "public", "default", "t-partition-0"}, 0, "persistent://public/default/t"},
	{"persistent://public/default/t-partition-2147483647", Name{Persistent, "public", "default", "t-partition-2147483647"}, 2147483647, "persistent://public/default/t"},
	{"persistent://public/default/a-partition-1-partition-2", Name{Persistent, "public", "default", "a-partition-1-partition-2"}, 2, "persistent://public/default/a-partition-1"},
	// Suffixes that are not a canonical partition index are plain names.
	{"persistent://public/default/t-partition-01", Name{Persistent, "public", "default", "t-partition-01"}, -1, "persistent://public/default/t-partition-01"},
	{"persistent://public/default/t-partition--1", Name{Persistent, "public", "default", "t-partition--1"}, -1, "persistent://public/default/t-partition--1"},
	{"persistent://public/default/t-partition-+1", Name{Persistent, "public", "default", "t-partition-+1"}, -1, "persistent://public/default/t-partition-+1"},
	{"persistent://public/default/t-partition-xyz", Name{Persistent, "public", "default", "t-partition-xyz"}, -1, "persistent://public/default/t-partition-xyz"},
	{"persistent://public/default/t-partition-2147483648", Name{Persistent, "public", "default", "t-partition-2147483648"}, -1, "persistent://public/default/t-partition-2147483648"},
	{"persistent://public/default/-partition-3", Name{Persistent, "public", "default", "-partition-3"}, 3, "persistent://public/default/"},
	{"persistent://public/default/t-partition-", Name{Persistent, "public", "default", "t-partition-"}, -1, "persistent://public/default/t-partition-"},
	// Characters.
	{"persistent://a.b:c=d_e/ns.1:x=y/t.v1:k=v", Name{Persistent, "a.b:c=d_e", "ns.1:x=y", "t.v1:k=v"}, -1, "persistent://a.b:c=d_e/ns.1:x=y/t.v1:k=v"},
	{"persistent://public/default/%41~!@$&*+,;()'", Name{Persistent, "public", "default", "%41~!@$&*+,;()'"}, -1, "persistent://public/default/%41~!@$&*+,;()'"},
	{"TestGetTopicPartitions-nopartitions", Name{Persistent, "public", "default", "TestGetTopicPartitions-nopartitions"}, -1, "persistent://public/default/TestGetTopicPartitions-nopartitions"},
	{"public/test-ns-123/topic-7-01", Name{Persistent, "public", "test-ns-123", "topic-7-01"}, -1, "persistent://public/test-ns-123/topic-7-01"},
	// Limits.
	{"persistent://" + strings.Repeat("t", MaxSegmentLen) + "/" + strings.Repeat("n", MaxNamespaceLen-MaxSegmentLen-1) + "/x",
		Name{Persistent, strings.Repeat("t", MaxSegmentLen), strings.Repeat("n", MaxNamespaceLen-MaxSegmentLen-1), "x"}, -1, ""},
	{"persistent://t/n/" + strings.Repeat("x", MaxNameLen-len("t/n/persistent/")),
		Name{Persistent, "t", "n", strings.Repeat("x", MaxNameLen-len("t/n/persistent/"))}, -1, ""},
	{"non-persistent://t/n/" + strings.Repeat("x", MaxNameLen-len("t/n/persistent/")),
		Name{NonPersistent, "t", "n", strings.Repeat("x", MaxNameLen-len("t/n/persistent/"))}, -1, ""},
}

func TestParse(t *testing.T) {
	for _, tt := range parseTests {
		got, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Parse(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
		if p := got.Partition(); p != tt.partition {
			t.Errorf("Parse(%q).Partition() = %d, want %d", tt.in, p, tt.partition)
		}
		if b := got.Base().String(); tt.base != "" && b != tt.base {
			t.Errorf("Parse(%q).Base() = %q, want %q", tt.in, b, tt.base)
		}
		if ns := got.NamespaceName(); ns != tt.want.Tenant+"/"+tt.want.Namespace {
			t.Errorf("Parse(%q).NamespaceName() = %q", tt.in, ns)
		}
		again, err := Parse(got.String())
		if err != nil || again != got {
			t.Errorf("Parse(%q) = %v, %v; want %v", got.String(), again, err, got)
		}
	}
}

func TestStringForms(t *testing.T) {
	for in, want := range map[string]string{
		"my-topic":                             "persistent://public/default/my-topic",
		"t/ns/x":                               "persistent://t/ns/x",
		"non-persistent://t/ns/x":              "non-persistent://t/ns/x",
		"persistent://public/default/my-topic": "persistent://public/default/my-topic",
	} {
		n, err := Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if n.String() != want {
			t.Errorf("Parse(%q).String() = %q, want %q", in, n.String(), want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	long := strings.Repeat("x", MaxSegmentLen+1)
	for _, tt := range []struct {
		in, wantMsg string
	}{
		{"", "empty"},
		{"invalid://my-tenant/my-ns/my-topic", `unknown domain "invalid"`},
		{"Persistent://t/ns/x", `unknown domain "Persistent"`},
		{"://t/ns/x", `unknown domain ""`},
		{"persistent://", "want [domain://]tenant/namespace/topic"},
		{"persistent://my-tenant", "want [domain://]tenant/namespace/topic"},
		{"persistent://my-tenant/my-namespace", "want [domain://]tenant/namespace/topic"},
		{"my-tenant/my-namespace", "want [domain://]tenant/namespace/topic"},
		{"persistent://my-tenant/my-cluster/my-ns/my-topic", "legacy name with a cluster"},
		{"my-tenant/my-cluster/my-ns/my-topic", "legacy name with a cluster"},
		{"my-tenant/my-ns/my-topic-partition-xyz/invalid", "legacy name with a cluster"},
		{"persistent://public/default/a/b/c", "legacy name with a cluster"},
		{"persistent://public/default/", "empty topic"},
		{"persistent:///tenant/namespace/fail", "empty tenant"},
		{"persistent://public//x", "empty namespace"},
		{"/ns/x", "empty tenant"},
		{"persistent://t/ns/x y", `bad character ' ' at byte 1`},
		{"persistent://t/ns/x?y", `bad character '?'`},
		{"persistent://t/ns/x#y", `bad character '#'`},
		{"persistent://t/ns/x\\y", `bad character '\\'`},
		{"persistent://t/ns/x\x00", `bad character '\x00'`},
		{"persistent://t/ns/tópico", `bad character '\xc3'`},
		{"persistent://t/ns/.", `topic may not be "."`},
		{"persistent://t/ns/..", `topic may not be ".."`},
		{"persistent://t/../x", `namespace may not be ".."`},
		{"persistent://t%/ns/x", `tenant has a bad character '%'`},
		{"persistent://t/n s/x", `namespace has a bad character ' '`},
		{"persistent://t/ns*/x", `namespace has a bad character '*'`},
		{"persistent://" + long + "/ns/x", "tenant is 129 bytes, longer than 128"},
		{"persistent://t/" + long + "/x", "namespace is 129 bytes, longer than 128"},
		{"persistent://t/n/" + strings.Repeat("x", MaxNameLen-len("t/n/persistent/")+1), "257 bytes as storage keeps it (tenant/namespace/persistent/topic), longer than 256"},
		{"non-persistent://t/n/" + strings.Repeat("x", MaxNameLen-len("t/n/persistent/")+1), "longer than 256"},
		{"persistent://public/default/" + strings.Repeat("x", 300), "326 bytes as storage keeps it"},
		{"persistent://" + strings.Repeat("t", MaxSegmentLen) + "/" + strings.Repeat("n", MaxSegmentLen) + "/x", "tenant/namespace is 257 bytes, longer than 243"},
		{"persistent:/t/ns/x", "legacy name with a cluster"}, // no "://": four parts
		{" my-topic", `bad character ' '`},
	} {
		_, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want error %q", tt.in, tt.wantMsg)
			continue
		}
		if !errors.Is(err, ErrInvalidName) {
			t.Errorf("Parse(%q) = %v, not ErrInvalidName", tt.in, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, tt.wantMsg) {
			t.Errorf("Parse(%q) = %q, want it to contain %q", tt.in, msg, tt.wantMsg)
		}
		if !strings.Contains(msg, quote(tt.in)) {
			t.Errorf("Parse(%q) = %q, does not quote the input", tt.in, msg)
		}
	}
}

func quote(s string) string { return strconv.Quote(s) }

func TestPartitioned(t *testing.T) {
	n, err := Parse("persistent://t/ns/orders")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{
		"persistent://t/ns/orders-partition-0",
		"persistent://t/ns/orders-partition-1",
		"persistent://t/ns/orders-partition-2",
	} {
		p := n.Partitioned(i)
		if p.String() != want || p.Partition() != i || p.Base() != n {
			t.Errorf("Partitioned(%d) = %v (partition %d, base %v)", i, p, p.Partition(), p.Base())
		}
		if p.Base().Partitioned(7).String() != "persistent://t/ns/orders-partition-7" {
			t.Errorf("Base().Partitioned(7) = %v", p.Base().Partitioned(7))
		}
		if got := p.Partitioned(7).String(); got != want+"-partition-7" {
			t.Errorf("Partitioned of a partition = %v, want a second suffix", got)
		}
		if q, err := Parse(p.String()); err != nil || q != p {
			t.Errorf("Parse(%q) = %v, %v", p, q, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Partitioned(-1) did not panic")
		}
	}()
	n.Partitioned(-1)
}

func TestParseNamespace(t *testing.T) {
	for _, tt := range []struct {
		in, tenant, ns string
	}{
		{"public/default", "public", "default"},
		{"my-tenant/ns.v1:a=b_c", "my-tenant", "ns.v1:a=b_c"},
	} {
		tn, ns, err := ParseNamespace(tt.in)
		if err != nil || tn != tt.tenant || ns != tt.ns {
			t.Errorf("ParseNamespace(%q) = %q, %q, %v", tt.in, tn, ns, err)
		}
	}
	for _, tt := range []struct {
		in, wantMsg string
	}{
		{"", "want tenant/namespace"},
		{"public", "want tenant/namespace"},
		{"public/", "empty namespace"},
		{"/default", "empty tenant"},
		{"t/cluster/ns", "legacy namespace with a cluster"},
		{"t/ns%", "namespace has a bad character '%'"},
		{"t!/ns", "tenant has a bad character '!'"},
		{"t/..", `namespace may not be ".."`},
		{"t/" + strings.Repeat("n", MaxSegmentLen+1), "longer than 128"},
		{strings.Repeat("t", MaxSegmentLen) + "/" + strings.Repeat("n", MaxNamespaceLen-MaxSegmentLen), "longer than 243"},
	} {
		_, _, err := ParseNamespace(tt.in)
		if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), tt.wantMsg) || !strings.Contains(err.Error(), quote(tt.in)) {
			t.Errorf("ParseNamespace(%q) = %v, want ErrInvalidName containing %q and the input", tt.in, err, tt.wantMsg)
		}
	}
}

func TestValidTenant(t *testing.T) {
	for _, ok := range []string{"public", "my-tenant", "a.b:c=d_E9", strings.Repeat("t", MaxSegmentLen)} {
		if err := ValidTenant(ok); err != nil {
			t.Errorf("ValidTenant(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", "é", "a%", strings.Repeat("t", MaxSegmentLen+1)} {
		err := ValidTenant(bad)
		if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), quote(bad)) {
			t.Errorf("ValidTenant(%q) = %v, want ErrInvalidName quoting the input", bad, err)
		}
	}
}

// The one name rule: a name is valid when storage can keep it, and a
// partitioned topic when storage can keep all its partitions (the
// 225-character partitioned topic of the hardening issue was accepted
// while none of its partitions could be created).
func TestStorageNameAndPartitions(t *testing.T) {
	n, err := Parse("persistent://public/default/x")
	if err != nil {
		t.Fatal(err)
	}
	if got := n.StorageName(); got != "public/default/persistent/x" {
		t.Fatalf("StorageName = %q", got)
	}
	np, _ := Parse("non-persistent://public/default/x")
	if np.StorageName() != n.StorageName() {
		t.Fatalf("domains differ in storage name: %q", np.StorageName())
	}
	for _, tt := range []struct {
		local string
		count int
		ok    bool
	}{
		{"x", 1, true},
		{"x", 1 << 30, true},
		{strings.Repeat("x", 225), 1, false}, // 251 bytes; its partition 0 is 263
		{strings.Repeat("x", 229), 0, true},  // not checked
		{strings.Repeat("x", MaxNameLen-len("public/default/persistent/")-len("-partition-9")), 10, true},
		{strings.Repeat("x", MaxNameLen-len("public/default/persistent/")-len("-partition-9")), 11, false},
	} {
		n, err := Parse("public/default/" + tt.local)
		if err != nil {
			t.Fatalf("Parse %d bytes: %v", len(tt.local), err)
		}
		err = n.ValidPartitions(tt.count)
		if (err == nil) != tt.ok {
			t.Errorf("%d bytes, %d partitions: %v, want ok %v", len(tt.local), tt.count, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("%v is not ErrInvalidName", err)
		}
		if err == nil && tt.count > 0 {
			if _, perr := Parse(n.Partitioned(tt.count - 1).String()); perr != nil {
				t.Errorf("valid for %d partitions, but the last one does not parse: %v", tt.count, perr)
			}
		}
	}
}

func TestInNamespace(t *testing.T) {
	n, err := Parse("persistent://acme/app/t-partition-1")
	if err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string]bool{
		"acme/app": true, "acme/ap": false, "acme/app2": false, "acm/app": false,
		"acme": false, "": false, "acme/app/x": false, "/app": false,
	} {
		if got := n.InNamespace(ns); got != want || got != (n.NamespaceName() == ns) {
			t.Errorf("InNamespace(%q) = %v, want %v", ns, got, want)
		}
	}
}
