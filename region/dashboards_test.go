package region_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/observability/dashboards"
	"github.com/isobar-mq/isobar/region"
)

// dashboardMayBeZero are the metrics the dashboards read that must be
// exported but may legitimately be zero everywhere after the traffic of
// these tests, each with the reason.
var dashboardMayBeZero = map[string]string{
	"isobar_replication_errors_total":           "a healthy federation has no failed stream sessions or refused frames",
	"isobar_replication_stalled":                "no replication stalls while both regions are up",
	"isobar_replication_backlog":                "replication keeps up, so the backlog is usually drained when scraped",
	"isobar_replication_backlog_age_seconds":    "0 while the replication backlog is empty",
	"isobar_globalconfig_watch_restarts_total":  "the global store's watch does not end during the test",
	"isobar_globalconfig_resyncs_total":         "no re-list is needed after the first load",
	"isobar_globalconfig_write_conflicts_total": "no concurrent configuration writes race each other",
	"isobar_bookie_queue_depth":                 "the journal and flush queues are empty between requests",
}

// dashboardMetrics returns every metric name the dashboards' queries
// read, with the panels that read it.
func dashboardMetrics(t *testing.T) map[string][]string {
	t.Helper()
	qs, err := dashboards.Queries()
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) == 0 {
		t.Fatal("the dashboards have no queries")
	}
	used := map[string][]string{}
	for _, q := range qs {
		for _, n := range dashboards.MetricNames(q.Expr) {
			if strings.HasPrefix(n, "isobar_drill_") {
				// A drill's own results, exported by the drill process,
				// not a region (cmd/isobar TestDrillMetricsAreTheDashboards).
				continue
			}
			used[n] = append(used[n], q.Dashboard+": "+q.Panel)
		}
	}
	for n := range dashboardMayBeZero {
		if _, ok := used[n]; !ok {
			t.Errorf("dashboardMayBeZero lists %s, which no dashboard reads", n)
		}
	}
	return used
}

// dashboardNeedsReads are the metrics the dashboards read that only exist
// once a bookie has served a read, with the reason.
var dashboardNeedsReads = map[string]string{
	"isobar_bookie_read_duration_seconds_bucket": "a histogram has no series before its first observation, and bookies serve no reads while the brokers' tail caches hold every entry read",
}

// TestDashboardMetricsPresent: with traffic flowing both ways between two
// regions, every metric a dashboard panel reads is exported by the
// regions' /metrics (only dashboardNeedsReads may wait for the first
// bookie read), and once the bookies have served reads too every one is
// non-zero somewhere unless dashboardMayBeZero says why not.
func TestDashboardMetricsPresent(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	// Mostly traffic over time: runs beside the other waiters.
	t.Parallel()
	used := dashboardMetrics(t)
	for n := range dashboardNeedsReads {
		if _, ok := used[n]; !ok {
			t.Errorf("dashboardNeedsReads lists %s, which no dashboard reads", n)
		}
	}
	f := startFederation(t, 2, nil)
	tr := startDashboardTraffic(t, f, "persistent://acme/geo/dashboards")

	check := func(phase string, nonZero bool) {
		t.Helper()
		var problems []string
		try := func() bool {
			problems = problems[:0]
			got := map[string]float64{}
			for _, r := range f.Regions {
				samples, err := scrapeMetrics(r.Endpoints().MetricsURL)
				if err != nil {
					problems = append(problems, fmt.Sprintf("region %s: %v", r.Name(), err))
					continue
				}
				for n, v := range samples {
					if old, ok := got[n]; !ok || v > old {
						got[n] = v
					}
				}
			}
			for _, n := range slices.Sorted(maps.Keys(used)) {
				v, ok := got[n]
				readBy := strings.Join(slices.Compact(used[n]), "; ")
				switch {
				case !ok && (nonZero || dashboardNeedsReads[n] == ""):
					problems = append(problems, fmt.Sprintf("%s: %s: not exported by any region (read by %s)", phase, n, readBy))
				case ok && nonZero && !(v > 0) && dashboardMayBeZero[n] == "":
					problems = append(problems, fmt.Sprintf("%s: %s: every sample is %v (read by %s)", phase, n, v, readBy))
				}
			}
			return len(problems) == 0
		}
		deadline := time.Now().Add(15 * time.Second)
		for !try() && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
		}
		for _, p := range problems {
			t.Error(p)
		}
	}
	check("steady traffic", false)
	tr.replay(t)
	check("after bookie reads", true)
	t.Logf("%d metrics read by the dashboards, checked in %d regions", len(used), len(f.Regions))
}

