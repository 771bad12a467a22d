package payloadgen

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/sample.jsonl from the generator")

// sample is the checked-in sample: the first messages of each shape with
// seed 1.
func sample() []byte {
	var b bytes.Buffer
	for _, s := range append(append([]Shape{}, Shapes...), OrdersV2) {
		for _, m := range New(s, 1).Messages(3) {
			b.Write(m)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// TestSample checks that the generator still makes the checked-in
// sample, so that measurements on "the payload set" stay comparable.
func TestSample(t *testing.T) {
	path := filepath.Join("testdata", "sample.jsonl")
	got := sample()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the generator no longer makes %s (run with -update if the change is meant)", path)
	}
}

func TestShapes(t *testing.T) {
	for _, s := range append(append([]Shape{}, Shapes...), OrdersV2) {
		t.Run(string(s), func(t *testing.T) {
			msgs := New(s, 7).Messages(2000)
			var total, lo, hi int
			lo = 1 << 30
			seen := map[string]bool{}
			for _, m := range msgs {
				if !json.Valid(m) {
					t.Fatalf("invalid JSON: %s", m)
				}
				if seen[string(m)] {
					t.Fatalf("duplicate message %s", m)
				}
				seen[string(m)] = true
				total += len(m)
				lo, hi = min(lo, len(m)), max(hi, len(m))
			}
			t.Logf("%s: %d messages, sizes %d..%d, mean %d", s, len(msgs), lo, hi, total/len(msgs))
			if lo < 150 || hi > 2600 {
				t.Errorf("sizes %d..%d outside about 200 B..2 KiB", lo, hi)
			}
		})
	}
}
