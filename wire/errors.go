package wire

import (
	"context"
	"fmt"
	"strings"

	"github.com/isobar-mq/isobar/wire/pb"
)

// Error is one kind of the error table: every error Isobar answers a
// client with, on the Pulsar binary protocol or over HTTP (the admin REST
// API and HTTP lookups), is of exactly one kind, and the kind alone decides
// the answer:
//
//   - Code is the server error code sent in CommandError, CommandSendError
//     and the error fields of responses;
//   - HTTPStatus is the status of the HTTP answer (a plain int: this
//     package does not import net/http);
//   - Retriable says whether a client may retry the same request (possibly
//     after a new lookup). It is a property of the code: a kind's Retriable
//     equals that of its code's entry (TestErrorTable checks it), because
//     clients decide from the code alone.
//
// Message is the kind's generic text. Compare kinds with errors.Is; find
// an error's kind with KindOf.
//
// The table has one kind per pb.ServerError code (ErrorFor finds it) and a
// few kinds that only HTTP tells apart (400, 404 for things that are not
// topics, 409, 412, 307): those send the closest server error code on the
// binary protocol. See docs/decisions.md, "One error table".
type Error struct {
	Code       pb.ServerError
	Message    string
	Retriable  bool
	HTTPStatus int
}

func (e *Error) Error() string {
	return fmt.Sprintf("wire: %s: %s", e.Code, e.Message)
}

// The table, first one kind per pb.ServerError code, each
// {code, message, retriable, HTTP status}. The HTTP statuses
// follow Pulsar: its admin REST API where it has an answer (404 unknown
// topic, 412 invalid topic name or a subscription with consumers, 405 not
// allowed, 503 not ready), otherwise its WebSocket proxy's mapping of the
// same errors (401, 403, 404, 409 busy/fenced/incompatible schema, 429,
// 503 quota exceeded or terminated); the rest are chosen in
// docs/decisions.md.
var (
	ErrUnknown                               = &Error{pb.ServerError_UnknownError, "unknown error", false, 500}
	ErrMetadata                              = &Error{pb.ServerError_MetadataError, "metadata store error", true, 500}
	ErrPersistence                           = &Error{pb.ServerError_PersistenceError, "error writing or reading the ledger storage", true, 500}
	ErrAuthentication                        = &Error{pb.ServerError_AuthenticationError, "authentication failed", false, 401}
	ErrAuthorization                         = &Error{pb.ServerError_AuthorizationError, "not authorized", false, 403}
	ErrConsumerBusy                          = &Error{pb.ServerError_ConsumerBusy, "subscription already has a consumer that excludes this one", false, 412}
	ErrServiceNotReady                       = &Error{pb.ServerError_ServiceNotReady, "service not ready; look the topic up again", true, 503}
	ErrProducerBlockedQuotaExceeded          = &Error{pb.ServerError_ProducerBlockedQuotaExceededError, "producer blocked: backlog quota exceeded", false, 503}
	ErrProducerBlockedQuotaExceededException = &Error{pb.ServerError_ProducerBlockedQuotaExceededException, "producer creation failed: backlog quota exceeded", false, 503}
	ErrChecksum                              = &Error{pb.ServerError_ChecksumError, "message checksum mismatch", true, 400}
	ErrUnsupportedVersion                    = &Error{pb.ServerError_UnsupportedVersionError, "client protocol version does not support this feature", false, 400}
	ErrTopicNotFound                         = &Error{pb.ServerError_TopicNotFound, "topic not found", false, 404}
	ErrSubscriptionNotFound                  = &Error{pb.ServerError_SubscriptionNotFound, "subscription not found", false, 404}
	ErrConsumerNotFound                      = &Error{pb.ServerError_ConsumerNotFound, "consumer not found", false, 404}
	ErrTooManyRequests                       = &Error{pb.ServerError_TooManyRequests, "too many concurrent requests", true, 429}
	ErrTopicTerminated                       = &Error{pb.ServerError_TopicTerminatedError, "topic terminated", false, 503}
	ErrProducerBusy                          = &Error{pb.ServerError_ProducerBusy, "a producer with this name is already connected", false, 409}
	ErrInvalidTopicName                      = &Error{pb.ServerError_InvalidTopicName, "invalid topic name", false, 412}
	ErrIncompatibleSchema                    = &Error{pb.ServerError_IncompatibleSchema, "schema incompatible with the topic's schema", false, 409}
	ErrConsumerAssign                        = &Error{pb.ServerError_ConsumerAssignError, "cannot assign the consumer to the dispatcher", false, 409}
	ErrTransactionCoordinatorNotFound        = &Error{pb.ServerError_TransactionCoordinatorNotFound, "transaction coordinator not found", true, 503}
	ErrInvalidTxnStatus                      = &Error{pb.ServerError_InvalidTxnStatus, "invalid transaction status", false, 409}
	ErrNotAllowed                            = &Error{pb.ServerError_NotAllowedError, "operation not allowed", false, 405}
	ErrTransactionConflict                   = &Error{pb.ServerError_TransactionConflict, "transaction conflict", false, 409}
	ErrTransactionNotFound                   = &Error{pb.ServerError_TransactionNotFound, "transaction not found", false, 404}
	ErrProducerFenced                        = &Error{pb.ServerError_ProducerFenced, "producer fenced by an exclusive producer", false, 409}
)

