// Package errkind owns the kinds of error Isobar answers clients with:
// every error a client meets, on the Pulsar binary protocol or over HTTP
// (the admin REST API and HTTP lookups), is of exactly one kind, and the
// kind alone decides the answer's HTTP status and whether the client may
// retry. The binary protocol's server error code of each kind is
// wire's business (wire.CodeOf); this package imports nothing but the
// standard library, so storage, policy and authentication code can tie
// their errors to a kind without linking the protocol codec.
package errkind

import (
	"context"
	"strings"
)

// Error is one kind of the table:
//
//   - Name identifies it: for a kind of one of Pulsar's server error
//     codes, the code's name ("TopicNotFound"); for the kinds only HTTP
//     tells apart, a name of their own ("BadRequest");
//   - Message is the kind's generic text;
//   - Retriable says whether a client may retry the same request
//     (possibly after a new lookup);
//   - HTTPStatus is the status of the HTTP answer (a plain int: this
//     package does not import net/http).
//
// Compare kinds with errors.Is; find an error's kind with KindOf. See
// docs/decisions.md, "One error table".
type Error struct {
	Name       string
	Message    string
	Retriable  bool
	HTTPStatus int
}

func (e *Error) Error() string {
	return "errkind: " + e.Name + ": " + e.Message
}

// The table, first one kind per Pulsar server error code (in code order),
// each {name, message, retriable, HTTP status}. The HTTP statuses follow
// Pulsar: its admin REST API where it has an answer (404 unknown topic,
// 412 invalid topic name or a subscription with consumers, 405 not
// allowed, 503 not ready), otherwise its WebSocket proxy's mapping of the
// same errors (401, 403, 404, 409 busy/fenced/incompatible schema, 429,
// 503 quota exceeded or terminated); the rest are chosen in
// docs/decisions.md.
var (
	ErrUnknown                               = &Error{"UnknownError", "unknown error", false, 500}
	ErrMetadata                              = &Error{"MetadataError", "metadata store error", true, 500}
	ErrPersistence                           = &Error{"PersistenceError", "error writing or reading the ledger storage", true, 500}
	ErrAuthentication                        = &Error{"AuthenticationError", "authentication failed", false, 401}
	ErrAuthorization                         = &Error{"AuthorizationError", "not authorized", false, 403}
	ErrConsumerBusy                          = &Error{"ConsumerBusy", "subscription already has a consumer that excludes this one", false, 412}
	ErrServiceNotReady                       = &Error{"ServiceNotReady", "service not ready; look the topic up again", true, 503}
	ErrProducerBlockedQuotaExceeded          = &Error{"ProducerBlockedQuotaExceededError", "producer blocked: backlog quota exceeded", false, 503}
	ErrProducerBlockedQuotaExceededException = &Error{"ProducerBlockedQuotaExceededException", "producer creation failed: backlog quota exceeded", false, 503}
	ErrChecksum                              = &Error{"ChecksumError", "message checksum mismatch", true, 400}
	ErrUnsupportedVersion                    = &Error{"UnsupportedVersionError", "client protocol version does not support this feature", false, 400}
	ErrTopicNotFound                         = &Error{"TopicNotFound", "topic not found", false, 404}
	ErrSubscriptionNotFound                  = &Error{"SubscriptionNotFound", "subscription not found", false, 404}
	ErrConsumerNotFound                      = &Error{"ConsumerNotFound", "consumer not found", false, 404}
	ErrTooManyRequests                       = &Error{"TooManyRequests", "too many concurrent requests", true, 429}
	ErrTopicTerminated                       = &Error{"TopicTerminatedError", "topic terminated", false, 503}
	ErrProducerBusy                          = &Error{"ProducerBusy", "a producer with this name is already connected", false, 409}
	ErrInvalidTopicName                      = &Error{"InvalidTopicName", "invalid topic name", false, 412}
	ErrIncompatibleSchema                    = &Error{"IncompatibleSchema", "schema incompatible with the topic's schema", false, 409}
	ErrConsumerAssign                        = &Error{"ConsumerAssignError", "cannot assign the consumer to the dispatcher", false, 409}
	ErrTransactionCoordinatorNotFound        = &Error{"TransactionCoordinatorNotFound", "transaction coordinator not found", true, 503}
	ErrInvalidTxnStatus                      = &Error{"InvalidTxnStatus", "invalid transaction status", false, 409}
	ErrNotAllowed                            = &Error{"NotAllowedError", "operation not allowed", false, 405}
	ErrTransactionConflict                   = &Error{"TransactionConflict", "transaction conflict", false, 409}
	ErrTransactionNotFound                   = &Error{"TransactionNotFound", "transaction not found", false, 404}
	ErrProducerFenced                        = &Error{"ProducerFenced", "producer fenced by an exclusive producer", false, 409}
)

