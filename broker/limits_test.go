package broker_test

import (
	"bytes"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// The hardening issue's first example: one admin call asked for
// 2147483647 partitions, answered 204 and started creating them; the
// next partitioned-stats ran the broker out of memory. Now it is refused
// and nothing is created.
func TestHugePartitionCountRefused(t *testing.T) {
	e := startEnv(t, nil)
	srv := e.adminServer()
	const path = "/admin/v2/persistent/public/default/huge/partitions"
	for _, body := range []string{"2147483647", `{"partitions":2147483647}`, "1025", `"2147483647"`} {
		status, reason := httpDo(t, "PUT", srv.URL+path, body)
		if status != http.StatusPreconditionFailed || !strings.Contains(reason, "more than the maximum 1024") {
			t.Fatalf("PUT partitions %s: %d %q, want 412", body, status, reason)
		}
	}
	for _, body := range []string{"2147483648", "18446744074", "-1", "1e3"} {
		if status, reason := httpDo(t, "PUT", srv.URL+path, body); status != http.StatusBadRequest {
			t.Fatalf("PUT partitions %s: %d %q, want 400", body, status, reason)
		}
	}
	ctx := ctxT(t)
	name, _ := topic.Parse("persistent://public/default/huge")
	if _, ok, err := e.pol.PartitionedMetadata(ctx, name); ok || err != nil {
		t.Fatalf("a refused create recorded the topic: %v %v", ok, err)
	}
	if ts, _ := e.b.PersistentTopics(ctx, "public/default"); len(ts) != 0 {
		t.Fatalf("a refused create made topics: %v", ts)
	}
	if status, _ := httpDo(t, "GET", srv.URL+"/admin/v2/persistent/public/default/huge/partitioned-stats", ""); status != http.StatusNotFound {
		t.Fatalf("partitioned-stats: %d, want 404", status)
	}
	// Growing a small one past the limit is refused the same way.
	if status, reason := httpDo(t, "PUT", srv.URL+path, "2"); status != http.StatusNoContent {
		t.Fatalf("PUT 2 partitions: %d %q", status, reason)
	}
	if status, _ := httpDo(t, "POST", srv.URL+path, "2147483647"); status != http.StatusPreconditionFailed {
		t.Fatalf("POST partitions: %d, want 412", status)
	}
	if n, _, _ := e.pol.Partitions(ctx, name); n != 2 {
		t.Fatalf("partitions = %d after a refused update", n)
	}
}

// A record with 2^31 partitions already in the store (an older version
// wrote it) is reported and skipped: partitioned-stats, the partitioned
// metadata lookup and a regex consumer's topic listing answer at once
// without looping over it, and the topic can still be deleted, the
// partitions that exist with it.
func TestStoredHugePartitionRecord(t *testing.T) {
	var logs syncBuffer
	e := startEnvWith(t, func(c *policy.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }, nil)
	srv := e.adminServer()
	ctx := ctxT(t)
	const base = "/admin/v2/persistent/public/default/huge"
	if status, reason := httpDo(t, "PUT", srv.URL+base+"/partitions", "2"); status != http.StatusNoContent {
		t.Fatalf("PUT partitions: %d %q", status, reason)
	}
	c := e.client()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/huge", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	produce(t, p, "m", 4, nil)
	p.Close()
	name, _ := topic.Parse("persistent://public/default/huge")
	if _, err := e.cl.Connect().Put(ctx, policy.PartitionedKey(name), []byte(`{"partitions":2147483647}`)); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	for _, sfx := range []string{"/partitioned-stats", "/stats", "/partitions", "/subscriptions", "/internalStats"} {
		status, reason := httpDo(t, "GET", srv.URL+base+sfx, "")
		if status != http.StatusInternalServerError || !strings.Contains(reason, "2147483647 partitions, more than the maximum 1024") {
			t.Errorf("GET %s: %d %q, want 500 naming the corrupt record", sfx, status, reason)
		}
	}
	rc := dialRaw(t, e.url, true)
	rc.send(&pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{
		Topic: proto.String(name.String()), RequestId: proto.Uint64(1)}})
	if r := rc.recv().Cmd.GetPartitionMetadataResponse(); r.GetResponse() != pb.CommandPartitionedTopicMetadataResponse_Failed ||
		r.GetError() != pb.ServerError_UnknownError || wire.ErrorFor(r.GetError()).Retriable {
		t.Fatalf("partitioned metadata: %v", r)
	}
	rc.send(&pb.BaseCommand{Type: pb.BaseCommand_GET_TOPICS_OF_NAMESPACE.Enum(), GetTopicsOfNamespace: &pb.CommandGetTopicsOfNamespace{
		Namespace: proto.String("public/default"), RequestId: proto.Uint64(2), TopicsPattern: proto.String("persistent://public/default/huge.*")}})
	topics := rc.recv().Cmd.GetGetTopicsOfNamespaceResponse().GetTopics()
	if !slices.Equal(topics, []string{"persistent://public/default/huge-partition-0", "persistent://public/default/huge-partition-1"}) {
		t.Fatalf("topics of the namespace: %v (the partitions that exist, not 2^31)", topics)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("answering took %v", d)
	}
	if !strings.Contains(logs.String(), "corrupt record") {
		t.Fatalf("the corrupt record was not logged:\n%s", logs.String())
	}

	if status, reason := httpDo(t, "DELETE", srv.URL+base+"/partitions?force=true", ""); status != http.StatusNoContent {
		t.Fatalf("DELETE partitions: %d %q", status, reason)
	}
	if _, ok, err := e.pol.PartitionedMetadata(ctx, name); ok || err != nil {
		t.Fatalf("after delete: %v %v", ok, err)
	}
	if ts, _ := e.b.PersistentTopics(ctx, "public/default"); len(ts) != 0 {
		t.Fatalf("partitions left behind: %v", ts)
	}
}

