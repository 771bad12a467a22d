package main

import (
	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/roles"
)

// newReplicatorCmd is `isobar replicator`: one replicator worker of a
// region.
func newReplicatorCmd(g *globalFlags) *cobra.Command {
	rc := &roleCmd{g: g}
	f := &rc.file
	w := &f.Replicator
	cmd := &cobra.Command{
		Use:   "replicator",
		Short: "Run a replicator worker: copies the region's replicated topics to other regions over NATS",
		Long: `Run one replicator worker. It reads the replication cursors of the
region's topics from its brokers (--service-url), sends them to the other
regions over NATS (--nats-url) and applies what other regions send. The
region's workers share the streams; SIGTERM hands this worker's streams
to the others. Configuration: the "metastore", "global" and "replicator"
sections of --config, ISOBAR_* variables, flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := rc.load(cmd); err != nil {
				return err
			}
			if w.ID == "" {
				w.ID = roles.Hostname()
			}
			if err := validate(f.Metastore.Validate(), f.Global.Validate(), w.Validate()); err != nil {
				return err
			}
			p := process{role: "replicator", name: w.ID, region: w.Region, httpAddr: w.HTTPAddr,
				identity: []any{"serviceUrl", w.ServiceURL, "nats", w.NATSURL, "metastore", f.Metastore.Endpoints, "global", f.Global.Endpoints}}
			return rc.run(cmd.Context(), p, func(d roles.Deps) lifecycle.Component {
				return roles.NewReplicator(*w, f.Metastore, f.Global, d)
			}, func() { logf(cmd, "replicator %s serving (region %s)", w.ID, w.Region) })
		},
	}
	rc.bind(cmd)
	fl := cmd.Flags()
	fl.StringSliceVar(&f.Metastore.Endpoints, "metastore", nil, "etcd endpoints of the region's metadata store")
	fl.StringSliceVar(&f.Global.Endpoints, "global", nil, "etcd endpoints of the global configuration store")
	fl.StringVar(&w.Region, "region", "", "region (cluster) name")
	fl.StringVar(&w.ID, "id", "", "worker id, stable across restarts (default: host name)")
	fl.StringVar(&w.ServiceURL, "service-url", "", "the region's brokers: pulsar://host:port[,host:port]")
	fl.StringVar(&w.NATSURL, "nats-url", "", "the region's NATS server(s): nats://host:port[,...]")
	fl.StringVar(&w.DataDir, "data-dir", "", "directory for the worker's copy of the global configuration")
	fl.StringVar(&w.HTTPAddr, "http-addr", "0.0.0.0:8090", "health and metrics listen address (empty: none)")
	return cmd
}
