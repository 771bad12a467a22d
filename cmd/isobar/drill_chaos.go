package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/drill"
)

func newDrillChaosCmd(g *globalFlags) *cobra.Command {
	var (
		c         drill.ChaosConfig
		endpoints string
		faults    []string
		jsonPath  string
	)
	cmd := verb("chaos", "Run a seeded random schedule of kills, partitions, black holes and a planned primary move under load, then check every region's copies", nil)
	cmd.Long = `Run a randomized drill against "isobar dev" (or regions behind "isobar
fault-control"). A schedule drawn from --seed injects, for --duration,
a fault every 4-10 s into a random region (kill, partition or black
hole, lasting 3-10 s, at most two regions at once and never all of
them) and moves the active-standby namespace's primary once, to
another region, while the old primary is reachable. Meanwhile
unmodified Pulsar clients produce to and consume from an
active-active namespace (a producer and a consumer in every region)
and an active-standby one (a producer whose client lists every
region, a consumer in every region), each with a plain and a
partitioned topic: <tenant>/chaos-active-active and
<tenant>/chaos-active-standby, created when missing.

The schedule also deletes a topic of its own (in the active-active
namespace) --deletes times, through a random region's admin API and
mostly while a region is faulted: the drill retries the delete until
it has finished in every region (a 503 must name a faulted region, a
create meanwhile must be refused with 409 "being deleted"), creates
the topic again and produces and consumes on the new incarnation.
Nothing published before a delete may be seen after it finished.

After the last heal, the drill stops the producers, waits (at most
--converge-timeout) until every region's copy of every topic holds the
same messages, and checks: nothing acknowledged missing from any
region's copy, nothing stored twice, each producer's messages stored
and first delivered in order (messages marked late with
__ISOBAR_LATE_EPOCH counted apart), every region converged; and it
reports send errors and the longest time without an acknowledged
send, per producer and overall (judged with --max-gap).

The seed goes to stderr first and into the report; the same --seed
and --duration against the same regions replay the schedule. The
table goes to stdout, the JSON report to --json FILE ("-": stdout
instead of the table). The exit status is 1 when a check failed or
the drill could not run (the error names the seed), 2 for bad flags.
See docs/drills.md, "Randomized drills".`
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
		c.Faults = nil
		for _, f := range faults {
			c.Faults = append(c.Faults, drill.Fault(strings.TrimSpace(f)))
		}
		if !cmd.Flags().Changed("seed") {
			// 53 bits, so that the seed survives any JSON reader.
			c.Seed = rand.Uint64() >> 11
		}
		if err := c.Validate(); err != nil {
			return usageError{err}
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "drill chaos: seed %d (replay: --seed %d --duration %v)\n", c.Seed, c.Seed, c.Duration)
		c.Logger = logger
		c.ClientLogger = clientLogger(logger)
		rep, err := drill.RunChaos(cmd.Context(), c)
		if err != nil {
			return fmt.Errorf("drill chaos, seed %d: %w", c.Seed, err)
		}
		if err := writeDrillReport(cmd, jsonPath, rep, rep.WriteTable); err != nil {
			return err
		}
		if !rep.Passed {
			return fmt.Errorf("drill chaos failed, seed %d: %s", c.Seed, strings.Join(rep.Failures, "; "))
		}
		return nil
	}
	fl := cmd.Flags()
	fl.StringVar(&endpoints, "endpoints", "isobar-dev-data/endpoints.json", "endpoints.json written by isobar dev (or for isobar fault-control: docs/drills.md)")
	fl.DurationVar(&c.Duration, "duration", time.Minute, "how long faults are injected (at least 10s)")
	fl.Uint64Var(&c.Seed, "seed", 0, "the schedule's seed (default: a random one, printed)")
	fl.StringVar(&jsonPath, "json", "", `write the JSON report to this file ("-": stdout, instead of the table)`)
	fl.StringSliceVar(&faults, "faults", []string{string(drill.Kill), string(drill.Partition), string(drill.Blackhole)}, "fault kinds drawn: kill, partition, blackhole (the last two need WAN links)")
	fl.StringVar(&c.Tenant, "tenant", "geo", "tenant of the drill's namespaces (created when missing)")
	fl.IntVar(&c.Deletes, "deletes", 0, "deletes and re-creates of the delete topic (0: one per 20s of --duration; -1: none)")
	fl.IntVar(&c.Rate, "rate", drill.DefaultChaosRate, "messages per second of each producer")
	fl.IntVar(&c.Partitions, "partitions", drill.DefaultChaosPartitions, "partitions of each namespace's partitioned topic")
	fl.DurationVar(&c.ConvergeTimeout, "converge-timeout", drill.DefaultChaosConvergeTimeout, "longest wait, after the last heal, for every region's copies to converge")
	fl.DurationVar(&c.MaxGap, "max-gap", 0, "fail when a producer goes this long without an acknowledged send (0: reported, not judged)")
	return cmd
}