// The kinds without a server error code of their own, which HTTP tells
// apart; on the binary protocol they send the closest code.
var (
	// ErrBadRequest: the request itself is malformed or names something
	// that cannot be (an undecodable body, a reserved subscription name).
	ErrBadRequest = &Error{pb.ServerError_NotAllowedError, "bad request", false, 400}
	// ErrNotFound: a tenant, namespace, cluster or entry does not exist. On
	// the binary protocol every request is about a topic, which then does
	// not exist either.
	ErrNotFound = &Error{pb.ServerError_TopicNotFound, "not found", false, 404}
	// ErrConflict: the request conflicts with what exists (it already
	// exists, or it still has children).
	ErrConflict = &Error{pb.ServerError_NotAllowedError, "conflicts with the current state", false, 409}
	// ErrConcurrentModification: the metadata changed under the request
	// too often; trying again may succeed.
	ErrConcurrentModification = &Error{pb.ServerError_MetadataError, "concurrent modification", true, 409}
	// ErrPreconditionFailed: the request is well-formed but refused (a
	// name or value is invalid, the thing is in use).
	ErrPreconditionFailed = &Error{pb.ServerError_NotAllowedError, "precondition failed", false, 412}
	// ErrRedirect: another broker serves the request (HTTP 307 to it; on
	// the binary protocol the client looks the topic up again).
	ErrRedirect = &Error{pb.ServerError_ServiceNotReady, "served by another broker", true, 307}
	// ErrRequestTooLarge: the request's body is larger than the server
	// accepts (HTTP 413; the binary protocol has its own frame limit and
	// answers it as NotAllowedError).
	ErrRequestTooLarge = &Error{pb.ServerError_NotAllowedError, "request too large", false, 413}
)

// serverErrors is indexed by code; every pb.ServerError value has an entry
// (TestErrorTable checks it).
var serverErrors = []*Error{
	ErrUnknown, ErrMetadata, ErrPersistence, ErrAuthentication,
	ErrAuthorization, ErrConsumerBusy, ErrServiceNotReady,
	ErrProducerBlockedQuotaExceeded, ErrProducerBlockedQuotaExceededException,
	ErrChecksum, ErrUnsupportedVersion, ErrTopicNotFound,
	ErrSubscriptionNotFound, ErrConsumerNotFound, ErrTooManyRequests,
	ErrTopicTerminated, ErrProducerBusy, ErrInvalidTopicName,
	ErrIncompatibleSchema, ErrConsumerAssign, ErrTransactionCoordinatorNotFound,
	ErrInvalidTxnStatus, ErrNotAllowed, ErrTransactionConflict,
	ErrTransactionNotFound, ErrProducerFenced,
}

// httpKinds are the kinds without a code of their own.
var httpKinds = []*Error{
	ErrBadRequest, ErrNotFound, ErrConflict, ErrConcurrentModification,
	ErrPreconditionFailed, ErrRedirect, ErrRequestTooLarge,
}

