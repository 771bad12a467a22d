package mledger

import (
	"strings"
	"testing"
)

// TestConfigProblems: the quorums of new ledgers are checked against
// each other with the defaults applied, and every problem names its key
// under the prefix given.
func TestConfigProblems(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want []string // one per problem; none: valid
	}{
		{Config{}, nil},
		{Config{EnsembleSize: 1}, nil},
		{Config{EnsembleSize: 3, WriteQuorum: 3, AckQuorum: 2}, nil},
		{Config{EnsembleSize: 2, WriteQuorum: 3}, []string{"x.writeQuorum: 3 exceeds x.ensembleSize: 2"}},
		{Config{WriteQuorum: 3}, []string{"x.writeQuorum: 3 exceeds x.ensembleSize: 2 (the default)"}},
		{Config{EnsembleSize: 3, WriteQuorum: 2, AckQuorum: 3}, []string{"x.ackQuorum: 3 exceeds x.writeQuorum: 2"}},
		{Config{EnsembleSize: 65}, []string{"x.ensembleSize: 65 is more than 64"}},
		{Config{EnsembleSize: -1, MaxLedgerAge: -1}, []string{"x.maxLedgerAge: -1ns is negative", "x.ensembleSize: -1 is negative"}},
	} {
		errs := tc.c.Problems("x.")
		if len(errs) != len(tc.want) {
			t.Errorf("%+v: %d problems %v, want %d", tc.c, len(errs), errs, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(errs[i].Error(), w) {
				t.Errorf("%+v: problem %q, want %q", tc.c, errs[i], w)
			}
		}
	}
}
