package ledger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/bookie/racks"
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

// Affinity confines a ledger's bookies to bookie groups, Pulsar's
// namespace bookie affinity (its IsolatedBookieEnsemblePlacementPolicy).
// A bookie's group is the one the region's racks-info gives it, else its
// configured one (bookie.group). With an affinity, placement uses:
//
//  1. bookies of the Primary groups;
//  2. bookies of the Secondary groups, only when fewer than E bookies of
//     the Primary groups are registered and writable (E: the ensemble
//     size);
//  3. bookies of no group;
//
// and never a bookie of another group. Each tier is used up before the
// next is touched, racks spread within it. Too few bookies in all three
// is ErrNotEnoughBookies, as in Pulsar: nothing falls back to the other
// groups. The zero value places on any bookie.
type Affinity struct {
	Primary   []string `json:"primary"`
	Secondary []string `json:"secondary,omitempty"`
}

func (a Affinity) clone() Affinity {
	return Affinity{Primary: slices.Clone(a.Primary), Secondary: slices.Clone(a.Secondary)}
}

// IsZero says whether a places on any bookie.
func (a Affinity) IsZero() bool { return len(a.Primary) == 0 && len(a.Secondary) == 0 }

func (a Affinity) validate() error {
	if a.IsZero() {
		return nil
	}
	if len(a.Primary) == 0 {
		return errors.New("affinity: secondary groups without primary ones")
	}
	for _, g := range slices.Concat(a.Primary, a.Secondary) {
		if g == "" {
			return errors.New("affinity: empty group name")
		}
	}
	return nil
}

func (a Affinity) String() string {
	if len(a.Secondary) == 0 {
		return fmt.Sprintf("groups %v", a.Primary)
	}
	return fmt.Sprintf("groups %v, then %v", a.Primary, a.Secondary)
}

// tiers splits usable, the bookies placement may take for an ensemble of
// e (writable ones of candidates, less the excluded), into the tiers it
// takes them from, in order (see Affinity).
func (a Affinity) tiers(candidates, usable []BookieInfo, e int) [][]BookieInfo {
	if a.IsZero() {
		return [][]BookieInfo{usable}
	}
	primaryLive := 0
	for _, b := range writable(candidates, nil, nil) {
		if slices.Contains(a.Primary, b.Group) {
			primaryLive++
		}
	}
	out := make([][]BookieInfo, 3)
	for _, b := range usable {
		switch {
		case slices.Contains(a.Primary, b.Group):
			out[0] = append(out[0], b)
		case slices.Contains(a.Secondary, b.Group):
			if primaryLive < e {
				out[1] = append(out[1], b)
			}
		case b.Group == "":
			out[2] = append(out[2], b)
		}
	}
	return out
}

// WithRacks returns the bookies with the group and rack the region's
// racks-info gives them (package bookie/racks) in place of the configured
// ones; a racks-info entry without a rack keeps the configured rack.
func WithRacks(bookies []BookieInfo, rc racks.Config) []BookieInfo {
	if len(rc) == 0 {
		return bookies
	}
	out := slices.Clone(bookies)
	for i, b := range out {
		if g, info, ok := rc.Lookup(b.ID); ok {
			out[i].Group = g
			if info.Rack != "" {
				out[i].Rack = info.Rack
			}
		}
	}
	return out
}

// Place chooses n writable bookies for a new ensemble, none of them in
// exclude, within affinity a. Consecutive ensemble positions take bookies
// from different racks in turn (round robin over racks, those the
// ensemble does not use yet first), so every write set of up to as many
// bookies as there are racks spans distinct racks. rng spreads load over
// equivalent choices; nil makes the choice deterministic (by id).
func Place(candidates []BookieInfo, n int, exclude []string, a Affinity, rng *rand.Rand) ([]string, error) {
	usable := writable(candidates, exclude, rng)
	tiers := a.tiers(candidates, usable, n)
	if avail := len(slices.Concat(tiers...)); avail < n {
		if a.IsZero() {
			return nil, fmt.Errorf("%w: need %d writable bookies, %d available", ErrNotEnoughBookies, n, avail)
		}
		return nil, fmt.Errorf("%w: need %d writable bookies in %s or in no group, %d available", ErrNotEnoughBookies, n, a, avail)
	}
	out := make([]string, 0, n)
	used := map[string]int{} // rack → bookies of the ensemble on it
	for _, tier := range tiers {
		out = appendByRack(out, tier, n-len(out), used)
	}
	return out, nil
}

// appendByRack appends k bookies of tier (at most all of them) to out,
// walking its racks round robin, racks with fewer bookies in used first.
func appendByRack(out []string, tier []BookieInfo, k int, used map[string]int) []string {
	var racks []string
	byRack := map[string][]BookieInfo{}
	for _, b := range tier {
		if _, ok := byRack[b.Rack]; !ok {
			racks = append(racks, b.Rack)
		}
		byRack[b.Rack] = append(byRack[b.Rack], b)
	}
	sort.SliceStable(racks, func(i, j int) bool { return used[racks[i]] < used[racks[j]] })
	for k = min(k, len(tier)); k > 0; {
		for _, r := range racks {
			if k == 0 {
				break
			}
			if q := byRack[r]; len(q) > 0 {
				out = append(out, q[0].ID)
				byRack[r] = q[1:]
				used[r]++
				k--
			}
		}
	}
	return out
}

// Replace picks a replacement for each failed ensemble index: a writable
// bookie not in the ensemble and not in exclude, within affinity a (from
// the earliest tier that has one, see Affinity), preferring there one
// whose rack no bookie sharing a write set with that index (the qw−1
// positions on either side) has. It returns the replacements it found,
// which may be fewer than asked for; with none it returns
// ErrNotEnoughBookies.
func Replace(candidates []BookieInfo, ensemble []string, failed []int, qw int, exclude []string, a Affinity, rng *rand.Rand) (map[int]string, error) {
	rackOf := map[string]string{}
	for _, b := range candidates {
		rackOf[b.ID] = b.Rack
	}
	var usable []BookieInfo
	tierOf := map[string]int{}
	for t, tier := range a.tiers(candidates, writable(candidates, append(slices.Clone(exclude), ensemble...), rng), len(ensemble)) {
		for _, b := range tier {
			tierOf[b.ID] = t
		}
		usable = append(usable, tier...)
	}
	cur := slices.Clone(ensemble)
	out := map[int]string{}
	for _, idx := range failed {
		if len(usable) == 0 {
			break
		}
		best, bestTier, bestScore := -1, 0, 0
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
			if t := tierOf[b.ID]; best < 0 || t < bestTier || t == bestTier && score < bestScore {
				best, bestTier, bestScore = i, t, score
			}
		}
		out[idx] = usable[best].ID
		cur[idx] = usable[best].ID
		usable = slices.Delete(usable, best, best+1)
	}
	if len(out) == 0 {
		if a.IsZero() {
			return nil, fmt.Errorf("%w: no writable bookie outside the ensemble %v", ErrNotEnoughBookies, ensemble)
		}
		return nil, fmt.Errorf("%w: no writable bookie outside the ensemble %v in %s or in no group", ErrNotEnoughBookies, ensemble, a)
	}
	return out, nil
}
