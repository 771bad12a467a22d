package main

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// badConfig breaks a rule between two keys of one section and a range
// of another: before the whole file was checked first, the first made a
// region that said it was ready and then timed out every produce, the
// second was reported only after the metadata store had started.
const badConfig = `broker:
  ledger:
    ensembleSize: 2
    writeQuorum: 3
  keepAlive: -5s
bookie:
  readOnlyThreshold: 1.5
`

// TestBadConfigExitsTwoListingEveryProblem runs the commands that compose
// a region on a configuration with several problems: each exits with
// status 2 at once, names every problem by its key in the file, and
// creates nothing on disk.
func TestBadConfigExitsTwoListingEveryProblem(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "isobar.yaml")
	if err := os.WriteFile(path, []byte(badConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"standalone", []string{"standalone", "--broker-port", "3690", "--http-port", "3691"}},
		{"standalone --secure", []string{"standalone", "--secure", "--broker-port", "3690", "--http-port", "3691"}},
		{"region", []string{"region", "--name", "r1", "--base-port", "3600"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			out, err := run(ctx, append(tc.args, "--config", path, "--data-dir", data, "--log-level", "error")...)
			if err == nil {
				t.Fatalf("a bad configuration started:\n%s", out)
			}
			if code := exitCode(err); code != 2 {
				t.Errorf("exit %d, want 2: %v", code, err)
			}
			for _, want := range []string{
				"broker.ledger.writeQuorum: 3 exceeds broker.ledger.ensembleSize: 2",
				"bookie.readOnlyThreshold: 1.5",
				"broker.keepAlive: -5s is negative",
			} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not say %q:\n%v", want, err)
				}
			}
			if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("data directory after a refused configuration: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v: a bad configuration is refused before anything starts", d)
			}
		})
	}
}

// TestBrokerBadLedgerConfigExitsTwo: `isobar broker` checks its section
// the same way, before it connects to anything.
func TestBrokerBadLedgerConfigExitsTwo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "isobar.yaml")
	if err := os.WriteFile(path, []byte("metastore:\n  endpoints: [http://127.0.0.1:1]\nbroker:\n  region: r\n  ledger:\n    writeQuorum: 3\n    ackQuorum: 4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := run(ctx, "broker", "--config", path, "--log-level", "error")
	if code := exitCode(err); err == nil || code != 2 {
		t.Fatalf("exit %d: %v", code, err)
	}
	for _, want := range []string{
		"broker.ledger.writeQuorum: 3 exceeds broker.ledger.ensembleSize: 2 (the default)",
		"broker.ledger.ackQuorum: 4 exceeds broker.ledger.writeQuorum: 3",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}

// TestDevPortInUseNamesBasePort holds one port of dev's plan: dev exits
// with status 2 before it starts or writes anything, naming the port and
// the flag that moves every port.
func TestDevPortInUseNamesBasePort(t *testing.T) {
	const base = 3200
	taken := base + 30 // region 0's etcd client port, after the global store's
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(taken)))
	if err == nil {
		defer ln.Close()
	} // else something else holds it, which serves as well
	data := filepath.Join(t.TempDir(), "dev")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := run(ctx, "dev", "--data-dir", data, "--regions", "alpha", "--base-port", strconv.Itoa(base), "--log-level", "error")
	if err == nil {
		t.Fatalf("dev started with a port of its plan taken:\n%s", out)
	}
	if code := exitCode(err); code != 2 {
		t.Errorf("exit %d, want 2: %v", code, err)
	}
	for _, want := range []string{"--base-port", strconv.Itoa(taken) + " already in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("data directory after a refused start: %v", err)
	}
}

// TestRegionPortInUseExitsTwo: a port of the plan that is taken when the
// part that needs it starts (here the embedded etcd's) is a bad start:
// exit status 2, naming the address.
func TestRegionPortInUseExitsTwo(t *testing.T) {
	const base = 3400
	taken := base + 30 // the region's etcd client port
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(taken)))
	if err == nil {
		defer ln.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := run(ctx, "region", "--name", "r1", "--base-port", strconv.Itoa(base), "--data-dir", t.TempDir(), "--log-level", "error")
	if err == nil {
		t.Fatalf("region started with its etcd port taken:\n%s", out)
	}
	t.Log(err)
	if code := exitCode(err); code != 2 || !strings.Contains(err.Error(), strconv.Itoa(taken)) {
		t.Errorf("exit %d, want 2 naming port %d: %v", code, taken, err)
	}
}
