package bookie_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/internal/testcluster"
)

func newLedgerClient(t testing.TB, cl *testcluster.Cluster) *ledger.Client {
	t.Helper()
	c, err := ledger.NewClient(cl.Connect(), ledger.Config{Region: cl.Region, Logger: cl.Logger(),
		RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func payload(i int) []byte {
	return []byte(fmt.Sprintf("entry-%06d-%s", i, bytes.Repeat([]byte{byte('a' + i%26)}, 50+i%700)))
}

// TestSIGKILLBookieThenRecoverFromOthers: a bookie process that holds every
// entry of a ledger (E=3, Qw=3, Qa=2) is killed with SIGKILL under a write
// load, the writer is abandoned, and recovery from the two surviving bookies
// returns every acknowledged entry byte-identical.
func TestSIGKILLBookieThenRecoverFromOthers(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{Bookies: 2})
	dir := t.TempDir()
	child := startChild(t, childConfig{
		Endpoints: cl.Endpoints(),
		Bookie: bookie.Config{
			Region:          cl.Region,
			ListenAddr:      freePort(t),
			JournalDir:      filepath.Join(dir, "journal"),
			LedgerDir:       filepath.Join(dir, "ledgers"),
			RegistrationTTL: 2 * time.Second,
		},
	})
	ctx := context.Background()
	lc := newLedgerClient(t, cl)
	w, err := lc.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[int64][]byte{}
	var wg sync.WaitGroup
	killAt, stopAt := 400, 800
	for i := 0; i < stopAt; i++ {
		data := payload(i)
		wg.Add(1)
		w.AppendAsync(data, func(id int64, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				acked[id] = data
				mu.Unlock()
			}
		})
		if i == killAt {
			child.kill()
		}
	}
	wg.Wait()
	if len(acked) < killAt/2 {
		t.Fatalf("only %d entries acked", len(acked))
	}
	// The writer is abandoned without Close: another client recovers.
	r, err := newLedgerClient(t, cl).OpenRecover(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	var maxAcked int64 = -1
	for id := range acked {
		maxAcked = max(maxAcked, id)
	}
	if r.LastAddConfirmed() < maxAcked {
		t.Fatalf("recovered ledger ends at %d, before acked entry %d", r.LastAddConfirmed(), maxAcked)
	}
	entries, err := r.Read(ctx, 0, r.LastAddConfirmed())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if want, ok := acked[e.ID]; ok && !bytes.Equal(e.Data, want) {
			t.Fatalf("entry %d differs after recovery", e.ID)
		}
		delete(acked, e.ID)
	}
	if len(acked) != 0 {
		t.Fatalf("%d acked entries missing after recovery", len(acked))
	}
	// The abandoned writer can no longer add: recovery fenced the ledger.
	if _, err := w.Append(ctx, []byte("stale")); err == nil {
		t.Fatal("abandoned writer still appends after recovery")
	}
}

// TestLedgerMetadataSurvivesEtcdRestart: ledger metadata written before an
// embedded etcd restart is all there after it, an open writer keeps
// appending while etcd is down (adds need only bookies), and concurrent
// recoveries of one ledger agree instead of clobbering each other.
func TestLedgerMetadataSurvivesEtcdRestart(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{Bookies: 3})
	ctx := context.Background()
	lc := newLedgerClient(t, cl)

	closed, err := lc.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2,
		Properties: map[string]string{"owner": "test"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := closed.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := closed.Close(ctx); err != nil {
		t.Fatal(err)
	}
	before, _, err := lc.Metadata(ctx, closed.ID())
	if err != nil {
		t.Fatal(err)
	}
	open, err := lc.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := open.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}

	cl.StopEtcd()
	for i := 10; i < 20; i++ {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := open.Append(actx, payload(i))
		cancel()
		if err != nil {
			t.Fatalf("append with etcd down: %v", err)
		}
	}
	cl.StartEtcd()

	lc2 := newLedgerClient(t, cl)
	after, _, err := lc2.Metadata(ctx, closed.ID())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", before) != fmt.Sprintf("%+v", after) {
		t.Fatalf("metadata changed across etcd restart:\nbefore %+v\nafter  %+v", before, after)
	}
	r, err := lc2.OpenNoRecovery(ctx, closed.ID())
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(ctx, 0, 49)
	if err != nil || len(got) != 50 {
		t.Fatalf("read after restart: %d entries, %v", len(got), err)
	}
	for _, e := range got {
		if !bytes.Equal(e.Data, payload(int(e.ID))) {
			t.Fatalf("entry %d differs", e.ID)
		}
	}

	// Three clients recover the open ledger at once: one metadata outcome.
	var wg sync.WaitGroup
	lasts := make([]int64, 3)
	errs := make([]error, 3)
	for i := range lasts {
		c := newLedgerClient(t, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.OpenRecover(ctx, open.ID())
			errs[i] = err
			if err == nil {
				lasts[i] = r.LastAddConfirmed()
			}
		}()
	}
	wg.Wait()
	for i := range lasts {
		if errs[i] != nil {
			t.Fatalf("concurrent recovery %d: %v", i, errs[i])
		}
		if lasts[i] != 19 {
			t.Fatalf("concurrent recoveries disagree or lost entries: %v", lasts)
		}
	}
	md, _, err := lc2.Metadata(ctx, open.ID())
	if err != nil || md.State != ledger.StateClosed || md.LastEntry != 19 {
		t.Fatalf("metadata after concurrent recoveries: %+v %v", md, err)
	}
}

// A writer whose client was closed did not close its ledger: Close must say
// so (ErrClosed), not report success while the metadata still says open.
func TestCloseAfterClientCloseIsNotSuccess(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{Bookies: 3})
	ctx := context.Background()
	lc, err := ledger.NewClient(cl.Connect(), ledger.Config{Region: cl.Region})
	if err != nil {
		t.Fatal(err)
	}
	w, err := lc.Create(ctx, ledger.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	lc.Close()
	if err := w.Close(ctx); !errors.Is(err, ledger.ErrClosed) {
		t.Fatalf("Close after the client closed = %v, want ErrClosed", err)
	}
	if err := w.Close(ctx); !errors.Is(err, ledger.ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed again", err)
	}
	md, _, err := newLedgerClient(t, cl).Metadata(ctx, w.ID())
	if err != nil || md.State == ledger.StateClosed {
		t.Fatalf("metadata %+v %v: the ledger must still be open (for recovery)", md, err)
	}
}

// TestReadOnlyBookieIsReplaced: a ledger writer replaces a bookie of its
// ensemble that turns read-only, as it does one that fails.
func TestReadOnlyBookieIsReplaced(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, testcluster.Options{Bookies: 4})
	c := newLedgerClient(t, cl)
	ctx := context.Background()
	w, err := c.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	ro := w.Metadata().Ensembles[0].Bookies[0]
	cl.BookieByID(ro).Server().SetReadOnly(true)
	for i := 10; i < 30; i++ {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	testcluster.WaitFor(t, 10*time.Second, func() bool { return len(w.Metadata().Ensembles) == 2 })
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	md := w.Metadata()
	if slices.Contains(md.Last().Bookies, ro) {
		t.Fatalf("read-only bookie still in the ensemble: %+v", md.Ensembles)
	}
}
