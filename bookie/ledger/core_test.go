package ledger

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/bookie/client"
	"github.com/isobar-mq/isobar/bookie/proto"
)

// coreRig drives a writeCore and renders its outputs as short strings:
// sends "e<entry>>b<bookie>", completions "ok<entry>" or "err<entry>".
type coreRig struct {
	t     *testing.T
	c     *writeCore
	sends []sendOp
}

func newRig(t *testing.T, e, qw, qa int, recovery bool) *coreRig {
	var bs []string
	for i := range e {
		bs = append(bs, fmt.Sprintf("b%d", i))
	}
	return &coreRig{t: t, c: newWriteCore(7, e, qw, qa, recovery, Segment{FirstEntry: 0, Bookies: bs}, -1, 0)}
}

var errBookieDown = fmt.Errorf("%w: test", client.ErrDisconnected)

func (r *coreRig) appendN(n int) {
	for range n {
		r.c.Append([]byte("data"), nil)
	}
}

// ready collects outputs: sends and completions as strings, and the change request.
func (r *coreRig) ready() (sends, done []string, change *changeRequest) {
	s, d, ch := r.c.Ready()
	r.sends = append(r.sends, s...)
	for _, op := range s {
		sends = append(sends, fmt.Sprintf("e%d>%s", op.Entry, op.Bookie))
	}
	for _, c := range d {
		if c.Err == nil {
			done = append(done, fmt.Sprintf("ok%d", c.Entry))
		} else {
			done = append(done, fmt.Sprintf("err%d", c.Entry))
		}
	}
	return sends, done, ch
}

func (r *coreRig) expect(wantSends, wantDone string, wantChange bool) *changeRequest {
	r.t.Helper()
	sends, done, ch := r.ready()
	if got := strings.Join(sends, " "); got != wantSends {
		r.t.Fatalf("sends %q, want %q", got, wantSends)
	}
	if got := strings.Join(done, " "); got != wantDone {
		r.t.Fatalf("completions %q, want %q", got, wantDone)
	}
	if (ch != nil) != wantChange {
		r.t.Fatalf("change request %+v, want one: %v", ch, wantChange)
	}
	return ch
}

func (r *coreRig) ok(entry int64, idx int) {
	r.c.AddResult(entry, idx, r.c.ensemble[idx], nil)
}

func TestCoreInOrderAcks(t *testing.T) {
	r := newRig(t, 3, 2, 2, false)
	r.appendN(3)
	r.expect("e0>b0 e0>b1 e1>b1 e1>b2 e2>b2 e2>b0", "", false)
	r.ok(1, 1)
	r.ok(1, 2)
	r.ok(2, 2)
	r.expect("", "", false) // 1 and 2 complete but wait for 0
	r.ok(0, 0)
	r.ok(0, 0) // duplicate
	r.expect("", "", false)
	r.ok(0, 1)
	r.expect("", "ok0 ok1", false)
	if r.c.LAC() != 1 || r.c.LACLength() != 8 {
		t.Fatalf("LAC %d length %d", r.c.LAC(), r.c.LACLength())
	}
	r.ok(2, 0)
	r.expect("", "ok2", false)
	if !r.c.Idle() {
		t.Fatal("not idle")
	}
}

