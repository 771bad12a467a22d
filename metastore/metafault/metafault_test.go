package metafault

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/metastore"
)

func TestRules(t *testing.T) {
	r := OnNth(2, "/a/", OpPut, OpCreate)
	type call struct {
		op   Op
		key  string
		fail bool
	}
	for i, c := range []call{
		{OpPut, "/a/1", false},
		{OpGet, "/a/1", false}, // another kind: not counted
		{OpPut, "/b/1", false}, // another prefix: not counted
		{OpCreate, "/a/2", true},
		{OpPut, "/a/3", false}, // not sticky
	} {
		if err := r.MaybeError(c.op, c.key); (err != nil) != c.fail || err != nil && !errors.Is(err, ErrInjected) {
			t.Fatalf("call %d %v %s: %v", i, c.op, c.key, err)
		}
	}
	if r.Count() != 3 || r.Fired() != 1 {
		t.Fatalf("count %d fired %d", r.Count(), r.Fired())
	}

	mine := errors.New("mine")
	a := Always("", OpCAS)
	a.Err = mine
	for range 3 {
		if err := a.MaybeError(OpCAS, "/x"); !errors.Is(err, mine) {
			t.Fatalf("sticky rule: %v", err)
		}
	}
	a.Clear()
	if err := a.MaybeError(OpCAS, "/x"); err != nil || a.Count() != 4 || a.Fired() != 3 {
		t.Fatalf("after Clear: %v, count %d, fired %d", err, a.Count(), a.Fired())
	}

	once, counter := Once("/k"), OnNth(0, "")
	both := Rules(once, counter)
	if err := both.MaybeError(OpGet, "/k"); !errors.Is(err, ErrInjected) {
		t.Fatalf("combined: %v", err)
	}
	if err := both.MaybeError(OpGet, "/k"); err != nil || counter.Count() != 2 || counter.Fired() != 0 {
		t.Fatalf("combined, second: %v; counter %d", err, counter.Count())
	}
}

func startStore(t *testing.T) *metastore.Store {
	t.Helper()
	e, err := metastore.StartEmbedded(context.Background(), metastore.EmbedConfig{Dir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	s, err := metastore.Connect(context.Background(), metastore.Config{Endpoints: e.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A failed operation is not performed; leases granted through the wrapper
// write and revoke through it; Update sees each read and write; the
// counts include failures.
func TestWrapper(t *testing.T) {
	s := startStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fm := Wrap(s, Once("/reg/", OpCreate))

	l, err := fm.Grant(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create(ctx, "/reg/a", []byte("x")); !errors.Is(err, ErrInjected) {
		t.Fatalf("leased create: %v", err)
	}
	if _, err := s.Get(ctx, "/reg/a"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("a failed create was performed: %v", err)
	}
	if _, err := l.Create(ctx, "/reg/a", []byte("x")); err != nil {
		t.Fatalf("second create: %v", err)
	}

	revoke := Always("", OpRevoke)
	fm.Set(revoke)
	if err := l.Revoke(ctx); !errors.Is(err, ErrInjected) {
		t.Fatalf("revoke: %v", err)
	}
	if _, err := s.Get(ctx, "/reg/a"); err != nil {
		t.Fatalf("a failed revoke deleted the key: %v", err)
	}
	revoke.Clear()
	if err := fm.RevokeLease(ctx, l.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "/reg/a"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("key after revoke: %v", err)
	}

	// Update retries conflicts, not failures: the injected CAS failure
	// comes back and the counter stays.
	fm.Set(Once("/n", OpCAS))
	if _, err := metastore.NextID(ctx, fm, "/n"); !errors.Is(err, ErrInjected) {
		t.Fatalf("NextID with a failing CAS: %v", err)
	}
	if id, err := metastore.NextID(ctx, fm, "/n"); err != nil || id != 1 {
		t.Fatalf("NextID after: %d, %v", id, err)
	}

	// A transaction fails as a whole.
	fm.Set(Once("/t/", OpTxn))
	ok, _, err := fm.Txn(ctx, []metastore.Cmp{metastore.Absent("/t/a")}, []metastore.Op{metastore.PutOp("/t/a", nil), metastore.PutOp("/t/b", nil)})
	if !errors.Is(err, ErrInjected) || ok {
		t.Fatalf("txn: %v, %v", ok, err)
	}
	if keys, _ := s.ListKeys(ctx, "/t/"); len(keys) != 0 {
		t.Fatalf("a failed transaction wrote %v", keys)
	}

	// An injected failure ends a progress watch, for good.
	fm.Set(Once("/w/", OpWatch))
	w := fm.WatchProgress(ctx, "/w/", 0)
	if _, err := w.Next(ctx); !errors.Is(err, ErrInjected) {
		t.Fatalf("watch: %v", err)
	}
	if _, err := w.Next(ctx); !errors.Is(err, ErrInjected) {
		t.Fatalf("watch, again: %v", err)
	}

	if fm.Calls(OpCreate) != 2 || fm.Calls(OpRevoke) != 2 || fm.Calls(OpCAS) != 2 || fm.Calls(OpGet) != 2 || fm.Calls(OpGrant) != 1 {
		t.Fatalf("calls: create %d revoke %d cas %d get %d grant %d", fm.Calls(OpCreate), fm.Calls(OpRevoke),
			fm.Calls(OpCAS), fm.Calls(OpGet), fm.Calls(OpGrant))
	}
}

// A registration made through the wrapper whose write fails keeps trying
// after a lost lease and registers once the fault clears.
func TestRegistrationRetriesThroughFault(t *testing.T) {
	s := startStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fm := Wrap(s, nil)
	reg, err := metastore.Register(ctx, fm, metastore.RegisterConfig{
		Key: "/reg/a", TTL: 2 * time.Second,
		Value: func() ([]byte, error) { return []byte("a"), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	fail := Always("/reg/", OpCreate)
	fm.Set(fail)
	old := reg.Lease().ID()
	if err := s.RevokeLease(ctx, old); err != nil {
		t.Fatal(err)
	}
	for fail.Fired() < 2 {
		if ctx.Err() != nil {
			t.Fatalf("no re-registration attempts: %v", ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if reg.Registered() || !errors.Is(reg.Err(), ErrInjected) {
		t.Fatalf("while failing: registered %v, err %v", reg.Registered(), reg.Err())
	}
	fail.Clear()
	for !reg.Registered() {
		if ctx.Err() != nil {
			t.Fatal("not registered after the fault cleared")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if kv, err := s.Get(ctx, "/reg/a"); err != nil || kv.Lease == old || kv.Lease != reg.Lease().ID() {
		t.Fatalf("registration %+v, %v", kv, err)
	}
}
