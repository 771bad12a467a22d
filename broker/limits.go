package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Limits bound what clients may ask of a broker: the admin API, the
// binary protocol and the configuration store it writes. docs/limits.md
// lists each with its Pulsar equivalent and the error a client sees.
// Zero values mean the stated defaults.
type Limits struct {
	// MaxPartitionsPerTopic bounds a partitioned topic's partitions, on
	// create, update and auto-creation, and when a stored record is read
	// (a record beyond it is reported and not acted on; it can be
	// deleted). Zero means 1024. Pulsar's
	// maxNumPartitionsPerPartitionedTopic, whose default 0 (no limit) this
	// departs from.
	MaxPartitionsPerTopic int `yaml:"maxPartitionsPerTopic"`
	// MaxTopicsPerNamespace bounds a namespace's topics in this region,
	// each partition counting as one (non-persistent topics, which are not
	// stored, are not counted), when a topic or partitioned topic is
	// created, auto-creation included. Zero means no limit, as Pulsar's
	// maxTopicsPerNamespace.
	MaxTopicsPerNamespace int `yaml:"maxTopicsPerNamespace"`
	// MaxBundlesPerNamespace bounds the bundles a new namespace may ask
	// for. Zero means 128, Pulsar's loadBalancerNamespaceMaximumBundles.
	MaxBundlesPerNamespace int `yaml:"maxBundlesPerNamespace"`
	// MaxAdminRequestBytes bounds the body of an admin API request (413
	// beyond). Zero means 1 MiB; at most 16 MiB.
	MaxAdminRequestBytes int `yaml:"maxAdminRequestBytes"`
	// MaxDeliveryDelay refuses a message whose deliver-at time is further
	// ahead than this. Zero means no limit, as Pulsar's
	// delayedDeliveryMaxDelayInMillis. A namespace's or topic's
	// delayedDelivery policy replaces it (and may turn delayed delivery
	// off).
	MaxDeliveryDelay time.Duration `yaml:"maxDeliveryDelay"`
	// MaxUnackedPerConsumer stops dispatching to a consumer of a Shared or
	// Key_Shared subscription holding this many unacknowledged entries (a
	// batch counts once) until it acknowledges some. Zero means 50000,
	// Pulsar's maxUnackedMessagesPerConsumer; negative means no limit. A
	// namespace's maxUnackedMessagesPerConsumer or a topic's
	// maxUnackedMessagesOnConsumer replaces it.
	MaxUnackedPerConsumer int `yaml:"maxUnackedPerConsumer"`
	// MaxUnackedPerSubscription stops dispatching to every consumer of a
	// Shared or Key_Shared subscription while the subscription holds this
	// many unacknowledged entries (a batch counts once); it resumes as
	// acknowledgements bring it under. Zero means 200000, Pulsar's
	// maxUnackedMessagesPerSubscription (four times its per-consumer
	// default); negative means no limit. A namespace's
	// maxUnackedMessagesPerSubscription or a topic's
	// maxUnackedMessagesOnSubscription replaces it.
	MaxUnackedPerSubscription int `yaml:"maxUnackedPerSubscription"`
	// HandshakeTimeout bounds the wait for a new connection's CONNECT
	// (before it, frames are limited to 64 KiB); zero means 10s.
	HandshakeTimeout time.Duration `yaml:"handshakeTimeout"`
	// MaxConnections bounds the connections served at once and
	// MaxConnectionsPerIP those from one client address; a connection
	// beyond either gets an ERROR (TooManyRequests, which clients retry)
	// and is closed. Zero means no limit, as Pulsar's brokerMaxConnections
	// and brokerMaxConnectionsPerIp.
	MaxConnections      int `yaml:"maxConnections"`
	MaxConnectionsPerIP int `yaml:"maxConnectionsPerIP"`
	// MaxConcurrentLookups bounds the lookups and partitioned-metadata
	// requests in progress in the broker; more get TooManyRequests. Zero
	// means 50000 (Pulsar's maxConcurrentLookupRequest).
	MaxConcurrentLookups int `yaml:"maxConcurrentLookups"`
	// MaxPendingRequests bounds the requests one connection has in
	// progress (producer and consumer creation, lookups, seeks...); more
	// get TooManyRequests. Zero means 1000.
	MaxPendingRequests int `yaml:"maxPendingRequests"`
}

