// Package compose tests deploy/compose: the two-region federation, one
// container per process, built from the isobar image.
//
// TestComposeFederation runs docker-compose.yml; TestComposeSecure runs
// it with docker-compose.secure.yml (TLS and tokens). They need a Docker
// engine and Compose (docker compose or docker-compose; ISOBAR_COMPOSE
// chooses), and Debian's prometheus package for the Prometheus image
// (scripts/build-prometheus-image.sh installs it), and take 6 to 13 and
// about 2 minutes; they are skipped with -short, with
// ISOBAR_SKIP_COMPOSE=1, without Docker, and when the go test deadline
// leaves too little time (go test's default is 10 minutes for the whole
// package: run them with go test -timeout 30m ./deploy/compose, as
// .ci/run does).
package compose

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
)

const (
	// A run's compose project and image tag end in the test process's
	// pid: two runs (from two work trees) do not take each other's
	// containers down or test each other's binary, and a later run knows
	// the leftovers of a run that died before its cleanup. The image is
	// built with scripts/build-image.sh's IMAGE and given to the compose
	// file as ISOBAR_IMAGE, so the test leaves isobar:dev alone.
	projectPrefix   = "isobartest-"
	imagePrefix     = "isobar:compose-test-"
	promImagePrefix = "isobar-prometheus:compose-test-"
	namespace       = "geo/replicated"
	// budget is what the test needs of the go test deadline: 6.5 minutes
	// on a 2-core machine, 13 on a busy one, plus a cold build of the
	// static binary (4 minutes).
	budget = 20 * time.Minute
	// messages per direction per check.
	messages = 20
)

var httpClient = &http.Client{Timeout: 10 * time.Second}

var regions = []struct {
	name                   string
	proxyPulsar, proxyHTTP int   // the proxy's ports, published on 127.0.0.1: the clients' entry point
	pulsar, http           []int // broker j's Pulsar and HTTP ports (published on 127.0.0.1 for drills)
}{
	{"us-east", 6650, 8080, []int{6652, 6653}, []int{8082, 8083}},
	{"eu-west", 6750, 8180, []int{6752, 6753}, []int{8182, 8183}},
}

// prometheusPort is Prometheus's port, published on 127.0.0.1.
const prometheusPort = 9090

// services are the compose file's long-running processes, one container
// each, all with a health check.
func services() []string {
	var s []string
	for i := 1; i <= 3; i++ {
		s = append(s, fmt.Sprintf("global-%d", i))
	}
	for _, r := range regions {
		s = append(s, "proxy-"+r.name, "nats-"+r.name, "replicator-"+r.name)
		for i := 1; i <= 3; i++ {
			s = append(s, fmt.Sprintf("etcd-%s-%d", r.name, i), fmt.Sprintf("bookie-%s-%d", r.name, i))
		}
		for i := 1; i <= 2; i++ {
			s = append(s, fmt.Sprintf("broker-%s-%d", r.name, i))
		}
	}
	slices.Sort(s)
	return s
}

// Services without a health check: init runs once and exits, Prometheus
// (an image without the isobar binary) is checked over its API.
const (
	initService       = "init"
	prometheusService = "prometheus"
	// secretsService (docker-compose.secure.yml) makes the secrets and
	// exits.
	secretsService = "secrets"
	secureFile     = "docker-compose.secure.yml"
)

// restarted are the services the test restarts: one of each role of each
// region (the first, where a role has several containers of the same
// configuration: etcd members, bookies, brokers), and one member of the
// global store. The kill drill restarts every container of us-east;
// restarting each one alone as well took minutes (15 s each, most of it
// the health check's 10 s interval) and told nothing more.
func restarted() []string {
	var s []string
	for _, svc := range services() {
		switch {
		case strings.HasPrefix(svc, "global-"), strings.HasPrefix(svc, "etcd-"),
			strings.HasPrefix(svc, "bookie-"), strings.HasPrefix(svc, "broker-"):
			if !strings.HasSuffix(svc, "-1") {
				continue
			}
		}
		s = append(s, svc)
	}
	return s
}

