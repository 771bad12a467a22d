package broker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/broker/txn"
	"github.com/isobar-mq/isobar/broker/txncoord"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/topic"
)

// adminTxns serves the admin API's transaction endpoints
// (docs/transactions.md, Admin API): the coordinators' ones here, where
// a coordinator runs, the topics' ones where the topic is owned.
type adminTxns struct{ b *Broker }

// ownedCoordinator returns coordinator n when this broker owns it
// (recovering it if it runs none), else a NotOwnerError naming the
// owner. An id the region does not have is answered notFound.
func (a adminTxns) ownedCoordinator(ctx context.Context, n uint64, notFound *errkind.Error) (*txncoord.Coordinator, error) {
	b := a.b
	if !b.cfg.Transactions.Enabled {
		return nil, errTxnOff
	}
	if count := b.cfg.Transactions.coordinators(); n >= uint64(count) {
		return nil, fmt.Errorf("%w: transaction coordinator %d does not exist (there are %d)", notFound, n, count)
	}
	assign, err := topic.Parse(TCAssignTopic + "-partition-" + strconv.FormatUint(n, 10))
	if err != nil {
		return nil, err
	}
	if !b.deps.Placement.Owns(assign) {
		// Redirected here by the broker that placed it: take it.
		r, err := b.deps.Placement.Lookup(ctx, assign, adminapi.Authoritative(ctx))
		if err != nil {
			return nil, err
		}
		if !r.Self {
			return nil, &adminapi.NotOwnerError{URL: strings.TrimRight(r.HTTPURL, "/"), URLTLS: strings.TrimRight(r.HTTPURLTLS, "/"), Placed: true}
		}
	}
	return b.coordinator(ctx, n)
}

func (a adminTxns) TransactionMetadata(ctx context.Context, most, least uint64) (adminapi.TransactionMetadata, error) {
	tc, err := a.ownedCoordinator(ctx, most, errkind.ErrTransactionNotFound)
	if err != nil {
		return adminapi.TransactionMetadata{}, err
	}
	id := txn.ID{Most: most, Least: least}
	info, ok := tc.Info(id)
	if !ok {
		return adminapi.TransactionMetadata{}, fmt.Errorf("%w: transaction %v (never made, or ended)", errkind.ErrTransactionNotFound, id)
	}
	return metadataOf(info), nil
}

// metadataOf is Pulsar's TransactionMetadata of a transaction a
// coordinator holds.
func metadataOf(info txn.Info) adminapi.TransactionMetadata {
	m := adminapi.TransactionMetadata{
		TxnID: info.ID.String(), Status: info.Status.String(),
		OpenTimestamp: info.OpenedAt.UnixMilli(), TimeoutAt: info.OpenedAt.Add(info.Timeout).UnixMilli(),
		ProducedPartitions: map[string]adminapi.TransactionInBufferStats{},
		AckedPartitions:    map[string]map[string]adminapi.TransactionInPendingAckStats{},
	}
	for _, p := range info.Partitions {
		m.ProducedPartitions[p] = adminapi.TransactionInBufferStats{}
	}
	for _, s := range info.Subs {
		if m.AckedPartitions[s.Topic] == nil {
			m.AckedPartitions[s.Topic] = map[string]adminapi.TransactionInPendingAckStats{}
		}
		m.AckedPartitions[s.Topic][s.Subscription] = adminapi.TransactionInPendingAckStats{}
	}
	return m
}

func (a adminTxns) Coordinators(context.Context) (int, error) {
	if !a.b.cfg.Transactions.Enabled {
		return 0, errTxnOff
	}
	return a.b.cfg.Transactions.coordinators(), nil
}

func (a adminTxns) CoordinatorStats(ctx context.Context, n uint64) (adminapi.TransactionCoordinatorStats, error) {
	tc, err := a.ownedCoordinator(ctx, n, errkind.ErrNotFound)
	if err != nil {
		return adminapi.TransactionCoordinatorStats{}, err
	}
	s := tc.Stats()
	st := adminapi.TransactionCoordinatorStats{
		State:        "Ready",
		LeastSigBits: int64(s.Next) - 1,
		// Every number below the oldest held has ended; none held: every
		// number given out.
		LowWaterMark:     int64(s.Next) - 1,
		OngoingTxnSize:   int64(s.Held),
		RecoverStartTime: s.RecoverStart.UnixMilli(),
		RecoverEndTime:   s.RecoverEnd.UnixMilli(),
	}
	if s.Held > 0 {
		st.LowWaterMark = int64(s.Lowest) - 1
	}
	if s.Broken {
		st.State = "Close"
	}
	return st, nil
}

