package ledger_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/bookie/racks"
	"github.com/isobar-mq/isobar/internal/testcluster"
)

// assign puts the bookies of indices idx in group g through the region's
// racks-info, as the admin API does.
func assign(t *testing.T, cl *testcluster.Cluster, rs *racks.Store, g string, info racks.Info, idx ...int) {
	t.Helper()
	for _, i := range idx {
		if err := rs.Set(context.Background(), g, cl.Bookie(i).ID(), info); err != nil {
			t.Fatal(err)
		}
	}
}

func ids(cl *testcluster.Cluster, idx ...int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, cl.Bookie(i).ID())
	}
	return out
}

// within fails the test unless every bookie of got is one of want.
func within(t *testing.T, what string, got, want []string) {
	t.Helper()
	for _, b := range got {
		if !slices.Contains(want, b) {
			t.Fatalf("%s: ensemble %v has %s, not one of %v", what, got, b, want)
		}
	}
}

// TestAffinityPlacement: four real bookies in two groups (racks-info);
// new ledgers land in the primary group, in the secondary when the
// primary has too few, nowhere when both have too few, anywhere without
// an affinity; and the affinity is kept in the ledger's metadata.
func TestAffinityPlacement(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 4)
	c := newClient(t, cl)
	ctx := context.Background()
	rs := racks.NewStore(cl.Connect(), cl.Region)
	assign(t, cl, rs, "g1", racks.Info{}, 0, 1)
	assign(t, cl, rs, "g2", racks.Info{}, 2, 3)
	g1 := ids(cl, 0, 1)
	create := func(e int, a ledger.Affinity) (ledger.Metadata, error) {
		t.Helper()
		w, err := c.Create(ctx, ledger.CreateOptions{Ensemble: e, WriteQuorum: 1, AckQuorum: 1, Affinity: a})
		if err != nil {
			return ledger.Metadata{}, err
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		md, _, err := c.Metadata(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		return md, nil
	}

	primary := ledger.Affinity{Primary: []string{"g1"}}
	for range 5 {
		md, err := create(2, primary)
		if err != nil {
			t.Fatal(err)
		}
		within(t, "primary g1, E=2", md.Ensembles[0].Bookies, g1)
		if md.Affinity == nil || !slices.Equal(md.Affinity.Primary, []string{"g1"}) {
			t.Fatalf("metadata affinity %+v, want primary g1", md.Affinity)
		}
	}
	if _, err := create(3, primary); !errors.Is(err, ledger.ErrNotEnoughBookies) {
		t.Fatalf("primary g1 (2 bookies), no secondary, E=3: err %v, want ErrNotEnoughBookies", err)
	}
	both := ledger.Affinity{Primary: []string{"g1"}, Secondary: []string{"g2"}}
	md, err := create(3, both)
	if err != nil {
		t.Fatal(err)
	}
	if got := md.Ensembles[0].Bookies; !slices.Contains(got, g1[0]) || !slices.Contains(got, g1[1]) {
		t.Fatalf("primary g1 short, secondary g2, E=3: ensemble %v lacks a g1 bookie %v", got, g1)
	}
	if _, err := create(4, ledger.Affinity{Primary: []string{"g1"}, Secondary: []string{"g3"}}); !errors.Is(err, ledger.ErrNotEnoughBookies) {
		t.Fatalf("both groups short, E=4: err %v, want ErrNotEnoughBookies (no fallback to g2)", err)
	}
	md, err = create(4, ledger.Affinity{})
	if err != nil {
		t.Fatalf("no affinity, E=4: %v", err)
	}
	if md.Affinity != nil {
		t.Fatalf("metadata affinity %+v, want none", md.Affinity)
	}
	// A bookie moved out of the primary group: the primary now has one,
	// the secondary fills in.
	assign(t, cl, rs, "g2", racks.Info{}, 1)
	for range 3 {
		md, err := create(2, both)
		if err != nil {
			t.Fatal(err)
		}
		if got := md.Ensembles[0].Bookies; !slices.Contains(got, g1[0]) {
			t.Fatalf("after the move: ensemble %v lacks %s, g1's one bookie", got, g1[0])
		}
	}
}

// TestAffinityEnsembleChange: when a bookie of the ensemble stops, the
// replacement comes from the primary group while it has enough live
// bookies, then from the secondary.
func TestAffinityEnsembleChange(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 4)
	c := newClient(t, cl)
	ctx := context.Background()
	rs := racks.NewStore(cl.Connect(), cl.Region)
	assign(t, cl, rs, "g1", racks.Info{}, 0, 1, 2)
	assign(t, cl, rs, "g2", racks.Info{}, 3)
	g1, g2 := ids(cl, 0, 1, 2), ids(cl, 3)
	w, err := c.Create(ctx, ledger.CreateOptions{Ensemble: 2, WriteQuorum: 2, AckQuorum: 2,
		Affinity: ledger.Affinity{Primary: []string{"g1"}, Secondary: []string{"g2"}}})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "first ensemble", w.Metadata().Ensembles[0].Bookies, g1)
	next := 0
	appendN := func(n int) {
		t.Helper()
		for range n {
			if _, err := w.Append(ctx, payload(next)); err != nil {
				t.Fatal(err)
			}
			next++
		}
	}
	appendN(10)

	// One g1 bookie of the ensemble stops: g1 still has two live, the
	// replacement is the third g1 bookie.
	victim := lastEnsemble(w)[1]
	cl.BookieByID(victim).Stop()
	appendN(10)
	testcluster.WaitFor(t, 10*time.Second, func() bool { return !slices.Contains(lastEnsemble(w), victim) })
	second := lastEnsemble(w)
	within(t, "after the first stop", second, g1)

	// Another stops: g1 has one live bookie, fewer than E, so g2's joins.
	victim2 := second[0]
	cl.BookieByID(victim2).Stop()
	appendN(10)
	testcluster.WaitFor(t, 10*time.Second, func() bool { return !slices.Contains(lastEnsemble(w), victim2) })
	third := lastEnsemble(w)
	if !slices.Contains(third, g2[0]) {
		t.Fatalf("after the second stop: ensemble %v, want the g2 bookie %s in it", third, g2[0])
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Everything acknowledged reads back (the first entries live on the
	// stopped bookies only: start them again).
	cl.BookieByID(victim).Start()
	cl.BookieByID(victim2).Start()
	r, err := newClient(t, cl).OpenNoRecovery(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64][]byte{}
	for i := range next {
		want[int64(i)] = payload(i)
	}
	checkReadBack(t, r, want, int64(next-1))
}

// TestRackOverride: a rack set through racks-info replaces the bookie's
// configured rack for placement.
func TestRackOverride(t *testing.T) {
	t.Parallel()
	// Configured: bookies 0-2 on r1, bookie 3 alone on r2, so every
	// ensemble of two takes bookie 3.
	cl := testcluster.Start(t, testcluster.Options{Bookies: 4, Region: region, Racks: []string{"r1", "r1", "r1", "r2"}})
	c := newClient(t, cl)
	ctx := context.Background()
	ensemble := func() []string {
		t.Helper()
		w, err := c.Create(ctx, ledger.CreateOptions{Ensemble: 2, WriteQuorum: 2, AckQuorum: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		return w.Metadata().Ensembles[0].Bookies
	}
	b0, b3 := cl.Bookie(0).ID(), cl.Bookie(3).ID()
	for range 5 {
		if e := ensemble(); !slices.Contains(e, b3) {
			t.Fatalf("configured racks: ensemble %v lacks %s, alone on its rack", e, b3)
		}
	}
	// racks-info: bookie 3 to r1, bookie 0 alone on r2.
	rs := racks.NewStore(cl.Connect(), cl.Region)
	assign(t, cl, rs, "default", racks.Info{Rack: "r1"}, 3)
	assign(t, cl, rs, "default", racks.Info{Rack: "r2", Hostname: "bookie-0.example"}, 0)
	for range 5 {
		if e := ensemble(); !slices.Contains(e, b0) {
			t.Fatalf("racks-info racks: ensemble %v lacks %s, now alone on its rack", e, b0)
		}
	}
}

func lastEnsemble(w *ledger.Writer) []string {
	md := w.Metadata()
	return md.Last().Bookies
}

// TestConfiguredGroup: a bookie's configured group (bookie.group, in its
// registration) places it, and racks-info overrides it.
func TestConfiguredGroup(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, testcluster.Options{Bookies: 4, Region: region, Bookie: func(i int, c *bookie.Config) {
		c.Group = []string{"g1", "g1", "g2", "g2"}[i]
	}})
	c := newClient(t, cl)
	ctx := context.Background()
	ensemble := func() []string {
		t.Helper()
		w, err := c.Create(ctx, ledger.CreateOptions{Ensemble: 2, WriteQuorum: 1, AckQuorum: 1, Affinity: ledger.Affinity{Primary: []string{"g1"}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		return w.Metadata().Ensembles[0].Bookies
	}
	for range 3 {
		within(t, "configured g1", ensemble(), ids(cl, 0, 1))
	}
	// racks-info moves bookie 1 to g2 and bookie 2 to g1.
	rs := racks.NewStore(cl.Connect(), cl.Region)
	assign(t, cl, rs, "g2", racks.Info{}, 1)
	assign(t, cl, rs, "g1", racks.Info{}, 2)
	for range 3 {
		within(t, "racks-info g1", ensemble(), ids(cl, 0, 2))
	}
}
