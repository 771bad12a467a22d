package broker_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/bookie/racks"
	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

// TestBookieAffinity: a namespace's bookie affinity, set through the
// admin API over four real bookies that racks-info puts in two groups,
// confines the ensembles of its topics' new ledgers (read from the
// ledger metadata): to the primary group, to the secondary when the
// primary is short, to nothing when no group will do (the add fails),
// and to any bookie once it is removed. A loaded topic follows a change
// at its next ledger.
func TestBookieAffinity(t *testing.T) {
	e := startEnv(t, func(s *setup) { s.Ledger.MaxEntriesPerLedger = 4 })
	e.cl.AddBookie()
	h := admin.New(admin.Config{Policies: e.pol, Broker: e.b.AdminAPI(), Cluster: "test",
		Bookies: racks.NewStore(e.cl.Connect(), e.cl.Region)})
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req := httptest.NewRequestWithContext(ctxT(t), method, "http://broker"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	must := func(method, path, body string, status int) string {
		t.Helper()
		code, out := call(method, path, body)
		if code != status {
			t.Fatalf("%s %s %s: %d %s, want %d", method, path, body, code, out, status)
		}
		return out
	}
	var ids []string
	for _, b := range e.cl.Bookies() {
		ids = append(ids, b.ID())
	}
	g1, g2 := ids[:2], ids[2:]
	for i, id := range ids {
		must("POST", "/admin/v2/bookies/racks-info/"+id+"?group="+[]string{"g1", "g1", "g2", "g2"}[i], `{"rack":"/rack-`+string(rune('a'+i))+`"}`, 204)
	}
	var all adminapi.BookiesClusterInfo
	if err := json.Unmarshal([]byte(must("GET", "/admin/v2/bookies/all", "", 200)), &all); err != nil || len(all.Bookies) != 4 {
		t.Fatalf("bookies/all: %+v %v, want the 4 bookies", all, err)
	}

	c := e.client()
	send := func(tp string, n int) error {
		t.Helper()
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true, SendTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for range n {
			if _, err := p.Send(ctxT(t), &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
				return err
			}
		}
		return nil
	}
	ensembles := func(tp string) [][]string {
		t.Helper()
		name, _ := topic.Parse(tp)
		st, err := e.b.AdminAPI().Topics.InternalStats(ctxT(t), name)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]string
		for _, l := range st.Ledgers {
			md, _, err := e.lc.Metadata(ctxT(t), uint64(l.LedgerID))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, md.Ensembles[0].Bookies)
		}
		return out
	}
	in := func(ensemble []string, group []string) bool {
		for _, b := range ensemble {
			if !slices.Contains(group, b) {
				return false
			}
		}
		return true
	}
	for _, ns := range []string{"iso", "iso2", "iso3"} {
		must("PUT", "/admin/v2/namespaces/public/"+ns, "", 204)
	}

	// A loaded topic: its ledgers after the change (the first was
	// created before it) are all in g1.
	const t1 = "persistent://public/iso/t1"
	if err := send(t1, 2); err != nil {
		t.Fatal(err)
	}
	must("POST", "/admin/v2/namespaces/public/iso/persistence/bookieAffinity", `{"bookkeeperAffinityGroupPrimary":"g1"}`, 204)
	e.b.MaintainOnce(ctxT(t))
	if err := send(t1, 12); err != nil {
		t.Fatal(err)
	}
	es := ensembles(t1)
	if len(es) < 3 {
		t.Fatalf("%s: ledgers %v, want rollovers", t1, es)
	}
	for i, en := range es[1:] {
		if !in(en, g1) {
			t.Fatalf("%s: ledger %d after the affinity has ensemble %v, not within g1 %v", t1, i+1, en, g1)
		}
	}

	// E=3 over a primary group of two: the secondary fills in.
	setNS(t, e, "public/iso2", func(p *policy.Policies) {
		p.Persistence = &policy.PersistencePolicies{BookkeeperEnsemble: 3, BookkeeperWriteQuorum: 2, BookkeeperAckQuorum: 2}
	})
	must("POST", "/admin/v2/namespaces/public/iso2/persistence/bookieAffinity",
		`{"bookkeeperAffinityGroupPrimary":"g1","bookkeeperAffinityGroupSecondary":"g2"}`, 204)
	const t2 = "persistent://public/iso2/t2"
	if err := send(t2, 1); err != nil {
		t.Fatal(err)
	}
	for _, en := range ensembles(t2) {
		if len(en) != 3 || !slices.Contains(en, g1[0]) || !slices.Contains(en, g1[1]) || in(en, g1) {
			t.Fatalf("%s: ensemble %v, want both g1 bookies %v and one of g2 %v", t2, en, g1, g2)
		}
	}

	// A group no bookie is in (Pulsar accepts the name): every bookie is
	// in another group, so no ledger can be made and the send fails.
	// Removing the affinity lets the next ledger take any bookie: all four
	// for E=4.
	setNS(t, e, "public/iso3", func(p *policy.Policies) {
		p.Persistence = &policy.PersistencePolicies{BookkeeperEnsemble: 4, BookkeeperWriteQuorum: 2, BookkeeperAckQuorum: 2}
	})
	must("POST", "/admin/v2/namespaces/public/iso3/persistence/bookieAffinity", `{"bookkeeperAffinityGroupPrimary":"nope"}`, 204)
	const t3 = "persistent://public/iso3/t3"
	if err := send(t3, 1); err == nil {
		t.Fatalf("%s: a send succeeded with the affinity to group nope", t3)
	}
	if es := ensembles(t3); len(es) != 0 {
		t.Fatalf("%s: ledgers %v made with the affinity to group nope", t3, es)
	}
	must("DELETE", "/admin/v2/namespaces/public/iso3/persistence/bookieAffinity", "", 204)
	if code, _ := call("GET", "/admin/v2/namespaces/public/iso3/persistence/bookieAffinity", ""); code != http.StatusNoContent {
		t.Fatalf("affinity still set after DELETE: %d", code)
	}
	e.b.MaintainOnce(ctxT(t))
	if err := send(t3, 1); err != nil {
		t.Fatalf("%s: after removing the affinity: %v", t3, err)
	}
	es = ensembles(t3)
	if len(es) == 0 || !in(ids, es[len(es)-1]) {
		t.Fatalf("%s: ensembles %v, want the last on all of %v", t3, es, ids)
	}
}
