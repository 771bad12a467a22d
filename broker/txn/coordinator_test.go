package txn

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/errkind"
)

var t0 = time.UnixMilli(1_700_000_000_000)

// step is one event of a table test: op on the coordinator and what it
// must answer.
type step struct {
	op      string // new, parts, subs, commit, abort, done, expire
	txn     uint64
	timeout time.Duration
	at      time.Duration // since t0 (expire)
	parts   []string
	subs    []Sub
	wantErr *errkind.Error
	// wantLog: a record must be logged (false: nothing to log)
	wantLog bool
	// wantStatus after the step (when not "")
	wantStatus string
}

func run(t *testing.T, c *Coordinator, steps []step) []Record {
	t.Helper()
	var log []Record
	for i, s := range steps {
		id := ID{Most: 3, Least: s.txn}
		var (
			r   Record
			ok  bool
			err error
		)
		switch s.op {
		case "new":
			id, r, err = c.New(t0, s.timeout)
			ok = err == nil
			if id.Least != s.txn || id.Most != 3 {
				t.Fatalf("step %d: new made %v, want (3,%d)", i, id, s.txn)
			}
		case "parts":
			r, ok, err = c.AddPartitions(id, s.parts)
		case "subs":
			r, ok, err = c.AddSubscriptions(id, s.subs)
		case "commit", "abort":
			a := Commit
			if s.op == "abort" {
				a = Abort
			}
			r, _, ok, err = c.End(id, a)
		case "done":
			r, err = c.Done(id)
			ok = err == nil
		case "expire":
			rs, _ := c.Expire(t0.Add(s.at))
			ok = len(rs) > 0
			if ok {
				r = rs[0]
			}
		}
		if s.wantErr != nil {
			if !errors.Is(err, s.wantErr) {
				t.Fatalf("step %d %s: err %v, want %v", i, s.op, err, s.wantErr.Name)
			}
		} else if err != nil {
			t.Fatalf("step %d %s: %v", i, s.op, err)
		}
		if ok != s.wantLog {
			t.Fatalf("step %d %s: logged %v, want %v", i, s.op, ok, s.wantLog)
		}
		if ok {
			log = append(log, r)
		}
		if s.wantStatus != "" {
			got := "gone"
			if in, found := c.Info(ID{3, s.txn}); found {
				got = in.Status.String()
			}
			if got != s.wantStatus {
				t.Fatalf("step %d %s: status %s, want %s", i, s.op, got, s.wantStatus)
			}
		}
	}
	return log
}

func TestCoordinator(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"commit", []step{
			{op: "new", txn: 0, timeout: time.Minute, wantLog: true, wantStatus: "OPEN"},
			{op: "parts", txn: 0, parts: []string{"a", "b", "a"}, wantLog: true},
			{op: "parts", txn: 0, parts: []string{"b"}}, // known: nothing to log
			{op: "subs", txn: 0, subs: []Sub{{"a", "s"}}, wantLog: true},
			{op: "commit", txn: 0, wantLog: true, wantStatus: "COMMITTING"},
			{op: "commit", txn: 0}, // joins the end under way
			{op: "abort", txn: 0, wantErr: errkind.ErrInvalidTxnStatus}, // the other way
			{op: "parts", txn: 0, parts: []string{"c"}, wantErr: errkind.ErrInvalidTxnStatus},
			{op: "done", txn: 0, wantLog: true, wantStatus: "gone"},
			{op: "commit", txn: 0, wantErr: errkind.ErrTransactionNotFound}, // forgotten
		}},
		{"abort", []step{
			{op: "new", txn: 0, wantLog: true},
			{op: "new", txn: 1, wantLog: true},
			{op: "abort", txn: 1, wantLog: true, wantStatus: "ABORTING"},
			{op: "commit", txn: 1, wantErr: errkind.ErrInvalidTxnStatus},
			{op: "done", txn: 1, wantLog: true, wantStatus: "gone"},
			{op: "abort", txn: 1, wantErr: errkind.ErrTransactionNotFound},
			{op: "done", txn: 0, wantErr: errkind.ErrInvalidTxnStatus}, // not ending
		}},
		{"unknown", []step{
			{op: "parts", txn: 7, parts: []string{"a"}, wantErr: errkind.ErrTransactionNotFound},
			{op: "subs", txn: 7, subs: []Sub{{"a", "s"}}, wantErr: errkind.ErrTransactionNotFound},
			{op: "commit", txn: 7, wantErr: errkind.ErrTransactionNotFound},
		}},
		{"bad input", []step{
			{op: "new", txn: 0, wantLog: true},
			{op: "parts", txn: 0, parts: []string{""}, wantErr: errkind.ErrNotAllowed},
			{op: "subs", txn: 0, subs: []Sub{{"a", ""}}, wantErr: errkind.ErrNotAllowed},
		}},
		{"timeout", []step{
			{op: "new", txn: 0, timeout: time.Second, wantLog: true},
			{op: "new", txn: 1, timeout: time.Hour, wantLog: true},
			{op: "expire", at: 999 * time.Millisecond},
			{op: "expire", at: time.Second, wantLog: true, wantStatus: "TIMEOUT"},
			{op: "commit", txn: 0, wantErr: errkind.ErrInvalidTxnStatus},
			{op: "abort", txn: 0}, // joins the abort under way
			{op: "expire", txn: 1, at: 2 * time.Second, wantStatus: "OPEN"}, // txn 1 not due, txn 0 not again
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run(t, NewCoordinator(3, 6*time.Hour), tc.steps)
		})
	}
}

