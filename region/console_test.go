package region_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/chromedp/chromedp"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/region"
)

// chromium finds Debian's chromium (scripts/install-deps.sh installs it);
// without one the console's browser tests skip, except under CI, where
// they must run.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH: scripts/install-deps.sh installs Debian's chromium for the console's browser tests")
	}
	t.Skip("no chromium on PATH (apt-get install chromium): the console's browser tests need a real browser")
	return ""
}

// artifactDir is where a test keeps its screenshots:
// $ISOBAR_TEST_ARTIFACTS/<test> when set, else a temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if base := os.Getenv("ISOBAR_TEST_ARTIFACTS"); base != "" {
		dir = filepath.Join(base, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// browser starts a headless chromium for the test and returns a tab's
// context (started, so that each step can get a timeout of its own).
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // tests run as root in CI
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 860),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatal(err)
	}
	return ctx
}

// do runs the steps in the tab, each call bounded by a minute.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// text is the text of the first element that sel (CSS) matches.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("%s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// screenshot saves the whole page as dir/name.png.
func screenshot(dir, name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		png, err := chromedp.FullScreenshot(100)(ctx, tg)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	})
}

// openPage clicks the page's entry in the console's menu and waits until
// the page has rendered its data.
func openPage(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Click(chromedp.CSS("#nav-"+name)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="`+name+`"]`)),
	)
}

// waitText polls until the element's text contains want.
func waitText(sel, want string) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.includes(%q); })()`, sel, want)
	return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(45*time.Second))
}

