package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/client"
	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore"
)

const region = "r1"

func startCluster(t *testing.T, bookies int) *testcluster.Cluster {
	t.Helper()
	return testcluster.Start(t, testcluster.Options{Bookies: bookies, Region: region})
}

// newClient makes a ledger client with its own metadata connection, as a
// separate process would have.
func newClient(t *testing.T, cl *testcluster.Cluster) *ledger.Client {
	t.Helper()
	c, err := ledger.NewClient(cl.Connect(), ledger.Config{
		Region:          cl.Region,
		Logger:          cl.Logger(),
		RequestTimeout:  5 * time.Second,
		LongPollTimeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func payload(i int) []byte {
	// Sizes vary from 0 to ~3 KiB; content depends on i.
	r := rand.New(rand.NewPCG(uint64(i), 42))
	b := make([]byte, r.IntN(3000))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return append(b, fmt.Sprintf("#%d", i)...)
}

// appender appends payload(i) for i = 0, 1, ... and records what was acked.
type appender struct {
	w *ledger.Writer

	mu    sync.Mutex
	acked []int64 // entry ids acked, in callback order
	data  map[int64][]byte
	err   error
	sent  int
}

func newAppender(w *ledger.Writer) *appender { return &appender{w: w, data: map[int64][]byte{}} }

func (a *appender) appendAsync(t *testing.T) {
	a.mu.Lock()
	i := a.sent
	a.sent++
	a.mu.Unlock()
	data := payload(i)
	a.w.AppendAsync(data, func(id int64, err error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if err != nil {
			if a.err == nil {
				a.err = err
			}
			return
		}
		if a.err != nil {
			t.Errorf("entry %d acked after an earlier entry failed (%v)", id, a.err)
		}
		if n := len(a.acked); (n == 0 && id != 0) || (n > 0 && id != a.acked[n-1]+1) {
			t.Errorf("callback for entry %d after %v: out of order", id, a.acked[max(0, n-1):])
		}
		a.acked = append(a.acked, id)
		a.data[id] = data
	})
}

func (a *appender) snapshot() (acked int, lastAcked int64, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	last := int64(-1)
	if n := len(a.acked); n > 0 {
		last = a.acked[n-1]
	}
	return len(a.acked), last, a.err
}

// checkReadBack reads entries 0..last through r and compares them with want.
func checkReadBack(t *testing.T, r *ledger.Reader, want map[int64][]byte, last int64) {
	t.Helper()
	if last < 0 {
		return
	}
	got, err := r.Read(context.Background(), 0, last)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != last+1 {
		t.Fatalf("read %d entries, want %d", len(got), last+1)
	}
	for i, e := range got {
		if e.ID != int64(i) {
			t.Fatalf("entry %d has id %d", i, e.ID)
		}
		if w, ok := want[e.ID]; ok && !bytes.Equal(e.Data, w) {
			t.Fatalf("entry %d differs: %d bytes, want %d", e.ID, len(e.Data), len(w))
		}
	}
}

func TestCreateAppendCloseRead(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 3)
	c := newClient(t, cl)
	ctx := context.Background()
	for _, q := range []ledger.CreateOptions{
		{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2},
		{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2},
	} {
		t.Run(fmt.Sprintf("E%dQw%dQa%d", q.Ensemble, q.WriteQuorum, q.AckQuorum), func(t *testing.T) {
			q.Properties = map[string]string{"owner": "test"}
			w, err := c.Create(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if w.LastAddConfirmed() != -1 {
				t.Fatalf("new ledger LAC %d", w.LastAddConfirmed())
			}
			// A few synchronous appends, then many in flight.
			a := newAppender(w)
			var total uint64
			for i := range 5 {
				id, err := w.Append(ctx, payload(i))
				if err != nil || id != int64(i) {
					t.Fatalf("append %d = %d, %v", i, id, err)
				}
				a.acked = append(a.acked, id)
				a.data[id] = payload(i)
				a.sent++
				total += uint64(len(payload(i)))
			}
			const n = 1500
			for range n - 5 {
				a.appendAsync(t)
			}
			for i := 5; i < n; i++ {
				total += uint64(len(payload(i)))
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if count, last, err := a.snapshot(); count != n || last != n-1 || err != nil {
				t.Fatalf("acked %d, last %d, err %v", count, last, err)
			}
			if w.LastAddConfirmed() != n-1 {
				t.Fatalf("writer LAC %d", w.LastAddConfirmed())
			}
			if _, err := w.Append(ctx, []byte("late")); !errors.Is(err, ledger.ErrClosed) {
				t.Fatalf("append after close: %v", err)
			}
			if err := w.Close(ctx); err != nil {
				t.Fatalf("second close: %v", err)
			}

			md, _, err := c.Metadata(ctx, w.ID())
			if err != nil {
				t.Fatal(err)
			}
			if md.State != ledger.StateClosed || md.LastEntry != n-1 || md.Length != total ||
				md.Properties["owner"] != "test" || md.WriteQuorum != q.WriteQuorum || len(md.Ensembles) != 1 {
				t.Fatalf("metadata %+v (want length %d)", md, total)
			}
			other := newClient(t, cl)
			r, err := other.OpenNoRecovery(ctx, w.ID())
			if err != nil {
				t.Fatal(err)
			}
			if !r.Closed() || r.LastAddConfirmed() != n-1 || r.Length() != total {
				t.Fatalf("reader closed %v LAC %d length %d", r.Closed(), r.LastAddConfirmed(), r.Length())
			}
			checkReadBack(t, r, a.data, n-1)
			// OpenRecover of a closed ledger just opens it.
			r2, err := other.OpenRecover(ctx, w.ID())
			if err != nil || r2.LastAddConfirmed() != n-1 {
				t.Fatalf("OpenRecover of a closed ledger: %v", err)
			}
			if _, err := r.Read(ctx, n-1, n); !errors.Is(err, ledger.ErrNoEntry) {
				t.Fatalf("read beyond the end: %v", err)
			}
			if _, err := r.Read(ctx, 5, 4); !errors.Is(err, ledger.ErrInvalid) {
				t.Fatalf("read of an empty range: %v", err)
			}
		})
	}
}

// TestFencing: a live writer is fenced out by another client's recovery.
func TestFencing(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 3)
	writerClient := newClient(t, cl)
	ctx := context.Background()
	w, err := writerClient.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	a := newAppender(w)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := a.snapshot(); err != nil {
				return
			}
			a.appendAsync(t)
		}
	}()
	testcluster.WaitFor(t, 20*time.Second, func() bool { n, _, _ := a.snapshot(); return n >= 300 })

	r, err := newClient(t, cl).OpenRecover(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	// The writer, still appending, must now fail with ErrFenced.
	testcluster.WaitFor(t, 20*time.Second, func() bool { _, _, err := a.snapshot(); return err != nil })
	close(stop)
	<-done
	_, err = w.Append(ctx, []byte("after recovery"))
	if !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("append after recovery: %v, want ErrFenced", err)
	}
	count, lastAcked, aerr := a.snapshot()
	if !errors.Is(aerr, ledger.ErrFenced) {
		t.Fatalf("in-flight appends failed with %v, want ErrFenced", aerr)
	}
	if !r.Closed() || r.LastAddConfirmed() < lastAcked {
		t.Fatalf("recovered ledger closed %v at %d; the writer had acked up to %d", r.Closed(), r.LastAddConfirmed(), lastAcked)
	}
	t.Logf("writer acked %d entries (last %d); recovery closed at %d", count, lastAcked, r.LastAddConfirmed())
	checkReadBack(t, r, a.data, lastAcked)
	if err := w.Close(ctx); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("close of a fenced writer: %v", err)
	}
	md, _, _ := writerClient.Metadata(ctx, w.ID())
	if md.State != ledger.StateClosed || md.LastEntry != r.LastAddConfirmed() {
		t.Fatalf("metadata after fenced close: %+v", md)
	}
}

