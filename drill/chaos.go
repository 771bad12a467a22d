package drill

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// A chaos drill (docs/drills.md, "Randomized drills") runs a workload on
// one namespace of each kind in ChaosKinds while a schedule drawn from a
// seed kills, partitions and black-holes regions and moves the
// active-standby namespace's primary once; afterwards it checks every
// region's copy of every topic. Plan draws the schedule and CheckChaos
// judges the recorded ChaosLog; both are pure. RunChaos is the driver.

// NamespaceKind is how a namespace of a chaos drill replicates.
type NamespaceKind string

// The namespace kinds.
const (
	// ActiveActive: every region takes publishes; each region's
	// producers write to it alone.
	ActiveActive NamespaceKind = "active-active"
	// ActiveStandby: the primary takes publishes; a producer's client
	// lists every region and is sent on to the primary.
	ActiveStandby NamespaceKind = "active-standby"
	// Sync: active-standby with synchronous replication to one other
	// region (ChaosSync): the primary acknowledges a publish once another
	// region holds it too.
	Sync NamespaceKind = "sync"
)

// ChaosSync is the sync kind's policy: one other region, and a fallback
// after 2 s, so that the primary takes writes when every other region is
// faulted (the schedule allows two faults at once).
var ChaosSync = map[string]int{"regions": 1, "fallbackAfterSeconds": 2}

// ChaosKinds are the namespaces a chaos drill runs, one of each, in this
// order; the schedule and the checks do not depend on the kind.
var ChaosKinds = []NamespaceKind{ActiveActive, ActiveStandby, Sync}

// standby reports whether a namespace of kind has a primary (its
// producers follow it; the planned move moves it).
func (k NamespaceKind) standby() bool { return k == ActiveStandby || k == Sync }

// Action is one step of a chaos schedule: a fault (Kill, Partition,
// Blackhole), its undoing (Start, Heal), or Move.
type Action string

// The actions besides the faults.
const (
	// Start starts a killed region again.
	Start Action = "start"
	// Heal brings a partitioned or black-holed region's links back up.
	Heal Action = "heal"
	// Move sets the active-standby namespace's primary to To while the
	// old primary, Region, is reachable (a planned failover).
	Move Action = "move"
	// Delete deletes the drill's delete topic through Region's admin
	// API (force), retries until the delete has finished in every
	// region, creates the topic again and starts its next incarnation's
	// clients (docs/drills.md, "Deletes and re-creates"). It runs beside
	// the other steps: a delete waits for the regions a fault cuts off.
	Delete Action = "delete"
)

// undo is the action that ends fault f.
func undo(f Fault) Action {
	if f == Kill {
		return Start
	}
	return Heal
}

// Step is one action of a schedule, At after the schedule's start.
type Step struct {
	At     time.Duration `json:"-"`
	Action Action        `json:"action"`
	Region string        `json:"region"`
	// To is Move's new primary.
	To string `json:"to,omitempty"`
}

// PlanConfig is what a schedule is drawn within. Zero durations and
// counts take the defaults below (the shape of a manual experiment over
// three regions).
type PlanConfig struct {
	// Regions are the federation's regions; at least two.
	Regions []string
	// Primary is the active-standby namespace's primary at the start
	// (empty: the first region).
	Primary string
	// Duration is how long faults are injected: every fault is undone by
	// then.
	Duration time.Duration
	// Faults are the kinds drawn from (empty: kill, partition and
	// blackhole).
	Faults []Fault
	// EveryMin..EveryMax is the time between two fault injections,
	// LengthMin..LengthMax how long a fault lasts.
	EveryMin, EveryMax   time.Duration
	LengthMin, LengthMax time.Duration
	// MaxFaults is how many regions may be faulted at once (zero: 2, and
	// never more than all regions but one).
	MaxFaults int
	// MoveHold is how long no fault touches the old or the new primary
	// from the move on, so that the move is a planned one from start to
	// end.
	MoveHold time.Duration
	// Deletes is how many delete-and-re-create steps the schedule holds
	// (zero: one per DefaultChaosDeleteEvery of Duration, at least one;
	// negative: none).
	Deletes int
}

