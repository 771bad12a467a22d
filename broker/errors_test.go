package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/broker/dynconfig"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/broker/ownership"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// TestSentinelKinds pins the kind of the error table (errkind) every sentinel a
// client can meet belongs to: it decides the server error code and the
// HTTP status (docs/admin.md lists them).
func TestSentinelKinds(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		kind *errkind.Error
	}{
		{"broker.ErrClosed", broker.ErrClosed, errkind.ErrServiceNotReady},
		{"broker.ErrNotOwner", broker.ErrNotOwner, errkind.ErrServiceNotReady},
		{"broker.ErrTopicNotFound", broker.ErrTopicNotFound, errkind.ErrTopicNotFound},
		{"broker.ErrSubNotFound", broker.ErrSubNotFound, errkind.ErrSubscriptionNotFound},
		{"broker.ErrNamespace", broker.ErrNamespace, errkind.ErrNotFound},
		{"broker.ErrInvalidArgument", broker.ErrInvalidArgument, errkind.ErrBadRequest},
		{"broker.ErrBusy", broker.ErrBusy, errkind.ErrConsumerBusy},
		{"broker.ErrTooManyTopics", broker.ErrTooManyTopics, errkind.ErrPreconditionFailed},
		{"broker.ErrTooManyProducers", broker.ErrTooManyProducers, errkind.ErrProducerBusy},
		{"broker.ErrTooManyConsumers", broker.ErrTooManyConsumers, errkind.ErrConsumerBusy},
		{"broker.ErrTooManySubscriptions", broker.ErrTooManySubscriptions, errkind.ErrPreconditionFailed},
		{"broker.ErrTooManySubConsumers", broker.ErrTooManySubConsumers, errkind.ErrConsumerBusy},
		{"broker.ErrNoAutoSubscription", broker.ErrNoAutoSubscription, errkind.ErrSubscriptionNotFound},
		{"broker.ErrSchemaAutoUpdateDisabled", broker.ErrSchemaAutoUpdateDisabled, errkind.ErrIncompatibleSchema},
		{"broker.ErrEncryptionRequired", broker.ErrEncryptionRequired, errkind.ErrMetadata},
		{"broker.ErrNotEncrypted", broker.ErrNotEncrypted, errkind.ErrMetadata},
		{"dynconfig.ErrUnknown", dynconfig.ErrUnknown, errkind.ErrPreconditionFailed},
		{"dynconfig.ErrInvalid", dynconfig.ErrInvalid, errkind.ErrPreconditionFailed},

		{"adminapi.ErrTopicNotFound", adminapi.ErrTopicNotFound, errkind.ErrTopicNotFound},
		{"adminapi.ErrSubscriptionNotFound", adminapi.ErrSubscriptionNotFound, errkind.ErrSubscriptionNotFound},
		{"adminapi.ErrEntryNotFound", adminapi.ErrEntryNotFound, errkind.ErrNotFound},
		{"adminapi.ErrBadRequest", adminapi.ErrBadRequest, errkind.ErrBadRequest},
		{"adminapi.ErrConflict", adminapi.ErrConflict, errkind.ErrConflict},
		{"adminapi.ErrPreconditionFailed", adminapi.ErrPreconditionFailed, errkind.ErrPreconditionFailed},
		{"adminapi.ErrNotAllowed", adminapi.ErrNotAllowed, errkind.ErrNotAllowed},
		{"adminapi.ErrUnavailable", adminapi.ErrUnavailable, errkind.ErrServiceNotReady},
		{"adminapi.ErrNotOwner", adminapi.ErrNotOwner, errkind.ErrRedirect},
		{"adminapi.NotOwnerError", &adminapi.NotOwnerError{URL: "http://b2:8080"}, errkind.ErrRedirect},
		{"adminapi.ErrTooLarge", adminapi.ErrTooLarge, errkind.ErrRequestTooLarge},

		{"ownership.ErrClosed", ownership.ErrClosed, errkind.ErrServiceNotReady},
		{"ownership.ErrNotRegistered", ownership.ErrNotRegistered, errkind.ErrServiceNotReady},
		{"ownership.ErrNoBrokers", ownership.ErrNoBrokers, errkind.ErrServiceNotReady},
		{"ownership.ErrNotOwned", ownership.ErrNotOwned, errkind.ErrServiceNotReady},
		{"ownership.ErrContended", ownership.ErrContended, errkind.ErrServiceNotReady},
		{"ownership.ErrInvalidBundle", ownership.ErrInvalidBundle, errkind.ErrPreconditionFailed},

		{"mledger.ErrFenced", mledger.ErrFenced, errkind.ErrServiceNotReady},
		{"mledger.ErrClosed", mledger.ErrClosed, errkind.ErrServiceNotReady},
		{"mledger.ErrInvalidName", mledger.ErrInvalidName, errkind.ErrPreconditionFailed},
		{"mledger.ErrTooManyAckRanges", mledger.ErrTooManyAckRanges, errkind.ErrPreconditionFailed},
		{"mledger.ErrInvalidPosition", mledger.ErrInvalidPosition, errkind.ErrBadRequest},
		{"mledger.ErrCorruptMeta", mledger.ErrCorruptMeta, errkind.ErrPersistence},
		{"mledger.ErrNoCursor", mledger.ErrNoCursor, errkind.ErrSubscriptionNotFound},
		{"mledger.ErrChainBroken", mledger.ErrChainBroken, errkind.ErrPersistence},

		{"policy.ErrNotFound", policy.ErrNotFound, errkind.ErrNotFound},
		{"policy.ErrExists", policy.ErrExists, errkind.ErrConflict},
		{"policy.ErrInvalid", policy.ErrInvalid, errkind.ErrPreconditionFailed},
		{"policy.ErrConflict", policy.ErrConflict, errkind.ErrConcurrentModification},
		{"policy.ErrNotEmpty", policy.ErrNotEmpty, errkind.ErrConflict},
		{"policy.ErrCorrupt", policy.ErrCorrupt, errkind.ErrUnknown},
		{"policy.ErrUnreachable", policy.ErrUnreachable, errkind.ErrServiceNotReady},

		{"topic.ErrInvalidName", topic.ErrInvalidName, errkind.ErrInvalidTopicName},
	} {
		wrapped := fmt.Errorf("op on x: %w", c.err)
		if k := errkind.KindOf(wrapped); k != c.kind {
			t.Errorf("%s: kind %v, want %v", c.name, k, c.kind)
		}
		if !strings.Contains(c.err.Error(), ":") || strings.Contains(c.err.Error(), c.kind.Name) || strings.Contains(c.err.Error(), wire.CodeOf(c.kind).String()) {
			t.Errorf("%s: text %q should name its package, not its kind or code", c.name, c.err)
		}
	}
	// Errors that stop a broker or reveal a bug never reach a client as
	// themselves: they have no kind (a 500, PersistenceError on the wire).
	for _, err := range []error{ownership.ErrIDInUse, mledger.ErrInvalidConfig} {
		if errkind.HasKind(err) {
			t.Errorf("%v has kind %v", err, errkind.KindOf(err))
		}
	}
	if _, err := topic.Parse("persistent://t/n s/x"); errkind.KindOf(err) != errkind.ErrInvalidTopicName {
		t.Errorf("topic.Parse error %v: kind %v", err, errkind.KindOf(err))
	}
}

