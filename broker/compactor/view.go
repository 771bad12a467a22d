package compactor

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/isobar-mq/isobar/bookie/ledger"
)

// Entry is one entry of a compacted view: its original position, the
// entry as delivered and, for a batch some of whose messages were
// removed, the ack set of those left (nil: every message).
type Entry struct {
	Position Position
	Data     []byte
	AckSet   []int64
}

// maxHints bounds the read positions a View remembers.
const maxHints = 256

// View reads a topic's compacted ledger: for the positions up to the
// horizon, each key's latest message in position order. It is safe for
// concurrent use; a View stays valid until its ledger is deleted (by the
// next compaction), after which reads fail and the caller takes the
// topic's new View.
type View struct {
	st State
	r  *ledger.Reader
	n  int64

	// hintMu guards hints: the compacted entry to read next for a
	// position a read ended at, so sequential readers skip the search.
	hintMu sync.Mutex
	hints  map[Position]int64
}

// OpenView opens the compacted ledger st names.
func OpenView(ctx context.Context, lc *ledger.Client, st State) (*View, error) {
	if !st.Valid() {
		return nil, fmt.Errorf("compactor: no compacted ledger")
	}
	r, err := lc.OpenNoRecovery(ctx, uint64(st.Ledger))
	if err != nil {
		return nil, fmt.Errorf("compactor: open compacted ledger %d: %w", st.Ledger, err)
	}
	if !r.Closed() {
		return nil, fmt.Errorf("%w: compacted ledger %d is not closed", ErrCorrupt, st.Ledger)
	}
	return &View{st: st, r: r, n: r.LastAddConfirmed() + 1, hints: map[Position]int64{}}, nil
}

// State is the compaction state the view reads.
func (v *View) State() State { return v.st }

// Horizon is the last position the view covers.
func (v *View) Horizon() Position { return v.st.Horizon }

// Len is the number of entries in the compacted ledger.
func (v *View) Len() int64 { return v.n }

// Size is the compacted ledger's size in bytes.
func (v *View) Size() int64 { return int64(v.r.Length()) }

// read reads compacted entries first..last.
func (v *View) read(ctx context.Context, first, last int64) ([]Entry, error) {
	es, err := v.r.Read(ctx, first, last)
	if err != nil {
		return nil, fmt.Errorf("compacted ledger %d: %w", v.st.Ledger, err)
	}
	out := make([]Entry, 0, len(es))
	for _, e := range es {
		p, k, err := DecodeEntry(e.Data)
		if err != nil {
			return nil, fmt.Errorf("compacted ledger %d entry %d: %w", v.st.Ledger, e.ID, err)
		}
		out = append(out, Entry{Position: p, Data: k.Entry, AckSet: k.AckSet})
	}
	return out, nil
}

// search returns the first compacted entry whose position is at or
// after from (n when none), reading log2(n) entries.
func (v *View) search(ctx context.Context, from Position) (int64, error) {
	v.hintMu.Lock()
	i, ok := v.hints[from]
	v.hintMu.Unlock()
	if ok {
		return i, nil
	}
	var ferr error
	i = int64(sort.Search(int(v.n), func(i int) bool {
		if ferr != nil {
			return true
		}
		es, err := v.read(ctx, int64(i), int64(i))
		if err != nil {
			ferr = err
			return true
		}
		return es[0].Position.Compare(from) >= 0
	}))
	return i, ferr
}

// Read returns up to limit entries at or after from, and the position
// to read from next: after the last one returned, or just after the
// horizon once the compacted ledger is exhausted (where the topic's own
// entries take over). from must not be after the horizon.
func (v *View) Read(ctx context.Context, from Position, limit int) ([]Entry, Position, error) {
	after := Position{Ledger: v.st.Horizon.Ledger, Entry: v.st.Horizon.Entry + 1}
	if from.Compare(v.st.Horizon) > 0 {
		return nil, from, nil
	}
	i, err := v.search(ctx, from)
	if err != nil {
		return nil, from, err
	}
	if i >= v.n {
		return nil, after, nil
	}
	last := min(v.n-1, i+int64(max(1, limit))-1)
	es, err := v.read(ctx, i, last)
	if err != nil {
		return nil, from, err
	}
	next := after
	if last < v.n-1 {
		p := es[len(es)-1].Position
		next = Position{Ledger: p.Ledger, Entry: p.Entry + 1}
		v.hintMu.Lock()
		if len(v.hints) >= maxHints {
			clear(v.hints)
		}
		v.hints[next] = last + 1
		v.hintMu.Unlock()
	}
	return es, next, nil
}

// Find returns the compacted entry kept for the entry at p; false when
// compaction kept nothing of it.
func (v *View) Find(ctx context.Context, p Position) (Entry, bool, error) {
	i, err := v.search(ctx, p)
	if err != nil || i >= v.n {
		return Entry{}, false, err
	}
	es, err := v.read(ctx, i, i)
	if err != nil {
		return Entry{}, false, err
	}
	return es[0], es[0].Position == p, nil
}

// First returns the view's first entry; false when it has none.
func (v *View) First(ctx context.Context) (Entry, bool, error) {
	return v.at(ctx, 0)
}

// Last returns the view's last entry; false when it has none.
func (v *View) Last(ctx context.Context) (Entry, bool, error) {
	return v.at(ctx, v.n-1)
}

func (v *View) at(ctx context.Context, i int64) (Entry, bool, error) {
	if i < 0 || i >= v.n {
		return Entry{}, false, nil
	}
	es, err := v.read(ctx, i, i)
	if err != nil {
		return Entry{}, false, err
	}
	return es[0], true, nil
}
