package main

import (
	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/roles"
)

// newProxyCmd is `isobar proxy`: a stateless proxy in front of one
// region's brokers.
func newProxyCmd(g *globalFlags) *cobra.Command {
	rc := &roleCmd{g: g}
	f := &rc.file
	p := &f.Proxy
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Run a proxy: clients reach the region's brokers through it only (Pulsar protocol and HTTP)",
		Long: `Run a proxy in front of one region's brokers, as Apache Pulsar's proxy
is. Clients connect to --listen (the Pulsar protocol) and --http-listen
(the admin REST API and lookups, forwarded; /healthz, /readyz and
/metrics are the proxy's own) and never see a broker's address: lookups
tell them to connect through the proxy, which forwards each such
connection to the topic's owner, and only to a broker registered in the
region's metadata store. It keeps no state: run several behind one
address. SIGTERM closes the listeners and then the connections, whose
clients reconnect. Configuration: the "metastore" and "proxy" sections
of --config, ISOBAR_* variables, flags (docs/proxy.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := rc.load(cmd); err != nil {
				return err
			}
			if p.Name == "" {
				p.Name = roles.Hostname()
			}
			if err := validate(f.Metastore.Validate(), p.Validate()); err != nil {
				return err
			}
			var c *roles.Proxy
			pr := process{role: "proxy", name: p.Name, region: p.Region,
				identity: []any{"listen", p.ListenAddr, "httpListen", p.HTTPListenAddr, "metastore", f.Metastore.Endpoints}}
			return rc.run(cmd.Context(), pr, func(d roles.Deps) lifecycle.Component {
				c = roles.NewProxy(*p, f.Metastore, d)
				return c
			}, func() {
				e := c.Endpoints()
				logf(cmd, "proxy %s serving region %s: service %s, web %s", p.Name, p.Region, e.ServiceURL, e.WebServiceURL)
				if e.ServiceURLTLS != "" {
					logf(cmd, "proxy %s serving TLS: service %s, web %s", p.Name, e.ServiceURLTLS, e.WebServiceURLTLS)
				}
			})
		},
	}
	rc.bind(cmd)
	fl := cmd.Flags()
	fl.StringSliceVar(&f.Metastore.Endpoints, "metastore", nil, "etcd endpoints of the region's metadata store (where the brokers register)")
	fl.StringVar(&p.Region, "region", "", "the region whose brokers the proxy fronts")
	fl.StringVar(&p.Name, "name", "", "proxy name, for logs and metrics (default: host name)")
	fl.StringVar(&p.ListenAddr, "listen", "0.0.0.0:6650", "Pulsar protocol listen address")
	fl.StringVar(&p.HTTPListenAddr, "http-listen", "0.0.0.0:8080", "HTTP (admin, lookup, health, metrics) listen address")
	return cmd
}
