// Command pprofstandalone runs the same region as `isobar standalone` (one
// process: embedded etcd, 3 bookies, 1 broker, default settings) and also
// serves net/http/pprof, so that scripts/perf-compare.sh (PROFILE=1) can
// take a CPU profile of the server side while `isobar perf` loads it.
//
//	go run ./internal/benchtools/pprofstandalone --data-dir /tmp/x --pprof 127.0.0.1:6060
//
// It is a benchmarking aid, not a product command: the product's server is
// `isobar standalone`.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/roles"
)

func main() {
	dataDir := flag.String("data-dir", "", "directory for all data (required)")
	brokerPort := flag.Int("broker-port", 6650, "Pulsar protocol port")
	httpPort := flag.Int("http-port", 8080, "admin REST port")
	pprofAddr := flag.String("pprof", "127.0.0.1:6060", "address for net/http/pprof")
	// Experiment knobs (zero: the defaults `isobar standalone` uses).
	flushInterval := flag.Duration("bookie-flush-interval", 0, "bookie.flushInterval (0: default)")
	gcDelay := flag.Duration("bookie-group-commit-delay", 0, "bookie.groupCommitMaxDelay (0: the default, sync when idle; positive: gather that long)")
	journalDir := flag.String("bookie-journal-dir", "", "bookies' journals under this directory instead of --data-dir (e.g. tmpfs, to isolate the disk)")
	ledgerDir := flag.String("bookie-ledger-dir", "", "bookies' ledger storage under this directory instead of --data-dir")
	mutexRate := flag.Int("mutex-profile-fraction", 0, "runtime.SetMutexProfileFraction")
	blockRate := flag.Int("block-profile-rate", 0, "runtime.SetBlockProfileRate (ns)")
	flag.Parse()
	runtime.SetMutexProfileFraction(*mutexRate)
	runtime.SetBlockProfileRate(*blockRate)
	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "--data-dir is required")
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		if err := http.ListenAndServe(*pprofAddr, nil); err != nil {
			logger.Error("pprof server", "err", err)
		}
	}()
	cfg := region.Config{
		Name:       "standalone",
		Cluster:    "standalone",
		DataDir:    *dataDir,
		Host:       "127.0.0.1",
		Bookies:    3,
		Brokers:    1,
		BrokerPort: *brokerPort,
		HTTPPort:   *httpPort,
		Broker:     roles.BrokerConfig{Config: broker.Config{MaxMessageSize: 1 << 20}}, // as isobar standalone
		Bookie: bookie.Config{
			FlushInterval: *flushInterval, GroupCommitMaxDelay: *gcDelay,
			JournalDir: *journalDir, LedgerDir: *ledgerDir,
		},
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	r, err := region.Start(ctx, cfg, region.Deps{Logger: logger})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("pprof http://%s/debug/pprof/\n", *pprofAddr)
	fmt.Println("ready. Ctrl-C to stop.")
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.Shutdown(sctx)
}
