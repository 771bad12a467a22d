package ackset

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

func roundTrip(t testing.TB, s *Set) {
	t.Helper()
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	var d Set
	if err := d.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary(%x) of %v md %v: %v", b, s, s.md, err)
	}
	if d.md != s.md || !slices.Equal(d.ranges, s.ranges) {
		t.Fatalf("round trip of %v md %v gave %v md %v", s, s.md, &d, d.md)
	}
}

// encodings are seeds for the fuzzer and the golden table.
func encodings(t testing.TB) [][]byte {
	var out [][]byte
	for _, build := range []func() *Set{
		func() *Set { return New(pos(0, -1)) },
		func() *Set {
			s := New(pos(3, 4))
			s.AckRange(pos(3, 5), pos(3, 7))
			s.Ack(pos(3, 10))
			s.Ack(pos(9, 0))
			s.AckRange(pos(300, 1000), pos(300, 1<<40))
			return s
		},
		func() *Set {
			s := New(pos(-1, -1))
			s.Ack(pos(0, 0))
			return s
		},
	} {
		b, err := build().MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func TestMarshalGolden(t *testing.T) {
	s := New(pos(3, 4))
	s.AckRange(pos(3, 5), pos(3, 7))
	s.Ack(pos(3, 10))
	s.Ack(pos(9, 0))
	b, _ := s.MarshalBinary()
	// version 1; md 3,4 zig-zag 6,8; 3 ranges;
	// (0, 5-5=0, 2); (0, 10-(7+2)=1, 0); (6, 0, 0)
	want := []byte{1, 6, 8, 3, 0, 0, 2, 0, 1, 0, 6, 0, 0}
	if !bytes.Equal(b, want) {
		t.Fatalf("MarshalBinary = %v, want %v", b, want)
	}
	if got, _ := s.AppendBinary([]byte{0xff}); !bytes.Equal(got[1:], want) || got[0] != 0xff {
		t.Fatalf("AppendBinary = %v", got)
	}
}

func TestUnmarshalErrors(t *testing.T) {
	uv := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.AppendUvarint(b, v)
		}
		return b
	}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	const maxU = 1<<64 - 1
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"version 0", []byte{0}},
		{"version 2", []byte{2, 0, 0, 0}},
		{"truncated header", []byte{1, 6}},
		{"truncated range", []byte{1, 6, 8, 1, 0, 0}},
		{"truncated varint in range", []byte{1, 6, 8, 1, 0, 0, 0x80}},
		{"overlong varint", cat([]byte{1}, bytes.Repeat([]byte{0xff}, 11))},
		{"trailing byte", []byte{1, 6, 8, 0, 0}},
		{"count exceeds input", []byte{1, 6, 8, 2, 0, 0, 0}},
		{"count exceeds max", cat([]byte{1, 0, 0}, uv(MaxDecodedRanges+1), make([]byte, 3*(MaxDecodedRanges+1)))},
		{"huge count", cat([]byte{1, 0, 0}, uv(maxU))},
		{"ledger overflow", cat([]byte{1, 6, 8}, uv(1, maxU, 0, 0))},
		{"first overflow", cat([]byte{1, 6, 8}, uv(1, 1, maxU, 0))},
		{"last overflow", cat([]byte{1, 6, 8}, uv(1, 1, 1<<62, 1<<62))},
		{"same-ledger first overflow", cat([]byte{1, 6, 8}, uv(1, 0, 1<<63, 0))},
		{"first before entry 0", cat([]byte{1, 6, 9}, uv(1, 0, 0, 0))},
		{"range in negative ledger", cat([]byte{1, 1, 1}, uv(1, 0, 0, 0))},
		{"no room after max entry", cat([]byte{1, 6}, binary.AppendVarint(nil, 1<<63-1), uv(1, 0, 0, 0))},
		{"no room after range ending at max", cat([]byte{1, 6, 8}, uv(2, 1, 0, 1<<63-1, 0, 0, 0))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(pos(7, 7))
			s.Ack(pos(7, 9))
			before := s.String()
			err := s.UnmarshalBinary(tt.in)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("UnmarshalBinary(%x) = %v, want ErrCorrupt", tt.in, err)
			}
			t.Log(err)
			if s.String() != before || s.md != pos(7, 7) {
				t.Fatalf("failed UnmarshalBinary changed the set to %v", s)
			}
		})
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, b := range encodings(f) {
		f.Add(b)
	}
	f.Add([]byte{1, 6, 8, 3, 0, 0, 2, 0, 1, 0, 6, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Set
		if err := s.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		checkInvariants(t, &s)
		roundTrip(t, &s)
		_ = s.String()
		_ = s.Count()
		// The decoded set must keep working.
		if s.Len() > 0 {
			r := s.ranges[0]
			s.Ack(r.End())
			s.AckCumulative(r.Start())
			s.AdvanceInLedger()
			checkInvariants(t, &s)
			roundTrip(t, &s)
		}
	})
}
