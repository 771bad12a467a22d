package main

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/roles"
)

// newRegionCmd is `isobar region`: every role of one region in one
// process.
func newRegionCmd(g *globalFlags) *cobra.Command {
	rc := &roleCmd{g: g}
	f := &rc.file
	r := &f.Region
	cmd := &cobra.Command{
		Use:   "region",
		Short: "Run every role of one region in one process (etcd, NATS, bookies, brokers, replicators)",
		Long: `Run one region in one process: an embedded etcd member (unless
--metastore names an external one), the bookies, the brokers and, in a
federation (--global), a NATS server and the replicator workers. Ports
follow the same plan as "isobar dev" (--base-port, --index), so N "isobar
region" processes with the regions' names in --regions and a global store
("isobar metastore" at base+10) are the federation "isobar dev" runs. The
role sections of --config ("bookie", "broker", "replicator", "nats") are
templates for the region's parts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := rc.load(cmd); err != nil {
				return err
			}
			cfg := f.RegionConfig()
			if len(cfg.Global.Endpoints) > 0 && len(cfg.ReplicatedNamespaces) == 0 {
				cfg.ReplicatedNamespaces = []string{"public/default", devTenant + "/" + devNamespace}
			}
			if err := validate(cfg.Validate(), roles.ValidAddr("region.httpAddr", cfg.HTTPAddr)); err != nil {
				return err
			}
			p := process{role: "region", name: cfg.Name, region: cfg.Name, httpAddr: cfg.HTTPAddr,
				identity: []any{"dataDir", cfg.DataDir, "basePort", cfg.BasePort, "index", cfg.Index, "global", cfg.Global.Endpoints}}
			return rc.runRegion(cmd, p, cfg, func(e region.Endpoints) {
				logf(cmd, "region %s: service %s, web %s, metrics %s, nats %s, metadata %s, bookies %s", e.Name, e.ServiceURL, e.WebServiceURL, e.MetricsURL, e.NATSURL, e.MetadataURL, strings.Join(e.Bookies, " "))
			})
		},
	}
	rc.bind(cmd)
	fl := cmd.Flags()
	fl.StringVar(&r.Name, "name", "", "region name")
	fl.StringVar(&r.Cluster, "cluster", "", "cluster name (default: the region)")
	fl.StringVar(&r.DataDir, "data-dir", "", "directory for all of the region's data")
	fl.StringVar(&r.Host, "host", "127.0.0.1", "address to listen on and advertise")
	fl.IntVar(&r.BasePort, "base-port", 6650, "first port of the port plan (region i uses base-port+100*i and up)")
	fl.IntVar(&r.Index, "index", 0, "this region's index in the port plan")
	fl.StringSliceVar(&r.Regions, "regions", nil, "every region of the federation, in port-plan order")
	fl.IntVar(&r.Bookies, "bookies", 3, "number of bookies")
	fl.IntVar(&r.Brokers, "brokers", 1, "number of brokers")
	fl.IntVar(&r.Replicators, "replicators", 1, "number of replicator workers (in a federation)")
	fl.StringSliceVar(&r.ReplicatedNamespaces, "replicated-namespaces", nil, "namespaces this region joins (default in a federation: public/default,geo/replicated)")
	fl.StringSliceVar(&f.Global.Endpoints, "global", nil, "etcd endpoints of the global configuration store (a federation)")
	fl.StringSliceVar(&f.Metastore.Endpoints, "metastore", nil, "etcd endpoints of an external metadata store (default: an embedded member)")
	fl.StringVar(&r.NATSURL, "nats-url", "", "an external NATS server instead of the embedded one")
	fl.StringVar(&r.HTTPAddr, "http-addr", "", "extra health and metrics listen address")
	return cmd
}

// runRegion runs region cfg as process p; once it serves, show prints
// its endpoints and they are written to <dataDir>/endpoints.json. A
// configuration the region cannot be built from is a usage error.
func (rc *roleCmd) runRegion(cmd *cobra.Command, p process, cfg region.Config, show func(region.Endpoints)) error {
	var r *region.Region
	var buildErr error
	err := rc.run(cmd.Context(), p, func(d roles.Deps) lifecycle.Component {
		r, buildErr = region.New(cfg, regionDeps(d))
		if buildErr != nil {
			return failed{buildErr}
		}
		return r
	}, func() {
		e := r.Endpoints()
		show(e)
		path := filepath.Join(cfg.DataDir, "endpoints.json")
		eps := devEndpoints{Regions: []region.Endpoints{e}}
		eps.secure(cfg.Secrets)
		if eps.CAFile != "" {
			logf(cmd, "clients: trust %s, authenticate with the superuser token in %s", eps.CAFile, eps.TokenFile)
		}
		if err := writeJSON(path, eps); err != nil {
			logf(cmd, "could not write %s: %v", path, err)
		}
		logf(cmd, "ready. Ctrl-C to stop.")
	})
	if buildErr != nil {
		return usageError{buildErr}
	}
	return err
}

// failed is a component that cannot start.
type failed struct{ err error }

func (f failed) Name() string                   { return "config" }
func (f failed) Start(context.Context) error    { return f.err }
func (f failed) Shutdown(context.Context) error { return nil }
func (f failed) Abort()                         {}