// adminServer serves e's broker through the admin API.
func (e *env) adminServer() *httptest.Server {
	e.t.Helper()
	srv := httptest.NewServer(admin.New(admin.Config{Policies: e.pol, Broker: e.b.AdminAPI(), Cluster: "test"}))
	e.t.Cleanup(srv.Close)
	return srv
}

// httpDo sends one request (redirects not followed) and returns the
// status and the error body's reason.
func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb struct {
		Reason string `json:"reason"`
	}
	json.Unmarshal(b, &eb)
	return resp.StatusCode, eb.Reason
}

// An invalid topic name is 412 (Pulsar's "Topic name is not valid") on
// every admin path that takes a topic, whether the admin server or the
// broker finds it invalid; on the binary protocol it is InvalidTopicName.
// It used to be 400 when the broker's admin adapter saw it and 500 for a
// name the managed ledger refuses.
func TestInvalidTopicNameSameStatusEverywhere(t *testing.T) {
	e := startEnv(t, nil)
	srv := e.adminServer()
	paths := []struct{ method, suffix, body string }{
		{"PUT", "", ""},
		{"DELETE", "", ""},
		{"PUT", "/partitions", "2"},
		{"POST", "/partitions", "3"},
		{"GET", "/partitions", ""},
		{"DELETE", "/partitions", ""},
		{"GET", "/stats", ""},
		{"GET", "/partitioned-stats", ""},
		{"GET", "/internalStats", ""},
		{"GET", "/subscriptions", ""},
		{"PUT", "/subscription/s", ""},
		{"DELETE", "/subscription/s", ""},
		{"POST", "/subscription/s/skip/1", ""},
		{"POST", "/subscription/s/skip_all", ""},
		{"POST", "/subscription/s/resetcursor/0", ""},
		{"POST", "/subscription/s/resetcursor", `{"ledgerId":1,"entryId":1}`},
		{"PUT", "/unload", ""},
		{"GET", "/lastMessageId", ""},
		{"GET", "/replication", ""},
		{"POST", "/replication", `["test"]`},
		{"DELETE", "/replication", ""},
		{"GET", "/ledger/1/entry/1", ""},
	}
	// Names the admin server refuses (escaped once in the path): a bad
	// character, a '/' in the local name, a bad namespace.
	for _, bad := range []string{"public/default/bad%20name", "public/default/a%2Fb", "public/bad%3Cns/x"} {
		for _, d := range []string{"persistent", "non-persistent"} {
			for _, p := range paths {
				status, reason := httpDo(t, p.method, srv.URL+"/admin/v2/"+d+"/"+bad+p.suffix, p.body)
				if status != http.StatusPreconditionFailed || !strings.Contains(reason, "invalid name") {
					t.Errorf("%s /admin/v2/%s/%s%s: %d %q, want 412", p.method, d, bad, p.suffix, status, reason)
				}
			}
			if status, _ := httpDo(t, "GET", srv.URL+"/lookup/v2/topic/"+d+"/"+bad, ""); status != http.StatusPreconditionFailed {
				t.Errorf("lookup %s/%s: %d, want 412", d, bad, status)
			}
		}
	}
	// A name the managed ledger refuses (longer than mledger.MaxNameLen),
	// on the paths that reach it.
	long := "public/default/" + strings.Repeat("x", mledger.MaxNameLen)
	for _, p := range []struct{ method, suffix, body string }{
		{"PUT", "", ""},
		{"PUT", "/subscription/s", ""},
	} {
		status, reason := httpDo(t, p.method, srv.URL+"/admin/v2/persistent/"+long+p.suffix, p.body)
		if status != http.StatusPreconditionFailed || !strings.Contains(reason, "invalid name") {
			t.Errorf("%s long name%s: %d %q, want 412", p.method, p.suffix, status, reason)
		}
	}
	// The binary protocol: InvalidTopicName, not retriable, the code said
	// once.
	c := dialRaw(t, e.url, true)
	name := "persistent://public/default/bad name"
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: &name, ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)}})
	r := c.recv().Cmd.GetError()
	if r.GetError() != pb.ServerError_InvalidTopicName || wire.ErrorFor(r.GetError()).Retriable || strings.Contains(r.GetMessage(), "InvalidTopicName") {
		t.Fatalf("producer on %q: %v", name, r)
	}
}

