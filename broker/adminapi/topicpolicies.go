package adminapi

import (
	"context"
	"time"

	"github.com/isobar-mq/isobar/topic"
)

// TopicDefaults are the broker-level values of topic policies that the
// broker configures, answered by GET .../{topic}/{policy}?applied=true
// when neither the topic nor its namespace sets one (the others answer
// Pulsar's value for no limit, or nothing).
type TopicDefaults struct {
	// MaxMessageSize is the broker's largest message (zero:
	// wire.MaxMessageSize); a topic's own maxMessageSize may not exceed
	// it.
	MaxMessageSize int
	// MaxUnackedPerConsumer is broker.Limits.MaxUnackedPerConsumer (zero:
	// 50000; negative: no limit, answered 0).
	MaxUnackedPerConsumer int
	// MaxUnackedPerSubscription is broker.Limits.MaxUnackedPerSubscription
	// (zero: 200000; negative: no limit, answered 0).
	MaxUnackedPerSubscription int
	// DeduplicationSnapshotInterval is the broker's
	// (broker.Config.DeduplicationSnapshotInterval; zero: 120s;
	// negative: off, answered 0), answered in whole seconds.
	DeduplicationSnapshotInterval time.Duration
	// MaxDeliveryDelay is broker.Limits.MaxDeliveryDelay: the broker's
	// delayed delivery is on, without a tick, with this longest delay
	// (zero: none).
	MaxDeliveryDelay time.Duration
	// Persistence is the shape of the broker's new ledgers (broker.ledger),
	// answered as the persistence policy; nil: not known, answered 204.
	Persistence *LedgerShape
}

// LedgerShape is the ensemble size and the write and ack quorums of a
// broker's new ledgers.
type LedgerShape struct {
	EnsembleSize, WriteQuorum, AckQuorum int
}

// TopicPolicyRefresher (Broker.PolicyRefresher) applies a change to a
// topic's own policies at once (the broker does, for the topics it has
// loaded); without it the change applies when policies are next re-read.
type TopicPolicyRefresher interface {
	RefreshTopicPolicies(ctx context.Context, name topic.Name) error
}
