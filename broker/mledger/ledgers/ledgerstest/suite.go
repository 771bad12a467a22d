// Package ledgerstest is the conformance suite of ledgers.Store: Run
// checks, against any implementation, the semantics broker/mledger relies
// on (entry order, what a reader may read, fencing by recovery, closed
// writers, deletes). Package ledgers runs it against the bookies
// (ledgers.OnBookies), package memledger against its in-memory ledgers, so
// the fake the managed ledger's tests use cannot drift from the real ones.
package ledgerstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/mledger/ledgers"
)

// Run runs the suite; open returns the Store to test (one per subtest).
// The stores must offer at least two bookies.
func Run(t *testing.T, open func(t *testing.T) ledgers.Store) {
	for _, tc := range []struct {
		name string
		f    func(t *testing.T, ctx context.Context, s ledgers.Store)
	}{
		{"AppendCloseRead", appendCloseRead},
		{"ClosedWriterRefusesAppends", closedWriterRefuses},
		{"RecoverFencesTheWriter", recoverFences},
		{"ReaderOfAnOpenLedger", readerOfOpenLedger},
		{"Delete", deleteLedger},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tc.f(t, ctx, open(t))
		})
	}
}

var opts = ledger.CreateOptions{Ensemble: 2, WriteQuorum: 2, AckQuorum: 2, Properties: map[string]string{"test": "ledgerstest"}}

func data(i int) []byte { return fmt.Appendf(nil, "entry-%03d", i) }

// appendN appends n entries and checks their ids and the order of the
// callbacks.
func appendN(t *testing.T, w ledgers.Writer, from, n int) {
	t.Helper()
	done := make(chan error, n)
	next := int64(from)
	for i := from; i < from+n; i++ {
		w.AppendAsync(data(i), func(id int64, err error) {
			switch {
			case err != nil:
				done <- err
			case id != next:
				done <- fmt.Errorf("callback for entry %d, want %d", id, next)
			default:
				next++
				done <- nil
			}
		})
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := w.LastAddConfirmed(); got != int64(from+n-1) {
		t.Fatalf("LastAddConfirmed %d, want %d", got, from+n-1)
	}
}

// appendSeq appends n entries one at a time, each once the one before
// is acknowledged.
func appendSeq(t *testing.T, w ledgers.Writer, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if id, err := appendErr(w, i); err != nil || id != int64(i) {
			t.Fatalf("append %d: id %d, %v", i, id, err)
		}
	}
}

// appendErr appends one entry and returns its id and error.
func appendErr(w ledgers.Writer, i int) (int64, error) {
	type res struct {
		id  int64
		err error
	}
	ch := make(chan res, 1)
	w.AppendAsync(data(i), func(id int64, err error) { ch <- res{id, err} })
	r := <-ch
	return r.id, r.err
}

func checkRead(t *testing.T, ctx context.Context, r ledgers.Reader, first, last int64) {
	t.Helper()
	es, err := r.Read(ctx, first, last)
	if err != nil {
		t.Fatalf("read %d..%d: %v", first, last, err)
	}
	if len(es) != int(last-first+1) {
		t.Fatalf("read %d..%d: %d entries", first, last, len(es))
	}
	for i, e := range es {
		if e.ID != first+int64(i) || !bytes.Equal(e.Data, data(int(first)+i)) {
			t.Fatalf("read %d..%d: entry %d is %d %q", first, last, i, e.ID, e.Data)
		}
	}
}

