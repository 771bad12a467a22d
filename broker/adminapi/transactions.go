package adminapi

import (
	"context"
	"time"

	"github.com/isobar-mq/isobar/topic"
)

// Transactions serves the transaction endpoints (docs/transactions.md,
// Admin API). With transactions off every method answers the same
// NotAllowed error.
type Transactions interface {
	// TransactionMetadata describes transaction (most, least) as its
	// coordinator holds it: a TransactionNotFound error (404) when it
	// holds none (never made, or ended), a NotOwnerError when another
	// broker runs the coordinator.
	TransactionMetadata(ctx context.Context, most, least uint64) (TransactionMetadata, error)
	// Coordinators is the number of transaction coordinators of the
	// region (ids 0 to n-1).
	Coordinators(ctx context.Context) (int, error)
	// CoordinatorStats reports coordinator id: a NotFound error (404)
	// for an id the region does not have, a NotOwnerError when another
	// broker runs it.
	CoordinatorStats(ctx context.Context, id uint64) (TransactionCoordinatorStats, error)
	// SlowTransactions lists the transactions coordinator id holds (open,
	// or ending) that were opened more than olderThan ago, by txnId;
	// errors as CoordinatorStats.
	SlowTransactions(ctx context.Context, id uint64, olderThan time.Duration) (map[string]TransactionMetadata, error)
	// TransactionBufferStats reports the transaction buffer of a
	// persistent topic: a TopicNotFound error (404) for a topic that
	// does not exist, a NotOwnerError when another broker owns it.
	TransactionBufferStats(ctx context.Context, name topic.Name) (TransactionBufferStats, error)
	// TransactionInBufferStats reports transaction (most, least) in a
	// topic's buffer; errors as TransactionBufferStats.
	TransactionInBufferStats(ctx context.Context, name topic.Name, most, least uint64) (TransactionInBufferStats, error)
	// PendingAckStats reports the pending acknowledgements of
	// subscription sub of a persistent topic: errors as
	// TransactionBufferStats, and a SubscriptionNotFound error (404) for
	// a subscription the topic does not have.
	PendingAckStats(ctx context.Context, name topic.Name, sub string) (TransactionPendingAckStats, error)
	// TransactionInPendingAckStats reports transaction (most, least) in
	// subscription sub's pending acknowledgements; errors as
	// PendingAckStats.
	TransactionInPendingAckStats(ctx context.Context, name topic.Name, sub string, most, least uint64) (TransactionInPendingAckStats, error)
}

// TransactionMetadata is Pulsar's TransactionMetadata (admin JSON).
type TransactionMetadata struct {
	TxnID         string `json:"txnId"`
	Status        string `json:"status"`
	OpenTimestamp int64  `json:"openTimestamp"`
	TimeoutAt     int64  `json:"timeoutAt"`
	// ProducedPartitions: by topic; AckedPartitions: by topic, then
	// subscription.
	ProducedPartitions map[string]TransactionInBufferStats                `json:"producedPartitions"`
	AckedPartitions    map[string]map[string]TransactionInPendingAckStats `json:"ackedPartitions"`
}

// TransactionInBufferStats is a produced partition's part of a
// transaction (Pulsar's shape). GET transactionInBufferStats fills it;
// TransactionMetadata's producedPartitions leave it empty.
type TransactionInBufferStats struct {
	// StartPosition is the transaction's first entry in the topic,
	// "ledger:entry", while it is ongoing there; absent otherwise.
	StartPosition string `json:"startPosition,omitempty"`
	// Aborted: the transaction ended aborted on this topic.
	Aborted bool `json:"aborted"`
}

// TransactionInPendingAckStats is an acknowledged subscription's part of
// a transaction (Pulsar's shape). CumulativeAckPosition is Pulsar's
// position of a cumulative acknowledgement in the transaction: never
// filled, since Isobar refuses cumulative acknowledgements in a
// transaction.
type TransactionInPendingAckStats struct {
	CumulativeAckPosition string `json:"cumulativeAckPosition,omitempty"`
}

// TransactionPendingAckStats is Pulsar's TransactionPendingAckStats,
// without what Isobar does not keep (lowWaterMarks).
type TransactionPendingAckStats struct {
	// State is "Ready" for a subscription of a topic with a transaction
	// buffer (the pending acknowledgements live in it), "None" otherwise.
	State string `json:"state"`
	// OngoingTxnSize is how many transactions have acknowledgements
	// pending on the subscription.
	OngoingTxnSize int64 `json:"ongoingTxnSize"`
	// RecoverStartTime and RecoverEndTime are always 0: Isobar does not
	// record them.
	RecoverStartTime int64 `json:"recoverStartTime"`
	RecoverEndTime   int64 `json:"recoverEndTime"`
}

// TransactionCoordinatorStats is Pulsar's TransactionCoordinatorStats.
type TransactionCoordinatorStats struct {
	// State is Pulsar's coordinator state: "Ready" for a running one.
	State string `json:"state"`
	// LeastSigBits is the number of the last transaction given out; -1
	// before the first.
	LeastSigBits int64 `json:"leastSigBits"`
	// LowWaterMark: every transaction numbered up to it has ended.
	LowWaterMark int64 `json:"lowWaterMark"`
	// OngoingTxnSize is how many transactions the coordinator holds
	// (open, or ending).
	OngoingTxnSize int64 `json:"ongoingTxnSize"`
	// RecoverStartTime and RecoverEndTime (Unix ms) are when this
	// broker's coordinator began and finished reading its log back.
	RecoverStartTime int64 `json:"recoverStartTime"`
	RecoverEndTime   int64 `json:"recoverEndTime"`
}

// TransactionBufferStats is Pulsar's TransactionBufferStats, without
// what Isobar's buffer does not have (lowWaterMarks, snapshotStats).
type TransactionBufferStats struct {
	// State is "Ready" for a topic with a buffer (it has had a
	// transactional entry), "Unused" for one without.
	State string `json:"state"`
	// MaxReadPosition is the last position dispatch may read,
	// "ledger:entry": just before the first entry of the oldest ongoing
	// transaction, else the log's last entry.
	MaxReadPosition string `json:"maxReadPosition"`
	// LastSnapshotTimestamps, RecoverStartTime and RecoverEndTime are
	// always 0: Isobar does not record them.
	LastSnapshotTimestamps int64 `json:"lastSnapshotTimestamps"`
	// OngoingTxnSize is how many transactions have entries in the topic
	// and have not ended.
	OngoingTxnSize   int64 `json:"ongoingTxnSize"`
	RecoverStartTime int64 `json:"recoverStartTime"`
	RecoverEndTime   int64 `json:"recoverEndTime"`
}
