package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"

	"github.com/isobar-mq/isobar/internal/payloadgen"
)

var (
	testDictOnce sync.Once
	testDicts    [2]*Dict
)

// testDict returns one of two dictionaries trained on the payload set's
// order events (0: before drift, 1: after), built once.
func testDict(i int) *Dict {
	testDictOnce.Do(func() {
		for j, s := range []payloadgen.Shape{payloadgen.Orders, payloadgen.OrdersV2} {
			data, err := dict.BuildZstdDict(payloadgen.New(s, 100).Messages(300), dict.Options{MaxDictSize: 16 << 10, HashBytes: 6, ZstdDictID: uint32(7 + j)})
			if err != nil {
				panic(err)
			}
			if testDicts[j], err = NewDict(data, Limits{}); err != nil {
				panic(err)
			}
		}
	})
	return testDicts[i]
}

// payloadEntries are n messages of shape s as entries.
func payloadEntries(s payloadgen.Shape, seed int64, n int) []Entry {
	msgs := payloadgen.New(s, seed).Messages(n)
	out := make([]Entry, n)
	for i, m := range msgs {
		out[i] = Entry{Pos: Pos{9, int64(i)}, Data: m}
	}
	return out
}

func dictEncoder(t testing.TB, i int) *Encoder {
	t.Helper()
	enc, err := NewDictEncoder(testDict(i), zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// knowing is a receiver's dictionary lookup holding dicts.
func knowing(dicts ...*Dict) func(DictID) *Dict {
	return func(id DictID) *Dict {
		for _, d := range dicts {
			if d.ID() == id {
				return d
			}
		}
		return nil
	}
}

func TestDictRoundTrip(t *testing.T) {
	enc := dictEncoder(t, 0)
	d := testDict(0)
	for _, tc := range roundTripCases() {
		t.Run(tc.name, func(t *testing.T) {
			dec := NewDecoder(tc.limits)
			named, raw, err := enc.Encode(nil, tc.entries)
			if err != nil {
				t.Fatal(err)
			}
			if want := rawBodySize(tc.entries); raw != want {
				t.Fatalf("raw = %d, want %d", raw, want)
			}
			if named[4] != versionV2 {
				t.Fatalf("version %d, want 2", named[4])
			}
			// A receiver that does not hold the dictionary refuses the
			// frame that only names it, and says which.
			if _, err := dec.Decode(named); !errors.Is(err, ErrUnknownDict) || !strings.Contains(err.Error(), d.ID().String()) {
				t.Fatalf("without the dictionary: err = %v, want ErrUnknownDict naming %v", err, d.ID())
			}
			got, carried, err := dec.DecodeDict(named, knowing(d))
			if err != nil {
				t.Fatal(err)
			}
			if carried != nil {
				t.Fatal("a frame that only names its dictionary returned one as carried")
			}
			sameEntries(t, got, tc.entries)

			carrying, _, err := enc.EncodeCarrying(nil, tc.entries)
			if err != nil {
				t.Fatal(err)
			}
			if len(carrying) != len(named)+len(d.Bytes())+uvarintLen(uint64(len(d.Bytes()))) {
				t.Fatalf("carrying frame is %d bytes, want the named one's %d plus the dictionary", len(carrying), len(named))
			}
			// Any receiver decodes a carrying frame, and keeps the
			// dictionary for the next frames.
			got, carried, err = dec.DecodeDict(carrying, nil)
			if err != nil {
				t.Fatal(err)
			}
			sameEntries(t, got, tc.entries)
			if carried == nil || carried.ID() != d.ID() || !bytes.Equal(carried.Bytes(), d.Bytes()) {
				t.Fatal("carried dictionary not returned")
			}
			if &carried.Bytes()[0] == &carrying[bytes.Index(carrying, d.Bytes())] {
				t.Fatal("carried dictionary aliases the frame")
			}
			got, _, err = dec.DecodeDict(named, knowing(carried))
			if err != nil {
				t.Fatal(err)
			}
			sameEntries(t, got, tc.entries)
			// A receiver that holds it already gets its own back.
			if _, again, err := dec.DecodeDict(carrying, knowing(d)); err != nil || again != d {
				t.Fatalf("carrying frame to a holder: %v, %p, want %p", err, again, d)
			}
		})
	}
}

// TestPlainFramesStayVersion1 pins the compatibility rule: an encoder
// without a dictionary writes version 1 frames, byte for byte what
// receivers that predate dictionaries read.
func TestPlainFramesStayVersion1(t *testing.T) {
	entries := payloadEntries(payloadgen.Logs, 1, 20)
	for _, carry := range []bool{false, true} {
		enc := NewEncoder()
		f, _, err := enc.encode(nil, entries, carry)
		if err != nil {
			t.Fatal(err)
		}
		if f[4] != version || f[5] != flagZstd {
			t.Fatalf("carry %v: version %d flags %#x, want 1 and 0x1", carry, f[4], f[5])
		}
	}
}

func TestDictCompresses(t *testing.T) {
	entries := payloadEntries(payloadgen.Orders, 5, 10)
	plain, raw, _ := NewEncoder().Encode(nil, entries)
	named, _, _ := dictEncoder(t, 0).Encode(nil, entries)
	t.Logf("10 orders, %d raw bytes: plain %d, with dictionary %d", raw, len(plain), len(named))
	if len(named) >= len(plain) {
		t.Fatalf("dictionary frame %d bytes, plain %d", len(named), len(plain))
	}
}

func TestNewDictRejects(t *testing.T) {
	good := testDict(0).Bytes()
	for _, tc := range []struct {
		name string
		data []byte
		lim  Limits
		want error
	}{
		{"empty", nil, Limits{}, ErrCorrupt},
		{"garbage", []byte("not a dictionary at all"), Limits{}, ErrCorrupt},
		{"truncated", good[:40], Limits{}, ErrCorrupt},
		{"too large", good, Limits{MaxDictBytes: len(good) - 1}, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewDict(tc.data, tc.lim); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// dictFrame builds a version 2 frame by hand: header fields, dictionary
// id, optionally a carried dictionary, then body as is.
func dictFrame(flags byte, count, rawLen uint64, sum uint32, id uint64, carried []byte, body []byte) []byte {
	b := append([]byte(magic), versionV2, flags)
	b = binary.AppendUvarint(b, count)
	b = binary.AppendUvarint(b, rawLen)
	b = binary.BigEndian.AppendUint32(b, sum)
	if flags&flagDict != 0 {
		b = binary.BigEndian.AppendUint64(b, id)
	}
	if flags&flagCarry != 0 {
		b = binary.AppendUvarint(b, uint64(len(carried)))
		b = append(b, carried...)
	}
	return append(b, body...)
}

func dictCorruptCases() []corruptCase {
	// Built without a testing.TB: the cases are also fuzz seeds.
	d := testDict(0)
	other := testDict(1)
	entries := payloadEntries(payloadgen.Orders, 3, 3)
	enc, _ := NewDictEncoder(d, zstd.SpeedFastest)
	good, raw, _ := enc.EncodeCarrying(nil, entries)
	named, _, _ := enc.Encode(nil, entries)
	body := named[len(named)-(len(named)-len(dictFrame(flagZstd|flagDict, 3, uint64(raw), 0, 0, nil, nil))):]
	var rawBody []byte
	for i, e := range entries {
		if i == 0 {
			rawBody = uv(string(e.Data), 9, 0, uint64(len(e.Data)))
		} else {
			rawBody = append(rawBody, uv(string(e.Data), 0, 1, uint64(len(e.Data)))...)
		}
	}
	sum := crc32.Checksum(rawBody, castagnoli)
	id := uint64(d.ID())
	// A body compressed with the other dictionary, named as d.
	wrongDict, _ := NewDictEncoder(other, zstd.SpeedFastest)
	wrong, _, _ := wrongDict.Encode(nil, entries)
	wrongBody := wrong[len(wrong)-(len(wrong)-len(dictFrame(flagZstd|flagDict, 3, uint64(raw), 0, 0, nil, nil))):]

	idShort := dictFrame(flagZstd|flagDict, 3, uint64(raw), sum, id, nil, nil)
	idShort = idShort[:len(idShort)-5]
	lenShort := append(dictFrame(flagZstd|flagDict, 3, uint64(raw), sum, id, nil, nil), 0x80)
	lenShort[5] |= flagCarry

	return []corruptCase{
		{name: "v2 unknown flags", frame: dictFrame(0x0f, 1, 3, 0, 0, nil, nil), want: ErrCorrupt, msg: "unknown flags 0x0f for version 2"},
		{name: "v1 dictionary flag", frame: header(flagZstd|flagDict, 1, 3, 0), want: ErrCorrupt, msg: "unknown flags 0x03 for version 1"},
		{name: "dictionary without zstd", frame: dictFrame(flagDict, 1, 3, 0, id, nil, nil), want: ErrCorrupt, msg: "a dictionary without zstd"},
		{name: "carry without dictionary", frame: dictFrame(flagZstd|flagCarry, 1, 3, 0, 0, nil, nil), want: ErrCorrupt, msg: "a carried dictionary without its use"},
		{name: "dictionary id truncated", frame: idShort, want: ErrCorrupt, msg: "header: dictionary id truncated"},
		{name: "unknown dictionary", frame: named, want: ErrUnknownDict, msg: d.ID().String()},
		{name: "dictionary length truncated", frame: lenShort, want: ErrCorrupt, msg: "dictionary length truncated"},
		{name: "dictionary truncated", frame: dictFrame(flagZstd|flagDict|flagCarry, 3, uint64(raw), sum, id, d.Bytes(), nil)[:100], want: ErrCorrupt, msg: "dictionary truncated"},
		{name: "dictionary too large", frame: dictFrame(flagZstd|flagDict|flagCarry, 3, uint64(raw), sum, id, make([]byte, DefaultMaxDictBytes+1), nil), want: ErrTooLarge, msg: "dictionary of 131073 bytes exceeds 131072"},
		{name: "dictionary too large custom", frame: good, limits: Limits{MaxDictBytes: 100}, want: ErrTooLarge, msg: "exceeds 100"},
		{name: "carried dictionary not its id", frame: dictFrame(flagZstd|flagDict|flagCarry, 3, uint64(raw), sum, id^1, d.Bytes(), body), want: ErrCorrupt, msg: "carried dictionary is " + d.ID().String()},
		{name: "carried dictionary malformed", frame: dictFrame(flagZstd|flagDict|flagCarry, 3, uint64(raw), sum, uint64(IDOf([]byte("garbage dictionary"))), []byte("garbage dictionary"), body), want: ErrCorrupt, msg: "dictionary:"},
		{name: "body of another dictionary", frame: dictFrame(flagZstd|flagDict|flagCarry, 3, uint64(raw), sum, id, d.Bytes(), wrongBody), want: ErrCorrupt, msg: "decompress body"},
		{name: "dictionary body checksum", frame: dictFrame(flagZstd|flagDict|flagCarry, 3, uint64(raw), sum^1, id, d.Bytes(), body), want: ErrCorrupt, msg: "checksum mismatch"},
		{name: "dictionary body truncated", frame: good[:len(good)-5], want: ErrCorrupt, msg: "decompress body"},
	}
}

func TestDictWrongLookup(t *testing.T) {
	// A lookup that answers with another dictionary is the receiver's
	// bug; the frame is refused rather than decoded with it.
	named, _, _ := dictEncoder(t, 0).Encode(nil, payloadEntries(payloadgen.Orders, 1, 2))
	_, _, err := NewDecoder(Limits{}).DecodeDict(named, func(DictID) *Dict { return testDict(1) })
	if !errors.Is(err, ErrUnknownDict) {
		t.Fatalf("err = %v, want ErrUnknownDict", err)
	}
}
