package main

import (
	"context"
	"fmt"
	"io"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

func (a *adminCmd) clustersCmd() *cobra.Command {
	cmd := group("clusters", "List and inspect clusters")
	var asJSON bool
	cmd.AddCommand(
		readVerb("list", "List cluster names", &asJSON, func(cmd *cobra.Command, _ []string) error {
			var names []string
			if err := a.do(cmd, "list clusters", func(ctx context.Context, c pulsaradmin.Client) (err error) {
				names, err = c.Clusters().ListWithContext(ctx)
				return err
			}); err != nil {
				return err
			}
			return showList(cmd, asJSON, names)
		}),
		readVerb("get <cluster>", "Show a cluster's service URLs and peers", &asJSON, func(cmd *cobra.Command, args []string) error {
			if err := parseName("cluster", args[0]); err != nil {
				return err
			}
			var cd utils.ClusterData
			if err := a.do(cmd, "get cluster "+args[0], func(ctx context.Context, c pulsaradmin.Client) (err error) {
				cd, err = c.Clusters().GetWithContext(ctx, args[0])
				return err
			}); err != nil {
				return err
			}
			if cd.PeerClusterNames == nil {
				cd.PeerClusterNames = []string{}
			}
			return show(cmd, asJSON, cd, func(w io.Writer) {
				fmt.Fprintf(w, "serviceUrl:\t%s\n", cd.ServiceURL)
				if cd.ServiceURLTls != "" {
					fmt.Fprintf(w, "serviceUrlTls:\t%s\n", cd.ServiceURLTls)
				}
				fmt.Fprintf(w, "brokerServiceUrl:\t%s\n", cd.BrokerServiceURL)
				if cd.BrokerServiceURLTls != "" {
					fmt.Fprintf(w, "brokerServiceUrlTls:\t%s\n", cd.BrokerServiceURLTls)
				}
				fmt.Fprintf(w, "peerClusterNames:\t%s\n", orNone(cd.PeerClusterNames))
			})
		}),
	)
	return cmd
}
