package broker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

func TestPartitionedTopic(t *testing.T) {
	e := startEnv(t, nil)
	name, _ := topic.Parse("persistent://public/default/parts")
	if err := e.pol.CreatePartitioned(context.Background(), name, 4); err != nil {
		t.Fatal(err)
	}
	c := e.client()
	parts, err := c.TopicPartitions(name.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 4 {
		t.Fatalf("partitions %v", parts)
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: name.String(), SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: name.String(), DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 200
	ids := produce(t, p, "p", n, func(i int, m *pulsar.ProducerMessage) { m.Key = fmt.Sprintf("k%d", i%16) })
	used := map[int32]bool{}
	for _, id := range ids {
		used[id.PartitionIdx()] = true
	}
	if len(used) != 4 {
		t.Fatalf("messages went to partitions %v", used)
	}
	// Per partition, messages arrive in the order they were produced.
	last := map[string]int{}
	got := receiveN(t, cons, n, true)
	for _, m := range got {
		var i int
		fmt.Sscanf(string(m.Payload()), "p-%d", &i)
		if !strings.Contains(m.Topic(), "-partition-") {
			t.Fatalf("message topic %q is not a partition", m.Topic())
		}
		if l, ok := last[m.Topic()]; ok && i < l {
			t.Fatalf("%s: %d after %d", m.Topic(), i, l)
		}
		last[m.Topic()] = i
	}
	if len(last) != 4 {
		t.Fatalf("received from %d partitions", len(last))
	}
}

func TestPartitionedAutoCreation(t *testing.T) {
	e := startEnv(t, nil)
	three := 3
	if err := e.pol.CreateNamespace(context.Background(), "public/auto", &policy.Policies{AutoTopicCreation: &policy.AutoTopicCreation{
		AllowAutoTopicCreation: true, TopicType: policy.TopicTypePartitioned, DefaultNumPartitions: &three}}); err != nil {
		t.Fatal(err)
	}
	if err := e.pol.CreateNamespace(context.Background(), "public/closed", &policy.Policies{AutoTopicCreation: &policy.AutoTopicCreation{
		AllowAutoTopicCreation: false}}); err != nil {
		t.Fatal(err)
	}
	c := e.client()
	parts, err := c.TopicPartitions("persistent://public/auto/new")
	if err != nil || len(parts) != 3 {
		t.Fatalf("auto-created partitions %v, %v", parts, err)
	}
	_, err = c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/closed/new", SendTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "TopicNotFound") {
		t.Fatalf("producer on a namespace without auto-creation: %v", err)
	}
	_, err = c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/missing-ns/new"})
	if err == nil {
		t.Fatal("producer on a missing namespace succeeded")
	}
}

// TestDeduplication sends sequence ids by hand: a resent id is answered
// with the (-1, -1) receipt and not stored, also after the topic is
// unloaded and loaded again (the state is rebuilt from the log).
func TestDeduplication(t *testing.T) {
	e := startEnv(t, nil)
	on := true
	if err := e.pol.CreateNamespace(context.Background(), "public/dedup", &policy.Policies{DeduplicationEnabled: &on}); err != nil {
		t.Fatal(err)
	}
	const tp = "persistent://public/dedup/t"
	producer := func(c *rawConn, pid uint64) int64 {
		c.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
			Topic: proto.String(tp), ProducerId: &pid, RequestId: &pid, ProducerName: proto.String("dp")}})
		r := c.recv().Cmd
		if r.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
			t.Fatalf("producer: %v", r)
		}
		return r.ProducerSuccess.GetLastSequenceId()
	}
	send := func(c *rawConn, pid, seq uint64) (int64, int64) {
		meta := &pb.MessageMetadata{ProducerName: proto.String("dp"), SequenceId: &seq, PublishTime: proto.Uint64(1)}
		f, err := wire.AppendPayloadCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
			ProducerId: &pid, SequenceId: &seq}}, meta, fmt.Appendf(nil, "seq-%d", seq))
		if err != nil {
			t.Fatal(err)
		}
		c.write(f)
		r := c.recv().Cmd
		if r.GetType() != pb.BaseCommand_SEND_RECEIPT || r.SendReceipt.GetSequenceId() != seq {
			t.Fatalf("send %d: %v", seq, r)
		}
		id := r.SendReceipt.MessageId
		return int64(id.GetLedgerId()), int64(id.GetEntryId())
	}
	c := dialRaw(t, e.url, true)
	if last := producer(c, 1); last != -1 {
		t.Fatalf("new producer: last sequence id %d", last)
	}
	for seq := range uint64(3) {
		if l, _ := send(c, 1, seq); l < 0 {
			t.Fatalf("seq %d treated as a duplicate", seq)
		}
	}
	if l, en := send(c, 1, 1); l != -1 || en != -1 {
		t.Fatalf("resent seq 1 stored at %d:%d", l, en)
	}
	c.nc.Close()
	name, _ := topic.Parse(tp)
	if err := e.b.Unload(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	c = dialRaw(t, e.url, true)
	if last := producer(c, 2); last != 2 {
		t.Fatalf("after reload: last sequence id %d, want 2", last)
	}
	if l, _ := send(c, 2, 2); l != -1 {
		t.Fatal("seq 2 stored again after reload")
	}
	send(c, 2, 3)
	r, err := e.client().CreateReader(pulsar.ReaderOptions{Topic: tp, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := payloads(readAll(t, r))
	if want := []string{"seq-0", "seq-1", "seq-2", "seq-3"}; !slices.Equal(got, want) {
		t.Fatalf("stored %v", got)
	}
}

func readAll(t *testing.T, r pulsar.Reader) []pulsar.Message {
	t.Helper()
	var out []pulsar.Message
	for r.HasNext() {
		m, err := r.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// Chunks of one message share its sequence id: de-duplication must not
// drop the chunks after the first.
func TestDeduplicationWithChunking(t *testing.T) {
	e := startEnv(t, nil)
	on := true
	if err := e.pol.CreateNamespace(context.Background(), "public/dchunk", &policy.Policies{DeduplicationEnabled: &on}); err != nil {
		t.Fatal(err)
	}
	const tp = "persistent://public/dchunk/big"
	c := e.client()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, Name: "chunky", EnableChunking: true, DisableBatching: true, ChunkMaxMessageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	big := []byte(strings.Repeat("0123456789", 550))
	for i := range 3 {
		if _, err := p.Send(ctxT(t), &pulsar.ProducerMessage{Payload: append([]byte{byte('a' + i)}, big...)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		m, err := cons.Receive(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Payload()) != len(big)+1 || m.Payload()[0] != byte('a'+i) {
			t.Fatalf("message %d: %d bytes starting %q", i, len(m.Payload()), m.Payload()[:1])
		}
		cons.Ack(m)
	}
}
