package region_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/region"
)

// TestDecommissionThroughTheRegion: in a region of 4 bookies and 2
// brokers, a bookie decommissioned through the admin API of either broker
// has every closed ledger of a topic's managed ledger moved off it by the
// leader broker's auditor, while the topic keeps taking messages; every
// entry then has its Qw copies on its (new) write set, and every message
// is read back.
func TestDecommissionThroughTheRegion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := region.Config{Name: "autorec", DataDir: t.TempDir(), Bookies: 4, Brokers: 2}
	cfg.Broker.LostBookieRecoveryDelay = time.Second
	r, err := region.Start(ctx, cfg, region.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	var hosts []string
	for _, b := range r.Brokers() {
		hosts = append(hosts, strings.TrimPrefix(b.ServiceURL, "pulsar://"))
	}
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	pc, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + strings.Join(hosts, ","), OperationTimeout: 30 * time.Second,
		Logger: plog.NewLoggerWithLogrus(l)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	meta, err := metastore.Connect(ctx, metastore.Config{Endpoints: []string{r.Endpoints().MetadataURL}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { meta.Close() })
	lc, err := ledger.NewClient(meta, ledger.Config{Region: "autorec"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close() })

	const topicName = "persistent://public/default/autorec"
	p, err := pc.CreateProducer(pulsar.ProducerOptions{Topic: topicName})
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	send := func(n int) {
		t.Helper()
		for range n {
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", sent)}); err != nil {
				t.Fatalf("send %d: %v", sent, err)
			}
			sent++
		}
	}
	send(100)

	ids := ledgerIDs(t, meta)
	if len(ids) == 0 {
		t.Fatal("no ledger")
	}
	md, _, err := lc.Metadata(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	victim := md.Ensembles[0].Bookies[0]

	web := r.Brokers()[1].WebServiceURL
	resp, err := http.Post(web+"/admin/v2/bookies/decommission/"+url.PathEscape(victim), "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("decommission: %s", resp.Status)
	}
	// Close the topic's ledgers (the reloaded topic opens new ones, which
	// placement keeps off the decommissioned bookie), and keep writing.
	if err := adminOf(t, r, 0).Topics().Unload(*adminTopic(t, topicName)); err != nil {
		t.Fatal(err)
	}
	send(100)

	underReplicated := func() []ledger.UnderReplicated {
		resp, err := http.Get(web + "/admin/v2/bookies/under-replicated")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var us []ledger.UnderReplicated
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&us) != nil {
			return []ledger.UnderReplicated{{}}
		}
		return us
	}
	waitFor(t, 60*time.Second, "no under-replicated ledger", func() bool { return len(underReplicated()) == 0 })
	send(50)

	if md, _, err := lc.Metadata(ctx, ids[0]); err != nil || md.State != ledger.StateClosed || md.LastEntry < 0 {
		t.Fatalf("the first ledger, %d: %s, last entry %d, %v: want it closed with its entries, moved", ids[0], md.State, md.LastEntry, err)
	}
	for _, id := range ledgerIDs(t, meta) {
		md, _, err := lc.Metadata(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(md.AllBookies(), victim) {
			t.Fatalf("ledger %d (%s) still on %s: %+v", id, md.State, victim, md.Ensembles)
		}
		if md.State != ledger.StateClosed {
			continue
		}
		for e := int64(0); e <= md.LastEntry; e++ {
			seg := md.SegmentFor(e)
			for _, idx := range ledger.WriteSet(e, md.EnsembleSize, md.WriteQuorum) {
				conn, err := testcluster.BookieConn(ctx, meta, "autorec", seg.Bookies[idx], lc.Pool())
				if err != nil {
					t.Fatal(err)
				}
				raw, err := conn.Read(ctx, id, uint64(e), false)
				if err != nil {
					t.Fatalf("ledger %d entry %d on %s: %v", id, e, seg.Bookies[idx], err)
				}
				if got, err := proto.DecodeEntry(raw); err != nil || got.ID != uint64(e) {
					t.Fatalf("ledger %d entry %d on %s: %v", id, e, seg.Bookies[idx], err)
				}
			}
		}
	}

	c, err := pc.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "check",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range sent {
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		m, err := c.Receive(rctx)
		rcancel()
		if err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
		if want := fmt.Sprintf("m-%d", i); string(m.Payload()) != want {
			t.Fatalf("message %d is %q, want %q", i, m.Payload(), want)
		}
		c.Ack(m)
	}
}

// ledgerIDs lists the region's ledgers.
func ledgerIDs(t *testing.T, meta metastore.Meta) []uint64 {
	t.Helper()
	keys, err := meta.ListKeys(context.Background(), metastore.RegionPrefix("autorec")+"ledgers/")
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, k := range keys {
		var id uint64
		if _, err := fmt.Sscan(k[strings.LastIndex(k, "/")+1:], &id); err == nil {
			out = append(out, id)
		}
	}
	return out
}
