package globalconfig

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore"
)

const waitLong = 30 * time.Second

// newCluster starts a test etcd (no bookies) and, when the test ends and
// every cache is closed, checks that no cache goroutine is left.
func newCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	t.Cleanup(func() { checkNoCacheGoroutines(t) }) // registered first: runs last
	return testcluster.Start(t, testcluster.Options{Bookies: 0})
}

func checkNoCacheGoroutines(t *testing.T) {
	t.Helper()
	var last []byte
	defer func() {
		if t.Failed() {
			t.Logf("goroutines:\n%s", last)
		}
	}()
	testcluster.WaitFor(t, 10*time.Second, func() bool {
		buf := make([]byte, 4<<20)
		buf = buf[:runtime.Stack(buf, true)]
		last = buf
		return !bytes.Contains(buf, []byte("globalconfig.(*Cache)"))
	})
}

func fastConfig() Config {
	return Config{
		RequestTimeout:   500 * time.Millisecond,
		ProgressInterval: 50 * time.Millisecond,
		StaleAfter:       300 * time.Millisecond,
		MaxBackoff:       200 * time.Millisecond,
		PersistDelay:     20 * time.Millisecond,
		SubscriberBuffer: 16,
	}
}

func startCache(t *testing.T, meta *metastore.Store, cfg Config) *Cache {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	c, err := Start(ctx, meta, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func put(t *testing.T, m *metastore.Store, key, value string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	rev, err := m.Put(ctx, key, []byte(value))
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func del(t *testing.T, m *metastore.Store, key string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	_, rev, err := m.DeleteExisting(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func waitRev(t *testing.T, c *Cache, rev int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := c.WaitRev(ctx, rev); err != nil {
		t.Fatal(err)
	}
}

// wantKeys checks List(DefaultPrefix) is exactly want (key -> value).
func wantKeys(t *testing.T, c *Cache, want map[string]string) {
	t.Helper()
	got := c.List(DefaultPrefix)
	for i, kv := range got {
		if i > 0 && got[i-1].Key >= kv.Key {
			t.Errorf("List not sorted: %q before %q", got[i-1].Key, kv.Key)
		}
		if w, ok := want[kv.Key]; !ok || w != string(kv.Value) {
			t.Errorf("cache has %s=%q, want %q (present %v)", kv.Key, kv.Value, w, ok)
		}
		if v, rev, ok := c.Get(kv.Key); !ok || string(v) != string(kv.Value) || rev != kv.Rev {
			t.Errorf("Get(%s) = %q %d %v, List says %q %d", kv.Key, v, rev, ok, kv.Value, kv.Rev)
		}
	}
	if len(got) != len(want) {
		t.Errorf("cache has %d keys, want %d: %+v", len(got), len(want), got)
	}
}

const (
	pA = DefaultPrefix + "tenants/a"
	pB = DefaultPrefix + "tenants/b"
	pC = DefaultPrefix + "clusters/c"
	pN = DefaultPrefix + "namespaces/a/ns"
)

func TestSnapshotThenWatchAppliesPutsAndDeletes(t *testing.T) {
	tc := newCluster(t)
	put(t, tc.Meta, pA, "a1")
	put(t, tc.Meta, pB, "b1")
	put(t, tc.Meta, "/isobar/test/brokers/x", "outside")
	rev0 := put(t, tc.Meta, "/isobar-globalish", "outside too")

	c := startCache(t, tc.Meta, fastConfig())
	if c.Rev() < rev0 {
		t.Fatalf("Rev %d after Start, store was at %d", c.Rev(), rev0)
	}
	if !c.Synced() {
		t.Fatal("not Synced right after Start")
	}
	wantKeys(t, c, map[string]string{pA: "a1", pB: "b1"})

	put(t, tc.Meta, pC, "c1")
	del(t, tc.Meta, pA)
	rev := put(t, tc.Meta, pB, "b2")
	waitRev(t, c, rev)
	wantKeys(t, c, map[string]string{pB: "b2", pC: "c1"})
	if _, _, ok := c.Get("/isobar/test/brokers/x"); ok {
		t.Error("key outside the prefix is cached")
	}
	if got := c.List(DefaultPrefix + "tenants/"); len(got) != 1 || got[0].Key != pB {
		t.Errorf("List(tenants/) = %+v", got)
	}
	if st := c.Stats(); st.Events != 3 || st.WatchRestarts != 0 || st.Resyncs != 0 {
		t.Errorf("stats %+v", st)
	}
	// A transaction's changes share a revision and are applied together.
	ctx := context.Background()
	_, trev, err := tc.Meta.Txn(ctx, nil, []metastore.Op{
		metastore.PutOp(pA, []byte("a2")), metastore.PutOp(pN, []byte("n1")), metastore.DeleteOp(pC)})
	if err != nil {
		t.Fatal(err)
	}
	waitRev(t, c, trev)
	wantKeys(t, c, map[string]string{pA: "a2", pB: "b2", pN: "n1"})
}

func TestWaitRevReadsOwnWrite(t *testing.T) {
	tc := newCluster(t)
	c := startCache(t, tc.Meta, fastConfig())
	ctx := context.Background()
	rev, err := tc.Connect().Create(ctx, pA, []byte("mine"))
	if err != nil {
		t.Fatal(err)
	}
	waitRev(t, c, rev)
	if v, r, ok := c.Get(pA); !ok || string(v) != "mine" || r != rev {
		t.Fatalf("Get after WaitRev = %q %d %v, want mine %d", v, r, ok, rev)
	}
	// A revision made by a write outside the prefix is reached through a
	// progress notification.
	out := put(t, tc.Meta, "/elsewhere", "x")
	waitRev(t, c, out)
	if c.Rev() < out {
		t.Fatalf("Rev %d < %d", c.Rev(), out)
	}
	// A revision nobody wrote yet: the caller's ctx bounds the wait.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := c.WaitRev(short, out+1000); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRev(future) = %v", err)
	}
	c.Close()
	if err := c.WaitRev(ctx, out+1000); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitRev after Close = %v", err)
	}
	if v, _, ok := c.Get(pA); !ok || string(v) != "mine" {
		t.Fatal("reads stop answering after Close")
	}
}

func TestServesFromCacheWhileStoreDownThenConverges(t *testing.T) {
	tc := newCluster(t)
	c := startCache(t, tc.Meta, fastConfig())
	waitRev(t, c, put(t, tc.Meta, pA, "a1"))
	testcluster.WaitFor(t, waitLong, c.Synced)

	tc.StopEtcd()
	testcluster.WaitFor(t, waitLong, func() bool { return !c.Synced() })
	if v, _, ok := c.Get(pA); !ok || string(v) != "a1" {
		t.Fatalf("Get while store down = %q %v", v, ok)
	}
	wantKeys(t, c, map[string]string{pA: "a1"})
	age := c.Age()
	testcluster.WaitFor(t, waitLong, func() bool { return c.Age() > age+200*time.Millisecond })
	if c.Synced() {
		t.Fatal("Synced while the store is down")
	}

	tc.StartEtcd()
	put(t, tc.Meta, pB, "b1")
	rev := del(t, tc.Meta, pA)
	waitRev(t, c, rev)
	wantKeys(t, c, map[string]string{pB: "b1"})
	testcluster.WaitFor(t, waitLong, c.Synced)
	if c.Age() > time.Second {
		t.Fatalf("Age %v after converging", c.Age())
	}
}

// A region cut off from the global store while it changes and compacts the
// revisions the watch needs: the watch is cancelled, the cache re-lists and
// loses nothing.
func TestCompactionWhileCutOffResyncs(t *testing.T) {
	tc := newCluster(t)
	p := startProxy(t, strings.TrimPrefix(tc.Endpoints()[0], "http://"))
	ctx := context.Background()
	meta, err := metastore.Connect(ctx, metastore.Config{Endpoints: []string{p.endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { meta.Close() })
	c := startCache(t, meta, fastConfig())
	put(t, tc.Meta, pA, "keep1")
	waitRev(t, c, put(t, tc.Meta, pB, "gone"))
	events, cancel := c.Subscribe(DefaultPrefix)
	defer cancel()

	p.Cut()
	put(t, tc.Meta, pC, "new")
	del(t, tc.Meta, pB)
	rev := put(t, tc.Meta, pA, "keep2")
	if err := tc.Meta.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	p.Heal()

	testcluster.WaitFor(t, waitLong, func() bool { return c.Stats().Resyncs >= 1 })
	waitRev(t, c, rev)
	wantKeys(t, c, map[string]string{pA: "keep2", pC: "new"})
	st := c.Stats()
	t.Logf("stats after resync: %+v", st)
	if st.WatchRestarts < 1 || st.LastError == nil || !strings.Contains(st.LastError.Error(), "compacted") {
		t.Fatalf("stats after compaction %+v", st)
	}
	// Subscribers get the differences as ordinary events.
	got := map[string]Event{}
	timeout := time.After(waitLong)
	for len(got) < 3 {
		select {
		case ev := <-events:
			if ev.Resync {
				t.Fatalf("unexpected Resync %+v", ev)
			}
			got[ev.Key] = ev
		case <-timeout:
			t.Fatalf("events after resync: %+v", got)
		}
	}
	if ev := got[pB]; !ev.Deleted {
		t.Errorf("event for %s: %+v", pB, ev)
	}
	if ev := got[pA]; string(ev.Value) != "keep2" {
		t.Errorf("event for %s: %+v", pA, ev)
	}
	if ev := got[pC]; string(ev.Value) != "new" {
		t.Errorf("event for %s: %+v", pC, ev)
	}
	// And the new watch follows the store again.
	waitRev(t, c, put(t, tc.Meta, pN, "after"))
	wantKeys(t, c, map[string]string{pA: "keep2", pC: "new", pN: "after"})
}

func TestPersistedCopyServesWhenStoreDownAtStart(t *testing.T) {
	tc := newCluster(t)
	dir := filepath.Join(t.TempDir(), "gc")
	cfg := fastConfig()
	cfg.Persist = dir
	c1 := startCache(t, tc.Meta, cfg)
	put(t, tc.Meta, pA, "a1")
	rev := put(t, tc.Meta, pB, "b1")
	waitRev(t, c1, rev)
	c1.Close()
	if _, err := os.Stat(filepath.Join(dir, SnapshotFile)); err != nil {
		t.Fatal(err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(tmp) != 0 {
		t.Fatalf("temp files left: %v", tmp)
	}

	tc.StopEtcd()
	c2 := startCache(t, tc.Meta, cfg)
	wantKeys(t, c2, map[string]string{pA: "a1", pB: "b1"})
	if c2.Synced() {
		t.Fatal("Synced while serving the persisted copy with the store down")
	}
	if c2.Rev() != c1.Rev() {
		t.Fatalf("Rev %d from persisted copy, want %d", c2.Rev(), c1.Rev())
	}
	if c2.Stats().LastError == nil {
		t.Fatal("no LastError while the store is down")
	}

	tc.StartEtcd()
	waitRev(t, c2, put(t, tc.Meta, pC, "c1"))
	wantKeys(t, c2, map[string]string{pA: "a1", pB: "b1", pC: "c1"})
	testcluster.WaitFor(t, waitLong, c2.Synced)
	// The persisted copy follows.
	testcluster.WaitFor(t, waitLong, func() bool {
		s, err := loadSnapshot(dir, DefaultPrefix)
		return err == nil && len(s.KVs) == 3
	})
}

func TestStartWithoutPersistFailsWhenStoreDown(t *testing.T) {
	tc := newCluster(t)
	tc.StopEtcd()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := Start(ctx, tc.Meta, fastConfig())
	if err == nil {
		c.Close()
		t.Fatal("Start succeeded with the store down and nothing persisted")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v does not wrap the ctx error", err)
	}
	// An unusable persisted copy is no copy.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, SnapshotFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.Persist = dir
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if c, err := Start(ctx2, tc.Meta, cfg); err == nil {
		c.Close()
		t.Fatal("Start succeeded from a corrupt persisted copy")
	}
}

func TestSubscribe(t *testing.T) {
	tc := newCluster(t)
	c := startCache(t, tc.Meta, fastConfig())
	events, cancel := c.Subscribe(DefaultPrefix + "tenants/")
	put(t, tc.Meta, pA, "a1")
	put(t, tc.Meta, pC, "not for this subscriber")
	rev := del(t, tc.Meta, pA)
	waitRev(t, c, rev)
	want := []Event{{Key: pA, Value: []byte("a1")}, {Key: pA, Deleted: true}}
	for i, w := range want {
		ev := <-events
		if ev.Key != w.Key || string(ev.Value) != string(w.Value) || ev.Deleted != w.Deleted || ev.Rev == 0 {
			t.Fatalf("event %d = %+v, want %+v", i, ev, w)
		}
	}
	if len(events) != 0 {
		t.Fatalf("%d unexpected events", len(events))
	}
	cancel()
	if _, ok := <-events; ok {
		t.Fatal("channel open after cancel")
	}
	cancel() // twice is fine
}

func TestSubscribeOverflowDeliversOneResync(t *testing.T) {
	tc := newCluster(t)
	cfg := fastConfig()
	cfg.SubscriberBuffer = 4
	c := startCache(t, tc.Meta, cfg)
	events, cancel := c.Subscribe(DefaultPrefix)
	defer cancel()
	var rev int64
	for i := range 10 {
		rev = put(t, tc.Meta, DefaultPrefix+"tenants/t"+string(rune('0'+i)), "v")
	}
	waitRev(t, c, rev) // the watcher went on although nobody read
	if len(events) != 4 {
		t.Fatalf("%d events queued, want 4", len(events))
	}
	for i := range 3 {
		ev := <-events
		if ev.Resync || ev.Key != DefaultPrefix+"tenants/t"+string(rune('0'+i)) {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
	if ev := <-events; !ev.Resync {
		t.Fatalf("last event %+v, want Resync", ev)
	}
	if n := c.Stats().Overflows; n != 1 {
		t.Fatalf("Overflows = %d, want 1", n)
	}
	// After a Resync the subscriber re-reads the cache: nothing is missing.
	if got := c.List(DefaultPrefix + "tenants/"); len(got) != 10 {
		t.Fatalf("List after Resync: %d keys", len(got))
	}
	// Once it has room again it gets events as before.
	waitRev(t, c, put(t, tc.Meta, pA, "again"))
	if ev := <-events; ev.Key != pA || ev.Resync {
		t.Fatalf("event after catching up %+v", ev)
	}
	c.Close()
	if _, ok := <-events; ok {
		t.Fatal("channel open after Close")
	}
	late, _ := c.Subscribe(DefaultPrefix)
	if _, ok := <-late; ok {
		t.Fatal("Subscribe after Close returned an open channel")
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	tc := newCluster(t)
	cfg := fastConfig()
	cfg.Persist = t.TempDir()
	c := startCache(t, tc.Meta, cfg)
	_, cancel := c.Subscribe(DefaultPrefix)
	defer cancel()
	waitRev(t, c, put(t, tc.Meta, pA, "a"))
	c.Close()
	c.Close()
	checkNoCacheGoroutines(t)
}

func TestConfigValidate(t *testing.T) {
	err := Config{Prefix: "isobar", RequestTimeout: -1, SubscriberBuffer: 1}.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"globalconfig.prefix", "globalconfig.requestTimeout", "globalconfig.subscriberBuffer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := Start(context.Background(), nil, Config{}); err == nil {
		t.Fatal("Start without a store succeeded")
	}
}

func TestSnapshotCodec(t *testing.T) {
	s := fileSnapshot{Prefix: DefaultPrefix, ClusterID: 7, Revision: 9, SyncedAt: time.Unix(100, 0).UTC(),
		KVs: []fileKV{{Key: pA, Value: []byte{0, 1, 0xff}, Rev: 3}, {Key: pB, Value: []byte("{}"), Rev: 9}}}
	b, err := encodeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeSnapshot(b, DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != 9 || got.ClusterID != 7 || len(got.KVs) != 2 || !bytes.Equal(got.KVs[0].Value, []byte{0, 1, 0xff}) || !got.SyncedAt.Equal(s.SyncedAt) {
		t.Fatalf("round trip %+v", got)
	}
	for name, in := range map[string]string{
		"not json":       `{`,
		"version":        `{"version":2,"prefix":"/isobar-global/"}`,
		"prefix":         `{"version":1,"prefix":"/other/"}`,
		"negative rev":   `{"version":1,"prefix":"/isobar-global/","revision":-1}`,
		"outside prefix": `{"version":1,"prefix":"/isobar-global/","revision":5,"kvs":[{"key":"/x","rev":1}]}`,
		"key after rev":  `{"version":1,"prefix":"/isobar-global/","revision":5,"kvs":[{"key":"/isobar-global/x","rev":6}]}`,
	} {
		if _, err := decodeSnapshot([]byte(in), DefaultPrefix); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
