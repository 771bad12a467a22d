package admin_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/internal/testcluster"
)

// TestBookieRecoveryEndpoints: decommission, the decommissioned list and
// the under-replicated ledgers, with bad bookie names refused and nothing
// marked.
func TestBookieRecoveryEndpoints(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Bookies: 1, Region: "standalone"})
	ledgers, err := ledger.NewClient(c.Connect(), ledger.Config{Region: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledgers.Close() })
	srv := httptest.NewServer(admin.New(admin.Config{Cluster: "standalone", Recovery: ledger.Operations{Client: ledgers}}))
	t.Cleanup(srv.Close)
	e := &env{t: t, srv: srv}

	ctx := context.Background()
	w, err := ledgers.Create(ctx, ledger.CreateOptions{Ensemble: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	id := c.Bookie(0).ID()
	const base = "/admin/v2/bookies/"
	e.run([]step{
		{"GET", base + "decommissioned", "", 200, "[]", ""},
		{"GET", base + "under-replicated", "", 200, "[]", ""},
		{"POST", base + "decommission/nobody:1", "", 404, "Bookie not found: nobody:1", ""},
		{"POST", base + "decommission/bad%20id", "", 412, "bad id", ""},
		{"POST", base + "decommission/bad%2Fid", "", 412, "bad/id", ""},
		{"PUT", base + "decommission/" + url.PathEscape(id), "", 405, "", ""},
		{"GET", base + "decommissioned", "", 200, "[]", ""},
		{"POST", base + "decommission/" + url.PathEscape(id), "", 204, "", ""},
		{"POST", base + "decommission/" + url.PathEscape(id), "", 204, "", ""},
		{"GET", base + "decommissioned", "", 200, `["` + id + `"]`, ""},
		// The only bookie is decommissioned: its ledger waits for a replacement.
		{"GET", base + "under-replicated", "", 200, `{"ledger":` + strconv.FormatUint(w.ID(), 10) + `,"state":"closed","bookies":["` + id + `"]`, ""},
		{"GET", base + "under-replicated", "", 200, `"entries":1`, ""},
		{"DELETE", base + "decommission/bad%20id", "", 412, "bad id", ""},
		{"DELETE", base + "decommission/nobody:1", "", 404, "Bookie is not decommissioned: nobody:1", ""},
		{"DELETE", base + "decommission/" + url.PathEscape(id), "", 204, "", ""},
		{"DELETE", base + "decommission/" + url.PathEscape(id), "", 404, "not decommissioned", ""},
		{"GET", base + "decommissioned", "", 200, "[]", ""},
		{"GET", base + "under-replicated", "", 200, "[]", ""},
	})
	// Without recovery configured: 503.
	bare := httptest.NewServer(admin.New(admin.Config{Cluster: "standalone"}))
	t.Cleanup(bare.Close)
	(&env{t: t, srv: bare}).run([]step{{"GET", base + "under-replicated", "", 503, "not served", ""}})
}
