package roles

import (
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	for _, ok := range []string{"us-east", "a", "eu-west-2"} {
		if !ValidName(ok) {
			t.Errorf("%q rejected", ok)
		}
	}
	for _, bad := range []string{"", "US", "a_b", "-a", "a-", strings.Repeat("a", 64)} {
		if ValidName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}
