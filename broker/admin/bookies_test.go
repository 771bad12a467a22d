package admin_test

import (
	"strings"
	"testing"
)

// TestBookiesRacksInfo: the racks-info endpoints with Pulsar's paths,
// shapes and answers, and bad input refused with nothing stored.
func TestBookiesRacksInfo(t *testing.T) {
	e := start(t)
	const ri = "/admin/v2/bookies/racks-info"
	e.run([]step{
		{"GET", ri, "", 200, "{}", ""},
		{"GET", "/admin/v2/bookies/all", "", 200, `{"bookies":[]}`, ""},
		{"GET", ri + "/127.0.0.1:3181", "", 404, "Bookie address not found: 127.0.0.1:3181", ""},
		{"DELETE", ri + "/127.0.0.1:3181", "", 404, "Bookie address not found: 127.0.0.1:3181", ""},
		{"POST", ri + "/127.0.0.1:3181?group=g1", `{"rack":"/r1","hostname":"bk1.example"}`, 204, "", ""},
		{"POST", ri + "/bookie-2?group=g1", `{"rack":"/r2"}`, 204, "", ""},
		{"POST", ri + "/[::1]:3183?group=g2", `{}`, 204, "", ""},
		{"GET", ri, "", 200, `{"g1":{"127.0.0.1:3181":{"rack":"/r1","hostname":"bk1.example"},"bookie-2":{"rack":"/r2"}},"g2":{"[::1]:3183":{}}}`, ""},
		{"GET", ri + "/bookie-2", "", 200, `{"rack":"/r2"}`, ""},
		// A bookie is in one group: setting another group moves it.
		{"POST", ri + "/bookie-2?group=g2", `{"rack":"r3"}`, 204, "", ""},
		{"GET", ri, "", 200, `{"g1":{"127.0.0.1:3181":{"rack":"/r1","hostname":"bk1.example"}},"g2":{"[::1]:3183":{},"bookie-2":{"rack":"r3"}}}`, ""},
		// The last bookie of a group out: the group goes.
		{"DELETE", ri + "/127.0.0.1:3181", "", 204, "", ""},
		{"GET", ri, "", 200, `{"g2":{"[::1]:3183":{},"bookie-2":{"rack":"r3"}}}`, ""},
	})
	before := func() string { _, b, _ := e.do("GET", ri, ""); return b }()
	e.run([]step{
		{"POST", ri + "/b1", `{"rack":"/r1"}`, 412, "Bookie 'group' parameters is missing", ""},
		{"POST", ri + "/b1?group=", `{"rack":"/r1"}`, 412, "group: empty", ""},
		{"POST", ri + "/b1?group=a,b", `{"rack":"/r1"}`, 412, "',' is not allowed", ""},
		{"POST", ri + "/b1?group=g1", `{"rack":`, 400, "body", ""},
		{"POST", ri + "/b1?group=g1", `["r1"]`, 400, "body", ""},
		{"POST", ri + "/b1?group=g1", ``, 400, "empty body", ""},
		{"POST", ri + "/b1?group=g1", `{"rack":"/a/b"}`, 412, "Bookie 'rack' parameter is invalid", ""},
		{"POST", ri + "/b1?group=g1", `{"rack":"r 1"}`, 412, "rack", ""},
		{"POST", ri + "/b1?group=g1", `{"hostname":"` + strings.Repeat("h", 300) + `"}`, 412, "hostname", ""},
		{"POST", ri + "/bad%20id?group=g1", `{"rack":"/r1"}`, 412, "bad id", ""},
		{"POST", ri + "/bad%2Fid?group=g1", `{"rack":"/r1"}`, 412, "bad/id", ""},
		{"POST", ri + "/" + strings.Repeat("b", 256) + "?group=g1", `{"rack":"/r1"}`, 412, "bookie", ""},
		{"PUT", ri + "/b1?group=g1", `{"rack":"/r1"}`, 405, "", ""},
	})
	if _, after, _ := e.do("GET", ri, ""); after != before {
		t.Fatalf("refused requests changed racks-info:\nbefore %s\nafter  %s", before, after)
	}
}
