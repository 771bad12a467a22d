package proto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"
)

var requestCases = []Request{
	{Op: OpAdd, ID: 1, Ledger: 7, Entry: 0, Payload: AppendEntry(nil, 7, 0, -1, 3, []byte("abc"))},
	{Op: OpAdd, Flags: FlagRecovery, ID: 2, Ledger: 7, Entry: 9, Payload: []byte{}},
	{Op: OpRead, ID: 3, Ledger: 1 << 40, Entry: 12},
	{Op: OpRead, Flags: FlagFence, ID: 4, Ledger: 5, Entry: 0},
	{Op: OpReadLAC, ID: 5, Ledger: 5, PrevLAC: -1, Timeout: 1000},
	{Op: OpFence, ID: 6, Ledger: 8},
	{Op: OpDelete, ID: 7, Ledger: 9},
	{Op: OpInfo, ID: 8},
	{Op: 99, ID: 9, Payload: []byte("future")},
}

func TestRequestRoundTrip(t *testing.T) {
	for _, want := range requestCases {
		b := AppendRequest(nil, &want)
		frame, err := ReadFrame(bytes.NewReader(b), DefaultMaxFrameSize, nil)
		if err != nil {
			t.Fatalf("%v: %v", want.Op, err)
		}
		got, err := DecodeRequest(frame)
		if err != nil {
			t.Fatalf("%v: %v", want.Op, err)
		}
		if len(got.Payload) == 0 && len(want.Payload) == 0 {
			got.Payload, want.Payload = nil, nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}
}

var responseCases = []Response{
	{Op: OpAdd, Status: StatusOK, ID: 1, Ledger: 7, Entry: 3},
	{Op: OpAdd, Status: StatusFenced, ID: 2, Ledger: 7, Entry: 4},
	{Op: OpRead, Status: StatusOK, ID: 3, Ledger: 7, Entry: 4, LAC: 3, Payload: []byte("entry")},
	{Op: OpRead, Status: StatusNoEntry, ID: 4, Ledger: 7, Entry: 5},
	{Op: OpReadLAC, Status: StatusOK, ID: 5, Ledger: 7, LAC: -1},
	{Op: OpFence, Status: StatusOK, ID: 6, Ledger: 7, LAC: 10},
	{Op: OpInfo, Status: StatusOK, ID: 7, Total: 100, Free: 50, ReadOnly: true, Payload: []byte("127.0.0.1:3181")},
	{Op: OpInfo, Status: StatusInternal, ID: 8},
}

func TestResponseRoundTrip(t *testing.T) {
	for _, want := range responseCases {
		b := AppendResponse(nil, &want)
		frame, err := ReadFrame(bytes.NewReader(b), DefaultMaxFrameSize, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeResponse(frame)
		if err != nil {
			t.Fatalf("%v: %v", want.Op, err)
		}
		if len(got.Payload) == 0 && len(want.Payload) == 0 {
			got.Payload, want.Payload = nil, nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}
}

func TestPipelinedFrames(t *testing.T) {
	var stream []byte
	for i := range requestCases {
		stream = AppendRequest(stream, &requestCases[i])
	}
	br := bufio.NewReader(bytes.NewReader(stream))
	for i := range requestCases {
		frame, err := ReadFrame(br, DefaultMaxFrameSize, nil)
		if err != nil {
			t.Fatal(err)
		}
		req, err := DecodeRequest(frame)
		if err != nil || req.ID != requestCases[i].ID {
			t.Fatalf("frame %d: id %d err %v", i, req.ID, err)
		}
	}
	if _, err := ReadFrame(br, DefaultMaxFrameSize, nil); err != io.EOF {
		t.Fatalf("after last frame: %v, want EOF", err)
	}
}

func TestBadFrames(t *testing.T) {
	add := AppendRequest(nil, &Request{Op: OpAdd, ID: 1, Ledger: 1, Entry: 2, Payload: []byte("xyz")})
	cases := []struct {
		name  string
		in    []byte
		max   int
		want  error
		check func(t *testing.T, frame []byte)
	}{
		{name: "oversize", in: add, max: 10, want: ErrFrameTooLarge},
		{name: "length below header", in: []byte{0, 0, 0, 3, 1, 1, 0}, max: 100, want: ErrMalformed},
		{name: "truncated body", in: add[:len(add)-2], max: 100, want: io.ErrUnexpectedEOF},
		{name: "truncated length", in: add[:2], max: 100, want: io.ErrUnexpectedEOF},
		{name: "huge claimed length", in: []byte{0xff, 0xff, 0xff, 0xff, 1}, max: DefaultMaxFrameSize, want: ErrFrameTooLarge},
	}
	for _, c := range cases {
		_, err := ReadFrame(bytes.NewReader(c.in), c.max, nil)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	// Well-framed but malformed bodies.
	for _, frame := range [][]byte{
		{Version, byte(OpAdd), 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0},              // add body too short
		{Version, byte(OpReadLAC), 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3},       // read-lac too short
		{2, byte(OpInfo), 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},                         // wrong version
		{Version, byte(OpInfo) | RespBit, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},         // response where request expected
		{Version, byte(OpRead), 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, // read too short
	} {
		if _, err := DecodeRequest(frame); err == nil {
			t.Errorf("DecodeRequest(%x) accepted a malformed frame", frame)
		}
	}
	if _, err := DecodeResponse([]byte{Version, byte(OpRead) | RespBit, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 5}); err == nil {
		t.Error("DecodeResponse accepted a short read response")
	}
}

func TestEntry(t *testing.T) {
	b := AppendEntry(nil, 42, 7, 6, 1000, []byte("hello"))
	e, err := DecodeEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	if e.Ledger != 42 || e.ID != 7 || e.LAC != 6 || e.Length != 1000 || string(e.Data) != "hello" {
		t.Fatalf("decoded %+v", e)
	}
	// Every single-bit flip anywhere is detected.
	for i := 0; i < len(b)*8; i++ {
		c := bytes.Clone(b)
		c[i/8] ^= 1 << (i % 8)
		if _, err := DecodeEntry(c); !errors.Is(err, ErrEntryCorrupt) {
			t.Fatalf("bit %d flipped: err %v", i, err)
		}
	}
	if _, err := DecodeEntry(b[:10]); !errors.Is(err, ErrEntryCorrupt) {
		t.Fatalf("short entry: %v", err)
	}
}

func TestStrings(t *testing.T) {
	if OpAdd.String() != "add" || Op(77).String() != "op(77)" {
		t.Error("op names")
	}
	if StatusFenced.String() != "ledger fenced" || Status(999).String() != "status(999)" {
		t.Error("status names")
	}
}

// TestReadFrameAllocation: an add that has arrived whole behind the
// connection's bufio.Reader is read into one buffer of its size; a frame
// that has not grows from what arrived, never to what was announced.
func TestReadFrameAllocation(t *testing.T) {
	b := AppendRequest(nil, &Request{Op: OpAdd, ID: 1, Ledger: 7, Payload: AppendEntry(nil, 7, 0, -1, 3, bytes.Repeat([]byte("z"), 12000))})
	frame, err := ReadFrame(bufio.NewReaderSize(bytes.NewReader(b), 64<<10), DefaultMaxFrameSize, nil)
	if err != nil || !bytes.Equal(frame, b[4:]) {
		t.Fatalf("whole: %v", err)
	}
	if cap(frame) != len(b)-4 {
		t.Errorf("whole frame of %d bytes read into a buffer of %d", len(b)-4, cap(frame))
	}
	partial := append(binary.BigEndian.AppendUint32(nil, 1<<20), bytes.Repeat([]byte("y"), 9000)...)
	if _, err := ReadFrame(bufio.NewReaderSize(bytes.NewReader(partial), 64<<10), DefaultMaxFrameSize, nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("partial: %v", err)
	}
}
