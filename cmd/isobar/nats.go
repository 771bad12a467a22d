package main

import (
	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/roles"
)

// newNATSCmd is `isobar nats`: one embedded NATS server of a region.
func newNATSCmd(g *globalFlags) *cobra.Command {
	rc := &roleCmd{g: g}
	n := &rc.file.NATS
	cmd := &cobra.Command{
		Use:   "nats",
		Short: "Run a region's NATS server (client port, cluster routes, gateways to other regions)",
		Long: `Run one NATS server (the embedded nats-server) for a region: the
replicator workers of the region connect to it, and its gateways join the
other regions' servers into one super-cluster. A stock nats-server with
the same settings (server name, gateway name = region, gateways) works
instead. Configuration: the "nats" section of --config, ISOBAR_NATS_*
variables, flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := rc.load(cmd); err != nil {
				return err
			}
			if err := validate(n.Validate(), roles.ValidAddr("nats.httpAddr", n.HTTPAddr)); err != nil {
				return err
			}
			var c *roles.NATS
			name := n.Name
			if name == "" {
				name = n.Region
			}
			p := process{role: "nats", name: name, region: n.Region, httpAddr: n.HTTPAddr,
				identity: []any{"port", n.Port, "gatewayPort", n.GatewayPort, "gateways", n.Gateways, "routes", n.Routes}}
			return rc.run(cmd.Context(), p, func(d roles.Deps) lifecycle.Component {
				c = roles.NewNATS(n.Config, d.Logger)
				return c
			}, func() {
				logf(cmd, "nats %s serving: clients %s, gateway %s", name, c.Server().ClientURL(), c.Server().GatewayURL())
			})
		},
	}
	rc.bind(cmd)
	fl := cmd.Flags()
	fl.StringVar(&n.Region, "region", "", "region name (the gateway name)")
	fl.StringVar(&n.Name, "name", "", "server name (default: the region)")
	fl.StringVar(&n.Host, "host", "127.0.0.1", "listen host")
	fl.IntVar(&n.Port, "port", 4222, "client port")
	fl.IntVar(&n.ClusterPort, "cluster-port", 0, "route port for the region's other NATS servers (0: none)")
	fl.StringSliceVar(&n.Routes, "routes", nil, "the region's other NATS servers: nats://host:clusterport,...")
	fl.IntVar(&n.GatewayPort, "gateway-port", 7222, "gateway port")
	fl.StringVar(&n.GatewayAdvertise, "gateway-advertise", "", "host:port other regions reach the gateway at")
	fl.StringToStringVar(&n.Gateways, "gateways", nil, "other regions' gateways: region=nats://host:port,...")
	fl.StringVar(&n.HTTPAddr, "http-addr", "0.0.0.0:8222", "health and metrics listen address (empty: none)")
	return cmd
}
