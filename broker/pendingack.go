package broker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/isobar-mq/isobar/broker/txn"
	"github.com/isobar-mq/isobar/errkind"
)

// Pending acknowledgements (docs/transactions.md): an ACK made in a
// transaction is recorded, not applied, until the transaction ends.

// pendingAcks are one subscription's acknowledgements in open
// transactions (topicTxn.mu guards them).
type pendingAcks struct {
	byPos map[Position]txn.ID
	byTxn map[txn.ID][]Position
}

// txnAck records consumer k's acknowledgement of ps in transaction tid.
// A position acknowledged already, or pending in another transaction, is
// a conflict (TransactionConflict), as in Pulsar; nothing is recorded
// then.
func (s *subscription) txnAck(k *consumer, tid txn.ID, ps []Position, cumulative bool) error {
	switch {
	case !s.t.b.cfg.Transactions.Enabled:
		return errTxnOff
	case s.cursor == nil:
		return fmt.Errorf("%w: a reader cannot acknowledge in a transaction", errkind.ErrNotAllowed)
	case cumulative:
		return fmt.Errorf("%w: cumulative acknowledgements in a transaction are not supported yet", errkind.ErrNotAllowed)
	}
	ctx, cancel := context.WithTimeout(k.c.ctx, 30*time.Second)
	defer cancel()
	tt, err := s.t.txnBuffer(ctx)
	if err != nil {
		return err
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.acks == nil {
		tt.acks = map[string]*pendingAcks{}
	}
	pa := tt.acks[s.name]
	if pa == nil {
		pa = &pendingAcks{byPos: map[Position]txn.ID{}, byTxn: map[txn.ID][]Position{}}
		tt.acks[s.name] = pa
	}
	for _, p := range ps {
		if s.cursor.IsAcked(p) {
			return fmt.Errorf("%w: message %v of subscription %s is acknowledged already", errkind.ErrTransactionConflict, p, s.name)
		}
		if other, ok := pa.byPos[p]; ok && other != tid {
			return fmt.Errorf("%w: message %v of subscription %s is acknowledged in transaction %v", errkind.ErrTransactionConflict, p, s.name, other)
		}
	}
	for _, p := range ps {
		if _, ok := pa.byPos[p]; !ok {
			pa.byPos[p] = tid
			pa.byTxn[tid] = append(pa.byTxn[tid], p)
		}
	}
	s.acked(k)
	return nil
}

// endTxnAcks ends transaction tid on subscription sub: a commit applies
// its acknowledgements to the cursor, an abort drops them and sends the
// messages again. A subscription that holds none for tid has nothing to
// do (an end told twice is done once).
func (t *Topic) endTxnAcks(ctx context.Context, sub string, tid txn.ID, a txn.Action) error {
	tt := t.tx.Load()
	if tt == nil {
		return nil
	}
	tt.mu.Lock()
	pa := tt.acks[sub]
	var ps []Position
	if pa != nil {
		ps = pa.byTxn[tid]
	}
	tt.mu.Unlock()
	if len(ps) == 0 {
		return nil
	}
	t.mu.Lock()
	s := t.subs[sub]
	t.mu.Unlock()
	if s == nil {
		// Unsubscribed meanwhile: nothing to acknowledge.
		t.forgetTxnAcks(sub, tid)
		return nil
	}
	slices.SortFunc(ps, func(x, y Position) int { return x.Compare(y) })
	if a == txn.Commit {
		if s.cursor != nil {
			if err := s.cursor.AckMany(ctx, ps); err != nil {
				return err // retried by the coordinator
			}
			t.subChanged(sub)
		}
		s.mu.Lock()
		s.d.Ack(ps)
		s.mu.Unlock()
	} else {
		// The messages go again to the consumers that hold them.
		s.mu.Lock()
		for _, c := range s.d.Consumers() {
			s.d.Redeliver(c, ps)
		}
		s.mu.Unlock()
	}
	t.forgetTxnAcks(sub, tid)
	s.kick()
	return nil
}

func (t *Topic) forgetTxnAcks(sub string, tid txn.ID) {
	tt := t.tx.Load()
	if tt == nil {
		return
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	pa := tt.acks[sub]
	if pa == nil {
		return
	}
	for _, p := range pa.byTxn[tid] {
		if pa.byPos[p] == tid {
			delete(pa.byPos, p)
		}
	}
	delete(pa.byTxn, tid)
	if len(pa.byTxn) == 0 {
		delete(tt.acks, sub)
	}
}
