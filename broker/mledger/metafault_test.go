package mledger

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/metastore/metafault"
)

// ledgerIDs lists the ledgers whose metadata the store holds.
func ledgerIDs(t *testing.T, meta metastore.Meta, region string) []string {
	t.Helper()
	keys, err := meta.ListKeys(context.Background(), metastore.RegionPrefix(region)+"ledgers/")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestMetadataWriteFaults fails the managed ledger's metadata CAS (through
// the metafault seam) at its first ledger and at a rollover. Each time the
// add is refused with the store's error (the managed ledger is not
// fenced: nobody else wrote), the ledger created for it is deleted rather
// than orphaned, and once the fault clears the next add succeeds and
// every acknowledged entry reads back, also after a reopen.
func TestMetadataWriteFaults(t *testing.T) {
	cl := startCluster(t)
	lc := newLedgerClient(t, cl)
	env := testConfig(cl, lc, 5)
	fm := metafault.Wrap(env.Meta, nil)
	env.Meta = fm
	const name = "tenant/ns/persistent/faults"
	key := TopicKey(cl.Region, name)
	ctx := context.Background()
	m := open(t, env, name)

	// The first ledger cannot be recorded.
	fm.Set(metafault.Once(key, metafault.OpCAS))
	if _, err := m.AddEntry(ctx, payload(0)); !errors.Is(err, metafault.ErrInjected) || errors.Is(err, ErrFenced) {
		t.Fatalf("add with a failing metadata write: %v", err)
	}
	if ls := m.Ledgers(); len(ls) != 0 {
		t.Fatalf("ledger list after the failed add: %+v", ls)
	}
	if ids := ledgerIDs(t, cl.Meta, cl.Region); len(ids) != 0 {
		t.Fatalf("orphan ledgers after the failed add: %v", ids)
	}
	want := appendN(t, m, 1, 5) // ledger 1, full after these five

	// The rollover to the next ledger cannot be recorded: the full ledger
	// is closed, the new one discarded, and the add refused.
	fm.Set(metafault.Once(key, metafault.OpCAS))
	if _, err := m.AddEntry(ctx, payload(6)); !errors.Is(err, metafault.ErrInjected) || errors.Is(err, ErrFenced) {
		t.Fatalf("add across a failing rollover: %v", err)
	}
	want = append(want, appendN(t, m, 7, 3)...)
	ls := m.Ledgers()
	if len(ls) != 2 || ls[0].State != LedgerClosed || ls[0].Entries != 5 || ls[1].State != LedgerOpen || ls[1].Entries != 3 {
		t.Fatalf("ledger list after the failed rollover: %+v", ls)
	}
	if ids := ledgerIDs(t, cl.Meta, cl.Region); len(ids) != 2 {
		t.Fatalf("ledgers in the store %v; want the two listed", ids)
	}
	check := func(m *ManagedLedger) {
		t.Helper()
		got := readAll(t, m, first(m), 64)
		if len(got) != len(want) {
			t.Fatalf("read %d entries, want %d", len(got), len(want))
		}
		for i, e := range got {
			wantPayload := payload(1 + i)
			if i >= 5 {
				wantPayload = payload(7 + i - 5)
			}
			if e.Position != want[i] || !bytes.Equal(e.Data, wantPayload) {
				t.Fatalf("entry %d at %v = %q; want %v %q", i, e.Position, e.Data, want[i], wantPayload)
			}
		}
	}
	check(m)
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	m = open(t, testConfig(cl, lc, 5), name)
	check(m)
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// A managed ledger closed right after a failed rollover records the
	// close it could not record then.
	const name2 = "tenant/ns/persistent/faults-close"
	m = open(t, env, name2)
	appendN(t, m, 0, 5)
	fm.Set(metafault.Once(TopicKey(cl.Region, name2), metafault.OpCAS))
	if _, err := m.AddEntry(ctx, payload(5)); !errors.Is(err, metafault.ErrInjected) {
		t.Fatalf("add across a failing rollover: %v", err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	kv, err := cl.Meta.Get(ctx, TopicKey(cl.Region, name2))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := decodeMeta(kv.Value)
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Ledgers) != 1 || tm.Ledgers[0].State != LedgerClosed || tm.Ledgers[0].Entries != 5 {
		t.Fatalf("metadata after Close: %+v", tm.Ledgers)
	}
}