// The kinds without a server error code of their own, which HTTP tells
// apart; on the binary protocol they send the closest code (wire.CodeOf),
// whose retriability they share.
var (
	// ErrBadRequest: the request itself is malformed or names something
	// that cannot be (an undecodable body, a reserved subscription name).
	ErrBadRequest = &Error{"BadRequest", "bad request", false, 400}
	// ErrNotFound: a tenant, namespace, cluster or entry does not exist. On
	// the binary protocol every request is about a topic, which then does
	// not exist either.
	ErrNotFound = &Error{"NotFound", "not found", false, 404}
	// ErrConflict: the request conflicts with what exists (it already
	// exists, or it still has children).
	ErrConflict = &Error{"Conflict", "conflicts with the current state", false, 409}
	// ErrConcurrentModification: the metadata changed under the request
	// too often; trying again may succeed.
	ErrConcurrentModification = &Error{"ConcurrentModification", "concurrent modification", true, 409}
	// ErrPreconditionFailed: the request is well-formed but refused (a
	// name or value is invalid, the thing is in use).
	ErrPreconditionFailed = &Error{"PreconditionFailed", "precondition failed", false, 412}
	// ErrRedirect: another broker serves the request (HTTP 307 to it; on
	// the binary protocol the client looks the topic up again).
	ErrRedirect = &Error{"Redirect", "served by another broker", true, 307}
	// ErrRequestTooLarge: the request's body is larger than the server
	// accepts (HTTP 413; the binary protocol has its own frame limit and
	// answers it as NotAllowedError).
	ErrRequestTooLarge = &Error{"RequestTooLarge", "request too large", false, 413}
)

// kinds is the table in order: the kinds of the codes, then the HTTP-only
// kinds.
var kinds = []*Error{
	ErrUnknown, ErrMetadata, ErrPersistence, ErrAuthentication,
	ErrAuthorization, ErrConsumerBusy, ErrServiceNotReady,
	ErrProducerBlockedQuotaExceeded, ErrProducerBlockedQuotaExceededException,
	ErrChecksum, ErrUnsupportedVersion, ErrTopicNotFound,
	ErrSubscriptionNotFound, ErrConsumerNotFound, ErrTooManyRequests,
	ErrTopicTerminated, ErrProducerBusy, ErrInvalidTopicName,
	ErrIncompatibleSchema, ErrConsumerAssign, ErrTransactionCoordinatorNotFound,
	ErrInvalidTxnStatus, ErrNotAllowed, ErrTransactionConflict,
	ErrTransactionNotFound, ErrProducerFenced,

	ErrBadRequest, ErrNotFound, ErrConflict, ErrConcurrentModification,
	ErrPreconditionFailed, ErrRedirect, ErrRequestTooLarge,
}

// Kinds returns every kind of the table: one per server error code in
// code order, then the HTTP-only kinds.
func Kinds() []*Error {
	return append([]*Error(nil), kinds...)
}

