package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/broker/mledger/ledgers"
	"github.com/isobar-mq/isobar/internal/testcluster"
)

// TestTCLogCheckpoint: a coordinator's log on a managed ledger (real
// bookies) replays only the records after its last checkpoint, on top of
// the checkpoint's snapshot, also when opened again.
func TestTCLogCheckpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := testcluster.Start(t, testcluster.Options{Bookies: 3})
	lc, err := ledger.NewClient(cl.Connect(), ledger.Config{Region: cl.Region, Logger: cl.Logger(), RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	open := func() *tcLog {
		ml, err := mledger.Open(ctx, mledger.Deps{Meta: cl.Connect(), Ledgers: ledgers.OnBookies(lc), Region: cl.Region, Logger: cl.Logger()}, mledger.Config{}, tcLogName(0))
		if err != nil {
			t.Fatal(err)
		}
		cur, err := ml.OpenCursor(ctx, tcCursor, mledger.Earliest)
		if err != nil {
			t.Fatal(err)
		}
		return &tcLog{ml: ml, cur: cur}
	}
	replay := func(l *tcLog) (snap string, recs []string) {
		t.Helper()
		err := l.Replay(ctx, func(s []byte) error { snap = string(s); return nil }, func(r []byte) error { recs = append(recs, string(r)); return nil })
		if err != nil {
			t.Fatal(err)
		}
		return snap, recs
	}
	l := open()
	if s, recs := replay(l); s != "" || len(recs) != 0 {
		t.Fatalf("new log: %q %v", s, recs)
	}
	if err := l.Checkpoint(ctx, func() []byte { return []byte("never") }); err != nil {
		t.Fatal(err) // nothing appended yet: nothing to do
	}
	for i := range 3 {
		if err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Checkpoint(ctx, func() []byte { return []byte("s3") }); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ctx, []byte("r3")); err != nil {
		t.Fatal(err)
	}
	if s, recs := replay(l); s != "s3" || fmt.Sprint(recs) != "[r3]" {
		t.Fatalf("after a checkpoint: %q %v", s, recs)
	}
	l.Close(ctx)
	if s, recs := replay(open()); s != "s3" || fmt.Sprint(recs) != "[r3]" {
		t.Fatalf("opened again: %q %v", s, recs)
	}
}
