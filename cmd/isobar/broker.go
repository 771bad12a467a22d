package main

import (
	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/roles"
)

// newBrokerCmd is `isobar broker`: one broker of a region.
func newBrokerCmd(g *globalFlags) *cobra.Command {
	rc := &roleCmd{g: g}
	f := &rc.file
	b := &f.Broker
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run a broker (Pulsar protocol, admin REST API) against the region's metadata store and bookies",
		Long: `Run one broker. It serves the Pulsar protocol on --listen and the
admin REST API, lookups, /healthz, /readyz and /metrics on --http-listen,
owns the topics of the namespace bundles placed on it and stores them on
the region's bookies. SIGTERM drains it: it stops taking bundles, unloads
its bundles one by one (clients move to the other brokers) and
deregisters. Configuration: the "metastore", "global" and "broker"
sections of --config, ISOBAR_* variables, flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := rc.load(cmd); err != nil {
				return err
			}
			if b.Name == "" {
				b.Name = roles.Hostname()
			}
			if err := validate(f.Metastore.Validate(), b.Validate()); err != nil {
				return err
			}
			var c *roles.Broker
			p := process{role: "broker", name: b.Name, region: b.Region,
				identity: []any{"listen", b.ListenAddr, "httpListen", b.HTTPListenAddr, "metastore", f.Metastore.Endpoints, "global", f.Global.Endpoints}}
			return rc.run(cmd.Context(), p, func(d roles.Deps) lifecycle.Component {
				c = roles.NewBroker(*b, f.Metastore, f.Global, d)
				return c
			}, func() {
				e := c.Endpoints()
				logf(cmd, "broker %s serving: service %s, web %s", b.Name, e.ServiceURL, e.WebServiceURL)
			})
		},
	}
	rc.bind(cmd)
	fl := cmd.Flags()
	fl.StringSliceVar(&f.Metastore.Endpoints, "metastore", nil, "etcd endpoints of the region's metadata store")
	fl.StringSliceVar(&f.Global.Endpoints, "global", nil, "etcd endpoints of the global configuration store (none: a region alone)")
	fl.StringVar(&b.Region, "region", "", "region name")
	fl.StringVar(&b.Cluster, "cluster", "", "cluster name (default: the region)")
	fl.StringVar(&b.Name, "name", "", "broker name, stable across restarts (default: host name)")
	fl.StringVar(&b.ListenAddr, "listen", "0.0.0.0:6650", "Pulsar protocol listen address")
	fl.StringVar(&b.HTTPListenAddr, "http-listen", "0.0.0.0:8080", "HTTP (admin, lookup, health, metrics) listen address")
	fl.StringVar(&b.AdvertisedAddress, "advertised-address", "", "host clients reach this broker at (default: listen host or host name)")
	fl.StringVar(&b.DataDir, "data-dir", "", "directory for the broker's copy of the global configuration")
	fl.IntVar(&b.MaxMessageSize, "max-message-size", 0, "largest message accepted (default 5 MiB)")
	return cmd
}