// ByName returns the kind named name, or nil.
func ByName(name string) *Error {
	for _, k := range kinds {
		if k.Name == name {
			return k
		}
	}
	return nil
}

// Sentinel returns a new error whose text is text and whose kind is kind:
// the way other packages tie their sentinel errors to the table, e.g.
//
//	ErrTopicNotFound = errkind.Sentinel(errkind.ErrTopicNotFound, "broker: topic not found")
//
// errors.Is(err, kind) holds for it, and its text names no kind.
func Sentinel(kind *Error, text string) error {
	return &sentinel{text: text, kind: kind}
}

type sentinel struct {
	text string
	kind *Error
}

func (s *sentinel) Error() string { return s.text }
func (s *sentinel) Unwrap() error { return s.kind }

// kindNamer is implemented by the errors of packages that may import
// nothing, this package included (package topic is pure): ErrorKind
// returns the Name of the error's kind, e.g. "InvalidTopicName".
type kindNamer interface {
	ErrorKind() string
}

// KindOf returns the kind of err: the first kind found walking err's tree
// as errors.As does (so an outer wrap decides: fmt.Errorf("%w: %w",
// ErrNotFound, err) is of kind ErrNotFound whatever err is). A kind is a
// *Error, an error naming its kind (see kindNamer), or
// context.DeadlineExceeded or context.Canceled (ErrServiceNotReady). An
// error of no kind, nil included, is ErrUnknown.
func KindOf(err error) *Error {
	if k := kindOf(err); k != nil {
		return k
	}
	return ErrUnknown
}

func kindOf(err error) *Error {
	for err != nil {
		switch e := err.(type) {
		case *Error:
			return e
		case kindNamer:
			if k := ByName(e.ErrorKind()); k != nil {
				return k
			}
		}
		switch err {
		case context.DeadlineExceeded, context.Canceled:
			return ErrServiceNotReady
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if k := kindOf(e); k != nil {
					return k
				}
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}

// HasKind reports whether err is of a kind of the table (KindOf would not
// fall back to ErrUnknown).
func HasKind(err error) bool { return kindOf(err) != nil }

// HTTPStatusOf returns the HTTP status to answer err with: its kind's
// status, 500 for an error of no kind.
func HTTPStatusOf(err error) int { return KindOf(err).HTTPStatus }

// MessageOf returns the text to send a client for err, which carries the
// code (or status) separately: err's text with every kind's own text
// ("errkind: NotAllowedError: operation not allowed") reduced to its
// message ("operation not allowed"), so the kind is not said twice, and
// every sentinel's text (Sentinel), and every error's that names its own
// kind, without the package that names it in logs ("policy: not found"
// becomes "not found"): the kind says what the package did.
func MessageOf(err error) string {
	s := err.Error()
	var walk func(error)
	walk = func(err error) {
		for err != nil {
			if k, ok := err.(*Error); ok {
				s = strings.ReplaceAll(s, k.Error(), k.Message)
				return
			}
			var text string
			switch e := err.(type) {
			case *sentinel:
				text = e.text
			case kindNamer:
				text = err.Error()
			}
			if short := withoutPackage(text); short != text {
				s = strings.ReplaceAll(s, text, short)
			}
			switch u := err.(type) {
			case interface{ Unwrap() error }:
				err = u.Unwrap()
			case interface{ Unwrap() []error }:
				for _, e := range u.Unwrap() {
					walk(e)
				}
				return
			default:
				return
			}
		}
	}
	walk(err)
	return s
}

// withoutPackage returns text without a leading package name ("policy:
// not found" is "not found"): a lower-case word of letters and digits
// followed by ": ".
func withoutPackage(text string) string {
	pkg, rest, ok := strings.Cut(text, ": ")
	if !ok || pkg == "" || rest == "" {
		return text
	}
	for _, r := range pkg {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return text
		}
	}
	return rest
}