// The second example: a TTL of 18446744074 s wrapped to 0.3 s and the
// next maintenance expired every unread message of the namespace. Now it
// is refused (412) and nothing expires; one already stored is not
// applied either.
func TestHugeTTLRefusedAndNothingExpires(t *testing.T) {
	e, clk := policyEnv(t, "public/x", nil)
	srv := e.adminServer()
	const tp = "persistent://public/x/t"
	c := e.client()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	produce(t, p, "m", 10, nil)
	p.Close()

	const ns = "/admin/v2/namespaces/public/x"
	for _, v := range []string{"18446744074", "2147483648", "9223372036854775807"} {
		status, reason := httpDo(t, "POST", srv.URL+ns+"/messageTTL", v)
		if status != http.StatusPreconditionFailed || !strings.Contains(reason, "message_ttl_in_seconds") {
			t.Fatalf("POST messageTTL %s: %d %q, want 412", v, status, reason)
		}
	}
	if status, _ := httpDo(t, "POST", srv.URL+ns+"/messageTTL", "18446744073709551616"); status != http.StatusBadRequest {
		t.Fatalf("a TTL beyond int64: %d, want 400", status)
	}
	// Retention sizes wrapped the same way (MB << 20).
	for _, body := range []string{
		`{"retentionTimeInMinutes":10,"retentionSizeInMB":9223372036854775807}`,
		`{"retentionTimeInMinutes":153722868,"retentionSizeInMB":1}`,
	} {
		if status, reason := httpDo(t, "POST", srv.URL+ns+"/retention", body); status != http.StatusPreconditionFailed {
			t.Fatalf("POST retention %s: %d %q, want 412", body, status, reason)
		}
	}
	if status, _ := httpDo(t, "PUT", srv.URL+"/admin/v2/namespaces/public/y", `{"message_ttl_in_seconds":18446744074}`); status != http.StatusPreconditionFailed {
		t.Fatalf("namespace created with a huge TTL: %d", status)
	}
	pol, err := e.pol.Namespace(ctxT(t), "public/x")
	if err != nil || pol.MessageTTLInSeconds != nil || pol.RetentionPolicies != nil {
		t.Fatalf("refused calls changed the policies: %+v %v", pol, err)
	}
	clk.advance(time.Second)
	e.b.MaintainOnce(ctxT(t))
	if n := backlog(t, e, tp, "s"); n != 10 {
		t.Fatalf("backlog %d after maintenance, want 10", n)
	}

	// A TTL an older version stored: reported, never applied.
	if _, err := e.cl.Connect().Put(ctxT(t), policy.NamespaceKey("public", "x"),
		[]byte(`{"replication_clusters":["test"],"message_ttl_in_seconds":18446744074}`)); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Hour)
	e.b.MaintainOnce(ctxT(t))
	if n := backlog(t, e, tp, "s"); n != 10 {
		t.Fatalf("backlog %d after maintenance under a stored huge TTL, want 10", n)
	}
	// The namespace answers a clear error until the field is fixed.
	if status, reason := httpDo(t, "GET", srv.URL+ns+"/messageTTL", ""); status != http.StatusInternalServerError || !strings.Contains(reason, "corrupt record") {
		t.Fatalf("GET messageTTL of a corrupt record: %d %q", status, reason)
	}
	if status, reason := httpDo(t, "DELETE", srv.URL+ns+"/messageTTL", ""); status != http.StatusNoContent {
		t.Fatalf("DELETE messageTTL: %d %q", status, reason)
	}
	cons, err = c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if got := receiveN(t, cons, 10, true); len(got) != 10 {
		t.Fatalf("got %d messages", len(got))
	}
}

