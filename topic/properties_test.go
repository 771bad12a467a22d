package topic

import (
	"maps"
	"testing"
)

func TestMergeProperties(t *testing.T) {
	cur := map[string]string{"a": "1", "b": "22"}
	next, size := MergeProperties(cur, map[string]string{"c": "333"}, []string{"a"})
	if !maps.Equal(next, map[string]string{"b": "22", "c": "333"}) || size != 1+2+1+3 {
		t.Fatalf("merged %v size %d", next, size)
	}
	if !maps.Equal(cur, map[string]string{"a": "1", "b": "22"}) {
		t.Fatalf("cur changed: %v", cur)
	}
	if next, size := MergeProperties(cur, nil, []string{"a", "b"}); next != nil || size != 0 {
		t.Fatalf("emptied: %v %d, want nil 0", next, size)
	}
}
