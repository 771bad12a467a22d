package ackset

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Binary format, version 1. All integers are varints as in encoding/binary:
// "uvarint" unsigned, "varint" zig-zag signed.
//
//	version            byte, 1
//	markDelete.Ledger  varint
//	markDelete.Entry   varint
//	n                  uvarint, number of ranges, at most MaxDecodedRanges
//	n times:
//	  ledgerDelta      uvarint, Ledger minus the previous range's Ledger
//	                   (minus markDelete.Ledger for the first range)
//	  start            uvarint; if ledgerDelta is 0, First minus the least
//	                   value allowed (previous Last + 2, which keeps ranges
//	                   non-adjacent, or markDelete.Entry + 1 for the first
//	                   range); otherwise First itself
//	  span             uvarint, Last minus First
//
// A range in markDelete's ledger may start right after it (no implicit
// merge). Decoding rejects trailing bytes, overflow, and anything that is
// not the canonical form the Set keeps, so a decoded Set satisfies the same
// invariants as one built by acks.

const formatV1 = 1

// MaxDecodedRanges bounds the number of ranges UnmarshalBinary accepts,
// and so the memory a decoded Set uses (24 bytes per range).
const MaxDecodedRanges = 1 << 20

// AppendBinary appends the encoding of s to dst.
func (s *Set) AppendBinary(dst []byte) ([]byte, error) {
	dst = append(dst, formatV1)
	dst = binary.AppendVarint(dst, s.md.Ledger)
	dst = binary.AppendVarint(dst, s.md.Entry)
	dst = binary.AppendUvarint(dst, uint64(len(s.ranges)))
	prevLedger, least := s.md.Ledger, s.md.Entry+1
	for _, r := range s.ranges {
		if r.Ledger == prevLedger {
			dst = binary.AppendUvarint(dst, 0)
			dst = binary.AppendUvarint(dst, uint64(r.First-least))
		} else {
			dst = binary.AppendUvarint(dst, uint64(r.Ledger-prevLedger))
			dst = binary.AppendUvarint(dst, uint64(r.First))
		}
		dst = binary.AppendUvarint(dst, uint64(r.Last-r.First))
		prevLedger, least = r.Ledger, r.Last+2
	}
	return dst, nil
}

// MarshalBinary returns the encoding of s. MaxRanges is not encoded: it is
// configuration, not state.
func (s *Set) MarshalBinary() ([]byte, error) { return s.AppendBinary(nil) }

// UnmarshalBinary replaces the state of s (not MaxRanges) with the one
// encoded in data. On error s is unchanged and the error wraps ErrCorrupt.
// A decoded set may hold more than MaxRanges ranges; further acks that
// would add a range then fail.
func (s *Set) UnmarshalBinary(data []byte) error {
	md, ranges, err := decode(data)
	if err != nil {
		return err
	}
	s.md, s.ranges = md, ranges
	return nil
}

// reader is a sticky-error varint reader.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("%s: bad uvarint", what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("%s: bad varint", what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// addNonNeg returns base+u if it is a valid int64 at least 0.
func addNonNeg(base int64, u uint64) (int64, bool) {
	if base < 0 && u <= math.MaxInt64 {
		v := base + int64(u) // cannot overflow: base < 0
		return v, v >= 0
	}
	if base < 0 { // u > MaxInt64
		v := uint64(base+math.MaxInt64+1) + (u - math.MaxInt64 - 1)
		return int64(v), v <= math.MaxInt64
	}
	if u > uint64(math.MaxInt64-base) {
		return 0, false
	}
	return base + int64(u), true
}

func decode(data []byte) (Position, []Range, error) {
	if len(data) == 0 {
		return Position{}, nil, fmt.Errorf("%w: empty input", ErrCorrupt)
	}
	if data[0] != formatV1 {
		return Position{}, nil, fmt.Errorf("%w: unknown version %d", ErrCorrupt, data[0])
	}
	r := &reader{b: data[1:]}
	md := Position{r.varint("mark-delete ledger"), r.varint("mark-delete entry")}
	n := r.uvarint("range count")
	if r.err != nil {
		return Position{}, nil, r.err
	}
	// Each range takes at least 3 bytes: bound the allocation by the input.
	if n > MaxDecodedRanges || n > uint64(len(r.b))/3 {
		return Position{}, nil, fmt.Errorf("%w: range count %d too large for %d bytes (max %d)",
			ErrCorrupt, n, len(r.b), MaxDecodedRanges)
	}
	var ranges []Range
	if n > 0 {
		ranges = make([]Range, 0, n)
	}
	prevLedger := md.Ledger
	// least is the smallest First allowed in prevLedger; ok is false when
	// no further range fits in prevLedger (or prevLedger is negative).
	least, ok := md.Entry+1, md.Entry < math.MaxInt64 && md.Ledger >= 0
	for i := uint64(0); i < n && r.err == nil; i++ {
		dl := r.uvarint("ledger delta")
		start := r.uvarint("range start")
		span := r.uvarint("range span")
		if r.err != nil {
			break
		}
		var rg Range
		var good bool
		if dl == 0 {
			if !ok {
				r.fail("range %d: no entry left in ledger %d after the previous range", i, prevLedger)
				break
			}
			rg.Ledger = prevLedger
			rg.First, good = addNonNeg(least, start)
		} else {
			rg.Ledger, good = addNonNeg(prevLedger, dl)
			if good && start <= math.MaxInt64 {
				rg.First = int64(start)
			} else {
				good = false
			}
		}
		if good {
			rg.Last, good = addNonNeg(rg.First, span)
		}
		if !good {
			r.fail("range %d: position out of range", i)
			break
		}
		ranges = append(ranges, rg)
		prevLedger = rg.Ledger
		least, ok = rg.Last+2, rg.Last < math.MaxInt64-1
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return Position{}, nil, r.err
	}
	return md, ranges, nil
}
