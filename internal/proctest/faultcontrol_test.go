package proctest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/isobar-mq/isobar/drill"
	"github.com/isobar-mq/isobar/internal/drilltest"
	"github.com/isobar-mq/isobar/region"
)

// startHook and killHook are the fault-control hooks of
// TestProcessDrillThroughFaultControl, as an operator would write them
// for processes without a supervisor: the start hook runs `isobar
// region` in the background from <dir>/<region>.yaml, logging to
// <dir>/<region>.log, and records its pid in <dir>/<region>.pid (and
// every pid it started in <dir>/pids, for the test's cleanup); the kill
// hook sends SIGKILL to that pid and returns once it has exited. A
// process counts as running while /proc shows it, not a zombie, with the
// directory in its command line (so a reused pid is never taken for it).
const hookCommon = `set -eu
dir=$(dirname "$0")
name=$1
running() {
	[ -r /proc/$1/stat ] || return 1
	case $(sed 's/^.*) //' /proc/$1/stat) in Z*|X*) return 1;; esac
	tr '\0' ' ' < /proc/$1/cmdline 2>/dev/null | grep -qF "$dir"
}
`

const startHook = `
if [ -f "$dir/$name.pid" ] && running "$(cat "$dir/$name.pid")"; then
	echo "region $name already runs (pid $(cat "$dir/$name.pid"))" >&2
	exit 1
fi
"%s" region --config "$dir/$name.yaml" >>"$dir/$name.log" 2>&1 </dev/null &
echo $! >"$dir/$name.pid"
echo $! >>"$dir/pids"
`

const killHook = `
[ -f "$dir/$name.pid" ] || { echo "region $name has no pid file: not started" >&2; exit 1; }
pid=$(cat "$dir/$name.pid")
running "$pid" || { echo "region $name (pid $pid) does not run" >&2; exit 1; }
kill -KILL "$pid"
i=0
while running "$pid"; do
	i=$((i+1))
	[ $i -le 100 ] || { echo "region $name (pid $pid) still runs 10s after SIGKILL" >&2; exit 1; }
	sleep 0.1
done
rm -f "$dir/$name.pid"
`

