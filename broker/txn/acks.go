package txn

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/isobar-mq/isobar/errkind"
)

// Marker types of the records of pending acknowledgements in a topic's
// log (MessageMetadata.marker_type). They are ours: Pulsar uses 0, 10–13
// and 20–22.
const (
	// MarkerAck records acknowledgements made in a transaction on a
	// subscription (payload: EncodeAck).
	MarkerAck = 120
	// MarkerAckEnd records that a transaction ended on a subscription
	// (payload: EncodeAckEnd).
	MarkerAckEnd = 121
)

// IsMarker says whether marker type m is one of the transaction markers,
// which are never delivered to consumers, readers or the replicator.
func IsMarker(m int32) bool {
	switch m {
	case MarkerCommit, MarkerAbort, MarkerAck, MarkerAckEnd:
		return true
	}
	return false
}

// ackRecord is the payload of a MarkerAck or MarkerAckEnd entry: JSON,
// whose fields may be added to but never change meaning (a record that
// needs other semantics gets a new marker type).
type ackRecord struct {
	Sub string `json:"sub"`
	// Pos are the positions acknowledged (MarkerAck).
	Pos []snapPos `json:"pos,omitempty"`
	// Action is "commit" or "abort" (MarkerAckEnd).
	Action string `json:"action,omitempty"`
}

// snapPos is a position as [ledger, entry].
type snapPos [2]int64

func toSnapPos(ps []Position) []snapPos {
	out := make([]snapPos, len(ps))
	for i, p := range ps {
		out[i] = snapPos{p.Ledger, p.Entry}
	}
	return out
}

func fromSnapPos(ps []snapPos) []Position {
	out := make([]Position, len(ps))
	for i, p := range ps {
		out[i] = Position{Ledger: p[0], Entry: p[1]}
	}
	return out
}

// EncodeAck is the payload of the MarkerAck entry of acknowledgements of
// ps on subscription sub (the transaction is in the entry's metadata).
func EncodeAck(sub string, ps []Position) []byte {
	b, _ := json.Marshal(ackRecord{Sub: sub, Pos: toSnapPos(ps)}) // plain fields
	return b
}

// EncodeAckEnd is the payload of the MarkerAckEnd entry of a
// transaction's end on subscription sub.
func EncodeAckEnd(sub string, a Action) []byte {
	b, _ := json.Marshal(ackRecord{Sub: sub, Action: a.String()})
	return b
}

// Acks are the pending acknowledgements of a topic's subscriptions: those
// made in transactions not ended yet. An acknowledgement is reserved
// (Add), its record written to the log outside any lock, then confirmed
// (Confirm) or undone (Undo). The zero Acks is not ready: use NewAcks.
type Acks struct {
	subs map[string]*subAcks
	// writing are the reservations whose records are being written.
	writing map[*Reservation]struct{}
}

type subAcks struct {
	byPos map[Position]*pend
	byTxn map[ID]map[Position]struct{}
	// writing counts the reservations in flight of each transaction.
	writing map[ID]int
}

// pend is one pending position: its transaction, whether a record of it
// is stored (confirmed), and how many reservations of it are in flight.
type pend struct {
	id        ID
	confirmed bool
	reserved  int
}

// Reservation is an Add whose record is being written.
type Reservation struct {
	sub   string
	id    ID
	ps    []Position
	since Position
	done  bool
}

// NewAcks makes an empty Acks.
func NewAcks() *Acks {
	return &Acks{subs: map[string]*subAcks{}, writing: map[*Reservation]struct{}{}}
}

func (a *Acks) sub(name string) *subAcks {
	s := a.subs[name]
	if s == nil {
		s = &subAcks{byPos: map[Position]*pend{}, byTxn: map[ID]map[Position]struct{}{}, writing: map[ID]int{}}
		a.subs[name] = s
	}
	return s
}

// drop forgets sub's state once it holds nothing.
func (a *Acks) drop(name string) {
	if s := a.subs[name]; s != nil && len(s.byPos) == 0 && len(s.writing) == 0 {
		delete(a.subs, name)
	}
}