// The third example: a 300-character topic got a 500 from the managed
// ledger, and a 225-character partitioned topic was created although
// none of its partitions could be. Both are now refused everywhere with
// the same error (412, InvalidTopicName), and nothing is created.
func TestLongNamesRefusedEverywhere(t *testing.T) {
	e := startEnv(t, nil)
	srv := e.adminServer()
	long := "public/default/" + strings.Repeat("x", 300)
	for _, p := range []struct{ method, suffix, body string }{
		{"PUT", "", ""}, {"PUT", "/partitions", "1"}, {"GET", "/stats", ""}, {"PUT", "/subscription/s", ""},
	} {
		status, reason := httpDo(t, p.method, srv.URL+"/admin/v2/persistent/"+long+p.suffix, p.body)
		if status != http.StatusPreconditionFailed || !strings.Contains(reason, "326 bytes as storage keeps it") {
			t.Errorf("%s 300-character topic%s: %d %q", p.method, p.suffix, status, reason)
		}
	}
	rc := dialRaw(t, e.url, true)
	for i, tp := range []string{long, "non-persistent://" + long} {
		id := uint64(i + 1)
		rc.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{Topic: proto.String(tp), ProducerId: &id, RequestId: &id}})
		if r := rc.recv().Cmd; r.GetError().GetError() != pb.ServerError_InvalidTopicName {
			t.Fatalf("producer on %.40s...: %v", tp, r)
		}
	}

	mid := "public/default/" + strings.Repeat("y", 225)
	status, reason := httpDo(t, "PUT", srv.URL+"/admin/v2/persistent/"+mid+"/partitions", "1")
	if status != http.StatusPreconditionFailed || !strings.Contains(reason, "the name of its partition 0 is 263 bytes") {
		t.Fatalf("225-character partitioned topic: %d %q", status, reason)
	}
	// The binary protocol's auto-creation of a partitioned topic says the same.
	must(t, e.pol.CreateNamespace(ctxT(t), "public/auto", &policy.Policies{AutoTopicCreation: &policy.AutoTopicCreation{
		AllowAutoTopicCreation: true, TopicType: policy.TopicTypePartitioned, DefaultNumPartitions: intp(2)}}))
	rc.send(&pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{
		Topic: proto.String("public/auto/" + strings.Repeat("z", 225)), RequestId: proto.Uint64(9)}})
	if r := rc.recv().Cmd.GetPartitionMetadataResponse(); r.GetError() != pb.ServerError_InvalidTopicName {
		t.Fatalf("auto-created 225-character partitioned topic: %v", r)
	}
	for _, ns := range []string{"public/default", "public/auto"} {
		if pts, _ := e.pol.ListPartitioned(ctxT(t), ns, ""); len(pts) != 0 {
			t.Fatalf("half-created partitioned topics in %s: %v", ns, pts)
		}
		if ts, _ := e.b.PersistentTopics(ctxT(t), ns); len(ts) != 0 {
			t.Fatalf("half-created topics in %s: %v", ns, ts)
		}
	}
	// As a plain topic the 225-character name fits.
	if status, reason := httpDo(t, "PUT", srv.URL+"/admin/v2/persistent/"+mid, ""); status != http.StatusNoContent {
		t.Fatalf("225-character topic: %d %q", status, reason)
	}
}

