package broker_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// wireReply is a broker's answer to one request: ok, or the error code
// and message it carried.
type wireReply struct {
	ok   bool
	code pb.ServerError
	msg  string
}

func (r wireReply) String() string {
	if r.ok {
		return "ok"
	}
	return fmt.Sprintf("%v %q", r.code, r.msg)
}

// replyTo reads frames until the answer to request id (skipping others:
// CLOSE_CONSUMER after a SEEK, say).
func replyTo(r *rawConn, id uint64) wireReply {
	r.t.Helper()
	fail := func(code pb.ServerError, msg string) wireReply { return wireReply{code: code, msg: msg} }
	for {
		f := r.recv()
		c := f.Cmd
		switch c.GetType() {
		case pb.BaseCommand_ERROR:
			if c.Error.GetRequestId() == id {
				return fail(c.Error.GetError(), c.Error.GetMessage())
			}
		case pb.BaseCommand_SUCCESS:
			if c.Success.GetRequestId() == id {
				return wireReply{ok: true}
			}
		case pb.BaseCommand_PRODUCER_SUCCESS:
			if c.ProducerSuccess.GetRequestId() == id {
				return wireReply{ok: true}
			}
		case pb.BaseCommand_LOOKUP_RESPONSE:
			if l := c.LookupTopicResponse; l.GetRequestId() == id {
				if l.GetResponse() == pb.CommandLookupTopicResponse_Failed {
					return fail(l.GetError(), l.GetMessage())
				}
				return wireReply{ok: true}
			}
		case pb.BaseCommand_PARTITIONED_METADATA_RESPONSE:
			if m := c.PartitionMetadataResponse; m.GetRequestId() == id {
				if m.GetResponse() == pb.CommandPartitionedTopicMetadataResponse_Failed {
					return fail(m.GetError(), m.GetMessage())
				}
				return wireReply{ok: true}
			}
		case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE:
			if c.GetTopicsOfNamespaceResponse.GetRequestId() == id {
				return wireReply{ok: true}
			}
		case pb.BaseCommand_GET_SCHEMA_RESPONSE:
			if s := c.GetSchemaResponse; s.GetRequestId() == id {
				if s.ErrorCode != nil {
					return fail(s.GetErrorCode(), s.GetErrorMessage())
				}
				return wireReply{ok: true}
			}
		case pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE:
			if s := c.GetOrCreateSchemaResponse; s.GetRequestId() == id {
				if s.ErrorCode != nil {
					return fail(s.GetErrorCode(), s.GetErrorMessage())
				}
				return wireReply{ok: true}
			}
		case pb.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE:
			if c.GetLastMessageIdResponse.GetRequestId() == id {
				return wireReply{ok: true}
			}
		case pb.BaseCommand_CONSUMER_STATS_RESPONSE:
			if s := c.ConsumerStatsResponse; s.GetRequestId() == id {
				if s.ErrorCode != nil {
					return fail(s.GetErrorCode(), s.GetErrorMessage())
				}
				return wireReply{ok: true}
			}
		}
	}
}

// wireSession is one connection of one row of the table.
type wireSession struct {
	r      *rawConn
	nextID uint64
}

// call sends a request made by mk with a fresh request id and returns
// the answer.
func (s *wireSession) call(mk func(id *uint64) *pb.BaseCommand) wireReply {
	s.r.t.Helper()
	s.nextID++
	id := s.nextID
	s.r.send(mk(&id))
	return replyTo(s.r, id)
}

func (s *wireSession) subscribe(topicName, sub string, cid uint64) wireReply {
	return s.call(func(id *uint64) *pb.BaseCommand {
		return &pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
			Topic: &topicName, Subscription: &sub, SubType: pb.CommandSubscribe_Exclusive.Enum(),
			ConsumerId: &cid, RequestId: id,
		}}
	})
}

func (s *wireSession) producer(topicName, name, initialSub string, pid uint64) wireReply {
	return s.call(func(id *uint64) *pb.BaseCommand {
		p := &pb.CommandProducer{Topic: &topicName, ProducerId: &pid, RequestId: id}
		if name != "" {
			p.ProducerName = &name
		}
		if initialSub != "" {
			p.InitialSubscriptionName = &initialSub
		}
		return &pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: p}
	})
}

