package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/spf13/cobra"
)

func (a *adminCmd) brokersCmd() *cobra.Command {
	cmd := group("brokers", "List brokers and check their health")
	var asJSON bool
	cmd.AddCommand(
		readVerb("list <cluster>", "List a cluster's active brokers (host:port)", &asJSON, func(cmd *cobra.Command, args []string) error {
			if err := parseName("cluster", args[0]); err != nil {
				return err
			}
			var names []string
			if err := a.do(cmd, "list brokers of "+args[0], func(ctx context.Context, c pulsaradmin.Client) (err error) {
				names, err = c.Brokers().GetActiveBrokersWithContext(ctx, args[0])
				return err
			}); err != nil {
				return err
			}
			slices.Sort(names)
			return showList(cmd, asJSON, names)
		}),
		readVerb("healthcheck", "Check that the broker serves (prints ok; exit 1 otherwise)", &asJSON, func(cmd *cobra.Command, _ []string) error {
			if err := a.do(cmd, "healthcheck", func(ctx context.Context, c pulsaradmin.Client) error {
				return c.Brokers().HealthCheckWithContext(ctx)
			}); err != nil {
				return err
			}
			return show(cmd, asJSON, map[string]string{"status": "ok"}, func(w io.Writer) { fmt.Fprintln(w, "ok") })
		}),
	)
	return cmd
}
