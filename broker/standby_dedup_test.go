package broker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/broker/primary"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/internal/wanproxy"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// TestStandbyDropsPrimarysCopyOfItsOwnMessage: a region that was the
// primary stored a producer's message as it was cut off, without the
// producer hearing so; the producer resent it to the new primary, whose
// replication stream brings it back. The old primary, now a standby,
// must not store it twice (the drill's fail-back copy once held such a
// message twice). What the new primary sends of the producer's later
// messages is stored, and what it sends under another producer's name
// too.
func TestStandbyDropsPrimarysCopyOfItsOwnMessage(t *testing.T) {
	e := startEnv(t, nil)
	ctx := ctxT(t)
	const ns, tp = "public/as", "persistent://public/as/resent"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	activeStandby(t, e, ns)

	// While this region is the primary, producer "app" stores 0, 1, 2.
	sendOwn(t, e.url, tp)

	// "other" becomes the primary; this region a standby.
	_, err := e.pol.UpdateNamespace(ctx, ns, func(p *policy.Policies) error { return policy.SetFailover(p, policy.ActiveStandby, "other") })
	must(err)
	e.b.MaintainOnce(ctx)

	// The new primary's stream: app's 2 (resent there), then 3 and 4, and
	// another producer's 0.
	sendPrimaryStream(t, e.url, tp)

	// Back to this region (fail-back), to read its copy.
	_, err = e.pol.UpdateNamespace(ctx, ns, func(p *policy.Policies) error { return policy.SetFailover(p, policy.ActiveStandby, "test") })
	must(err)
	e.b.MaintainOnce(ctx)
	r, err := e.client().CreateReader(pulsar.ReaderOptions{Topic: tp, StartMessageID: pulsar.EarliestMessageID()})
	must(err)
	defer r.Close()
	got := payloads(readAll(t, r))
	if want := []string{"app-0", "app-1", "app-2", "app-3", "app-4", "other-app-0"}; !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
}

// activeStandby creates namespace ns, replicated to this region ("test")
// and "other", active-standby with this region the primary.
func activeStandby(t *testing.T, e *env, ns string) {
	t.Helper()
	ctx := ctxT(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.pol.CreateCluster(ctx, "other", policy.ClusterData{ServiceURL: "http://127.0.0.1:2", BrokerServiceURL: "pulsar://127.0.0.1:2"}))
	must(e.pol.UpdateTenant(ctx, "public", policy.TenantInfo{AllowedClusters: []string{"test", "other"}}))
	p := &policy.Policies{ReplicationClusters: []string{"test", "other"}}
	must(policy.SetFailover(p, policy.ActiveStandby, "test"))
	must(e.pol.CreateNamespace(ctx, ns, p))
}

// sendOwn stores app's 0, 1 and 2 through the broker at url.
func sendOwn(t *testing.T, url, tp string) {
	t.Helper()
	app := dialRaw(t, url, true)
	openProducer(t, app, tp, 1, "app")
	for seq := range uint64(3) {
		sendEntry(t, app, 1, seq, &pb.MessageMetadata{ProducerName: proto.String("app"), SequenceId: proto.Uint64(seq), PublishTime: proto.Uint64(1)}, fmt.Sprintf("app-%d", seq))
		if r := app.recv().Cmd; r.GetType() != pb.BaseCommand_SEND_RECEIPT {
			t.Fatalf("send %d: %v", seq, r)
		}
	}
}

// sendPrimaryStream sends, as the replicator from region "other", app's
// 2 (resent there), 3 and 4, and other-app's 0.
func sendPrimaryStream(t *testing.T, url, tp string) {
	t.Helper()
	repl := dialRaw(t, url, true)
	openProducer(t, repl, tp, 7, replication.Prefix+"other")
	for i, m := range []struct {
		producer string
		seq      uint64
	}{{"app", 2}, {"app", 3}, {"app", 4}, {"other-app", 0}} {
		meta := &pb.MessageMetadata{ProducerName: proto.String(m.producer), SequenceId: proto.Uint64(m.seq), PublishTime: proto.Uint64(1),
			ReplicatedFrom: proto.String("other"),
			Properties: []*pb.KeyValue{{Key: proto.String(replication.SourcePositionProperty),
				Value: proto.String(replication.Position{Ledger: 9, Entry: int64(i)}.String())}}}
		sendEntry(t, repl, 7, uint64(i), meta, fmt.Sprintf("%s-%d", m.producer, m.seq))
		if r := repl.recv().Cmd; r.GetType() != pb.BaseCommand_SEND_RECEIPT {
			t.Fatalf("replicated %s %d: %v", m.producer, m.seq, r)
		}
	}
}

