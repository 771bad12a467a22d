package errkind

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestTable pins every kind of the table: its name, HTTP status and
// retriability. A change here changes what clients see; say why in the
// commit. (wire's TestErrorTable pins each kind's server error code.)
func TestTable(t *testing.T) {
	want := []struct {
		kind      *Error
		name      string
		status    int
		retriable bool
	}{
		{ErrUnknown, "UnknownError", 500, false},
		{ErrMetadata, "MetadataError", 500, true},
		{ErrPersistence, "PersistenceError", 500, true},
		{ErrAuthentication, "AuthenticationError", 401, false},
		{ErrAuthorization, "AuthorizationError", 403, false},
		{ErrConsumerBusy, "ConsumerBusy", 412, false},
		{ErrServiceNotReady, "ServiceNotReady", 503, true},
		{ErrProducerBlockedQuotaExceeded, "ProducerBlockedQuotaExceededError", 503, false},
		{ErrProducerBlockedQuotaExceededException, "ProducerBlockedQuotaExceededException", 503, false},
		{ErrChecksum, "ChecksumError", 400, true},
		{ErrUnsupportedVersion, "UnsupportedVersionError", 400, false},
		{ErrTopicNotFound, "TopicNotFound", 404, false},
		{ErrSubscriptionNotFound, "SubscriptionNotFound", 404, false},
		{ErrConsumerNotFound, "ConsumerNotFound", 404, false},
		{ErrTooManyRequests, "TooManyRequests", 429, true},
		{ErrTopicTerminated, "TopicTerminatedError", 503, false},
		{ErrProducerBusy, "ProducerBusy", 409, false},
		{ErrInvalidTopicName, "InvalidTopicName", 412, false},
		{ErrIncompatibleSchema, "IncompatibleSchema", 409, false},
		{ErrConsumerAssign, "ConsumerAssignError", 409, false},
		{ErrTransactionCoordinatorNotFound, "TransactionCoordinatorNotFound", 503, true},
		{ErrInvalidTxnStatus, "InvalidTxnStatus", 409, false},
		{ErrNotAllowed, "NotAllowedError", 405, false},
		{ErrTransactionConflict, "TransactionConflict", 409, false},
		{ErrTransactionNotFound, "TransactionNotFound", 404, false},
		{ErrProducerFenced, "ProducerFenced", 409, false},
		// The HTTP-only kinds.
		{ErrBadRequest, "BadRequest", 400, false},
		{ErrNotFound, "NotFound", 404, false},
		{ErrConflict, "Conflict", 409, false},
		{ErrConcurrentModification, "ConcurrentModification", 409, true},
		{ErrPreconditionFailed, "PreconditionFailed", 412, false},
		{ErrRedirect, "Redirect", 307, true},
		{ErrRequestTooLarge, "RequestTooLarge", 413, false},
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
		if k.Name != w.name || k.HTTPStatus != w.status || k.Retriable != w.retriable {
			t.Errorf("%v: name %q status %d retriable %v, want %q %d %v", k, k.Name, k.HTTPStatus, k.Retriable, w.name, w.status, w.retriable)
		}
		if ByName(w.name) != k {
			t.Errorf("ByName(%q) = %v", w.name, ByName(w.name))
		}
		if k.Message == "" || k.Error() != "errkind: "+k.Name+": "+k.Message {
			t.Errorf("%v: message %q", k.Name, k.Error())
		}
		err := fmt.Errorf("x: %w", k)
		if KindOf(err) != k || HTTPStatusOf(err) != w.status {
			t.Errorf("%v: derived %v %d", k, KindOf(err), HTTPStatusOf(err))
		}
	}
	if ByName("NoSuchKind") != nil {
		t.Error("ByName finds a kind that does not exist")
	}
}

type namedKind string

func (n namedKind) Error() string     { return "named " + string(n) }
func (n namedKind) ErrorKind() string { return string(n) }

// kindPkgError is a package's error that names its kind, as package
// topic's do.
type kindPkgError struct{}

func (kindPkgError) Error() string     { return `topic: invalid name "a b"` }
func (kindPkgError) ErrorKind() string { return "InvalidTopicName" }

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
		{namedKind("InvalidTopicName"), ErrInvalidTopicName},
		{fmt.Errorf("t: %w", namedKind("InvalidTopicName")), ErrInvalidTopicName},
		{namedKind("NoSuchCode"), ErrUnknown},
		{fmt.Errorf("send: %w", Sentinel(ErrChecksum, "pkg: checksum mismatch")), ErrChecksum},
		{fmt.Errorf("op: %w", context.DeadlineExceeded), ErrServiceNotReady},
		{context.Canceled, ErrServiceNotReady},
		// The outer wrap decides.
		{fmt.Errorf("%w: %w", ErrPreconditionFailed, namedKind("InvalidTopicName")), ErrPreconditionFailed},
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
	if HTTPStatusOf(errors.New("x")) != 500 {
		t.Fatal("an error of no kind is not answered 500")
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
		{fmt.Errorf("%w: t", Sentinel(ErrTopicNotFound, "broker: topic not found")), "topic not found: t"},
		{fmt.Errorf("tenant x: %w", Sentinel(ErrNotFound, "policy: not found")), "tenant x: not found"},
		{fmt.Errorf("%w: %w", ErrPersistence, Sentinel(ErrChecksum, "wire: checksum mismatch")), "error writing or reading the ledger storage: checksum mismatch"},
		{Sentinel(ErrNotFound, "Tenant does not exist"), "Tenant does not exist"},
		{fmt.Errorf("lookup: %w", kindPkgError{}), "lookup: invalid name \"a b\""},
		{Sentinel(ErrNotFound, "being deleted: x: y"), "being deleted: x: y"},
		{fmt.Errorf("%w: %w", ErrServiceNotReady, fmt.Errorf("inner: %w", ErrTopicNotFound)), "service not ready; look the topic up again: inner: topic not found"},
		{errors.Join(fmt.Errorf("a: %w", ErrConflict), fmt.Errorf("b: %w", ErrBadRequest)), "a: conflicts with the current state\nb: bad request"},
	} {
		got := MessageOf(c.err)
		if got != c.want {
			t.Errorf("MessageOf(%q) = %q, want %q", c.err, got, c.want)
		}
		for _, k := range Kinds() {
			if strings.Contains(got, k.Error()) || strings.Contains(got, k.Name+":") {
				t.Errorf("MessageOf(%q) = %q names kind %v", c.err, got, k.Name)
			}
		}
	}
}
