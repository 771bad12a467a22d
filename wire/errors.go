package wire

import (
	"errors"
	"fmt"

	"github.com/isobar-mq/isobar/wire/pb"
)

// Error is a Pulsar server error: the code sent in CommandError,
// CommandSendError and the error fields of responses, a message, and whether
// a client may retry the same request (possibly after a new lookup). There
// is one value per code, listed below; compare with errors.Is.
type Error struct {
	Code      pb.ServerError
	Message   string
	Retriable bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("wire: %s: %s", e.Code, e.Message)
}

// The server errors, one per pb.ServerError code.
var (
	ErrUnknown                               = &Error{pb.ServerError_UnknownError, "unknown error", false}
	ErrMetadata                              = &Error{pb.ServerError_MetadataError, "metadata store error", true}
	ErrPersistence                           = &Error{pb.ServerError_PersistenceError, "error writing or reading the ledger storage", true}
	ErrAuthentication                        = &Error{pb.ServerError_AuthenticationError, "authentication failed", false}
	ErrAuthorization                         = &Error{pb.ServerError_AuthorizationError, "not authorized", false}
	ErrConsumerBusy                          = &Error{pb.ServerError_ConsumerBusy, "subscription already has a consumer that excludes this one", false}
	ErrServiceNotReady                       = &Error{pb.ServerError_ServiceNotReady, "service not ready; look the topic up again", true}
	ErrProducerBlockedQuotaExceeded          = &Error{pb.ServerError_ProducerBlockedQuotaExceededError, "producer blocked: backlog quota exceeded", false}
	ErrProducerBlockedQuotaExceededException = &Error{pb.ServerError_ProducerBlockedQuotaExceededException, "producer creation failed: backlog quota exceeded", false}
	ErrChecksum                              = &Error{pb.ServerError_ChecksumError, "message checksum mismatch", true}
	ErrUnsupportedVersion                    = &Error{pb.ServerError_UnsupportedVersionError, "client protocol version does not support this feature", false}
	ErrTopicNotFound                         = &Error{pb.ServerError_TopicNotFound, "topic not found", false}
	ErrSubscriptionNotFound                  = &Error{pb.ServerError_SubscriptionNotFound, "subscription not found", false}
	ErrConsumerNotFound                      = &Error{pb.ServerError_ConsumerNotFound, "consumer not found", false}
	ErrTooManyRequests                       = &Error{pb.ServerError_TooManyRequests, "too many concurrent requests", true}
	ErrTopicTerminated                       = &Error{pb.ServerError_TopicTerminatedError, "topic terminated", false}
	ErrProducerBusy                          = &Error{pb.ServerError_ProducerBusy, "a producer with this name is already connected", false}
	ErrInvalidTopicName                      = &Error{pb.ServerError_InvalidTopicName, "invalid topic name", false}
	ErrIncompatibleSchema                    = &Error{pb.ServerError_IncompatibleSchema, "schema incompatible with the topic's schema", false}
	ErrConsumerAssign                        = &Error{pb.ServerError_ConsumerAssignError, "cannot assign the consumer to the dispatcher", false}
	ErrTransactionCoordinatorNotFound        = &Error{pb.ServerError_TransactionCoordinatorNotFound, "transaction coordinator not found", true}
	ErrInvalidTxnStatus                      = &Error{pb.ServerError_InvalidTxnStatus, "invalid transaction status", false}
	ErrNotAllowed                            = &Error{pb.ServerError_NotAllowedError, "operation not allowed", false}
	ErrTransactionConflict                   = &Error{pb.ServerError_TransactionConflict, "transaction conflict", false}
	ErrTransactionNotFound                   = &Error{pb.ServerError_TransactionNotFound, "transaction not found", false}
	ErrProducerFenced                        = &Error{pb.ServerError_ProducerFenced, "producer fenced by an exclusive producer", false}
)

// serverErrors is indexed by code; every pb.ServerError value has an entry
// (TestErrorTableComplete checks it).
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

// ErrorFor returns the error for a server error code; ErrUnknown for a code
// this package does not know.
func ErrorFor(code pb.ServerError) *Error {
	if code >= 0 && int(code) < len(serverErrors) {
		return serverErrors[code]
	}
	return ErrUnknown
}

// CodeOf returns the server error code to send for err: the code of the
// *Error it wraps, ChecksumError for ErrChecksumMismatch, UnknownError
// otherwise.
func CodeOf(err error) pb.ServerError {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, ErrChecksumMismatch):
		return pb.ServerError_ChecksumError
	default:
		return pb.ServerError_UnknownError
	}
}

// NewErrorCommand builds an ERROR reply to request requestID for err: its
// code is CodeOf(err) and its message err's text.
func NewErrorCommand(requestID uint64, err error) *pb.BaseCommand {
	return &pb.BaseCommand{
		Type: pb.BaseCommand_ERROR.Enum(),
		Error: &pb.CommandError{
			RequestId: &requestID,
			Error:     CodeOf(err).Enum(),
			Message:   strPtr(err.Error()),
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
			Message:    strPtr(err.Error()),
		},
	}
}

func strPtr(s string) *string { return &s }