// restartGroups are the restarted services in the groups the test
// restarts at once: the same role in every region (bookie-us-east-1 with
// bookie-eu-west-1), since the regions are independent; the global
// store's member alone. A restart then waits for one health-check
// interval per role, not per container.
func restartGroups() [][]string {
	var groups [][]string
	index := map[string]int{}
	for _, svc := range restarted() {
		role := svc
		for _, r := range regions {
			role = strings.ReplaceAll(role, r.name, "*")
		}
		i, ok := index[role]
		if !ok {
			i = len(groups)
			index[role] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], svc)
	}
	return groups
}

// env is the machinery of one run.
type env struct {
	t          *testing.T
	start      time.Time
	root       string   // repository root
	compose    []string // "docker compose" or "docker-compose", with -f
	project    string   // this run's compose project
	image      string   // this run's image tag
	promImage  string   // this run's Prometheus image tag
	containers map[string]string
	round      int
	// oneShot are the services that run once and exit (init, secrets),
	// without a health check.
	oneShot []string
	// token is the superuser token's file on the host, and ca the CA's,
	// when the federation is secure (docker-compose.secure.yml).
	token, ca string
}

func TestComposeFederation(t *testing.T) {
	e, isobar := setUp(t, "docker-compose.yml")

	// Clients on the host, through the proxies, with no hosts entries.
	e.checkMessages("the first check")
	e.readmeClient(isobar)

	// Prometheus scrapes every process and loaded the rules.
	e.checkPrometheus()

	// A region's etcd member down for 30 s costs no write.
	e.stopEtcdMember("etcd-" + regions[0].name + "-1")

	// The global store down: admin writes answer 503 promptly, reads are
	// served, and the first write after it returns is quick.
	e.stopGlobalStore()

	// Every role in turn, in both regions at once: restart, healthy
	// again, messages still go both ways exactly once.
	for _, group := range restartGroups() {
		st := time.Now()
		name := strings.Join(group, " ")
		if out, err := e.composeCmd(2*time.Minute, append([]string{"restart"}, group...)...); err != nil {
			e.diagnose()
			t.Fatalf("restart %s: %v\n%s", name, err, out)
		}
		restarted := time.Since(st)
		e.waitHealthy(3*time.Minute, name)
		healthy := time.Since(st)
		e.checkMessages("after restarting " + name)
		t.Logf("%-40s restart %5.1fs, healthy %5.1fs, checked %5.1fs", name, restarted.Seconds(), healthy.Seconds(), time.Since(st).Seconds())
	}

	e.noRestarts()

	// Failover drills of us-east, cut off from the other region and the
	// global store by its network, then killed (drill_test.go).
	e.drills(isobar, "partition", "kill")
	t.Logf("wall time %v", time.Since(e.start).Round(time.Second))
}

// setUp starts the federation of the compose files given (in
// deploy/compose, in order) as a project of this run, and waits until
// every service is healthy and the init service has made
// config/init.yaml's tenants and namespaces. It skips the test where it
// cannot run (see the package comment), and returns the environment and
// an isobar binary built on the host.
func setUp(t *testing.T, files ...string) (*env, string) {
	if testing.Short() {
		t.Skip("slow (minutes): skipped with -short")
	}
	if os.Getenv("ISOBAR_SKIP_COMPOSE") != "" {
		t.Skip("ISOBAR_SKIP_COMPOSE is set")
	}
	if d, ok := t.Deadline(); ok && time.Until(d) < budget {
		t.Skipf("needs up to %v and the go test deadline leaves %v: run go test -timeout 30m ./deploy/compose", budget, time.Until(d).Round(time.Second))
	}
	e := &env{t: t, start: time.Now(), oneShot: []string{initService}}
	e.requireDocker()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	for _, f := range files {
		e.compose = append(e.compose, "-f", filepath.Join(root, "deploy/compose", f))
		if f == secureFile {
			e.oneShot = append(e.oneShot, secretsService)
		}
	}
	pid := strconv.Itoa(os.Getpid())
	e.project, e.image, e.promImage = projectPrefix+pid, imagePrefix+pid, promImagePrefix+pid
	e.removeLeftovers()
	e.requirePortsFree()

	// The images and the host's clients, once per test process.
	built.Do(func() { built.isobar, built.err = e.build() })
	if built.err != nil {
		t.Fatal(built.err)
	}

	t.Cleanup(func() { e.down(e.project) })
	upStart := time.Now()
	if out, err := e.composeCmd(5*time.Minute, "up", "-d"); err != nil {
		e.diagnose()
		t.Fatalf("up: %v\n%s", err, out)
	}
	e.findContainers()
	e.waitHealthy(3*time.Minute, "")
	t.Logf("up and healthy in %v (%s)", time.Since(upStart).Round(time.Second), strings.Join(e.compose, " "))
	if slices.Contains(e.oneShot, secretsService) {
		e.clientSecrets()
	}

	// The namespace both regions replicate, made by the init service
	// from config/init.yaml and seen over eu-west's proxy.
	e.waitInit()
	return e, built.isobar
}

