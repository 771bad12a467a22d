package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore"
)

// TestBookieIdentityCommands: `isobar bookie` refuses a wiped ledger disk
// with exit status 2; `isobar bookie decommission` refuses a live bookie
// and retires a stopped one, whose id a bookie on new directories may then
// take.
func TestBookieIdentityCommands(t *testing.T) {
	dir := t.TempDir()
	e, err := metastore.StartEmbedded(context.Background(), metastore.EmbedConfig{Dir: filepath.Join(dir, "etcd")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	m, err := metastore.Connect(context.Background(), metastore.Config{Endpoints: e.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ep := e.Endpoints()[0]
	jdir, ldir := filepath.Join(dir, "j"), filepath.Join(dir, "l")
	startBookie := func(extra ...string) (stop func() error, id string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		args := append([]string{"bookie", "--http-addr", "127.0.0.1:0", "--metastore", ep, "--region", "r", "--listen", "127.0.0.1:0",
			"--journal-dir", jdir, "--ledger-dir", ldir, "--log-level", "error"}, extra...)
		go func() {
			_, err := run(ctx, args...)
			done <- err
		}()
		testcluster.WaitFor(t, 30*time.Second, func() bool {
			select {
			case err := <-done:
				t.Fatalf("bookie exited early: %v", err)
			default:
			}
			kvs, err := m.List(context.Background(), bookie.RegistrationKey("r", ""))
			var reg bookie.Registration
			if err == nil && len(kvs) == 1 && json.Unmarshal(kvs[0].Value, &reg) == nil {
				id = reg.ID
				return true
			}
			return false
		})
		return func() error { cancel(); return <-done }, id
	}

	stop, id := startBookie()
	if _, err := run(context.Background(), "bookie", "decommission", "--metastore", ep, "--region", "r", "--id", id); !errors.Is(err, bookie.ErrLive) || exitCode(err) != 1 {
		t.Fatalf("decommission of a live bookie: %v (exit %d), want ErrLive", err, exitCode(err))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// The ledger disk is wiped: refused, exit status 2.
	if err := os.RemoveAll(ldir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = run(ctx, "bookie", "--http-addr", "127.0.0.1:0", "--metastore", ep, "--region", "r", "--listen", "127.0.0.1:0",
		"--journal-dir", jdir, "--ledger-dir", ldir, "--log-level", "error")
	if !errors.Is(err, bookie.ErrIdentity) || exitCode(err) != 2 || !strings.Contains(err.Error(), "check 1") {
		t.Fatalf("bookie on a wiped ledger disk: %v (exit %d), want ErrIdentity, check 1, exit 2", err, exitCode(err))
	}

	// Retired, the id is free for a bookie on new directories.
	out, err := run(context.Background(), "bookie", "decommission", "--metastore", ep, "--region", "r", "--id", id)
	if err != nil || !strings.Contains(out, "decommissioned") {
		t.Fatalf("decommission: %v, %q", err, out)
	}
	if _, err := run(context.Background(), "bookie", "decommission", "--metastore", ep, "--region", "r", "--id", id); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("second decommission: %v, want ErrNotFound", err)
	}
	if err := os.RemoveAll(jdir); err != nil {
		t.Fatal(err)
	}
	stop, id2 := startBookie("--id", id)
	if id2 != id {
		t.Fatalf("new bookie registered as %q, want %q", id2, id)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := run(context.Background(), "bookie", "decommission", "--region", "r"); exitCode(err) != 2 {
		t.Fatalf("decommission without --metastore and --id: %v (exit %d), want a usage error", err, exitCode(err))
	}
}
