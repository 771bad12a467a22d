package mledger

import (
	"context"
	"sync/atomic"
	"testing"
)

// TestDormantUntilWritten: a managed ledger opened, given cursors that
// acknowledge and are deleted, and asked for its backlog, ledgers and
// cursors never makes its live part (the add queue, driver, writer,
// readers; Close makes what it needs of it, nothing queued or written);
// its first add makes it, and an owner that
// opens it again after the writes finds the entries (read through a
// live part of its own). Deps.Changed is called once per ClearChanged.
func TestDormantUntilWritten(t *testing.T) {
	w := newMemWorld(t)
	env := w.env(100)
	var changed atomic.Int32
	env.Changed = func(*ManagedLedger) { changed.Add(1) }
	ctx := context.Background()
	const name = "t/ns/persistent/dormant"
	m := open(t, env, name)
	c, err := m.OpenCursor(ctx, "s", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.OpenCursor(ctx, "gone", Latest); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteCursor(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	_, _, _ = c.Backlog(), m.Ledgers(), m.Cursors()
	if m.lv.Load() != nil {
		t.Fatal("an idle managed ledger made its live part")
	}
	if changed.Load() != 1 {
		t.Fatalf("Changed called %d times before ClearChanged, want 1", changed.Load())
	}
	m.ClearChanged()
	ps := appendN(t, m, 0, 3)
	if m.lv.Load() == nil {
		t.Fatal("no live part after an add")
	}
	if changed.Load() != 2 {
		t.Fatalf("Changed called %d times, want 2", changed.Load())
	}
	if err := c.AckCumulative(ctx, ps[2]); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}

	m2 := open(t, w.env(100), name)
	if m2.lv.Load() != nil {
		t.Fatal("opening made the live part")
	}
	if err := m2.Close(ctx); err != nil { // dormant: nothing of its own to close
		t.Fatal(err)
	}
	if lv := m2.lv.Load(); lv.queue != nil || lv.w != nil || lv.stop != nil {
		t.Fatal("closing a dormant managed ledger made a queue, writer or driver")
	}
	m3 := open(t, w.env(100), name)
	es, _, err := m3.Read(ctx, ps[0], 10)
	if err != nil || len(es) != 3 {
		t.Fatalf("read %d entries (%v), want 3", len(es), err)
	}
	if m3.lv.Load() == nil {
		t.Fatal("no live part after a read")
	}
}
