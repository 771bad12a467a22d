// Package txn holds the pure cores of transactions (docs/transactions.md):
// the transaction coordinator's state machine (Coordinator: requests and
// log records in, records to log, fan-outs and answers out) and the
// transaction buffer of one topic (Buffer: which entries dispatch may
// read, which it must skip). Neither does I/O, takes a lock or reads a
// clock: package broker/txncoord drives the coordinator, the broker the
// buffers.
package txn

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/isobar-mq/isobar/errkind"
)

// ID is a transaction id as the protocol carries it: Most is the
// coordinator (TC partition) that made it, Least its number there.
type ID struct {
	Most, Least uint64
}

func (id ID) String() string { return fmt.Sprintf("(%d,%d)", id.Most, id.Least) }

// Action ends a transaction: its values are the protocol's TxnAction.
type Action int

const (
	Commit Action = 0
	Abort  Action = 1
)

func (a Action) String() string {
	if a == Abort {
		return "abort"
	}
	return "commit"
}

// Status is a transaction's state, named as Pulsar names it.
type Status int

const (
	Open Status = iota
	Committing
	Committed
	Aborting
	Aborted
	Timeout
)

func (s Status) String() string {
	return [...]string{"OPEN", "COMMITTING", "COMMITTED", "ABORTING", "ABORTED", "TIMEOUT"}[s]
}

// Sub is a subscription a transaction acknowledged on.
type Sub struct {
	Topic        string `json:"topic"`
	Subscription string `json:"sub"`
}

// Record is one entry of a coordinator's log.
type Record struct {
	// Op: "new", "partitions", "subs", "end", "done".
	Op  string `json:"op"`
	Txn uint64 `json:"txn"`
	// new: when the transaction opened (Unix ms) and its timeout (ms).
	OpenedAt  int64 `json:"openedAt,omitempty"`
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// partitions, subs: what was added.
	Partitions []string `json:"partitions,omitempty"`
	Subs       []Sub    `json:"subs,omitempty"`
	// end: the action; Expired says the coordinator aborted it at its
	// deadline.
	Action  Action `json:"action,omitempty"`
	Expired bool   `json:"expired,omitempty"`
}

// Marshal encodes r for the log.
func (r Record) Marshal() []byte {
	b, _ := json.Marshal(r) // plain fields: cannot fail
	return b
}

// ParseRecord decodes a log entry.
func ParseRecord(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("txn: bad log record: %w", err)
	}
	switch r.Op {
	case "new", "partitions", "subs", "end", "done":
		return r, nil
	}
	return Record{}, fmt.Errorf("txn: bad log record: op %q", r.Op)
}

// Fanout is the work of ending a transaction: tell each produced
// partition and each acknowledged subscription.
type Fanout struct {
	ID         ID
	Action     Action
	Partitions []string
	Subs       []Sub
}

// Info is what the coordinator knows of a transaction.
type Info struct {
	ID         ID
	Status     Status
	OpenedAt   time.Time
	Timeout    time.Duration
	Partitions []string
	Subs       []Sub
}

type state struct {
	status   Status
	openedAt time.Time
	timeout  time.Duration
	parts    []string
	subs     []Sub
	expired  bool
}

func (s *state) deadline() time.Time { return s.openedAt.Add(s.timeout) }

// Coordinator is the state of one transaction coordinator. Every method
// that changes it returns the record to log: the driver answers the
// request once the record is stored, and gives the coordinator up (to be
// recovered from the log) when it cannot be.
type Coordinator struct {
	tc         uint64
	maxTimeout time.Duration
	next       uint64
	txns       map[uint64]*state
	// floor: the ids below it were made before the snapshot restored
	// (Restore); one it does not hold had ended.
	floor uint64
}

// NewCoordinator makes the empty coordinator of TC partition tc;
// transactions may live at most maxTimeout.
func NewCoordinator(tc uint64, maxTimeout time.Duration) *Coordinator {
	return &Coordinator{tc: tc, maxTimeout: maxTimeout, txns: map[uint64]*state{}}
}

