package wire

import (
	"errors"
	"fmt"
	"testing"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/wire/pb"
)

// TestErrorTable pins the server error code of every kind. A change here
// changes what clients see; say why in the commit. (errkind's TestTable
// pins each kind's HTTP status and retriability.)
func TestErrorTable(t *testing.T) {
	want := []struct {
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
		// The HTTP-only kinds.
		{errkind.ErrBadRequest, pb.ServerError_NotAllowedError},
		{errkind.ErrNotFound, pb.ServerError_TopicNotFound},
		{errkind.ErrConflict, pb.ServerError_NotAllowedError},
		{errkind.ErrConcurrentModification, pb.ServerError_MetadataError},
		{errkind.ErrPreconditionFailed, pb.ServerError_NotAllowedError},
		{errkind.ErrRedirect, pb.ServerError_ServiceNotReady},
		{errkind.ErrRequestTooLarge, pb.ServerError_NotAllowedError},
	}
	kinds := errkind.Kinds()
	if len(kinds) != len(want) || len(codes) != len(want) {
		t.Fatalf("%d kinds and %d table entries, the test knows %d", len(kinds), len(codes), len(want))
	}
	for i, w := range want {
		k := w.kind
		if kinds[i] != k || codes[i].kind != k {
			t.Errorf("kind %d is %v (table: %v), want %v", i, kinds[i], codes[i].kind, k)
		}
		if c := CodeOf(fmt.Errorf("x: %w", k)); c != w.code {
			t.Errorf("%v: code %v, want %v", k.Name, c, w.code)
		}
		// Clients decide retries from the code alone: a kind may not
		// disagree with its code's own kind.
		if k.Retriable != ErrorFor(w.code).Retriable {
			t.Errorf("%v (%d): retriable %v, but code %v is %v", k.Name, k.HTTPStatus, k.Retriable, w.code, ErrorFor(w.code).Retriable)
		}
	}
}

// TestErrorTableComplete checks that every code has its own kind, named
// after it, and that unknown codes are UnknownError.
func TestErrorTableComplete(t *testing.T) {
	values := pb.ServerError(0).Descriptor().Values()
	if len(kindOfCode) != values.Len() {
		t.Fatalf("%d codes with a kind, the protocol has %d", len(kindOfCode), values.Len())
	}
	for i := range values.Len() {
		code := pb.ServerError(values.Get(i).Number())
		k := ErrorFor(code)
		if k.Name != code.String() || CodeOf(k) != code || k.Message == "" || k.HTTPStatus < 300 || k.HTTPStatus > 599 {
			t.Errorf("ErrorFor(%v) = %+v", code, k)
		}
	}
	if ErrorFor(pb.ServerError(999)) != errkind.ErrUnknown || ErrorFor(pb.ServerError(-1)) != errkind.ErrUnknown {
		t.Error("unknown codes do not map to ErrUnknown")
	}
}

func TestChecksumMismatchKind(t *testing.T) {
	err := fmt.Errorf("send: %w", ErrChecksumMismatch)
	if errkind.KindOf(err) != errkind.ErrChecksum || CodeOf(err) != pb.ServerError_ChecksumError || ErrChecksumMismatch.Error() != "wire: checksum mismatch" {
		t.Fatalf("%v: kind %v code %v", err, errkind.KindOf(err), CodeOf(err))
	}
}

func TestErrorCommands(t *testing.T) {
	err := fmt.Errorf("topic t: %w", errkind.ErrTopicNotFound)
	if !errors.Is(err, errkind.ErrTopicNotFound) || CodeOf(err) != pb.ServerError_TopicNotFound {
		t.Fatal("wrapped server error lost")
	}
	if CodeOf(errors.New("x")) != pb.ServerError_UnknownError {
		t.Fatal("plain error not UnknownError")
	}
	cmd := NewErrorCommand(7, err)
	if _, e := AppendCommand(nil, cmd); e != nil {
		t.Fatal(e)
	}
	if cmd.GetError().GetRequestId() != 7 || cmd.GetError().GetError() != pb.ServerError_TopicNotFound || cmd.GetError().GetMessage() != "topic t: topic not found" {
		t.Fatalf("%v", cmd)
	}
	se := NewSendErrorCommand(1, 2, fmt.Errorf("send: %w", ErrChecksumMismatch))
	if _, e := AppendCommand(nil, se); e != nil {
		t.Fatal(e)
	}
	if se.GetSendError().GetError() != pb.ServerError_ChecksumError || se.GetSendError().GetProducerId() != 1 || se.GetSendError().GetSequenceId() != 2 {
		t.Fatalf("%v", se)
	}
}

