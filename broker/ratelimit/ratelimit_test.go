package ratelimit

import (
	"context"
	"math"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newAt(r Rate) (*Limiter, *clock) {
	c := &clock{t: time.Unix(1000, 0)}
	l := &Limiter{Now: c.now}
	l.SetRate(r)
	return l, c
}

func TestZeroLimiterLimitsNothing(t *testing.T) {
	var l Limiter
	if d := l.Charge(1e9, 1e12); d != 0 {
		t.Fatalf("Charge = %v, want 0", d)
	}
	if n, b, d := l.Available(); n != math.MaxInt64 || b != math.MaxInt64 || d != 0 {
		t.Fatalf("Available = %d, %d, %v", n, b, d)
	}
	for _, r := range []Rate{{Msgs: -1, Bytes: -1}, {Msgs: 0, Bytes: 0, Period: time.Minute}} {
		l.SetRate(r)
		if !l.Rate().Unlimited() || l.Charge(5, 5) != 0 {
			t.Fatalf("%+v limits", r)
		}
	}
}

func TestMessagesPerPeriod(t *testing.T) {
	l, c := newAt(Rate{Msgs: 10, Period: 2 * time.Second})
	if n, _, _ := l.Available(); n != 10 {
		t.Fatalf("Available = %d, want the full budget 10", n)
	}
	if d := l.Charge(10, 0); d != 0 {
		t.Fatalf("spending the budget waits %v", d)
	}
	n, _, d := l.Available()
	if n != 0 || d != 200*time.Millisecond {
		t.Fatalf("Available = %d, %v; want 0, 200ms (one message's refill)", n, d)
	}
	if d := l.Charge(5, 0); d != time.Second {
		t.Fatalf("5 messages of debt wait %v, want 1s", d)
	}
	c.t = c.t.Add(time.Second)
	if n, _, d := l.Available(); n != 0 || d != 200*time.Millisecond {
		t.Fatalf("after the debt: %d, %v", n, d)
	}
	c.t = c.t.Add(time.Hour)
	if n, _, _ := l.Available(); n != 10 {
		t.Fatalf("budget refills to %d, want at most a period's 10", n)
	}
	if s := l.Stats(); s.Msgs != 15 || s.Throttled != 3 {
		t.Fatalf("stats %+v", s)
	}
}

func TestBytes(t *testing.T) {
	l, c := newAt(Rate{Bytes: 1000})
	if d := l.Charge(1, 3000); d != 2*time.Second {
		t.Fatalf("2000 bytes of debt wait %v, want 2s", d)
	}
	if n, b, d := l.Available(); n != 0 || b != 0 || d <= 2*time.Second {
		t.Fatalf("in debt: %d, %d, %v", n, b, d)
	}
	c.t = c.t.Add(3 * time.Second)
	if n, b, d := l.Available(); n != math.MaxInt64 || b != 1000 || d != 0 {
		t.Fatalf("messages are not limited: %d, %d, %v", n, b, d)
	}
}

func TestSetRate(t *testing.T) {
	l, c := newAt(Rate{Msgs: 100})
	l.Charge(90, 0)
	l.SetRate(Rate{Msgs: 5})
	if n, _, _ := l.Available(); n != 5 {
		t.Fatalf("lowered: %d left, want 5", n)
	}
	l.SetRate(Rate{Msgs: 100})
	if n, _, _ := l.Available(); n != 5 {
		t.Fatalf("raised: %d left, want the 5 still there", n)
	}
	c.t = c.t.Add(500 * time.Millisecond)
	if n, _, _ := l.Available(); n != 55 {
		t.Fatalf("refilled at the new rate: %d, want 55", n)
	}
	l.SetRate(Rate{})
	l.SetRate(Rate{Msgs: 7})
	if n, _, _ := l.Available(); n != 7 {
		t.Fatalf("limited again: %d, want a full 7", n)
	}
}

// TestLongRunRate spends as fast as allowed over a simulated minute and
// checks the rate let through.
func TestLongRunRate(t *testing.T) {
	l, c := newAt(Rate{Msgs: 2000, Bytes: 1 << 20})
	start := c.t
	var msgs int64
	for c.t.Sub(start) < time.Minute {
		if d := l.Charge(7, 700); d > 0 {
			c.t = c.t.Add(d)
		}
		msgs += 7
	}
	rate := float64(msgs) / c.t.Sub(start).Seconds()
	if rate < 1990 || rate > 2040 { // the first period's full budget
		t.Fatalf("rate %.0f msg/s, want 2000", rate)
	}
}

// A long debt is slept in steps: lifting the limit ends the wait.
func TestWaitSeesRateChange(t *testing.T) {
	l := New(Rate{Bytes: 100})
	done := make(chan error, 1)
	go func() { done <- l.Wait(context.Background(), 1, 100_000) }() // 1000 s of debt
	time.Sleep(50 * time.Millisecond)
	l.SetRate(Rate{})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait still sleeping off a lifted limit")
	}
	if d := l.Delay(); d != 0 {
		t.Fatalf("Delay %v without a limit", d)
	}
}