// Every name topic.Parse accepts, the managed ledger can store, and every
// one it cannot store, Parse refuses: one rule, with the limit exactly
// where storage has it.
func TestNameRuleMatchesStorage(t *testing.T) {
	if topic.MaxNameLen != mledger.MaxNameLen {
		t.Fatalf("topic.MaxNameLen %d, mledger.MaxNameLen %d", topic.MaxNameLen, mledger.MaxNameLen)
	}
	r := rand.New(rand.NewPCG(3, 4))
	const segChars, localChars = "abcXYZ019_-=:.", "abcXYZ019_-=:.%~!@$&*+,;()'"
	gen := func(chars string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = chars[r.IntN(len(chars))]
		}
		return string(b)
	}
	accepted, atLimit := 0, 0
	for range 20000 {
		tn, ns := gen(segChars, 1+r.IntN(8)), gen(segChars, 1+r.IntN(8))
		if r.IntN(4) == 0 {
			tn, ns = gen(segChars, 1+r.IntN(topic.MaxSegmentLen)), gen(segChars, 1+r.IntN(topic.MaxSegmentLen))
		}
		room := topic.MaxNameLen - len(tn+"/"+ns+"/persistent/")
		local := gen(localChars, max(1, room-2+r.IntN(5)))
		if r.IntN(4) == 0 {
			local = gen(localChars, 1+r.IntN(300))
		}
		ml := tn + "/" + ns + "/persistent/" + local
		n, err := topic.Parse(tn + "/" + ns + "/" + local)
		if err == nil {
			accepted++
			if len(ml) == topic.MaxNameLen {
				atLimit++
			}
			if broker.MLName(n) != ml {
				t.Fatalf("MLName(%v) = %q, want %q", n, broker.MLName(n), ml)
			}
			if err := mledger.ValidateName(ml); err != nil {
				t.Fatalf("%q parses, but the managed ledger refuses it: %v", ml, err)
			}
		}
		if len(ml) > mledger.MaxNameLen && err == nil {
			t.Fatalf("%d-byte storage name accepted", len(ml))
		}
	}
	if accepted < 1000 || atLimit < 100 {
		t.Fatalf("%d names accepted, %d at the limit: the generator is off", accepted, atLimit)
	}
}

// Request bodies are bounded: 413 beyond, whether announced or not.
func TestAdminBodyTooLarge(t *testing.T) {
	e := startEnv(t, nil)
	srv := e.adminServer()
	big := `{"auth_policies":"` + strings.Repeat("x", 2<<20) + `"}`
	status, reason := httpDo(t, "PUT", srv.URL+"/admin/v2/namespaces/public/big", big)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(reason, "maxAdminRequestBytes") {
		t.Fatalf("2 MiB body: %d %q", status, reason)
	}
	// Chunked, no length announced.
	req, _ := http.NewRequest("PUT", srv.URL+"/admin/v2/namespaces/public/big", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked 2 MiB body: %d", resp.StatusCode)
	}
	if _, err := e.pol.Namespace(ctxT(t), "public/big"); err == nil {
		t.Fatal("namespace created from a refused body")
	}
}

// Topics per namespace are limited when set: on the admin API and on
// auto-creation, partitions counting one each.
func TestTopicsPerNamespace(t *testing.T) {
	e := startEnv(t, func(c *setup) { c.Limits.MaxTopicsPerNamespace = 4 })
	srv := e.adminServer()
	const base = "/admin/v2/persistent/public/default/"
	for _, tp := range []string{"a", "b"} {
		if status, reason := httpDo(t, "PUT", srv.URL+base+tp, ""); status != http.StatusNoContent {
			t.Fatalf("PUT %s: %d %q", tp, status, reason)
		}
	}
	if status, reason := httpDo(t, "PUT", srv.URL+base+"p/partitions", "3"); status != http.StatusPreconditionFailed || !strings.Contains(reason, "maxTopicsPerNamespace") {
		t.Fatalf("3 partitions over the limit: %d %q", status, reason)
	}
	if status, reason := httpDo(t, "PUT", srv.URL+base+"p/partitions", "2"); status != http.StatusNoContent {
		t.Fatalf("2 partitions: %d %q", status, reason)
	}
	if status, _ := httpDo(t, "POST", srv.URL+base+"p/partitions", "3"); status != http.StatusPreconditionFailed {
		t.Fatalf("growing over the limit: %d", status)
	}
	if status, _ := httpDo(t, "PUT", srv.URL+base+"c", ""); status != http.StatusPreconditionFailed {
		t.Fatalf("fifth topic: %d", status)
	}
	// The partitions of p exist or not: they were counted when p was made.
	c := e.client()
	pp, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/p"})
	if err != nil {
		t.Fatalf("producer on the partitioned topic: %v", err)
	}
	pp.Close()
	rc := dialRaw(t, e.url, true)
	rc.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: proto.String("persistent://public/default/auto"), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)}})
	if r := rc.recv().Cmd; r.GetError().GetError() != pb.ServerError_NotAllowedError || !strings.Contains(r.GetError().GetMessage(), "maxTopicsPerNamespace") {
		t.Fatalf("auto-created fifth topic: %v", r)
	}
	// Other namespaces are not affected.
	must(t, e.pol.CreateNamespace(ctxT(t), "public/other", nil))
	if status, _ := httpDo(t, "PUT", srv.URL+"/admin/v2/persistent/public/other/c", ""); status != http.StatusNoContent {
		t.Fatalf("topic in another namespace: %d", status)
	}
}