// TestCutOffPrimaryDropsNewPrimarysCopyOfItsOwnMessage: as
// TestStandbyDropsPrimarysCopyOfItsOwnMessage, but the new primary's
// stream reaches the old one while it still believes itself the primary
// (cut off from the global store, its fence lapsed: after a partition
// heals, replication can resume before the store's news arrives).
func TestCutOffPrimaryDropsNewPrimarysCopyOfItsOwnMessage(t *testing.T) {
	e := startEnv(t, nil)
	// The broker again, with fence gates that reach the global store (here
	// the cluster's etcd) through a link the test can cut.
	e.b.Shutdown(ctxT(t))
	link, err := wanproxy.Listen("127.0.0.1:0", strings.TrimPrefix(e.cl.Endpoints()[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	cut, err := metastore.Connect(context.Background(), metastore.Config{Endpoints: []string{"http://" + link.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	gates, err := primary.New(primary.Config{Region: "test", Broker: "a", TTL: 2 * time.Second}, primary.Deps{Global: cut})
	if err != nil {
		t.Fatal(err)
	}
	gates.Start()
	t.Cleanup(func() {
		gates.Abort()
		cut.Close()
	})
	e.modify = func(s *setup) { s.Primary = gates }
	e.startBroker()
	ctx := ctxT(t)
	const ns, tp = "public/as", "persistent://public/as/cut"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	activeStandby(t, e, ns)
	must(gates.Wait(ctx, ns, ""))

	sendOwn(t, e.url, tp)

	// Cut off from the global store, whose namespace record then names
	// "other" the primary: this broker's fence lapses, its view stays.
	link.Blackhole()
	setFailover := func(primaryRegion string) {
		t.Helper()
		_, err := e.pol.UpdateNamespace(ctx, ns, func(p *policy.Policies) error { return policy.SetFailover(p, policy.ActiveStandby, primaryRegion) })
		must(err)
	}
	setFailover("other")
	testcluster.WaitFor(t, 30*time.Second, func() bool { return gates.Check(ns, "") != nil })
	if f, _ := gates.Failover(ns, ""); f.Primary != "test" {
		t.Fatalf("the cut-off broker's view: %+v, want primary test still", f)
	}
	sendPrimaryStream(t, e.url, tp)

	// Healed, and failed back here, to read this region's copy.
	link.Up()
	testcluster.WaitFor(t, 30*time.Second, func() bool { return errors.Is(gates.Check(ns, ""), primary.ErrNotPrimary) })
	setFailover("test")
	testcluster.WaitFor(t, 30*time.Second, func() bool { return gates.Check(ns, "") == nil })
	r, err := e.client().CreateReader(pulsar.ReaderOptions{Topic: tp, StartMessageID: pulsar.EarliestMessageID()})
	must(err)
	defer r.Close()
	got := payloads(readAll(t, r))
	if want := []string{"app-0", "app-1", "app-2", "app-3", "app-4", "other-app-0"}; !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
}

// openProducer creates producer id named name on topic tp over c.
func openProducer(t *testing.T, c *rawConn, tp string, id uint64, name string) {
	t.Helper()
	req := id + 1000
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: proto.String(tp), ProducerId: proto.Uint64(id), RequestId: proto.Uint64(req), ProducerName: proto.String(name)}})
	if r := c.recv().Cmd; r.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("producer %s: %v", name, r)
	}
}

// sendEntry sends one message with metadata meta over c.
func sendEntry(t *testing.T, c *rawConn, producer, seq uint64, meta *pb.MessageMetadata, payload string) {
	t.Helper()
	f, err := wire.AppendPayloadCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
		ProducerId: proto.Uint64(producer), SequenceId: proto.Uint64(seq), NumMessages: proto.Int32(1)}}, meta, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	c.write(f)
}