func (c *Coordinator) get(id ID) (*state, error) {
	s, ok := c.txns[id.Least]
	if id.Most != c.tc || !ok {
		return nil, fmt.Errorf("%w: transaction %v is not known to coordinator %d (never made, or ended)", errkind.ErrTransactionNotFound, id, c.tc)
	}
	return s, nil
}

// New opens a transaction at now. A timeout of 0 is the maximum; one
// over it is refused (NotAllowed), not cut down.
func (c *Coordinator) New(now time.Time, timeout time.Duration) (ID, Record, error) {
	switch {
	case timeout == 0:
		timeout = c.maxTimeout
	case timeout < 0 || timeout > c.maxTimeout:
		return ID{}, Record{}, fmt.Errorf("%w: transaction timeout %v is not within 0..%v (broker.transactions.maxTimeout)", errkind.ErrNotAllowed, timeout, c.maxTimeout)
	}
	id := ID{Most: c.tc, Least: c.next}
	c.next++
	r := Record{Op: "new", Txn: id.Least, OpenedAt: now.UnixMilli(), TimeoutMs: timeout.Milliseconds()}
	c.apply(r)
	return id, r, nil
}

func (c *Coordinator) open(id ID) (*state, error) {
	s, err := c.get(id)
	if err != nil {
		return nil, err
	}
	if s.status != Open {
		return nil, fmt.Errorf("%w: transaction %v is %v, not OPEN", errkind.ErrInvalidTxnStatus, id, c.statusOf(s))
	}
	return s, nil
}

// AddPartitions records partitions the transaction produces to. ok is
// false when they were all known already (nothing to log).
func (c *Coordinator) AddPartitions(id ID, parts []string) (r Record, ok bool, err error) {
	s, err := c.open(id)
	if err != nil {
		return Record{}, false, err
	}
	var add []string
	for _, p := range parts {
		if p == "" {
			return Record{}, false, fmt.Errorf("%w: empty partition name", errkind.ErrNotAllowed)
		}
		if !slices.Contains(s.parts, p) && !slices.Contains(add, p) {
			add = append(add, p)
		}
	}
	if len(add) == 0 {
		return Record{}, false, nil
	}
	r = Record{Op: "partitions", Txn: id.Least, Partitions: add}
	c.apply(r)
	return r, true, nil
}

// AddSubscriptions records subscriptions the transaction acknowledges
// on; ok as for AddPartitions.
func (c *Coordinator) AddSubscriptions(id ID, subs []Sub) (r Record, ok bool, err error) {
	s, err := c.open(id)
	if err != nil {
		return Record{}, false, err
	}
	var add []Sub
	for _, sub := range subs {
		if sub.Topic == "" || sub.Subscription == "" {
			return Record{}, false, fmt.Errorf("%w: subscription without topic or name", errkind.ErrNotAllowed)
		}
		if !slices.Contains(s.subs, sub) && !slices.Contains(add, sub) {
			add = append(add, sub)
		}
	}
	if len(add) == 0 {
		return Record{}, false, nil
	}
	r = Record{Op: "subs", Txn: id.Least, Subs: add}
	c.apply(r)
	return r, true, nil
}

// End ends a transaction with a: the record to log and the fan-out to
// run once it is stored. A transaction already ending with the same
// action returns ok false and no error: the caller waits for the end
// under way.
func (c *Coordinator) End(id ID, a Action) (r Record, f Fanout, ok bool, err error) {
	if a != Commit && a != Abort {
		return Record{}, Fanout{}, false, fmt.Errorf("%w: unknown transaction action %d", errkind.ErrNotAllowed, a)
	}
	s, err := c.get(id)
	if err != nil {
		return Record{}, Fanout{}, false, err
	}
	switch {
	case s.status == Open:
	case s.status == Committing && a == Commit, s.status == Aborting && a == Abort:
		return Record{}, Fanout{}, false, nil
	default:
		return Record{}, Fanout{}, false, fmt.Errorf("%w: cannot %v transaction %v: it is %v", errkind.ErrInvalidTxnStatus, a, id, c.statusOf(s))
	}
	r = Record{Op: "end", Txn: id.Least, Action: a}
	c.apply(r)
	return r, c.fanout(id.Least, s), true, nil
}

