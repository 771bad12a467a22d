// Package compose tests deploy/compose/docker-compose.yml: the two-region
// federation, one container per process, built from the isobar image.
//
// TestComposeFederation needs a Docker engine and Compose (docker compose
// or docker-compose) and takes 6 to 13 minutes; it is skipped with
// -short, with ISOBAR_SKIP_COMPOSE=1, without Docker, and when the go test
// deadline leaves it too little time (go test's default is 10 minutes for
// the whole package: run it with go test -timeout 30m ./deploy/compose, as
// .ci/run does).
package compose

import (
	"bufio"
	"bytes"
	"context"
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
	projectPrefix = "isobartest-"
	imagePrefix   = "isobar:compose-test-"
	namespace     = "geo/replicated"
	// budget is what the test needs of the go test deadline: 6 minutes on
	// a quiet 2-core machine, 13 on a busy one, plus a cold build of the
	// static binary (4 minutes).
	budget = 20 * time.Minute
	// messages per direction per check.
	messages = 20
)

var httpClient = &http.Client{Timeout: 10 * time.Second}

var regions = []struct {
	name         string
	pulsar, http []int // broker j's Pulsar and HTTP ports (published on 127.0.0.1)
}{
	{"us-east", []int{6650, 6651}, []int{8080, 8081}},
	{"eu-west", []int{6750, 6751}, []int{8180, 8181}},
}

// services are the compose file's services, one container each.
func services() []string {
	s := []string{"global"}
	for _, r := range regions {
		s = append(s, "etcd-"+r.name, "nats-"+r.name, "replicator-"+r.name)
		for i := 1; i <= 3; i++ {
			s = append(s, fmt.Sprintf("bookie-%s-%d", r.name, i))
		}
		for i := 1; i <= 2; i++ {
			s = append(s, fmt.Sprintf("broker-%s-%d", r.name, i))
		}
	}
	slices.Sort(s)
	return s
}

// env is the machinery of one run.
type env struct {
	t          *testing.T
	root       string   // repository root
	compose    []string // "docker compose" or "docker-compose", with -f
	project    string   // this run's compose project
	image      string   // this run's image tag
	containers map[string]string
	client     string // the container checks run in
	round      int
}