// consumerOps are the commands that act on a consumer of the connection
// rather than on a topic: GET_LAST_MESSAGE_ID, REDELIVER, CONSUMER_STATS,
// SEEK. They are authorized by the SUBSCRIBE that made the consumer (as
// in Pulsar), so they succeed on an admitted consumer and meet
// ConsumerNotFound on a refused one. The first refusal is returned.
func (s *wireSession) consumerOps(cid uint64) wireReply {
	s.r.send(&pb.BaseCommand{Type: pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES.Enum(),
		RedeliverUnacknowledgedMessages: &pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: &cid}}) // (no answer)
	for _, mk := range []func(id *uint64) *pb.BaseCommand{
		func(id *uint64) *pb.BaseCommand {
			return &pb.BaseCommand{Type: pb.BaseCommand_GET_LAST_MESSAGE_ID.Enum(), GetLastMessageId: &pb.CommandGetLastMessageId{ConsumerId: &cid, RequestId: id}}
		},
		func(id *uint64) *pb.BaseCommand {
			return &pb.BaseCommand{Type: pb.BaseCommand_CONSUMER_STATS.Enum(), ConsumerStats: &pb.CommandConsumerStats{ConsumerId: &cid, RequestId: id}}
		},
		func(id *uint64) *pb.BaseCommand { // last: it closes the consumer
			return &pb.BaseCommand{Type: pb.BaseCommand_SEEK.Enum(), Seek: &pb.CommandSeek{ConsumerId: &cid, RequestId: id,
				MessagePublishTime: proto.Uint64(uint64(time.Now().UnixMilli()))}}
		},
	} {
		if rep := s.call(mk); !rep.ok {
			return rep
		}
	}
	return wireReply{ok: true}
}

func (s *wireSession) unsubscribe(cid uint64) wireReply {
	return s.call(func(id *uint64) *pb.BaseCommand {
		return &pb.BaseCommand{Type: pb.BaseCommand_UNSUBSCRIBE.Enum(), Unsubscribe: &pb.CommandUnsubscribe{ConsumerId: &cid, RequestId: id}}
	})
}

