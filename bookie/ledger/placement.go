package ledger

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/isobar-mq/isobar/bookie/proto"
)

// BookieInfo is a bookie's registration under /isobar/<region>/bookies/<id>,
// as the bookie publishes it.
type BookieInfo = proto.Registration

// writable filters out read-only bookies and those listed in exclude, then
// orders the rest: shuffled by rng, or by id when rng is nil.
func writable(candidates []BookieInfo, exclude []string, rng *rand.Rand) []BookieInfo {
	var out []BookieInfo
	for _, b := range candidates {
		if b.ReadOnly || b.ID == "" || slices.Contains(exclude, b.ID) {
			continue
		}
		if slices.ContainsFunc(out, func(o BookieInfo) bool { return o.ID == b.ID }) {
			continue
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if rng != nil {
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

// Place chooses n writable bookies for a new ensemble, none of them in
// exclude. Consecutive ensemble positions take bookies from different racks
// in turn (round robin over racks), so every write set of up to as many
// bookies as there are racks spans distinct racks. rng spreads load over
// equivalent choices; nil makes the choice deterministic (by id).
func Place(candidates []BookieInfo, n int, exclude []string, rng *rand.Rand) ([]string, error) {
	usable := writable(candidates, exclude, rng)
	if len(usable) < n {
		return nil, fmt.Errorf("%w: need %d writable bookies, %d available", ErrNotEnoughBookies, n, len(usable))
	}
	var racks []string
	byRack := map[string][]BookieInfo{}
	for _, b := range usable {
		if _, ok := byRack[b.Rack]; !ok {
			racks = append(racks, b.Rack)
		}
		byRack[b.Rack] = append(byRack[b.Rack], b)
	}
	out := make([]string, 0, n)
	for len(out) < n {
		for _, r := range racks {
			if len(out) == n {
				break
			}
			if q := byRack[r]; len(q) > 0 {
				out = append(out, q[0].ID)
				byRack[r] = q[1:]
			}
		}
	}
	return out, nil
}

// Replace picks a replacement for each failed ensemble index: a writable
// bookie not in the ensemble and not in exclude, preferring one whose rack
// no bookie sharing a write set with that index (the qw−1 positions on either
// side) has. It returns the replacements it found, which may be fewer than
// asked for; with none it returns ErrNotEnoughBookies.
func Replace(candidates []BookieInfo, ensemble []string, failed []int, qw int, exclude []string, rng *rand.Rand) (map[int]string, error) {
	rackOf := map[string]string{}
	for _, b := range candidates {
		rackOf[b.ID] = b.Rack
	}
	usable := writable(candidates, append(slices.Clone(exclude), ensemble...), rng)
	cur := slices.Clone(ensemble)
	out := map[int]string{}
	for _, idx := range failed {
		if len(usable) == 0 {
			break
		}
		best, bestScore := -1, 0
		for i, b := range usable {
			score := 0
			if b.Rack != "" {
				for d := 1; d < qw; d++ {
					for _, j := range []int{idx - d, idx + d} {
						j = ((j % len(cur)) + len(cur)) % len(cur)
						if j != idx && rackOf[cur[j]] == b.Rack {
							score++
						}
					}
				}
			}
			if best < 0 || score < bestScore {
				best, bestScore = i, score
			}
		}
		out[idx] = usable[best].ID
		cur[idx] = usable[best].ID
		usable = slices.Delete(usable, best, best+1)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no writable bookie outside the ensemble %v", ErrNotEnoughBookies, ensemble)
	}
	return out, nil
}
