package mledger

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unique"
)

// A list: ledger 3 (2 entries), 5 (empty), 7 (3 entries), 9 (open, 1 entry).
var testList = []LedgerInfo{
	{ID: 3, Entries: 2, State: LedgerClosed},
	{ID: 5, Entries: 0, State: LedgerClosed},
	{ID: 7, Entries: 3, State: LedgerClosed},
	{ID: 9, Entries: 1, State: LedgerOpen},
}

func pos(l, e int64) Position { return Position{Ledger: l, Entry: e} }

func TestNextPosition(t *testing.T) {
	for _, tc := range []struct {
		p    Position
		want Position
		ok   bool
	}{
		{pos(3, -1), pos(3, 0), true},
		{pos(3, 0), pos(3, 1), true},
		{pos(3, 1), pos(7, 0), true}, // skips empty ledger 5
		{pos(5, -1), pos(7, 0), true},
		{pos(7, 2), pos(9, 0), true},
		{pos(9, 0), Position{}, false}, // last entry
		{pos(9, 5), Position{}, false},
		{pos(1, 4), pos(3, 0), true}, // trimmed ledger
		{pos(6, 0), pos(7, 0), true}, // ledger not in list
		{pos(10, -1), Position{}, false},
		{pos(3, 7), Position{}, false}, // beyond its ledger
	} {
		got, ok := nextPosition(testList, tc.p)
		if got != tc.want || ok != tc.ok {
			t.Errorf("next(%v) = %v, %v; want %v, %v", tc.p, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLastPosition(t *testing.T) {
	for _, tc := range []struct {
		ls   []LedgerInfo
		want Position
	}{
		{testList, pos(9, 0)},
		{testList[:2], pos(3, 1)},
		{[]LedgerInfo{{ID: 4, State: LedgerOpen}}, pos(4, -1)},
		{[]LedgerInfo{{ID: 4}, {ID: 6, State: LedgerOpen}}, pos(4, -1)},
		{nil, pos(0, -1)},
	} {
		if got := lastPosition(tc.ls); got != tc.want {
			t.Errorf("last(%v) = %v, want %v", tc.ls, got, tc.want)
		}
	}
}

func TestStartPosition(t *testing.T) {
	for _, tc := range []struct {
		from  Position
		want  Position
		atEnd bool
		err   bool
	}{
		{from: pos(3, 0), want: pos(3, 0)},
		{from: pos(3, 2), want: pos(7, 0)}, // just after ledger 3's last entry
		{from: pos(5, 0), want: pos(7, 0)}, // empty ledger
		{from: pos(7, 2), want: pos(7, 2)},
		{from: pos(9, 0), want: pos(9, 0)},
		{from: pos(9, 1), atEnd: true},
		{from: pos(9, 2), err: true},
		{from: pos(10, 0), err: true},
		{from: pos(3, 3), err: true},
		{from: pos(1, 0), want: pos(3, 0)}, // trimmed
		{from: pos(1, 5), want: pos(3, 0)}, // trimmed
		{from: pos(4, 0), want: pos(5, 0)}, // gap: next ledger's first... see below
		{from: pos(4, 1), err: true},
		{from: pos(-1, 0), err: true},
		{from: pos(3, -1), err: true},
	} {
		if tc.from == pos(4, 0) {
			tc.want = pos(7, 0) // ledger 5 is empty
		}
		got, atEnd, err := startPosition(testList, tc.from)
		if tc.err {
			if !errors.Is(err, ErrInvalidPosition) {
				t.Errorf("start(%v): err %v, want ErrInvalidPosition", tc.from, err)
			}
			continue
		}
		if err != nil || atEnd != tc.atEnd || (!atEnd && got != tc.want) {
			t.Errorf("start(%v) = %v, %v, %v; want %v, %v", tc.from, got, atEnd, err, tc.want, tc.atEnd)
		}
	}
}

func TestValidEntry(t *testing.T) {
	for _, tc := range []struct {
		p  Position
		ok bool
	}{
		{pos(3, 0), true}, {pos(3, 1), true}, {pos(3, 2), false}, {pos(5, 0), false},
		{pos(9, 0), true}, {pos(9, 1), false}, {pos(3, -1), false}, {pos(4, 0), false},
	} {
		if got := validEntry(testList, tc.p); got != tc.ok {
			t.Errorf("validEntry(%v) = %v", tc.p, got)
		}
	}
}

func TestBacklog(t *testing.T) {
	for _, tc := range []struct {
		md    Position
		acked int64
		want  int64
	}{
		{pos(3, -1), 0, 6},
		{pos(3, 0), 0, 5},
		{pos(3, 1), 0, 4},
		{pos(3, 1), 2, 2},
		{pos(7, 2), 0, 1},
		{pos(9, 0), 0, 0},
		{pos(1, -1), 0, 6}, // mark-delete in a trimmed ledger
		{pos(6, 3), 0, 4},
		{pos(3, -1), 9, 0}, // never negative
	} {
		if got := backlog(testList, tc.md, tc.acked); got != tc.want {
			t.Errorf("backlog(%v, %d) = %d, want %d", tc.md, tc.acked, got, tc.want)
		}
	}
}

func TestTrimmable(t *testing.T) {
	for _, tc := range []struct {
		slowest Position
		cursors bool
		current int64
		want    []int64
	}{
		{pos(7, 2), false, 9, nil},
		{pos(3, -1), true, 9, nil},
		{pos(3, 0), true, 9, nil},
		{pos(3, 1), true, 9, []int64{3, 5}}, // empty 5 goes along
		{pos(5, -1), true, 9, []int64{3, 5}},
		{pos(7, 1), true, 9, []int64{3, 5}},
		{pos(7, 2), true, 9, []int64{3, 5, 7}},
		{pos(9, 0), true, 9, []int64{3, 5, 7}}, // never the current ledger
		{pos(100, 0), true, -1, []int64{3, 5, 7}},
	} {
		got := trimmable(testList, tc.current, tc.slowest, tc.cursors, Retention{}, 0)
		if !slices.Equal(got, tc.want) {
			t.Errorf("trimmable(%v, %v) = %v, want %v", tc.slowest, tc.cursors, got, tc.want)
		}
	}
	// With the list closed (no current), the last ledger is kept anyway.
	closed := slices.Clone(testList)
	closed[3].State = LedgerClosed
	if got := trimmable(closed, -1, pos(9, 0), true, Retention{}, 0); !slices.Equal(got, []int64{3, 5, 7}) {
		t.Errorf("closed list: %v", got)
	}
}

func TestSlowestMarkDelete(t *testing.T) {
	if _, ok := slowestMarkDelete(nil); ok {
		t.Fatal("no cursors gave a position")
	}
	cs := []cursorMeta{{MarkDelete: posJSON{7, 1}}, {MarkDelete: posJSON{3, 5}}, {MarkDelete: posJSON{7, 0}}}
	if p, _ := slowestMarkDelete(cs); p != pos(3, 5) {
		t.Fatalf("slowest = %v", p)
	}
}

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"t/ns/persistent/topic", true},
		{"topic", true},
		{"", false},
		{"a/../b", false},
		{"..", false},
		{"a/./b", false},
		{"/abs", false},
		{"trailing/", false},
		{"a//b", false},
		{"sp ace", false},
		{"ctl\x01", false},
		{"bad\xff", false},
		{strings.Repeat("x", MaxNameLen), true},
		{strings.Repeat("x", MaxNameLen+1), false},
	} {
		err := ValidateName(tc.name)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidName)) {
			t.Errorf("ValidateName(%q) = %v", tc.name, err)
		}
	}
	if err := ValidateCursorName("a/b"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("cursor a/b: %v", err)
	}
}