// Defaults of PlanConfig.
const (
	DefaultChaosEveryMin  = 4 * time.Second
	DefaultChaosEveryMax  = 10 * time.Second
	DefaultChaosLengthMin = 3 * time.Second
	DefaultChaosLengthMax = 10 * time.Second
	DefaultChaosMaxFaults = 2
	DefaultChaosMoveHold  = 5 * time.Second
	// DefaultChaosDeleteEvery is Duration per delete step when
	// PlanConfig.Deletes is zero.
	DefaultChaosDeleteEvery = 20 * time.Second
)

func (c PlanConfig) withDefaults() PlanConfig {
	if c.Primary == "" && len(c.Regions) > 0 {
		c.Primary = c.Regions[0]
	}
	if len(c.Faults) == 0 {
		c.Faults = []Fault{Kill, Partition, Blackhole}
	}
	c.EveryMin = cmp.Or(c.EveryMin, DefaultChaosEveryMin)
	c.EveryMax = cmp.Or(c.EveryMax, DefaultChaosEveryMax)
	c.LengthMin = cmp.Or(c.LengthMin, DefaultChaosLengthMin)
	c.LengthMax = cmp.Or(c.LengthMax, DefaultChaosLengthMax)
	c.MaxFaults = cmp.Or(c.MaxFaults, DefaultChaosMaxFaults)
	c.MaxFaults = min(c.MaxFaults, len(c.Regions)-1)
	c.MoveHold = cmp.Or(c.MoveHold, DefaultChaosMoveHold)
	if c.Deletes == 0 {
		c.Deletes = max(1, int(c.Duration/DefaultChaosDeleteEvery))
	}
	return c
}

// minChaosDuration is the shortest Duration a schedule is drawn for: the
// move happens in its second quarter and holds for MoveHold.
const minChaosDuration = 10 * time.Second

// Validate reports every problem of c at once, each naming its flag.
func (c PlanConfig) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(c.Regions) < 2 {
		bad("endpoints", "%d regions; a chaos drill needs at least two", len(c.Regions))
	}
	seen := map[string]bool{}
	for _, r := range c.Regions {
		if r == "" || seen[r] {
			bad("endpoints", "region name %q is empty or repeated", r)
		}
		seen[r] = true
	}
	if c.Primary != "" && !seen[c.Primary] {
		bad("endpoints", "primary %q is not one of the regions", c.Primary)
	}
	for _, f := range c.Faults {
		switch f {
		case Kill, Partition, Blackhole:
		default:
			bad("faults", "%q is not kill, partition or blackhole", f)
		}
	}
	d := c.withDefaults()
	if c.Duration < minChaosDuration || c.Duration > 24*time.Hour {
		bad("duration", "%v is not within %v..24h", c.Duration, minChaosDuration)
	} else if c.Duration/2+d.MoveHold > c.Duration {
		bad("duration", "%v leaves no room for the planned move and its hold of %v", c.Duration, d.MoveHold)
	}
	if c.Deletes > 100 {
		bad("deletes", "%d is over 100", c.Deletes)
	}
	if d.EveryMin <= 0 || d.EveryMax < d.EveryMin || d.LengthMin <= 0 || d.LengthMax < d.LengthMin || d.MoveHold < 0 || c.MaxFaults < 0 {
		errs = append(errs, errors.New("chaos: fault spacing, lengths, hold or count out of range"))
	}
	return errors.Join(errs...)
}

// Schedule is a chaos drill's plan: its seed, what it was drawn within,
// and the steps in the order they are taken.
type Schedule struct {
	Seed    uint64
	Config  PlanConfig
	Primary string
	Steps   []Step
}

// chaosStream is the second word of the PCG state, fixed so that a seed
// alone names a schedule.
const chaosStream = 0x1505ba7c4a05