// Defaults of Limits.
const (
	DefaultMaxAdminRequestBytes  = 1 << 20
	MaxAdminRequestBytes         = 16 << 20
	DefaultMaxUnackedPerConsumer = 50000
	// DefaultMaxUnackedPerSubscription is Pulsar's
	// maxUnackedMessagesPerSubscription: 4 × its per-consumer default.
	DefaultMaxUnackedPerSubscription = 4 * DefaultMaxUnackedPerConsumer
	// DefaultDeduplicationSnapshotInterval is Pulsar's
	// brokerDeduplicationSnapshotIntervalSeconds.
	DefaultDeduplicationSnapshotInterval = 120 * time.Second
)

// Validate reports every problem with the limits at once.
func (l Limits) Validate() error {
	var errs []error
	if l.MaxPartitionsPerTopic < 0 || l.MaxPartitionsPerTopic > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("broker.limits.maxPartitionsPerTopic: %d is not in [0, %d]", l.MaxPartitionsPerTopic, math.MaxInt32))
	}
	if l.MaxTopicsPerNamespace < 0 {
		errs = append(errs, fmt.Errorf("broker.limits.maxTopicsPerNamespace: %d is negative", l.MaxTopicsPerNamespace))
	}
	if l.MaxBundlesPerNamespace < 0 || l.MaxBundlesPerNamespace > topic.MaxBundles {
		errs = append(errs, fmt.Errorf("broker.limits.maxBundlesPerNamespace: %d is not in [0, %d]", l.MaxBundlesPerNamespace, topic.MaxBundles))
	}
	if l.MaxAdminRequestBytes < 0 || l.MaxAdminRequestBytes > MaxAdminRequestBytes {
		errs = append(errs, fmt.Errorf("broker.limits.maxAdminRequestBytes: %d is not in [0, %d]", l.MaxAdminRequestBytes, MaxAdminRequestBytes))
	}
	if l.MaxDeliveryDelay < 0 {
		errs = append(errs, fmt.Errorf("broker.limits.maxDeliveryDelay: %v is negative", l.MaxDeliveryDelay))
	}
	if l.HandshakeTimeout < 0 {
		errs = append(errs, fmt.Errorf("broker.limits.handshakeTimeout: %v is negative", l.HandshakeTimeout))
	}
	for name, v := range map[string]int{"maxConnections": l.MaxConnections, "maxConnectionsPerIP": l.MaxConnectionsPerIP, "maxConcurrentLookups": l.MaxConcurrentLookups, "maxPendingRequests": l.MaxPendingRequests} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("broker.limits.%s: %d is negative", name, v))
		}
	}
	return errors.Join(errs...)
}

// WithDefaults returns the limits with zero values replaced by their
// defaults (MaxTopicsPerNamespace and MaxDeliveryDelay stay 0: no limit).
func (l Limits) WithDefaults() Limits {
	if l.MaxPartitionsPerTopic == 0 {
		l.MaxPartitionsPerTopic = policy.DefaultMaxPartitions
	}
	if l.MaxBundlesPerNamespace == 0 {
		l.MaxBundlesPerNamespace = policy.DefaultMaxBundles
	}
	if l.MaxAdminRequestBytes == 0 {
		l.MaxAdminRequestBytes = DefaultMaxAdminRequestBytes
	}
	if l.MaxUnackedPerConsumer == 0 {
		l.MaxUnackedPerConsumer = DefaultMaxUnackedPerConsumer
	}
	if l.MaxUnackedPerSubscription == 0 {
		l.MaxUnackedPerSubscription = DefaultMaxUnackedPerSubscription
	}
	if l.HandshakeTimeout == 0 {
		l.HandshakeTimeout = 10 * time.Second
	}
	if l.MaxConcurrentLookups == 0 {
		l.MaxConcurrentLookups = 50000
	}
	if l.MaxPendingRequests == 0 {
		l.MaxPendingRequests = 1000
	}
	return l
}

// ErrTooManyTopics: creating the topic would pass the namespace's topic
// limit (Pulsar: 412 "Exceed maximum number of topics in namespace",
// NotAllowedError on the binary protocol).
var ErrTooManyTopics = errkind.Sentinel(errkind.ErrPreconditionFailed, "broker: too many topics in the namespace")

// ErrTooManySubscriptions: a new subscription would pass the topic's
// maxSubscriptionsPerTopic (412; NotAllowedError on the binary
// protocol, as Pulsar).
var ErrTooManySubscriptions = errkind.Sentinel(errkind.ErrPreconditionFailed, "broker: too many subscriptions on the topic")