func TestCorePiggybacksLACAndLength(t *testing.T) {
	r := newRig(t, 3, 2, 2, false)
	r.c.Append([]byte("aa"), nil)
	r.ok(0, 0)
	r.ok(0, 1)
	r.c.Append([]byte("bbb"), nil)
	r.ready()
	var last sendOp
	for _, s := range r.sends {
		if s.Entry == 1 {
			last = s
		}
	}
	e, err := proto.DecodeEntry(last.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if e.Ledger != 7 || e.ID != 1 || e.LAC != 0 || e.Length != 5 || string(e.Data) != "bbb" {
		t.Fatalf("entry header %+v", e)
	}
}

func TestCoreEnsembleChange(t *testing.T) {
	r := newRig(t, 3, 2, 2, false)
	r.appendN(3)
	r.expect("e0>b0 e0>b1 e1>b1 e1>b2 e2>b2 e2>b0", "", false)
	r.ok(0, 0)
	r.ok(0, 1)
	r.ok(1, 1)
	r.c.AddResult(1, 2, "b2", errBookieDown)
	ch := r.expect("", "ok0", true)
	if ch.Start != 1 || !slices.Equal(ch.Failed, []int{2}) || !slices.Equal(ch.Ensemble, []string{"b0", "b1", "b2"}) {
		t.Fatalf("change request %+v", ch)
	}
	// The writer goes on; index 2 is skipped until it is replaced.
	r.appendN(2) // entries 3 {0,1} and 4 {1,2}
	r.expect("e3>b0 e3>b1 e4>b1", "", false)
	r.c.AddResult(2, 2, "b2", nil) // a failed bookie's late success does not count
	r.ok(2, 0)
	r.ok(3, 0)
	r.ok(3, 1)
	r.expect("", "", false)
	// Only one change at a time, another failure waits for it.
	r.c.AddResult(4, 1, "b1", errBookieDown)
	r.expect("", "", false)
	r.c.EnsembleChanged(1, map[int]string{2: "b3"})
	// Pending entries on index 2 go to b3; b1 still failed, so a second change is asked for.
	ch = r.expect("e1>b3 e2>b3 e4>b3", "", true)
	if ch.Start != 1 || !slices.Equal(ch.Failed, []int{1}) || !slices.Equal(ch.Ensemble, []string{"b0", "b1", "b3"}) {
		t.Fatalf("second change request %+v", ch)
	}
	r.c.AddResult(1, 2, "b2", nil) // the replaced bookie's answer is ignored
	r.expect("", "", false)
	r.ok(1, 2)
	r.ok(2, 2)
	// Entry 2 is complete, but entry 1 lost b1's copy when b1 failed.
	r.expect("", "", false)
	r.c.EnsembleChanged(1, map[int]string{1: "b4"})
	r.expect("e1>b4 e3>b4 e4>b4", "", false)
	r.ok(1, 1)
	r.expect("", "ok1 ok2", false)
	r.ok(3, 1)
	r.ok(4, 1)
	r.ok(4, 2)
	r.expect("", "ok3 ok4", false)
	if !slices.Equal(r.c.ensemble, []string{"b0", "b4", "b3"}) || r.c.segStart != 1 || !r.c.Idle() {
		t.Fatalf("ensemble %v from %d idle %v", r.c.ensemble, r.c.segStart, r.c.Idle())
	}
}

func TestCoreFailedBookieAcksWithdrawn(t *testing.T) {
	r := newRig(t, 3, 3, 2, false)
	r.appendN(1)
	r.expect("e0>b0 e0>b1 e0>b2", "", false)
	r.ok(0, 0)
	r.c.AddResult(0, 0, "b0", errBookieDown) // say its next request failed
	r.expect("", "", true)
	r.ok(0, 1)
	r.expect("", "", false) // b0's copy no longer counts
	r.ok(0, 2)
	r.expect("", "ok0", false)
}

func TestCoreLateFailureOfAckedEntry(t *testing.T) {
	r := newRig(t, 3, 3, 2, false)
	r.appendN(1)
	r.ready()
	r.ok(0, 0)
	r.ok(0, 1)
	r.expect("", "ok0", false)
	r.c.AddResult(0, 2, "b2", errBookieDown)
	ch := r.expect("", "", true)
	if ch.Start != 1 {
		t.Fatalf("change from %d, want 1", ch.Start)
	}
}

func TestCoreFenced(t *testing.T) {
	r := newRig(t, 3, 2, 2, false)
	r.appendN(3)
	r.ready()
	r.ok(0, 0)
	r.ok(0, 1)
	fenced := &client.StatusError{Addr: "b1", Op: proto.OpAdd, Ledger: 7, Entry: 1, Status: proto.StatusFenced}
	r.c.AddResult(1, 1, "b1", fenced)
	// No ensemble change around a fence: everything pending fails in order.
	r.expect("", "ok0 err1 err2", false)
	if !errors.Is(r.c.Err(), ErrFenced) || !errors.Is(r.c.Err(), proto.ErrFenced) {
		t.Fatalf("err %v", r.c.Err())
	}
	r.appendN(1)
	r.expect("", "err-1", false)
	r.ok(2, 2) // late answers change nothing
	r.expect("", "", false)
	if !r.c.Idle() || r.c.LAC() != 0 {
		t.Fatalf("idle %v LAC %d", r.c.Idle(), r.c.LAC())
	}
}

func TestCoreBadRequestIsFatal(t *testing.T) {
	r := newRig(t, 3, 2, 2, false)
	r.appendN(1)
	r.ready()
	r.c.AddResult(0, 0, "b0", &client.StatusError{Status: proto.StatusBadRequest})
	r.expect("", "err0", false)
}

func TestCoreNoReplacement(t *testing.T) {
	t.Run("Qw=Qa fails the writer", func(t *testing.T) {
		r := newRig(t, 3, 2, 2, false)
		r.appendN(2)
		r.ready()
		r.c.AddResult(0, 0, "b0", errBookieDown)
		r.expect("", "", true)
		r.c.EnsembleChangeFailed(fmt.Errorf("%w: none", ErrNotEnoughBookies))
		r.expect("", "err0 err1", false)
		if !errors.Is(r.c.Err(), ErrNotEnoughBookies) {
			t.Fatal(r.c.Err())
		}
	})
	t.Run("Qw>Qa goes on degraded", func(t *testing.T) {
		r := newRig(t, 3, 3, 2, false)
		r.appendN(1)
		r.ready()
		r.c.AddResult(0, 0, "b0", errBookieDown)
		r.expect("", "", true)
		r.c.EnsembleChangeFailed(fmt.Errorf("%w: none", ErrNotEnoughBookies))
		if !r.c.Degraded() || r.c.Err() != nil {
			t.Fatalf("degraded %v err %v", r.c.Degraded(), r.c.Err())
		}
		r.ok(0, 1)
		r.ok(0, 2)
		r.expect("", "ok0", false)
		r.appendN(1)
		r.expect("e1>b1 e1>b2", "", false)
		// A retry looks again.
		r.c.RetryChange()
		r.expect("", "", true)
		r.c.EnsembleChangeFailed(fmt.Errorf("%w: none", ErrNotEnoughBookies))
		r.expect("", "", false)
		// A second failure leaves write sets below Qa: try once more, then fail.
		r.c.AddResult(1, 1, "b1", errBookieDown)
		r.expect("", "", true)
		r.c.EnsembleChangeFailed(fmt.Errorf("%w: none", ErrNotEnoughBookies))
		r.expect("", "err1", false)
	})
	t.Run("other change errors fail the writer", func(t *testing.T) {
		r := newRig(t, 3, 3, 2, false)
		r.appendN(1)
		r.ready()
		r.c.AddResult(0, 0, "b0", errBookieDown)
		r.ready()
		r.c.EnsembleChangeFailed(fmt.Errorf("%w: ledger is in-recovery", ErrFenced))
		r.expect("", "err0", false)
		if !errors.Is(r.c.Err(), ErrFenced) {
			t.Fatal(r.c.Err())
		}
	})
}

func TestCoreRecoveryMode(t *testing.T) {
	r := newRig(t, 3, 3, 2, true)
	payload := func(id int64) []byte { return proto.AppendEntry(nil, 7, uint64(id), -1, uint64(id+1), []byte{'x'}) }
	r.c.AppendEncoded(0, payload(0), 1, nil)
	r.c.AppendEncoded(2, payload(2), 3, nil) // out of order: refused
	r.expect("e0>b0 e0>b1 e0>b2", "err2", false)
	r.ok(0, 0)
	r.ok(0, 1)
	r.expect("", "", false) // recovery wants the full write set
	r.ok(0, 2)
	r.expect("", "ok0", false)
	r.c.AppendEncoded(1, payload(1), 2, nil)
	r.ready()
	r.ok(1, 1)
	r.ok(1, 2)
	r.c.AddResult(1, 0, "b0", errBookieDown)
	r.expect("", "", true)
	// No replacement: settle for Qa.
	r.c.EnsembleChangeFailed(fmt.Errorf("%w: none", ErrNotEnoughBookies))
	r.expect("", "ok1", false)
	if r.c.LAC() != 1 || r.c.LACLength() != 2 || r.c.Err() != nil {
		t.Fatalf("LAC %d length %d err %v", r.c.LAC(), r.c.LACLength(), r.c.Err())
	}
}

func TestCoreFailPending(t *testing.T) {
	r := newRig(t, 3, 2, 2, false)
	r.appendN(2)
	r.ready()
	r.c.Fail(errors.New("closing"))
	r.expect("", "err0 err1", false)
	r.c.Fail(errors.New("again")) // once only
	r.expect("", "", false)
}
