package bookie_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/metastore/metafault"
)

// TestRegistrationWriteFaults runs a bookie on a metadata store whose
// registration writes fail: a start whose registration cannot be written
// fails cleanly, with nothing registered; a running bookie that lost its
// lease keeps trying while the writes fail, reports itself not ready, and
// registers again once the fault clears; a failing refresh of the
// registration leaves it in place.
func TestRegistrationWriteFaults(t *testing.T) {
	e := newIdentityEnv(t)
	ctx := context.Background()
	fm := metafault.Wrap(e.cl.Meta, nil)
	cfg := e.config(t.TempDir())
	cfg.RegistrationTTL = 2 * time.Second
	cfg.ID = "b1"
	key := bookie.RegistrationKey(e.cl.Region, cfg.ID)
	prefix := proto.BookiesPrefix(metastore.RegionPrefix(e.cl.Region))

	// The first registration's write fails: Start fails, nothing is left.
	fm.Set(metafault.Once(prefix, metafault.OpCreate))
	s, err := bookie.New(cfg, bookie.Deps{Meta: fm})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); !errors.Is(err, metafault.ErrInjected) || !strings.Contains(err.Error(), "b1") {
		t.Fatalf("start with a failing registration write: %v", err)
	}
	s.Shutdown(ctx)
	if _, err := e.cl.Meta.Get(ctx, key); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("registration after a failed start: %v", err)
	}

	// Started for real; then the lease is lost while the writes fail.
	fm.Set(nil)
	s, err = bookie.New(cfg, bookie.Deps{Meta: fm})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	kv, err := e.cl.Meta.Get(ctx, key)
	if err != nil || s.Ready() != nil {
		t.Fatalf("registration %+v, %v; ready: %v", kv, err, s.Ready())
	}
	fail := metafault.Always(prefix, metafault.OpCreate)
	fm.Set(fail)
	if err := e.cl.Meta.RevokeLease(ctx, kv.Lease); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 15*time.Second, func() bool { return fail.Fired() >= 2 })
	err = s.Ready()
	if err == nil || !strings.Contains(err.Error(), "not registered") || !errors.Is(err, metafault.ErrInjected) {
		t.Fatalf("ready while the registration cannot be written: %v", err)
	}
	if _, err := e.cl.Meta.Get(ctx, key); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("registration while its writes fail: %v", err)
	}
	fail.Clear()
	testcluster.WaitFor(t, 15*time.Second, func() bool { return s.Ready() == nil })
	again, err := e.cl.Meta.Get(ctx, key)
	if err != nil || again.Lease == kv.Lease || again.Lease == 0 {
		t.Fatalf("registered again as %+v, %v (lost lease %x)", again, err, kv.Lease)
	}

	// Refreshes (free space, read-only state) fail: the registration
	// stays, and the next refresh after the fault publishes the state.
	refresh := metafault.Always(prefix, metafault.OpPut)
	fm.Set(refresh)
	s.SetReadOnly(true)
	testcluster.WaitFor(t, 15*time.Second, func() bool { return refresh.Fired() >= 2 })
	if kv, err := e.cl.Meta.Get(ctx, key); err != nil || kv.Lease != again.Lease || s.Ready() != nil {
		t.Fatalf("registration while refreshes fail: %+v, %v; ready %v", kv, err, s.Ready())
	}
	refresh.Clear()
	testcluster.WaitFor(t, 15*time.Second, func() bool {
		kv, err := e.cl.Meta.Get(ctx, key)
		return err == nil && strings.Contains(string(kv.Value), `"readOnly":true`)
	})
}
