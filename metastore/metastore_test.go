package metastore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func startEtcd(t *testing.T, dir, addr string) *Embedded {
	t.Helper()
	e, err := StartEmbedded(context.Background(), EmbedConfig{Dir: dir, ClientAddr: addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func connect(t *testing.T, e *Embedded) *Store {
	t.Helper()
	s, err := Connect(context.Background(), Config{Endpoints: e.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConfigValidate(t *testing.T) {
	err := Config{Endpoints: []string{" "}, DialTimeout: -1}.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"metastore.endpoints[0]", "metastore.dialTimeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if err := (Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "metastore.endpoints") {
		t.Errorf("empty endpoints: %v", err)
	}
}

func TestStoreCASAndRestart(t *testing.T) {
	dir := t.TempDir()
	e := startEtcd(t, dir, "")
	addr := e.ClientAddr()
	s := connect(t, e)
	ctx := context.Background()

	if _, err := s.Get(ctx, "/k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get absent: %v", err)
	}
	rev, err := s.Create(ctx, "/k", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/k", []byte("v2")); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	rev2, err := s.CAS(ctx, "/k", []byte("v2"), rev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CAS(ctx, "/k", []byte("stale"), rev); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale cas: %v", err)
	}
	for i := 0; i < 3; i++ {
		if id, err := NextID(ctx, s, "/ids"); err != nil || id != uint64(i+1) {
			t.Fatalf("NextID = %d, %v", id, err)
		}
	}

	// Restart the embedded server on the same directory and port: data stays.
	e.Close()
	e = startEtcd(t, dir, addr)
	defer e.Close()
	s2 := connect(t, e)
	kv, err := s2.Get(ctx, "/k")
	if err != nil || string(kv.Value) != "v2" || kv.Rev != rev2 {
		t.Fatalf("after restart: %+v %v", kv, err)
	}
	if id, err := NextID(ctx, s2, "/ids"); err != nil || id != 4 {
		t.Fatalf("NextID after restart = %d, %v", id, err)
	}
	// The first client reconnects by itself.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := s.Get(cctx, "/k"); err != nil {
		t.Fatalf("old client after restart: %v", err)
	}
}

// Concurrent read-modify-write updates never clobber each other: every
// increment is kept.
func TestConcurrentUpdatesNeverClobber(t *testing.T) {
	e := startEtcd(t, t.TempDir(), "")
	defer e.Close()
	ctx := context.Background()
	const workers, each = 8, 25
	var wg sync.WaitGroup
	ids := make(chan uint64, workers*each)
	for w := 0; w < workers; w++ {
		s := connect(t, e)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id, err := NextID(ctx, s, "/counter")
				if err != nil {
					t.Error(err)
					return
				}
				ids <- id
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[uint64]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("id %d handed out twice", id)
		}
		seen[id] = true
	}
	if len(seen) != workers*each {
		t.Fatalf("got %d ids, want %d", len(seen), workers*each)
	}
	kv, err := connect(t, e).Get(ctx, "/counter")
	if err != nil || string(kv.Value) != fmt.Sprint(workers*each) {
		t.Fatalf("counter = %s, %v", kv.Value, err)
	}
}

func TestLeaseAndWatch(t *testing.T) {
	e := startEtcd(t, t.TempDir(), "")
	defer e.Close()
	s := connect(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := s.Watch(ctx, "/reg/", 0)

	l, err := s.Grant(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create(ctx, "/reg/a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create(ctx, "/reg/a", []byte("y")); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	ev := <-events
	if ev.Key != "/reg/a" || string(ev.Value) != "x" || ev.Deleted {
		t.Fatalf("event %+v", ev)
	}
	if err := l.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	ev = <-events
	if ev.Key != "/reg/a" || !ev.Deleted {
		t.Fatalf("event %+v", ev)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("lease Done not closed after revoke")
	}
	if _, err := s.Get(ctx, "/reg/a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("leased key after revoke: %v", err)
	}
}

func TestEmbeddedBadConfig(t *testing.T) {
	if _, err := StartEmbedded(context.Background(), EmbedConfig{}, nil); err == nil {
		t.Fatal("want error for missing dir")
	}
	if _, err := StartEmbedded(context.Background(), EmbedConfig{Dir: t.TempDir(), ClientAddr: "nonsense"}, nil); err == nil {
		t.Fatal("want error for bad address")
	}
}

// A watch survives an etcd restart without losing a change or resetting:
// it resumes after the last event it delivered.
func TestWatchResumesAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	e := startEtcd(t, dir, "")
	addr := e.ClientAddr()
	s := connect(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.Watch(ctx, "/w/", 0)
	if _, err := s.Put(ctx, "/w/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Key != "/w/a" || ev.Reset {
			t.Fatalf("first event %+v", ev)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event for a put made after Watch returned")
	}
	e.Close()
	e = startEtcd(t, dir, addr)
	defer e.Close()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	for {
		if _, err := s.Put(wctx, "/w/b", []byte("2")); err == nil {
			break
		} else if wctx.Err() != nil {
			t.Fatal(err)
		}
	}
	select {
	case ev := <-ch:
		if ev.Reset || ev.Key != "/w/b" {
			t.Fatalf("after restart: %+v", ev)
		}
	case <-wctx.Done():
		t.Fatal("no event after the restart")
	}
}

// The reads and writes beyond get/put: leases of keys, keys-only and
// counted listings, listings with their revision, deletes that tell,
// transactions and revoking a lease by id.
func TestReadsTxnAndRevoke(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	l, err := s.Grant(ctx, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create(ctx, "/p/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	rev, err := s.Put(ctx, "/p/b", []byte("2"))
	if err != nil {
		t.Fatal(err)
	}
	if kv, err := s.Get(ctx, "/p/a"); err != nil || kv.Lease != l.ID() {
		t.Fatalf("leased key %+v, %v", kv, err)
	}
	if kv, err := s.Get(ctx, "/p/b"); err != nil || kv.Lease != 0 {
		t.Fatalf("plain key %+v, %v", kv, err)
	}
	if keys, err := s.ListKeys(ctx, "/p/"); err != nil || strings.Join(keys, ",") != "/p/a,/p/b" {
		t.Fatalf("ListKeys %v, %v", keys, err)
	}
	if n, r, err := s.Count(ctx, "/p/"); err != nil || n != 2 || r != rev {
		t.Fatalf("Count %d at %d, %v; want 2 at %d", n, r, err, rev)
	}
	if size, inUse, err := s.DBSize(ctx); err != nil || size <= 0 || inUse <= 0 || inUse > size {
		t.Fatalf("DBSize %d, in use %d, %v", size, inUse, err)
	}
	lst, err := s.ListRev(ctx, "/p/")
	if err != nil || len(lst.KVs) != 2 || lst.Rev != rev || lst.ClusterID == 0 || lst.KVs[0].Lease != l.ID() {
		t.Fatalf("ListRev %+v, %v", lst, err)
	}

	// A transaction applies all of its writes or none.
	ok, trev, err := s.Txn(ctx, []Cmp{AtRev("/p/b", rev), Absent("/p/c"), NoneUnder("/q/"), Present("/p/a")},
		[]Op{PutOp("/p/c", []byte("3")), DeleteOp("/p/b")})
	if err != nil || !ok || trev != rev+1 {
		t.Fatalf("txn: %v at %d, %v", ok, trev, err)
	}
	ok, _, err = s.Txn(ctx, []Cmp{Absent("/p/c")}, []Op{PutOp("/p/d", []byte("4"))})
	if err != nil || ok {
		t.Fatalf("txn with a failing condition: %v, %v", ok, err)
	}
	if keys, _ := s.ListKeys(ctx, "/p/"); strings.Join(keys, ",") != "/p/a,/p/c" {
		t.Fatalf("after the transactions: %v", keys)
	}
	if _, _, err := s.Txn(ctx, []Cmp{{Kind: CmpAtRev, Key: "/p/", Prefix: true}}, nil); err == nil {
		t.Fatal("a revision condition over a prefix was accepted")
	}
	// AllChangedAfter: every key under the prefix changed after the
	// revision, and there is one.
	kvs, err := s.List(ctx, "/p/")
	if err != nil || len(kvs) != 2 {
		t.Fatalf("List: %v, %v", kvs, err)
	}
	older := min(kvs[0].Rev, kvs[1].Rev)
	for _, c := range []struct {
		cmp  Cmp
		want bool
	}{
		{AllChangedAfter("/p/", older-1), true},
		{AllChangedAfter("/p/", older), false}, // one key changed at it
		{AllChangedAfter("/q/", 0), false},     // no key
	} {
		ok, _, err := s.Txn(ctx, []Cmp{c.cmp}, nil)
		if err != nil || ok != c.want {
			t.Fatalf("%s: %v, %v; want %v", c.cmp, ok, err, c.want)
		}
	}

	if existed, _, err := s.DeleteExisting(ctx, "/p/c"); err != nil || !existed {
		t.Fatalf("DeleteExisting: %v, %v", existed, err)
	}
	if existed, _, err := s.DeleteExisting(ctx, "/p/c"); err != nil || existed {
		t.Fatalf("DeleteExisting of an absent key: %v, %v", existed, err)
	}

	// Revoking a lease by id deletes its keys; again is not an error; a
	// write under it fails with ErrNoLease.
	if err := s.RevokeLease(ctx, l.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "/p/a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("leased key after revoke: %v", err)
	}
	if err := s.RevokeLease(ctx, l.ID()); err != nil {
		t.Fatalf("second revoke: %v", err)
	}
	if _, err := l.Put(ctx, "/p/a", []byte("x")); !errors.Is(err, ErrNoLease) {
		t.Fatalf("put under a revoked lease: %v", err)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second): // the next keep-alive (every TTL/3) learns it
		t.Fatal("lease Done not closed after it was revoked")
	}
}

// A ProgressWatch delivers a transaction's changes in one batch, answers
// progress requests, and ends with ErrCompacted when it needs compacted
// revisions.
func TestProgressWatch(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rev, err := s.Put(ctx, "/w/a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	w := s.WatchProgress(ctx, "/w/", rev+1)
	_, trev, err := s.Txn(ctx, nil, []Op{PutOp("/w/b", []byte("2")), DeleteOp("/w/a"), PutOp("/x", nil)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.Next(ctx)
	if err != nil || b.Progress || len(b.Events) != 2 || b.Events[0].Key != "/w/b" || !b.Events[1].Deleted || b.Events[1].Rev != trev {
		t.Fatalf("batch %+v, %v", b, err)
	}
	orev, err := s.Put(ctx, "/elsewhere", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.RequestProgress(ctx); err != nil {
		t.Fatal(err)
	}
	b, err = w.Next(ctx)
	if err != nil || !b.Progress || b.Rev < orev {
		t.Fatalf("progress %+v, %v; want a notification at %d or later", b, err, orev)
	}

	if err := s.Compact(ctx, orev); err != nil {
		t.Fatal(err)
	}
	old := s.WatchProgress(ctx, "/w/", rev)
	if _, err := old.Next(ctx); !errors.Is(err, ErrCompacted) || !strings.Contains(err.Error(), "compacted") {
		t.Fatalf("watch of compacted revisions: %v", err)
	}
	if _, err := old.Next(ctx); !errors.Is(err, ErrCompacted) {
		t.Fatalf("the end is not sticky: %v", err)
	}
}
