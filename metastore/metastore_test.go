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
		if id, err := s.NextID(ctx, "/ids"); err != nil || id != uint64(i+1) {
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
	if id, err := s2.NextID(ctx, "/ids"); err != nil || id != 4 {
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
				id, err := s.NextID(ctx, "/counter")
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
	if ev := <-ch; ev.Key != "/w/a" || ev.Reset {
		t.Fatalf("first event %+v", ev)
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
