package dispatch

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Backlog paces a broker's backlog reads: reads of entries no longer in
// a topic's tail cache, which go to the bookies (a consumer catching up,
// a reader replaying history). Tailing reads never ask it. It is a byte
// budget (a token bucket) whose rate adapts to the latency the broker's
// tailing clients see, so that a backlog read never costs them more than
// BacklogConfig.TargetRise over what they see without one, and otherwise
// runs as fast as it can.
//
// Time is cut into windows of BacklogConfig.Interval. Each window the
// driver reports tail latency samples (Observe: a publish's time to its
// receipt) and the backlog bytes it read (Charge); Reserve asks before a
// backlog read how long to wait and how much it may read. At the end of
// a window:
//
//   - without backlog reads (quiet), the window's latency (its 95th
//     percentile) moves the baseline, an exponential average;
//   - with backlog reads (active), the latency is judged against the
//     baseline: within baseline × (1 + TargetRise) (and never below
//     baseline + Slack) the rate grows, by half (at least MinRate) until
//     the first breach and by MinRate/2 after it, as TCP's congestion
//     window leaves slow start; above it the rate falls to 0.7 of what
//     was read in the window (never below MinRate, nor below MinShare of
//     the most read in a window lately); a window with fewer
//     than minSamples samples has no tail to protect, and the rate stops
//     limiting (the next window with a tail judges it again);
//   - after ProbeEvery active windows in a row (ProbeEvery/8 once a
//     breach cut the rate), or when backlog reads start before any
//     baseline was seen, the next window is a probe: backlog reads wait
//     it out, and its latency becomes the baseline (mostly). A probe asks
//     whether the backlog reads are the cause: when the tail is as slow
//     without them (the machine is saturated by the tail's own load, or
//     by something else), the new baseline lets the reads grow again
//     instead of holding them at MinRate for nothing.
//
// A rate at or above MaxRate means no limit: Reserve answers at once and
// with no bound. Backlog holds no lock, does no I/O and reads no clock:
// the broker's driver calls it under its own lock with the time.
type Backlog struct {
	cfg BacklogConfig

	// The current window: its start, tail latency samples (a bounded
	// reservoir), how many were observed, the bytes read and whether a
	// backlog read asked.
	winStart time.Time
	samples  []time.Duration
	seen     int
	bytes    int64
	asked    bool
	probe    bool // the window is a probe: backlog reads wait

	baseline time.Duration // 0: none yet
	active   int           // active windows since the last probe or quiet one
	// cautious: a breach was seen since the last quiet window, so the
	// rate grows by a fixed step (MinRate/2) instead of by half.
	cautious bool
	// peak is the most read in an active window lately (decaying by
	// peakDecay a window), bytes per second: MinShare of it is a floor.
	peak     float64
	rate     float64 // bytes per second
	tokens   float64
	refilled time.Time
}

// BacklogConfig tunes Backlog. The zero value of every field means its
// default.
type BacklogConfig struct {
	// TargetRise is how much the tail latency may rise over its baseline
	// while backlog reads run: 0.1 is 10%. Zero means 0.1; negative turns
	// pacing off (backlog reads are never slowed).
	TargetRise float64 `yaml:"targetRise"`
	// Slack is the least rise tolerated, however small the baseline (a
	// baseline of 200µs does not make 40µs of noise a breach). Zero means
	// 1ms.
	Slack time.Duration `yaml:"slack"`
	// MinRate is the byte rate backlog reads keep however slow they are
	// made: they are never starved. Zero means 4 MiB/s.
	MinRate int64 `yaml:"minRate"`
	// MinShare is the share of their own best rate (the most they read
	// in a window lately) that backlog reads keep however slow they are
	// made: 0.5 keeps a consumer catching up at half its speed or more,
	// whatever the tail's latency. Zero means 0.5; negative means none
	// (only MinRate).
	MinShare float64 `yaml:"minShare"`
	// MaxRate is the rate at which pacing stops limiting. Zero means
	// 1 GiB/s.
	MaxRate int64 `yaml:"maxRate"`
	// Interval is the window the controller judges. Zero means 250ms.
	Interval time.Duration `yaml:"interval"`
	// ProbeEvery is how many active windows in a row run before a probe
	// window measures the baseline again. Zero means 40 (10 s at the
	// default interval).
	ProbeEvery int `yaml:"probeEvery"`
}