// Add reserves the acknowledgements of ps on subscription sub in
// transaction id, before their record is written; last is the log's last
// confirmed position now (the record lands after it). A position already
// acknowledged (acked says so), or pending (or reserved) in another
// transaction, is a conflict (TransactionConflict), and nothing is
// reserved then. Positions pending in id already are fine.
func (a *Acks) Add(sub string, id ID, ps []Position, acked func(Position) bool, last Position) (*Reservation, error) {
	s := a.subs[sub]
	for _, p := range ps {
		if acked != nil && acked(p) {
			return nil, fmt.Errorf("%w: message %v of subscription %s is acknowledged already", errkind.ErrTransactionConflict, p, sub)
		}
		if s == nil {
			continue
		}
		if e, ok := s.byPos[p]; ok && e.id != id {
			return nil, fmt.Errorf("%w: message %v of subscription %s is acknowledged in transaction %v", errkind.ErrTransactionConflict, p, sub, e.id)
		}
	}
	s = a.sub(sub)
	r := &Reservation{sub: sub, id: id, since: last}
	seen := map[Position]struct{}{}
	for _, p := range ps {
		if _, dup := seen[p]; dup {
			continue
		}
		seen[p] = struct{}{}
		r.ps = append(r.ps, p)
		e := s.byPos[p]
		if e == nil {
			e = &pend{id: id}
			s.byPos[p] = e
			if s.byTxn[id] == nil {
				s.byTxn[id] = map[Position]struct{}{}
			}
			s.byTxn[id][p] = struct{}{}
		}
		e.reserved++
	}
	s.writing[id]++
	a.writing[r] = struct{}{}
	return r, nil
}

// settle ends reservation r: stored says whether its record was.
func (a *Acks) settle(r *Reservation, stored bool) {
	if r.done {
		return
	}
	r.done = true
	delete(a.writing, r)
	s := a.subs[r.sub]
	if s == nil {
		return
	}
	if s.writing[r.id]--; s.writing[r.id] <= 0 {
		delete(s.writing, r.id)
	}
	for _, p := range r.ps {
		e := s.byPos[p]
		if e == nil || e.id != r.id {
			continue
		}
		e.reserved--
		if stored {
			e.confirmed = true
		} else if !e.confirmed && e.reserved == 0 {
			s.forget(p, r.id)
		}
	}
	a.drop(r.sub)
}

func (s *subAcks) forget(p Position, id ID) {
	delete(s.byPos, p)
	if ps := s.byTxn[id]; ps != nil {
		delete(ps, p)
		if len(ps) == 0 {
			delete(s.byTxn, id)
		}
	}
}

// Confirm is called once r's record is stored: its acknowledgements are
// pending.
func (a *Acks) Confirm(r *Reservation) { a.settle(r, true) }

// Undo is called when r's record could not be stored: what r reserved
// and no stored record holds is forgotten.
func (a *Acks) Undo(r *Reservation) { a.settle(r, false) }

// Ending returns the pending positions of transaction id on subscription
// sub (in order), for its end: none when the subscription knows nothing
// of id. While a record of id's is being written the end must wait (a
// retriable error): ending then could leave that record after the end's.
func (a *Acks) Ending(sub string, id ID) ([]Position, error) {
	s := a.subs[sub]
	if s == nil {
		return nil, nil
	}
	if s.writing[id] > 0 {
		return nil, fmt.Errorf("%w: acknowledgements of transaction %v on subscription %s are being stored", errkind.ErrServiceNotReady, id, sub)
	}
	ps := make([]Position, 0, len(s.byTxn[id]))
	for p := range s.byTxn[id] {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(x, y Position) int { return x.Compare(y) })
	return ps, nil
}

// End forgets transaction id on subscription sub (its end is stored).
func (a *Acks) End(sub string, id ID) {
	s := a.subs[sub]
	if s == nil {
		return
	}
	for p := range s.byTxn[id] {
		if e := s.byPos[p]; e != nil && e.id == id {
			delete(s.byPos, p)
		}
	}
	delete(s.byTxn, id)
	a.drop(sub)
}