// built are the images and binaries of this test process, shared by its
// tests: the images are removed when the process's last test ends
// (TestMain).
var built struct {
	sync.Once
	isobar string
	err    error
	dir    string
	images []string
}

// build makes the isobar image, the Prometheus image, pulsarcheck and
// isobar for the host.
func (e *env) build() (string, error) {
	t := e.t
	start := time.Now()
	out, err := e.runEnv(15*time.Minute, []string{"IMAGE=" + e.image}, "bash", filepath.Join(e.root, "scripts/build-image.sh"))
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		t.Skipf("no Docker to build the image with: %s", out)
	} else if err != nil {
		return "", fmt.Errorf("scripts/build-image.sh: %v\n%s", err, out)
	}
	built.images = append(built.images, e.image)
	t.Logf("%s built (%v)", strings.TrimSpace(lastLine(out)), time.Since(start).Round(time.Second))
	out, err = e.runEnv(5*time.Minute, []string{"IMAGE=" + e.promImage}, "bash", filepath.Join(e.root, "scripts/build-prometheus-image.sh"))
	if err != nil {
		return "", fmt.Errorf("scripts/build-prometheus-image.sh: %v\n%s", err, out)
	}
	built.images = append(built.images, e.promImage)
	bin, err := os.MkdirTemp("", "isobar-compose-test-")
	if err != nil {
		return "", err
	}
	built.dir = bin
	if out, err := e.runEnv(10*time.Minute, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", filepath.Join(bin, "pulsarcheck"), "./deploy/compose/pulsarcheck"); err != nil {
		return "", fmt.Errorf("building pulsarcheck: %v\n%s", err, out)
	}
	// isobar for fault-control and the README's commands, built as the
	// image's (so from the build cache build-image.sh filled).
	isobar := filepath.Join(bin, "isobar")
	if out, err := e.runEnv(10*time.Minute, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", isobar, "./cmd/isobar"); err != nil {
		return "", fmt.Errorf("building isobar: %v\n%s", err, out)
	}
	return isobar, nil
}

// TestMain removes what the tests built once they are all done.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, img := range built.images {
		exec.Command("docker", "image", "rm", img).Run()
	}
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// requireDocker skips the test without a Docker client, engine or Compose.
func (e *env) requireDocker() {
	t := e.t
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker is not on PATH")
	}
	if out, err := e.run(30*time.Second, "docker", "info", "--format", "{{.ServerVersion}}"); err != nil {
		t.Skipf("the Docker daemon does not answer: %v: %s", err, strings.TrimSpace(out))
	}
	switch c := os.Getenv("ISOBAR_COMPOSE"); c {
	case "docker compose", "docker-compose":
		if out, err := e.run(30*time.Second, "sh", "-c", c+" version"); err != nil {
			t.Fatalf("ISOBAR_COMPOSE=%s: %s version: %v\n%s", c, c, err, out)
		}
		e.compose = strings.Fields(c)
		return
	case "":
	default:
		t.Fatalf("ISOBAR_COMPOSE=%q: want \"docker compose\" or docker-compose", c)
	}
	if _, err := e.run(30*time.Second, "docker", "compose", "version"); err == nil {
		e.compose = []string{"docker", "compose"}
		return
	}
	if _, err := exec.LookPath("docker-compose"); err != nil {
		t.Skip("neither docker compose nor docker-compose is installed")
	}
	if out, err := e.run(30*time.Second, "docker-compose", "version"); err != nil {
		t.Skipf("docker-compose does not run: %v: %s", err, out)
	}
	e.compose = []string{"docker-compose"}
}

