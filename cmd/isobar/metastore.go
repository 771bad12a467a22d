package main

import (
	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/roles"
)

// newMetastoreCmd is `isobar metastore`: one member of an etcd cluster,
// for a region's metadata store or for the global configuration store.
func newMetastoreCmd(g *globalFlags) *cobra.Command {
	rc := &roleCmd{g: g}
	e := &rc.file.Etcd
	cmd := &cobra.Command{
		Use:   "metastore",
		Short: "Run one member of an etcd cluster (a region's metadata store or the global configuration store)",
		Long: `Run one etcd member (the embedded etcd server). Alone it is a
cluster of one; with --initial-cluster it is one member of a cluster whose
members are all started with the same list (it serves once a quorum is up).
Configuration: the "etcd" section of --config, ISOBAR_ETCD_* variables,
flags. External etcd works everywhere instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := rc.load(cmd); err != nil {
				return err
			}
			if e.Name == "" {
				e.Name = roles.Hostname()
			}
			if err := validate(e.Validate(), roles.ValidAddr("etcd.httpAddr", e.HTTPAddr)); err != nil {
				return err
			}
			var m *roles.Metastore
			p := process{role: "metastore", name: e.Name, httpAddr: e.HTTPAddr,
				identity: []any{"dataDir", e.Dir, "client", e.ClientAddr, "peer", e.PeerAddr, "initialCluster", e.InitialCluster}}
			return rc.run(cmd.Context(), p, func(d roles.Deps) lifecycle.Component {
				m = roles.NewMetastore(e.EmbedConfig, d.Logger)
				return m
			}, func() { logf(cmd, "metastore %s serving on %v", e.Name, m.Endpoints()) })
		},
	}
	rc.bind(cmd)
	fl := cmd.Flags()
	fl.StringVar(&e.Name, "name", "", "member name, unique in the cluster (default: host name)")
	fl.StringVar(&e.Dir, "data-dir", "", "data directory")
	fl.StringVar(&e.ClientAddr, "client-addr", "127.0.0.1:2379", "client listen address")
	fl.StringVar(&e.PeerAddr, "peer-addr", "127.0.0.1:2380", "peer listen address")
	fl.StringVar(&e.AdvertiseClientAddr, "advertise-client-addr", "", "client address others use (default: client-addr)")
	fl.StringVar(&e.AdvertisePeerAddr, "advertise-peer-addr", "", "peer address others use (default: peer-addr)")
	fl.StringVar(&e.InitialCluster, "initial-cluster", "", "every member at first start: name=http://host:peerport,...")
	fl.StringVar(&e.ClusterState, "cluster-state", "", "new (default) or existing (joining a running cluster)")
	fl.StringVar(&e.ClusterToken, "cluster-token", "", "cluster token at first start (default isobar)")
	fl.StringVar(&e.HTTPAddr, "http-addr", "0.0.0.0:2381", "health and metrics listen address (empty: none)")
	return cmd
}
