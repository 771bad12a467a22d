// Package examples_test applies the Terraform examples under
// terraform/examples with the real OpenTofu.
package examples_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"

	"github.com/isobar-mq/isobar/terraform/internal/tofutest"
)

// regionPorts are the ports of one region of the local-federation example
// before its offset (the region-config module's port plan; the global
// store's are used by the first region only).
var regionPorts = []int{2379, 2380, 2381, 2479, 2480, 2481, 3181, 8000, 6650, 8080, 4222, 7222, 6222, 8222, 8090}

// freeOffsets finds three region port offsets whose ports are all free
// now. The test's ports stay below 10000, where no test picks ports at
// random (region's tests pick from 10000-19999, internal/proctest's from
// 20000-31999, the kernel's ephemeral range starts at 32768), and clear of
// the fixed plans of cmd/isobar's tests (3000-3142, 3300-3542, 4430-4531,
// 4730-4931): offsets b, b+300 and b+600 for b from 1164 to 1177 keep the
// three regions' ports apart and inside 3543-9999.
func freeOffsets(t *testing.T) []int {
	t.Helper()
	for base := 1164; base <= 1177; base++ {
		offsets := []int{base, base + 300, base + 600}
		if allFree(offsets) {
			return offsets
		}
	}
	t.Fatal("no free port offsets for the local federation")
	return nil
}

func allFree(offsets []int) bool {
	for _, o := range offsets {
		for _, p := range regionPorts {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(o+p))
			if err != nil {
				return false
			}
			l.Close()
		}
	}
	return true
}

// buildIsobar builds cmd/isobar into dir.
func buildIsobar(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "isobar")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/isobar")
	cmd.Dir = tofutest.Root(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/isobar: %v\n%s", err, out)
	}
	return bin
}

