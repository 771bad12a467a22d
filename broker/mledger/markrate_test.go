package mledger

import (
	"context"
	"testing"
	"time"
)

// storedMarkDelete is the cursor's mark-delete position as the metadata
// store holds it now.
func storedMarkDelete(t *testing.T, m *ManagedLedger, cursor string) Position {
	t.Helper()
	kv, err := m.deps.Meta.Get(context.Background(), m.key())
	if err != nil {
		t.Fatal(err)
	}
	tm, err := decodeMeta(kv.Value)
	if err != nil {
		t.Fatal(err)
	}
	i, ok := tm.cursor(cursor)
	if !ok {
		t.Fatalf("no cursor %s in the store", cursor)
	}
	md := tm.Cursors[i].MarkDelete
	return Position{Ledger: md.Ledger, Entry: md.Entry}
}

// With a mark-delete rate, acknowledgements between two allowed writes
// stay in memory and reach the store at the next allowed moment; closing
// the managed ledger writes what is still deferred; rate 0 writes every
// acknowledgement before it returns.
func TestMarkDeleteRate(t *testing.T) {
	w := newMemWorld(t)
	const name = "t/ns/persistent/markrate"
	cfg := w.env(100)
	m := open(t, cfg, name)
	ps := appendN(t, m, 0, 20)
	ctx := context.Background()
	c, err := m.OpenCursor(ctx, "s", Earliest)
	if err != nil {
		t.Fatal(err)
	}

	// Rate 0: every ack is in the store when Ack returns.
	for _, p := range ps[:3] {
		if err := c.Ack(ctx, p); err != nil {
			t.Fatal(err)
		}
		if got := storedMarkDelete(t, m, "s"); got != p {
			t.Fatalf("rate 0: stored %v after acking %v", got, p)
		}
	}

	// Half a write a second: the first ack after the last write waits
	// for its turn, the later ones join it.
	m.SetMarkDeleteRate(0.5)
	for _, p := range ps[3:10] {
		if err := c.Ack(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.MarkDelete(); got != ps[9] {
		t.Fatalf("in memory: %v, want %v", got, ps[9])
	}
	if got := storedMarkDelete(t, m, "s"); got != ps[2] {
		t.Fatalf("stored right after the throttled acks: %v, want the last written %v", got, ps[2])
	}
	deadline := time.Now().Add(10 * time.Second)
	for storedMarkDelete(t, m, "s") != ps[9] {
		if time.Now().After(deadline) {
			t.Fatalf("the deferred write never came: stored %v", storedMarkDelete(t, m, "s"))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Acks deferred at close are written by Close.
	for _, p := range ps[10:15] {
		if err := c.Ack(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if got := storedMarkDelete(t, m, "s"); got == ps[14] {
		t.Fatalf("the acks right after a write were not deferred")
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	m = open(t, cfg, name)
	defer m.Close(ctx)
	c, err = m.OpenCursor(ctx, "s", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.MarkDelete(); got != ps[14] {
		t.Fatalf("after close and reopen: %v, want %v", got, ps[14])
	}
}
