package wire

import (
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/wire/pb"
)

// codes is the one table between the error kinds (package errkind) and
// the binary protocol's server error codes: every kind with the code sent
// for it in CommandError, CommandSendError and the error fields of
// responses. First comes each code's own kind, in code order (its Name is
// the code's name; ErrorFor returns it), then the kinds only HTTP tells
// apart, which send the closest code. TestErrorTable checks that every
// kind and every code is here, and that a kind is retriable exactly when
// its code's own kind is: clients decide from the code alone. See
// docs/decisions.md, "One error table".
var codes = []struct {
	kind *errkind.Error
	code pb.ServerError
}{
	{errkind.ErrUnknown, pb.ServerError_UnknownError},
	{errkind.ErrMetadata, pb.ServerError_MetadataError},
	{errkind.ErrPersistence, pb.ServerError_PersistenceError},
	{errkind.ErrAuthentication, pb.ServerError_AuthenticationError},
	{errkind.ErrAuthorization, pb.ServerError_AuthorizationError},
	{errkind.ErrConsumerBusy, pb.ServerError_ConsumerBusy},
	{errkind.ErrServiceNotReady, pb.ServerError_ServiceNotReady},
	{errkind.ErrProducerBlockedQuotaExceeded, pb.ServerError_ProducerBlockedQuotaExceededError},
	{errkind.ErrProducerBlockedQuotaExceededException, pb.ServerError_ProducerBlockedQuotaExceededException},
	{errkind.ErrChecksum, pb.ServerError_ChecksumError},
	{errkind.ErrUnsupportedVersion, pb.ServerError_UnsupportedVersionError},
	{errkind.ErrTopicNotFound, pb.ServerError_TopicNotFound},
	{errkind.ErrSubscriptionNotFound, pb.ServerError_SubscriptionNotFound},
	{errkind.ErrConsumerNotFound, pb.ServerError_ConsumerNotFound},
	{errkind.ErrTooManyRequests, pb.ServerError_TooManyRequests},
	{errkind.ErrTopicTerminated, pb.ServerError_TopicTerminatedError},
	{errkind.ErrProducerBusy, pb.ServerError_ProducerBusy},
	{errkind.ErrInvalidTopicName, pb.ServerError_InvalidTopicName},
	{errkind.ErrIncompatibleSchema, pb.ServerError_IncompatibleSchema},
	{errkind.ErrConsumerAssign, pb.ServerError_ConsumerAssignError},
	{errkind.ErrTransactionCoordinatorNotFound, pb.ServerError_TransactionCoordinatorNotFound},
	{errkind.ErrInvalidTxnStatus, pb.ServerError_InvalidTxnStatus},
	{errkind.ErrNotAllowed, pb.ServerError_NotAllowedError},
	{errkind.ErrTransactionConflict, pb.ServerError_TransactionConflict},
	{errkind.ErrTransactionNotFound, pb.ServerError_TransactionNotFound},
	{errkind.ErrProducerFenced, pb.ServerError_ProducerFenced},

	{errkind.ErrBadRequest, pb.ServerError_NotAllowedError},
	{errkind.ErrNotFound, pb.ServerError_TopicNotFound},
	{errkind.ErrConflict, pb.ServerError_NotAllowedError},
	{errkind.ErrConcurrentModification, pb.ServerError_MetadataError},
	{errkind.ErrPreconditionFailed, pb.ServerError_NotAllowedError},
	{errkind.ErrRedirect, pb.ServerError_ServiceNotReady},
	{errkind.ErrRequestTooLarge, pb.ServerError_NotAllowedError},
}

// codeOfKind and kindOfCode index codes both ways.
var codeOfKind, kindOfCode = func() (map[*errkind.Error]pb.ServerError, map[pb.ServerError]*errkind.Error) {
	byKind := map[*errkind.Error]pb.ServerError{}
	byCode := map[pb.ServerError]*errkind.Error{}
	for _, c := range codes {
		byKind[c.kind] = c.code
		if _, ok := byCode[c.code]; !ok {
			byCode[c.code] = c.kind
		}
	}
	return byKind, byCode
}()

// ErrorFor returns the kind of a server error code; errkind.ErrUnknown
// for a code this package does not know.
func ErrorFor(code pb.ServerError) *errkind.Error {
	if k, ok := kindOfCode[code]; ok {
		return k
	}
	return errkind.ErrUnknown
}

// CodeOf returns the server error code to send for err: its kind's code
// (errkind.KindOf), UnknownError for an error of no kind.
func CodeOf(err error) pb.ServerError {
	return codeOfKind[errkind.KindOf(err)] // an unlisted kind is UnknownError, 0
}