func TestMetaRoundTrip(t *testing.T) {
	m := topicMeta{Ledgers: slices.Clone(testList), Cursors: []cursorMeta{{Name: "c", MarkDelete: posJSON{3, 0}, AckSet: "AQYAAA==", Batches: map[string][]int64{"7:2": {0b1010}}}}}
	b, err := encodeMeta(&m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeMeta(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Ledgers, m.Ledgers) || got.Cursors[0].Name != "c" || !slices.Equal(got.Cursors[0].Batches["7:2"], []int64{0b1010}) {
		t.Fatalf("round trip: %+v", got)
	}
	for _, bad := range []string{
		`{`, `{"version":2}`,
		`{"version":1,"ledgers":[{"id":5,"state":"closed"},{"id":3,"state":"closed"}]}`,
		`{"version":1,"ledgers":[{"id":3,"state":"open"},{"id":5,"state":"closed"}]}`,
		`{"version":1,"ledgers":[{"id":3,"state":"weird"}]}`,
		`{"version":1,"ledgers":[],"cursors":[{"name":"c","ackset":"!!"}]}`,
		// Partly acknowledged batches: a bad position, no bit left, too
		// many words.
		`{"version":1,"ledgers":[],"cursors":[{"name":"c","ackset":"AQYAAA==","batches":{"7-2":[1]}}]}`,
		`{"version":1,"ledgers":[],"cursors":[{"name":"c","ackset":"AQYAAA==","batches":{"7:-2":[1]}}]}`,
		`{"version":1,"ledgers":[],"cursors":[{"name":"c","ackset":"AQYAAA==","batches":{"7:2":[0,0]}}]}`,
		`{"version":1,"ledgers":[],"cursors":[{"name":"c","ackset":"AQYAAA==","batches":{"7:2":[` + strings.Repeat("1,", MaxBatchWords) + `1]}}]}`,
	} {
		if _, err := decodeMeta([]byte(bad)); !errors.Is(err, ErrCorruptMeta) {
			t.Errorf("decode %s: %v", bad, err)
		}
	}
}

func TestTailCache(t *testing.T) {
	m := &ManagedLedger{cfg: unique.Make(Config{TailCacheEntries: 2, TailCacheBytes: 1 << 20})}
	type step struct {
		p         Position
		readable  int64
		wantFirst int64
		wantLen   int
	}
	for i, s := range []step{
		{pos(4, 0), -1, 0, 1},
		{pos(4, 1), -1, 0, 2},
		{pos(4, 2), -1, 0, 3}, // bookies know nothing yet: keep all
		{pos(4, 3), 0, 1, 3},  // entry 0 readable: drop it
		{pos(4, 4), 3, 3, 2},  // down to the bound
		{pos(4, 5), 3, 4, 2},
		{pos(4, 6), 3, 4, 3},  // 3 is the last readable: 4..6 must stay
		{pos(6, 0), -1, 0, 1}, // a new ledger resets
	} {
		m.confirmed(s.p, []byte{byte(i)}, s.readable)
		tc := m.l().tail
		if tc.ledger != s.p.Ledger || tc.first != s.wantFirst || len(tc.entries) != s.wantLen {
			t.Fatalf("step %d: ledger %d first %d len %d; want %d %d", i, tc.ledger, tc.first, len(tc.entries), s.wantFirst, s.wantLen)
		}
		if m.lastConfirmed != s.p || tc.entries[len(tc.entries)-1][0] != byte(i) {
			t.Fatalf("step %d: last confirmed %v", i, m.lastConfirmed)
		}
	}
}

// FuzzDecodeMeta: the metadata decoder never panics, and what it accepts
// encodes back to something it decodes to the same value.
func FuzzDecodeMeta(f *testing.F) {
	good, _ := encodeMeta(&topicMeta{Ledgers: slices.Clone(testList), Cursors: []cursorMeta{{Name: "c", MarkDelete: posJSON{3, 0}, AckSet: "AQYAAA==", Batches: map[string][]int64{"7:2": {5}}}}})
	f.Add(good)
	f.Add([]byte(`{"version":1,"ledgers":[{"id":3,"state":"open"}]}`))
	f.Add([]byte(`{"version":1,"ledgers":[{"id":5,"state":"closed"},{"id":3,"state":"closed"}]}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			return
		}
		enc, err := encodeMeta(&m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := decodeMeta(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !slices.Equal(m.Ledgers, m2.Ledgers) || len(m.Cursors) != len(m2.Cursors) {
			t.Fatalf("round trip changed %+v to %+v", m, m2)
		}
	})
}

func TestTrimmableRetention(t *testing.T) {
	// Ledgers 3 and 7 closed at t=1000 and t=5000 ms, 100 and 300 bytes;
	// the open ledger 9 holds 50.
	ls := []LedgerInfo{
		{ID: 3, Entries: 2, Size: 100, State: LedgerClosed, Closed: 1000},
		{ID: 5, Entries: 0, State: LedgerClosed, Closed: 2000},
		{ID: 7, Entries: 3, Size: 300, State: LedgerClosed, Closed: 5000},
		{ID: 9, Entries: 1, Size: 50, State: LedgerOpen},
	}
	all := pos(7, 2) // every closed ledger consumed
	for _, tc := range []struct {
		name    string
		cursors bool
		ret     Retention
		now     int64
		want    []int64
	}{
		{"no policy: consumed go", true, Retention{}, 6000, []int64{3, 5, 7}},
		{"keep forever", true, Retention{Time: -1, Size: -1, Set: true}, 6000, nil},
		{"time: only 3 is older than 3s", true, Retention{Time: 3 * time.Second, Size: -1, Set: true}, 6000, []int64{3, 5}},
		{"time: all expired", true, Retention{Time: time.Second, Size: -1, Set: true}, 6001, []int64{3, 5, 7}},
		{"size 400: drop 3 to get to 350", true, Retention{Time: -1, Size: 400, Set: true}, 6000, []int64{3, 5}},
		{"size 10: drop both", true, Retention{Time: -1, Size: 10, Set: true}, 6000, []int64{3, 5, 7}},
		{"no cursors, no policy: keep", false, Retention{}, 6000, nil},
		{"no cursors, time policy", false, Retention{Time: 3 * time.Second, Size: -1, Set: true}, 6000, []int64{3, 5}},
	} {
		got := trimmable(ls, 9, all, tc.cursors, tc.ret, tc.now)
		if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSkipPosition(t *testing.T) {
	// testList: 3 has entries 0..1, 5 is empty, 7 has 0..2, 9 has 0.
	for _, tc := range []struct {
		from Position
		k    int64
		want Position
	}{
		{pos(3, -1), 0, pos(3, -1)},
		{pos(3, -1), 1, pos(3, 0)},
		{pos(3, -1), 2, pos(3, 1)},
		{pos(3, -1), 3, pos(7, 0)},
		{pos(3, 1), 1, pos(7, 0)},
		{pos(3, 0), 4, pos(7, 2)},
		{pos(3, -1), 6, pos(9, 0)},
		{pos(3, -1), 100, pos(9, 0)},
		{pos(1, -1), 1, pos(3, 0)}, // a trimmed ledger
	} {
		if got := skipPosition(testList, tc.from, tc.k); got != tc.want {
			t.Errorf("skip(%v, %d) = %v, want %v", tc.from, tc.k, got, tc.want)
		}
	}
}

func TestTailCacheBytes(t *testing.T) {
	m := &ManagedLedger{cfg: unique.Make(Config{TailCacheEntries: 100, TailCacheBytes: 10})}
	for i := range int64(5) {
		m.confirmed(pos(1, i), make([]byte, 4), i) // each readable at once
	}
	// 5 entries of 4 bytes, at most 10 bytes: the newest 2 stay.
	if tc := m.l().tail; tc.first != 3 || len(tc.entries) != 2 || tc.size != 8 {
		t.Fatalf("first %d len %d size %d", tc.first, len(tc.entries), tc.size)
	}
}

func TestPrevPosition(t *testing.T) {
	// testList: 3 has entries 0..1, 5 is empty, 7 has 0..2, 9 has 0.
	for _, tc := range []struct {
		p    Position
		want Position
		ok   bool
	}{
		{pos(3, 0), Position{}, false},
		{pos(3, 1), pos(3, 0), true},
		{pos(7, 0), pos(3, 1), true},
		{pos(7, 2), pos(7, 1), true},
		{pos(9, 0), pos(7, 2), true},
		{pos(9, 1), pos(9, 0), true}, // the end of the log
	} {
		if got, ok := prevPosition(testList, tc.p); got != tc.want || ok != tc.ok {
			t.Errorf("prev(%v) = %v %v, want %v %v", tc.p, got, ok, tc.want, tc.ok)
		}
	}
}
