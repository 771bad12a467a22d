package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/region"
)

// devPorts is the port plan of `isobar dev`: region i owns the block
// basePort + 100*i. Offsets +0 and +1 are kept for the region's broker
// (Pulsar binary and HTTP) once brokers land.
const (
	devPortStride     = 100
	devMetastoreShift = 30 // etcd client; +31 etcd peer
	devBookieShift    = 40 // bookie j at +40+j
)

type devEndpoints struct {
	Regions []region.Endpoints `json:"regions"`
}

func newDevCmd(g *globalFlags) *cobra.Command {
	var (
		regions  string
		dataDir  string
		basePort int
		bookies  int
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a whole federation in one process (embedded etcd and bookies per region)",
		Long: `Run a development federation: for each region an embedded etcd
metadata store and a bookie ensemble, all in this process, data under
--data-dir (restart keeps it). Prints every endpoint and writes them to
<data-dir>/endpoints.json. Ctrl-C stops it cleanly.

Brokers, replicators and the global configuration store join as they land;
today the federation is its storage layer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := g.logger()
			if err != nil {
				return err
			}
			names, err := parseRegions(regions)
			if err != nil {
				return usageError{err}
			}
			if basePort < 1024 || basePort+devPortStride*len(names) > 65535 {
				return usageError{fmt.Errorf("--base-port: %d leaves no room for %d regions of %d ports", basePort, len(names), devPortStride)}
			}
			if bookies < 1 || bookies > devPortStride-devBookieShift {
				return usageError{fmt.Errorf("--bookies: %d is not within 1..%d", bookies, devPortStride-devBookieShift)}
			}
			ctx := cmd.Context()
			var started []*region.Region
			stopAll := func() {
				sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				for i := len(started) - 1; i >= 0; i-- {
					started[i].Shutdown(sctx)
				}
			}
			var eps devEndpoints
			for i, name := range names {
				block := basePort + devPortStride*i
				r, err := region.Start(ctx, region.Config{
					Name:          name,
					DataDir:       filepath.Join(dataDir, name),
					MetastorePort: block + devMetastoreShift,
					Bookies:       bookies,
					BookiePort:    block + devBookieShift,
				}, logger)
				if err != nil {
					stopAll()
					return err
				}
				started = append(started, r)
				eps.Regions = append(eps.Regions, r.Endpoints())
			}
			defer stopAll()
			out := cmd.OutOrStdout()
			for _, e := range eps.Regions {
				fmt.Fprintf(out, "region %s: metadata %s, bookies %s\n", e.Name, e.MetadataURL, strings.Join(e.Bookies, " "))
			}
			path := filepath.Join(dataDir, "endpoints.json")
			if err := writeJSON(path, eps); err != nil {
				return err
			}
			fmt.Fprintf(out, "endpoints written to %s\n", path)
			fmt.Fprintln(out, "brokers are not part of Isobar yet: this federation serves its storage layer (metadata + bookies). Ctrl-C to stop.")
			<-ctx.Done()
			fmt.Fprintln(out, "stopping")
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&regions, "regions", "us-east,eu-west", "region names, comma-separated")
	fl.StringVar(&dataDir, "data-dir", "isobar-dev-data", "directory for all data")
	fl.IntVar(&basePort, "base-port", 6650, "first port; region i uses base-port+100*i and up")
	fl.IntVar(&bookies, "bookies", 3, "bookies per region")
	return cmd
}

func parseRegions(s string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if !region.ValidName(n) {
			return nil, fmt.Errorf("--regions: %q is not a valid region name (lower-case letters, digits, dashes)", n)
		}
		if seen[n] {
			return nil, fmt.Errorf("--regions: %q given twice", n)
		}
		seen[n] = true
		names = append(names, n)
	}
	if len(names) == 0 {
		return nil, errors.New("--regions: at least one region is required")
	}
	return names, nil
}

// writeJSON writes v atomically (temp file + rename).
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