// TestConsole loads each page of the console, served by r0's broker,
// against a two-region federation in a real browser: the regions and the
// link between them with its backlog and WAN state, the namespaces with
// mode, primary and epoch, the topics with rates, backlog and
// replication, a planned failover done with the page's button and its
// confirmation (the new primary shows, and the global store has it), and
// a drill report opened from a file. Screenshots go to artifactDir.
func TestConsole(t *testing.T) {
	if testing.Short() {
		t.Skip("a federation and a browser: about a minute")
	}
	ctx := browser(t) // chromium first: skip before starting a federation
	dir := artifactDir(t)
	f := startFederation(t, 2, nil)
	web := f.Regions[0].Brokers()[0].WebServiceURL

	// A replicated topic with a backlog: 20 messages for subscription s.
	const topicName = "persistent://acme/geo/orders"
	client := pulsarClient(t, f.Regions[0].Brokers()[0].ServiceURL)
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	cons.Close()
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topicName})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := prod.Send(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	prod.Close()

	// The console's files are served without credentials, with a
	// policy that keeps the page to its own origin.
	resp, err := http.Get(web + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Fatalf("GET /console/: %s, CSP %q", resp.Status, resp.Header.Get("Content-Security-Policy"))
	}

	// Regions, and the link from r0 to r1.
	do(t, ctx,
		chromedp.Navigate(web+"/console/#regions"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="regions"]`)),
		screenshot(dir, "regions"),
	)
	regions, links := text(t, ctx, ".cards"), text(t, ctx, "#links")
	for _, want := range []string{"r0 (this console)", "r1", f.Regions[1].Brokers()[0].WebServiceURL} {
		if !strings.Contains(regions, want) {
			t.Errorf("regions page: no %q in %q", want, regions)
		}
	}
	if !strings.Contains(links, "r0 → r1") || !strings.Contains(links, "up") {
		t.Errorf("regions page: no link r0 → r1 that is up: %q", links)
	}

	// Topics: the backlog of s, and the replication to r1.
	row := `tr[data-topic="` + topicName + `"]`
	do(t, ctx, openPage("topics"), screenshot(dir, "topics"))
	if backlog := text(t, ctx, row+" .backlog"); backlog != "20" {
		t.Errorf("topics page: backlog of %s is %q, want 20", topicName, backlog)
	}
	if repl := text(t, ctx, row+` .repl[data-remote="r1"]`); !strings.Contains(repl, "backlog") || !strings.Contains(repl, "lag") {
		t.Errorf("topics page: replication to r1 shows %q", repl)
	}

	// A planned failover to r1, confirmed in the page's dialog.
	nsRow := `tr[data-ns="acme/geo"]`
	do(t, ctx, openPage("namespaces"))
	if mode := text(t, ctx, nsRow+" .mode"); mode != policy.ActiveActive {
		t.Errorf("namespaces page: acme/geo is %q before the failover, want %s", mode, policy.ActiveActive)
	}
	do(t, ctx,
		chromedp.SetValue(chromedp.CSS(nsRow+" select.target"), "r1"),
		chromedp.Click(chromedp.CSS(nsRow+" button.set-primary")),
		chromedp.WaitVisible(chromedp.CSS("#confirm")),
		screenshot(dir, "failover-confirm"),
	)
	if c := text(t, ctx, "#confirm-text"); !strings.Contains(c, "Make r1 the primary of acme/geo?") {
		t.Errorf("confirmation says %q", c)
	}
	do(t, ctx,
		chromedp.Click(chromedp.CSS("#confirm-ok")),
		waitText(nsRow+" .primary", "r1"),
		waitText("#status", "primary is now r1"),
		screenshot(dir, "namespaces"),
	)
	after, epoch := text(t, ctx, nsRow+" .mode"), text(t, ctx, nsRow+" .epoch")
	pol, err := f.Regions[1].Policies().Namespace(context.Background(), "acme/geo")
	if err != nil {
		t.Fatal(err)
	}
	fo := policy.FailoverOf(pol)
	if after != policy.ActiveStandby || fo.Mode != policy.ActiveStandby || fo.Primary != "r1" || epoch != fmt.Sprint(fo.Epoch) {
		t.Errorf("after the failover the page shows %s, epoch %s; the global store has %+v", after, epoch, fo)
	}

	// And back to r0: active-standby to active-standby, one epoch more.
	do(t, ctx,
		chromedp.SetValue(chromedp.CSS(nsRow+" select.target"), "r0"),
		chromedp.Click(chromedp.CSS(nsRow+" button.set-primary")),
		chromedp.WaitVisible(chromedp.CSS("#confirm")),
	)
	if c := text(t, ctx, "#confirm-text"); !strings.Contains(c, "Writes move from r1 to r0") {
		t.Errorf("confirmation of the failback says %q", c)
	}
	do(t, ctx,
		chromedp.Click(chromedp.CSS("#confirm-ok")),
		waitText("#status", "primary is now r0"),
	)
	if p, e := text(t, ctx, nsRow+" .primary"), text(t, ctx, nsRow+" .epoch"); p != "r0" || e != fmt.Sprint(fo.Epoch+1) {
		t.Errorf("after the failback the page shows primary %s, epoch %s; want r0, %d", p, e, fo.Epoch+1)
	}

	// A drill report, opened from a file.
	report := filepath.Join(t.TempDir(), "kill.json")
	writeJSON(t, report, map[string]any{
		"drill": "failover", "run_id": "console-test", "namespace": "acme/geo", "topic": topicName,
		"from": "r0", "to": "r1", "fault": map[string]any{"kind": "kill"}, "promotion": "drill",
		"rate": 200, "producers": 2, "consumers": 2, "started": "2026-12-07T10:00:00Z",
		"timeline": map[string]any{
			"fault":            map[string]any{"offset_ms": 0},
			"detected":         map[string]any{"offset_ms": 1500, "how": "publish timeouts"},
			"promoted":         map[string]any{"offset_ms": 1650},
			"writable":         map[string]any{"offset_ms": 2100},
			"first_publish_ok": map[string]any{"offset_ms": 2900},
		},
		"rto_publish_ms": map[string]any{"p99": 2900, "max": 3100, "clients": 2},
		"rto_consume_ms": map[string]any{"p99": 3300, "max": 3400, "clients": 2},
		"rpo_messages":   3, "rpo_ms": 15, "sent": 4000, "acknowledged": 3990, "delivered": 3990,
		"lost": 0, "duplicated_copy": 0, "duplicated_redelivery": 0, "order_violations": 0,
		"passed": true, "failures": []string{},
	})
	do(t, ctx,
		openPage("drills"),
		chromedp.SetUploadFiles(chromedp.CSS("#drill-file"), []string{report}),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="drill-report"]`)),
		screenshot(dir, "drill"),
	)
	verdict, rto := text(t, ctx, ".verdict"), text(t, ctx, ".rto")
	if !strings.HasPrefix(verdict, "PASSED") || !strings.Contains(verdict, "r0 → r1") || rto != "p99 2,900 ms, max 3,100 ms" {
		t.Errorf("drill page: %q, RTO %q", verdict, rto)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleTokens: with authentication and authorization on, the
// console's files load without a token but its pages show nothing until
// one is given, and then only what that token may see: a tenant's admin
// (who may not list tenants, so names the tenant) sees the regions and
// the tenant's namespaces, not another tenant's.
func TestConsoleTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("a region and a browser")
	}
	ctx := browser(t)
	dir := artifactDir(t)
	keyDir := t.TempDir()
	secret := auth.NewSecretKey()
	keyFile := filepath.Join(keyDir, "secret.key")
	if err := os.WriteFile(keyFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := region.Config{Name: "sec", DataDir: filepath.Join(keyDir, "data"), Bookies: 2}
	cfg.Broker.Auth = auth.Config{
		AuthenticationEnabled: true, AuthorizationEnabled: true,
		Token:          auth.TokenConfig{SecretKey: "file://" + keyFile},
		SuperUserRoles: []string{"root"},
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := region.Start(sctx, cfg, region.Deps{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	web := r.Endpoints().WebServiceURL
	token := func(role string) string {
		tok, err := auth.Sign(auth.HS256, secret, role, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	root, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: web, Token: token("root")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "other"} {
		if err := root.Tenants().Create(utils.TenantData{Name: tenant, AdminRoles: []string{tenant + "-admin"}, AllowedClusters: []string{"sec"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"acme/app", "other/secret"} {
		if err := root.Namespaces().CreateNamespace(ns); err != nil {
			t.Fatal(err)
		}
	}

	// No token: the page loads, the API refuses, and the page says so.
	do(t, ctx,
		chromedp.Navigate(web+"/console/#namespaces"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="namespaces"]`)),
		screenshot(dir, "no-token"),
	)
	if got := text(t, ctx, "#page"); !strings.Contains(got, "Not signed in") {
		t.Errorf("namespaces page without a token: %q", got)
	}

	// acme's admin, naming the tenant.
	do(t, ctx,
		chromedp.SetValue(chromedp.CSS("#token"), token("acme-admin")),
		chromedp.SetValue(chromedp.CSS("#tenants"), "acme"),
		chromedp.Click(chromedp.CSS("#token-save")),
		waitText("#namespaces", "acme/app"),
		screenshot(dir, "tenant-admin"),
	)
	if got := text(t, ctx, "#page"); strings.Contains(got, "other") {
		t.Errorf("acme's admin sees another tenant: %q", got)
	}
	// Naming the other tenant gets a refusal, not its namespaces.
	do(t, ctx,
		chromedp.SetValue(chromedp.CSS("#tenants"), "acme,other"),
		chromedp.Click(chromedp.CSS("#token-save")),
		waitText(`tr[data-ns="other/*"]`, "may not see"),
	)
	if got := text(t, ctx, "#page"); strings.Contains(got, "other/secret") {
		t.Errorf("acme's admin sees other's namespace: %q", got)
	}
	do(t, ctx, openPage("regions"), screenshot(dir, "tenant-admin-regions"))
	if got := text(t, ctx, ".cards"); !strings.Contains(got, "sec (this console)") {
		t.Errorf("regions page for acme's admin: %q", got)
	}
}