// Expire aborts the open transactions whose deadline is at or before
// now: a record and a fan-out each.
func (c *Coordinator) Expire(now time.Time) (rs []Record, fs []Fanout) {
	for _, least := range c.sortedIDs() {
		s := c.txns[least]
		if s.status != Open || s.deadline().After(now) {
			continue
		}
		r := Record{Op: "end", Txn: least, Action: Abort, Expired: true}
		c.apply(r)
		rs = append(rs, r)
		fs = append(fs, c.fanout(least, s))
	}
	return rs, fs
}

// NextDeadline is the earliest deadline of an open transaction.
func (c *Coordinator) NextDeadline() (time.Time, bool) {
	var at time.Time
	found := false
	for _, s := range c.txns {
		if s.status == Open && (!found || s.deadline().Before(at)) {
			at, found = s.deadline(), true
		}
	}
	return at, found
}

// Done finishes a transaction whose fan-out completed: the record to log
// (the transaction is forgotten).
func (c *Coordinator) Done(id ID) (Record, error) {
	s, err := c.get(id)
	if err != nil {
		return Record{}, err
	}
	if s.status != Committing && s.status != Aborting {
		return Record{}, fmt.Errorf("%w: transaction %v is %v, not ending", errkind.ErrInvalidTxnStatus, id, c.statusOf(s))
	}
	r := Record{Op: "done", Txn: id.Least}
	c.apply(r)
	return r, nil
}

// Replay applies a record read back from the log (recovery). Records
// about unknown transactions are ignored: the log is only ever appended
// by one owner at a time, so they cannot happen but in a log written by
// a broken owner, and dropping them is the safe reading.
func (c *Coordinator) Replay(r Record) {
	if r.Op != "new" {
		if _, ok := c.txns[r.Txn]; !ok {
			return
		}
	}
	c.apply(r)
}

// Ending lists the fan-outs of transactions that are ending (after a
// replay: the ends the previous owner had not finished).
func (c *Coordinator) Ending() []Fanout {
	var fs []Fanout
	for _, least := range c.sortedIDs() {
		if s := c.txns[least]; s.status == Committing || s.status == Aborting {
			fs = append(fs, c.fanout(least, s))
		}
	}
	return fs
}

// Info reports a transaction.
func (c *Coordinator) Info(id ID) (Info, bool) {
	s, err := c.get(id)
	if err != nil {
		return Info{}, false
	}
	return Info{ID: id, Status: c.statusOf(s), OpenedAt: s.openedAt, Timeout: s.timeout, Partitions: slices.Clone(s.parts), Subs: slices.Clone(s.subs)}, true
}

// Len is the number of transactions the coordinator holds.
func (c *Coordinator) Len() int { return len(c.txns) }

// Stats is what the coordinator reports of itself (the admin API's
// coordinator stats).
type Stats struct {
	// Next is the number (least significant half of the id) the next
	// transaction gets: the ones below it were all given out.
	Next uint64
	// Held is how many transactions the coordinator holds: open, or
	// ending (their fan-out not finished).
	Held int
	// Lowest is the number of the oldest transaction held; valid when
	// Held > 0. Every number below it has ended.
	Lowest uint64
}

// Stats reports the coordinator's counts.
func (c *Coordinator) Stats() Stats {
	s := Stats{Next: c.next, Held: len(c.txns)}
	first := true
	for least := range c.txns {
		if first || least < s.Lowest {
			s.Lowest, first = least, false
		}
	}
	return s
}

// Held lists every transaction the coordinator holds (open or ending),
// by id.
func (c *Coordinator) Held() []Info {
	out := make([]Info, 0, len(c.txns))
	for _, least := range c.sortedIDs() {
		info, _ := c.Info(ID{c.tc, least})
		out = append(out, info)
	}
	return out
}

func (c *Coordinator) statusOf(s *state) Status {
	if s.expired && s.status == Aborting {
		return Timeout
	}
	return s.status
}

