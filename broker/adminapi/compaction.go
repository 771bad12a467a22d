package adminapi

import (
	"context"

	"github.com/isobar-mq/isobar/topic"
)

// LongRunningProcessStatus is Pulsar's LongRunningProcessStatus (admin
// JSON): status NOT_RUN, RUNNING, SUCCESS or ERROR, and the last run's
// error.
type LongRunningProcessStatus struct {
	Status    string `json:"status"`
	LastError string `json:"lastError"`
}

// Compactor (Broker.Compactor) is a broker that compacts topics. Without it
// the compaction endpoints answer 405.
type Compactor interface {
	// Compact starts compacting a non-partitioned topic or one
	// partition; an error of kind wire.ErrConflict when a compaction of
	// it is running.
	Compact(ctx context.Context, name topic.Name) error
	// CompactionStatus is the status of its last compaction.
	CompactionStatus(ctx context.Context, name topic.Name) (LongRunningProcessStatus, error)
}
