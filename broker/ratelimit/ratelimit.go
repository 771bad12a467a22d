// Package ratelimit is the token bucket behind Isobar's publish, dispatch
// and replicator rates: a budget of messages and one of bytes, each
// refilled continuously at its limit per period and holding at most one
// period's worth, so that over any stretch longer than a period the
// traffic let through stays at the limit.
//
// Use is charged after the fact and may run the budget into debt (a batch
// of messages, an entry bigger than what is left): whoever used it then
// waits until the debt is repaid. That is how Pulsar's limiters behave too
// (they throttle once a period's budget is spent), and it keeps the long
// run rate exact whatever the size of what is charged.
package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"
)

// Rate is a limit of Msgs messages and Bytes bytes per Period. A budget
// of zero or less is no limit on that dimension; a Period of zero or less
// is one second.
type Rate struct {
	Msgs, Bytes int64
	Period      time.Duration
}

// Unlimited reports whether r limits nothing.
func (r Rate) Unlimited() bool { return r.Msgs <= 0 && r.Bytes <= 0 }

// normal returns r with its period defaulted and unlimited dimensions at
// zero, so that equal limits compare equal.
func (r Rate) normal() Rate {
	if r.Msgs < 0 {
		r.Msgs = 0
	}
	if r.Bytes < 0 {
		r.Bytes = 0
	}
	if r.Unlimited() {
		return Rate{}
	}
	if r.Period <= 0 {
		r.Period = time.Second
	}
	return r
}

// Stats are what a limiter let through and held back since it was made.
type Stats struct {
	// Msgs and Bytes are what was charged.
	Msgs, Bytes int64
	// Throttled counts the times a user was told to wait, Waited the
	// waits added up.
	Throttled int64
	Waited    time.Duration
}

// Limiter is a message and byte token bucket. The zero Limiter limits
// nothing; SetRate changes its limit at any time. It is safe for
// concurrent use.
type Limiter struct {
	// Now, when set before first use, replaces time.Now (tests).
	Now func() time.Time

	mu          sync.Mutex
	rate        Rate
	msgs, bytes float64 // tokens; negative: debt
	last        time.Time
	stats       Stats
}

// New returns a limiter of rate r, its budgets full.
func New(r Rate) *Limiter {
	l := &Limiter{}
	l.SetRate(r)
	return l
}

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// SetRate replaces the limit. A limiter that limited nothing starts with
// full budgets; otherwise what is left is kept, down to the new capacity
// (debt is kept as it is).
func (l *Limiter) SetRate(r Rate) {
	r = r.normal()
	l.mu.Lock()
	defer l.mu.Unlock()
	if r == l.rate {
		return
	}
	now := l.now()
	if l.rate.Unlimited() {
		l.msgs, l.bytes = float64(r.Msgs), float64(r.Bytes)
	} else {
		l.refillLocked(now)
		l.msgs, l.bytes = min(l.msgs, float64(r.Msgs)), min(l.bytes, float64(r.Bytes))
	}
	l.rate, l.last = r, now
}

// Rate returns the limit in force (the zero Rate: none).
func (l *Limiter) Rate() Rate {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate
}

// Stats returns the counters.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

func (l *Limiter) refillLocked(now time.Time) {
	d := now.Sub(l.last)
	if d <= 0 {
		return
	}
	l.last = now
	per := d.Seconds() / l.rate.Period.Seconds()
	if l.rate.Msgs > 0 {
		l.msgs = min(float64(l.rate.Msgs), l.msgs+per*float64(l.rate.Msgs))
	}
	if l.rate.Bytes > 0 {
		l.bytes = min(float64(l.rate.Bytes), l.bytes+per*float64(l.rate.Bytes))
	}
}

// untilLocked is how long until both budgets hold at least m messages
// and b bytes.
func (l *Limiter) untilLocked(m, b float64) time.Duration {
	var wait float64 // in periods
	if l.rate.Msgs > 0 && l.msgs < m {
		wait = (m - l.msgs) / float64(l.rate.Msgs)
	}
	if l.rate.Bytes > 0 && l.bytes < b {
		wait = max(wait, (b-l.bytes)/float64(l.rate.Bytes))
	}
	if wait <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(wait * float64(l.rate.Period)))
}

// Charge uses msgs messages and bytes bytes, whatever is left, and
// returns how long the user should wait before it uses more: until the
// debt, if any, is repaid (0: at once).
func (l *Limiter) Charge(msgs, bytes int64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.Msgs += msgs
	l.stats.Bytes += bytes
	if l.rate.Unlimited() {
		return 0
	}
	l.refillLocked(l.now())
	if l.rate.Msgs > 0 {
		l.msgs -= float64(msgs)
	}
	if l.rate.Bytes > 0 {
		l.bytes -= float64(bytes)
	}
	return l.throttleLocked(l.untilLocked(0, 0))
}

func (l *Limiter) throttleLocked(d time.Duration) time.Duration {
	if d > 0 {
		l.stats.Throttled++
		l.stats.Waited += d
	}
	return d
}

// Available returns how many messages and bytes may be used now
// (math.MaxInt64 for a dimension not limited), or, when none may (no
// whole message or byte left), zeros and how long until some may.
func (l *Limiter) Available() (msgs, bytes int64, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rate.Unlimited() {
		return math.MaxInt64, math.MaxInt64, 0
	}
	l.refillLocked(l.now())
	if d := l.untilLocked(1, 1); d > 0 {
		return 0, 0, l.throttleLocked(d)
	}
	msgs, bytes = math.MaxInt64, math.MaxInt64
	if l.rate.Msgs > 0 {
		msgs = int64(l.msgs)
	}
	if l.rate.Bytes > 0 {
		bytes = int64(l.bytes)
	}
	return msgs, bytes, 0
}

// Delay returns how long until the debt, if any, is repaid.
func (l *Limiter) Delay() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rate.Unlimited() {
		return 0
	}
	l.refillLocked(l.now())
	return l.untilLocked(0, 0)
}

// MaxSleep bounds one sleep of Wait: a long debt is slept in steps, so
// that a limit raised or lifted meanwhile takes effect within it.
const MaxSleep = time.Second

// Wait charges msgs and bytes and sleeps until the debt, if any, is
// repaid (under the limit in force), or ctx ends.
func (l *Limiter) Wait(ctx context.Context, msgs, bytes int64) error {
	d := l.Charge(msgs, bytes)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(min(d, MaxSleep))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if d = l.Delay(); d <= 0 {
			return nil
		}
		t.Reset(min(d, MaxSleep))
	}
}
