package dashboards

import (
	"encoding/json"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`foo{job="a"}`, []string{"foo"}},
		{`foo {job="a"}`, []string{"foo"}},
		{`rate(foo_total[5m])`, []string{"foo_total"}},
		{`rate(foo_total{isobar_region=~"$region"}[$__rate_interval])`, []string{"foo_total"}},
		{`rate(foo_total{isobar_region=~"${region:regex}"}[${__rate_interval}])`, []string{"foo_total"}},
		// Histograms keep the series suffix they are read through.
		{`histogram_quantile(0.99, sum by (isobar_source, isobar_dest, le) (rate(isobar_replication_lag_seconds_bucket[5m])))`,
			[]string{"isobar_replication_lag_seconds_bucket"}},
		{`sum(rate(x_sum[1m])) / sum(rate(x_count[1m]))`, []string{"x_count", "x_sum"}},
		// Aggregations with the grouping before or after, and keywords.
		{`sum without (instance) (a) and on (job) b or ignoring(x) c unless d`, []string{"a", "b", "c", "d"}},
		{`sum(a) by (le, job)`, []string{"a"}},
		{`count by(isobar_region)(pulsar_broker_connection_count)`, []string{"pulsar_broker_connection_count"}},
		{`topk(5, a) * on (job) group_left (version, sum) b`, []string{"a", "b"}},
		{`a > bool 1`, []string{"a"}},
		{`a offset 5m`, []string{"a"}},
		{`a @ 1609746000`, []string{"a"}},
		{`a @ start()`, []string{"a"}},
		// Label names, values and strings that look like metrics.
		{`a{by="sum", rate="b", job=~"c|d"}`, []string{"a"}},
		{`label_replace(a, "dst", "$1", "src", "(.*)")`, []string{"a"}},
		{`a{x='it\'s b'} + c{y="q\"d"}`, []string{"a", "c"}},
		{"a{x=`raw b`}", []string{"a"}},
		{`{__name__="foo", job="x"}`, []string{"foo"}},
		{`{__name__=~"foo.*"}`, nil},
		// Numbers and durations.
		{`a * 1e3 + 0x1F - 1.5e-3 / .5 + Inf - NaN`, []string{"a"}},
		{`max_over_time(a[1h30m:1m])`, []string{"a"}},
		{`vector(0)`, nil},
		{`a:recorded:rate5m`, []string{"a:recorded:rate5m"}},
		{`a / a`, []string{"a"}},
		{`sum(a) # a comment naming b`, []string{"a"}},
		{"sum(\n  rate(a[5m])\n)", []string{"a"}},
	} {
		got := MetricNames(tc.expr)
		if !slices.Equal(got, tc.want) {
			t.Errorf("MetricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// TestDashboardsParse: every dashboard is valid JSON with the fields
// Grafana needs, the datasource and region variables, and at least one
// query in every panel that is not a row.
func TestDashboardsParse(t *testing.T) {
	names, err := fs.Glob(FS(), "*.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bookie.json", "broker.json", "federation-overview.json", "replication.json"}
	if !slices.Equal(names, want) {
		t.Errorf("dashboards %q, want %q", names, want)
	}
	uids := map[string]string{}
	for _, name := range names {
		data, err := fs.ReadFile(FS(), name)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID           string `json:"uid"`
			Title         string `json:"title"`
			SchemaVersion int    `json:"schemaVersion"`
			Templating    struct {
				List []struct {
					Name, Type string
					Query      any `json:"query"`
				} `json:"list"`
			} `json:"templating"`
			Panels []struct {
				ID         int `json:"id"`
				Datasource *struct {
					Type, UID string
				} `json:"datasource"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
			t.Errorf("%s: uid %q, title %q, schemaVersion %d", name, d.UID, d.Title, d.SchemaVersion)
		}
		if other, ok := uids[d.UID]; ok {
			t.Errorf("%s: uid %q also in %s", name, d.UID, other)
		}
		uids[d.UID] = name
		vars := map[string]string{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v.Type
			if v.Name == "region" {
				q, _ := json.Marshal(v.Query)
				if !strings.Contains(string(q), "label_values(isobar_region)") {
					t.Errorf("%s: region variable query %s", name, q)
				}
			}
		}
		if vars["DS_PROMETHEUS"] != "datasource" || vars["region"] != "query" {
			t.Errorf("%s: variables %v, want DS_PROMETHEUS (datasource) and region (query)", name, vars)
		}
		ids := map[int]bool{}
		for _, p := range d.Panels {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d twice", name, p.ID)
			}
			ids[p.ID] = true
			if p.Datasource != nil && (p.Datasource.Type != "prometheus" || p.Datasource.UID != "${DS_PROMETHEUS}") {
				t.Errorf("%s: panel %d datasource %+v", name, p.ID, *p.Datasource)
			}
		}
	}

	panels, err := Panels()
	if err != nil {
		t.Fatal(err)
	}
	perDashboard := map[string]int{}
	for _, p := range panels {
		if p.Type == "row" {
			continue
		}
		perDashboard[p.Dashboard]++
		if p.Title == "" {
			t.Errorf("%s: a %s panel has no title", p.Dashboard, p.Type)
		}
		if len(p.Exprs) == 0 {
			t.Errorf("%s: panel %q has no query", p.Dashboard, p.Title)
		}
		for _, e := range p.Exprs {
			if len(MetricNames(e)) == 0 {
				t.Errorf("%s: panel %q: query %q reads no metric", p.Dashboard, p.Title, e)
			}
			if strings.Count(e, "(") != strings.Count(e, ")") || strings.Count(e, "{") != strings.Count(e, "}") {
				t.Errorf("%s: panel %q: unbalanced query %q", p.Dashboard, p.Title, e)
			}
		}
	}
	for _, name := range names {
		if perDashboard[name] == 0 {
			t.Errorf("%s: no panels", name)
		}
	}
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) == 0 {
		t.Fatal("no queries")
	}
}