// NewErrorCommand builds an ERROR reply to request requestID for err: its
// code is CodeOf(err) and its message errkind.MessageOf(err).
func NewErrorCommand(requestID uint64, err error) *pb.BaseCommand {
	return &pb.BaseCommand{
		Type: pb.BaseCommand_ERROR.Enum(),
		Error: &pb.CommandError{
			RequestId: &requestID,
			Error:     CodeOf(err).Enum(),
			Message:   strPtr(errkind.MessageOf(err)),
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
			Message:    strPtr(errkind.MessageOf(err)),
		},
	}
}

// NewFailure builds the answer to request requestID, of type
// requestType, that failed with err, in the form the client expects for
// that type: the failed response of a LOOKUP, PARTITIONED_METADATA,
// GET_SCHEMA, GET_OR_CREATE_SCHEMA or of a transaction command (each has
// its own error fields), an ERROR (NewErrorCommand) for any other
// request. Its code and message are
// those of NewErrorCommand.
func NewFailure(requestType pb.BaseCommand_Type, requestID uint64, err error) *pb.BaseCommand {
	code, msg := CodeOf(err).Enum(), strPtr(errkind.MessageOf(err))
	switch requestType {
	case pb.BaseCommand_LOOKUP:
		return &pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: &pb.CommandLookupTopicResponse{
			RequestId: &requestID, Response: pb.CommandLookupTopicResponse_Failed.Enum(), Error: code, Message: msg,
		}}
	case pb.BaseCommand_PARTITIONED_METADATA:
		return &pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA_RESPONSE.Enum(), PartitionMetadataResponse: &pb.CommandPartitionedTopicMetadataResponse{
			RequestId: &requestID, Response: pb.CommandPartitionedTopicMetadataResponse_Failed.Enum(), Error: code, Message: msg,
		}}
	case pb.BaseCommand_GET_SCHEMA:
		return &pb.BaseCommand{Type: pb.BaseCommand_GET_SCHEMA_RESPONSE.Enum(), GetSchemaResponse: &pb.CommandGetSchemaResponse{
			RequestId: &requestID, ErrorCode: code, ErrorMessage: msg,
		}}
	case pb.BaseCommand_GET_OR_CREATE_SCHEMA:
		return &pb.BaseCommand{Type: pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE.Enum(), GetOrCreateSchemaResponse: &pb.CommandGetOrCreateSchemaResponse{
			RequestId: &requestID, ErrorCode: code, ErrorMessage: msg,
		}}
	case pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST:
		return &pb.BaseCommand{Type: pb.BaseCommand_TC_CLIENT_CONNECT_RESPONSE.Enum(), TcClientConnectResponse: &pb.CommandTcClientConnectResponse{
			RequestId: &requestID, Error: code, Message: msg,
		}}
	case pb.BaseCommand_NEW_TXN:
		return &pb.BaseCommand{Type: pb.BaseCommand_NEW_TXN_RESPONSE.Enum(), NewTxnResponse: &pb.CommandNewTxnResponse{
			RequestId: &requestID, Error: code, Message: msg,
		}}
	case pb.BaseCommand_ADD_PARTITION_TO_TXN:
		return &pb.BaseCommand{Type: pb.BaseCommand_ADD_PARTITION_TO_TXN_RESPONSE.Enum(), AddPartitionToTxnResponse: &pb.CommandAddPartitionToTxnResponse{
			RequestId: &requestID, Error: code, Message: msg,
		}}
	case pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN:
		return &pb.BaseCommand{Type: pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN_RESPONSE.Enum(), AddSubscriptionToTxnResponse: &pb.CommandAddSubscriptionToTxnResponse{
			RequestId: &requestID, Error: code, Message: msg,
		}}
	case pb.BaseCommand_END_TXN:
		return &pb.BaseCommand{Type: pb.BaseCommand_END_TXN_RESPONSE.Enum(), EndTxnResponse: &pb.CommandEndTxnResponse{
			RequestId: &requestID, Error: code, Message: msg,
		}}
	case pb.BaseCommand_END_TXN_ON_PARTITION:
		return &pb.BaseCommand{Type: pb.BaseCommand_END_TXN_ON_PARTITION_RESPONSE.Enum(), EndTxnOnPartitionResponse: &pb.CommandEndTxnOnPartitionResponse{
			RequestId: &requestID, Error: code, Message: msg,
		}}
	case pb.BaseCommand_END_TXN_ON_SUBSCRIPTION:
		return &pb.BaseCommand{Type: pb.BaseCommand_END_TXN_ON_SUBSCRIPTION_RESPONSE.Enum(), EndTxnOnSubscriptionResponse: &pb.CommandEndTxnOnSubscriptionResponse{
			RequestId: &requestID, Error: code, Message: msg,
		}}
	}
	return NewErrorCommand(requestID, err)
}

func strPtr(s string) *string { return &s }