func appendCloseRead(t *testing.T, ctx context.Context, s ledgers.Store) {
	w, err := s.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if w.LastAddConfirmed() != -1 {
		t.Fatalf("new writer's LastAddConfirmed %d", w.LastAddConfirmed())
	}
	if md := w.Metadata(); md.State != ledger.StateOpen || md.EnsembleSize != 2 || md.Properties["test"] != "ledgerstest" {
		t.Fatalf("new ledger's metadata %+v", md)
	}
	appendN(t, w, 0, 5)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var length uint64
	for i := range 5 {
		length += uint64(len(data(i)))
	}
	if md := w.Metadata(); md.State != ledger.StateClosed || md.LastEntry != 4 || md.Length != length {
		t.Fatalf("closed ledger's metadata: state %s, last entry %d, length %d; want closed, 4, %d", md.State, md.LastEntry, md.Length, length)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	r, err := s.OpenReader(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Closed() || r.LastAddConfirmed() != 4 {
		t.Fatalf("reader of the closed ledger: closed %v, LAC %d", r.Closed(), r.LastAddConfirmed())
	}
	checkRead(t, ctx, r, 0, 4)
	checkRead(t, ctx, r, 2, 3)
	if _, err := r.Read(ctx, 3, 5); !errors.Is(err, ledger.ErrNoEntry) {
		t.Fatalf("read past the last entry: %v, want ErrNoEntry", err)
	}
	if _, err := r.WaitLAC(ctx, 4); !errors.Is(err, ledger.ErrClosed) {
		t.Fatalf("WaitLAC at the end of a closed ledger: %v, want ErrClosed", err)
	}
	md, err := s.Recover(ctx, w.ID())
	if err != nil || md.State != ledger.StateClosed || md.LastEntry != 4 {
		t.Fatalf("recover a closed ledger: %+v, %v", md, err)
	}
}

func closedWriterRefuses(t *testing.T, ctx context.Context, s ledgers.Store) {
	w, err := s.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 2)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if id, err := appendErr(w, 2); !errors.Is(err, ledger.ErrClosed) || id != -1 {
		t.Fatalf("append after Close: id %d, %v; want -1, ErrClosed", id, err)
	}
	if md := w.Metadata(); md.LastEntry != 1 {
		t.Fatalf("last entry %d after a refused append", md.LastEntry)
	}
}

func recoverFences(t *testing.T, ctx context.Context, s ledgers.Store) {
	w, err := s.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 3)
	md, err := s.Recover(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if md.State != ledger.StateClosed || md.LastEntry != 2 {
		t.Fatalf("recovered: state %s, last entry %d; want closed, 2", md.State, md.LastEntry)
	}
	if _, err := appendErr(w, 3); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("append after recovery: %v, want ErrFenced", err)
	}
	if err := w.Close(ctx); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("Close after recovery: %v, want ErrFenced", err)
	}
	again, err := s.Recover(ctx, w.ID())
	if err != nil || again.LastEntry != 2 || again.State != ledger.StateClosed {
		t.Fatalf("second recovery: %+v, %v", again, err)
	}
	r, err := s.OpenReader(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, ctx, r, 0, 2)
	if _, err := s.Recover(ctx, w.ID()+1<<20); !errors.Is(err, ledger.ErrNoLedger) {
		t.Fatalf("recover a ledger that does not exist: %v, want ErrNoLedger", err)
	}
}

func readerOfOpenLedger(t *testing.T, ctx context.Context, s ledgers.Store) {
	w, err := s.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	r, err := s.OpenReader(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if r.Closed() || r.LastAddConfirmed() != -1 {
		t.Fatalf("reader of an empty open ledger: closed %v, LAC %d", r.Closed(), r.LastAddConfirmed())
	}
	if _, err := r.Read(ctx, 0, 0); !errors.Is(err, ledger.ErrNoEntry) {
		t.Fatalf("read of an empty open ledger: %v, want ErrNoEntry", err)
	}
	appendSeq(t, w, 0, 3)
	// The last-add-confirmed a reader sees rides on later entries: after
	// three, one at a time, entries 0 and 1 are readable (the third
	// carried LAC 1).
	lac, err := r.WaitLAC(ctx, 0)
	if err != nil || lac < 1 || lac > 2 {
		t.Fatalf("WaitLAC(0) after 3 entries: %d, %v; want 1 or 2", lac, err)
	}
	checkRead(t, ctx, r, 0, lac)
	if _, err := r.Read(ctx, 0, lac+1); !errors.Is(err, ledger.ErrNoEntry) {
		t.Fatalf("read past the LAC %d: %v, want ErrNoEntry", lac, err)
	}
	appendSeq(t, w, 3, 2)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lac, err = r.WaitLAC(wctx, 2)
	if err != nil || lac < 3 {
		t.Fatalf("WaitLAC(2) after 5 entries: %d, %v", lac, err)
	}
	checkRead(t, ctx, r, 0, lac)
	if r.Closed() {
		t.Fatal("reader of an open ledger says closed")
	}
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := r.WaitLAC(sctx, 4); err == nil {
		t.Fatal("WaitLAC beyond the last entry returned without error")
	}
}

func deleteLedger(t *testing.T, ctx context.Context, s ledgers.Store) {
	w, err := s.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 2)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, w.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenReader(ctx, w.ID()); !errors.Is(err, ledger.ErrNoLedger) {
		t.Fatalf("open a deleted ledger: %v, want ErrNoLedger", err)
	}
	if _, err := s.Recover(ctx, w.ID()); !errors.Is(err, ledger.ErrNoLedger) {
		t.Fatalf("recover a deleted ledger: %v, want ErrNoLedger", err)
	}
	if err := s.Delete(ctx, w.ID()); !errors.Is(err, ledger.ErrNoLedger) {
		t.Fatalf("delete a deleted ledger: %v, want ErrNoLedger", err)
	}
}
