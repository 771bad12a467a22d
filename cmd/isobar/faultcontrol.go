package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/drill/faultcontrol"
	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/roles"
)

// newFaultControlCmd is `isobar fault-control`: the fault-control API of
// failover drills for regions that run as processes of their own.
func newFaultControlCmd(g *globalFlags) *cobra.Command {
	rc := &roleCmd{g: g}
	var (
		path     string
		listen   string
		latency  time.Duration
		httpAddr string
	)
	cmd := &cobra.Command{
		Use:   "fault-control",
		Short: "Serve the fault-control API of failover drills for region processes or a real deployment (kill and start hooks, WAN proxy links)",
		Long: `Serve the fault-control API "isobar drill failover" injects faults
through (GET /regions, POST /regions/<name>/kill|start|partition|blackhole|heal),
the same API "isobar dev" serves, for regions that run elsewhere: "isobar
region" processes or a real deployment. --config (YAML) lists each
region's readiness URL, the commands that kill and start it, and the WAN
links it dials the other regions and the global store through: each link
listens on an address the region is pointed at and forwards to the real
one, with --wan-latency one way; partition, blackhole and heal act on
every link into and out of a region. A region may instead have partition
and heal commands (docker network disconnect and connect, say), which
partition and heal run. See docs/drills.md. Ctrl-C stops it (closing
every link).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return usageError{errors.New("--config: required (see docs/drills.md, \"Drilling region processes or a real deployment\")")}
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return usageError{fmt.Errorf("--config: %w", err)}
			}
			cfg, err := faultcontrol.Parse(raw)
			if err != nil {
				return usageError{fmt.Errorf("%s: %w", path, err)}
			}
			if cmd.Flags().Changed("listen") {
				cfg.Listen = listen
			}
			if cmd.Flags().Changed("wan-latency") {
				cfg.Latency = latency
			}
			if err := errors.Join(cfg.Validate(), roles.ValidAddr("--http-addr", httpAddr)); err != nil {
				return usageError{fmt.Errorf("%s: %w", path, err)}
			}
			var s *faultcontrol.Server
			var names []string
			for _, r := range cfg.Regions {
				names = append(names, r.Name)
			}
			p := process{role: "fault-control", name: "fault-control", httpAddr: httpAddr,
				identity: []any{"config", path, "regions", names, "latency", cfg.Latency}}
			return rc.run(cmd.Context(), p, func(d roles.Deps) lifecycle.Component {
				s = faultcontrol.NewServer(cfg, d.Logger)
				return s
			}, func() {
				logf(cmd, "fault control (kill, start, partition, blackhole, heal a region): %s/regions", s.URL())
				if ls := s.Links(); len(ls) > 0 {
					logf(cmd, "WAN links, %v one way:\n  %s", cfg.Latency, strings.Join(ls, "\n  "))
				}
				logf(cmd, "regions %s. Ctrl-C to stop.", strings.Join(names, ", "))
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&path, "config", "", "YAML configuration: the regions, their hooks and links (see docs/drills.md)")
	fl.StringVar(&listen, "listen", faultcontrol.DefaultListen, "address of the fault-control API (overrides the file's listen)")
	fl.DurationVar(&latency, "wan-latency", 0, "one-way delay of every link, e.g. 40ms (overrides the file's latency)")
	fl.StringVar(&httpAddr, "http-addr", "", "health and metrics listen address (empty: none)")
	return cmd
}
