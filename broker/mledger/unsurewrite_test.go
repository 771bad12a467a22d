package mledger

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/isobar-mq/isobar/metastore"
)

// lostReply is a metastore.Meta whose next CAS, once armed, is applied
// and then reported failed (context.Canceled), as when the caller's
// context ends or the connection is lost after the store took the write;
// with failGet, the read that follows fails too.
type lostReply struct {
	metastore.Meta
	armed   atomic.Bool
	failGet atomic.Bool
}

func (l *lostReply) CAS(ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	r, err := l.Meta.CAS(ctx, key, value, rev)
	if err == nil && l.armed.CompareAndSwap(true, false) {
		return 0, context.Canceled
	}
	return r, err
}

func (l *lostReply) Get(ctx context.Context, key string) (metastore.KV, error) {
	if l.failGet.CompareAndSwap(true, false) {
		return metastore.KV{}, errors.New("lostReply: read failed")
	}
	return l.Meta.Get(ctx, key)
}

// TestMetadataWriteAppliedButReportedFailed: a cursor's metadata write
// the store applied while the managed ledger heard it failed (its
// context ended: a client's acknowledgement whose connection closed)
// must not make the managed ledger's next write look like another
// owner's: it fenced itself ("fenced by another owner") and its topic
// was unloaded with replicated adds in flight (chaos drill). Once the
// outcome is read back at once, once only at the next write's conflict.
func TestMetadataWriteAppliedButReportedFailed(t *testing.T) {
	cl := startCluster(t)
	lc := newLedgerClient(t, cl)
	for _, tc := range []struct {
		name    string
		failGet bool
	}{{"read back", false}, {"at the next write", true}} {
		t.Run(tc.name, func(t *testing.T) {
			env := testConfig(cl, lc, 100)
			lr := &lostReply{Meta: env.Meta}
			env.Meta = lr
			name := "tenant/ns/persistent/lost-reply-" + map[bool]string{false: "a", true: "b"}[tc.failGet]
			ctx := context.Background()
			m := open(t, env, name)
			ps := appendN(t, m, 0, 5)
			c, err := m.OpenCursor(ctx, "sub", Earliest)
			if err != nil {
				t.Fatal(err)
			}

			lr.failGet.Store(tc.failGet)
			lr.armed.Store(true)
			err = c.AckCumulative(ctx, ps[1])
			if tc.failGet != (err != nil) {
				t.Fatalf("ack whose write was applied, read back %v: %v", !tc.failGet, err)
			}
			if err := c.AckCumulative(ctx, ps[2]); err != nil {
				t.Fatalf("next ack: %v", err)
			}
			if _, err := m.AddEntry(ctx, payload(5)); err != nil {
				t.Fatalf("add after the acks: %v", err)
			}
			if err := m.fencedErr(); err != nil {
				t.Fatalf("fenced: %v", err)
			}
			if got := c.MarkDelete(); got != ps[2] {
				t.Fatalf("mark-delete %v, want %v", got, ps[2])
			}
			// What is stored is what the managed ledger holds.
			if err := m.Close(ctx); err != nil {
				t.Fatal(err)
			}
			m2 := open(t, env, name)
			c2, err := m2.OpenCursor(ctx, "sub", Earliest)
			if err != nil {
				t.Fatal(err)
			}
			if got := c2.MarkDelete(); got != ps[2] {
				t.Fatalf("mark-delete after reopening %v, want %v", got, ps[2])
			}
		})
	}
}

// TestUnsureWriteThenNewOwner: a write of the old owner whose outcome it
// does not know, then a new owner's open (which writes the metadata
// unchanged, to fence it): the old owner's next write must take the
// conflict for the new owner's, not for its own write, and stay fenced.
func TestUnsureWriteThenNewOwner(t *testing.T) {
	cl := startCluster(t)
	lc := newLedgerClient(t, cl)
	env := testConfig(cl, lc, 100)
	lr := &lostReply{Meta: env.Meta}
	env.Meta = lr
	const name = "tenant/ns/persistent/lost-reply-new-owner"
	ctx := context.Background()
	// No ledger yet: the new owner's open writes the value it read.
	m := open(t, env, name)
	c, err := m.OpenCursor(ctx, "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	lr.failGet.Store(true)
	lr.armed.Store(true)
	if err := c.SetProperties(ctx, map[string]string{"k": "1"}); err == nil {
		t.Fatal("write whose outcome is unknown succeeded")
	}
	open(t, testConfig(cl, lc, 100), name) // the new owner
	if err := c.SetProperties(ctx, map[string]string{"k": "2"}); !errors.Is(err, ErrFenced) {
		t.Fatalf("old owner's write after a new owner opened: %v", err)
	}
}
