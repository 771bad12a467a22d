package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/drill"
	"github.com/isobar-mq/isobar/observability"
)

// newDrillCmd is `isobar drill <kind>`: failure drills against a
// federation (docs/drills.md).
func newDrillCmd(g *globalFlags) *cobra.Command {
	cmd := group("drill", "Run failure drills against a federation (isobar dev, or regions behind isobar fault-control) and report how the application fared")
	cmd.AddCommand(newDrillFailoverCmd(g))
	cmd.AddCommand(newDrillChaosCmd(g))
	return cmd
}

func newDrillFailoverCmd(g *globalFlags) *cobra.Command {
	var (
		c         drill.Config
		endpoints string
		fault     string
		jsonPath  string
	)
	cmd := verb("failover", "Fail an active-standby namespace over under load: inject a fault, promote, heal, drain, report", nil)
	cmd.Long = `Run a failover drill against "isobar dev" (or regions behind "isobar
fault-control"): create (or reuse) an active-standby namespace whose
primary is --from, run producers and a consumer on it with unmodified
Pulsar clients, inject --fault into --from through the fault-control
API of --endpoints, let --to take over (--promote, or
automatic failover), keep the workload running for --duration, heal,
drain, and report: the timeline, the publish and consume RTO, the RPO,
lost, late, duplicated and out-of-order messages, and client errors.

The table goes to stdout, the JSON report to --json FILE ("-": stdout
instead of the table). The exit status is 1 when the drill did not pass
(--max-rto, --max-lost). See docs/drills.md.`
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		logger, err := g.logger()
		if err != nil {
			return err
		}
		eps, err := readDrillEndpoints(endpoints)
		if err != nil {
			return usageError{err}
		}
		c.Endpoints = eps
		c.Fault = drill.Fault(fault)
		if !cmd.Flags().Changed("from") && len(eps.Regions) > 0 {
			c.From = eps.Regions[0].Name
		}
		if !cmd.Flags().Changed("to") && len(eps.Regions) > 1 {
			for _, r := range eps.Regions {
				if r.Name != c.From {
					c.To = r.Name
					break
				}
			}
		}
		if err := c.Validate(); err != nil {
			return usageError{err}
		}
		ctx := cmd.Context()
		tel, err := observability.New(ctx, observability.Config{Component: "drill", Logger: logger})
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := tel.Shutdown(sctx); err != nil {
				logger.Warn("drill: telemetry not flushed", "err", err)
			}
		}()
		c.Logger = logger
		c.ClientLogger = clientLogger(logger)
		c.MeterProvider, c.TracerProvider = tel.MeterProvider(), tel.TracerProvider()
		rep, err := drill.Run(ctx, c)
		if err != nil {
			return err
		}
		if err := writeDrillReport(cmd, jsonPath, rep, rep.WriteTable); err != nil {
			return err
		}
		if !rep.Passed {
			return fmt.Errorf("drill failed: %s", strings.Join(rep.Failures, "; "))
		}
		return nil
	}
	fl := cmd.Flags()
	fl.StringVar(&endpoints, "endpoints", "isobar-dev-data/endpoints.json", "endpoints.json written by isobar dev (or for isobar fault-control: docs/drills.md)")
	fl.StringVar(&c.Namespace, "namespace", "geo/drill", "active-standby namespace to drill (tenant/namespace; created when missing)")
	fl.StringVar(&c.From, "from", "", "primary region the fault hits (default: the first region)")
	fl.StringVar(&c.To, "to", "", "region that takes over (default: the next region)")
	fl.StringVar(&fault, "fault", string(drill.Kill), "kill, partition or blackhole")
	fl.DurationVar(&c.Duration, "duration", drill.DefaultDuration, "how long the fault lasts before the heal")
	fl.IntVar(&c.Rate, "rate", drill.DefaultRate, "messages per second, all producers together")
	fl.IntVar(&c.Producers, "producers", drill.DefaultProducers, "producers")
	fl.StringVar(&c.Topic, "topic", "", "topic in the namespace (default: a fresh one per run)")
	fl.BoolVar(&c.Promote, "promote", false, "promote --to (set-primary) as soon as the fault is detected")
	fl.DurationVar(&c.AutoFailoverAfter, "auto-failover-after", 0, "set the namespace's automatic failover delay (whole seconds); without --promote the drill waits for it")
	fl.BoolVar(&c.FailBack, "fail-back", false, "after heal and drain, move the primary back to --from (planned) and check again")
	fl.IntVar(&c.SyncRegions, "sync", 0, "give the namespace synchronous replication to this many other regions for the run (0: asynchronous; docs/failover.md)")
	fl.DurationVar(&c.SyncFallbackAfter, "sync-fallback-after", 0, "with --sync: the namespace's fallbackAfterSeconds (whole seconds; 0: hold publishes until the regions confirm)")
	fl.StringVar(&jsonPath, "json", "", `write the JSON report to this file ("-": stdout, instead of the table)`)
	fl.DurationVar(&c.MaxRTO, "max-rto", drill.DefaultMaxRTO, "longest publish gap that passes")
	fl.IntVar(&c.MaxLost, "max-lost", 0, "most lost messages that pass")
	return cmd
}

// readDrillEndpoints reads isobar dev's endpoints.json.
func readDrillEndpoints(path string) (drill.Endpoints, error) {
	var eps drill.Endpoints
	raw, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return eps, fmt.Errorf("--endpoints: %s does not exist: start isobar dev (it writes <data-dir>/endpoints.json)", path)
		}
		return eps, fmt.Errorf("--endpoints: %w", err)
	}
	if err := json.Unmarshal(raw, &eps); err != nil {
		return eps, fmt.Errorf("--endpoints: %s: %w", path, err)
	}
	return eps, nil
}

// writeDrillReport writes rep as JSON to jsonPath, when given, and its
// table to stdout unless the JSON went there.
func writeDrillReport(cmd *cobra.Command, jsonPath string, rep any, table func(io.Writer) error) error {
	if jsonPath != "" {
		if err := writeDrillJSON(cmd, jsonPath, rep); err != nil {
			return err
		}
	}
	if jsonPath == "-" {
		return nil
	}
	return table(cmd.OutOrStdout())
}

func writeDrillJSON(cmd *cobra.Command, path string, rep any) error {
	if path == "-" {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if err := writeJSON(path, rep); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}

// clientLogger is the Pulsar client's logger during a drill: errors only
// (its reconnection warnings are what a drill provokes), everything at
// --log-level debug.
func clientLogger(logger *slog.Logger) *slog.Logger {
	lvl := slog.LevelError
	if logger.Enabled(context.Background(), slog.LevelDebug) {
		lvl = slog.LevelDebug
	}
	return slog.New(minLevelHandler{logger.Handler(), lvl})
}