func (a adminTxns) SlowTransactions(ctx context.Context, n uint64, olderThan time.Duration) (map[string]adminapi.TransactionMetadata, error) {
	tc, err := a.ownedCoordinator(ctx, n, errkind.ErrNotFound)
	if err != nil {
		return nil, err
	}
	now := a.b.deps.Now()
	out := map[string]adminapi.TransactionMetadata{}
	for _, info := range tc.Held() {
		if now.Sub(info.OpenedAt) > olderThan {
			out[info.ID.String()] = metadataOf(info)
		}
	}
	return out, nil
}

// bufferTopic is the topic whose transaction buffer the admin API asks
// about, loaded here, or a NotOwnerError naming its owner.
func (a adminTxns) bufferTopic(ctx context.Context, name topic.Name) (*Topic, error) {
	if !a.b.cfg.Transactions.Enabled {
		return nil, errTxnOff
	}
	if name.Domain != topic.Persistent {
		return nil, fmt.Errorf("%w: %s: transactions need persistent topics", adminapi.ErrBadRequest, name)
	}
	return adminTopics{a.b}.owned(ctx, name, mustExist)
}

func (a adminTxns) TransactionBufferStats(ctx context.Context, name topic.Name) (adminapi.TransactionBufferStats, error) {
	t, err := a.bufferTopic(ctx, name)
	if err != nil {
		return adminapi.TransactionBufferStats{}, err
	}
	return t.txnBufferStats(), nil
}

func (a adminTxns) TransactionInBufferStats(ctx context.Context, name topic.Name, most, least uint64) (adminapi.TransactionInBufferStats, error) {
	t, err := a.bufferTopic(ctx, name)
	if err != nil {
		return adminapi.TransactionInBufferStats{}, err
	}
	return t.txnInBufferStats(txn.ID{Most: most, Least: least}), nil
}

// txnBufferStats reports the topic's transaction buffer (read only: the
// buffer is transactions.go's).
func (t *Topic) txnBufferStats() adminapi.TransactionBufferStats {
	st := adminapi.TransactionBufferStats{State: "Unused"}
	if t.ml == nil {
		return st
	}
	last := t.ml.LastConfirmed()
	st.MaxReadPosition = last.String()
	tt := t.tx.Load()
	if tt == nil {
		return st
	}
	st.State = "Ready"
	tt.mu.Lock()
	lim, held := tt.buf.Limit()
	st.OngoingTxnSize = int64(tt.buf.OngoingCount())
	tt.mu.Unlock()
	if held && lim.Compare(last) < 0 {
		st.MaxReadPosition = lim.String()
	}
	return st
}

// txnInBufferStats reports transaction id in the topic's buffer.
func (t *Topic) txnInBufferStats(id txn.ID) adminapi.TransactionInBufferStats {
	var st adminapi.TransactionInBufferStats
	tt := t.tx.Load()
	if tt == nil {
		return st
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if p, ok := tt.buf.FirstEntry(id); ok {
		st.StartPosition = p.String()
	}
	st.Aborted = tt.buf.WasAborted(id)
	return st
}

func (a adminTxns) pendingAckTopic(ctx context.Context, name topic.Name, sub string) (*Topic, error) {
	t, err := a.bufferTopic(ctx, name)
	if err != nil {
		return nil, err
	}
	// The durable subscriptions are the topic's cursors, as durableSub
	// reads them (without opening one: a read of stats changes nothing).
	if t.ml == nil || !slices.Contains(t.ml.Cursors(), sub) {
		return nil, fmt.Errorf("%w: %s on %s", ErrSubNotFound, sub, name)
	}
	return t, nil
}

func (a adminTxns) PendingAckStats(ctx context.Context, name topic.Name, sub string) (adminapi.TransactionPendingAckStats, error) {
	t, err := a.pendingAckTopic(ctx, name, sub)
	if err != nil {
		return adminapi.TransactionPendingAckStats{}, err
	}
	st := adminapi.TransactionPendingAckStats{State: "None"}
	tt := t.tx.Load()
	if tt == nil {
		return st, nil
	}
	st.State = "Ready"
	tt.mu.Lock()
	st.OngoingTxnSize = int64(tt.buf.Acks().Transactions(sub))
	tt.mu.Unlock()
	return st, nil
}

func (a adminTxns) TransactionInPendingAckStats(ctx context.Context, name topic.Name, sub string, most, least uint64) (adminapi.TransactionInPendingAckStats, error) {
	if _, err := a.pendingAckTopic(ctx, name, sub); err != nil {
		return adminapi.TransactionInPendingAckStats{}, err
	}
	// Individual acknowledgements only (cumulative ones in a transaction
	// are refused): no cumulative position to report.
	return adminapi.TransactionInPendingAckStats{}, nil
}