// Backlog pacing's fixed parameters.
const (
	minSamples     = 20               // a window with fewer judges nothing
	maxSamples     = 2048             // a window's reservoir
	minChunk       = 64 << 10         // the least a paced read may read
	burstOf        = time.Second / 50 // the bucket holds 20ms of the rate
	startRate      = 16 << 20         // the rate before any judgment
	quietWeight    = 0.2              // a quiet window's weight in the baseline
	probeWeight    = 0.75             // a probe window's
	backlogBackoff = 0.7              // a breach's cut of the rate read
	peakDecay      = 0.99             // the peak's fall per active window (half in ~17 s)
)

func (c BacklogConfig) withDefaults() BacklogConfig {
	if c.TargetRise == 0 {
		c.TargetRise = 0.1
	}
	if c.Slack == 0 {
		c.Slack = time.Millisecond
	}
	if c.MinRate == 0 {
		c.MinRate = 4 << 20
	}
	if c.MinShare == 0 {
		c.MinShare = 0.5
	}
	if c.MaxRate == 0 {
		c.MaxRate = 1 << 30
	}
	if c.Interval == 0 {
		c.Interval = 250 * time.Millisecond
	}
	if c.ProbeEvery == 0 {
		c.ProbeEvery = 40
	}
	return c
}

// Validate reports every problem with the config at once, by its path
// under prefix (e.g. "broker.backlogReads").
func (c BacklogConfig) Validate(prefix string) error {
	var errs []error
	if c.Slack < 0 {
		errs = append(errs, fmt.Errorf("%s.slack: %v must not be negative", prefix, c.Slack))
	}
	if c.MinRate < 0 || c.MaxRate < 0 {
		errs = append(errs, fmt.Errorf("%s.minRate, maxRate: %d, %d must not be negative", prefix, c.MinRate, c.MaxRate))
	}
	d := c.withDefaults()
	if d.MinRate > d.MaxRate {
		errs = append(errs, fmt.Errorf("%s.minRate: %d exceeds %s.maxRate: %d", prefix, d.MinRate, prefix, d.MaxRate))
	}
	if c.Interval < 0 || c.Interval > 0 && c.Interval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("%s.interval: %v must be at least 10ms", prefix, c.Interval))
	}
	if c.MinShare > 1 {
		errs = append(errs, fmt.Errorf("%s.minShare: %v must be at most 1", prefix, c.MinShare))
	}
	if c.ProbeEvery < 0 {
		errs = append(errs, fmt.Errorf("%s.probeEvery: %d must not be negative", prefix, c.ProbeEvery))
	}
	return errors.Join(errs...)
}

// NewBacklog returns pacing by cfg from now on.
func NewBacklog(cfg BacklogConfig, now time.Time) *Backlog {
	cfg = cfg.withDefaults()
	return &Backlog{cfg: cfg, winStart: now, refilled: now, rate: startRate,
		samples: make([]time.Duration, 0, maxSamples)}
}

// Off reports whether pacing is off (BacklogConfig.TargetRise negative).
func (b *Backlog) Off() bool { return b.cfg.TargetRise < 0 }

// Observe records a tail latency sample: a tailing client's request
// that took d, completed at now.
func (b *Backlog) Observe(now time.Time, d time.Duration) {
	b.roll(now)
	b.seen++
	if len(b.samples) < maxSamples {
		b.samples = append(b.samples, d)
		return
	}
	// A reservoir without randomness: the newest sample replaces one
	// in turn, so a busy window keeps samples from all of it.
	b.samples[b.seen%maxSamples] = d
}

// Reserve is asked before a backlog read at now: wait is how long the
// read must wait first (then it asks again), maxBytes how much it may
// read (math.MaxInt64: no bound).
func (b *Backlog) Reserve(now time.Time) (wait time.Duration, maxBytes int64) {
	if b.Off() {
		return 0, math.MaxInt64
	}
	b.roll(now)
	b.asked = true
	if b.probe {
		return b.winStart.Add(b.cfg.Interval).Sub(now), 0
	}
	if b.unlimited() {
		return 0, math.MaxInt64
	}
	b.refill(now)
	if b.tokens <= 0 {
		return max(time.Millisecond, time.Duration(-b.tokens/b.rate*float64(time.Second))), 0
	}
	return 0, max(minChunk, int64(b.tokens))
}