func TestComposeFederation(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (6 to 13 minutes): skipped with -short")
	}
	if os.Getenv("ISOBAR_SKIP_COMPOSE") != "" {
		t.Skip("ISOBAR_SKIP_COMPOSE is set")
	}
	if d, ok := t.Deadline(); ok && time.Until(d) < budget {
		t.Skipf("needs up to %v and the go test deadline leaves %v: run go test -timeout 30m ./deploy/compose", budget, time.Until(d).Round(time.Second))
	}
	start := time.Now()
	e := &env{t: t}
	e.requireDocker()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	e.compose = append(e.compose, "-f", filepath.Join(root, "deploy/compose/docker-compose.yml"))
	pid := strconv.Itoa(os.Getpid())
	e.project, e.image = projectPrefix+pid, imagePrefix+pid
	e.removeLeftovers()
	e.requirePortsFree()

	// The image and the in-network client.
	out, err := e.runEnv(15*time.Minute, []string{"IMAGE=" + e.image}, "bash", filepath.Join(root, "scripts/build-image.sh"))
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		t.Skipf("no Docker to build the image with: %s", out)
	} else if err != nil {
		t.Fatalf("scripts/build-image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { e.run(time.Minute, "docker", "image", "rm", e.image) })
	t.Logf("%s built (%v)", strings.TrimSpace(lastLine(out)), time.Since(start).Round(time.Second))
	bin := t.TempDir()
	check := filepath.Join(bin, "pulsarcheck")
	if out, err := e.runEnv(10*time.Minute, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", check, "./deploy/compose/pulsarcheck"); err != nil {
		t.Fatalf("building pulsarcheck: %v\n%s", err, out)
	}
	// isobar for fault-control, built as the image's (so from the
	// build cache build-image.sh filled).
	isobar := filepath.Join(bin, "isobar")
	if out, err := e.runEnv(10*time.Minute, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", isobar, "./cmd/isobar"); err != nil {
		t.Fatalf("building isobar: %v\n%s", err, out)
	}

	t.Cleanup(func() { e.down(e.project) })
	upStart := time.Now()
	if out, err := e.composeCmd(5*time.Minute, "up", "-d"); err != nil {
		e.diagnose()
		t.Fatalf("up: %v\n%s", err, out)
	}
	e.findContainers()
	e.waitHealthy(3*time.Minute, "")
	t.Logf("up and healthy in %v", time.Since(upStart).Round(time.Second))

	// The namespace both regions replicate, made over region us-east's
	// published admin port and seen over eu-west's.
	e.createNamespace()

	// The client container is on both regions' networks (not on wan),
	// where every broker's advertised name resolves.
	e.client = e.project + "-client"
	if out, err := e.run(2*time.Minute, "docker", "run", "-d", "--name", e.client,
		"--network", e.project+"_"+regions[0].name, "-v", check+":/pulsarcheck:ro",
		"--entrypoint", "/pulsarcheck", e.image, "-idle"); err != nil {
		t.Fatalf("client container: %v\n%s", err, out)
	}
	for _, r := range regions[1:] {
		if out, err := e.run(time.Minute, "docker", "network", "connect", e.project+"_"+r.name, e.client); err != nil {
			t.Fatalf("client container on %s's network: %v\n%s", r.name, err, out)
		}
	}
	e.check("the first check")

	// Every service in turn: restart, healthy again, messages still go
	// both ways exactly once.
	for _, svc := range services() {
		st := time.Now()
		if out, err := e.composeCmd(2*time.Minute, "restart", svc); err != nil {
			e.diagnose()
			t.Fatalf("restart %s: %v\n%s", svc, err, out)
		}
		restarted := time.Since(st)
		e.waitHealthy(3*time.Minute, svc)
		healthy := time.Since(st)
		e.check("after restarting " + svc)
		t.Logf("%-20s restart %5.1fs, healthy %5.1fs, checked %5.1fs", svc, restarted.Seconds(), healthy.Seconds(), time.Since(st).Seconds())
	}

	// No process crashed on the way (the restart policy would have hidden it).
	for svc, id := range e.containers {
		out, err := e.run(time.Minute, "docker", "inspect", "-f", "{{.RestartCount}}", id)
		if err != nil {
			t.Fatalf("inspect %s: %v\n%s", svc, err, out)
		}
		if n := strings.TrimSpace(out); n != "0" {
			e.logs(svc, id)
			t.Errorf("%s exited by itself and was restarted by Docker %s times", svc, n)
		}
	}

	// Failover drills of us-east, cut off from the other region and the
	// global store by its network, then killed (drill_test.go).
	e.drills(isobar, "partition", "kill")
	t.Logf("wall time %v", time.Since(start).Round(time.Second))
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
	for _, r := range regions {
		for _, p := range append(slices.Clone(r.pulsar), r.http...) {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				e.t.Skipf("127.0.0.1:%d is in use (isobar dev, or the compose federation started by hand?): %v", p, err)
			}
			ln.Close()
		}
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
	return e.runEnv(timeout, []string{"ISOBAR_IMAGE=" + e.image}, e.compose[0], full...)
}

// down removes a project's containers, networks and volumes, and its
// client and drill containers.
func (e *env) down(project string) {
	e.run(time.Minute, "docker", "rm", "-f", project+"-client", project+"-drill")
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
		e.run(time.Minute, "docker", "image", "rm", imagePrefix+strconv.Itoa(pid))
	}
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// findContainers maps every service to its container.
func (e *env) findContainers() {
	t := e.t
	out, err := e.run(time.Minute, "docker", "ps", "-a", "--filter", "label=com.docker.compose.project="+e.project,
		"--format", `{{.ID}} {{.Label "com.docker.compose.service"}}`)
	if err != nil {
		t.Fatalf("docker ps: %v\n%s", err, out)
	}
	e.containers = map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if id, svc, ok := strings.Cut(strings.TrimSpace(sc.Text()), " "); ok {
			e.containers[svc] = id
		}
	}
	var got []string
	for svc := range e.containers {
		got = append(got, svc)
	}
	slices.Sort(got)
	if !slices.Equal(got, services()) {
		t.Fatalf("containers of services %v, want %v", got, services())
	}
}