// PendingIn says which transaction holds p pending on subscription sub.
func (a *Acks) PendingIn(sub string, p Position) (ID, bool) {
	if s := a.subs[sub]; s != nil {
		if e, ok := s.byPos[p]; ok {
			return e.id, true
		}
	}
	return ID{}, false
}

// Since is the log's last confirmed position when the oldest record in
// flight was reserved; false when none is in flight. Such a record lands
// after it, but may land before a later position: a snapshot must stand
// no later than Since (or the record, stored but not applied yet when
// the snapshot is taken, would be neither in the snapshot nor replayed).
func (a *Acks) Since() (Position, bool) {
	var since Position
	found := false
	for r := range a.writing {
		if !found || r.since.Compare(since) < 0 {
			since, found = r.since, true
		}
	}
	return since, found
}

// SnapshotAt is where a snapshot meant to stand at p may stand: p, or
// earlier when a record in flight may land before p (Since).
func (a *Acks) SnapshotAt(p Position) Position {
	if since, ok := a.Since(); ok && since.Compare(p) < 0 {
		return since
	}
	return p
}

// Replay applies a record read back from the log (recovery): an ack
// record makes its positions pending in id, an end record forgets id on
// its subscription. Replaying a record twice changes nothing. Other
// marker types are not Acks' (false).
func (a *Acks) Replay(id ID, marker int32, payload []byte) (bool, error) {
	if marker != MarkerAck && marker != MarkerAckEnd {
		return false, nil
	}
	var r ackRecord
	if err := json.Unmarshal(payload, &r); err != nil {
		return true, fmt.Errorf("txn: bad pending-ack record: %w", err)
	}
	if marker == MarkerAckEnd {
		a.End(r.Sub, id)
		return true, nil
	}
	a.restore(r.Sub, id, fromSnapPos(r.Pos))
	return true, nil
}

// restore makes ps pending in id on sub, stored; positions pending in
// another transaction keep it (the check when they were added excluded
// that).
func (a *Acks) restore(sub string, id ID, ps []Position) {
	if len(ps) == 0 {
		return
	}
	s := a.sub(sub)
	for _, p := range ps {
		if e, ok := s.byPos[p]; ok {
			if e.id == id {
				e.confirmed = true
			}
			continue
		}
		s.byPos[p] = &pend{id: id, confirmed: true}
		if s.byTxn[id] == nil {
			s.byTxn[id] = map[Position]struct{}{}
		}
		s.byTxn[id][p] = struct{}{}
	}
}

// Empty says whether no acknowledgement is pending or reserved.
func (a *Acks) Empty() bool { return len(a.subs) == 0 && len(a.writing) == 0 }

// snapAck is one transaction's stored pending acknowledgements on one
// subscription, in a snapshot.
type snapAck struct {
	Sub   string    `json:"sub"`
	Most  uint64    `json:"most"`
	Least uint64    `json:"least"`
	Pos   []snapPos `json:"pos"`
}

// snapshot lists the stored pending acknowledgements (reservations in
// flight are not: their records are replayed, or failed), in order.
func (a *Acks) snapshot() []snapAck {
	var out []snapAck
	for name, s := range a.subs {
		for id, set := range s.byTxn {
			var ps []Position
			for p := range set {
				if e := s.byPos[p]; e != nil && e.id == id && e.confirmed {
					ps = append(ps, p)
				}
			}
			if len(ps) == 0 {
				continue
			}
			slices.SortFunc(ps, func(x, y Position) int { return x.Compare(y) })
			out = append(out, snapAck{Sub: name, Most: id.Most, Least: id.Least, Pos: toSnapPos(ps)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		x, y := out[i], out[j]
		if x.Sub != y.Sub {
			return x.Sub < y.Sub
		}
		if x.Most != y.Most {
			return x.Most < y.Most
		}
		return x.Least < y.Least
	})
	return out
}

// Transactions counts the transactions with acknowledgements pending on
// subscription sub (confirmed or being written).
func (a *Acks) Transactions(sub string) int {
	s := a.subs[sub]
	if s == nil {
		return 0
	}
	n := len(s.byTxn)
	for id := range s.writing {
		if _, ok := s.byTxn[id]; !ok {
			n++
		}
	}
	return n
}
