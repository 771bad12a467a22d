package adminapi

import "context"

// Transactions serves the transaction endpoints (docs/transactions.md).
type Transactions interface {
	// TransactionMetadata describes transaction (most, least) as its
	// coordinator holds it: a TransactionNotFound error (404) when it
	// holds none (never made, or ended), a NotOwnerError when another
	// broker runs the coordinator.
	TransactionMetadata(ctx context.Context, most, least uint64) (TransactionMetadata, error)
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
// transaction (Pulsar's shape; nothing in it is filled yet).
type TransactionInBufferStats struct {
	StartPosition string `json:"startPosition,omitempty"`
	Aborted       bool   `json:"aborted"`
}

// TransactionInPendingAckStats is an acknowledged subscription's part of
// a transaction (Pulsar's shape; nothing in it is filled yet).
type TransactionInPendingAckStats struct {
	CumulativeAckPosition string `json:"cumulativeAckPosition,omitempty"`
}
