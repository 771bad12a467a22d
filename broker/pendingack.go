package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/broker/txn"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Pending acknowledgements (docs/transactions.md): an ACK made in a
// transaction is recorded, not applied, until the transaction ends. The
// record is a marker entry in the topic's own log (txn.MarkerAck), and
// so is the end (txn.MarkerAckEnd); the state is the transaction
// buffer's (txn.Acks), in its snapshot, and replayed with it.

// txnMarkerEntry is a marker entry of transaction id: never delivered
// (txnSkip), read back by loadTxnBuffer.
func (t *Topic) txnMarkerEntry(id txn.ID, marker int32, payload []byte) ([]byte, error) {
	meta := &pb.MessageMetadata{ProducerName: strp(ReservedPrefix + "txn"), SequenceId: u64p(0), PublishTime: u64p(uint64(t.b.deps.Now().UnixMilli())),
		MarkerType: &marker, TxnidMostBits: &id.Most, TxnidLeastBits: &id.Least}
	return wire.AppendEntry(nil, meta, payload)
}

// txnAck records consumer k's acknowledgement of ps in transaction tid
// and calls done with the outcome. A position acknowledged already, or
// pending in another transaction, is a conflict (TransactionConflict),
// as in Pulsar. Otherwise the positions are reserved, their record is
// appended to the topic's log (no lock held meanwhile), and once it is
// stored they are pending; a record that could not be stored fails the
// ACK and leaves nothing pending.
func (s *subscription) txnAck(k *consumer, tid txn.ID, ps []Position, cumulative bool, done func(error)) {
	switch {
	case !s.t.b.cfg.Transactions.Enabled:
		done(errTxnOff)
		return
	case s.cursor == nil:
		done(fmt.Errorf("%w: a reader cannot acknowledge in a transaction", errkind.ErrNotAllowed))
		return
	case cumulative:
		done(fmt.Errorf("%w: cumulative acknowledgements in a transaction are not supported yet", errkind.ErrNotAllowed))
		return
	case len(ps) == 0:
		done(nil)
		return
	}
	ctx, cancel := context.WithTimeout(k.c.ctx, 30*time.Second)
	defer cancel()
	// The buffer's cursor is made before the first record: replay
	// starts there.
	tt, err := s.t.txnBuffer(ctx)
	if err != nil {
		done(err)
		return
	}
	entry, err := s.t.txnMarkerEntry(tid, txn.MarkerAck, txn.EncodeAck(s.name, ps))
	if err != nil {
		done(err)
		return
	}
	tt.mu.Lock()
	r, err := tt.buf.Acks().Add(s.name, tid, ps, s.cursor.IsAcked, s.t.ml.LastConfirmed())
	tt.mu.Unlock()
	if err != nil {
		done(err)
		return
	}
	s.t.ml.AddEntryAsync(ctx, entry, func(_ mledger.Position, err error) {
		s.t.addFailed(err)
		tt.mu.Lock()
		if err != nil {
			tt.buf.Acks().Undo(r)
		} else {
			tt.buf.Acks().Confirm(r)
		}
		tt.mu.Unlock()
		if err == nil {
			s.acked(k)
		}
		done(err)
	})
}

// endTxnAcks ends transaction tid on subscription sub. Commit: its
// acknowledgements are applied to the cursor, then the end is recorded
// in the log, then forgotten. Abort: the end is recorded, then the
// messages are sent again and forgotten. A crash between the two leaves
// the acknowledgements pending after the replay, and the coordinator,
// which has no answer yet, sends the end again: done again, no harm. A
// subscription that holds none for tid has nothing to do (an end told
// twice is done once). Ends are written one at a time with the
// buffer's markers and snapshots (tt.ending).
func (t *Topic) endTxnAcks(ctx context.Context, sub string, tid txn.ID, a txn.Action) error {
	tt := t.tx.Load()
	if tt == nil {
		return nil
	}
	tt.ending.Lock()
	defer tt.ending.Unlock()
	tt.mu.Lock()
	ps, err := tt.buf.Acks().Ending(sub, tid)
	tt.mu.Unlock()
	if err != nil || len(ps) == 0 {
		return err // an ACK of tid is being recorded: the coordinator retries
	}
	var s *subscription
	if a == txn.Commit {
		// The subscription may not be loaded (no consumer since the
		// topic was): its cursor is.
		s, err = t.durableSub(ctx, sub)
		if errors.Is(err, ErrSubNotFound) {
			s, err = nil, nil // unsubscribed meanwhile: nothing to acknowledge
		}
		if err != nil {
			return err
		}
		if s != nil && s.cursor != nil {
			// Positions that are not in the log (a client's mistake) are
			// left out; the others are acknowledged.
			if err := s.cursor.AckMany(ctx, ps); err != nil && !errors.Is(err, mledger.ErrInvalidPosition) {
				return err // retried by the coordinator
			}
			t.subChanged(sub)
			s.mu.Lock()
			s.d.Ack(ps)
			s.mu.Unlock()
		}
	} else {
		t.mu.Lock()
		s = t.subs[sub]
		t.mu.Unlock()
	}
	entry, err := t.txnMarkerEntry(tid, txn.MarkerAckEnd, txn.EncodeAckEnd(sub, a))
	if err != nil {
		return err
	}
	_, err = t.ml.AddEntry(ctx, entry)
	t.addFailed(err)
	if err != nil {
		return err
	}
	tt.mu.Lock()
	tt.buf.Acks().End(sub, tid)
	tt.mu.Unlock()
	if s == nil {
		return nil
	}
	if a == txn.Abort {
		// The messages go again to the consumers that hold them.
		s.mu.Lock()
		for _, c := range s.d.Consumers() {
			s.d.Redeliver(c, ps)
		}
		s.mu.Unlock()
	}
	s.kick()
	return nil
}