// TestEnsembleChangeUnderLoad: a bookie of the ensemble stops while entries
// stream; the writer replaces it without the caller noticing.
func TestEnsembleChangeUnderLoad(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 4)
	c := newClient(t, cl)
	ctx := context.Background()
	w, err := c.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	a := newAppender(w)
	const total = 3000
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(done)
		for i := range total {
			if i == 1000 {
				// The rest is written once the victim is down, so the
				// ledger must change its ensemble (before, a fast run could
				// finish all 3000 before the stop took effect). Stop waits
				// for the bookie's shutdown; bound the wait all the same.
				select {
				case <-stopped:
				case <-time.After(10 * time.Second):
				}
			}
			a.appendAsync(t)
		}
	}()
	testcluster.WaitFor(t, 20*time.Second, func() bool { n, _, _ := a.snapshot(); return n >= 500 })
	victim := w.Metadata().Ensembles[0].Bookies[1]
	go func() {
		cl.BookieByID(victim).Stop()
		close(stopped)
	}()
	<-done
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	count, last, aerr := a.snapshot()
	if aerr != nil || count != total || last != total-1 {
		t.Fatalf("acked %d (last %d), err %v", count, last, aerr)
	}
	md, _, err := c.Metadata(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Ensembles) < 2 || slices.Contains(md.Last().Bookies, victim) || md.LastEntry != total-1 {
		t.Fatalf("metadata after the change: %+v", md)
	}
	t.Logf("ensembles: %+v", md.Ensembles)
	r, err := newClient(t, cl).OpenNoRecovery(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	checkReadBack(t, r, a.data, total-1)
}