// Kinds returns every kind of the table: one per code in code order, then
// the HTTP-only kinds.
func Kinds() []*Error {
	return append(append([]*Error(nil), serverErrors...), httpKinds...)
}

// ErrorFor returns the error for a server error code; ErrUnknown for a code
// this package does not know.
func ErrorFor(code pb.ServerError) *Error {
	if code >= 0 && int(code) < len(serverErrors) {
		return serverErrors[code]
	}
	return ErrUnknown
}

// Sentinel returns a new error whose text is text and whose kind is kind:
// the way other packages tie their sentinel errors to the table, e.g.
//
//	ErrTopicNotFound = wire.Sentinel(wire.ErrTopicNotFound, "broker: topic not found")
//
// errors.Is(err, kind) holds for it, and its text names no code.
func Sentinel(kind *Error, text string) error {
	return &sentinel{text: text, kind: kind}
}

type sentinel struct {
	text string
	kind *Error
}

func (s *sentinel) Error() string { return s.text }
func (s *sentinel) Unwrap() error { return s.kind }

// codeNamer is implemented by the errors of packages that may not import
// wire (package topic is pure): ServerErrorCode returns the name of the
// pb.ServerError code whose kind the error is, e.g. "InvalidTopicName".
type codeNamer interface {
	ServerErrorCode() string
}

// KindOf returns the kind of err: the first kind found walking err's tree
// as errors.As does (so an outer wrap decides: fmt.Errorf("%w: %w",
// ErrNotFound, err) is of kind ErrNotFound whatever err is). A kind is a
// *Error, an error naming its code (see codeNamer), ErrChecksumMismatch
// (ErrChecksum), or context.DeadlineExceeded or context.Canceled
// (ErrServiceNotReady). An error of no kind, nil included, is ErrUnknown.
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
		case codeNamer:
			if c, ok := pb.ServerError_value[e.ServerErrorCode()]; ok {
				return ErrorFor(pb.ServerError(c))
			}
		}
		switch err {
		case ErrChecksumMismatch:
			return ErrChecksum
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

// CodeOf returns the server error code to send for err: its kind's code,
// UnknownError for an error of no kind.
func CodeOf(err error) pb.ServerError { return KindOf(err).Code }

// HTTPStatusOf returns the HTTP status to answer err with: its kind's
// status, 500 for an error of no kind.
func HTTPStatusOf(err error) int { return KindOf(err).HTTPStatus }

// MessageOf returns the text to send a client for err, which carries the
// code (or status) separately: err's text with every kind's own text
// ("wire: NotAllowedError: operation not allowed") reduced to its message
// ("operation not allowed"), so the code is not said twice.
func MessageOf(err error) string {
	s := err.Error()
	var walk func(error)
	walk = func(err error) {
		for err != nil {
			if k, ok := err.(*Error); ok {
				s = strings.ReplaceAll(s, k.Error(), k.Message)
				return
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

// NewErrorCommand builds an ERROR reply to request requestID for err: its
// code is CodeOf(err) and its message MessageOf(err).
func NewErrorCommand(requestID uint64, err error) *pb.BaseCommand {
	return &pb.BaseCommand{
		Type: pb.BaseCommand_ERROR.Enum(),
		Error: &pb.CommandError{
			RequestId: &requestID,
			Error:     CodeOf(err).Enum(),
			Message:   strPtr(MessageOf(err)),
		},
	}
}

// NewSendErrorCommand builds a SEND_ERROR reply to message sequenceID of
// producer producerID for err, coded as NewErrorCommand.
func NewSendErrorCommand(producerID, sequenceID uint64, err error) *pb.BaseCommand {
	return &pb.BaseCommand{
		Type: pb.BaseCommand_SEND_ERROR.Enum(),
		SendError: &pb.CommandSendError{
			ProducerId: &producerID,
			SequenceId: &sequenceID,
			Error:      CodeOf(err).Enum(),
			Message:    strPtr(MessageOf(err)),
		},
	}
}

func strPtr(s string) *string { return &s }
