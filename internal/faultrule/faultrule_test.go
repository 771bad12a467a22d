package faultrule

import (
	"slices"
	"testing"
)

func TestFail(t *testing.T) {
	for _, c := range []struct {
		n      int64
		sticky bool
		want   []bool
	}{
		{0, false, []bool{false, false, false, false}},
		{2, false, []bool{false, true, false, false}},
		{2, true, []bool{false, true, true, true}},
		{1, false, []bool{true, false, false, false}},
	} {
		var k Counter
		var got []bool
		for range c.want {
			got = append(got, k.Fail(c.n, c.sticky))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("n %d sticky %v: %v, want %v", c.n, c.sticky, got, c.want)
		}
	}
	var k Counter
	k.Fail(1, true)
	k.Clear()
	if k.Fail(1, true) || k.Count() != 2 || k.Fired() != 1 {
		t.Fatalf("after Clear: count %d fired %d", k.Count(), k.Fired())
	}
}