// CheckTopicQuota reports, when namespace ns has a topic limit (its
// maxTopicsPerNamespace policy, else the dynamic setting, else
// Limits.MaxTopicsPerNamespace), whether it may get adding more topics (a
// partitioned topic counts its partitions). Concurrent creations may pass it together: the
// limit can be overshot by the creations in flight, as in Pulsar.
func (b *Broker) CheckTopicQuota(ctx context.Context, ns string, adding int) error {
	if adding <= 0 {
		return nil
	}
	pol, err := b.deps.Namespaces.Policy(ctx, ns)
	if err != nil {
		return err
	}
	return b.checkTopicQuota(ctx, ns, adding, b.maxTopics(pol))
}

// checkTopicQuota is CheckTopicQuota with the namespace's limit max.
func (b *Broker) checkTopicQuota(ctx context.Context, ns string, adding, max int) error {
	if max <= 0 || adding <= 0 {
		return nil
	}
	n, err := b.countTopics(ctx, ns)
	if err != nil {
		return err
	}
	if n+adding > max {
		return fmt.Errorf("%w: namespace %s has %d topics (partitions counted), %d more would pass the limit of %d (maxTopicsPerNamespace)", ErrTooManyTopics, ns, n, adding, max)
	}
	return nil
}

// countTopics counts a namespace's stored topics: its non-partitioned
// persistent topics and every partition of its partitioned topics (of
// both domains, created yet or not).
func (b *Broker) countTopics(ctx context.Context, ns string) (int, error) {
	stored, err := b.PersistentTopics(ctx, ns)
	if err != nil {
		return 0, err
	}
	partitioned := map[topic.Name]bool{}
	n := 0
	if l, ok := b.deps.Namespaces.(PartitionedLister); ok {
		pts, err := l.ListPartitioned(ctx, ns)
		if err != nil {
			return 0, err
		}
		for _, pt := range pts {
			partitioned[pt.Name] = true
			if pt.Err == nil {
				n += pt.Partitions
			}
		}
	}
	for _, s := range stored {
		name, err := topic.Parse(s)
		if err != nil {
			continue
		}
		if name.Partition() >= 0 && partitioned[name.Base()] {
			continue // counted with its partitioned topic
		}
		n++
	}
	return n, nil
}

// ValidSubscriptionName is the one rule for subscription names, on the
// binary protocol and in the admin API alike: what the managed ledger can
// store as a cursor (1 to mledger.MaxNameLen bytes of UTF-8, no '/', no
// spaces or control characters), for durable subscriptions and readers
// alike. The error is of kind errkind.ErrBadRequest (400; NotAllowedError on
// the binary protocol), as for an empty or reserved name. Names starting
// with ReservedPrefix are the broker's own and refused where clients
// subscribe.
func ValidSubscriptionName(sub string) error {
	if sub == "" {
		return fmt.Errorf("%w: empty subscription name", ErrInvalidArgument)
	}
	if err := mledger.ValidateCursorName(sub); err != nil {
		return fmt.Errorf("%w: subscription name: %w", ErrInvalidArgument, err)
	}
	return nil
}

// checkSend checks the numbers of a SEND to t the broker acts on:
// sequence ids must fit the int64 de-duplication compares them as (a
// larger one read as negative would have the message dropped as a
// duplicate, silently), and, while t's delayed delivery is on, a
// deliver-at time may not be further ahead than its longest delay (the
// topic's or namespace's delayedDelivery policy, else
// Limits.MaxDeliveryDelay).
func (b *Broker) checkSend(t *Topic, seq, highest uint64, meta *pb.MessageMetadata) error {
	if seq > math.MaxInt64 || highest > math.MaxInt64 {
		return fmt.Errorf("%w: sequence id %d (highest %d) is more than %d", ErrInvalidArgument, seq, highest, int64(math.MaxInt64))
	}
	if dd := t.delayedDelivery(); !dd.off && dd.max > 0 && meta != nil {
		if at := meta.GetDeliverAtTime(); at > 0 {
			now := b.deps.Now().UnixMilli()
			if at > now && at-now > dd.max.Milliseconds() {
				return fmt.Errorf("%w: deliver-at time is %v ahead, more than the maximum delivery delay %v (%s)",
					errkind.ErrNotAllowed, time.Duration(min(at-now, math.MaxInt64/int64(time.Millisecond)))*time.Millisecond, dd.max, dd.from)
			}
		}
	}
	return nil
}

// clientTime converts a client's publish time (Unix milliseconds, a
// uint64 on the wire) to a time; beyond int64 is the end of time.
func clientTime(ms uint64) time.Time {
	return time.UnixMilli(int64(min(ms, math.MaxInt64)))
}

