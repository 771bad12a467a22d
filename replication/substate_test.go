package replication

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
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

// regionLogs builds the logs of regions A and B as a region stores them:
// each entry's own position is its place in its region's log, a
// message's identity is its origin and its position there, and each
// region holds the other's messages in the other's order, interleaved at
// random with its own. A has received the first recvB of B's nB
// messages; B's log is returned whole (every message of A received) and
// as the prefix it had when it had received only recvA of them.
func regionLogs(rng *rand.Rand, nA, nB, recvA, recvB int) (logA, fullB, partB []Identity) {
	pos := func(i int) Position { return Position{Ledger: 1 + int64(i/50), Entry: int64(i % 50)} }
	// Where each region's own messages sit: decided first, as their
	// identities are their positions.
	pattern := func(own, in int) []bool {
		var out []bool
		for own > 0 || in > 0 {
			mine := in == 0 || own > 0 && rng.Intn(2) == 0
			out = append(out, mine)
			if mine {
				own--
			} else {
				in--
			}
		}
		return out
	}
	pa, pb := pattern(nA, recvB), pattern(nB, nA)
	var ownA, ownB []Identity
	for i, mine := range pa {
		if mine {
			ownA = append(ownA, Identity{"A", pos(i)})
		}
	}
	for i, mine := range pb {
		if mine {
			ownB = append(ownB, Identity{"B", pos(i)})
		}
	}
	fill := func(p []bool, own, in []Identity) []Identity {
		out := make([]Identity, len(p))
		i, j := 0, 0
		for k, mine := range p {
			if mine {
				out[k], i = own[i], i+1
			} else {
				out[k], j = in[j], j+1
			}
		}
		return out
	}
	logA, fullB = fill(pa, ownA, ownB), fill(pb, ownB, ownA)
	// B's prefix holding recvA of A's messages.
	n, k := 0, 0
	for k < len(fullB) && (fullB[k].Origin == "B" || n < recvA) {
		if fullB[k].Origin == "A" {
			n++
		}
		k++
	}
	return logA, fullB, fullB[:k]
}

// TestStateBuilderAndApplierModel checks the code brokers run (docs/failover.md):
// region A computes a subscription's state with a StateBuilder from its
// mark-delete position and a walk of its log, possibly cut short, and
// region B applies it with an Applier, walking its own log from its own
// mark-delete position, first with only part of A's messages, then with
// all. B acknowledges exactly what A acknowledged when A's walk reached
// the end (or every origin and acknowledgement it needed), and never a
// message A did not acknowledge when it was cut short.
func TestStateBuilderAndApplierModel(t *testing.T) {
	for seed := int64(1); seed <= 500; seed++ {
		rng := rand.New(rand.NewSource(seed))
		nA, nB := 1+rng.Intn(150), rng.Intn(150)
		recvB := rng.Intn(nB + 1)
		logA, fullB, partB := regionLogs(rng, nA, nB, nA, recvB)
		posA := func(i int) Position { return Position{Ledger: 1 + int64(i/50), Entry: int64(i % 50)} }
		// A's acknowledgements: a mark-delete index k, some beyond it.
		k := rng.Intn(len(logA)+1) - 1
		acked := map[Identity]bool{}
		ackedAt := map[int]bool{}
		for i := 0; i <= k; i++ {
			acked[logA[i]] = true
		}
		lastAcked := k
		partial := map[Identity][]int64{} // batch messages acknowledged in part
		for i := k + 1; i < len(logA); i++ {
			switch rng.Intn(4) {
			case 0:
				acked[logA[i]], ackedAt[i] = true, true
				lastAcked = i
			case 1:
				partial[logA[i]] = []int64{1 + rng.Int63n(1<<20)}
				lastAcked = i
			}
		}
		// What A stores from B: the last of B's messages in A's log; and
		// A's own last message.
		stored := map[string]Position{}
		for _, id := range logA {
			stored[id.Origin] = id.Pos
		}
		md := Position{Ledger: 1, Entry: -1}
		if k >= 0 {
			md = posA(k)
		}
		// A first state at an earlier mark-delete, walked to the end,
		// gives the frontier a cut-short walk falls back on.
		var prev map[string]Position
		if k >= 0 {
			k0 := rng.Intn(k + 1)
			b0 := NewStateBuilder("sub", "A", posA(k0), stored, nil)
			for i := k0 + 1; i < len(logA); i++ {
				b0.See(logA[i], false)
			}
			prev = b0.State(true).MarkDelete
		}
		limit := len(logA)
		if rng.Intn(3) == 0 {
			limit = rng.Intn(len(logA) + 1)
		}
		b := NewStateBuilder("sub", "A", md, stored, prev)
		i, walked := k+1, 0
		for ; i < len(logA) && walked < limit; i++ {
			b.See(logA[i], ackedAt[i])
			if r, ok := partial[logA[i]]; ok {
				b.SeePartial(logA[i], r)
			}
			walked++
			if i >= lastAcked && !b.NeedsMore() {
				i++
				break
			}
		}
		complete := i > lastAcked
		st := b.State(i >= len(logA))
		enc, err := EncodeSubState(st)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeSubState(enc)
		if err != nil {
			t.Fatal(err)
		}
		// B applies it from its mark-delete (nothing acknowledged), on
		// part of its log and then on all of it, keeping what it acked.
		ackedB := map[int]bool{}
		partialB := map[int][]int64{}
		apply := func(log []Identity) bool {
			a := NewApplier(&got)
			for j, id := range log {
				if a.See(id) {
					ackedB[j] = true
				} else if r := a.Partial(id); r != nil {
					partialB[j] = r
				}
				if a.Done() {
					break
				}
			}
			storedB := map[string]Position{}
			for _, id := range log {
				if id.Origin == "A" {
					storedB["A"] = id.Pos
				}
			}
			return a.Waiting("B", storedB)
		}
		if waiting := apply(partB); !waiting && len(partB) < len(fullB) {
			// Not waiting: nothing acknowledged in A is missing from partB.
			for _, id := range fullB[len(partB):] {
				if acked[id] {
					t.Fatalf("seed %d: not waiting, but %v (acknowledged in A) has not arrived", seed, id)
				}
			}
		}
		if apply(fullB) {
			t.Fatalf("seed %d: still waiting with every message of A stored", seed)
		}
		for j, id := range fullB {
			switch {
			case ackedB[j] && !acked[id]:
				t.Fatalf("seed %d: %v acknowledged in B, not in A", seed, id)
			case !ackedB[j] && acked[id] && complete && limit == len(logA):
				t.Fatalf("seed %d: %v acknowledged in A, not in B (mark-delete %d of %d)", seed, id, k, len(logA))
			case partialB[j] != nil && !slices.Equal(partialB[j], partial[id]):
				t.Fatalf("seed %d: %v acknowledged in part in B as %b, in A as %b", seed, id, partialB[j], partial[id])
			case partialB[j] == nil && partial[id] != nil && complete && limit == len(logA):
				t.Fatalf("seed %d: %v acknowledged in part in A, not in B", seed, id)
			}
		}
	}
}