// TestDashboardQueriesWithPrometheus: a real Prometheus scrapes two
// regions with traffic flowing both ways, and every dashboard query
// returns a non-empty result. Needs a prometheus binary
// (scripts/install-prometheus.sh).
func TestDashboardQueriesWithPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	// Mostly traffic over time: runs beside the other waiters.
	t.Parallel()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/prometheus"); serr != nil {
			t.Skip("no prometheus binary on PATH or at /usr/bin/prometheus: run scripts/install-prometheus.sh")
		}
		bin = "/usr/bin/prometheus"
	}
	qs, err := dashboards.Queries()
	if err != nil {
		t.Fatal(err)
	}
	f := startFederation(t, 2, nil)
	var targets []string
	for _, r := range f.Regions {
		u, err := url.Parse(r.Endpoints().MetricsURL)
		if err != nil || u.Host == "" || u.Path != "/metrics" {
			t.Fatalf("region %s: metrics URL %q", r.Name(), r.Endpoints().MetricsURL)
		}
		targets = append(targets, u.Host)
	}
	promURL := startPrometheus(t, bin, targets)
	waitFor(t, 60*time.Second, "Prometheus to scrape both regions", func() bool {
		return prometheusTargetsUp(promURL) == len(targets)
	})

	tr := startDashboardTraffic(t, f, "persistent://acme/geo/dashboards")
	time.Sleep(5 * time.Second)
	tr.replay(t)
	// rate() over [1m] needs two scrapes (1 s apart) of every series;
	// 20 s of traffic gives the windows plenty.
	time.Sleep(15 * time.Second)

	vars := strings.NewReplacer("${__rate_interval}", "1m", "$__rate_interval", "1m", "${region}", ".*", "$region", ".*")
	var empty []string
	check := func() bool {
		empty = empty[:0]
		for _, q := range qs {
			if drillOnly(q.Expr) {
				continue // a drill process exports these, not a region
			}
			expr := vars.Replace(q.Expr)
			n, err := prometheusQuery(promURL, expr)
			if err != nil {
				t.Fatalf("%s: %s: %s: %v", q.Dashboard, q.Panel, expr, err)
			}
			if n == 0 {
				empty = append(empty, fmt.Sprintf("%s: %s: empty result for %s", q.Dashboard, q.Panel, expr))
			}
		}
		return len(empty) == 0
	}
	deadline := time.Now().Add(20 * time.Second)
	for !check() && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	for _, e := range empty {
		t.Error(e)
	}
	t.Logf("%d dashboard queries evaluated", len(qs))
}

// dashboardTraffic keeps producing in every region of a federation on a
// replicated topic and consuming everything (own and replicated
// messages) in every region, until the test ends.
type dashboardTraffic struct {
	f         *region.Federation
	topic     string
	clients   []pulsar.Client
	mu        sync.Mutex
	received  []int // per region
	replaying sync.Mutex
}

func startDashboardTraffic(t *testing.T, f *region.Federation, topicName string) *dashboardTraffic {
	t.Helper()
	tr := &dashboardTraffic{f: f, topic: topicName, received: make([]int, len(f.Regions))}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i, r := range f.Regions {
		c := pulsarClient(t, r.Endpoints().ServiceURL)
		tr.clients = append(tr.clients, c)
		// A subscription that nothing acknowledges yet, so the data
		// stays for replay and the subscription backlog is non-zero.
		hold, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "replay", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		hold.Close()
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "dash", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		prod, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topicName, BatchingMaxPublishDelay: 2 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer cons.Close()
			for {
				m, err := cons.Receive(ctx)
				if err != nil {
					return
				}
				cons.Ack(m)
				tr.mu.Lock()
				tr.received[i]++
				tr.mu.Unlock()
			}
		}()
		go func() {
			defer wg.Done()
			defer prod.Close()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for seq := 0; ; seq++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				prod.SendAsync(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%s:%d", r.Name(), seq)}, func(pulsar.MessageID, *pulsar.ProducerMessage, error) {})
			}
		}()
	}
	// Both regions consume messages from both regions.
	waitFor(t, time.Minute, "messages from both regions in every region", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return !slices.ContainsFunc(tr.received, func(n int) bool { return n < 100 })
	})
	return tr
}