// Charge records n bytes a backlog read read at now.
func (b *Backlog) Charge(now time.Time, n int64) {
	if b.Off() {
		return
	}
	b.roll(now)
	b.bytes += n
	b.asked = true
	if !b.unlimited() {
		b.refill(now)
		b.tokens -= float64(n)
	}
}

// Rate is the current byte rate of backlog reads, and whether it limits
// them.
func (b *Backlog) Rate() (bytesPerSecond float64, limited bool) {
	return b.rate, !b.Off() && !b.unlimited()
}

// Baseline is the tail latency without backlog reads (0: none seen yet).
func (b *Backlog) Baseline() time.Duration { return b.baseline }

func (b *Backlog) unlimited() bool { return b.rate >= float64(b.cfg.MaxRate) }

// refill adds the tokens earned since the last refill, up to the burst.
func (b *Backlog) refill(now time.Time) {
	if el := now.Sub(b.refilled); el > 0 {
		b.tokens += b.rate * el.Seconds()
		b.refilled = now
	}
	if burst := max(minChunk, b.rate*burstOf.Seconds()); b.tokens > burst {
		b.tokens = burst
	}
}

// roll ends the windows that ended by now.
func (b *Backlog) roll(now time.Time) {
	iv := b.cfg.Interval
	if now.Sub(b.winStart) < iv {
		return
	}
	b.endWindow()
	if gap := now.Sub(b.winStart); gap >= 2*iv {
		// Idle windows: nothing observed, nothing read.
		b.winStart = b.winStart.Add(gap / iv * iv)
		b.active = 0
		return
	}
	b.winStart = b.winStart.Add(iv)
}

// endWindow judges the window that ends and starts the next.
func (b *Backlog) endWindow() {
	defer func() {
		b.samples, b.seen, b.bytes, b.asked = b.samples[:0], 0, 0, false
	}()
	enough := len(b.samples) >= minSamples
	var q time.Duration
	if enough {
		q = quantile(b.samples, 0.95)
	}
	switch {
	case b.probe:
		b.probe = false
		b.active = 0
		if enough {
			b.baseline = blend(b.baseline, q, probeWeight)
		}
	case !b.asked:
		b.active, b.cautious = 0, false
		if enough {
			b.baseline = blend(b.baseline, q, quietWeight)
		}
	default:
		b.active++
		read := float64(b.bytes) / b.cfg.Interval.Seconds()
		b.peak = max(b.peak*peakDecay, read)
		switch {
		case !enough:
			b.rate = float64(b.cfg.MaxRate) // no tail to protect
		case b.baseline == 0:
			b.probe = true
		case q <= b.threshold():
			b.grow()
		default:
			b.rate = max(b.floor(), backlogBackoff*min(b.rate, read))
			b.tokens = min(b.tokens, 0)
			b.cautious = true
		}
		if every := b.cfg.ProbeEvery; b.active >= every || b.cautious && b.active >= max(1, every/8) {
			b.probe = true
		}
	}
}

// floor is the least rate a breach may cut to: MinRate, or MinShare of
// the peak.
func (b *Backlog) floor() float64 {
	return max(float64(b.cfg.MinRate), max(0, b.cfg.MinShare)*b.peak)
}

// threshold is the tail latency an active window may reach.
func (b *Backlog) threshold() time.Duration {
	return max(time.Duration(float64(b.baseline)*(1+b.cfg.TargetRise)), b.baseline+b.cfg.Slack)
}

func (b *Backlog) grow() {
	step := max(float64(b.cfg.MinRate), b.rate/2)
	if b.cautious {
		step = float64(b.cfg.MinRate) / 2
	}
	b.rate = min(float64(b.cfg.MaxRate), b.rate+step)
}

// blend moves avg towards q by weight w (to q when there is no average).
func blend(avg, q time.Duration, w float64) time.Duration {
	if avg == 0 {
		return q
	}
	return time.Duration((1-w)*float64(avg) + w*float64(q))
}

// quantile is the q-quantile of s (reordered in place; s not empty).
func quantile(s []time.Duration, q float64) time.Duration {
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
