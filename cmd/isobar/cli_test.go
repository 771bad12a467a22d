package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/drill/faultcontrol"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore"
)

// run executes the CLI in-process with args until ctx ends or it returns.
func run(ctx context.Context, args ...string) (string, error) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// devTestBasePort is TestDevStartsWritesEndpointsAndStops's port plan
// (3000-3142 and 4430-4531). The fixed plans of this package's tests sit
// below every range tests pick ports from at random (region's
// 10000-19999, internal/proctest's 20000-31999, the kernel's ephemeral
// range from 32768), so another package's test running at the same time
// never takes one of them.
const devTestBasePort = "3000"

// TestDevStartsWritesEndpointsAndStops runs `isobar dev` twice on one data
// directory (the second run restarts on the data) and checks endpoints.json.
func TestDevStartsWritesEndpointsAndStops(t *testing.T) {
	dir := t.TempDir()
	for round := 0; round < 2; round++ {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		args := []string{"dev", "--data-dir", dir, "--regions", "alpha,beta", "--base-port", devTestBasePort, "--log-level", "error"}
		if round == 1 { // the second time behind the emulated WAN
			args = append(args, "--wan-latency", "40ms")
		}
		var out string
		go func() {
			var err error
			out, err = run(ctx, args...)
			done <- err
		}()
		path := filepath.Join(dir, "endpoints.json")
		testcluster.WaitFor(t, 90*time.Second, func() bool {
			select {
			case err := <-done:
				t.Fatalf("dev exited early: %v", err)
			default:
			}
			_, err := os.Stat(path)
			return err == nil
		})
		var eps devEndpoints
		raw, err := os.ReadFile(path)
		if err != nil || json.Unmarshal(raw, &eps) != nil {
			t.Fatalf("endpoints.json: %s %v", raw, err)
		}
		if len(eps.Regions) != 2 || eps.Regions[0].Name != "alpha" || eps.Regions[1].MetadataURL != "http://127.0.0.1:3130" ||
			len(eps.Regions[0].Bookies) != 3 || eps.Regions[0].Bookies[0] != "127.0.0.1:3040" {
			t.Fatalf("endpoints %+v", eps)
		}
		// The metadata store answers and lists the region's bookies.
		m, err := metastore.Connect(context.Background(), metastore.Config{Endpoints: []string{eps.Regions[1].MetadataURL}})
		if err != nil {
			t.Fatal(err)
		}
		kvs, err := m.List(context.Background(), metastore.RegionPrefix("beta")+"bookies/")
		m.Close()
		if err != nil || len(kvs) != 3 {
			t.Fatalf("beta bookies registered: %d, %v", len(kvs), err)
		}
		devControlChecks(t, eps.ControlURL, round == 1)
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("dev stopped with %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("dev did not stop")
		}
		if want := "emulated WAN, 40ms one way: alpha->beta alpha->global beta->alpha beta->global"; (round == 1) != strings.Contains(out, want) {
			t.Errorf("round %d: output does not say %q as it should:\n%s", round, want, out)
		}
		os.Remove(path)
	}
}