// TestNewFailure checks that each request type is answered in its own
// response's form, with the code and message of NewErrorCommand.
func TestNewFailure(t *testing.T) {
	err := fmt.Errorf("%w: topic t", errkind.ErrTooManyRequests)
	const code, msg = pb.ServerError_TooManyRequests, "too many concurrent requests: topic t"
	for _, c := range []struct {
		req   pb.BaseCommand_Type
		resp  pb.BaseCommand_Type
		check func(*pb.BaseCommand) bool
	}{
		{pb.BaseCommand_LOOKUP, pb.BaseCommand_LOOKUP_RESPONSE, func(cmd *pb.BaseCommand) bool {
			r := cmd.GetLookupTopicResponse()
			return r.GetRequestId() == 9 && r.GetResponse() == pb.CommandLookupTopicResponse_Failed && r.GetError() == code && r.GetMessage() == msg
		}},
		{pb.BaseCommand_PARTITIONED_METADATA, pb.BaseCommand_PARTITIONED_METADATA_RESPONSE, func(cmd *pb.BaseCommand) bool {
			r := cmd.GetPartitionMetadataResponse()
			return r.GetRequestId() == 9 && r.GetResponse() == pb.CommandPartitionedTopicMetadataResponse_Failed && r.GetError() == code && r.GetMessage() == msg
		}},
		{pb.BaseCommand_GET_SCHEMA, pb.BaseCommand_GET_SCHEMA_RESPONSE, func(cmd *pb.BaseCommand) bool {
			r := cmd.GetGetSchemaResponse()
			return r.GetRequestId() == 9 && r.GetErrorCode() == code && r.GetErrorMessage() == msg
		}},
		{pb.BaseCommand_GET_OR_CREATE_SCHEMA, pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE, func(cmd *pb.BaseCommand) bool {
			r := cmd.GetGetOrCreateSchemaResponse()
			return r.GetRequestId() == 9 && r.GetErrorCode() == code && r.GetErrorMessage() == msg
		}},
		{pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST, pb.BaseCommand_TC_CLIENT_CONNECT_RESPONSE, func(cmd *pb.BaseCommand) bool {
			r := cmd.GetTcClientConnectResponse()
			return r.GetRequestId() == 9 && r.GetError() == code && r.GetMessage() == msg
		}},
		{pb.BaseCommand_NEW_TXN, pb.BaseCommand_NEW_TXN_RESPONSE, func(cmd *pb.BaseCommand) bool {
			r := cmd.GetNewTxnResponse()
			return r.GetRequestId() == 9 && r.GetError() == code && r.GetMessage() == msg
		}},
		{pb.BaseCommand_ADD_PARTITION_TO_TXN, pb.BaseCommand_ADD_PARTITION_TO_TXN_RESPONSE, func(cmd *pb.BaseCommand) bool {
			r := cmd.GetAddPartitionToTxnResponse()
			return r.GetRequestId() == 9 && r.GetError() == code && r.GetMessage() == msg
		}},
		{pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN, pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN_RESPONSE, func(cmd *pb.BaseCommand) bool {
			r := cmd.GetAddSubscriptionToTxnResponse()
			return r.GetRequestId() == 9 && r.GetError() == code && r.GetMessage() == msg
		}},
		{pb.BaseCommand_END_TXN, pb.BaseCommand_END_TXN_RESPONSE, func(cmd *pb.BaseCommand) bool {
			r := cmd.GetEndTxnResponse()
			return r.GetRequestId() == 9 && r.GetError() == code && r.GetMessage() == msg
		}},
		{pb.BaseCommand_END_TXN_ON_PARTITION, pb.BaseCommand_END_TXN_ON_PARTITION_RESPONSE, func(cmd *pb.BaseCommand) bool {
			r := cmd.GetEndTxnOnPartitionResponse()
			return r.GetRequestId() == 9 && r.GetError() == code && r.GetMessage() == msg
		}},
		{pb.BaseCommand_END_TXN_ON_SUBSCRIPTION, pb.BaseCommand_END_TXN_ON_SUBSCRIPTION_RESPONSE, func(cmd *pb.BaseCommand) bool {
			r := cmd.GetEndTxnOnSubscriptionResponse()
			return r.GetRequestId() == 9 && r.GetError() == code && r.GetMessage() == msg
		}},
		{pb.BaseCommand_GET_TOPICS_OF_NAMESPACE, pb.BaseCommand_ERROR, func(cmd *pb.BaseCommand) bool {
			r := cmd.GetError()
			return r.GetRequestId() == 9 && r.GetError() == code && r.GetMessage() == msg
		}},
	} {
		cmd := NewFailure(c.req, 9, err)
		if _, e := AppendCommand(nil, cmd); e != nil {
			t.Fatalf("%v: %v", c.req, e)
		}
		if cmd.GetType() != c.resp || !c.check(cmd) {
			t.Errorf("NewFailure(%v) = %v", c.req, cmd)
		}
	}
}