// alive reports whether a process with this pid runs (a zombie, exited
// but not yet reaped by its new parent, does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// TestLocalFederation applies terraform/examples/local-federation for
// real: the region-config module renders three regions, each role runs as
// a process of the built isobar binary from exactly the rendered file, and
// the Isobar provider makes a namespace replicated to every region. Then
// messages produced in one region reach the other two, a second plan shows
// nothing to change, and destroy stops every process.
func TestLocalFederation(t *testing.T) {
	if testing.Short() {
		t.Skip("applies a three-region federation of 16 processes: skipped with -short")
	}
	tf := tofutest.New(t, tofutest.CopyDir(t, "terraform/examples/local-federation"))
	bin := buildIsobar(t, t.TempDir())
	run := t.TempDir()
	offsets := freeOffsets(t)
	vars := []string{
		"-var", "isobar_binary=" + bin,
		"-var", "run_dir=" + run,
		"-var", fmt.Sprintf("port_offsets=[%d,%d,%d]", offsets[0], offsets[1], offsets[2]),
	}
	// Whatever happens below, no process outlives the test.
	t.Cleanup(func() {
		pids, _ := filepath.Glob(filepath.Join(run, "*", "*.pid"))
		for _, f := range pids {
			if b, err := os.ReadFile(f); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	})

	tf.Run(t, "fmt", "-check", "-diff")
	tf.Run(t, "init", "-input=false")
	tf.Run(t, "validate")
	start := time.Now()
	tf.Run(t, append([]string{"apply", "-auto-approve", "-input=false"}, vars...)...)
	t.Logf("apply: %v", time.Since(start).Round(time.Second))

	var out struct {
		Regions map[string]struct {
			ServiceURL    string `json:"service_url"`
			WebServiceURL string `json:"web_service_url"`
			Cluster       string `json:"cluster"`
		} `json:"regions"`
		Topic     string            `json:"topic"`
		Files     map[string]string `json:"files"`
		Processes map[string]string `json:"processes"`
	}
	tf.Outputs(t, &out)
	if len(out.Regions) != 3 || len(out.Processes) != 16 || len(out.Files) != 16 {
		t.Fatalf("outputs: %d regions, %d processes, %d files; want 3, 16, 16", len(out.Regions), len(out.Processes), len(out.Files))
	}

	// Each process runs, from exactly the file the module rendered.
	pids := map[string]int{}
	for name, pidFile := range out.Processes {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || !alive(pid) {
			t.Fatalf("%s: pid file %q: process not running (%v)", name, b, err)
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) != 4 || args[0] != bin || args[2] != "--config" {
			t.Fatalf("%s runs %q", name, args)
		}
		rendered, ok := out.Files[args[3]]
		if !ok {
			t.Fatalf("%s reads %s, which the module did not render", name, args[3])
		}
		onDisk, err := os.ReadFile(args[3])
		if err != nil {
			t.Fatal(err)
		}
		if string(onDisk) != rendered {
			t.Fatalf("%s: %s differs from the rendered configuration", name, args[3])
		}
		pids[name] = pid
	}
	for r, reg := range out.Regions {
		if reg.Cluster != reg.ServiceURL {
			t.Errorf("region %s registered broker service URL %q, want %q", r, reg.Cluster, reg.ServiceURL)
		}
	}

	// Produce in us-east; consumers subscribed in eu-west and ap-south
	// (from the earliest message) receive every message once, in order.
	client := func(r string) pulsar.Client {
		c, err := pulsar.NewClient(pulsar.ClientOptions{URL: out.Regions[r].ServiceURL, OperationTimeout: 30 * time.Second, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	var consumers []pulsar.Consumer
	for _, r := range []string{"eu-west", "ap-south"} {
		c, err := client(r).Subscribe(pulsar.ConsumerOptions{
			Topic: out.Topic, SubscriptionName: "tf-test",
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		})
		if err != nil {
			t.Fatalf("subscribe in %s: %v", r, err)
		}
		defer c.Close()
		consumers = append(consumers, c)
	}
	p, err := client("us-east").CreateProducer(pulsar.ProducerOptions{Topic: out.Topic})
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range n {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	p.Close()
	for ci, c := range consumers {
		for i := range n {
			m, err := c.Receive(ctx)
			if err != nil {
				t.Fatalf("consumer %d: message %d: %v", ci, i, err)
			}
			if string(m.Payload()) != strconv.Itoa(i) {
				t.Fatalf("consumer %d: message %d is %q", ci, i, m.Payload())
			}
			c.Ack(m)
		}
	}
	for _, c := range consumers {
		c.Close()
	}

	// Nothing drifted: the next plan is empty.
	if out, err := tf.Exec(append([]string{"plan", "-detailed-exitcode", "-input=false"}, vars...)...); err != nil {
		t.Fatalf("plan after apply: %v (exit 2 means changes)\n%s", err, out)
	}

	start = time.Now()
	tf.Run(t, append([]string{"destroy", "-auto-approve", "-input=false"}, vars...)...)
	t.Logf("destroy: %v", time.Since(start).Round(time.Second))
	for name, pid := range pids {
		if alive(pid) {
			t.Errorf("%s (pid %d) still runs after destroy", name, pid)
		}
	}
	if !allFree(offsets) {
		t.Error("a port of the federation is still in use after destroy")
	}
}

// TestMultiRegionExampleIsValid: the multi-region example (applied by the
// provider's TestAccReplicatedNamespace) is formatted and valid.
func TestMultiRegionExampleIsValid(t *testing.T) {
	if testing.Short() {
		t.Skip("OpenTofu test: skipped with -short")
	}
	tf := tofutest.New(t, tofutest.CopyDir(t, "terraform/examples/multi-region"))
	tf.Run(t, "fmt", "-check", "-diff")
	tf.Run(t, "init", "-input=false", "-backend=false")
	tf.Run(t, "validate")
}

// quietLogger keeps the Pulsar client to errors.
func quietLogger() plog.Logger {
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	return plog.NewLoggerWithLogrus(l)
}