// TestNewPrimaryDropsResentLateCopyAfterRestart: after an unplanned
// failover a producer resent to the new primary (this region) what the
// old primary ("other") had not confirmed, and the new primary's broker
// was restarted before the old primary's late tail arrived. The tail's
// copy of the resent message must still be dropped: the first sequence
// id each producer stored in the epoch is kept with the de-duplication
// snapshot, not only in the broker's memory. The tail's messages the
// producer had been told of are stored, late. Once the new primary's own
// entries are covered by a snapshot (snapshotted), and once they are only
// in the log after it (replayed).
func TestNewPrimaryDropsResentLateCopyAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration // Config.DeduplicationSnapshotInterval
	}{{"replayed", -1}, {"snapshotted", time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnv(t, func(s *setup) { s.DeduplicationSnapshotInterval = tc.interval })
			ctx := ctxT(t)
			const ns, tp = "public/as", "persistent://public/as/restarted"
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			setPrimary := func(region string) {
				t.Helper()
				_, err := e.pol.UpdateNamespace(ctx, ns, func(p *policy.Policies) error { return policy.SetFailover(p, policy.ActiveStandby, region) })
				must(err)
				e.b.MaintainOnce(ctx)
			}
			activeStandby(t, e, ns)
			setPrimary("other")

			// The old primary's stream: app's 0, 1 and 2. It stored 3, 4
			// and 5 too (the producer heard of 3 and 4) but was cut off
			// before it replicated them.
			repl := dialRaw(t, e.url, true)
			openProducer(t, repl, tp, 7, replication.Prefix+"other")
			sendReplicated(t, repl, 7, "other", 0, "app", 0, 1, 2)
			repl.nc.Close()

			// Failed over to this region: the producer resends 5, then 6.
			setPrimary("test")
			app := dialRaw(t, e.url, true)
			openProducer(t, app, tp, 1, "app")
			for _, seq := range []uint64{5, 6} {
				sendEntry(t, app, 1, seq, &pb.MessageMetadata{ProducerName: proto.String("app"), SequenceId: proto.Uint64(seq), PublishTime: proto.Uint64(1)}, fmt.Sprintf("app-%d", seq))
				if r := app.recv().Cmd; r.GetType() != pb.BaseCommand_SEND_RECEIPT {
					t.Fatalf("send %d: %v", seq, r)
				}
			}
			app.nc.Close()
			if tc.interval > 0 {
				name := mustParse(t, tp)
				testWaitFor(t, "a snapshot covering the new primary's entries", func() bool {
					st, err := e.b.AdminAPI().Topics.InternalStats(ctxT(t), name)
					must(err)
					return st.Cursors["isobar.dedup"].NumberOfEntriesSinceFirstNotAckedMessage == 0
				})
			}

			// The new primary's broker restarts; then the old primary's
			// late tail arrives: 3, 4 and 5.
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			e.b.Shutdown(sctx)
			cancel()
			e.startBroker()
			repl = dialRaw(t, e.url, true)
			openProducer(t, repl, tp, 7, replication.Prefix+"other")
			sendReplicated(t, repl, 7, "other", 3, "app", 3, 4, 5)
			repl.nc.Close()

			r, err := e.client().CreateReader(pulsar.ReaderOptions{Topic: tp, StartMessageID: pulsar.EarliestMessageID()})
			must(err)
			defer r.Close()
			ms := readAll(t, r)
			if got, want := payloads(ms), []string{"app-0", "app-1", "app-2", "app-5", "app-6", "app-3", "app-4"}; !slices.Equal(got, want) {
				t.Fatalf("stored %v, want %v", got, want)
			}
			for _, m := range ms[5:] {
				if _, ok := m.Properties()[broker.LateProperty]; !ok {
					t.Errorf("%s: not marked late: %v", m.Payload(), m.Properties())
				}
			}
		})
	}
}

// sendReplicated sends, over c as replicator producer id, the messages of
// producer with sequence ids seqs, replicated from src at source
// positions 9:from, 9:from+1, ...
func sendReplicated(t *testing.T, c *rawConn, id uint64, src string, from int64, producer string, seqs ...uint64) {
	t.Helper()
	for i, seq := range seqs {
		pos := from + int64(i)
		meta := &pb.MessageMetadata{ProducerName: proto.String(producer), SequenceId: proto.Uint64(seq), PublishTime: proto.Uint64(1),
			ReplicatedFrom: proto.String(src),
			Properties: []*pb.KeyValue{{Key: proto.String(replication.SourcePositionProperty),
				Value: proto.String(replication.Position{Ledger: 9, Entry: pos}.String())}}}
		sendEntry(t, c, id, uint64(pos), meta, fmt.Sprintf("%s-%d", producer, seq))
		if r := c.recv().Cmd; r.GetType() != pb.BaseCommand_SEND_RECEIPT {
			t.Fatalf("replicated %s %d: %v", producer, seq, r)
		}
	}
}