// TestNotEnoughBookies: with no replacement and Qw = Qa, adds fail.
func TestNotEnoughBookies(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 3)
	c := newClient(t, cl)
	ctx := context.Background()
	w, err := c.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, []byte("first")); err != nil {
		t.Fatal(err)
	}
	go cl.Bookie(2).Stop()
	var lastErr error
	testcluster.WaitFor(t, 30*time.Second, func() bool {
		_, lastErr = w.Append(ctx, []byte("more"))
		return lastErr != nil
	})
	if !errors.Is(lastErr, ledger.ErrNotEnoughBookies) {
		t.Fatalf("append without enough bookies: %v", lastErr)
	}
}

// TestRecoveryAfterWriterDies: the writer vanishes mid-stream (no Close);
// recovery keeps every acknowledged entry and re-replicates the tail.
func TestRecoveryAfterWriterDies(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 3)
	ctx := context.Background()
	wc := newClient(t, cl)
	w, err := wc.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	a := newAppender(w)
	for range 400 {
		a.appendAsync(t)
	}
	testcluster.WaitFor(t, 20*time.Second, func() bool { n, _, _ := a.snapshot(); return n >= 200 })
	for range 400 {
		a.appendAsync(t)
	}
	wc.Close() // the writer dies with entries in flight
	_, lastAcked, _ := a.snapshot()

	rc := newClient(t, cl)
	r, err := rc.OpenRecover(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Closed() || r.LastAddConfirmed() < lastAcked {
		t.Fatalf("recovered up to %d (closed %v); %d was acked", r.LastAddConfirmed(), r.Closed(), lastAcked)
	}
	t.Logf("acked up to %d, recovered up to %d", lastAcked, r.LastAddConfirmed())
	checkReadBack(t, r, a.data, lastAcked)
	checkFullyReplicated(t, rc, r.Metadata(), w.ID())

	// Recovering again is a no-op.
	r2, err := newClient(t, cl).OpenRecover(ctx, w.ID())
	if err != nil || r2.LastAddConfirmed() != r.LastAddConfirmed() {
		t.Fatalf("second recovery: %v, at %d", err, r2.LastAddConfirmed())
	}
}

// TestConcurrentRecoveries: two clients recover the same ledger at once;
// both end with the same closed ledger.
func TestConcurrentRecoveries(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 3)
	ctx := context.Background()
	wc := newClient(t, cl)
	w, err := wc.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	a := newAppender(w)
	for range 300 {
		a.appendAsync(t)
	}
	testcluster.WaitFor(t, 20*time.Second, func() bool { n, _, _ := a.snapshot(); return n >= 100 })
	wc.Close()
	_, lastAcked, _ := a.snapshot()
	var rs [3]*ledger.Reader
	var errs [3]error
	var wg sync.WaitGroup
	for i := range rs {
		rc := newClient(t, cl)
		wg.Go(func() { rs[i], errs[i] = rc.OpenRecover(ctx, w.ID()) })
	}
	wg.Wait()
	for i := range rs {
		if errs[i] != nil {
			t.Fatalf("recovery %d: %v", i, errs[i])
		}
		if rs[i].LastAddConfirmed() != rs[0].LastAddConfirmed() || rs[i].Length() != rs[0].Length() || rs[i].LastAddConfirmed() < lastAcked {
			t.Fatalf("recovery %d closed at %d (length %d), recovery 0 at %d (length %d); acked %d",
				i, rs[i].LastAddConfirmed(), rs[i].Length(), rs[0].LastAddConfirmed(), rs[0].Length(), lastAcked)
		}
	}
	checkReadBack(t, rs[0], a.data, lastAcked)
}