// Subscription names follow one rule on both APIs: 400 (NotAllowedError
// on the wire) for one storage cannot hold.
func TestSubscriptionNameRule(t *testing.T) {
	e := startEnv(t, nil)
	srv := e.adminServer()
	for _, sub := range []string{strings.Repeat("s", 257), "a%2Fb", "a%20b"} {
		status, reason := httpDo(t, "PUT", srv.URL+"/admin/v2/persistent/public/default/t/subscription/"+sub, "")
		if status != http.StatusBadRequest || !strings.Contains(reason, "subscription name") {
			t.Errorf("PUT subscription %.20s: %d %q", sub, status, reason)
		}
	}
	rc := dialRaw(t, e.url, true)
	for i, sub := range []string{strings.Repeat("s", 257), "a/b", "a b", ""} {
		id := uint64(i + 1)
		rc.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{Topic: proto.String("public/default/t"),
			Subscription: proto.String(sub), SubType: pb.CommandSubscribe_Shared.Enum(), ConsumerId: &id, RequestId: &id}})
		if r := rc.recv().Cmd; r.GetError().GetError() != pb.ServerError_NotAllowedError {
			t.Errorf("subscribe %.20q: %v", sub, r)
		}
	}
	if status, _ := httpDo(t, "PUT", srv.URL+"/admin/v2/persistent/public/default/t/subscription/"+strings.Repeat("s", 256), ""); status != http.StatusNoContent {
		t.Fatalf("256-byte subscription name: %d", status)
	}
}

