package replication

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// twoLogs builds the logs of regions A and B: each writes its own
// messages (origin positions (1, i)) and receives the other's in the
// other's order, interleaved at random; B has received only the first
// recvA of A's messages and A the first recvB of B's.
func twoLogs(rng *rand.Rand, nA, nB, recvA, recvB int) (logA, logB []Identity) {
	interleave := func(own []Identity, in []Identity) []Identity {
		var out []Identity
		i, j := 0, 0
		for i < len(own) || j < len(in) {
			if j == len(in) || (i < len(own) && rng.Intn(2) == 0) {
				out = append(out, own[i])
				i++
			} else {
				out = append(out, in[j])
				j++
			}
		}
		return out
	}
	mk := func(origin string, n int) []Identity {
		out := make([]Identity, n)
		for i := range out {
			out[i] = Identity{Origin: origin, Pos: Position{Ledger: 1 + int64(i/50), Entry: int64(i % 50)}}
		}
		return out
	}
	a, b := mk("A", nA), mk("B", nB)
	return interleave(a, b[:recvB]), interleave(b, a[:recvA])
}

// The model: acknowledgements made in region A (a mark-delete and
// individual acks beyond it, on A's interleaving of local and replicated
// messages) and shipped as a SubState acknowledge in region B exactly the
// same messages, by identity, on B's own interleaving; messages B does not
// have yet are acknowledged once they arrive; nothing else is.
func TestSubStateModel(t *testing.T) {
	for seed := int64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewSource(seed))
		nA, nB := 1+rng.Intn(120), rng.Intn(120)
		logA, fullB := twoLogs(rng, nA, nB, nA, nB)
		// A acknowledges: everything up to index k, and some beyond.
		k := rng.Intn(len(logA)+1) - 1
		ackedA := map[Identity]bool{}
		var f FrontierTracker
		for i := 0; i <= k; i++ {
			f.See(logA[i])
			ackedA[logA[i]] = true
		}
		s := SubState{Subscription: "sub", MarkDelete: f.Frontier()}
		for i := k + 1; i < len(logA); i++ {
			if rng.Intn(3) == 0 {
				ackedA[logA[i]] = true
				s.Acked = append(s.Acked, logA[i])
			}
		}
		b, err := EncodeSubState(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeSubState(b)
		if err != nil {
			t.Fatal(err)
		}
		// B has received only part of A's messages so far: apply, then
		// let the rest arrive and apply again.
		recv := rng.Intn(nA + 1)
		_, partB := twoLogs(rand.New(rand.NewSource(seed)), nA, nB, recv, nB)
		check := func(logB []Identity) {
			acked := map[int]bool{}
			for _, i := range got.AckedIn(logB) {
				acked[i] = true
			}
			for i, id := range logB {
				if acked[i] != ackedA[id] {
					t.Fatalf("seed %d: message %v at %d in B: acknowledged %v, in A %v", seed, id, i, acked[i], ackedA[id])
				}
			}
		}
		check(partB)
		check(fullB)
	}
}

func TestSubStateDecodeRefuses(t *testing.T) {
	many := make([]string, 0, MaxSubStateAcked+1)
	for i := range MaxSubStateAcked + 1 {
		many = append(many, fmt.Sprintf(`{"o":"A","p":{"l":1,"e":%d}}`, i))
	}
	for _, c := range []struct{ in, want string }{
		{`{`, "unexpected end"},
		{`{"subscription":"","markDelete":{}}`, "subscription name"},
		{`{"subscription":"s","markDelete":{"":{"l":1,"e":1}}}`, "mark-delete"},
		{`{"subscription":"s","markDelete":{},"acked":[{"o":"A","p":{"l":-5,"e":1}}]}`, "acknowledged message"},
		{`{"subscription":"s","markDelete":{},"acked":[` + strings.Join(many, ",") + `]}`, "at most 10000"},
	} {
		_, err := DecodeSubState([]byte(c.in))
		if !errors.Is(err, ErrBadSubState) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.60s: %v, want it to say %q", c.in, err, c.want)
		}
	}
}

func FuzzDecodeSubState(f *testing.F) {
	f.Add([]byte(`{"subscription":"s","markDelete":{"A":{"l":1,"e":2}},"acked":[{"o":"B","p":{"l":3,"e":4}}]}`))
	f.Add([]byte(`{"subscription":"s","markDelete":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSubState(b)
		if err != nil {
			return
		}
		again, err := EncodeSubState(s)
		if err != nil {
			t.Fatalf("a decoded state does not encode: %v", err)
		}
		if _, err := DecodeSubState(again); err != nil {
			t.Fatalf("re-encoded state refused: %v", err)
		}
	})
}