// TestProcessDrillThroughFaultControl: `isobar drill failover` against a
// federation of `isobar region` processes, its faults injected by `isobar
// fault-control`. The binary runs as a global store (`isobar metastore`),
// two regions r0 and r1, and the fault-control server, whose hooks
// really SIGKILL and restart a region's process and whose links, 40 ms
// one way, carry every link between the regions (the NATS gateways, each
// region advertising a gateway address nothing listens on) and each
// region's link to the global store. A kill drill and a partition drill
// of r0, promoted to r1 by the drill, must pass with nothing lost, stored
// twice or out of order.
func TestProcessDrillThroughFaultControl(t *testing.T) {
	skipUnlessProcessTests(t)
	bin := Binary(t)
	dir := t.TempDir()
	hooks := filepath.Join(dir, "hooks")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	// Whatever happens, no region process outlives the test.
	t.Cleanup(func() { killRecorded(t, hooks) })

	names := []string{"r0", "r1"}
	base := freePlan(t, len(names))
	gc, gp := region.GlobalPorts(base)
	global := New(t, bin, dir, "global", nil, "metastore", "--name", "global", "--data-dir", filepath.Join(dir, "global", "data"),
		"--client-addr", Addr(gc), "--peer-addr", Addr(gp), "--http-addr", Addr(FreePort(t)))

	// Each region dials the other's gateway and the global store
	// through a link of its own.
	type linkCfg struct {
		To     string `yaml:"to"`
		Listen string `yaml:"listen"`
		Target string `yaml:"target"`
	}
	type regionCfg struct {
		Name  string    `yaml:"name"`
		Ready string    `yaml:"ready"`
		Kill  []string  `yaml:"kill"`
		Start []string  `yaml:"start"`
		Links []linkCfg `yaml:"links"`
	}
	control := Addr(FreePort(t))
	var regions []regionCfg
	for i, name := range names {
		other := names[1-i]
		toOther := Addr(FreePort(t))
		toGlobal := Addr(FreePort(t))
		rc := regionCfg{
			Name:  name,
			Ready: fmt.Sprintf("http://%s/readyz", Addr(region.PlanPorts(base, i).HTTP)),
			Kill:  []string{"sh", filepath.Join(hooks, "kill.sh"), name},
			Start: []string{"sh", filepath.Join(hooks, "start.sh"), name},
			Links: []linkCfg{
				{To: other, Listen: toOther, Target: Addr(region.PlanPorts(base, 1-i).NATSGateway)},
				{To: "global", Listen: toGlobal, Target: Addr(gc)},
			},
		}
		regions = append(regions, rc)
		writeYAML(t, filepath.Join(hooks, name+".yaml"), map[string]any{
			"region": map[string]any{"name": name, "index": i, "regions": names, "basePort": base, "dataDir": filepath.Join(dir, name, "data")},
			"global": map[string]any{"endpoints": []string{"http://" + toGlobal}},
			"nats": map[string]any{
				"gateways":         map[string]string{other: "nats://" + toOther},
				"gatewayAdvertise": "127.0.0.1:1", // nothing listens: a reconnecting gateway uses its link
			},
		})
	}
	for name, body := range map[string]string{"start.sh": fmt.Sprintf(startHook, bin), "kill.sh": killHook} {
		if err := os.WriteFile(filepath.Join(hooks, name), []byte(hookCommon+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fc := New(t, bin, dir, "fault-control", nil, "fault-control", "--config", filepath.Join(hooks, "faults.yaml"))
	writeYAML(t, filepath.Join(hooks, "faults.yaml"), map[string]any{
		"listen": control, "latency": "40ms", "hookTimeout": "2m", "regions": regions,
	})
	fc.ReadyURL = "http://" + control + "/regions"
	// Stopped gracefully first (a hook still running ends), then every
	// region process it started is killed.
	t.Cleanup(func() {
		if err := fc.Term(time.Minute); err != nil {
			t.Errorf("fault-control: %v", err)
		}
		killRecorded(t, hooks)
	})
	fc.Start()
	global.Start()
	fc.WaitReady(time.Minute)

	// The regions start through the API: the start hook, then their
	// readiness.
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, name := range names {
		wg.Go(func() { errs[i] = postControl("http://"+control, name, "start") })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start %s: %v\n%s", names[i], err, tail(filepath.Join(hooks, names[i]+".log"), 40))
		}
	}
	t.Logf("regions ready in %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range names {
				t.Logf("---- region %s (last lines of its log)\n%s", name, tail(filepath.Join(hooks, name+".log"), 60))
			}
		}
	})

	// The drill's endpoints: every region's endpoints.json (written by
	// `isobar region` once it serves) and the fault-control API.
	eps := map[string]any{"controlUrl": "http://" + control}
	var all []json.RawMessage
	for _, name := range names {
		path := filepath.Join(dir, name, "data", "endpoints.json")
		var one struct {
			Regions []json.RawMessage `json:"regions"`
		}
		waitFor(t, time.Minute, path, func() bool {
			raw, err := os.ReadFile(path)
			return err == nil && json.Unmarshal(raw, &one) == nil && len(one.Regions) == 1
		})
		all = append(all, one.Regions...)
	}
	eps["regions"] = all
	epsPath := filepath.Join(dir, "endpoints.json")
	raw, err := json.Marshal(eps)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(epsPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, fault := range []string{"kill", "partition"} {
		start := time.Now()
		jsonPath := filepath.Join(dir, fault+".json")
		maxRTO := 10 * time.Second
		args := []string{"--log-level", "warn", "drill", "failover", "--endpoints", epsPath, "--namespace", "geo/drill",
			"--from", "r0", "--to", "r1", "--fault", fault, "--promote", "--duration", "8s", "--rate", "200", "--json", jsonPath}
		if fault == "partition" {
			// As in TestDrillFailover: the fence lapse plus the Go
			// client's reconnection backoff.
			maxRTO = 30 * time.Second
			args = append(args, "--max-rto", maxRTO.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s drill: %v\n%s\nfault-control:\n%s", fault, err, out, fc.Tail(20))
		}
		if !strings.Contains(string(out), "r0 -> r1, promoted by the drill: PASSED") {
			t.Errorf("%s drill: table:\n%s", fault, out)
		}
		raw, err := os.ReadFile(jsonPath)
		if err != nil {
			t.Fatal(err)
		}
		var r drill.Report
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("%s: %v", jsonPath, err)
		}
		t.Logf("%s drill in %v: %s", fault, time.Since(start).Round(time.Second), drilltest.Summary(&r))
		drilltest.CheckReport(t, fault, &r, maxRTO)
	}
	// The kill restarted r0's process: the start hook ran twice for it.
	if n := strings.Count(readFile(filepath.Join(hooks, "pids")), "\n"); n != 3 {
		t.Errorf("%d region processes started, want 3 (r0, r1, r0 again after the kill)", n)
	}
}

// postControl asks the fault-control API at base to act on a region.
func postControl(base, region, action string) error {
	resp, err := http.Post(base+"/regions/"+region+"/"+action, "application/json", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("POST %s/%s: %s %s", region, action, resp.Status, body.String())
	}
	return nil
}

// killRecorded sends SIGKILL to every region process the start hook
// recorded in dir/pids that still runs (checked as the hooks do: /proc
// shows it, not a zombie, with dir in its command line) and waits until
// none does.
func killRecorded(t *testing.T, dir string) {
	ours := func(pid int) bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
			return false
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return err == nil && bytes.Contains(cmdline, []byte(dir))
	}
	var pids []int
	for _, f := range strings.Fields(readFile(filepath.Join(dir, "pids"))) {
		if pid, err := strconv.Atoi(f); err == nil && ours(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			pids = append(pids, pid)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for ours(pid) {
			if time.Now().After(deadline) {
				t.Errorf("region process %d still runs after SIGKILL", pid)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func writeYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// tail is the last n lines of the file at path.
func tail(path string, n int) string {
	lines := strings.Split(strings.TrimRight(readFile(path), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
