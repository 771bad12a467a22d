package dispatch

import (
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)

// window feeds one window of Backlog from at: n tail samples of d spread
// over it, and, when read > 0, backlog reads of read bytes (charged in
// one go at the window's middle); it returns the time the window ends.
func window(b *Backlog, at time.Time, n int, d time.Duration, read int64) time.Time {
	iv := b.cfg.Interval
	for i := range n {
		b.Observe(at.Add(iv*time.Duration(i)/time.Duration(n+1)), d)
	}
	if read > 0 {
		b.Reserve(at.Add(iv / 2))
		b.Charge(at.Add(iv/2), read)
	}
	return at.Add(iv)
}

func TestBacklogBaselineFromQuietWindows(t *testing.T) {
	b := NewBacklog(BacklogConfig{}, t0)
	at := t0
	for range 20 {
		at = window(b, at, 100, 10*time.Millisecond, 0)
	}
	b.roll(at)
	if got := b.Baseline(); got != 10*time.Millisecond {
		t.Fatalf("baseline %v after quiet windows of 10ms, want 10ms", got)
	}
	// Fewer than minSamples samples say nothing.
	at = window(b, at, minSamples-1, time.Second, 0)
	b.roll(at)
	if got := b.Baseline(); got != 10*time.Millisecond {
		t.Fatalf("baseline %v after a window of %d samples, want it unchanged", got, minSamples-1)
	}
}

func TestBacklogGrowsToUnlimitedWhileTheTailIsFine(t *testing.T) {
	b := NewBacklog(BacklogConfig{}, t0)
	at := t0
	for range 4 {
		at = window(b, at, 100, 10*time.Millisecond, 0)
	}
	prev, _ := b.Rate()
	for i := range 200 {
		r, limited := b.Rate()
		if !limited {
			if r < float64(b.cfg.MaxRate) {
				t.Fatalf("unlimited at %v B/s, below MaxRate", r)
			}
			if w, n := b.Reserve(at); w != 0 || n != math.MaxInt64 {
				t.Fatalf("unlimited: Reserve = %v, %d; want no wait and no bound", w, n)
			}
			return
		}
		if i > 0 && r < prev {
			t.Fatalf("window %d: rate fell from %v to %v with the tail within its target", i, prev, r)
		}
		prev = r
		at = window(b, at, 100, 10500*time.Microsecond, 1<<20) // +5%: within 10%
		b.roll(at)
	}
	t.Fatal("the rate never reached MaxRate")
}

func TestBacklogBreachCutsToWhatWasRead(t *testing.T) {
	b := NewBacklog(BacklogConfig{MinRate: 1 << 20, MinShare: -1}, t0)
	at := t0
	for range 4 {
		at = window(b, at, 100, 10*time.Millisecond, 0)
	}
	// Half a window's worth read at 8 MB/s with the tail at +50%.
	read := int64(2 << 20) // in 250ms: 8 MiB/s
	at = window(b, at, 100, 15*time.Millisecond, read)
	b.roll(at)
	r, limited := b.Rate()
	want := backlogBackoff * float64(read) / b.cfg.Interval.Seconds()
	if !limited || math.Abs(r-want) > 1 {
		t.Fatalf("rate after a breach: %v (limited %v), want %v", r, limited, want)
	}
	// Breaches in a row, the reads being their cause (the probes, without
	// reads, see the old 10ms), stop at MinRate.
	probes := 0
	for range 30 {
		b.roll(at)
		if b.probe {
			probes++
			at = window(b, at, 100, 10*time.Millisecond, 0)
			continue
		}
		at = window(b, at, 100, 50*time.Millisecond, 1<<10)
	}
	b.roll(at)
	if r, _ := b.Rate(); r != float64(b.cfg.MinRate) {
		t.Fatalf("rate after repeated breaches: %v, want MinRate %d", r, b.cfg.MinRate)
	}
	if probes == 0 {
		t.Fatal("no probe while the reads were cut")
	}
}

// TestBacklogKeepsAShareOfItsPeak: however bad the tail, reads that
// ran at 100 MB/s are not cut below MinShare of that (as it decays).
func TestBacklogKeepsAShareOfItsPeak(t *testing.T) {
	b := NewBacklog(BacklogConfig{}, t0)
	at := t0
	for range 4 {
		at = window(b, at, 100, 10*time.Millisecond, 0)
	}
	const peak = 100e6
	// No tail yet: unlimited, reading 100 MB/s.
	at = window(b, at, minSamples-1, 10*time.Millisecond, int64(peak*b.cfg.Interval.Seconds()))
	for w := range 20 {
		b.roll(at)
		r, _ := b.Rate()
		floor := b.cfg.MinShare * peak * math.Pow(peakDecay, float64(w+1))
		if r < floor-1 {
			t.Fatalf("window %d: rate %.0f below %.0f, MinShare of the decayed peak", w, r, floor)
		}
		read := int64(min(r, peak) * b.cfg.Interval.Seconds())
		d := 30 * time.Millisecond // the reads hurt the tail: +200%
		if b.probe {
			read, d = 0, 10*time.Millisecond
		}
		at = window(b, at, 100, d, read)
	}
}

