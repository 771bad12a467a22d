package broker_test

import (
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire/pb"
)

// rawProducer asks for a producer on tp over rc and returns the error
// reply (nil on success).
func rawProducer(rc *rawConn, tp string, id uint64) *pb.CommandError {
	rc.t.Helper()
	rc.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: proto.String(tp), ProducerId: proto.Uint64(id), RequestId: proto.Uint64(id)}})
	for {
		r := rc.recv().Cmd
		switch r.GetType() {
		case pb.BaseCommand_PRODUCER_SUCCESS:
			return nil
		case pb.BaseCommand_ERROR:
			return r.GetError()
		}
	}
}

// rawSubscribe subscribes consumer id to sub of tp (Shared) and returns
// the error reply (nil on success).
func rawSubscribe(rc *rawConn, tp, sub string, id uint64) *pb.CommandError {
	rc.t.Helper()
	rc.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{Topic: proto.String(tp),
		Subscription: proto.String(sub), SubType: pb.CommandSubscribe_Shared.Enum(), ConsumerId: proto.Uint64(id), RequestId: proto.Uint64(id)}})
	for {
		r := rc.recv().Cmd
		switch r.GetType() {
		case pb.BaseCommand_SUCCESS:
			return nil
		case pb.BaseCommand_ERROR:
			return r.GetError()
		}
	}
}

func setNS(t *testing.T, e *env, ns string, fn func(p *policy.Policies)) {
	t.Helper()
	if _, err := e.pol.UpdateNamespace(ctxT(t), ns, func(p *policy.Policies) error { fn(p); return nil }); err != nil {
		t.Fatal(err)
	}
}

func wantRefused(t *testing.T, what string, r *pb.CommandError, code pb.ServerError, msg string) {
	t.Helper()
	if r == nil || r.GetError() != code || !strings.Contains(r.GetMessage(), msg) {
		t.Fatalf("%s: %v, want %v %q", what, r, code, msg)
	}
}

// A namespace's maxProducersPerTopic refuses a producer beyond it
// (ProducerBusy, Pulsar's message); without one the dynamic setting
// applies.
func TestMaxProducersPerTopic(t *testing.T) {
	e := startEnv(t, nil)
	two := 2
	setNS(t, e, "public/default", func(p *policy.Policies) { p.MaxProducersPerTopic = &two })
	const tp = "persistent://public/default/prod"
	rc := dialRaw(t, e.url, true)
	for id := uint64(1); id <= 2; id++ {
		if r := rawProducer(rc, tp, id); r != nil {
			t.Fatalf("producer %d: %v", id, r)
		}
	}
	wantRefused(t, "third producer", rawProducer(rc, tp, 3), pb.ServerError_ProducerBusy, "Topic reached max producers limit")
	rc.send(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(), CloseProducer: &pb.CommandCloseProducer{ProducerId: proto.Uint64(1), RequestId: proto.Uint64(100)}})
	if r := rawProducer(rc, tp, 4); r != nil {
		t.Fatalf("producer after one closed: %v", r)
	}

	// The namespace's limit removed, the broker's dynamic setting rules.
	setNS(t, e, "public/default", func(p *policy.Policies) { p.MaxProducersPerTopic = nil })
	if err := e.b.AdminAPI().Brokers.SetDynamicConfig(ctxT(t), "maxProducersPerTopic", "1"); err != nil {
		t.Fatal(err)
	}
	e.b.MaintainOnce(ctxT(t))
	wantRefused(t, "producer over the dynamic limit", rawProducer(rc, tp, 5), pb.ServerError_ProducerBusy, "Topic reached max producers limit")
	if r := rawProducer(rc, "persistent://public/default/other", 6); r != nil {
		t.Fatalf("first producer on another topic: %v", r)
	}
	// 0 on the namespace is no limit, whatever the broker says.
	zero := 0
	setNS(t, e, "public/default", func(p *policy.Policies) { p.MaxProducersPerTopic = &zero })
	e.b.MaintainOnce(ctxT(t))
	if r := rawProducer(rc, tp, 7); r != nil {
		t.Fatalf("producer with the namespace's limit 0: %v", r)
	}
}

// maxConsumersPerTopic counts the consumers of every subscription;
// maxConsumersPerSubscription those of one (ConsumerBusy).
func TestMaxConsumers(t *testing.T) {
	e := startEnv(t, nil)
	two, one := 2, 1
	setNS(t, e, "public/default", func(p *policy.Policies) { p.MaxConsumersPerTopic = &two })
	const tp = "persistent://public/default/cons"
	rc := dialRaw(t, e.url, true)
	if r := rawSubscribe(rc, tp, "a", 1); r != nil {
		t.Fatal(r)
	}
	if r := rawSubscribe(rc, tp, "b", 2); r != nil {
		t.Fatal(r)
	}
	wantRefused(t, "third consumer of the topic", rawSubscribe(rc, tp, "c", 3), pb.ServerError_ConsumerBusy, "Topic reached max consumers limit")

	setNS(t, e, "public/default", func(p *policy.Policies) { p.MaxConsumersPerTopic, p.MaxConsumersPerSubscription = nil, &one })
	const tp2 = "persistent://public/default/cons2"
	if r := rawSubscribe(rc, tp2, "s", 4); r != nil {
		t.Fatal(r)
	}
	wantRefused(t, "second consumer of the subscription", rawSubscribe(rc, tp2, "s", 5), pb.ServerError_ConsumerBusy, "Subscription reached max consumers limit")
	if r := rawSubscribe(rc, tp2, "other", 6); r != nil {
		t.Fatalf("consumer of another subscription: %v", r)
	}

	// The dynamic setting applies to namespaces without a limit.
	setNS(t, e, "public/default", func(p *policy.Policies) { p.MaxConsumersPerSubscription = nil })
	if err := e.b.AdminAPI().Brokers.SetDynamicConfig(ctxT(t), "maxConsumersPerTopic", "1"); err != nil {
		t.Fatal(err)
	}
	e.b.MaintainOnce(ctxT(t))
	wantRefused(t, "consumer over the dynamic limit", rawSubscribe(rc, tp2, "third", 7), pb.ServerError_ConsumerBusy, "Topic reached max consumers limit")
}

