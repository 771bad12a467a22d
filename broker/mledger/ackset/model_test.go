package ackset

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// model is the naive reference: a map of individually acked positions.
type model struct {
	md    Position
	acked map[Position]bool
}

func (m *model) isAcked(p Position) bool { return p.Compare(m.md) <= 0 || m.acked[p] }

// ranges counts maximal runs of acked positions after md within a ledger.
func (m *model) ranges(ly layout) int {
	n := 0
	for _, l := range ly {
		prev := false
		for e := int64(0); e < l.entries; e++ {
			p := Position{l.ledger, e}
			cur := p.Compare(m.md) > 0 && m.acked[p]
			if cur && !prev {
				n++
			}
			prev = cur
		}
	}
	return n
}

func (m *model) count() int64 {
	var n int64
	for p := range m.acked {
		if p.Compare(m.md) > 0 {
			n++
		}
	}
	return n
}

func (m *model) cum(p Position) bool {
	if p.Compare(m.md) <= 0 {
		return false
	}
	m.md = p
	return true
}

// TestModel drives a Set and the model with the same random operations over
// a small ledger layout and compares them after every step.
func TestModel(t *testing.T) {
	ly := layout{{0, 6}, {1, 0}, {2, 9}, {3, 1}, {4, 12}}
	var all []Position
	for _, l := range ly {
		for e := int64(0); e < l.entries; e++ {
			all = append(all, Position{l.ledger, e})
		}
	}
	randPos := func(r *rand.Rand) Position { return all[r.IntN(len(all))] }

	deadline := time.Now().Add(3 * time.Second)
	seeds := 0
	for seed := uint64(1); seed <= 5000 && (seed <= 50 || time.Now().Before(deadline)); seed++ {
		seeds++
		r := rand.New(rand.NewPCG(seed, 0x15ab))
		md := Position{0, -1}
		if r.IntN(3) == 0 {
			md = randPos(r)
		}
		s := New(md)
		s.MaxRanges = []int{0, 0, 1, 2, 4}[r.IntN(5)]
		m := &model{md: md, acked: map[Position]bool{}}
		var trace []string
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d after %v: "+format, append([]any{seed, trace}, args...)...)
		}
		for step := 0; step < 200; step++ {
			var op string
			var got, want bool
			switch k := r.IntN(20); {
			case k < 10:
				p := randPos(r)
				op = "ack " + p.String()
				before := m.ranges(ly)
				var err error
				got, err = s.Ack(p)
				want = !m.isAcked(p)
				if want {
					m.acked[p] = true
					if after := m.ranges(ly); s.MaxRanges > 0 && after > s.MaxRanges && after > before {
						delete(m.acked, p)
						want = false
						if !errors.Is(err, ErrTooManyRanges) {
							fail("%s: err = %v, want ErrTooManyRanges", op, err)
						}
						err = nil
					}
				}
				if err != nil {
					fail("%s: %v", op, err)
				}
			case k < 13:
				p := randPos(r)
				q := Position{p.Ledger, p.Entry + int64(r.IntN(4))}
				for !contains(all, q) {
					q.Entry--
				}
				op = "range " + p.String() + ".." + q.String()
				var err error
				got, err = s.AckRange(p, q)
				// Apply in the model only if the set accepted it: the limit
				// check for ranges is the same rule as for single acks.
				before := m.ranges(ly)
				for e := p.Entry; e <= q.Entry; e++ {
					if x := (Position{p.Ledger, e}); !m.isAcked(x) {
						want = true
						m.acked[x] = true
					}
				}
				if want && s.MaxRanges > 0 {
					if after := m.ranges(ly); after > s.MaxRanges && after > before {
						for e := p.Entry; e <= q.Entry; e++ {
							x := Position{p.Ledger, e}
							if !s.IsAcked(x) {
								delete(m.acked, x)
							}
						}
						want = false
						if !errors.Is(err, ErrTooManyRanges) {
							fail("%s: err = %v, want ErrTooManyRanges", op, err)
						}
						err = nil
					}
				}
				if err != nil {
					fail("%s: %v", op, err)
				}
			case k < 15:
				p := randPos(r)
				op = "cum " + p.String()
				got, want = s.AckCumulative(p), m.cum(p)
			case k < 17:
				op = "inledger"
				got = s.AdvanceInLedger()
				for m.acked[Position{m.md.Ledger, m.md.Entry + 1}] && m.md.Compare(Position{m.md.Ledger, m.md.Entry + 1}) < 0 {
					want = m.cum(Position{m.md.Ledger, m.md.Entry + 1}) || want
				}
			default:
				op = "advance"
				got = s.Advance(ly.next)
				for {
					n, ok := ly.next(m.md)
					if !ok || !m.acked[n] {
						break
					}
					want = m.cum(n) || want
				}
			}
			trace = append(trace, op)
			if got != want {
				fail("%s: changed = %v, want %v", op, got, want)
			}
			checkInvariants(t, s)
			if s.MarkDelete() != m.md {
				fail("mark-delete %v, model %v", s.MarkDelete(), m.md)
			}
			for _, p := range all {
				if s.IsAcked(p) != m.isAcked(p) {
					fail("IsAcked(%v) = %v, model %v; set %v md %v", p, s.IsAcked(p), m.isAcked(p), s, s.md)
				}
			}
			if s.Count() != m.count() || s.Len() != m.ranges(ly) {
				fail("Count/Len = %d/%d, model %d/%d", s.Count(), s.Len(), m.count(), m.ranges(ly))
			}
			if step%16 == 0 {
				roundTrip(t, s)
			}
		}
	}
	t.Logf("%d seeds", seeds)
}

func contains(all []Position, p Position) bool {
	for _, q := range all {
		if q == p {
			return true
		}
	}
	return false
}