// TestBacklogNotTheCause: the tail is slow with or without the reads
// (the machine is saturated by the tail's own load): a probe shows it,
// and the reads grow again instead of staying at MinRate.
func TestBacklogNotTheCause(t *testing.T) {
	b := NewBacklog(BacklogConfig{MinRate: 1 << 20}, t0)
	at := t0
	for range 4 {
		at = window(b, at, 100, 10*time.Millisecond, 0)
	}
	var low float64 = math.MaxFloat64
	for range 40 {
		b.roll(at)
		r, _ := b.Rate()
		low = min(low, r)
		read := int64(r * b.cfg.Interval.Seconds())
		if b.probe {
			read = 0
		}
		at = window(b, at, 100, 50*time.Millisecond, read)
	}
	b.roll(at)
	r, _ := b.Rate()
	if r <= 2*low {
		t.Fatalf("rate %v after 40 windows of a tail as slow without the reads as with them (lowest %v): want it grown back", r, low)
	}
	if b.Baseline() < 40*time.Millisecond {
		t.Fatalf("baseline %v, want it moved to the tail's own 50ms", b.Baseline())
	}
}

// TestBacklogSlack: a tiny baseline does not make noise a breach.
func TestBacklogSlack(t *testing.T) {
	b := NewBacklog(BacklogConfig{}, t0)
	at := t0
	for range 4 {
		at = window(b, at, 100, 200*time.Microsecond, 0)
	}
	r0, _ := b.Rate()
	at = window(b, at, 100, 900*time.Microsecond, 1<<20) // +350%, but within 1ms of slack
	b.roll(at)
	if r, _ := b.Rate(); r <= r0 {
		t.Fatalf("rate %v after a window within the slack, want above %v", r, r0)
	}
}

func TestBacklogPacesReadsAtItsRate(t *testing.T) {
	b := NewBacklog(BacklogConfig{}, t0)
	// A steady tail within its target: the rate grows from startRate;
	// follow the reads over the first second and compare with the rates
	// in force.
	at := t0
	for range 4 {
		at = window(b, at, 100, 10*time.Millisecond, 0)
	}
	end := at.Add(time.Second)
	tick := at
	var read int64
	var allowed float64
	for at.Before(end) {
		for ; !tick.After(at); tick = tick.Add(2 * time.Millisecond) {
			b.Observe(tick, 10*time.Millisecond)
		}
		r, _ := b.Rate()
		w, n := b.Reserve(at)
		if w > 0 {
			allowed += r * w.Seconds()
			at = at.Add(w)
			continue
		}
		n = min(n, 256<<10)
		b.Charge(at, n)
		read += n
		allowed += r * (100 * time.Microsecond).Seconds()
		at = at.Add(100 * time.Microsecond)
	}
	if r, limited := b.Rate(); !limited || r <= startRate {
		t.Fatalf("rate %v (limited %v) after a second within the target, want it grown and limiting", r, limited)
	}
	burst := float64(max(minChunk, int64(startRate*burstOf.Seconds())))
	if float64(read) > allowed+2*burst || float64(read) < 0.8*allowed {
		t.Fatalf("read %d bytes in 1s, the rates allowed %.0f (burst %.0f)", read, allowed, burst)
	}
}

func TestBacklogProbesTheBaselineAgain(t *testing.T) {
	b := NewBacklog(BacklogConfig{ProbeEvery: 64}, t0)
	at := t0
	for range 4 {
		at = window(b, at, 100, 10*time.Millisecond, 0)
	}
	// The tail's own load doubles while the reads run: every active window
	// is a breach against the old baseline, and after the first one a
	// probe comes every ProbeEvery/8 active windows...
	active := 0
	for b.roll(at); !b.probe; b.roll(at) {
		if active++; active > 8 {
			t.Fatal("no probe after 8 active windows with breaches")
		}
		at = window(b, at, 100, 20*time.Millisecond, 1<<20)
	}
	if active != 8 {
		t.Fatalf("probe after %d active windows, want 8 (ProbeEvery/8 once cut)", active)
	}
	b.roll(at.Add(time.Microsecond))
	// ...until the probe: reads wait out the window.
	w, n := b.Reserve(at.Add(time.Microsecond))
	if w <= 0 || n != 0 {
		t.Fatalf("Reserve in the probe window: %v, %d; want a wait", w, n)
	}
	at = window(b, at, 100, 20*time.Millisecond, 0)
	b.roll(at)
	if got, want := b.Baseline(), time.Duration(float64(10*time.Millisecond)*(1-probeWeight)+float64(20*time.Millisecond)*probeWeight); got != want {
		t.Fatalf("baseline after the probe: %v, want %v", got, want)
	}
	if w, _ := b.Reserve(at); w > 0 && b.probe {
		t.Fatal("still probing after the probe window")
	}
}

