package wire

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/wire/pb"
)

// TestErrorTable pins every kind of the table: its code, HTTP status and
// retriability. A change here changes what clients see; say why in the
// commit.
func TestErrorTable(t *testing.T) {
	want := []struct {
		kind      *Error
		code      pb.ServerError
		status    int
		retriable bool
	}{
		{ErrUnknown, pb.ServerError_UnknownError, 500, false},
		{ErrMetadata, pb.ServerError_MetadataError, 500, true},
		{ErrPersistence, pb.ServerError_PersistenceError, 500, true},
		{ErrAuthentication, pb.ServerError_AuthenticationError, 401, false},
		{ErrAuthorization, pb.ServerError_AuthorizationError, 403, false},
		{ErrConsumerBusy, pb.ServerError_ConsumerBusy, 412, false},
		{ErrServiceNotReady, pb.ServerError_ServiceNotReady, 503, true},
		{ErrProducerBlockedQuotaExceeded, pb.ServerError_ProducerBlockedQuotaExceededError, 503, false},
		{ErrProducerBlockedQuotaExceededException, pb.ServerError_ProducerBlockedQuotaExceededException, 503, false},
		{ErrChecksum, pb.ServerError_ChecksumError, 400, true},
		{ErrUnsupportedVersion, pb.ServerError_UnsupportedVersionError, 400, false},
		{ErrTopicNotFound, pb.ServerError_TopicNotFound, 404, false},
		{ErrSubscriptionNotFound, pb.ServerError_SubscriptionNotFound, 404, false},
		{ErrConsumerNotFound, pb.ServerError_ConsumerNotFound, 404, false},
		{ErrTooManyRequests, pb.ServerError_TooManyRequests, 429, true},
		{ErrTopicTerminated, pb.ServerError_TopicTerminatedError, 503, false},
		{ErrProducerBusy, pb.ServerError_ProducerBusy, 409, false},
		{ErrInvalidTopicName, pb.ServerError_InvalidTopicName, 412, false},
		{ErrIncompatibleSchema, pb.ServerError_IncompatibleSchema, 409, false},
		{ErrConsumerAssign, pb.ServerError_ConsumerAssignError, 409, false},
		{ErrTransactionCoordinatorNotFound, pb.ServerError_TransactionCoordinatorNotFound, 503, true},
		{ErrInvalidTxnStatus, pb.ServerError_InvalidTxnStatus, 409, false},
		{ErrNotAllowed, pb.ServerError_NotAllowedError, 405, false},
		{ErrTransactionConflict, pb.ServerError_TransactionConflict, 409, false},
		{ErrTransactionNotFound, pb.ServerError_TransactionNotFound, 404, false},
		{ErrProducerFenced, pb.ServerError_ProducerFenced, 409, false},
		// The HTTP-only kinds.
		{ErrBadRequest, pb.ServerError_NotAllowedError, 400, false},
		{ErrNotFound, pb.ServerError_TopicNotFound, 404, false},
		{ErrConflict, pb.ServerError_NotAllowedError, 409, false},
		{ErrConcurrentModification, pb.ServerError_MetadataError, 409, true},
		{ErrPreconditionFailed, pb.ServerError_NotAllowedError, 412, false},
		{ErrRedirect, pb.ServerError_ServiceNotReady, 307, true},
		{ErrRequestTooLarge, pb.ServerError_NotAllowedError, 413, false},
	}
	kinds := Kinds()
	if len(kinds) != len(want) {
		t.Fatalf("%d kinds, the test knows %d", len(kinds), len(want))
	}
	seen := map[*Error]bool{}
	for i, w := range want {
		k := w.kind
		if kinds[i] != k {
			t.Errorf("kind %d is %v, want %v", i, kinds[i], k)
		}
		if seen[k] {
			t.Errorf("%v listed twice", k)
		}
		seen[k] = true
		if k.Code != w.code || k.HTTPStatus != w.status || k.Retriable != w.retriable {
			t.Errorf("%v: code %v status %d retriable %v, want %v %d %v", k, k.Code, k.HTTPStatus, k.Retriable, w.code, w.status, w.retriable)
		}
		if k.Message == "" || !strings.HasPrefix(k.Error(), "wire: "+k.Code.String()+": ") {
			t.Errorf("%v: message %q", k.Code, k.Error())
		}
		// Clients decide retries from the code alone: a kind may not
		// disagree with its code's entry.
		if k.Retriable != ErrorFor(k.Code).Retriable {
			t.Errorf("%v (%d): retriable %v, but code %v is %v", k.Code, k.HTTPStatus, k.Retriable, k.Code, ErrorFor(k.Code).Retriable)
		}
		err := fmt.Errorf("x: %w", k)
		if KindOf(err) != k || CodeOf(err) != w.code || HTTPStatusOf(err) != w.status {
			t.Errorf("%v: derived %v %v %d", k, KindOf(err), CodeOf(err), HTTPStatusOf(err))
		}
	}
}