// rollback is now minus seconds seconds, for a reader's
// start_message_rollback_duration_sec: a duration reaching before the
// epoch (or beyond what a time.Duration holds) means from the start.
func rollback(now time.Time, seconds uint64) time.Time {
	if since := now.Unix(); since <= 0 || seconds >= uint64(since) {
		return time.Unix(0, 0)
	}
	return now.Add(-time.Duration(seconds) * time.Second)
}

// maxUnackedPerConsumer is the most unacknowledged entries a consumer of
// a Shared or Key_Shared subscription of t may hold (0: no limit): the
// topic's own maxUnackedMessagesOnConsumer, else its namespace's, else
// Limits.MaxUnackedPerConsumer.
func (t *Topic) maxUnackedPerConsumer() int {
	return unackedLimit(t.maxUnacked.Load(), t.b.cfg.Limits.MaxUnackedPerConsumer)
}

// maxUnackedPerSubscription is the most unacknowledged entries a Shared
// or Key_Shared subscription of t may hold (0: no limit): the topic's
// own maxUnackedMessagesOnSubscription, else its namespace's, else
// Limits.MaxUnackedPerSubscription.
func (t *Topic) maxUnackedPerSubscription() int {
	return unackedLimit(t.maxUnackedSub.Load(), t.b.cfg.Limits.MaxUnackedPerSubscription)
}

// unackedLimit resolves a NamespacePolicy limit v (0: the broker's,
// negative: none) over the broker's limit def (negative: none); 0 is no
// limit.
func unackedLimit(v int64, def int) int {
	switch {
	case v < 0:
		return 0
	case v > 0:
		return int(v)
	}
	return max(def, 0)
}

// unackedPolicy is a NamespacePolicy limit from a policy's value: unset
// (nil) keeps the broker's (0), Pulsar's 0 is no limit (-1).
func unackedPolicy(v *int) int {
	switch {
	case v == nil:
		return 0
	case *v == 0:
		return -1
	}
	return *v
}

// delayPolicy is how a topic's subscriptions treat deliver-at times:
// off delivers them at once; tick is the granularity of the timer that
// releases them (a message may come up to one tick late, never early;
// zero: the deliver-at time itself); max refuses, at SEND, deliver-at
// times further ahead (zero: no limit), from naming where it was set.
type delayPolicy struct {
	off       bool
	tick, max time.Duration
	from      string
}

// delayPolicyOf resolves the delayed delivery of a topic with policy
// pol: its own or its namespace's delayedDelivery, else the broker's
// (on, no tick, Limits.MaxDeliveryDelay; one value its topics share).
func (b *Broker) delayPolicyOf(pol NamespacePolicy) *delayPolicy {
	d := pol.DelayedDelivery
	if d == nil {
		b.delayDefaultOnce.Do(func() {
			b.delayDefault = &delayPolicy{max: b.cfg.Limits.MaxDeliveryDelay, from: "broker.limits.maxDeliveryDelay"}
		})
		return b.delayDefault
	}
	return &delayPolicy{
		off:  !d.Active,
		tick: time.Duration(d.TickTime) * time.Millisecond,
		max:  time.Duration(min(d.MaxDelayInMillis, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond,
		from: "delayedDelivery.maxDeliveryDelayInMillis",
	}
}

// delayedDelivery is t's delayed delivery policy.
func (t *Topic) delayedDelivery() delayPolicy {
	if d := t.delay.Load(); d != nil {
		return *d
	}
	return delayPolicy{}
}

// releaseAt is when a message due at is released: at, rounded up to the
// tick (on the Unix clock's grid of ticks), so never before it.
func (d delayPolicy) releaseAt(at time.Time) time.Time {
	if d.tick <= 0 {
		return at
	}
	ms, tick := at.UnixMilli(), d.tick.Milliseconds()
	if r := (ms%tick + tick) % tick; r != 0 && ms <= math.MaxInt64-tick {
		ms += tick - r
	}
	if rel := time.UnixMilli(ms); rel.After(at) {
		return rel
	}
	return at
}

// dedupSnapshotInterval is how often, at least, t's de-duplication
// state is snapshotted while entries are written (0: never by time):
// the topic's or its namespace's deduplicationSnapshotInterval, else
// Config.DeduplicationSnapshotInterval.
func (b *Broker) dedupSnapshotInterval(pol NamespacePolicy) time.Duration {
	if s := pol.DedupSnapshotInterval; s != nil {
		return time.Duration(max(*s, 0)) * time.Second
	}
	return max(b.cfg.DeduplicationSnapshotInterval, 0)
}
