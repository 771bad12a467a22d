package policy

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/isobar-mq/isobar/topic"
)

// Limits of the store, configurable through Config (docs/limits.md).
const (
	// DefaultMaxPartitions is Config.MaxPartitions when zero: the most
	// partitions a partitioned topic may have. Pulsar's
	// maxNumPartitionsPerPartitionedTopic defaults to 0 (no limit), which
	// lets one request make every later operation on the topic loop over,
	// or allocate for, two billion partitions; see docs/decisions.md.
	DefaultMaxPartitions = 1024
	// DefaultMaxBundles is Config.MaxBundles when zero: the most bundles a
	// new namespace may have (Pulsar's loadBalancerNamespaceMaximumBundles).
	DefaultMaxBundles = 128
)

// Ranges of policy values: a value outside is refused (ErrInvalid), never
// clamped, and one already stored is reported (ErrCorrupt), never used.
const (
	// MaxMessageTTLSeconds bounds message_ttl_in_seconds: Pulsar's field
	// is an int (int32).
	MaxMessageTTLSeconds = math.MaxInt32
	// MaxRetentionMinutes bounds retentionTimeInMinutes: the most minutes
	// a time.Duration holds (about 292 years). Pulsar's field is an int32,
	// whose top of range the broker could not represent; -1 is unlimited.
	MaxRetentionMinutes = math.MaxInt64 / int64(time.Minute)
	// MaxRetentionSizeMB bounds retentionSizeInMB: the most MiB whose
	// byte count fits an int64 (8 EiB); -1 is unlimited.
	MaxRetentionSizeMB = math.MaxInt64 >> 20
	// MaxBacklogQuotaTimeSeconds bounds a backlog quota's limitTime:
	// Pulsar's field is an int (int32).
	MaxBacklogQuotaTimeSeconds = math.MaxInt32
)

// MessageTTL converts message_ttl_in_seconds to a duration; zero and
// negative mean no TTL. A value out of range is an error (ErrInvalid),
// never a wrapped duration: 18446744074 seconds used to become 0.3 s.
func MessageTTL(seconds int) (time.Duration, error) {
	if seconds > MaxMessageTTLSeconds {
		return 0, fmt.Errorf("%w: message_ttl_in_seconds: %d is more than %d", ErrInvalid, seconds, MaxMessageTTLSeconds)
	}
	if seconds <= 0 {
		return 0, nil
	}
	return time.Duration(seconds) * time.Second, nil
}

// RetentionTime converts retentionTimeInMinutes to a duration; negative
// means unlimited (-1).
func RetentionTime(minutes int) (time.Duration, error) {
	if int64(minutes) > MaxRetentionMinutes {
		return 0, fmt.Errorf("%w: retentionTimeInMinutes: %d is more than %d (292 years; -1 is unlimited)", ErrInvalid, minutes, MaxRetentionMinutes)
	}
	if minutes < 0 {
		return -1, nil
	}
	return time.Duration(minutes) * time.Minute, nil
}

// RetentionSize converts retentionSizeInMB to bytes; negative means
// unlimited (-1).
func RetentionSize(mb int64) (int64, error) {
	if mb > MaxRetentionSizeMB {
		return 0, fmt.Errorf("%w: retentionSizeInMB: %d is more than %d (8 EiB; -1 is unlimited)", ErrInvalid, mb, int64(MaxRetentionSizeMB))
	}
	if mb < 0 {
		return -1, nil
	}
	return mb << 20, nil
}

// limits are the configurable bounds a write is checked against.
type limits struct {
	maxPartitions int
	maxBundles    int
}

func (s *Store) limits() limits {
	return limits{maxPartitions: s.maxPartitions(), maxBundles: s.maxBundles()}
}

func (s *Store) maxPartitions() int {
	if s.cfg.MaxPartitions == 0 {
		return DefaultMaxPartitions
	}
	return s.cfg.MaxPartitions
}

func (s *Store) maxBundles() int {
	if s.cfg.MaxBundles == 0 {
		return DefaultMaxBundles
	}
	return s.cfg.MaxBundles
}

// MaxPartitions is the most partitions a partitioned topic may have.
func (s *Store) MaxPartitions() int { return s.maxPartitions() }

// checkLimits checks what the configurable limits bound in p, a
// validated policy: only the values that differ from old (nil on create),
// so lowering a limit does not make every later update of a namespace
// that was within the old limit fail.
func (p *Policies) checkLimits(lim limits, old *Policies) error {
	var errs []error
	if b := p.Bundles; b != nil && b.NumBundles > lim.maxBundles {
		if old == nil || old.Bundles == nil || old.Bundles.NumBundles != b.NumBundles {
			errs = append(errs, fmt.Errorf("bundles: %d bundles, more than the maximum %d (broker.limits.maxBundlesPerNamespace)", b.NumBundles, lim.maxBundles))
		}
	}
	if a := p.AutoTopicCreation; a != nil && a.AllowAutoTopicCreation && a.DefaultNumPartitions != nil && *a.DefaultNumPartitions > lim.maxPartitions {
		var was *int
		if old != nil && old.AutoTopicCreation != nil {
			was = old.AutoTopicCreation.DefaultNumPartitions
		}
		if was == nil || *was != *a.DefaultNumPartitions {
			errs = append(errs, fmt.Errorf("autoTopicCreationOverride: defaultNumPartitions %d is more than the maximum %d partitions (broker.limits.maxPartitionsPerTopic)", *a.DefaultNumPartitions, lim.maxPartitions))
		}
	}
	return errors.Join(errs...)
}

// checkStored checks a namespace's policies as read from the store: what
// validate checks, without filling anything in (a read must not change
// what it reads). Permission grants are not checked: they are checked
// on every write, and a stored grant the store would refuse now (an
// action it does not know, from a record written by hand) grants nothing
// it does not name, so it is no reason to refuse the whole namespace.
func (p *Policies) checkStored() error {
	q := *p
	q.AuthPolicies = nil
	if p.Bundles != nil {
		b := *p.Bundles
		b.Boundaries = append([]string(nil), b.Boundaries...)
		q.Bundles = &b
	}
	return q.validate(0)
}

// checkPartitionedRecord checks a stored partitioned topic's record: a
// count the store would not accept now, or whose partitions' names
// storage cannot hold, is not acted on (every operation on a partitioned
// topic loops over its partitions).
func checkPartitionedRecord(name topic.Name, m PartitionedMetadata, max int) error {
	switch {
	case m.Partitions < 1:
		return fmt.Errorf("%d partitions", m.Partitions)
	case m.Partitions > max:
		return fmt.Errorf("%d partitions, more than the maximum %d (broker.limits.maxPartitionsPerTopic): raise the limit or delete the topic", m.Partitions, max)
	}
	if err := name.ValidPartitions(m.Partitions); err != nil {
		return fmt.Errorf("%d partitions: %w", m.Partitions, err)
	}
	return nil
}