// noBrokers is a Placement with no live broker to place anything on.
type noBrokers struct{}

func (noBrokers) Lookup(context.Context, topic.Name, bool) (broker.LookupResult, error) {
	return broker.LookupResult{}, fmt.Errorf("lookup bundle 0x00000000_0x40000000: %w", ownership.ErrNoBrokers)
}
func (noBrokers) Owns(topic.Name) bool                { return false }
func (noBrokers) OwnedEpoch(topic.Name) (int64, bool) { return 0, false }

// "No broker available" is retriable on the binary protocol
// (ServiceNotReady) and 503 on the HTTP lookup, as in Pulsar; the HTTP
// lookup used to answer 500.
func TestNoBrokerAvailable(t *testing.T) {
	e := startEnv(t, func(c *setup) { c.Placement = noBrokers{} })
	const tp = "persistent://public/default/nowhere"

	c := dialRaw(t, e.url, true)
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
		Topic: proto.String(tp), RequestId: proto.Uint64(1)}})
	r := c.recv().Cmd.GetLookupTopicResponse()
	if r.GetResponse() != pb.CommandLookupTopicResponse_Failed || r.GetError() != pb.ServerError_ServiceNotReady {
		t.Fatalf("lookup: %v", r)
	}
	if !wire.ErrorFor(r.GetError()).Retriable {
		t.Fatalf("%v is not retriable", r.GetError())
	}
	if msg := r.GetMessage(); !strings.Contains(msg, "no live broker") || strings.Contains(msg, "ServiceNotReady") {
		t.Fatalf("lookup message %q: want the cause, and the code only in the code field", msg)
	}

	srv := e.adminServer()
	status, reason := httpDo(t, "GET", srv.URL+"/lookup/v2/topic/persistent/public/default/nowhere", "")
	if status != http.StatusServiceUnavailable || !strings.Contains(reason, "no live broker") {
		t.Fatalf("HTTP lookup: %d %q, want 503", status, reason)
	}
	// The admin paths that need the owner agree.
	for _, p := range []string{"/stats", "/internalStats", "/lastMessageId"} {
		if status, reason := httpDo(t, "GET", srv.URL+"/admin/v2/persistent/public/default/nowhere"+p, ""); status != http.StatusServiceUnavailable {
			t.Errorf("GET %s: %d %q, want 503", p, status, reason)
		}
	}
}