// Numbers on the binary protocol: sequence ids beyond int64, deliver-at
// times beyond the limit, FLOW permits that would overflow, publish times
// beyond int64, Key_Shared ranges out of range or overlapping.
func TestProtocolNumbers(t *testing.T) {
	e := startEnv(t, func(c *setup) { c.Limits.MaxDeliveryDelay = time.Hour })
	const tp = "persistent://public/default/numbers"
	rc := dialRaw(t, e.url, true)
	rc.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: proto.String(tp), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)}})
	if r := rc.recv().Cmd; r.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("producer: %v", r)
	}
	send := func(seq uint64, meta *pb.MessageMetadata) *pb.BaseCommand {
		f, err := wire.AppendPayloadCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
			ProducerId: proto.Uint64(1), SequenceId: &seq}}, meta, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		rc.write(f)
		return rc.recv().Cmd
	}
	meta := func(seq uint64) *pb.MessageMetadata {
		return &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: &seq, PublishTime: proto.Uint64(1)}
	}
	if r := send(1<<63, meta(1<<63)); r.GetType() != pb.BaseCommand_SEND_ERROR || r.SendError.GetError() != pb.ServerError_NotAllowedError {
		t.Fatalf("sequence id 2^63: %v", r)
	}
	far := meta(1)
	far.DeliverAtTime = proto.Int64(time.Now().Add(2 * time.Hour).UnixMilli())
	if r := send(1, far); r.GetType() != pb.BaseCommand_SEND_ERROR || !strings.Contains(r.SendError.GetMessage(), "maxDeliveryDelay") {
		t.Fatalf("deliver-at beyond the limit: %v", r)
	}
	far.DeliverAtTime = proto.Int64(math.MaxInt64)
	if r := send(1, far); r.GetType() != pb.BaseCommand_SEND_ERROR {
		t.Fatalf("deliver-at at the end of time: %v", r)
	}
	for seq := uint64(0); seq < 3; seq++ {
		if r := send(seq, meta(seq)); r.GetType() != pb.BaseCommand_SEND_RECEIPT {
			t.Fatalf("send %d: %v", seq, r)
		}
	}

	sub := func(id uint64, name string, st pb.CommandSubscribe_SubType, ranges ...[2]int32) *pb.BaseCommand {
		cmd := &pb.CommandSubscribe{Topic: proto.String(tp), Subscription: proto.String(name), SubType: st.Enum(),
			ConsumerId: &id, RequestId: &id, InitialPosition: pb.CommandSubscribe_Earliest.Enum()}
		if len(ranges) > 0 {
			km := &pb.KeySharedMeta{KeySharedMode: pb.KeySharedMode_STICKY.Enum()}
			for _, r := range ranges {
				km.HashRanges = append(km.HashRanges, &pb.IntRange{Start: proto.Int32(r[0]), End: proto.Int32(r[1])})
			}
			cmd.KeySharedMeta = km
		}
		rc.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: cmd})
		return rc.recv().Cmd
	}
	for i, bad := range [][][2]int32{{{-1, 5}}, {{0, 65536}}, {{9, 3}}, {{0, 10}, {5, 20}}, {{math.MinInt32, math.MaxInt32}}} {
		if r := sub(uint64(10+i), "ks", pb.CommandSubscribe_Key_Shared, bad...); r.GetError().GetError() != pb.ServerError_ConsumerAssignError {
			t.Fatalf("sticky ranges %v: %v", bad, r)
		}
	}
	if r := sub(20, "ks", pb.CommandSubscribe_Key_Shared, [2]int32{0, 32767}); r.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("valid ranges: %v", r)
	}
	if r := sub(21, "ks", pb.CommandSubscribe_Key_Shared, [2]int32{32767, 40000}); r.GetError().GetError() != pb.ServerError_ConsumerAssignError {
		t.Fatalf("ranges overlapping another consumer's: %v", r)
	}
	// Priority levels at both ends sort without overflow; permits at the
	// top of uint32, many times, saturate instead of wrapping.
	if r := sub(30, "fo", pb.CommandSubscribe_Exclusive); r.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("subscribe: %v", r)
	}
	for range 3 {
		rc.send(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: proto.Uint64(30), MessagePermits: proto.Uint32(math.MaxUint32)}})
	}
	got := 0
	for got < 3 {
		if r := rc.recv().Cmd; r.GetType() == pb.BaseCommand_MESSAGE {
			got++
		}
	}
	rc.send(&pb.BaseCommand{Type: pb.BaseCommand_SEEK.Enum(), Seek: &pb.CommandSeek{ConsumerId: proto.Uint64(30), RequestId: proto.Uint64(31),
		MessagePublishTime: proto.Uint64(math.MaxUint64)}})
	for {
		r := rc.recv().Cmd
		if r.GetType() == pb.BaseCommand_SUCCESS && r.Success.GetRequestId() == 31 {
			break
		}
		if r.GetType() == pb.BaseCommand_ERROR {
			t.Fatalf("seek to the end of time: %v", r)
		}
	}
	if n := e.b.Panics(); n != 0 {
		t.Fatalf("%d panics", n)
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a
// logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Skipping 2^63-1 messages acknowledges what there is, a batch at a time,
// and leaves the messages produced after it.
func TestSkipHugeCount(t *testing.T) {
	e := startEnv(t, nil)
	srv := e.adminServer()
	const tp = "persistent://public/default/skip"
	c := e.client()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s"})
	must(t, err)
	cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	must(t, err)
	defer p.Close()
	produce(t, p, "a", 1500, nil)
	status, reason := httpDo(t, "POST", srv.URL+"/admin/v2/persistent/public/default/skip/subscription/s/skip/9223372036854775807", "")
	if status != http.StatusNoContent {
		t.Fatalf("skip 2^63-1: %d %q", status, reason)
	}
	if n := backlog(t, e, tp, "s"); n != 0 {
		t.Fatalf("backlog %d after skipping everything", n)
	}
	produce(t, p, "b", 3, nil)
	if n := backlog(t, e, tp, "s"); n != 3 {
		t.Fatalf("backlog %d, want the 3 produced after the skip", n)
	}
}