// TestCommandAuthorization sends every binary-protocol command that
// names a topic or a namespace as every kind of credential, over raw
// frames, and checks the exact answers: bad credentials are refused at
// CONNECT with AuthenticationError and the connection closes; an
// authenticated role without the right gets AuthorizationError naming
// the role (and keeps its connection); a refused command creates
// nothing: no topic, no subscription. The admin API's counterpart is
// broker/admin's TestEndpointAuthorization.
func TestCommandAuthorization(t *testing.T) {
	a := startAuthEnv(t, func(c *auth.Config) {
		c.AuthorizationEnabled = true
		c.SuperUserRoles = []string{"root"}
		c.ReplicatorRoles = []string{"repl"}
	})
	ctx := ctxT(t)
	pol := a.pol
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Tenant acme (admin acme-admin) with namespace acme/app, where writer
	// may produce, reader and auditor consume, and subscription "locked"
	// is limited to auditor; tenant other's admin is other-admin.
	// ex-admin was acme's admin, with every grant, and was removed from
	// everything: its tokens still authenticate (a token outlives its
	// role; nothing in Pulsar's model lists roles), but it may do nothing
	// any more (the HTTP table's "nobody" is such a role too).
	must(pol.CreateTenant(ctx, "acme", policy.TenantInfo{AdminRoles: []string{"acme-admin", "ex-admin"}, AllowedClusters: []string{"test"}}))
	must(pol.CreateTenant(ctx, "other", policy.TenantInfo{AdminRoles: []string{"other-admin"}, AllowedClusters: []string{"test"}}))
	must(pol.CreateNamespace(ctx, "acme/app", nil))
	must(pol.GrantNamespacePermission(ctx, "acme/app", "writer", []string{"produce"}))
	must(pol.GrantNamespacePermission(ctx, "acme/app", "reader", []string{"consume"}))
	must(pol.GrantNamespacePermission(ctx, "acme/app", "auditor", []string{"consume"}))
	must(pol.GrantNamespacePermission(ctx, "acme/app", "ex-admin", []string{"produce", "consume"}))
	must(pol.GrantSubscriptionPermission(ctx, "acme/app", "locked", []string{"auditor", "ex-admin"}))
	const existing = "persistent://acme/app/t"
	tp, _ := topic.Parse(existing)
	must(a.b.AdminAPI().Topics.CreateTopic(ctx, tp))
	// ex-admin's removal.
	must(pol.UpdateTenant(ctx, "acme", policy.TenantInfo{AdminRoles: []string{"acme-admin"}, AllowedClusters: []string{"test"}}))
	must(pol.RevokeNamespacePermission(ctx, "acme/app", "ex-admin"))
	must(pol.RevokeSubscriptionPermission(ctx, "acme/app", "locked", "ex-admin"))

	token := func(role string, expires time.Time) []byte { return []byte(a.token(t, role, expires)) }
	valid := time.Now().Add(time.Hour)
	forged, _ := auth.Sign(auth.HS256, auth.NewSecretKey(), "root", valid)

	// The rows: credentials. Bad ones (says set) are refused at CONNECT.
	rows := []struct {
		name    string
		version string // the client version sent in CONNECT
		method  string
		data    []byte
		says    string // the AuthenticationError's reason, for bad credentials
	}{
		{"none", "test", "", nil, "no credentials"},
		{"wrong signature", "test", "token", []byte(forged), "token signature invalid"},
		{"expired", "test", "token", token("root", time.Now().Add(-time.Minute)), "token expired"},
		{"malformed", "test", "token", []byte("a.b.c"), "malformed token"},
		{"ex-admin", "test", "token", token("ex-admin", valid), ""},       // deleted role
		{"nobody", "test", "token", token("nobody", valid), ""},           // no permission
		{"other-admin", "test", "token", token("other-admin", valid), ""}, // another tenant's admin
		{"acme-admin", "test", "token", token("acme-admin", valid), ""},
		{"writer", "test", "token", token("writer", valid), ""},   // produce only
		{"reader", "test", "token", token("reader", valid), ""},   // consume only
		{"auditor", "test", "token", token("auditor", valid), ""}, // consume, and allowed on "locked"
		{"root", "test", "token", token("root", valid), ""},       // superuser
		{"repl", replication.ClientVersion, "token", token("repl", valid), ""},
	}

	// Who may do what: each level lists the roles allowed. A replicator
	// (repl, connected as the replicator client) looks up, lists and
	// consumes anything, to replicate it, but produces only through
	// replicator producers.
	levels := map[string][]string{
		"lookup":    {"acme-admin", "writer", "reader", "auditor", "root", "repl"},
		"produce":   {"acme-admin", "writer", "root"},
		"both":      {"acme-admin", "root"}, // produce and consume
		"consume":   {"acme-admin", "reader", "auditor", "root", "repl"},
		"locked":    {"acme-admin", "auditor", "root", "repl"},
		"list":      {"acme-admin", "reader", "auditor", "root", "repl"}, // consume on the namespace
		"replicate": {"repl"},
	}

	// What the refused commands must not have made, and what the allowed
	// ones did make (so the checks below can see something).
	type made struct{ topic, sub string }
	var refusedMade, allowedMade []made

	// The columns: commands. Each runs on the row's connection and
	// returns the answer that decides; allowedAnswer is what an allowed
	// role gets when it is not plain success (GET_SCHEMA: Isobar stores
	// no schemas).
	type column struct {
		name          string
		level         string
		allowedAnswer pb.ServerError
		run           func(s *wireSession, row string) wireReply
		makes         func(row string) []made
	}
	columns := []column{
		{name: "LOOKUP", level: "lookup", run: func(s *wireSession, _ string) wireReply {
			return s.call(func(id *uint64) *pb.BaseCommand {
				return &pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{Topic: proto.String(existing), RequestId: id}}
			})
		}},
		{name: "PARTITIONED_METADATA", level: "lookup", run: func(s *wireSession, row string) wireReply {
			return s.call(func(id *uint64) *pb.BaseCommand {
				return &pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{Topic: proto.String("persistent://acme/app/m-" + row), RequestId: id}}
			})
		}},
		{name: "PRODUCER on a new topic", level: "produce", run: func(s *wireSession, row string) wireReply {
			return s.producer("persistent://acme/app/p-"+row, "", "", 1)
		}, makes: func(row string) []made { return []made{{topic: "persistent://acme/app/p-" + row}} }},
		{name: "PRODUCER with an initial subscription", level: "both", run: func(s *wireSession, row string) wireReply {
			return s.producer(existing, "", "init-"+row, 2)
		}, makes: func(row string) []made { return []made{{existing, "init-" + row}} }},
		{name: "replicator PRODUCER on a new topic", level: "replicate", run: func(s *wireSession, row string) wireReply {
			return s.producer("persistent://acme/app/r-"+row, replication.Prefix+"elsewhere", "", 3)
		}, makes: func(row string) []made { return []made{{topic: "persistent://acme/app/r-" + row}} }},
		{name: "SUBSCRIBE", level: "consume", run: func(s *wireSession, row string) wireReply {
			return s.subscribe(existing, "s-"+row, 1)
		}, makes: func(row string) []made { return []made{{existing, "s-" + row}} }},
		{name: "SUBSCRIBE on a new topic", level: "consume", run: func(s *wireSession, row string) wireReply {
			return s.subscribe("persistent://acme/app/c-"+row, "s", 2)
		}, makes: func(row string) []made {
			return []made{{topic: "persistent://acme/app/c-" + row}, {"persistent://acme/app/c-" + row, "s"}}
		}},
		{name: "SUBSCRIBE to a restricted subscription", level: "locked", run: func(s *wireSession, row string) wireReply {
			rep := s.subscribe(existing, "locked", 3)
			if rep.ok { // (one consumer at a time: it is exclusive)
				s.call(func(id *uint64) *pb.BaseCommand {
					return &pb.BaseCommand{Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(), CloseConsumer: &pb.CommandCloseConsumer{ConsumerId: proto.Uint64(3), RequestId: id}}
				})
			}
			return rep
		}},
		// A consumer's own commands and UNSUBSCRIBE: allowed on a consumer
		// the SUBSCRIBE admitted, ConsumerNotFound on a refused one (the
		// refusal itself is the SUBSCRIBE's).
		{name: "SUBSCRIBE, GET_LAST_MESSAGE_ID, REDELIVER, CONSUMER_STATS, SEEK, UNSUBSCRIBE", level: "consume", run: func(s *wireSession, row string) wireReply {
			sub := s.subscribe(existing, "ops-"+row, 4)
			ops := s.consumerOps(4)
			if sub.ok != ops.ok || !sub.ok && ops.code != pb.ServerError_ConsumerNotFound {
				s.r.t.Errorf("%s: SUBSCRIBE %v, then the consumer's commands %v", row, sub, ops)
			}
			if sub.ok { // (SEEK closed the consumer)
				if rep := s.subscribe(existing, "ops-"+row, 5); !rep.ok {
					s.r.t.Errorf("%s: SUBSCRIBE again: %v", row, rep)
				}
			}
			un := s.unsubscribe(4)
			if sub.ok {
				un = s.unsubscribe(5)
			}
			if sub.ok != un.ok || !sub.ok && un.code != pb.ServerError_ConsumerNotFound {
				s.r.t.Errorf("%s: SUBSCRIBE %v, then UNSUBSCRIBE %v", row, sub, un)
			}
			return sub
		}},
		{name: "GET_TOPICS_OF_NAMESPACE", level: "list", run: func(s *wireSession, _ string) wireReply {
			return s.call(func(id *uint64) *pb.BaseCommand {
				return &pb.BaseCommand{Type: pb.BaseCommand_GET_TOPICS_OF_NAMESPACE.Enum(), GetTopicsOfNamespace: &pb.CommandGetTopicsOfNamespace{Namespace: proto.String("acme/app"), RequestId: id}}
			})
		}},
		{name: "GET_SCHEMA", level: "lookup", allowedAnswer: pb.ServerError_TopicNotFound, run: func(s *wireSession, _ string) wireReply {
			return s.call(func(id *uint64) *pb.BaseCommand {
				return &pb.BaseCommand{Type: pb.BaseCommand_GET_SCHEMA.Enum(), GetSchema: &pb.CommandGetSchema{Topic: proto.String(existing), RequestId: id}}
			})
		}},
		{name: "GET_OR_CREATE_SCHEMA", level: "produce", run: func(s *wireSession, _ string) wireReply {
			return s.call(func(id *uint64) *pb.BaseCommand {
				return &pb.BaseCommand{Type: pb.BaseCommand_GET_OR_CREATE_SCHEMA.Enum(), GetOrCreateSchema: &pb.CommandGetOrCreateSchema{
					Topic: proto.String(existing), RequestId: id,
					Schema: &pb.Schema{Name: proto.String("s"), SchemaData: []byte(`"string"`), Type: pb.Schema_String.Enum()},
				}}
			})
		}},
	}

	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := dialRaw(t, a.url, false)
			defer r.nc.Close()
			r.send(connectCmd(row.version, row.method, row.data))
			if row.says != "" {
				expectRefused(t, r, pb.ServerError_AuthenticationError, row.says)
				return
			}
			if c := r.recv().Cmd; c.GetType() != pb.BaseCommand_CONNECTED {
				t.Fatalf("CONNECT: %v", c)
			}
			s := &wireSession{r: r}
			for _, col := range columns {
				allowed := slices.Contains(levels[col.level], row.name)
				rep := col.run(s, row.name)
				var ms []made
				if col.makes != nil {
					ms = col.makes(row.name)
				}
				switch {
				case allowed && (rep.ok || col.allowedAnswer != 0 && rep.code == col.allowedAnswer):
					allowedMade = append(allowedMade, ms...)
				case allowed:
					t.Errorf("%s: %v, want it allowed", col.name, rep)
				case rep.ok || rep.code != pb.ServerError_AuthorizationError || !strings.Contains(rep.msg, fmt.Sprintf("role %q", row.name)):
					t.Errorf("%s: %v, want AuthorizationError naming role %q", col.name, rep, row.name)
				default:
					refusedMade = append(refusedMade, ms...)
				}
			}
			// A refused PRODUCER left no producer: SEND meets NotAllowed.
			if !slices.Contains(levels["produce"], row.name) {
				pid, seq := uint64(1), uint64(0)
				f, err := wire.AppendPayloadCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{ProducerId: &pid, SequenceId: &seq}},
					&pb.MessageMetadata{ProducerName: proto.String("x"), SequenceId: &seq, PublishTime: proto.Uint64(1)}, []byte("m"))
				if err != nil {
					t.Fatal(err)
				}
				r.write(f)
				for {
					c := r.recv().Cmd
					if c.GetType() == pb.BaseCommand_SEND_ERROR {
						if c.SendError.GetError() != pb.ServerError_NotAllowedError {
							t.Errorf("SEND on a refused producer: %v", c.SendError)
						}
						break
					}
				}
			}
			r.alive() // refusals do not close the connection
		})
	}

	// Nothing refused was created; what was allowed was.
	exists := func(m made) bool {
		t.Helper()
		name, _ := topic.Parse(m.topic)
		if m.sub == "" {
			topics, err := a.b.AdminAPI().Topics.ListTopics(ctx, "acme/app", topic.Persistent)
			if err != nil {
				t.Fatal(err)
			}
			return slices.Contains(topics, m.topic) || slices.Contains(a.b.Topics(), m.topic)
		}
		subs, err := a.b.AdminAPI().Topics.Subscriptions(ctx, name)
		if err != nil {
			return false // (no topic, no subscription)
		}
		return slices.Contains(subs, m.sub)
	}
	for _, m := range refusedMade {
		if exists(m) {
			t.Errorf("a refused command made %+v", m)
		}
	}
	for _, m := range allowedMade {
		if !exists(m) {
			t.Errorf("an allowed command did not make %+v", m)
		}
	}
	if len(refusedMade) == 0 || len(allowedMade) == 0 {
		t.Fatalf("checked %d refused and %d allowed creations", len(refusedMade), len(allowedMade))
	}
}
