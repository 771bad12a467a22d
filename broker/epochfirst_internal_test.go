package broker

import (
	"maps"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/broker/mledger"
)

func pos(l, e int64) mledger.Position { return mledger.Position{Ledger: l, Entry: e} }

// TestEpochFirsts: the first sequence id per producer of the mark's
// epoch, from notes, from a replay after the mark, and through a
// snapshot's properties and back.
func TestEpochFirsts(t *testing.T) {
	var e epochFirsts
	e.note("app", 5) // no mark yet: nothing is known of the epoch
	if _, ok := e.firstIn("app", 0); ok {
		t.Fatal("a first sequence id without a mark")
	}
	if e.marked(1) {
		t.Fatal("marked without a mark")
	}
	e.setMark(epochMark{epoch: 3, after: pos(7, 9)})
	if !e.marked(3) || !e.marked(2) || e.marked(4) {
		t.Fatalf("mark at 3: marked(2,3,4) = %v %v %v", e.marked(2), e.marked(3), e.marked(4))
	}
	e.note("app", 8)
	e.note("app", 6) // lower: the first
	e.note("app", 9)
	e.replayed(pos(7, 9), "other", 1)  // at the mark: an earlier epoch's
	e.replayed(pos(7, 3), "other", 1)  // before it
	e.replayed(pos(7, 10), "late", 40) // after it
	e.replayed(pos(8, 0), "late", 41)
	for _, c := range []struct {
		producer string
		epoch    int64
		want     int64
		ok       bool
	}{
		{"app", 3, 6, true},
		{"late", 3, 40, true},
		{"other", 3, 0, false},
		{"app", 2, 0, false}, // another epoch
		{"app", 4, 0, false},
	} {
		if got, ok := e.firstIn(c.producer, c.epoch); got != c.want || ok != c.ok {
			t.Errorf("firstIn(%s, %d) = %d, %v; want %d, %v", c.producer, c.epoch, got, ok, c.want, c.ok)
		}
	}

	// Through a snapshot's properties, beside the other keys.
	props := map[string]string{"app": "9", "isobar.repl.other": "9:5"}
	e.appendProps(props)
	for k := range props {
		if isEpochFirstKey(k) != (k == epochMarkKey || strings.HasPrefix(k, firstSeqPrefix)) {
			t.Errorf("isEpochFirstKey(%q)", k)
		}
	}
	if isEpochFirstKey("app") || isEpochFirstKey("isobar.repl.other") {
		t.Error("a producer's or a replication key taken for the epoch's")
	}
	// A first sequence id of an older epoch, left by an earlier snapshot.
	props[firstSeqPrefix+"gone"] = "2:17"
	back, err := loadEpochFirsts(props)
	if err != nil {
		t.Fatal(err)
	}
	if back.mark != e.mark || !maps.Equal(back.first, e.first) {
		t.Fatalf("loaded %+v, want %+v", back, e)
	}

	// A later epoch's mark drops the earlier epoch's first sequence ids;
	// an earlier one changes nothing.
	e.setMark(epochMark{epoch: 2, after: pos(9, 9)})
	if e.mark.epoch != 3 {
		t.Fatal("an earlier mark replaced a later one")
	}
	e.setMark(epochMark{epoch: 5, after: pos(9, 1)})
	if _, ok := e.firstIn("app", 5); ok {
		t.Fatal("epoch 3's first sequence id kept in epoch 5")
	}
	e.note("app", 11)
	if got, _ := e.firstIn("app", 5); got != 11 {
		t.Fatalf("first in epoch 5 = %d, want 11", got)
	}
}

func TestLoadEpochFirstsRejectsMalformed(t *testing.T) {
	for _, props := range []map[string]string{
		{epochMarkKey: "3"},
		{epochMarkKey: "x@1:2"},
		{epochMarkKey: "0@1:2"},
		{epochMarkKey: "3@1-2"},
		{epochMarkKey: "3@1:2", firstSeqPrefix + "app": "3"},
		{epochMarkKey: "3@1:2", firstSeqPrefix + "app": "3:x"},
	} {
		if e, err := loadEpochFirsts(props); err == nil {
			t.Errorf("%v: loaded %+v, want an error", props, e)
		}
	}
	if e, err := loadEpochFirsts(map[string]string{"app": "4"}); err != nil || e.mark.epoch != 0 {
		t.Errorf("no mark: %+v, %v", e, err)
	}
}