// requirePortsFree skips the test when something (isobar dev, a compose
// federation started by hand) holds a port the compose file publishes.
func (e *env) requirePortsFree() {
	ports := []int{prometheusPort}
	if slices.Contains(e.oneShot, secretsService) {
		ports = append(ports, secureProxyPulsar...)
		ports = append(ports, secureProxyHTTP...)
	}
	for _, r := range regions {
		ports = append(ports, r.proxyPulsar, r.proxyHTTP)
		ports = append(ports, r.pulsar...)
		ports = append(ports, r.http...)
	}
	for _, p := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			e.t.Skipf("127.0.0.1:%d is in use (isobar dev, or the compose federation started by hand?): %v", p, err)
		}
		ln.Close()
	}
}

func (e *env) run(timeout time.Duration, name string, args ...string) (string, error) {
	return e.runEnv(timeout, nil, name, args...)
}

// runEnv runs a command in the repository root, bounded by timeout, and
// returns its combined output.
func (e *env) runEnv(timeout time.Duration, extraEnv []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = e.root
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s %s: no result in %v: %w", name, strings.Join(args, " "), timeout, err)
	}
	return out.String(), err
}

func (e *env) composeCmd(timeout time.Duration, args ...string) (string, error) {
	return e.composeProject(timeout, e.project, args...)
}

func (e *env) composeProject(timeout time.Duration, project string, args ...string) (string, error) {
	full := append(slices.Clone(e.compose[1:]), append([]string{"-p", project}, args...)...)
	return e.runEnv(timeout, []string{"ISOBAR_IMAGE=" + e.image, "ISOBAR_PROMETHEUS_IMAGE=" + e.promImage}, e.compose[0], full...)
}

// down removes a project's containers, networks and volumes, and its
// drill container.
func (e *env) down(project string) {
	e.run(time.Minute, "docker", "rm", "-f", project+"-drill")
	if out, err := e.composeProject(5*time.Minute, project, "down", "-v", "--remove-orphans", "-t", "10"); err != nil {
		e.t.Logf("down %s: %v\n%s", project, err, out)
		// down stops at a network it cannot remove (Docker 20.10 once
		// kept counting an endpoint of a container already gone), before
		// the volumes: remove them still.
		vols, _ := e.run(time.Minute, "docker", "volume", "ls", "-q", "--filter", "label=com.docker.compose.project="+project)
		if v := strings.Fields(vols); len(v) > 0 {
			if out, err := e.run(time.Minute, "docker", append([]string{"volume", "rm"}, v...)...); err != nil {
				e.t.Logf("removing %s's volumes: %v\n%s", project, err, out)
			}
		}
	}
}

// removeLeftovers takes down the projects, and removes the images, of
// earlier runs whose test process is gone (killed before its cleanup:
// their containers would hold the ports).
func (e *env) removeLeftovers() {
	out, err := e.run(time.Minute, "docker", "ps", "-a", "--filter", "label=com.docker.compose.project",
		"--format", `{{.Label "com.docker.compose.project"}}`)
	if err != nil {
		e.t.Fatalf("docker ps: %v\n%s", err, out)
	}
	done := map[string]bool{}
	for _, p := range strings.Fields(out) {
		pid, err := strconv.Atoi(strings.TrimPrefix(p, projectPrefix))
		if done[p] || !strings.HasPrefix(p, projectPrefix) || err != nil || alive(pid) {
			continue
		}
		done[p] = true
		e.t.Logf("removing %s, left by a run that is gone", p)
		e.down(p)
		e.run(time.Minute, "docker", "image", "rm", imagePrefix+strconv.Itoa(pid), promImagePrefix+strconv.Itoa(pid))
	}
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// listContainers maps the project's services to their containers' ids.
func (e *env) listContainers() (map[string]string, error) {
	out, err := e.run(time.Minute, "docker", "ps", "-a", "--filter", "label=com.docker.compose.project="+e.project,
		"--format", `{{.ID}} {{.Label "com.docker.compose.service"}}`)
	if err != nil {
		return nil, fmt.Errorf("docker ps: %v\n%s", err, out)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if id, svc, ok := strings.Cut(strings.TrimSpace(sc.Text()), " "); ok {
			m[svc] = id
		}
	}
	return m, nil
}

// findContainers maps every service to its container.
func (e *env) findContainers() {
	t := e.t
	m, err := e.listContainers()
	if err != nil {
		t.Fatal(err)
	}
	e.containers = m
	var got []string
	for svc := range e.containers {
		got = append(got, svc)
	}
	slices.Sort(got)
	want := append(services(), prometheusService)
	want = append(want, e.oneShot...)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("containers of services %v, want %v", got, want)
	}
}