func TestErrorTableComplete(t *testing.T) {
	values := pb.ServerError(0).Descriptor().Values()
	if len(serverErrors) != values.Len() {
		t.Fatalf("%d table entries for %d codes", len(serverErrors), values.Len())
	}
	for i := range values.Len() {
		code := pb.ServerError(values.Get(i).Number())
		e := ErrorFor(code)
		if e.Code != code || e.Message == "" || e.HTTPStatus < 300 || e.HTTPStatus > 599 {
			t.Errorf("ErrorFor(%v) = %+v", code, e)
		}
	}
	if ErrorFor(pb.ServerError(999)) != ErrUnknown || ErrorFor(pb.ServerError(-1)) != ErrUnknown {
		t.Error("unknown codes do not map to ErrUnknown")
	}
}

type namedCode string

func (n namedCode) Error() string           { return "named " + string(n) }
func (n namedCode) ServerErrorCode() string { return string(n) }

func TestKindOf(t *testing.T) {
	notFound := Sentinel(ErrTopicNotFound, "pkg: topic not found")
	for _, c := range []struct {
		err  error
		want *Error
	}{
		{nil, ErrUnknown},
		{errors.New("x"), ErrUnknown},
		{notFound, ErrTopicNotFound},
		{fmt.Errorf("t: %w", notFound), ErrTopicNotFound},
		{namedCode("InvalidTopicName"), ErrInvalidTopicName},
		{fmt.Errorf("t: %w", namedCode("InvalidTopicName")), ErrInvalidTopicName},
		{namedCode("NoSuchCode"), ErrUnknown},
		{fmt.Errorf("send: %w", ErrChecksumMismatch), ErrChecksum},
		{fmt.Errorf("op: %w", context.DeadlineExceeded), ErrServiceNotReady},
		{context.Canceled, ErrServiceNotReady},
		// The outer wrap decides.
		{fmt.Errorf("%w: %w", ErrPreconditionFailed, namedCode("InvalidTopicName")), ErrPreconditionFailed},
		{fmt.Errorf("%w: %w", notFound, context.Canceled), ErrTopicNotFound},
		{fmt.Errorf("%w: %w", errors.New("plain"), notFound), ErrTopicNotFound},
		{errors.Join(errors.New("a"), fmt.Errorf("b: %w", ErrConflict)), ErrConflict},
	} {
		if got := KindOf(c.err); got != c.want {
			t.Errorf("KindOf(%v) = %v, want %v", c.err, got, c.want)
		}
		if HasKind(c.err) != (c.want != ErrUnknown) {
			t.Errorf("HasKind(%v) = %v", c.err, HasKind(c.err))
		}
	}
	if !errors.Is(notFound, ErrTopicNotFound) || notFound.Error() != "pkg: topic not found" {
		t.Fatalf("sentinel %q does not wrap its kind", notFound)
	}
}

func TestMessageOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.New("plain"), "plain"},
		{fmt.Errorf("%w: command X", ErrNotAllowed), "operation not allowed: command X"},
		{fmt.Errorf("%w: %w", ErrNotAllowed, fmt.Errorf("%w: twice", ErrNotAllowed)), "operation not allowed: operation not allowed: twice"},
		{fmt.Errorf("%w: t", Sentinel(ErrTopicNotFound, "broker: topic not found")), "broker: topic not found: t"},
		{fmt.Errorf("%w: %w", ErrServiceNotReady, fmt.Errorf("inner: %w", ErrTopicNotFound)), "service not ready; look the topic up again: inner: topic not found"},
	} {
		got := MessageOf(c.err)
		if got != c.want {
			t.Errorf("MessageOf(%q) = %q, want %q", c.err, got, c.want)
		}
		for _, k := range Kinds() {
			if strings.Contains(got, k.Code.String()) {
				t.Errorf("MessageOf(%q) = %q names code %v", c.err, got, k.Code)
			}
		}
	}
}

func TestErrorCommands(t *testing.T) {
	err := fmt.Errorf("topic t: %w", ErrTopicNotFound)
	if !errors.Is(err, ErrTopicNotFound) || CodeOf(err) != pb.ServerError_TopicNotFound {
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