// Plan draws the schedule of seed within c: from EveryMin..EveryMax
// apart, a fault of a random kind on a random region that is not
// faulted, lasting LengthMin..LengthMax and undone by Duration; at most
// MaxFaults at once (so never every region); and one planned move of the
// active-standby primary to another region, in the second quarter of the
// schedule, with neither region faulted from the move to MoveHold after
// it. Then Deletes delete steps (when positive), one in each of as many
// equal slots of the first deleteSpan of Duration: one second (at most
// half the fault) into the first fault that begins in its slot early
// enough, so that most deletes find a
// region cut off, or at a random time of the slot when none begins
// there; each through a random region that no fault touches at that
// time. The faults and the move are drawn first, so a seed's faults do
// not depend on Deletes. The same seed and c give the same schedule.
func Plan(seed uint64, c PlanConfig) (Schedule, error) {
	if err := c.Validate(); err != nil {
		return Schedule{}, err
	}
	c = c.withDefaults()
	rng := rand.New(rand.NewPCG(seed, chaosStream))
	// between draws a duration in [lo, hi], in whole milliseconds.
	between := func(lo, hi time.Duration) time.Duration {
		lo, hi = lo.Truncate(time.Millisecond), hi.Truncate(time.Millisecond)
		return lo + time.Duration(rng.Int64N(int64((hi-lo)/time.Millisecond)+1))*time.Millisecond
	}
	others := slices.DeleteFunc(slices.Clone(c.Regions), func(r string) bool { return r == c.Primary })
	moveAt := between(c.Duration/4, c.Duration/2)
	moveTo := others[rng.IntN(len(others))]
	moveEnd := moveAt + c.MoveHold

	type fault struct {
		region   string
		kind     Fault
		from, to time.Duration
	}
	var faults []fault
	for t := time.Duration(0); ; {
		t += between(c.EveryMin, c.EveryMax)
		if t+c.LengthMin > c.Duration {
			break
		}
		end := min(t+between(c.LengthMin, c.LengthMax), c.Duration)
		busy := map[string]bool{}
		for _, f := range faults {
			if f.from <= t && t < f.to {
				busy[f.region] = true
			}
		}
		if len(busy) >= c.MaxFaults {
			continue
		}
		var free []string
		for _, r := range c.Regions {
			moving := r == c.Primary || r == moveTo
			if busy[r] || moving && t < moveEnd && moveAt < end {
				continue
			}
			free = append(free, r)
		}
		if len(free) == 0 {
			continue
		}
		faults = append(faults, fault{region: free[rng.IntN(len(free))], kind: c.Faults[rng.IntN(len(c.Faults))], from: t, to: end})
	}

	s := Schedule{Seed: seed, Config: c, Primary: c.Primary}
	for _, f := range faults {
		s.Steps = append(s.Steps, Step{At: f.from, Action: Action(f.kind), Region: f.region}, Step{At: f.to, Action: undo(f.kind), Region: f.region})
	}
	slot := time.Duration(0)
	if c.Deletes > 0 {
		slot = (c.Duration * deleteSpan / 100 / time.Duration(c.Deletes)).Truncate(time.Millisecond)
	}
	for i := range max(c.Deletes, 0) {
		lo, hi := time.Duration(i)*slot, time.Duration(i+1)*slot
		at := time.Duration(-1)
		for _, f := range faults {
			if in := f.from + min(time.Second, (f.to-f.from)/2); f.from >= lo && in < hi {
				at = in
				break
			}
		}
		if at < 0 {
			at = between(lo, hi-time.Millisecond)
		}
		var free []string
		for _, r := range c.Regions {
			if !slices.ContainsFunc(faults, func(f fault) bool { return f.region == r && f.from <= at && at < f.to }) {
				free = append(free, r)
			}
		}
		s.Steps = append(s.Steps, Step{At: at, Action: Delete, Region: free[rng.IntN(len(free))]})
	}
	s.Steps = append(s.Steps, Step{At: moveAt, Action: Move, Region: c.Primary, To: moveTo})
	// At the same moment: undo first, then the move, then faults, so
	// that no more regions are down at once than planned.
	rank := func(a Action) int {
		switch a {
		case Start, Heal:
			return 0
		case Move:
			return 1
		case Delete:
			return 3
		}
		return 2
	}
	slices.SortStableFunc(s.Steps, func(a, b Step) int {
		return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(rank(a.Action), rank(b.Action)))
	})
	return s, nil
}

// deleteSpan is the share of Duration, in percent, within which delete
// steps are planned: the last one, even while a fault holds it up, has
// time to finish and start the topic's next incarnation before the
// workload stops.
const deleteSpan = 80

// IsFault reports whether a is a fault (kill, partition, blackhole).
func (a Action) IsFault() bool {
	switch Fault(a) {
	case Kill, Partition, Blackhole:
		return true
	}
	return false
}