// TestRecoverEmptyLedger: a ledger recovered before its first entry closes
// empty, and its writer is fenced out.
func TestRecoverEmptyLedger(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 3)
	ctx := context.Background()
	w, err := newClient(t, cl).Create(ctx, ledger.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := newClient(t, cl).OpenRecover(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Closed() || r.LastAddConfirmed() != -1 || r.Length() != 0 {
		t.Fatalf("closed %v at %d length %d", r.Closed(), r.LastAddConfirmed(), r.Length())
	}
	if _, err := w.Append(ctx, []byte("x")); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("append after recovery: %v", err)
	}
	if lac, err := r.WaitLAC(ctx, -1); !errors.Is(err, ledger.ErrClosed) || lac != -1 {
		t.Fatalf("WaitLAC on an empty closed ledger: %d, %v", lac, err)
	}
}

// TestRecoveryOfPartialTail crafts what a writer that crashed while sending
// leaves behind: entries 0..49 acknowledged, entry 50 on one bookie only
// (never acknowledged), entry 51 nowhere. Recovery must keep 50 (a copy
// exists) and write it to its full write set.
func TestRecoveryOfPartialTail(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 3)
	ctx := context.Background()
	for _, q := range []ledger.CreateOptions{
		{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2},
		{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2},
	} {
		t.Run(fmt.Sprintf("Qw%dQa%d", q.WriteQuorum, q.AckQuorum), func(t *testing.T) {
			wc := newClient(t, cl)
			w, err := wc.Create(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var length uint64
			for i := range 50 {
				if _, err := w.Append(ctx, payload(i)); err != nil {
					t.Fatal(err)
				}
				length += uint64(len(payload(i)))
			}
			md := w.Metadata()
			wc.Close()
			// Entry 50 reaches only the last bookie of its write set.
			length += uint64(len(payload(50)))
			ws := ledger.WriteSet(50, md.EnsembleSize, md.WriteQuorum)
			only := md.Last().Bookies[ws[len(ws)-1]]
			conn, err := client.Dial(ctx, cl.BookieByID(only).Addr(), client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			e50 := proto.AppendEntry(nil, w.ID(), 50, 49, length, payload(50))
			if err := conn.Add(ctx, w.ID(), 50, e50, false); err != nil {
				t.Fatal(err)
			}

			rc := newClient(t, cl)
			r, err := rc.OpenRecover(ctx, w.ID())
			if err != nil {
				t.Fatal(err)
			}
			if r.LastAddConfirmed() != 50 || r.Length() != length {
				t.Fatalf("recovered to %d length %d; want 50, %d", r.LastAddConfirmed(), r.Length(), length)
			}
			want := map[int64][]byte{}
			for i := range 51 {
				want[int64(i)] = payload(i)
			}
			checkReadBack(t, r, want, 50)
			checkFullyReplicated(t, rc, r.Metadata(), w.ID())
		})
	}
}

// checkFullyReplicated reads every entry of a closed ledger from every bookie
// of its write set directly.
func checkFullyReplicated(t *testing.T, c *ledger.Client, md ledger.Metadata, id uint64) {
	t.Helper()
	ctx := context.Background()
	for e := int64(0); e <= md.LastEntry; e++ {
		seg := md.SegmentFor(e)
		for _, idx := range ledger.WriteSet(e, md.EnsembleSize, md.WriteQuorum) {
			conn, err := c.BookieConn(ctx, seg.Bookies[idx])
			if err != nil {
				t.Fatal(err)
			}
			raw, err := conn.Read(ctx, id, uint64(e), false)
			if err != nil {
				t.Fatalf("entry %d on bookie %s: %v", e, seg.Bookies[idx], err)
			}
			if got, err := proto.DecodeEntry(raw); err != nil || got.ID != uint64(e) {
				t.Fatalf("entry %d on bookie %s: %v", e, seg.Bookies[idx], err)
			}
		}
	}
}

// TestTailingReader: a reader follows a writer with WaitLAC.
func TestTailingReader(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 3)
	ctx := context.Background()
	w, err := newClient(t, cl).Create(ctx, ledger.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := newClient(t, cl).OpenNoRecovery(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if r.LastAddConfirmed() != -1 || r.Closed() {
		t.Fatalf("fresh ledger: LAC %d closed %v", r.LastAddConfirmed(), r.Closed())
	}
	const n = 200
	seen := make(chan int64, n)
	tailErr := make(chan error, 1)
	go func() {
		prev := int64(-1)
		for {
			lac, err := r.WaitLAC(ctx, prev)
			if err != nil {
				if errors.Is(err, ledger.ErrClosed) && lac == n-1 {
					err = nil
				}
				tailErr <- err
				return
			}
			es, err := r.Read(ctx, prev+1, lac)
			if err != nil {
				tailErr <- err
				return
			}
			for _, e := range es {
				if !bytes.Equal(e.Data, payload(int(e.ID))) {
					tailErr <- fmt.Errorf("entry %d differs", e.ID)
					return
				}
				seen <- e.ID
			}
			prev = lac
		}
	}()
	for i := range n {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Entries show up while the writer is still open (the LAC trails by one).
	deadline := time.After(20 * time.Second)
	for want := int64(0); want < n-1; want++ {
		select {
		case got := <-seen:
			if got != want {
				t.Fatalf("tail saw %d, want %d", got, want)
			}
		case err := <-tailErr:
			t.Fatalf("tail ended: %v", err)
		case <-deadline:
			t.Fatalf("tail stuck before entry %d", want)
		}
	}
	if r.Closed() {
		t.Fatal("reader thinks the ledger is closed")
	}
	// Closing the ledger releases the last entry; the tail then ends.
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-seen:
		if got != n-1 {
			t.Fatalf("tail saw %d, want %d", got, n-1)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("tail did not see the last entry after close")
	}
	if err := <-tailErr; err != nil {
		t.Fatal(err)
	}
	if !r.Closed() {
		t.Fatal("reader did not notice the close")
	}
}

func TestDeleteAndBadInput(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 3)
	c := newClient(t, cl)
	ctx := context.Background()
	ledgers := metastore.RegionPrefix(region) + "ledgers/"

	// Bad input: clear errors, no metadata, no id drawn.
	for _, tc := range []struct {
		o    ledger.CreateOptions
		want error
	}{
		{ledger.CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 3}, ledger.ErrInvalid},
		{ledger.CreateOptions{Ensemble: 3, WriteQuorum: 4, AckQuorum: 2}, ledger.ErrInvalid},
		{ledger.CreateOptions{Ensemble: 0, WriteQuorum: 0, AckQuorum: -1}, ledger.ErrInvalid},
		{ledger.CreateOptions{Ensemble: 4, WriteQuorum: 2, AckQuorum: 2}, ledger.ErrNotEnoughBookies},
	} {
		if _, err := c.Create(ctx, tc.o); !errors.Is(err, tc.want) {
			t.Errorf("Create(%+v): %v, want %v", tc.o, err, tc.want)
		} else {
			t.Logf("Create(%+v): %v", tc.o, err)
		}
	}
	if kvs, _ := cl.Meta.List(ctx, ledgers); len(kvs) != 0 {
		t.Fatalf("bad creates left metadata: %v", kvs)
	}
	if _, err := cl.Meta.Get(ctx, ledger.LedgerIDKey(region)); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("bad creates drew a ledger id: %v", err)
	}
	for name, f := range map[string]func() error{
		"OpenNoRecovery": func() error { _, err := c.OpenNoRecovery(ctx, 999); return err },
		"OpenRecover":    func() error { _, err := c.OpenRecover(ctx, 999); return err },
		"Delete":         func() error { return c.Delete(ctx, 999) },
	} {
		if err := f(); !errors.Is(err, ledger.ErrNoLedger) {
			t.Errorf("%s of an unknown ledger: %v", name, err)
		}
	}
	if _, err := ledger.NewClient(nil, ledger.Config{Region: "r"}); err == nil {
		t.Error("NewClient accepted no metadata store")
	}
	if _, err := ledger.NewClient(cl.Meta, ledger.Config{}); err == nil {
		t.Error("NewClient accepted an empty config")
	}

	w, err := c.Create(ctx, ledger.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, make([]byte, 7<<20)); !errors.Is(err, ledger.ErrTooLarge) {
		t.Fatalf("oversize append: %v", err)
	}
	for i := range 10 {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	md := w.Metadata()
	if err := c.Delete(ctx, w.ID()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Metadata(ctx, w.ID()); !errors.Is(err, ledger.ErrNoLedger) {
		t.Fatalf("metadata after delete: %v", err)
	}
	for _, b := range md.AllBookies() {
		conn, err := c.BookieConn(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Read(ctx, w.ID(), 0, false); !errors.Is(err, proto.ErrNoLedger) && !errors.Is(err, proto.ErrNoEntry) {
			t.Fatalf("bookie %s still has the ledger: %v", b, err)
		}
	}
	if err := c.Delete(ctx, w.ID()); !errors.Is(err, ledger.ErrNoLedger) {
		t.Fatalf("second delete: %v", err)
	}
}
