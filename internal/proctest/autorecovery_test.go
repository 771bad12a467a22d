package proctest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore"
)

// TestProcessBookieLossReReplicates is automatic re-replication end to
// end (docs/ledger.md "Automatic recovery"): a region of 4 bookie
// processes and 2 brokers writing E=3 Qw=2 Qa=2 ledgers under a steady
// load on 4 topics. One bookie process holding copies is SIGKILLed. Its
// registration expires, and after broker.lostBookieRecoveryDelay the
// leader broker's auditor re-replicates the closed ledgers; the topics'
// open ledgers (their writers replaced the bookie in a new segment and
// went on) are fenced and closed after the open-ledger grace period and
// re-replicated too, while their managed ledgers roll over. Then:
//   - no ledger of the topics names the dead bookie, and every entry of
//     every one of them is read directly from each bookie of its write
//     set in its segment (one bookie client request per copy, not a
//     quorum read): Qw copies again;
//   - every acknowledged message is consumed (none lost, none stored
//     twice, per key in order);
//   - no send failed, and sends were acknowledged after the recovery.
func TestProcessBookieLossReReplicates(t *testing.T) {
	skipUnlessProcessTests(t)
	const delay, grace = 2 * time.Second, 3 * time.Second
	f := StartFederation(t, Layout{
		Regions: []string{"east"}, Global: 1, Metastores: 1, Bookies: 4, Brokers: 2,
		BrokerLeaseTTL: 5 * time.Second, BookieRegistrationTTL: 2 * time.Second,
		BrokerConfig: map[string]any{
			"ledger":                             map[string]any{"ensembleSize": 3, "writeQuorum": 2, "ackQuorum": 2},
			"lostBookieRecoveryDelay":            delay.String(),
			"openLedgerRereplicationGracePeriod": grace.String(),
		},
	}, t.TempDir())
	f.Replicate(t, "acme", "autorec")
	east := f.Regions[0]
	var sources []Source
	for i := range 4 {
		sources = append(sources, Source{Region: "east", Topic: fmt.Sprintf("persistent://acme/autorec/t%d", i)})
	}
	l := StartLoad(t, map[string]string{"east": east.ServiceURL()}, sources, 8, 20*time.Millisecond)
	waitProgress(t, l, 200, time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	meta, err := metastore.Connect(ctx, metastore.Config{Endpoints: east.Meta.Endpoints})
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	lc, err := ledger.NewClient(meta, ledger.Config{Region: east.Name, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()

	// The victim: the bookie holding copies of the most of the topics'
	// ledgers (the bookies' ids are their process names).
	ls := topicLedgers(t, ctx, meta, east.Name)
	count := map[string]int{}
	for _, tl := range ls {
		for _, b := range tl.md.AllBookies() {
			count[b]++
		}
	}
	var victim *Proc
	for _, p := range east.Bookies {
		if victim == nil || count[p.Name] > count[victim.Name] {
			victim = p
		}
	}
	if count[victim.Name] == 0 {
		t.Fatalf("no ledger of the topics on any bookie: %v", count)
	}
	t.Logf("SIGKILL %s, holding copies of %d of the topics' %d ledgers", victim.Name, count[victim.Name], len(ls))
	killed := time.Now()
	victim.Kill()

	// Under-replicated as the admin API lists it, then healed.
	type under struct {
		Ledger  uint64   `json:"ledger"`
		State   string   `json:"state"`
		Bookies []string `json:"bookies"`
	}
	underReplicated := func() []under {
		var us []under
		if err := Admin(ctx, east.HTTPURLs[0], http.MethodGet, "/admin/v2/bookies/under-replicated", nil, &us); err != nil {
			t.Logf("under-replicated: %v", err)
			return nil
		}
		return us
	}
	waitFor(t, time.Minute, "the dead bookie's ledgers listed under-replicated", func() bool { return len(underReplicated()) > 0 })
	waitFor(t, 3*time.Minute, "every ledger re-replicated off "+victim.Name, func() bool {
		us := underReplicated()
		if us == nil || len(us) > 0 {
			return false
		}
		for _, tl := range topicLedgers(t, ctx, meta, east.Name) {
			if slices.Contains(tl.md.AllBookies(), victim.Name) {
				return false
			}
		}
		return true
	})
	healed := time.Since(killed)
	if healed < delay+grace {
		t.Errorf("healed %v after the kill, before the delay %v and the grace period %v", healed, delay, grace)
	}
	// The open ledgers were fenced by the auditor, not closed by their
	// writers (the ledgers roll over only at 50000 entries or 4 h).
	if n := scrapeSum(t, east.HTTPURLs, "isobar_autorecovery_open_ledgers_recovered_total"); n == 0 {
		t.Errorf("isobar_autorecovery_open_ledgers_recovered_total is 0: no open ledger was fenced and recovered")
	}

	// Their managed ledgers rolled over and went on (the topic was not
	// unloaded as if another broker had taken it).
	var rolled, unloaded bool
	for _, b := range east.Brokers {
		log := b.Log()
		rolled = rolled || strings.Contains(log, "fenced by a recovery while the topic is still ours")
		unloaded = unloaded || strings.Contains(log, "topic fenced by another owner")
	}
	if !rolled || unloaded {
		t.Errorf("a broker's log says a managed ledger rolled over after the fence: %v; a topic was unloaded as fenced: %v", rolled, unloaded)
	}

	// Writes continue: more acknowledged after the recovery.
	acked := l.Acked()
	waitFor(t, time.Minute, "sends acknowledged after the recovery", func() bool { return l.Acked() > acked+200 })
	l.StopProducing()
	if errs := l.SendErrors(); len(errs) > 0 {
		t.Errorf("%d sends failed after the bookie was killed, e.g. %v", len(errs), errs[0])
	}
	if err := l.WaitDelivered(2 * time.Minute); err != nil {
		t.Errorf("after the recovery: %v", err)
	}
	r := l.Check()
	pub, _ := l.Gaps(killed, time.Now())
	t.Logf("healed %v after the kill; longest publish gap %v; acknowledged %d, delivered %d, redeliveries %d",
		healed.Round(time.Millisecond), pub.Round(time.Millisecond), r.Acked, r.Delivered, r.Redeliveries)
	assertReport(t, r)

	// Close every ledger (unloading the namespace closes the managed
	// ledgers), then read every entry of every ledger of the topics from
	// each bookie of its write set.
	if err := Admin(ctx, east.HTTPURLs[0], http.MethodPut, "/admin/v2/namespaces/acme/autorec/unload", nil, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "every ledger of the topics closed", func() bool {
		for _, tl := range topicLedgers(t, ctx, meta, east.Name) {
			if tl.md.State != ledger.StateClosed {
				return false
			}
		}
		return true
	})
	entries, copies := 0, 0
	final := topicLedgers(t, ctx, meta, east.Name)
	for _, tl := range final {
		md := tl.md
		if slices.Contains(md.AllBookies(), victim.Name) {
			t.Errorf("ledger %d still names %s: %+v", tl.id, victim.Name, md.Ensembles)
			continue
		}
		for e := int64(0); e <= md.LastEntry; e++ {
			seg := md.SegmentFor(e)
			for _, idx := range ledger.WriteSet(e, md.EnsembleSize, md.WriteQuorum) {
				b := seg.Bookies[idx]
				conn, err := testcluster.BookieConn(ctx, meta, east.Name, b, lc.Pool())
				if err != nil {
					t.Fatalf("bookie %s: %v", b, err)
				}
				raw, err := conn.Read(ctx, tl.id, uint64(e), false)
				if err != nil {
					t.Fatalf("ledger %d entry %d on bookie %s (write set of segment from %d): %v", tl.id, e, b, seg.FirstEntry, err)
				}
				if got, err := proto.DecodeEntry(raw); err != nil || got.ID != uint64(e) || got.Ledger != tl.id {
					t.Fatalf("ledger %d entry %d on bookie %s: entry %d of ledger %d, %v", tl.id, e, b, got.ID, got.Ledger, err)
				}
				copies++
			}
			entries++
		}
	}
	t.Logf("%d entries of %d ledgers read from each bookie of their write sets: %d copies", entries, len(final), copies)
	if entries < r.Acked {
		t.Errorf("%d entries in the topics' ledgers, %d messages acknowledged", entries, r.Acked)
	}
}

type topicLedger struct {
	id uint64
	md ledger.Metadata
}

// topicLedgers lists the region's ledgers written by a topic's managed
// ledger (property "mledger"), by id.
func topicLedgers(t *testing.T, ctx context.Context, meta metastore.Meta, region string) []topicLedger {
	t.Helper()
	p := metastore.RegionPrefix(region) + "ledgers/"
	kvs, err := meta.List(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var out []topicLedger
	for _, kv := range kvs {
		id, err := strconv.ParseUint(strings.TrimPrefix(kv.Key, p), 10, 64)
		if err != nil {
			continue
		}
		md, err := ledger.DecodeMetadata(kv.Value)
		if err != nil {
			t.Fatalf("ledger %d: %v", id, err)
		}
		if md.Properties["mledger"] != "" {
			out = append(out, topicLedger{id, md})
		}
	}
	return out
}

// scrapeSum sums the samples of a Prometheus metric over the /metrics of
// every base URL.
func scrapeSum(t *testing.T, bases []string, name string) float64 {
	t.Helper()
	var sum float64
	for _, base := range bases {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatalf("scrape %s: %v", base, err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
				continue
			}
			fields := strings.Fields(line)
			if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
				sum += v
			}
		}
		resp.Body.Close()
	}
	return sum
}
