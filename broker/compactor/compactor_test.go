package compactor_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/compactor"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/broker/mledger/ledgers"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/metastore/metafault"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// rig is a managed ledger on real bookies, its ledger client and the
// fault seams in front of both one's metadata store.
type rig struct {
	t      *testing.T
	cl     *testcluster.Cluster
	lc     *ledger.Client
	lcMeta *metafault.Meta // the ledger client's store
	mlMeta *metafault.Meta // the managed ledger's store
	ml     *mledger.ManagedLedger
	name   string
}

func newRig(t *testing.T) *rig {
	cl := testcluster.Start(t, testcluster.Options{Bookies: 3})
	r := &rig{t: t, cl: cl, name: "tenant/ns/persistent/compacted"}
	r.lcMeta = metafault.Wrap(cl.Connect(), nil)
	lc, err := ledger.NewClient(r.lcMeta, ledger.Config{Region: cl.Region, Logger: cl.Logger(), RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close() })
	r.lc = lc
	r.mlMeta = metafault.Wrap(cl.Connect(), nil)
	r.open()
	return r
}

func (r *rig) open() {
	ctx := context.Background()
	ml, err := mledger.Open(ctx, mledger.Deps{Meta: r.mlMeta, Ledgers: ledgers.OnBookies(r.lc), Region: r.cl.Region, Logger: r.cl.Logger()},
		mledger.Config{MaxEntriesPerLedger: 4, EnsembleSize: 3, WriteQuorum: 2, AckQuorum: 2}, r.name)
	if err != nil {
		r.t.Fatal(err)
	}
	r.ml = ml
	r.t.Cleanup(func() { ml.Close(context.Background()) })
}

// put appends one message; value "" is a deletion, key "" none.
func (r *rig) put(key, value string) mledger.Position {
	r.t.Helper()
	meta := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(1), PublishTime: proto.Uint64(1)}
	if key != "" {
		meta.PartitionKey = proto.String(key)
	}
	e, err := wire.AppendEntry(nil, meta, []byte(value))
	if err != nil {
		r.t.Fatal(err)
	}
	p, err := r.ml.AddEntry(context.Background(), e)
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

func (r *rig) compact() (compactor.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return compactor.Compact(ctx, r.ml, r.lc, compactor.Options{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2, Logger: r.cl.Logger()})
}

// view reads the whole compacted view as key=value, checking positions
// increase and where the read hands over to the topic.
func (r *rig) view(st compactor.State) []string {
	r.t.Helper()
	ctx := context.Background()
	v, err := compactor.OpenView(ctx, r.lc, st)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	from := mledger.Position{}
	for {
		es, next, err := v.Read(ctx, from, 2)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, e := range es {
			if e.Position.Compare(from) < 0 || e.Position.Compare(st.Horizon) > 0 {
				r.t.Fatalf("entry at %v read from %v (horizon %v)", e.Position, from, st.Horizon)
			}
			meta, payload, err := wire.DecodeEntry(e.Data)
			if err != nil {
				r.t.Fatal(err)
			}
			out = append(out, meta.GetPartitionKey()+"="+string(payload))
		}
		if len(es) == 0 {
			if want := (mledger.Position{Ledger: st.Horizon.Ledger, Entry: st.Horizon.Entry + 1}); next != want {
				r.t.Fatalf("the view ends at %v, want just after the horizon %v", next, want)
			}
			return out
		}
		from = next
	}
}

