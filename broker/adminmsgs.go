package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/topic"
)

// The admin API's reading of messages and topic properties (adminapi.Topics).

// persistent loads a persistent topic here for an admin operation op.
func (a adminTopics) persistent(ctx context.Context, name topic.Name, op string) (*Topic, error) {
	t, err := a.owned(ctx, name, mustExist)
	if err != nil {
		return nil, err
	}
	if t.ml == nil {
		return nil, fmt.Errorf("%w: %s on non-persistent topic %s", adminapi.ErrNotAllowed, op, name)
	}
	return t, nil
}

// readEntry reads the stored entry at p.
func (t *Topic) readEntry(ctx context.Context, p Position) ([]byte, error) {
	if !t.ml.Valid(p) {
		return nil, fmt.Errorf("%w: %s in %s", adminapi.ErrEntryNotFound, posString(p), t.name)
	}
	es, _, err := t.ml.Read(ctx, p, 1)
	if err != nil {
		return nil, err
	}
	if len(es) == 0 || es[0].Position != p {
		return nil, fmt.Errorf("%w: %s in %s", adminapi.ErrEntryNotFound, posString(p), t.name)
	}
	return es[0].Data, nil
}

func (t *Topic) adminID(p Position) adminapi.MessageID {
	return adminapi.MessageID{LedgerID: p.Ledger, EntryID: p.Entry, PartitionIndex: t.name.Partition(), BatchIndex: -1}
}

func (a adminTopics) PeekMessage(ctx context.Context, name topic.Name, sub string, n int64) (adminapi.MessageID, []byte, error) {
	if err := ValidSubscriptionName(sub); err != nil {
		return adminapi.MessageID{}, nil, err
	}
	t, err := a.persistent(ctx, name, "peeking messages")
	if err != nil {
		return adminapi.MessageID{}, nil, err
	}
	var p Position
	var found bool
	t.mu.Lock()
	s := t.subs[sub]
	t.mu.Unlock()
	c, err := t.ml.OpenExistingCursor(ctx, sub)
	switch {
	case err == nil:
		p, found = c.NthUnacked(n)
	case !errors.Is(err, mledger.ErrNoCursor):
		return adminapi.MessageID{}, nil, err
	case s != nil:
		// A reader's (non-durable) subscription: from where it started.
		md, _ := s.markDelete()
		p, found = t.ml.NthAfter(md, n)
	default:
		// Pulsar creates the subscription at the earliest position and
		// peeks there; the same entries, with nothing created.
		p, found = t.ml.NthEntry(n)
	}
	if !found {
		return adminapi.MessageID{}, nil, fmt.Errorf("%w: no message at position %d of subscription %s on %s", adminapi.ErrEntryNotFound, n, sub, name)
	}
	data, err := t.readEntry(ctx, p)
	if err != nil {
		return adminapi.MessageID{}, nil, err
	}
	return t.adminID(p), data, nil
}

func (a adminTopics) ExamineMessage(ctx context.Context, name topic.Name, earliest bool, n int64) (adminapi.MessageID, []byte, error) {
	t, err := a.persistent(ctx, name, "examining messages")
	if err != nil {
		return adminapi.MessageID{}, nil, err
	}
	p, found := t.ml.NthLastEntry(n)
	from := "latest"
	if earliest {
		p, found = t.ml.NthEntry(n)
		from = "earliest"
	}
	if !found {
		return adminapi.MessageID{}, nil, fmt.Errorf("%w: no message at position %d from the %s of %s", adminapi.ErrEntryNotFound, n, from, name)
	}
	data, err := t.readEntry(ctx, p)
	if err != nil {
		return adminapi.MessageID{}, nil, err
	}
	return t.adminID(p), data, nil
}

func (a adminTopics) MessageIDByTime(ctx context.Context, name topic.Name, ts time.Time) (adminapi.MessageID, error) {
	t, err := a.persistent(ctx, name, "getting a message id by time")
	if err != nil {
		return adminapi.MessageID{}, err
	}
	p, err := t.findByTime(ctx, ts)
	if err != nil {
		return adminapi.MessageID{}, err
	}
	if !t.ml.Valid(p) {
		return adminapi.MessageID{}, fmt.Errorf("%w: no message published at or after %s on %s", adminapi.ErrEntryNotFound, ts.UTC().Format(time.RFC3339Nano), name)
	}
	return t.adminID(p), nil
}

func (a adminTopics) Properties(ctx context.Context, name topic.Name) (map[string]string, error) {
	t, err := a.persistent(ctx, name, "topic properties")
	if err != nil {
		return nil, err
	}
	return t.ml.Properties(), nil
}

func (a adminTopics) UpdateProperties(ctx context.Context, name topic.Name, set map[string]string, remove []string) error {
	t, err := a.persistent(ctx, name, "topic properties")
	if err != nil {
		return err
	}
	return t.ml.UpdateProperties(ctx, set, remove)
}
