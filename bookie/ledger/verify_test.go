package ledger

import (
	"errors"
	"testing"

	"github.com/isobar-mq/isobar/bookie/proto"
)

func TestVerifyEntry(t *testing.T) {
	good := proto.AppendEntry(nil, 5, 9, 8, 100, []byte("hello"))
	flip := func(i int) []byte {
		b := append([]byte(nil), good...)
		b[i] ^= 0x01
		return b
	}
	for _, tc := range []struct {
		name  string
		raw   []byte
		id    uint64
		entry int64
		ok    bool
	}{
		{"intact", good, 5, 9, true},
		{"flipped data bit", flip(len(good) - 1), 5, 9, false},
		{"flipped header bit", flip(20), 5, 9, false},
		{"flipped checksum bit", flip(33), 5, 9, false},
		{"truncated", good[:proto.EntryHeaderSize-1], 5, 9, false},
		{"empty", nil, 5, 9, false},
		{"other ledger", good, 6, 9, false},
		{"other entry", good, 5, 10, false},
	} {
		e, err := verifyEntry(tc.raw, tc.id, tc.entry)
		if tc.ok {
			if err != nil || string(e.Data) != "hello" || e.Length != 100 || e.LAC != 8 {
				t.Errorf("%s: %+v, %v", tc.name, e, err)
			}
			continue
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", tc.name, err)
		}
	}
}