// health reads every container's health status.
func (e *env) health() (map[string]string, error) {
	ids := []string{"inspect", "-f", "{{.Id}} {{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}"}
	byID := map[string]string{}
	for svc, id := range e.containers {
		ids = append(ids, id)
		byID[id] = svc
	}
	out, err := e.run(time.Minute, "docker", ids...)
	if err != nil {
		return nil, fmt.Errorf("docker inspect: %v: %s", err, out)
	}
	st := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		id, status, _ := strings.Cut(line, " ")
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
		for _, s := range st {
			all = all && s == "healthy"
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

// createNamespace makes tenant geo and namespace geo/replicated, replicated
// to both regions, over region us-east's published admin port, and waits
// until region eu-west's brokers see it.
func (e *env) createNamespace() {
	var clusters []string
	for _, r := range regions {
		clusters = append(clusters, r.name)
	}
	tenant, _, _ := strings.Cut(namespace, "/")
	admin := fmt.Sprintf("http://127.0.0.1:%d/admin/v2/", regions[0].http[0])
	put := func(path string, body any) {
		raw, _ := json.Marshal(body)
		e.poll(time.Minute, "PUT "+path, func() (bool, string) {
			req, _ := http.NewRequest(http.MethodPut, admin+path, bytes.NewReader(raw))
			req.Header.Set("Content-Type", "application/json")
			resp, err := httpClient.Do(req)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			msg, _ := io.ReadAll(resp.Body)
			// 409: made by an earlier attempt whose answer was lost.
			return resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusConflict, resp.Status + " " + string(msg)
		})
	}
	put("tenants/"+tenant, map[string]any{"adminRoles": []string{}, "allowedClusters": clusters})
	put("namespaces/"+namespace, map[string]any{"replication_clusters": clusters})
	for _, r := range regions[1:] {
		for _, port := range r.http {
			url := fmt.Sprintf("http://127.0.0.1:%d/admin/v2/namespaces/%s", port, namespace)
			e.poll(time.Minute, "GET "+url, func() (bool, string) {
				resp, err := httpClient.Get(url)
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

// check produces in each region and consumes in the other, inside the
// compose network, and fails the test unless every message arrived once.
func (e *env) check(when string) {
	t := e.t
	args := []string{"exec", e.client, "/pulsarcheck", "-round", strconv.Itoa(e.round), "-n", strconv.Itoa(messages),
		"-namespace", namespace, "-timeout", "90s", "-grace", "1s"}
	for _, r := range regions {
		var hosts []string
		for j, p := range r.pulsar {
			hosts = append(hosts, fmt.Sprintf("broker-%s-%d:%d", r.name, j+1, p))
		}
		args = append(args, "-region", r.name+"=pulsar://"+strings.Join(hosts, ","))
	}
	e.round++
	out, err := e.run(2*time.Minute, "docker", args...)
	if err != nil {
		e.diagnose()
		t.Fatalf("%s: messages do not go both ways exactly once: %v\n%s", when, err, out)
	}
}

// diagnose logs what helps to understand a failure: each container's
// state and the end of its log.
func (e *env) diagnose() {
	if e.containers == nil {
		out, _ := e.composeCmd(time.Minute, "ps")
		e.t.Logf("compose ps:\n%s", out)
		return
	}
	st, _ := e.health()
	for _, svc := range services() {
		e.t.Logf("%s: %s", svc, st[svc])
		e.logs(svc, e.containers[svc])
	}
}

func (e *env) logs(svc, id string) {
	out, _ := e.run(time.Minute, "docker", "logs", "--tail", "25", id)
	e.t.Logf("---- %s (last 25 lines)\n%s", svc, out)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
