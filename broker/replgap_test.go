package broker_test

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// TestReplicatedCopyWaitsForFirstCopysAdd: a replicator resends a frame
// (its reply was lost, or it gave the frame up while the remote was
// unreachable) while the broker is still adding the first copy's
// entries. The broker must not answer the copy "stored already" before
// the first copy is stored: when that add then fails, the source, told
// the entry is stored, acknowledges it, and the broker stores the
// source's next entries after the gap. The chaos drill lost acknowledged
// messages so (r2 lacked p1:3697-3743 after a kill, seed 2004).
//
// The first copy's add is held by the metadata store being down (each
// entry rolls over to a new ledger, which needs it) and fails when
// creating the ledger times out.
func TestReplicatedCopyWaitsForFirstCopysAdd(t *testing.T) {
	e := startEnv(t, func(s *setup) { s.Ledger.MaxEntriesPerLedger = 1 })
	ctx := ctxT(t)
	const ns, tp = "public/aa", "persistent://public/aa/gap"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.pol.CreateCluster(ctx, "other", policy.ClusterData{ServiceURL: "http://127.0.0.1:2", BrokerServiceURL: "pulsar://127.0.0.1:2"}))
	must(e.pol.UpdateTenant(ctx, "public", policy.TenantInfo{AllowedClusters: []string{"test", "other"}}))
	must(e.pol.CreateNamespace(ctx, ns, &policy.Policies{ReplicationClusters: []string{"test", "other"}}))

	send := func(c *rawConn, producer, seq uint64, entry int64) {
		t.Helper()
		meta := &pb.MessageMetadata{ProducerName: proto.String("app"), SequenceId: proto.Uint64(uint64(entry)), PublishTime: proto.Uint64(1),
			ReplicatedFrom: proto.String("other"),
			Properties: []*pb.KeyValue{{Key: proto.String(replication.SourcePositionProperty),
				Value: proto.String(replication.Position{Ledger: 9, Entry: entry}.String())}}}
		sendEntry(t, c, producer, seq, meta, fmt.Sprintf("app-%d", entry))
	}
	// answer waits (up to a minute) for the broker's answer to a send:
	// true for a receipt (stored, or stored already), false for a
	// refusal (SEND_ERROR or CLOSE_PRODUCER: the sink resends).
	answer := func(c *rawConn) bool {
		t.Helper()
		until := time.Now().Add(time.Minute)
		for {
			c.nc.SetReadDeadline(time.Now().Add(time.Second))
			raw, err := wire.ReadFrame(c.nc, 0, nil)
			var f wire.Frame
			if err == nil {
				f, err = wire.DecodeFrame(raw)
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && time.Now().Before(until) {
				continue
			}
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			switch f.Cmd.GetType() {
			case pb.BaseCommand_PING:
				c.send(&pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}})
			case pb.BaseCommand_SEND_RECEIPT:
				return true
			case pb.BaseCommand_SEND_ERROR, pb.BaseCommand_CLOSE_PRODUCER:
				return false
			}
		}
	}

	// The source's entry 9:0 is stored; two sink producers are open (two
	// workers, or one before and after a reconnection).
	first := dialRaw(t, e.url, true)
	openProducer(t, first, tp, 1, replication.Prefix+"other")
	send(first, 1, 0, 0)
	if !answer(first) {
		t.Fatal("9:0 refused")
	}
	again := dialRaw(t, e.url, true)
	openProducer(t, again, tp, 2, replication.Prefix+"other.w2")

	// 9:1 while its add cannot complete, then its copy.
	e.cl.StopEtcd()
	send(first, 1, 1, 1)
	send(again, 2, 0, 1)
	e.cl.StartEtcd()
	told := map[string]bool{} // producer: told 9:1 is stored
	told["first"] = answer(first)
	told["again"] = answer(again)

	t.Logf("told 9:1 stored: %v", told)

	// The source goes on with 9:2 (after 9:1 when it was refused) through
	// a fresh producer, as a sink does, until the broker takes it.
	until := time.Now().Add(time.Minute)
	for i := uint64(3); ; i++ {
		if time.Now().After(until) {
			t.Fatal("9:2 refused for a minute")
		}
		next := dialRaw(t, e.url, true)
		openProducer(t, next, tp, i, fmt.Sprintf("%sother.w%d", replication.Prefix, i))
		var ok bool
		if !told["first"] && !told["again"] {
			send(next, i, 0, 1)
			ok = answer(next)
		}
		if told["first"] || told["again"] || ok {
			send(next, i, 1, 2)
			if answer(next) {
				break
			}
		}
	}

	r, err := e.client().CreateReader(pulsar.ReaderOptions{Topic: tp, StartMessageID: pulsar.EarliestMessageID()})
	must(err)
	defer r.Close()
	got := payloads(readAll(t, r))
	t.Logf("told 9:1 stored: %v; stored %v", told, got)
	if (told["first"] || told["again"]) && !slices.Contains(got, "app-1") {
		t.Fatalf("the broker told a sink 9:1 was stored (%v), but it stored %v: the source acknowledges 9:1 and it is lost", told, got)
	}
}