func TestBookieCommandFromFileEnvAndFlags(t *testing.T) {
	dir := t.TempDir()
	e, err := metastore.StartEmbedded(context.Background(), metastore.EmbedConfig{Dir: filepath.Join(dir, "etcd")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cfgPath := filepath.Join(dir, "bookie.yaml")
	yaml := "metastore:\n  endpoints: [" + e.Endpoints()[0] + "]\nbookie:\n  region: from-file\n  rack: rack-file\n  listenAddr: 127.0.0.1:0\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ISOBAR_BOOKIE_REGION", "from-env")
	t.Setenv("ISOBAR_BOOKIE_JOURNALDIR", filepath.Join(dir, "j"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := run(ctx, "bookie", "--http-addr", "127.0.0.1:0", "--config", cfgPath, "--ledger-dir", filepath.Join(dir, "l"), "--rack", "rack-flag", "--log-level", "error")
		done <- err
	}()
	m, err := metastore.Connect(context.Background(), metastore.Config{Endpoints: e.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var reg bookie.Registration
	testcluster.WaitFor(t, 30*time.Second, func() bool {
		kvs, err := m.List(context.Background(), metastore.RegionPrefix("from-env")+"bookies/")
		return err == nil && len(kvs) == 1 && json.Unmarshal(kvs[0].Value, &reg) == nil
	})
	if reg.Rack != "rack-flag" {
		t.Fatalf("flag did not override the file: rack %q", reg.Rack)
	}
	if _, err := os.Stat(filepath.Join(dir, "j")); err != nil {
		t.Fatalf("journal dir from env not used: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("bookie stopped with %v", err)
	}
}

func TestBadInputExitsWithUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("bookie:\n  journalDirr: x\n"), 0o600)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	faults := filepath.Join(dir, "faults.yaml")
	os.WriteFile(faults, []byte("listen: 127.0.0.1:0\nregions:\n- name: r0\n  ready: http://127.0.0.1:1/readyz\n  kill: [\"true\"]\n  start: [\"true\"]\n  links: [{to: global, listen: \""+busy.Addr().String()+"\", target: 127.0.0.1:1}]\n"), 0o600)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"dev", "--regions", "Bad_Name"}, "--regions"},
		{[]string{"dev", "--regions", "a,a"}, "given twice"},
		{[]string{"dev", "--base-port", "80"}, "--base-port"},
		{[]string{"dev", "--no-such-flag"}, "unknown flag"},
		{[]string{"dev", "--wan-latency", "-40ms"}, "--wan-latency"},
		{[]string{"dev", "--wan-latency", "1h"}, "--wan-latency"},
		{[]string{"dev", "--transactions=maybe"}, "--transactions"},
		{[]string{"bookie"}, "metastore.endpoints"},
		{[]string{"bookie", "--config", bad}, "journalDirr"},
		{[]string{"bookie", "--config", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"perf", "disk", "--dir", filepath.Join(dir, "nope")}, "--dir"},
		{[]string{"dev", "--log-level", "loud"}, "--log-level"},
		{[]string{"fault-control"}, "--config: required"},
		{[]string{"fault-control", "--config", bad}, "field bookie not found"},
		{[]string{"fault-control", "--config", faults, "--wan-latency", "1h"}, "latency: 1h0m0s is not within"},
		{[]string{"fault-control", "--config", faults, "--listen", "nowhere"}, `listen: "nowhere" is not host:port`},
		{[]string{"fault-control", "--config", faults}, "cannot listen"},
	}
	for _, c := range cases {
		_, err := run(context.Background(), c.args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v (exit %d), want a usage error mentioning %q", c.args, err, exitCode(err), c.want)
		}
	}
	// Both missing pieces of a bookie's config are reported at once.
	_, err = run(context.Background(), "bookie")
	if err == nil || !strings.Contains(err.Error(), "bookie.region") || !strings.Contains(err.Error(), "bookie.journalDir") {
		t.Errorf("bookie config errors not reported together: %v", err)
	}
	if exitCode(errors.New("runtime failure")) != 1 {
		t.Error("runtime failures must exit 1")
	}
}

func TestPerfDiskAndVersion(t *testing.T) {
	out, err := run(context.Background(), "perf", "disk", "--dir", t.TempDir(), "--duration", "50ms", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil || r["FsyncPerSec"].(float64) <= 0 || r["SeqColdReadMBs"].(float64) <= 0 {
		t.Fatalf("perf disk output %q: %v", out, err)
	}
	if out, err := run(context.Background(), "version"); err != nil || !strings.HasPrefix(out, "isobar ") {
		t.Fatalf("version: %q %v", out, err)
	}
}

// devControlChecks drives dev's fault-control API: regions listed, WAN
// faults (only with the emulated WAN), a kill and a start, bad requests.
func devControlChecks(t *testing.T, base string, withWAN bool) {
	t.Helper()
	if base != "http://127.0.0.1:3012" {
		t.Fatalf("control URL %q, want base port + 12", base)
	}
	post := func(path string, want int) {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("POST %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	state := func() map[string]faultcontrol.RegionState {
		t.Helper()
		resp, err := http.Get(base + "/regions")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rs []faultcontrol.RegionState
		if err := json.NewDecoder(resp.Body).Decode(&rs); err != nil {
			t.Fatal(err)
		}
		out := map[string]faultcontrol.RegionState{}
		for _, r := range rs {
			out[r.Name] = r
		}
		return out
	}
	if st := state(); !st["alpha"].Up || !st["beta"].Up {
		t.Fatalf("regions %+v", st)
	}
	post("/regions/nosuch/kill", http.StatusNotFound)
	post("/regions/beta/explode", http.StatusNotFound)
	if withWAN {
		post("/regions/beta/partition", http.StatusNoContent)
		if st := state(); st["beta"].WAN != "cut" || st["alpha"].WAN != "up" {
			t.Fatalf("after partition: %+v", st)
		}
		post("/regions/beta/blackhole", http.StatusNoContent)
		if st := state(); st["beta"].WAN != "blackhole" {
			t.Fatalf("after blackhole: %+v", st)
		}
		post("/regions/beta/heal", http.StatusNoContent)
		if st := state(); st["beta"].WAN != "up" {
			t.Fatalf("after heal: %+v", st)
		}
	} else {
		post("/regions/beta/partition", http.StatusConflict)
	}
	post("/regions/beta/kill", http.StatusNoContent)
	post("/regions/beta/kill", http.StatusConflict)
	if st := state(); st["beta"].Up {
		t.Fatalf("after kill: %+v", st)
	}
	post("/regions/beta/start", http.StatusNoContent)
	if st := state(); !st["beta"].Up {
		t.Fatalf("after start: %+v", st)
	}
}
