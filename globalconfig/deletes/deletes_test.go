package deletes

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/topic"
)

func mustName(t *testing.T, s string) topic.Name {
	t.Helper()
	n, err := topic.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCoversAndTopics(t *testing.T) {
	tr := Record{Kind: Topic, Name: "persistent://a/b/t", Partitions: 2}
	nr := Record{Kind: Namespace, Name: "a/b"}
	for _, tc := range []struct {
		name   string
		tr, nr bool
	}{
		{"persistent://a/b/t", true, true},
		{"persistent://a/b/t-partition-1", true, true},
		{"persistent://a/b/u", false, true},
		{"persistent://a/c/t", false, false},
	} {
		n := mustName(t, tc.name)
		if got := tr.Covers(n); got != tc.tr {
			t.Errorf("topic record covers %s = %v", tc.name, got)
		}
		if got := nr.Covers(n); got != tc.nr {
			t.Errorf("namespace record covers %s = %v", tc.name, got)
		}
	}
	ts, err := tr.Topics()
	if err != nil || len(ts) != 2 || ts[1].String() != "persistent://a/b/t-partition-1" {
		t.Fatalf("Topics = %v, %v", ts, err)
	}
	if k := Keys(mustName(t, "persistent://a/b/t-partition-1")); k[0] != TopicKey(mustName(t, "persistent://a/b/t")) || k[1] != NamespaceKey("a/b") {
		t.Fatalf("Keys = %v", k)
	}
}

func TestPendingAndBlocks(t *testing.T) {
	at := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	r := Record{Kind: Topic, Name: "persistent://a/b/t", Regions: []string{"r0", "r1", "r2"}, By: "r0", At: at,
		Applied: map[string]Applied{"r0": {LedgerBound: 10}}}
	if p := r.Pending([]string{"r0", "r1", "r2"}); !slices.Equal(p, []string{"r1", "r2"}) {
		t.Fatalf("Pending = %v", p)
	}
	// A region taken out of the clusters is no longer waited for.
	if p := r.Pending([]string{"r0", "r1"}); !slices.Equal(p, []string{"r1"}) {
		t.Fatalf("Pending without r2 = %v", p)
	}
	err := r.Blocks("r0", []string{"r0", "r1", "r2"})
	if !errors.Is(err, ErrDeleting) || !strings.Contains(err.Error(), "waiting for r1, r2") {
		t.Fatalf("Blocks in r0 = %v", err)
	}
	if err := r.Blocks("r1", []string{"r0", "r1", "r2"}); !errors.Is(err, ErrDeleting) || !strings.Contains(err.Error(), "not deleted its copy") {
		t.Fatalf("Blocks in r1 = %v", err)
	}
	r.Applied["r1"], r.Applied["r2"] = Applied{LedgerBound: 20}, Applied{LedgerBound: 30}
	if err := r.Blocks("r1", []string{"r0", "r1", "r2"}); err != nil {
		t.Fatalf("Blocks once every region applied = %v", err)
	}
	// A namespace's record blocks until it is done.
	nr := Record{Kind: Namespace, Name: "a/b", Regions: []string{"r0"}, Applied: map[string]Applied{"r0": {}}}
	if err := nr.Blocks("r0", []string{"r0"}); !errors.Is(err, ErrDeleting) {
		t.Fatalf("namespace record not done: Blocks = %v", err)
	}
	nr.Done = true
	if err := nr.Blocks("r0", []string{"r0"}); err != nil {
		t.Fatalf("done namespace record: Blocks = %v", err)
	}
}

func TestRefuseFrame(t *testing.T) {
	r := Record{Kind: Topic, Name: "persistent://a/b/t", Regions: []string{"r0", "r1"},
		Applied: map[string]Applied{"r0": {LedgerBound: 100}}}
	if err := r.RefuseFrame("r1", []int64{5000}); !errors.Is(err, ErrDeletedCopy) {
		t.Fatalf("entries from a region that has not deleted its copy: %v", err)
	}
	if err := r.RefuseFrame("r1", nil); !errors.Is(err, ErrDeletedCopy) {
		t.Fatalf("states from a region that has not deleted its copy: %v", err)
	}
	if err := r.RefuseFrame("r0", []int64{100, 99}); !errors.Is(err, ErrDeletedCopy) || !strings.Contains(err.Error(), "ledger 99") {
		t.Fatalf("an entry below the bound: %v", err)
	}
	if err := r.RefuseFrame("r0", []int64{100, 250}); err != nil {
		t.Fatalf("entries of the copy created since: %v", err)
	}
	empty := Record{Kind: Namespace, Name: "a/b", IfEmpty: true}
	if err := empty.RefuseFrame("r1", []int64{1}); err != nil {
		t.Fatalf("a namespace check deletes nothing: %v", err)
	}
}

// FuzzDecodeRecord: a record read from the global store decodes, or is
// refused as corrupt; it never panics, and what decodes is usable (its
// checks run without panicking).
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"kind":"topic","name":"persistent://a/b/t","partitions":2,"regions":["r0","r1"],"by":"r0","at":"2026-12-07T04:00:00Z","applied":{"r0":{"at":"2026-12-07T04:00:01Z","ledgerBound":10}}}`))
	f.Add([]byte(`{"kind":"namespace","name":"a/b","ifEmpty":true,"regions":["r0"],"refused":{"r0":"holds 1 topic"}}`))
	f.Add([]byte(`{"kind":"subscription","name":"persistent://a/b/t","subscription":"s","done":true}`))
	f.Add([]byte(`{"kind":"topic","name":"not a topic","partitions":-5}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decode("k", 1, b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		_ = r.Pending([]string{"r0", "r1"})
		_ = r.Blocks("r0", []string{"r0", "r1"})
		_ = r.RefuseFrame("r1", []int64{1, -1})
		_, _ = r.Topics()
	})
}
