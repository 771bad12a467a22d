package region

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	err := Config{Name: "-Bad", Bookies: 100, BookiePort: 70000}.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, field := range []string{"region.name", "region.dataDir", "region.bookies", "region.bookiePort"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
}

// TestConfigValidatesRoleSections: the role sections a region is made
// from are checked with the region's own keys before anything starts,
// each problem named by its key in the file, the rules between keys and
// sections included.
func TestConfigValidatesRoleSections(t *testing.T) {
	cfg := Config{Name: "r", DataDir: t.TempDir(), Bookies: 2}
	cfg.Broker.Ledger.EnsembleSize, cfg.Broker.Ledger.WriteQuorum = 2, 3
	cfg.Bookie.ReadOnlyThreshold = 1.5
	cfg.Broker.KeepAlive = -time.Second
	cfg.Bookie.CompactionThreshold = 2
	cfg.Broker.LoadReportThresholdPercentage = 150
	cfg.Broker.LoadBalancerSheddingMinLoadGap = -1
	err := cfg.Validate()
	if err == nil {
		t.Fatal("bad role sections accepted")
	}
	for _, want := range []string{
		"broker.ledger.writeQuorum: 3 exceeds broker.ledger.ensembleSize: 2",
		"bookie.readOnlyThreshold: 1.5",
		"broker.keepAlive: -1s is negative",
		"bookie.compactionThreshold: 2 is not in [0, 1]",
		"broker.loadReportThresholdPercentage: 150 is not within 0..100",
		"broker.loadBalancerSheddingMinLoadGap: -1",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "bookie.journalDir") || strings.Contains(err.Error(), "broker.serviceUrl") {
		t.Errorf("a setting the region fills in is reported:\n%v", err)
	}

	// Between sections: a region of fewer bookies than a ledger's ensemble.
	cfg = Config{Name: "r", DataDir: t.TempDir(), Bookies: 1}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "broker.ledger.ensembleSize: 2 (the default) exceeds region.bookies: 1") {
		t.Errorf("one bookie for ensembles of 2: %v", err)
	}
	cfg.Broker.Ledger.EnsembleSize = 1
	if err := cfg.Validate(); err != nil {
		t.Errorf("one bookie for ensembles of 1: %v", err)
	}
	cfg.Brokers = -1
	cfg.Broker.Ledger.EnsembleSize = 0
	if err := cfg.Validate(); err != nil {
		t.Errorf("no brokers: the ledger settings do not matter: %v", err)
	}

	// Nothing was made: New refuses it before it builds anything.
	cfg = Config{Name: "r", DataDir: filepath.Join(t.TempDir(), "data"), Bookies: 1}
	cfg.Bookie.ReadOnlyThreshold = 7
	if _, err := New(cfg, Deps{}); err == nil || !strings.Contains(err.Error(), "bookie.readOnlyThreshold") {
		t.Fatalf("New: %v", err)
	}
	if _, err := os.Stat(cfg.DataDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("data directory after a refused config: %v", err)
	}
}

// A region that fails part-way through start-up (here: a bookie whose
// port is taken) stops what it started and reports the bookie.
func TestStartFailureCleansUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	taken := ln.Addr().(*net.TCPAddr).Port
	cfg := Config{Name: "r", DataDir: t.TempDir(), Bookies: 1, BookiePort: taken}
	cfg.Broker.Ledger.EnsembleSize = 1
	_, err = Start(context.Background(), cfg, Deps{})
	if err == nil || !strings.Contains(err.Error(), "bookie 0") {
		t.Fatalf("err %v", err)
	}
	ln.Close()
	// The embedded etcd was stopped: the same directory starts again.
	cfg.BookiePort = 0
	r, err := Start(context.Background(), cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if eps := r.Endpoints(); len(eps.Bookies) != 1 || eps.MetadataURL == "" {
		t.Fatalf("endpoints %+v", eps)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