// health reads every container's health status.
func (e *env) health() (map[string]string, error) {
	// A container without a health check (prometheus) has no
	// .State.Health, which a template may not name: decode the state.
	ids := []string{"inspect", "-f", "{{.Id}} {{json .State}}"}
	byID := map[string]string{}
	for svc, id := range e.containers {
		if slices.Contains(e.oneShot, svc) {
			continue // exits when done (waitInit)
		}
		ids = append(ids, id)
		byID[id] = svc
	}
	out, err := e.run(time.Minute, "docker", ids...)
	if err != nil {
		return nil, fmt.Errorf("docker inspect: %v: %s", err, out)
	}
	st := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		id, state, _ := strings.Cut(line, " ")
		var js struct {
			Status string
			Health *struct{ Status string }
		}
		if err := json.Unmarshal([]byte(state), &js); err != nil {
			return nil, fmt.Errorf("docker inspect: %v: %s", err, line)
		}
		status := js.Status
		if js.Health != nil {
			status = js.Health.Status
		}
		for short, svc := range byID {
			if strings.HasPrefix(id, short) {
				st[svc] = status
			}
		}
	}
	return st, nil
}

// waitHealthy waits until every container is healthy. The health of a
// container that just started is "starting" until its first probe passes,
// so after a restart this waits for svc's own fresh probe.
func (e *env) waitHealthy(timeout time.Duration, svc string) {
	t := e.t
	deadline := time.Now().Add(timeout)
	var last map[string]string
	for time.Now().Before(deadline) {
		st, err := e.health()
		if err != nil {
			t.Fatal(err)
		}
		last = st
		all := true
		for svc, s := range st {
			all = all && (s == "healthy" || svc == prometheusService && s == "running")
		}
		if all {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	e.diagnose()
	if svc != "" {
		t.Fatalf("after restarting %s, not every service is healthy within %v: %v", svc, timeout, last)
	}
	t.Fatalf("not every service is healthy within %v: %v", timeout, last)
}

// waitInit waits for the init service to make config/init.yaml's tenants
// and namespaces and exit 0, and then for namespace (one of them, replicated
// to every region) to be seen over every region's proxy.
func (e *env) waitInit() {
	id := e.containers[initService]
	e.poll(3*time.Minute, "the init service", func() (bool, string) {
		out, err := e.run(time.Minute, "docker", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", id)
		if err != nil {
			return false, err.Error() + " " + out
		}
		switch st := strings.TrimSpace(out); {
		case st == "exited 0":
			return true, ""
		case strings.HasPrefix(st, "exited"):
			e.logs(initService, id)
			e.t.Fatalf("the init service failed: %s", st)
		}
		return false, out
	})
	var clusters []string
	for _, r := range regions {
		clusters = append(clusters, r.name)
	}
	for _, r := range regions {
		url := fmt.Sprintf("http://127.0.0.1:%d/admin/v2/namespaces/%s", r.proxyHTTP, namespace)
		e.poll(time.Minute, "GET "+url, func() (bool, string) {
			resp, err := e.get(url)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			var p struct {
				Clusters []string `json:"replication_clusters"`
			}
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &p) != nil {
				return false, resp.Status + " " + string(raw)
			}
			for _, c := range clusters {
				if !slices.Contains(p.Clusters, c) {
					return false, string(raw)
				}
			}
			return true, ""
		})
	}
}

// checkPrometheus waits until Prometheus's targets API shows every
// process scraped and up, and checks that its rule groups loaded with
// every alert.
func (e *env) checkPrometheus() {
	t := e.t
	base := fmt.Sprintf("http://127.0.0.1:%d/api/v1/", prometheusPort)
	get := func(path string, v any) error {
		resp, err := httpClient.Get(base + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, raw)
		}
		return json.Unmarshal(raw, v)
	}
	// Every service but init and Prometheus is one target.
	want := len(services())
	e.poll(2*time.Minute, "Prometheus's targets all up", func() (bool, string) {
		var r struct {
			Data struct {
				ActiveTargets []struct {
					Labels    map[string]string `json:"labels"`
					Health    string            `json:"health"`
					LastError string            `json:"lastError"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		if err := get("targets?state=active", &r); err != nil {
			return false, err.Error()
		}
		var down []string
		for _, tg := range r.Data.ActiveTargets {
			if tg.Health != "up" {
				down = append(down, fmt.Sprintf("%s %s: %s %s", tg.Labels["job"], tg.Labels["instance"], tg.Health, tg.LastError))
			}
		}
		if n := len(r.Data.ActiveTargets); n != want || len(down) > 0 {
			return false, fmt.Sprintf("%d targets (want %d), not up: %v", n, want, down)
		}
		return true, ""
	})
	var r struct {
		Data struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Name      string `json:"name"`
					Type      string `json:"type"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := get("rules", &r); err != nil {
		t.Fatalf("Prometheus's rules: %v", err)
	}
	var alerts, records []string
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			if rule.Health == "err" {
				t.Errorf("rule %s of group %s: %s", rule.Name, g.Name, rule.LastError)
			}
			if rule.Type == "alerting" {
				alerts = append(alerts, rule.Name)
			} else {
				records = append(records, rule.Name)
			}
		}
	}
	for _, a := range []string{"IsobarProcessDown", "IsobarReplicationLagHigh", "IsobarReplicationStalled",
		"IsobarLateWritesFromFormerPrimary", "IsobarUnderReplicatedLedgers"} {
		if !slices.Contains(alerts, a) {
			t.Errorf("alert %s not loaded (alerts: %v)", a, alerts)
		}
	}
	t.Logf("Prometheus: %d targets up, %d recording rules and %d alerts loaded", want, len(records), len(alerts))
}

// stopEtcdMember stops one member of a region's metadata store for 30 s
// while a client on the host produces in that region through its proxy,
// and fails the test if any send fails. Nothing is asserted about time:
// a send may wait (up to its 30 s send timeout), none may fail.
func (e *env) stopEtcdMember(svc string) {
	t := e.t
	r := regions[0]
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := e.run(3*time.Minute, e.pulsarcheck(), "-produce", "45s", "-rate", "20", "-timeout", "2m",
			"-namespace", namespace, "-region", fmt.Sprintf("%s=pulsar://127.0.0.1:%d", r.name, r.proxyPulsar))
		done <- result{out, err}
	}()
	time.Sleep(5 * time.Second)
	id := e.containers[svc]
	st := time.Now()
	if out, err := e.run(time.Minute, "docker", "stop", "-t", "25", id); err != nil {
		t.Fatalf("stop %s: %v\n%s", svc, err, out)
	}
	time.Sleep(30*time.Second - time.Since(st)) // 30 s after SIGTERM
	if out, err := e.run(time.Minute, "docker", "start", id); err != nil {
		t.Fatalf("start %s: %v\n%s", svc, err, out)
	}
	down := time.Since(st)
	res := <-done
	if res.err != nil {
		e.diagnose()
		t.Fatalf("producing in %s while %s was down: %v\n%s", r.name, svc, res.err, res.out)
	}
	t.Logf("%s down %.0fs: %s", svc, down.Seconds(), strings.TrimSpace(res.out))
	e.waitHealthy(3*time.Minute, svc)
	e.checkMessages("after stopping " + svc + " for 30 s")
}

// stopGlobalStore stops every member of the global configuration store:
// an admin write through us-east's proxy must answer 503 naming the
// store (within the store's 4 s bound; asserted well above it, the
// measured time logged), a read must still be served from the cache;
// once the members are back, a write must succeed (its time logged).
func (e *env) stopGlobalStore() {
	t := e.t
	var members []string
	for i := 1; i <= 3; i++ {
		members = append(members, fmt.Sprintf("global-%d", i))
	}
	each := func(args ...string) {
		errs := make(chan error, len(members))
		for _, m := range members {
			go func() {
				out, err := e.run(time.Minute, "docker", append(args, e.containers[m])...)
				if err != nil {
					err = fmt.Errorf("%s %s: %v\n%s", args[0], m, err, out)
				}
				errs <- err
			}()
		}
		for range members {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	admin := fmt.Sprintf("http://127.0.0.1:%d/admin/v2/namespaces/", regions[0].proxyHTTP)
	put := func(ns string) (int, string, time.Duration) {
		req, _ := http.NewRequest(http.MethodPut, admin+ns, nil)
		client := &http.Client{Timeout: 30 * time.Second}
		st := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error(), time.Since(st)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(st)
	}
	each("stop", "-t", "25")
	code, body, took := put(namespace + "-outage")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "global configuration store") || took > 10*time.Second {
		e.diagnose()
		t.Fatalf("admin write with the global store stopped: %d after %v: %s (want 503 naming the global configuration store, promptly)", code, took.Round(time.Millisecond), body)
	}
	t.Logf("global store stopped: admin write answered %d after %v", code, took.Round(time.Millisecond))
	resp, err := httpClient.Get(admin + namespace)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("read with the global store stopped: %v %v", resp, err)
	}
	resp.Body.Close()
	each("start")
	for _, m := range members {
		e.waitHealthy(3*time.Minute, m)
	}
	// (The members are healthy once they serve; the first write is
	// timed, and retried only if the store was not back after all.)
	back := time.Now()
	var first time.Duration
	e.poll(time.Minute, "an admin write once the global store is back", func() (bool, string) {
		code, body, took := put(namespace + "-after")
		if first == 0 {
			first = took
		}
		return code/100 == 2, fmt.Sprintf("%d after %v: %s", code, took.Round(time.Millisecond), body)
	})
	t.Logf("global store back: the first admin write took %v; a write succeeded %v after the members were healthy",
		first.Round(time.Millisecond), time.Since(back).Round(time.Millisecond))
}

// poll calls f until it reports done or timeout passes.
func (e *env) poll(timeout time.Duration, what string, f func() (bool, string)) {
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not done within %v: %s", what, timeout, msg)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// readmeClient runs README.md's client commands ("Reaching the
// federation: the proxies") with the isobar binary built here: consume
// in eu-west and produce in us-east, each given only its region's proxy,
// and the topic's stats over us-east's proxy name eu-west's replication.
func (e *env) readmeClient(isobar string) {
	t := e.t
	topic := "persistent://" + namespace + "/hello"
	type result struct {
		out string
		err error
	}
	consumed := make(chan result, 1)
	go func() {
		out, err := e.run(2*time.Minute, isobar, "client", "consume", topic, "-s", "sub", "-p", "Earliest", "-n", "3",
			"--service-url", fmt.Sprintf("pulsar://127.0.0.1:%d", regions[1].proxyPulsar))
		consumed <- result{out, err}
	}()
	if out, err := e.run(time.Minute, isobar, "client", "produce", topic, "-m", "hi", "-n", "3",
		"--service-url", fmt.Sprintf("pulsar://127.0.0.1:%d", regions[0].proxyPulsar)); err != nil {
		t.Fatalf("README's isobar client produce: %v\n%s", err, out)
	}
	res := <-consumed
	if res.err != nil || strings.Count(res.out, "hi\n") != 3 {
		t.Fatalf("README's isobar client consume: %v, want three \"hi\" lines in\n%s", res.err, res.out)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/admin/v2/persistent/%s/hello/stats", regions[0].proxyHTTP, namespace)
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var st struct {
		Replication map[string]json.RawMessage `json:"replication"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &st) != nil || st.Replication[regions[1].name] == nil {
		t.Fatalf("GET %s: %s, want replication to %s in\n%s", url, resp.Status, regions[1].name, raw)
	}
}

// checkMessages produces in each region and consumes in the other, from
// the host through the regions' proxies, and fails the test unless every
// message arrived once.
func (e *env) checkMessages(when string) {
	t := e.t
	args := []string{"-round", strconv.Itoa(e.round), "-n", strconv.Itoa(messages),
		"-namespace", namespace, "-timeout", "90s", "-grace", "1s"}
	for _, r := range regions {
		args = append(args, "-region", fmt.Sprintf("%s=pulsar://127.0.0.1:%d", r.name, r.proxyPulsar))
	}
	e.round++
	out, err := e.run(2*time.Minute, e.pulsarcheck(), args...)
	if err != nil {
		e.diagnose()
		t.Fatalf("%s: messages do not go both ways exactly once: %v\n%s", when, err, out)
	}
}

// diagnose logs what helps to understand a failure: each container's
// state and the end of its log.
func (e *env) diagnose() {
	if e.containers == nil {
		// up failed (a dependency not healthy in time): the containers
		// created so far.
		out, _ := e.composeCmd(time.Minute, "ps")
		e.t.Logf("compose ps:\n%s", out)
		m, err := e.listContainers()
		if err != nil {
			e.t.Log(err)
			return
		}
		e.containers = m
	}
	st, _ := e.health()
	for _, svc := range services() {
		id, ok := e.containers[svc]
		if !ok {
			e.t.Logf("%s: not created", svc)
			continue
		}
		e.t.Logf("%s: %s", svc, st[svc])
		if st[svc] != "healthy" {
			// The last health checks' output: what /readyz said.
			out, _ := e.run(time.Minute, "docker", "inspect", "-f",
				`{{if .State.Health}}{{range .State.Health.Log}}{{.Start.Format "15:04:05"}} exit {{.ExitCode}}: {{.Output}}{{"\n"}}{{end}}{{end}}`, id)
			e.t.Logf("---- %s: its last health checks\n%s", svc, out)
		}
		e.logs(svc, id)
	}
}

func (e *env) logs(svc, id string) {
	out, _ := e.run(time.Minute, "docker", "logs", "--tail", "25", id)
	e.t.Logf("---- %s (last 25 lines)\n%s", svc, out)
}

// noRestarts fails the test when a process crashed on the way (the
// restart policy would have hidden it).
func (e *env) noRestarts() {
	t := e.t
	for svc, id := range e.containers {
		if slices.Contains(e.oneShot, svc) {
			continue
		}
		out, err := e.run(time.Minute, "docker", "inspect", "-f", "{{.RestartCount}}", id)
		if err != nil {
			t.Fatalf("inspect %s: %v\n%s", svc, err, out)
		}
		if n := strings.TrimSpace(out); n != "0" {
			e.logs(svc, id)
			t.Errorf("%s exited by itself and was restarted by Docker %s times", svc, n)
		}
	}
}

// clientSecrets copies the CA and the superuser's token out of the
// secrets service's volume (docker cp, as README.md shows) for the
// host's clients.
func (e *env) clientSecrets() {
	t := e.t
	dir := t.TempDir()
	e.ca, e.token = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "superuser.token")
	id, err := e.composeCmd(time.Minute, "ps", "-a", "-q", secretsService)
	if err != nil || strings.TrimSpace(id) == "" {
		t.Fatalf("compose ps -a -q %s: %v\n%s", secretsService, err, id)
	}
	id = lastLine(id)
	for _, f := range []string{e.ca, e.token} {
		if out, err := e.run(time.Minute, "docker", "cp", id+":/data/"+filepath.Base(f), f); err != nil {
			t.Fatalf("docker cp %s: %v\n%s", filepath.Base(f), err, out)
		}
	}
}

// tlsClient is an HTTP client that trusts the secure federation's CA.
func (e *env) tlsClient() (*http.Client, error) {
	pem, err := os.ReadFile(e.ca)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificate", e.ca)
	}
	return &http.Client{Timeout: httpClient.Timeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}, nil
}

// pulsarcheck is the pulsarcheck binary built for the host.
func (e *env) pulsarcheck() string { return filepath.Join(built.dir, "pulsarcheck") }

// get is a GET with the superuser's token when the federation is secure.
func (e *env) get(url string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if e.token != "" {
		b, err := os.ReadFile(e.token)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	}
	return httpClient.Do(req)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
