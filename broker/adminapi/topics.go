package adminapi

import (
	"context"
	"fmt"
	"time"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/topic"
)

// Topics is everything the admin API needs from a broker. Names passed in
// are always single topics: a non-partitioned topic or one partition
// (the admin server fans partitioned-topic operations out to the
// partitions itself). Errors should be of a kind of errkind's table
// (wrap a sentinel below or another package's sentinel tied to a kind, or
// be a *NotOwnerError): the kind decides the HTTP status, and what the
// server skips (a missing partition is of kind errkind.ErrTopicNotFound).
// An error of no kind is a 500.
type Topics interface {
	// CreateTopic creates a topic; ErrConflict if it exists.
	CreateTopic(ctx context.Context, name topic.Name) error
	// DeleteTopic deletes a topic; ErrTopicNotFound if there is none,
	// ErrPreconditionFailed if it has producers or subscriptions and
	// force is false (force disconnects them first).
	DeleteTopic(ctx context.Context, name topic.Name, force bool) error
	// ListTopics lists the full names of a namespace's ("tenant/ns")
	// topics of one domain: non-partitioned topics and partitions.
	ListTopics(ctx context.Context, namespace string, domain topic.Domain) ([]string, error)
	// Stats returns a topic's stats; ErrTopicNotFound if there is none.
	Stats(ctx context.Context, name topic.Name) (*TopicStats, error)
	// InternalStats returns a topic's storage stats.
	InternalStats(ctx context.Context, name topic.Name) (*PersistentTopicInternalStats, error)
	// Subscriptions lists a topic's subscription names.
	Subscriptions(ctx context.Context, name topic.Name) ([]string, error)
	// CreateSubscription creates a durable subscription positioned at
	// at (nil: the end of the topic; Earliest and Latest are special);
	// ErrConflict if it exists.
	CreateSubscription(ctx context.Context, name topic.Name, sub string, at *MessageID) error
	// DeleteSubscription deletes a subscription; ErrSubscriptionNotFound
	// if there is none, ErrPreconditionFailed if it has consumers and
	// force is false.
	DeleteSubscription(ctx context.Context, name topic.Name, sub string, force bool) error
	// Skip acknowledges the next n messages of a subscription; n == -1
	// skips everything (clears the backlog).
	Skip(ctx context.Context, name topic.Name, sub string, n int64) error
	// ResetCursor moves a subscription to a message id.
	ResetCursor(ctx context.Context, name topic.Name, sub string, id MessageID) error
	// ResetCursorToTime moves a subscription to the first message
	// published at or after t.
	ResetCursorToTime(ctx context.Context, name topic.Name, sub string, t time.Time) error
	// Unload closes a topic on its broker so its clients reconnect.
	Unload(ctx context.Context, name topic.Name) error
	// Terminate ends a topic: no more messages are accepted, and it
	// returns the last one's id (Pulsar's terminate).
	Terminate(ctx context.Context, name topic.Name) (MessageID, error)
	// LastMessageID returns the id of the last message (entry -1 of the
	// current ledger when the topic is empty).
	LastMessageID(ctx context.Context, name topic.Name) (MessageID, error)
	// Entry returns one stored entry as written by the producer path:
	// [u32 metadata size][MessageMetadata][payload] (wire.AppendEntry's
	// format). ErrEntryNotFound if the ledger or entry does not exist.
	Entry(ctx context.Context, name topic.Name, ledger, entry int64) ([]byte, error)
	// PeekMessage returns the entry (as Entry does) that is n-th (n >= 1)
	// among a subscription's entries after its mark-delete position that
	// are not acknowledged, and its id, without moving the subscription.
	// For a subscription that does not exist it counts from the first
	// entry of the topic and creates nothing. ErrEntryNotFound when there
	// are fewer than n.
	PeekMessage(ctx context.Context, name topic.Name, sub string, n int64) (MessageID, []byte, error)
	// ExamineMessage returns the n-th entry (n >= 1) of the topic counting
	// from its first (earliest) or back from its last; ErrEntryNotFound
	// when it has fewer.
	ExamineMessage(ctx context.Context, name topic.Name, earliest bool, n int64) (MessageID, []byte, error)
	// MessageIDByTime returns the id of the first entry published at or
	// after t; ErrEntryNotFound when there is none.
	MessageIDByTime(ctx context.Context, name topic.Name, t time.Time) (MessageID, error)
	// Properties returns a topic's properties (empty when it has none).
	Properties(ctx context.Context, name topic.Name) (map[string]string, error)
	// UpdateProperties sets the properties in set on a topic, then removes
	// the keys in remove.
	UpdateProperties(ctx context.Context, name topic.Name, set map[string]string, remove []string) error
	// Lookup returns the URLs of the broker that owns the topic.
	Lookup(ctx context.Context, name topic.Name) (LookupData, error)
	// Brokers lists the live brokers of the local cluster as host:port
	// of their HTTP listeners.
	Brokers(ctx context.Context) ([]string, error)
}