// TestBacklogProbesFirstWithoutABaseline: reads from the start, with a
// tail to protect, wait one window to measure it first.
func TestBacklogProbesFirstWithoutABaseline(t *testing.T) {
	b := NewBacklog(BacklogConfig{}, t0)
	at := window(b, t0, 100, 10*time.Millisecond, 1<<20)
	b.roll(at)
	if !b.probe {
		t.Fatal("no probe after an active window without a baseline")
	}
	at = window(b, at, 100, 10*time.Millisecond, 0)
	b.roll(at)
	if b.Baseline() != 10*time.Millisecond {
		t.Fatalf("baseline %v after the probe", b.Baseline())
	}
}

// TestBacklogUnlimitedWithoutATail: reads with no tailing traffic to
// protect are not limited.
func TestBacklogUnlimitedWithoutATail(t *testing.T) {
	b := NewBacklog(BacklogConfig{}, t0)
	at := t0
	for range 4 {
		at = window(b, at, 100, 10*time.Millisecond, 0)
	}
	at = window(b, at, minSamples-1, 10*time.Millisecond, 1<<20)
	b.roll(at)
	if _, limited := b.Rate(); limited {
		t.Fatal("limited after a window without a tail")
	}
}

func TestBacklogOff(t *testing.T) {
	b := NewBacklog(BacklogConfig{TargetRise: -1}, t0)
	for i := range 100 {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		b.Observe(at, time.Second)
		if w, n := b.Reserve(at); w != 0 || n != math.MaxInt64 {
			t.Fatalf("pacing off: Reserve = %v, %d", w, n)
		}
		b.Charge(at, 1<<30)
	}
	if _, limited := b.Rate(); limited {
		t.Fatal("pacing off, but the rate limits")
	}
}

// TestBacklogClosedLoop runs the controller against a model of a CPU
// shared by tailing clients and a backlog reader: the tail's latency
// rises with the share of the CPU the reader takes, steeply near full
// use. Starting unpaced, the controller must settle where the tail stays
// within its target most of the time and the reader keeps most of the
// rate the target allows.
func TestBacklogClosedLoop(t *testing.T) {
	const (
		capacity = 100 << 20 // the reader's rate alone, bytes/s
		base     = 10 * time.Millisecond
	)
	// The tail's latency when the reader reads at rate r: base at 0,
	// +10% at 40% of capacity, +40% at 80%.
	latency := func(r float64) time.Duration {
		u := min(0.95, r/capacity)
		return time.Duration(float64(base) * (1 + 0.1*u/0.4*(u/0.4)))
	}
	b := NewBacklog(BacklogConfig{}, t0)
	at := t0
	for range 8 {
		at = window(b, at, 200, base, 0)
	}
	var breaches, windows int
	var readTotal float64
	for w := range 400 { // 100 s
		// The reader reads what the pacer allows, up to capacity (it
		// asks first, which ends the window before).
		b.roll(at)
		r, limited := b.Rate()
		rr := float64(capacity)
		if limited {
			rr = min(rr, r)
		}
		if b.probe {
			rr = 0
		}
		d := latency(rr)
		read := int64(rr * b.cfg.Interval.Seconds())
		end := window(b, at, 200, d, read)
		if w >= 100 && rr > 0 { // after settling
			windows++
			readTotal += rr
			if d > time.Duration(float64(base)*1.2) {
				breaches++
			}
		}
		at = end
	}
	mean := readTotal / float64(windows)
	// The target (+10%) allows 40% of capacity; AIMD oscillates below it.
	if breaches > windows/20 {
		t.Errorf("the tail rose over +20%% in %d of %d windows", breaches, windows)
	}
	if mean < 0.2*capacity {
		t.Errorf("the reader kept %.0f%% of its capacity, the target allows 40%%", 100*mean/capacity)
	}
	t.Logf("reader at %.0f%% of capacity on average; tail over +20%% in %d of %d windows", 100*mean/capacity, breaches, windows)
}

func TestBacklogConfigValidate(t *testing.T) {
	if err := (BacklogConfig{}).Validate("broker.backlogReads"); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	err := BacklogConfig{Slack: -1, MinRate: 10, MaxRate: 5, Interval: time.Millisecond, ProbeEvery: -1}.Validate("broker.backlogReads")
	for _, want := range []string{"broker.backlogReads.slack", "broker.backlogReads.minRate: 10 exceeds broker.backlogReads.maxRate: 5", "broker.backlogReads.interval", "broker.backlogReads.probeEvery"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}