// replay makes the bookies serve reads: it unloads the topic in every
// region (closing its ledger, so the broker's tail cache no longer holds
// it), waits for the bookies to flush their write cache, and reads the
// topic from the start on the held subscription without acknowledging.
func (tr *dashboardTraffic) replay(t *testing.T) {
	t.Helper()
	tr.replaying.Lock()
	defer tr.replaying.Unlock()
	for _, r := range tr.f.Regions {
		u := r.Endpoints().WebServiceURL + "/admin/v2/" + strings.Replace(tr.topic, "://", "/", 1) + "/unload"
		req, err := http.NewRequest(http.MethodPut, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("region %s: unload %s: %s: %s", r.Name(), tr.topic, resp.Status, body)
		}
	}
	time.Sleep(2 * time.Second) // the bookies flush every second
	for i, c := range tr.clients {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tr.topic, SubscriptionName: "replay", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for n < 100 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := cons.Receive(ctx)
			cancel()
			if err != nil {
				break
			}
			n++
		}
		cons.Close()
		if n == 0 {
			t.Fatalf("region %s: replay read nothing", tr.f.Regions[i].Name())
		}
	}
}

// scrapeMetrics fetches a Prometheus text-format page and returns, per
// series name as it appears there (foo_bucket, foo_sum, ...), the largest
// sample value.
func scrapeMetrics(u string) (map[string]float64, error) {
	resp, err := http.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, v, ok := parseSample(sc.Text())
		if !ok {
			continue
		}
		if old, seen := out[name]; !seen || v > old {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// parseSample parses one line `name{labels} value [timestamp]` of the
// text format; comments, blank and malformed lines give ok false.
func parseSample(line string) (name string, v float64, ok bool) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return "", 0, false
	}
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return "", 0, false
	}
	name, rest := line[:i], line[i:]
	if rest[0] == '{' {
		j, quoted := 1, false
		for ; j < len(rest); j++ {
			switch c := rest[j]; {
			case quoted && c == '\\':
				j++
			case c == '"':
				quoted = !quoted
			case !quoted && c == '}':
				goto closed
			}
		}
		return "", 0, false
	closed:
		rest = rest[j+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	return name, v, err == nil
}

// startPrometheus runs bin scraping targets (host:port, /metrics) every
// second and returns its base URL; it is stopped when the test ends.
func startPrometheus(t *testing.T, bin string, targets []string) string {
	t.Helper()
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, h := range targets {
		quoted[i] = strconv.Quote(h)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: isobar
    metrics_path: /metrics
    static_configs:
      - targets: [%s]
`, strings.Join(quoted, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	logPath := filepath.Join(dir, "prometheus.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil && len(b) > 0 {
				t.Logf("prometheus log:\n%s", b[max(0, len(b)-4000):])
			}
		}
	})
	base := "http://" + addr
	waitFor(t, 30*time.Second, "Prometheus to be ready", func() bool {
		select {
		case err := <-done:
			done <- err
			b, _ := os.ReadFile(logPath)
			t.Fatalf("prometheus exited: %v\n%s", err, b)
		default:
		}
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// prometheusTargetsUp counts the active targets whose last scrape
// succeeded.
func prometheusTargetsUp(base string) int {
	resp, err := http.Get(base + "/api/v1/targets?state=active")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			ActiveTargets []struct {
				Health string `json:"health"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&r) != nil {
		return 0
	}
	n := 0
	for _, tg := range r.Data.ActiveTargets {
		if tg.Health == "up" {
			n++
		}
	}
	return n
}

// prometheusQuery evaluates expr now and returns how many series or
// values the result holds.
func prometheusQuery(base, expr string) (int, error) {
	resp, err := http.PostForm(base+"/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, fmt.Errorf("%s: %w", resp.Status, err)
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	switch r.Data.ResultType {
	case "vector", "matrix":
		var series []json.RawMessage
		if err := json.Unmarshal(r.Data.Result, &series); err != nil {
			return 0, err
		}
		return len(series), nil
	case "scalar", "string":
		return 1, nil
	}
	return 0, errors.New("unknown result type " + r.Data.ResultType)
}

// drillOnly reports whether a query reads only the results a drill
// process exports (cmd/isobar TestDrillMetricsAreTheDashboards checks
// those).
func drillOnly(expr string) bool {
	names := dashboards.MetricNames(expr)
	for _, n := range names {
		if !strings.HasPrefix(n, "isobar_drill_") {
			return false
		}
	}
	return len(names) > 0
}
