package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// jsonEntries returns n entries of about size bytes each: JSON-like records
// with varied field values drawn from a seeded generator, at ascending
// positions that cross a ledger boundary every 300 entries.
func jsonEntries(seed int64, n, size int) []Entry {
	rng := rand.New(rand.NewSource(seed))
	names := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"}
	cities := []string{"Lisbon", "Osaka", "Lagos", "Denver", "Tallinn", "Recife", "Perth"}
	events := []string{"order.created", "order.paid", "order.shipped", "cart.updated", "user.login", "user.logout"}
	tags := []string{"mobile", "web", "promo", "vip", "retry", "eu", "us", "apac"}
	entries := make([]Entry, n)
	ts := int64(1_790_000_000_000)
	pos := Pos{Ledger: 42, Entry: 0}
	for i := range entries {
		if i > 0 && i%300 == 0 {
			pos = Pos{Ledger: pos.Ledger + 1 + int64(rng.Intn(3)), Entry: 0}
		}
		ts += int64(rng.Intn(2000))
		var b strings.Builder
		fmt.Fprintf(&b, `{"id":"%016x","ts":%d,"event":%q,"user":{"name":%q,"city":%q,"age":%d},"amount":%.2f,"score":%.6f,"tags":[`,
			rng.Uint64(), ts, events[rng.Intn(len(events))], names[rng.Intn(len(names))],
			cities[rng.Intn(len(cities))], 18+rng.Intn(60), rng.Float64()*1000, rng.NormFloat64())
		for j := range 1 + rng.Intn(3) {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q", tags[rng.Intn(len(tags))])
		}
		b.WriteString(`],"items":[`)
		for j := 0; b.Len() < size-40; j++ {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"sku":"SKU-%05d","qty":%d,"price":%.2f}`, rng.Intn(100000), 1+rng.Intn(9), rng.Float64()*200)
		}
		b.WriteString("]}")
		entries[i] = Entry{Pos: pos, Data: []byte(b.String())}
		pos.Entry += 1 + int64(rng.Intn(2))
	}
	return entries
}

func rawBodySize(entries []Entry) int {
	var n int
	var prev Pos
	for i, e := range entries {
		switch {
		case i == 0:
			n += uvarintLen(uint64(e.Pos.Ledger)) + uvarintLen(uint64(e.Pos.Entry))
		case e.Pos.Ledger == prev.Ledger:
			n += 1 + uvarintLen(uint64(e.Pos.Entry-prev.Entry))
		default:
			n += uvarintLen(uint64(e.Pos.Ledger-prev.Ledger)) + uvarintLen(uint64(e.Pos.Entry))
		}
		n += uvarintLen(uint64(len(e.Data))) + len(e.Data)
		prev = e.Pos
	}
	return n
}

func uvarintLen(v uint64) int { return len(binary.AppendUvarint(nil, v)) }

func sameEntries(t *testing.T, got, want []Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Pos != want[i].Pos || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("entry %d: got %v (%d bytes), want %v (%d bytes)", i, got[i].Pos, len(got[i].Data), want[i].Pos, len(want[i].Data))
		}
	}
}

type roundTripCase struct {
	name    string
	entries []Entry
	limits  Limits
}

func roundTripCases() []roundTripCase {
	maxEntries := make([]Entry, 50)
	for i := range maxEntries {
		maxEntries[i] = Entry{Pos: Pos{7, int64(i)}, Data: []byte{byte(i)}}
	}
	// One entry whose raw body is exactly 64 KiB.
	big := []Entry{{Pos: Pos{1, 2}, Data: bytes.Repeat([]byte("x"), 1<<16-1-1-3)}}
	return []roundTripCase{
		{name: "one entry", entries: []Entry{{Pos: Pos{3, 9}, Data: []byte("hello")}}},
		{name: "empty data", entries: []Entry{{Pos: Pos{0, 0}}, {Pos: Pos{0, 1}, Data: []byte{}}}},
		{name: "ledger changes", entries: []Entry{
			{Pos: Pos{1, 5}, Data: []byte("a")}, {Pos: Pos{1, 9}, Data: []byte("b")},
			{Pos: Pos{4, 0}, Data: []byte("c")}, {Pos: Pos{1000, 2}, Data: []byte("d")},
		}},
		{name: "extreme positions", entries: []Entry{
			{Pos: Pos{0, math.MaxInt64 - 1}, Data: []byte("a")}, {Pos: Pos{0, math.MaxInt64}, Data: []byte("b")},
			{Pos: Pos{math.MaxInt64, 0}, Data: []byte("c")}, {Pos: Pos{math.MaxInt64, math.MaxInt64}, Data: []byte("d")},
		}},
		{name: "1000 entries of 1 KiB", entries: jsonEntries(1, 1000, 1024)},
		{name: "max entries", entries: maxEntries, limits: Limits{MaxEntries: 50}},
		{name: "max raw bytes", entries: big, limits: Limits{MaxRawBytes: 1 << 16}},
		{name: "default limits full", entries: jsonEntries(2, 8000, 1024)},
	}
}

func TestRoundTrip(t *testing.T) {
	enc := NewEncoder()
	for _, tc := range roundTripCases() {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte("prefix")
			frame, raw, err := enc.Encode(prefix, tc.entries)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(frame, prefix) {
				t.Fatal("Encode did not append to dst")
			}
			if want := rawBodySize(tc.entries); raw != want {
				t.Fatalf("raw = %d, want %d", raw, want)
			}
			got, err := NewDecoder(tc.limits).Decode(frame[len(prefix):])
			if err != nil {
				t.Fatal(err)
			}
			sameEntries(t, got, tc.entries)
		})
	}
}

func TestRoundTripAtLimitsThenOneOver(t *testing.T) {
	enc := NewEncoder()
	entries := make([]Entry, 11)
	for i := range entries {
		entries[i] = Entry{Pos: Pos{1, int64(i)}, Data: []byte("0123456789")}
	}
	frame, raw, err := enc.Encode(nil, entries)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewDecoder(Limits{MaxEntries: 11, MaxRawBytes: raw, MaxFrameBytes: len(frame)}).Decode(frame); err != nil {
		t.Fatalf("at limits: %v", err)
	}
	for _, l := range []Limits{{MaxEntries: 10}, {MaxRawBytes: raw - 1}, {MaxFrameBytes: len(frame) - 1}} {
		if _, err := NewDecoder(l).Decode(frame); !errors.Is(err, ErrTooLarge) {
			t.Errorf("limits %+v: err = %v, want ErrTooLarge", l, err)
		}
	}
}

func TestEncodeRejectsInvalid(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []Entry
		msg     string
	}{
		{"empty", nil, "no entries"},
		{"negative ledger", []Entry{{Pos: Pos{-1, 0}}}, "entry 0: negative position"},
		{"negative entry", []Entry{{Pos: Pos{0, 0}}, {Pos: Pos{0, -1}}}, "entry 1: negative position"},
		{"duplicate", []Entry{{Pos: Pos{2, 3}}, {Pos: Pos{2, 3}}}, "entry 1: position 2:3 not after 2:3"},
		{"descending", []Entry{{Pos: Pos{2, 3}}, {Pos: Pos{2, 4}}, {Pos: Pos{1, 9}}}, "entry 2: position 1:9 not after 2:4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			out, _, err := NewEncoder().Encode(dst, tc.entries)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want ErrInvalid with %q", err, tc.msg)
			}
			if string(out) != "keep" {
				t.Fatalf("dst changed to %q", out)
			}
		})
	}
}

// header builds a frame header by hand.
func header(flags byte, count, rawLen uint64, sum uint32) []byte {
	b := append([]byte(magic), version, flags)
	b = binary.AppendUvarint(b, count)
	b = binary.AppendUvarint(b, rawLen)
	return binary.BigEndian.AppendUint32(b, sum)
}

// plainFrame builds an uncompressed frame with a correct header for body.
func plainFrame(count uint64, body []byte) []byte {
	return append(header(0, count, uint64(len(body)), crc32.Checksum(body, castagnoli)), body...)
}

// zstdFrame builds a compressed frame with a correct header for body.
func zstdFrame(count uint64, body []byte) []byte {
	zw, _ := zstd.NewWriter(nil)
	return zw.EncodeAll(body, header(flagZstd, count, uint64(len(body)), crc32.Checksum(body, castagnoli)))
}

// uv concatenates uvarints, then appends tail.
func uv(tail string, vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return append(b, tail...)
}

type corruptCase struct {
	name   string
	frame  []byte
	limits Limits
	want   error
	msg    string
}

func corruptCases() []corruptCase {
	good, _, _ := NewEncoder().Encode(nil, []Entry{{Pos: Pos{1, 1}, Data: []byte("abc")}, {Pos: Pos{1, 2}, Data: []byte("def")}})
	goodBody := uv("abc", 1, 1, 3)
	goodBody = append(goodBody, uv("def", 0, 1, 3)...)

	flipCRC := plainFrame(2, goodBody)
	flipCRC[len(flipCRC)-1] ^= 1 // body byte flipped after the CRC was computed

	zstdBody := zstdFrame(2, goodBody)
	hdrLen := len(header(flagZstd, 2, uint64(len(goodBody)), 0))
	shortDeclared := append(header(flagZstd, 2, uint64(len(goodBody))-1, 0), zstdBody[hdrLen:]...)
	longDeclared := append(header(flagZstd, 2, uint64(len(goodBody))+1, 0), zstdBody[hdrLen:]...)

	overflow := bytes.Repeat([]byte{0xff}, 10)
	overflow = append(overflow, 0x01)

	return append(dictCorruptCases(), []corruptCase{
		{name: "empty input", frame: nil, want: ErrCorrupt, msg: "header truncated"},
		{name: "bad magic", frame: append([]byte("ISRX"), good[4:]...), want: ErrCorrupt, msg: `bad magic "ISRX"`},
		{name: "bad version", frame: append(append([]byte("ISRF"), 3), good[5:]...), want: ErrCorrupt, msg: "unsupported version 3"},
		{name: "unknown flags", frame: header(0x82, 1, 3, 0), want: ErrCorrupt, msg: "unknown flags 0x82"},
		{name: "count truncated", frame: append([]byte("ISRF"), version, 0, 0x80), want: ErrCorrupt, msg: "header: entry count truncated"},
		{name: "count overflows", frame: append(append([]byte("ISRF"), version, 0), overflow...), want: ErrCorrupt, msg: "entry count overflows"},
		{name: "checksum truncated", frame: header(0, 1, 3, 0)[:10], want: ErrCorrupt, msg: "checksum truncated"},
		{name: "zero entries", frame: plainFrame(0, nil), want: ErrCorrupt, msg: "no entries"},
		{name: "too many entries", frame: header(flagZstd, 10001, 1<<20, 0), want: ErrTooLarge, msg: "10001 entries exceed 10000"},
		{name: "too many entries custom", frame: good, limits: Limits{MaxEntries: 1}, want: ErrTooLarge, msg: "2 entries exceed 1"},
		{name: "raw too large", frame: header(flagZstd, 1, 8<<20+1, 0), want: ErrTooLarge, msg: "raw body of 8388609 bytes exceeds 8388608"},
		{name: "frame too large", frame: good, limits: Limits{MaxFrameBytes: 8}, want: ErrTooLarge, msg: "exceeds 8"},
		{name: "count cannot fit", frame: header(flagZstd, 5, 14, 0), want: ErrCorrupt, msg: "5 entries cannot fit in a raw body of 14 bytes"},
		{name: "checksum mismatch", frame: flipCRC, want: ErrCorrupt, msg: "checksum mismatch"},
		{name: "zstd garbage", frame: append(header(flagZstd, 1, 3, 0), "not zstd at all"...), want: ErrCorrupt, msg: "decompress body"},
		{name: "zstd body missing", frame: header(flagZstd, 1, 3, 0), want: ErrCorrupt, msg: "decompresses to 0 bytes, header says 3"},
		{name: "zstd past declared", frame: shortDeclared, want: ErrCorrupt, msg: "past its declared"},
		{name: "zstd short of declared", frame: longDeclared, want: ErrCorrupt, msg: "decompresses to 12 bytes, header says 13"},
		{name: "zstd truncated", frame: zstdBody[:len(zstdBody)-3], want: ErrCorrupt, msg: "decompress body"},
		{name: "plain body truncated", frame: plainFrame(2, goodBody)[:len(plainFrame(2, goodBody))-1], want: ErrCorrupt, msg: "body truncated"},
		{name: "plain trailing bytes", frame: append(plainFrame(2, goodBody), 0), want: ErrCorrupt, msg: "1 trailing bytes after body"},
		{name: "positions not ascending", frame: plainFrame(4, uv("", 1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0)), want: ErrCorrupt, msg: "entry 3: positions not ascending"},
		{name: "negative ledger", frame: plainFrame(1, uv("", math.MaxInt64+1, 0, 0)), want: ErrCorrupt, msg: "entry 0: negative ledger id"},
		{name: "negative entry", frame: plainFrame(1, uv("", 0, math.MaxUint64, 0)), want: ErrCorrupt, msg: "entry 0: negative entry id"},
		{name: "negative entry after ledger delta", frame: plainFrame(2, uv("", 0, 0, 0, 1, math.MaxInt64+1, 0)), want: ErrCorrupt, msg: "entry 1: negative entry id"},
		{name: "ledger overflow", frame: plainFrame(2, uv("", math.MaxInt64, 0, 0, 1, 0, 0)), want: ErrCorrupt, msg: "entry 1: ledger id overflows"},
		{name: "entry overflow", frame: plainFrame(2, uv("", 0, math.MaxInt64, 0, 0, 1, 0)), want: ErrCorrupt, msg: "entry 1: entry id overflows"},
		{name: "data truncated", frame: plainFrame(1, uv("ab", 0, 0, 3)), want: ErrCorrupt, msg: "entry 0: data truncated: 2 of 3 bytes"},
		{name: "entry header truncated", frame: plainFrame(2, append(uv("xy", 0, 0, 2), 0)), want: ErrCorrupt, msg: "entry 1: entry delta truncated"},
		{name: "varint overflow in body", frame: plainFrame(1, append(overflow, 0, 0)), want: ErrCorrupt, msg: "entry 0: ledger id overflows 64 bits"},
		{name: "trailing bytes after entries", frame: plainFrame(1, uv("abcX", 0, 0, 3)), want: ErrCorrupt, msg: "1 trailing bytes after 1 entries"},
	}...)
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range corruptCases() {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewDecoder(tc.limits).Decode(tc.frame)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %q, want it to contain %q", err, tc.msg)
			}
			if got != nil {
				t.Fatalf("got %d entries with an error", len(got))
			}
		})
	}
}

func TestDecodeAcceptsUncompressed(t *testing.T) {
	body := uv("abc", 5, 7, 3)
	body = append(body, uv("", 2, 0, 0)...)
	frame := plainFrame(2, body)
	got, err := NewDecoder(Limits{}).Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, got, []Entry{{Pos: Pos{5, 7}, Data: []byte("abc")}, {Pos: Pos{7, 0}, Data: nil}})
	// Data must not alias the frame.
	for i := range frame {
		frame[i] = 0
	}
	if string(got[0].Data) != "abc" {
		t.Fatalf("Data aliases the frame: %q", got[0].Data)
	}
	if cap(got[0].Data) != 3 {
		t.Fatalf("cap(Data) = %d, want 3 so appends cannot clobber the next entry", cap(got[0].Data))
	}
}

func TestDecoderConcurrent(t *testing.T) {
	entries := jsonEntries(3, 200, 512)
	frame, _, err := NewEncoder().Encode(nil, entries)
	if err != nil {
		t.Fatal(err)
	}
	dec := NewDecoder(Limits{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 20 {
				got, err := dec.Decode(frame)
				if err != nil {
					errs <- err
					return
				}
				if len(got) != len(entries) || !bytes.Equal(got[199].Data, entries[199].Data) {
					errs <- errors.New("decoded entries differ")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func FuzzDecode(f *testing.F) {
	enc := NewEncoder()
	denc, err := NewDictEncoder(testDict(0), zstd.SpeedFastest)
	if err != nil {
		f.Fatal(err)
	}
	for _, tc := range roundTripCases() {
		if len(tc.entries) > 100 {
			tc.entries = tc.entries[:100] // keep the corpus small
		}
		for _, e := range []func([]byte, []Entry) ([]byte, int, error){enc.Encode, denc.Encode, denc.EncodeCarrying} {
			frame, _, err := e(nil, tc.entries)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(frame)
		}
	}
	for _, tc := range corruptCases() {
		f.Add(tc.frame)
	}
	lim := Limits{MaxEntries: 1000, MaxRawBytes: 1 << 20, MaxFrameBytes: 1 << 20, MaxDictBytes: 64 << 10}
	dec := NewDecoder(lim)
	// The receiver holds the test dictionary, as if an earlier frame had
	// carried it: frames that only name it decode too.
	known := knowing(testDict(0))
	// The fuzz function runs sequentially within each worker process, so
	// one Encoder serves them all.
	f.Fuzz(func(t *testing.T, frame []byte) {
		entries, carried, err := dec.DecodeDict(frame, known)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnknownDict) {
				t.Fatalf("error %v is neither ErrCorrupt, ErrTooLarge nor ErrUnknownDict", err)
			}
			if carried != nil {
				t.Fatal("a dictionary returned with an error")
			}
			return
		}
		if len(entries) == 0 || len(entries) > lim.MaxEntries {
			t.Fatalf("%d entries accepted", len(entries))
		}
		again := enc
		if carried != nil {
			// A carried dictionary is one that compresses and decodes.
			if carried.ID() != IDOf(carried.Bytes()) || len(carried.Bytes()) > lim.MaxDictBytes {
				t.Fatalf("carried dictionary %v of %d bytes", carried.ID(), len(carried.Bytes()))
			}
			if again, err = NewDictEncoder(carried, zstd.SpeedFastest); err != nil {
				t.Fatalf("carried dictionary does not encode: %v", err)
			}
			known = knowing(testDict(0), carried)
			defer func() { known = knowing(testDict(0)) }()
		}
		// Whatever decodes must re-encode to an equivalent frame.
		b, _, err := again.Encode(nil, entries)
		if err != nil {
			t.Fatalf("re-encode decoded entries: %v", err)
		}
		back, _, err := dec.DecodeDict(b, known)
		if err != nil {
			t.Fatalf("decode re-encoded frame: %v", err)
		}
		sameEntries(t, back, entries)
	})
}

func BenchmarkEncode(b *testing.B) {
	entries := jsonEntries(1, 1000, 1024)
	enc := NewEncoder()
	var frame []byte
	var raw int
	b.ReportAllocs()
	for b.Loop() {
		var err error
		frame, raw, err = enc.Encode(frame[:0], entries)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(raw))
	b.ReportMetric(float64(len(frame))/float64(raw), "compressed/raw")
}

func BenchmarkDecode(b *testing.B) {
	entries := jsonEntries(1, 1000, 1024)
	frame, raw, err := NewEncoder().Encode(nil, entries)
	if err != nil {
		b.Fatal(err)
	}
	dec := NewDecoder(Limits{})
	b.SetBytes(int64(raw))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dec.Decode(frame); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(frame))/float64(raw), "compressed/raw")
}