func (c *Coordinator) fanout(least uint64, s *state) Fanout {
	a := Commit
	if s.status == Aborting {
		a = Abort
	}
	return Fanout{ID: ID{c.tc, least}, Action: a, Partitions: slices.Clone(s.parts), Subs: slices.Clone(s.subs)}
}

func (c *Coordinator) sortedIDs() []uint64 {
	ids := make([]uint64, 0, len(c.txns))
	for id := range c.txns {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// apply changes the state by r (valid for it).
func (c *Coordinator) apply(r Record) {
	switch r.Op {
	case "new":
		if _, ok := c.txns[r.Txn]; ok || r.Txn < c.floor {
			break // replayed over a snapshot that holds it, or saw it end
		}
		c.txns[r.Txn] = &state{status: Open, openedAt: time.UnixMilli(r.OpenedAt), timeout: time.Duration(r.TimeoutMs) * time.Millisecond}
		if r.Txn >= c.next {
			c.next = r.Txn + 1
		}
	case "partitions":
		s := c.txns[r.Txn]
		for _, p := range r.Partitions {
			if !slices.Contains(s.parts, p) {
				s.parts = append(s.parts, p)
			}
		}
	case "subs":
		s := c.txns[r.Txn]
		for _, sub := range r.Subs {
			if !slices.Contains(s.subs, sub) {
				s.subs = append(s.subs, sub)
			}
		}
	case "end":
		s := c.txns[r.Txn]
		s.status = Committing
		if r.Action == Abort {
			s.status = Aborting
		}
		s.expired = r.Expired
	case "done":
		delete(c.txns, r.Txn)
	}
}

// snapCoordTxn is one transaction in a coordinator's snapshot.
type snapCoordTxn struct {
	Txn        uint64   `json:"txn"`
	OpenedAt   int64    `json:"openedAt"`
	TimeoutMs  int64    `json:"timeoutMs"`
	Partitions []string `json:"partitions,omitempty"`
	Subs       []Sub    `json:"subs,omitempty"`
	// Ending: "" (open), "commit" or "abort"; Expired as in Record.
	Ending  string `json:"ending,omitempty"`
	Expired bool   `json:"expired,omitempty"`
}

type coordSnapshot struct {
	Next uint64         `json:"next"`
	Txns []snapCoordTxn `json:"txns"`
}

// Snapshot encodes the coordinator's whole state: restored, it stands
// for every record applied so far (the log before it may go).
func (c *Coordinator) Snapshot() []byte {
	s := coordSnapshot{Next: c.next, Txns: []snapCoordTxn{}}
	for _, least := range c.sortedIDs() {
		st := c.txns[least]
		t := snapCoordTxn{Txn: least, OpenedAt: st.openedAt.UnixMilli(), TimeoutMs: st.timeout.Milliseconds(),
			Partitions: st.parts, Subs: st.subs, Expired: st.expired}
		switch st.status {
		case Committing:
			t.Ending = "commit"
		case Aborting:
			t.Ending = "abort"
		}
		s.Txns = append(s.Txns, t)
	}
	b, _ := json.Marshal(s) // plain fields: cannot fail
	return b
}

// Restore replaces the coordinator's state by a snapshot's; the records
// logged after it are then replayed on top (applying a record twice
// changes nothing).
func (c *Coordinator) Restore(data []byte) error {
	var s coordSnapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("txn: bad coordinator snapshot: %w", err)
	}
	c.next, c.floor = s.Next, s.Next
	c.txns = map[uint64]*state{}
	for _, t := range s.Txns {
		st := &state{status: Open, openedAt: time.UnixMilli(t.OpenedAt), timeout: time.Duration(t.TimeoutMs) * time.Millisecond,
			parts: t.Partitions, subs: t.Subs, expired: t.Expired}
		switch t.Ending {
		case "commit":
			st.status = Committing
		case "abort":
			st.status = Aborting
		case "":
		default:
			return fmt.Errorf("txn: bad coordinator snapshot: ending %q", t.Ending)
		}
		c.txns[t.Txn] = st
		if t.Txn >= c.next {
			c.next = t.Txn + 1
		}
	}
	return nil
}
