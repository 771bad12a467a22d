package txn

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/isobar-mq/isobar/broker/mledger/ackset"
	"github.com/isobar-mq/isobar/errkind"
)

// Position is a position in a topic's log.
type Position = ackset.Position

// Marker types of the entries that end a transaction on a topic
// (MessageMetadata.marker_type, Pulsar's numbers).
const (
	MarkerCommit = 21
	MarkerAbort  = 22
)

// Buffer is the transaction buffer of one topic: which transactions have
// entries in its log and are not ended (ongoing), and which ended
// aborted. Dispatch reads no further than Limit and skips what Skip
// says. The zero Buffer is not ready: use NewBuffer.
type Buffer struct {
	// ongoing: for each open transaction, the last position dispatch may
	// read because of it (just before its first entry).
	ongoing map[ID]Position
	// aborted: for each aborted transaction, the position of its abort
	// marker (its entries are all before it).
	aborted map[ID]Position
	// refined: the ongoing transactions whose first entry confirmed (or
	// was read back): their limit no longer moves.
	refined map[ID]struct{}
	// acks are the subscriptions' pending acknowledgements, whose records
	// are in the same log and whose state is in the same snapshot.
	acks *Acks
}

// NewBuffer makes an empty buffer.
func NewBuffer() *Buffer {
	return &Buffer{ongoing: map[ID]Position{}, aborted: map[ID]Position{}, refined: map[ID]struct{}{}, acks: NewAcks()}
}

// Acks are the pending acknowledgements of the topic's subscriptions.
func (b *Buffer) Acks() *Acks { return b.acks }

// Write is called before an entry of transaction id is added to the
// log, whose last confirmed position is then last: until the add
// confirms, dispatch reads no further than last because of id. An
// aborted transaction may not write any more (TransactionConflict).
func (b *Buffer) Write(id ID, last Position) error {
	if _, ok := b.aborted[id]; ok {
		return fmt.Errorf("%w: transaction %v was aborted on this topic", errkind.ErrTransactionConflict, id)
	}
	if _, ok := b.ongoing[id]; !ok {
		b.ongoing[id] = last
	}
	return nil
}

// Written is called when an add of transaction id confirmed at p. The
// first confirmation moves the limit id sets to just before p (entries
// confirmed between Write and it are not id's); later ones change
// nothing.
func (b *Buffer) Written(id ID, p Position) {
	lim, ok := b.ongoing[id]
	if !ok {
		return
	}
	if _, done := b.refined[id]; done {
		return
	}
	b.refined[id] = struct{}{}
	if before := (Position{Ledger: p.Ledger, Entry: p.Entry - 1}); before.Compare(lim) > 0 {
		b.ongoing[id] = before
	}
}

// End records that id ended with a, its marker stored at marker.
func (b *Buffer) End(id ID, a Action, marker Position) {
	delete(b.ongoing, id)
	delete(b.refined, id)
	if a == Abort {
		b.aborted[id] = marker
	}
}

// Ongoing says whether id has entries here and has not ended.
func (b *Buffer) Ongoing(id ID) bool {
	_, ok := b.ongoing[id]
	return ok
}

// Limit is the last position dispatch may read: false when no
// transaction holds it back.
func (b *Buffer) Limit() (Position, bool) {
	var lim Position
	found := false
	for _, p := range b.ongoing {
		if !found || p.Compare(lim) < 0 {
			lim, found = p, true
		}
	}
	return lim, found
}

// Skip says whether an entry must never be delivered: a marker (any of
// IsMarker's), or an entry of an aborted transaction. Replicated entries are committed in
// their own region: their transaction ids mean nothing here.
func (b *Buffer) Skip(id ID, hasTxn, marker, replicated bool) bool {
	if marker {
		return true
	}
	if !hasTxn || replicated {
		return false
	}
	_, ok := b.aborted[id]
	return ok
}

// Replay applies an entry of transaction id read back from the log at p
// (recovery): a commit or abort marker ends its transaction, a
// pending-ack record goes to Acks (payload is the entry's), an entry of a
// transaction not ended makes it ongoing.
func (b *Buffer) Replay(id ID, p Position, marker int32, payload []byte) error {
	if ok, err := b.acks.Replay(id, marker, payload); ok {
		return err
	}
	switch marker {
	case MarkerCommit:
		b.End(id, Commit, p)
	case MarkerAbort:
		b.End(id, Abort, p)
	default:
		if _, ok := b.aborted[id]; ok {
			return nil
		}
		if _, ok := b.ongoing[id]; !ok {
			b.ongoing[id] = Position{Ledger: p.Ledger, Entry: p.Entry - 1}
			b.refined[id] = struct{}{}
		}
	}
	return nil
}

// Trim forgets the aborted transactions whose markers are before first,
// the first position still in the log (their entries are gone too).
func (b *Buffer) Trim(first Position) {
	for id, p := range b.aborted {
		if p.Compare(first) < 0 {
			delete(b.aborted, id)
		}
	}
}

// Empty says whether the buffer holds nothing.
func (b *Buffer) Empty() bool {
	return len(b.ongoing) == 0 && len(b.aborted) == 0 && b.acks.Empty()
}

type snapTxn struct {
	Most   uint64 `json:"most"`
	Least  uint64 `json:"least"`
	Ledger int64  `json:"ledger"`
	Entry  int64  `json:"entry"`
}

type snapshot struct {
	Ongoing []snapTxn `json:"ongoing,omitempty"`
	Aborted []snapTxn `json:"aborted,omitempty"`
	// Acks are the stored pending acknowledgements, by subscription and
	// transaction (absent from snapshots written before they were kept).
	Acks []snapAck `json:"acks,omitempty"`
}

func snapList(m map[ID]Position) []snapTxn {
	out := make([]snapTxn, 0, len(m))
	for id, p := range m {
		out = append(out, snapTxn{id.Most, id.Least, p.Ledger, p.Entry})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Most != out[j].Most {
			return out[i].Most < out[j].Most
		}
		return out[i].Least < out[j].Least
	})
	return out
}

// Snapshot encodes the buffer, its pending acknowledgements with it. A
// snapshot meant to stand at p must stand at b.Acks().SnapshotAt(p).
func (b *Buffer) Snapshot() []byte {
	s, _ := json.Marshal(snapshot{Ongoing: snapList(b.ongoing), Aborted: snapList(b.aborted), Acks: b.acks.snapshot()}) // plain fields
	return s
}

// RestoreBuffer decodes a snapshot.
func RestoreBuffer(data []byte) (*Buffer, error) {
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("txn: bad buffer snapshot: %w", err)
	}
	b := NewBuffer()
	for _, t := range s.Ongoing {
		id := ID{t.Most, t.Least}
		b.ongoing[id] = Position{Ledger: t.Ledger, Entry: t.Entry}
		b.refined[id] = struct{}{}
	}
	for _, t := range s.Aborted {
		b.aborted[ID{t.Most, t.Least}] = Position{Ledger: t.Ledger, Entry: t.Entry}
	}
	for _, a := range s.Acks {
		b.acks.restore(a.Sub, ID{a.Most, a.Least}, fromSnapPos(a.Pos))
	}
	return b, nil
}
