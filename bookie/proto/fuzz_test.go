package proto

import (
	"bytes"
	"testing"
)

// FuzzDecodeRequest feeds arbitrary bytes to the server-side decoder: it
// must never panic, and whatever decodes must re-encode to an equivalent frame.
func FuzzDecodeRequest(f *testing.F) {
	for i := range requestCases {
		f.Add(AppendRequest(nil, &requestCases[i]))
	}
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		frame, err := ReadFrame(bytes.NewReader(b), 1<<16, nil)
		if err != nil {
			return
		}
		req, err := DecodeRequest(frame)
		if err != nil {
			return
		}
		again, err := DecodeRequest(AppendRequest(nil, &req)[4:])
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if again.Op != req.Op || again.ID != req.ID || again.Ledger != req.Ledger || again.Entry != req.Entry {
			t.Fatalf("re-encode changed the request: %+v vs %+v", again, req)
		}
		if req.Op == OpAdd {
			DecodeEntry(req.Payload)
		}
	})
}

// FuzzDecodeResponse is the client-side decoder's fuzz target.
func FuzzDecodeResponse(f *testing.F) {
	for i := range responseCases {
		f.Add(AppendResponse(nil, &responseCases[i]))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		frame, err := ReadFrame(bytes.NewReader(b), 1<<16, nil)
		if err != nil {
			return
		}
		DecodeResponse(frame)
	})
}

// FuzzDecodeEntry checks the entry decoder never panics and never accepts
// bytes whose checksum does not match.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(AppendEntry(nil, 1, 2, 1, 10, []byte("0123456789")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEntry(b)
		if err != nil {
			return
		}
		if !bytes.Equal(AppendEntry(nil, e.Ledger, e.ID, e.LAC, e.Length, e.Data), b) {
			t.Fatal("accepted entry does not re-encode to the same bytes")
		}
	})
}
