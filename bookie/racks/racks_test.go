package racks_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/isobar-mq/isobar/bookie/racks"
	"github.com/isobar-mq/isobar/internal/testcluster"
)

// TestBookies: every bookie with a cookie is listed, running or not.
func TestBookies(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{Bookies: 2})
	s := racks.NewStore(cl.Connect(), cl.Region)
	ctx := context.Background()
	want := []string{cl.Bookie(0).ID(), cl.Bookie(1).ID()}
	slices.Sort(want)
	cl.Bookie(1).Stop()
	got, err := s.Bookies(ctx)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("bookies %v %v, want %v (a stopped bookie too)", got, err, want)
	}
}

// TestStore: a bookie is in one group; removing the last of a group
// drops it; refusals change nothing; a malformed record is replaced by
// the next change.
func TestStore(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{})
	meta := cl.Connect()
	s := racks.NewStore(meta, cl.Region)
	ctx := context.Background()
	if err := s.Set(ctx, "g1", "b1", racks.Info{Rack: "/r1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "g2", "b1", racks.Info{Rack: "/r2"}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Read(ctx)
	if g, info, ok := c.Lookup("b1"); err != nil || !ok || g != "g2" || info.Rack != "/r2" || len(c) != 1 {
		t.Fatalf("after moving b1: %v %v", c, err)
	}
	for _, bad := range []func() error{
		func() error { return s.Set(ctx, "", "b2", racks.Info{}) },
		func() error { return s.Set(ctx, "g", "b 2", racks.Info{}) },
		func() error { return s.Set(ctx, "g", "b2", racks.Info{Rack: "/a/b/"}) },
		func() error { return s.Set(ctx, "g", "b2", racks.Info{Hostname: "h\n"}) },
	} {
		if err := bad(); !errors.Is(err, racks.ErrInvalid) {
			t.Fatalf("err %v, want ErrInvalid", err)
		}
	}
	if err := s.Remove(ctx, "b2"); !errors.Is(err, racks.ErrNotFound) {
		t.Fatalf("remove of a bookie in no group: %v", err)
	}
	if after, _ := s.Read(ctx); len(after) != 1 || len(after["g2"]) != 1 {
		t.Fatalf("refusals changed the record: %v", after)
	}
	if err := s.Remove(ctx, "b1"); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.Read(ctx); len(c) != 0 {
		t.Fatalf("after removing the last bookie: %v", c)
	}
	if _, err := meta.Put(ctx, racks.Key(cl.Region), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(ctx); err == nil {
		t.Fatal("a malformed record read without error")
	}
	if err := s.Set(ctx, "g1", "b3", racks.Info{}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Read(ctx); err != nil || len(c["g1"]) != 1 {
		t.Fatalf("after repairing: %v %v", c, err)
	}
}
