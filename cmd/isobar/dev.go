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

	"github.com/isobar-mq/isobar/internal/natsembed"
	"github.com/isobar-mq/isobar/region"
)

// devPorts is the port plan of `isobar dev`: region i owns the block
// basePort + 100*i: its broker's Pulsar port at +0, NATS at +20 (+21
// gateway), etcd at +30 (+31 peer), bookie j at +40+j; the global store
// is at basePort+10 (+11 peer). The broker's HTTP port is basePort + 1430 +
// 100*i, so the default base 6650 gives Pulsar's familiar 6650 and 8080.
const (
	devPortStride     = 100
	devHTTPShift      = 1430
	devMetastoreShift = 30 // etcd client; +31 etcd peer
	devBookieShift    = 40 // bookie j at +40+j
	devNATSShift      = 20 // NATS client; +21 NATS gateway
	devGlobalShift    = 10 // global store client (+11 peer), in region 0's block
)

// The namespace `dev` creates replicated across every region.
const (
	devTenant    = "geo"
	devNamespace = "replicated"
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
		Short: "Run a whole federation in one process (global store; per region etcd, bookies, a broker, NATS and a replicator)",
		Long: `Run a development federation: for each region an embedded etcd
metadata store, a bookie ensemble and a broker (Pulsar protocol and admin
REST API), all in this process, data under --data-dir (restart keeps it).
Prints every endpoint and writes them to <data-dir>/endpoints.json. Ctrl-C
stops it cleanly.

The regions share a global configuration store (an embedded etcd) and
an embedded NATS super-cluster (one server per region, joined by gateways);
replicator workers copy every topic of public/default and geo/replicated
to every other region.`,
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
			if basePort < 1024 || basePort+devHTTPShift+devPortStride*len(names) > 65535 {
				return usageError{fmt.Errorf("--base-port: %d leaves no room for %d regions of %d ports", basePort, len(names), devPortStride)}
			}
			if bookies < 1 || bookies > devPortStride-devBookieShift {
				return usageError{fmt.Errorf("--bookies: %d is not within 1..%d", bookies, devPortStride-devBookieShift)}
			}
			ctx := cmd.Context()
			fc := region.FederationConfig{
				GlobalDir:  filepath.Join(dataDir, "global"),
				GlobalPort: basePort + devGlobalShift,
				Tenant:     devTenant,
				Namespace:  devNamespace,
			}
			for i, name := range names {
				block := basePort + devPortStride*i
				fc.Regions = append(fc.Regions, region.Config{
					Name:          name,
					DataDir:       filepath.Join(dataDir, name),
					MetastorePort: block + devMetastoreShift,
					Bookies:       bookies,
					BookiePort:    block + devBookieShift,
					BrokerPort:    block,
					HTTPPort:      block + devHTTPShift,
					NATS:          &natsembed.Config{Port: block + devNATSShift, GatewayPort: block + devNATSShift + 1},
				})
			}
			// Every region knows every gateway up front (fixed ports), so
			// a restarted region rejoins the mesh by itself.
			for i := range fc.Regions {
				gws := map[string]string{}
				for j, o := range fc.Regions {
					if j != i {
						gws[o.Name] = fmt.Sprintf("nats://127.0.0.1:%d", o.NATS.GatewayPort)
					}
				}
				fc.Regions[i].NATS.Gateways = gws
			}
			f, err := region.StartFederation(ctx, fc, logger)
			if err != nil {
				return err
			}
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				f.Shutdown(sctx)
			}()
			var eps devEndpoints
			for _, r := range f.Regions {
				eps.Regions = append(eps.Regions, r.Endpoints())
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "global configuration store: %s\n", strings.Join(f.GlobalEndpoints(), " "))
			for _, e := range eps.Regions {
				fmt.Fprintf(out, "region %s: service %s, web %s, metrics %s, nats %s, metadata %s, bookies %s\n", e.Name, e.ServiceURL, e.WebServiceURL, e.MetricsURL, e.NATSURL, e.MetadataURL, strings.Join(e.Bookies, " "))
			}
			path := filepath.Join(dataDir, "endpoints.json")
			if err := writeJSON(path, eps); err != nil {
				return err
			}
			fmt.Fprintf(out, "endpoints written to %s\n", path)
			fmt.Fprintf(out, "namespaces public/default and %s/%s replicate across %s. Ctrl-C to stop.\n", devTenant, devNamespace, strings.Join(names, ", "))
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