func (r *rig) ledgerExists(id int64) bool {
	_, _, err := r.lc.Metadata(context.Background(), uint64(id))
	if errors.Is(err, ledger.ErrNoLedger) {
		return false
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return true
}

func (r *rig) ledgerKeys() []string {
	keys, err := r.cl.Meta.ListKeys(context.Background(), metastore.RegionPrefix(r.cl.Region)+"ledgers/")
	if err != nil {
		r.t.Fatal(err)
	}
	return keys
}

// TestCompact: keys overwritten and deleted compact to their latest
// values; a second run adds what came after the first horizon to what
// the first kept and deletes the first compacted ledger; the state
// survives a reopen; the compaction cursor holds back trimming of what
// compaction has not read; an empty topic has nothing to compact.
func TestCompact(t *testing.T) {
	r := newRig(t)
	if res, err := r.compact(); err != nil || res.Compacted || res.State.Valid() {
		t.Fatalf("compacting an empty topic: %+v %v", res, err)
	}
	r.put("a", "a1")
	r.put("b", "b1")
	r.put("", "no key")
	r.put("a", "a2")
	r.put("c", "c1")
	r.put("b", "")
	h1 := r.put("d", "d1")
	res, err := r.compact()
	if err != nil || !res.Compacted || res.State.Horizon != h1 || res.Read != 7 || res.Kept != 3 {
		t.Fatalf("first compaction: %+v %v", res, err)
	}
	first := res.State
	if got, want := r.view(first), []string{"a=a2", "c=c1", "d=d1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("compacted view %q, want %q", got, want)
	}
	// Nothing new: nothing to do.
	if res, err := r.compact(); err != nil || res.Compacted || res.State != first {
		t.Fatalf("compacting again with nothing new: %+v %v", res, err)
	}

	r.put("c", "")
	r.put("b", "b2")
	h2 := r.put("a", "a3")
	res, err = r.compact()
	if err != nil || !res.Compacted || res.State.Horizon != h2 || res.Read != 6 {
		t.Fatalf("second compaction: %+v %v", res, err)
	}
	second := res.State
	if got, want := r.view(second), []string{"d=d1", "b=b2", "a=a3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("compacted view %q, want %q", got, want)
	}
	if r.ledgerExists(first.Ledger) {
		t.Fatalf("the first compacted ledger %d still exists", first.Ledger)
	}

	// A subscription that consumed everything does not let what the
	// compactor has not read be trimmed.
	after := r.put("e", "e1")
	sub, err := r.ml.OpenCursor(context.Background(), "s", mledger.Earliest)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.AckCumulative(context.Background(), after); err != nil {
		t.Fatal(err)
	}
	if es, _, err := r.ml.Read(context.Background(), mledger.Position{Ledger: h2.Ledger, Entry: h2.Entry + 1}, 10); err != nil || len(es) != 1 || es[0].Position != after {
		t.Fatalf("the entry after the horizon after a trim: %v %v", es, err)
	}

	// The state is the cursor's: it survives a reopen.
	if err := r.ml.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.open()
	cur, err := r.ml.OpenExistingCursor(context.Background(), compactor.CursorName)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := compactor.StateOf(cur.Properties()); err != nil || st != second || cur.MarkDelete() != h2 {
		t.Fatalf("after a reopen: state %+v (%v), cursor at %v; want %+v at %v", st, err, cur.MarkDelete(), second, h2)
	}
}

// TestCompactFailureKeepsState: a run that fails while closing its
// compacted ledger, or at the switch (the cursor's metadata write, failed
// through the metafault seam), leaves the previous state in force and
// deletes the ledger it wrote; the next run succeeds.
func TestCompactFailureKeepsState(t *testing.T) {
	r := newRig(t)
	r.put("a", "a1")
	r.put("b", "b1")
	res, err := r.compact()
	if err != nil || !res.Compacted {
		t.Fatalf("first compaction: %+v %v", res, err)
	}
	first := res.State
	r.put("a", "a2")
	before := r.ledgerKeys()

	for _, c := range []struct {
		name string
		meta *metafault.Meta
		rule *metafault.Rule
	}{
		{"closing the compacted ledger", r.lcMeta, metafault.Once(metastore.RegionPrefix(r.cl.Region)+"ledgers/", metafault.OpCAS)},
		{"the switch", r.mlMeta, metafault.Once(mledger.TopicKey(r.cl.Region, r.name), metafault.OpCAS)},
	} {
		c.meta.Set(c.rule)
		res, err := r.compact()
		c.meta.Set(nil)
		if !errors.Is(err, metafault.ErrInjected) || c.rule.Fired() != 1 {
			t.Fatalf("%s failing: %+v %v (fired %d)", c.name, res, err, c.rule.Fired())
		}
		cur, err := r.ml.OpenExistingCursor(context.Background(), compactor.CursorName)
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := compactor.StateOf(cur.Properties()); st != first || cur.MarkDelete() != first.Horizon {
			t.Fatalf("%s failing: state %+v at %v, want %+v", c.name, st, cur.MarkDelete(), first)
		}
		if got, want := r.view(first), []string{"a=a1", "b=b1"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("%s failing: the previous view reads %q, want %q", c.name, got, want)
		}
		if after := r.ledgerKeys(); !slices.Equal(after, before) {
			t.Fatalf("%s failing: ledgers %v, before the run %v (the failed run's ledger left behind)", c.name, after, before)
		}
	}
	res, err = r.compact()
	if err != nil || !res.Compacted {
		t.Fatalf("compaction after the faults: %+v %v", res, err)
	}
	if got, want := r.view(res.State), []string{"b=b1", "a=a2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("compacted view %q, want %q", got, want)
	}
}
