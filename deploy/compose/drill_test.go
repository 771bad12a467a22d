package compose

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/isobar-mq/isobar/drill"
	"github.com/isobar-mq/isobar/internal/drilltest"
)

// drillNamespace is the namespace the drills make (active-standby,
// replicated to both regions, primary us-east) in the tenant of
// namespace.
const drillNamespace = "geo/drill"

// regionServices are a region's services in the order they start: what
// the kill hook kills and the start hook starts.
func regionServices(region string) []string {
	var s []string
	for i := 1; i <= 3; i++ {
		s = append(s, fmt.Sprintf("etcd-%s-%d", region, i))
	}
	for i := 1; i <= 3; i++ {
		s = append(s, fmt.Sprintf("bookie-%s-%d", region, i))
	}
	return append(s, "broker-"+region+"-1", "broker-"+region+"-2", "proxy-"+region, "nats-"+region, "replicator-"+region)
}

// wanServices are a region's services on the wan network: what a
// partition disconnects from it.
func wanServices(region string) []string {
	return []string{"broker-" + region + "-1", "broker-" + region + "-2", "nats-" + region, "replicator-" + region}
}

// faultConfig is `isobar fault-control`'s configuration for the
// federation: deploy/compose/faults.yaml (hooks in faults.sh, run from the
// repository root with ISOBAR_COMPOSE_PROJECT naming this run's project),
// listening on listen. The file's kill lists must name every process of
// the region and its partitions every one on wan.
func (e *env) faultConfig(listen string) map[string]any {
	t := e.t
	raw, err := os.ReadFile(filepath.Join(e.root, "deploy/compose/faults.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("faults.yaml: %v", err)
	}
	var f struct {
		Regions []struct {
			Name            string
			Kill, Partition []string
		}
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("faults.yaml: %v", err)
	}
	if len(f.Regions) != len(regions) {
		t.Fatalf("faults.yaml has %d regions, want %d", len(f.Regions), len(regions))
	}
	for i, r := range regions {
		fr := f.Regions[i]
		if fr.Name != r.name || len(fr.Kill) < 3 || len(fr.Partition) < 3 ||
			!slices.Equal(fr.Kill[3:], regionServices(r.name)) || !slices.Equal(fr.Partition[3:], wanServices(r.name)) {
			t.Fatalf("faults.yaml's region %d: %+v, want %s killing %v and cutting %v", i, fr, r.name, regionServices(r.name), wanServices(r.name))
		}
	}
	cfg["listen"] = listen
	return cfg
}

// drills runs `isobar drill failover` of region us-east to eu-west for
// each fault, promoted by the drill, through `isobar fault-control` (the
// binary bin, built on the host) whose hooks kill, start, cut off and
// heal the region's containers with docker. The drill itself runs in a
// container of the image on the host's network, the brokers' names
// given to --add-host, so that its clients follow lookup redirects
// through the published ports. Each report must pass with nothing lost,
// stored twice or out of order (drilltest.CheckReport).
func (e *env) drills(bin string, faults ...string) {
	t := e.t
	if missing := drillTools(); missing != "" {
		t.Logf("DRILLS NOT RUN: the partition hook needs %s", missing)
		return
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	control := ln.Addr().String()
	ln.Close()
	writeFile(t, filepath.Join(dir, "faults.yaml"), e.faultConfig(control))

	// fault-control, stopped with SIGTERM at the end (a hook in progress
	// runs to its end first).
	logPath := filepath.Join(dir, "fault-control.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	fc := exec.Command(bin, "fault-control", "--config", filepath.Join(dir, "faults.yaml"))
	fc.Dir = e.root
	fc.Env = append(os.Environ(), "ISOBAR_COMPOSE_PROJECT="+e.project)
	fc.Stdout, fc.Stderr = logf, logf
	fc.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := fc.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- fc.Wait(); logf.Close() }()
	t.Cleanup(func() {
		fc.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(4 * time.Minute):
			syscall.Kill(-fc.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("---- fault-control\n%s", out)
		}
	})
	e.poll(time.Minute, "fault-control's GET /regions", func() (bool, string) {
		resp, err := httpClient.Get("http://" + control + "/regions")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})

	// The drill's endpoints: the brokers by the names they advertise,
	// which --add-host points at the published ports.
	eps := map[string]any{"controlUrl": "http://" + control}
	var regs []map[string]any
	for _, r := range regions {
		var brokers []map[string]string
		for j := range r.pulsar {
			host := fmt.Sprintf("broker-%s-%d", r.name, j+1)
			brokers = append(brokers, map[string]string{
				"serviceUrl":    fmt.Sprintf("pulsar://%s:%d", host, r.pulsar[j]),
				"webServiceUrl": fmt.Sprintf("http://%s:%d", host, r.http[j]),
			})
		}
		regs = append(regs, map[string]any{"name": r.name, "serviceUrl": brokers[0]["serviceUrl"],
			"webServiceUrl": brokers[0]["webServiceUrl"], "brokers": brokers})
	}
	eps["regions"] = regs
	raw, err := json.Marshal(eps)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "endpoints.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}

	from, to := regions[0].name, regions[1].name
	for _, fault := range faults {
		start := time.Now()
		// Named, so that down removes it if this test stops first.
		args := []string{"run", "--rm", "--name", e.project + "-drill", "--network", "host", "-v", dir + ":/drill",
			"--user", fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())}
		for _, r := range regions {
			for j := range r.pulsar {
				args = append(args, "--add-host", fmt.Sprintf("broker-%s-%d:127.0.0.1", r.name, j+1))
			}
		}
		// A partition's RTO holds the fence lapse and the Go client's
		// reconnection backoff (internal/proctest allows it 30 s); a
		// kill's, 10 s there, is given the same here: on a busy 2-core
		// machine, 17 containers and the Docker daemon stretch it
		// (9.3 s measured once).
		maxRTO := 30 * time.Second
		args = append(args, e.image, "--log-level", "warn", "drill", "failover", "--endpoints", "/drill/endpoints.json",
			"--namespace", drillNamespace, "--from", from, "--to", to, "--fault", fault, "--promote",
			"--duration", "8s", "--rate", "200", "--max-rto", maxRTO.String(), "--json", "/drill/"+fault+".json")
		out, err := e.run(6*time.Minute, "docker", args...)
		if err != nil {
			e.diagnose()
			t.Fatalf("%s drill: %v\n%s", fault, err, out)
		}
		if want := from + " -> " + to + ", promoted by the drill: PASSED"; !strings.Contains(out, want) {
			t.Errorf("%s drill: no %q in its table:\n%s", fault, want, out)
		}
		raw, err := os.ReadFile(filepath.Join(dir, fault+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var r drill.Report
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("%s report: %v", fault, err)
		}
		t.Logf("%s drill in %v: %s", fault, time.Since(start).Round(time.Second), drilltest.Summary(&r))
		drilltest.CheckReport(t, fault, &r, maxRTO)
	}
}

// drillTools names what the partition hook needs and this machine lacks:
// root (for nsenter), nsenter and ss.
func drillTools() string {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, tool := range []string{"nsenter", "ss"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	return strings.Join(missing, ", ")
}

func writeFile(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}