// Errors a Topics implementation (and the server itself) returns, each of
// one kind of errkind's table; the HTTP status it gets is in the
// comment.
var (
	ErrTopicNotFound        = errkind.Sentinel(errkind.ErrTopicNotFound, "admin: topic not found")               // 404
	ErrSubscriptionNotFound = errkind.Sentinel(errkind.ErrSubscriptionNotFound, "admin: subscription not found") // 404
	ErrEntryNotFound        = errkind.Sentinel(errkind.ErrNotFound, "admin: entry not found")                    // 404
	ErrBadRequest           = errkind.Sentinel(errkind.ErrBadRequest, "admin: bad request")                      // 400
	ErrConflict             = errkind.Sentinel(errkind.ErrConflict, "admin: already exists")                     // 409
	ErrPreconditionFailed   = errkind.Sentinel(errkind.ErrPreconditionFailed, "admin: precondition failed")      // 412
	ErrNotAllowed           = errkind.Sentinel(errkind.ErrNotAllowed, "admin: operation not allowed")            // 405
	ErrUnavailable          = errkind.Sentinel(errkind.ErrServiceNotReady, "admin: service unavailable")         // 503
	ErrNotOwner             = errkind.Sentinel(errkind.ErrRedirect, "admin: not the owner")                      // 307, see NotOwnerError
	ErrTooLarge             = errkind.Sentinel(errkind.ErrRequestTooLarge, "admin: request too large")           // 413
)

// TopicQuota (Broker.Quota) is a broker that limits the topics of a
// namespace: CheckTopicQuota fails (with an error of its kind, 412 for
// Pulsar's "Exceed maximum number of topics in namespace") when adding
// more topics, each partition counting as one, would pass the limit. The
// server asks it before creating or growing a partitioned topic; creating
// a single topic is the implementation's to check.
type TopicQuota interface {
	CheckTopicQuota(ctx context.Context, namespace string, adding int) error
}

// SubscriptionProperties (Broker.SubscriptionProperties) is a topic
// service that keeps subscription properties (Pulsar's, PIP-105): string
// pairs stored with a durable subscription.
type SubscriptionProperties interface {
	SubscriptionProperties(ctx context.Context, name topic.Name, sub string) (map[string]string, error)
	// SetSubscriptionProperties replaces them.
	SetSubscriptionProperties(ctx context.Context, name topic.Name, sub string, props map[string]string) error
}

// PendingError is a delete that other regions have not applied yet; the
// error answer names them in "pendingRegions" besides its reason.
type PendingError struct {
	Regions []string
	Err     error
}

func (e *PendingError) Error() string { return e.Err.Error() }
func (e *PendingError) Unwrap() error { return e.Err }

// FederatedDeletes (Broker.Deletes) is a topic service whose deletes reach
// every region (docs/replication.md, "Deleting topics and namespaces").
// The deletes return handled false when it cannot (no global store): the
// delete is then this region's only.
type FederatedDeletes interface {
	// DeleteTopicEverywhere deletes a topic (partitioned: the partitioned
	// topic of partitions partitions, 0 when it is gone already) in every
	// region, or joins the delete of it under way.
	DeleteTopicEverywhere(ctx context.Context, name topic.Name, partitioned bool, partitions int, force bool) (handled bool, err error)
	// DeleteNamespaceEverywhere deletes a namespace in every region: with
	// force its topics first, without only if no region holds one.
	DeleteNamespaceEverywhere(ctx context.Context, ns string, force bool) (handled bool, err error)
	// DeleteSubscriptionEverywhere deletes a subscription of a topic (of
	// every partition of a partitioned topic of partitions partitions) in
	// every region, or joins the delete of it under way.
	DeleteSubscriptionEverywhere(ctx context.Context, name topic.Name, partitions int, sub string, force bool) (handled bool, err error)
	// CheckCreate says whether topic name may be created now (not while
	// a delete of it or its namespace is under way).
	CheckCreate(ctx context.Context, name topic.Name) error
}

// NotOwnerError says another broker owns the topic; the server redirects
// the request there (307, Location: URL + the request's path and query).
// It wraps ErrNotOwner.
type NotOwnerError struct {
	// URL is the owner's HTTP base URL, e.g. "http://broker-2:8080", and
	// URLTLS its HTTPS one ("" when it serves none): a request that came
	// over TLS is sent there.
	URL, URLTLS string
	// Placed is set when this broker's lookup named the owner (found it,
	// or placed a bundle nobody owned): the redirect then carries
	// authoritative=true, so the broker it names takes the bundle instead
	// of placing it again by its own view of the load (two brokers' views
	// can name each other).
	Placed bool
}

// authoritativeKey keys the request's ?authoritative= in its context.
type authoritativeKey struct{}

// WithAuthoritative returns ctx marked as serving a request that came
// here by another broker's redirect or forward (?authoritative=true):
// the admin server marks it, Topics implementations read it with
// Authoritative.
func WithAuthoritative(ctx context.Context) context.Context {
	return context.WithValue(ctx, authoritativeKey{}, true)
}

// Authoritative reports whether the request being served came here by
// another broker's redirect or forward (?authoritative=true): a topic
// whose bundle nobody owns is then taken by this broker.
func Authoritative(ctx context.Context) bool {
	v, _ := ctx.Value(authoritativeKey{}).(bool)
	return v
}

func (e *NotOwnerError) Error() string {
	return fmt.Sprintf("admin: not the owner; owner is %s", e.URL)
}

// Unwrap returns ErrNotOwner.
func (e *NotOwnerError) Unwrap() error { return ErrNotOwner }