// A namespace's maxTopicsPerNamespace limits auto-created topics
// (NotAllowedError) and admin creations (412), over the broker's limit.
func TestMaxTopicsPerNamespacePolicy(t *testing.T) {
	e := startEnv(t, func(c *setup) { c.Limits.MaxTopicsPerNamespace = 100 })
	two := 2
	setNS(t, e, "public/default", func(p *policy.Policies) { p.MaxTopicsPerNamespace = &two })
	rc := dialRaw(t, e.url, true)
	for i, tp := range []string{"t1", "t2"} {
		if r := rawProducer(rc, "persistent://public/default/"+tp, uint64(i+1)); r != nil {
			t.Fatalf("%s: %v", tp, r)
		}
	}
	wantRefused(t, "third topic", rawProducer(rc, "persistent://public/default/t3", 3), pb.ServerError_NotAllowedError, "")
	srv := e.adminServer()
	if status, reason := httpDo(t, "PUT", srv.URL+"/admin/v2/persistent/public/default/t4", ""); status != 412 || !strings.Contains(reason, "maxTopicsPerNamespace") {
		t.Fatalf("admin create over the namespace's limit: %d %q", status, reason)
	}
	// The dynamic setting replaces the broker's limit where the
	// namespace has none.
	must(t, e.pol.CreateNamespace(ctxT(t), "public/dyn", nil))
	if err := e.b.AdminAPI().Brokers.SetDynamicConfig(ctxT(t), "maxTopicsPerNamespace", "1"); err != nil {
		t.Fatal(err)
	}
	if r := rawProducer(rc, "persistent://public/dyn/a", 4); r != nil {
		t.Fatal(r)
	}
	wantRefused(t, "topic over the dynamic limit", rawProducer(rc, "persistent://public/dyn/b", 5), pb.ServerError_NotAllowedError, "")
}

// With allowAutoSubscriptionCreation false a consumer may join only a
// subscription that exists.
func TestAutoSubscriptionCreation(t *testing.T) {
	e := startEnv(t, nil)
	const tp = "persistent://public/default/subs"
	rc := dialRaw(t, e.url, true)
	if r := rawSubscribe(rc, tp, "old", 1); r != nil {
		t.Fatal(r)
	}
	if err := e.b.AdminAPI().Brokers.SetDynamicConfig(ctxT(t), "allowAutoSubscriptionCreation", "false"); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "new subscription", rawSubscribe(rc, tp, "new", 2), pb.ServerError_SubscriptionNotFound, "Subscription does not exist")
	if r := rawSubscribe(rc, tp, "old", 3); r != nil {
		t.Fatalf("joining an existing subscription: %v", r)
	}
	if err := e.b.AdminAPI().Brokers.DeleteDynamicConfig(ctxT(t), "allowAutoSubscriptionCreation"); err != nil {
		t.Fatal(err)
	}
	if r := rawSubscribe(rc, tp, "new", 4); r != nil {
		t.Fatalf("after the setting is removed: %v", r)
	}
}

// A namespace's persistence policy shapes the ledgers of its topics
// loaded after it is set.
func TestPersistencePolicy(t *testing.T) {
	e := startEnv(t, nil)
	setNS(t, e, "public/default", func(p *policy.Policies) {
		p.Persistence = &policy.PersistencePolicies{BookkeeperEnsemble: 3, BookkeeperWriteQuorum: 3, BookkeeperAckQuorum: 1}
	})
	const tp = "persistent://public/default/pers"
	p, err := e.client().CreateProducer(pulsar.ProducerOptions{Topic: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Send(ctxT(t), &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	name, _ := topic.Parse(tp)
	st, err := e.b.AdminAPI().Topics.InternalStats(ctxT(t), name)
	if err != nil || len(st.Ledgers) == 0 {
		t.Fatalf("internal stats: %+v %v", st, err)
	}
	md, _, err := e.lc.Metadata(ctxT(t), uint64(st.Ledgers[len(st.Ledgers)-1].LedgerID))
	if err != nil {
		t.Fatal(err)
	}
	if md.EnsembleSize != 3 || md.WriteQuorum != 3 || md.AckQuorum != 1 {
		t.Fatalf("ledger E/Qw/Qa = %d/%d/%d, want 3/3/1", md.EnsembleSize, md.WriteQuorum, md.AckQuorum)
	}
}