func TestCoordinatorTimeouts(t *testing.T) {
	c := NewCoordinator(0, time.Hour)
	id, _, _ := c.New(t0, 0)
	if info, _ := c.Info(id); info.Timeout != time.Hour {
		t.Fatalf("no timeout became %v, want 1h", info.Timeout)
	}
	for _, in := range []time.Duration{-1, time.Hour + time.Millisecond} {
		if _, _, err := c.New(t0, in); !errors.Is(err, errkind.ErrNotAllowed) {
			t.Fatalf("timeout %v: %v", in, err)
		}
	}
	id, _, _ = c.New(t0, time.Minute)
	if info, _ := c.Info(id); info.Timeout != time.Minute {
		t.Fatalf("timeout %v", info.Timeout)
	}
	if at, ok := c.NextDeadline(); !ok || !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("next deadline %v %v", at, ok)
	}
}

// TestCoordinatorReplay: a coordinator rebuilt from the records another
// wrote is the same: counter, open transactions, ends under way.
func TestCoordinatorReplay(t *testing.T) {
	c := NewCoordinator(3, time.Hour)
	log := run(t, c, []step{
		{op: "new", txn: 0, timeout: time.Minute, wantLog: true},
		{op: "parts", txn: 0, parts: []string{"p"}, wantLog: true},
		{op: "subs", txn: 0, subs: []Sub{{"p", "s"}}, wantLog: true},
		{op: "new", txn: 1, wantLog: true},
		{op: "commit", txn: 1, wantLog: true},
		{op: "done", txn: 1, wantLog: true},
		{op: "new", txn: 2, wantLog: true},
		{op: "parts", txn: 2, parts: []string{"q"}, wantLog: true},
		{op: "abort", txn: 2, wantLog: true},
	})
	r := NewCoordinator(3, time.Hour)
	for _, rec := range log {
		back, err := ParseRecord(rec.Marshal())
		if err != nil {
			t.Fatal(err)
		}
		r.Replay(back)
	}
	r.Replay(Record{Op: "done", Txn: 99}) // unknown: ignored
	if r.Len() != 2 {
		t.Fatalf("replayed %d transactions, want 2", r.Len())
	}
	a, _ := c.Info(ID{3, 0})
	b, _ := r.Info(ID{3, 0})
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("replayed %+v, want %+v", b, a)
	}
	want := []Fanout{{ID: ID{3, 2}, Action: Abort, Partitions: []string{"q"}}}
	if got := r.Ending(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ending %+v, want %+v", got, want)
	}
	if id, _, _ := r.New(t0, 0); id.Least != 3 {
		t.Fatalf("counter resumed at %v, want 3", id)
	}
	if _, err := ParseRecord([]byte(`{"op":"what"}`)); err == nil {
		t.Fatal("bad op accepted")
	}
	if _, err := ParseRecord([]byte(`{`)); err == nil {
		t.Fatal("bad json accepted")
	}
}

func TestCoordinatorFanout(t *testing.T) {
	c := NewCoordinator(1, time.Hour)
	id, _, _ := c.New(t0, 0)
	c.AddPartitions(id, []string{"t1", "t2"})
	c.AddSubscriptions(id, []Sub{{"t3", "s"}})
	_, f, ok, err := c.End(id, Commit)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	want := Fanout{ID: id, Action: Commit, Partitions: []string{"t1", "t2"}, Subs: []Sub{{"t3", "s"}}}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("fanout %+v, want %+v", f, want)
	}
	if _, _, _, err := c.End(id, Action(5)); !errors.Is(err, errkind.ErrNotAllowed) {
		t.Fatalf("bad action: %v", err)
	}
}

// TestCoordinatorSnapshot: a snapshot plus the records after it rebuild
// the state, records applied twice change nothing, and a transaction
// that ended before the snapshot does not come back from a late record.
func TestCoordinatorSnapshot(t *testing.T) {
	c := NewCoordinator(3, time.Hour)
	log := run(t, c, []step{
		{op: "new", txn: 0, timeout: time.Minute, wantLog: true},
		{op: "parts", txn: 0, parts: []string{"p"}, wantLog: true},
		{op: "new", txn: 1, wantLog: true},
		{op: "commit", txn: 1, wantLog: true},
		{op: "new", txn: 2, wantLog: true},
		{op: "abort", txn: 2, wantLog: true},
		{op: "done", txn: 2, wantLog: true},
	})
	snap := c.Snapshot()
	after := run(t, c, []step{
		{op: "subs", txn: 0, subs: []Sub{{"p", "s"}}, wantLog: true},
		{op: "done", txn: 1, wantLog: true},
		{op: "new", txn: 3, wantLog: true},
	})
	r := NewCoordinator(3, time.Hour)
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	// Records around the snapshot's point are replayed again: the last
	// two before it, then those after it.
	for _, rec := range append(log[len(log)-3:], after...) {
		r.Replay(rec)
	}
	if !reflect.DeepEqual(r.Snapshot(), c.Snapshot()) {
		t.Fatalf("restored and replayed\n%s\nwant\n%s", r.Snapshot(), c.Snapshot())
	}
	if err := r.Restore([]byte(`{"txns":[{"txn":1,"ending":"maybe"}]}`)); err == nil {
		t.Fatal("bad ending accepted")
	}
}
