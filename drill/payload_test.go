package drill

import (
	"errors"
	"testing"
	"time"
)

func TestPayloadRoundTrip(t *testing.T) {
	for _, p := range []Payload{
		{Run: "20261201-120000-beef", Producer: 0, Seq: 0, Sent: time.Unix(0, 1)},
		{Run: "r", Producer: 99, Seq: 1 << 40, Sent: time.Date(2026, 12, 1, 12, 0, 0, 123456789, time.UTC)},
	} {
		b := AppendPayload([]byte("x"), p)[1:]
		got, err := ParsePayload(b)
		if err != nil || got.Run != p.Run || got.Producer != p.Producer || got.Seq != p.Seq || !got.Sent.Equal(p.Sent) {
			t.Errorf("%q: %+v %v, want %+v", b, got, err, p)
		}
	}
}

var badPayloads = []string{
	"", "hello", "isobar-drill/1", "isobar-drill/1 run 0 1",
	"isobar-drill/1 run 0 1 2 3", "isobar-drill/2 run 0 1 2",
	"isobar-drill/1  0 1 2", "isobar-drill/1 run -1 1 2", "isobar-drill/1 run 0 -1 2",
	"isobar-drill/1 run x 1 2", "isobar-drill/1 run 0 1 2x", "isobar-drill/1 run 0 99999999999999999999 2",
}

func TestParsePayloadRefusesOthers(t *testing.T) {
	for _, s := range badPayloads {
		if _, err := ParsePayload([]byte(s)); !errors.Is(err, ErrPayload) {
			t.Errorf("%q: %v, want ErrPayload", s, err)
		}
	}
}

// FuzzParsePayload: any input parses or is refused, and what parses
// encodes back to the same bytes.
func FuzzParsePayload(f *testing.F) {
	f.Add([]byte(AppendPayload(nil, Payload{Run: "r", Producer: 1, Seq: 2, Sent: time.Unix(0, 3)})))
	for _, s := range badPayloads {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePayload(b)
		if err != nil {
			if !errors.Is(err, ErrPayload) {
				t.Fatalf("%q: %v", b, err)
			}
			return
		}
		again, err := ParsePayload(AppendPayload(nil, p))
		if err != nil || again != p {
			t.Fatalf("%q: parsed %+v, re-encoded parses as %+v %v", b, p, again, err)
		}
	})
}
