package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/bookie/racks"
)

// bookieRecoveryVerbs are `isobar admin bookies` verbs of automatic
// recovery (docs/ledger.md "Automatic recovery"): decommission a bookie,
// take the mark off, and the ledgers waiting for recovery.
func (a *adminCmd) bookieRecoveryVerbs() []*cobra.Command {
	var asJSON bool
	const base = "/admin/v2/bookies/"
	path := func(bookie string) (string, error) {
		if err := racks.ValidBookieID(bookie); err != nil {
			return "", usageError{fmt.Errorf("<bookie>: %w", err)}
		}
		return base + "decommission/" + url.PathEscape(bookie), nil
	}
	return []*cobra.Command{
		verb("decommission <bookie>", "Decommission a bookie: no new copies go to it and its ledgers are re-replicated elsewhere now", func(cmd *cobra.Command, args []string) error {
			p, err := path(args[0])
			if err != nil {
				return err
			}
			if err := a.doREST(cmd, "decommission bookie "+args[0], func(ctx context.Context, c *rest.Client) error {
				return c.PostWithContext(ctx, p, nil)
			}); err != nil {
				return err
			}
			done(cmd, "bookie %s is decommissioned: its ledgers are being re-replicated (see under-replicated)", args[0])
			return nil
		}),
		verb("recommission <bookie>", "Take a bookie's decommission back: placement may choose it again", func(cmd *cobra.Command, args []string) error {
			p, err := path(args[0])
			if err != nil {
				return err
			}
			if err := a.doREST(cmd, "recommission bookie "+args[0], func(ctx context.Context, c *rest.Client) error {
				return c.DeleteWithContext(ctx, p)
			}); err != nil {
				return err
			}
			done(cmd, "bookie %s is no longer decommissioned", args[0])
			return nil
		}),
		readVerb("decommissioned", "List the decommissioned bookies", &asJSON, func(cmd *cobra.Command, _ []string) error {
			var bs []string
			if err := a.doREST(cmd, "list decommissioned bookies", func(ctx context.Context, c *rest.Client) error {
				return c.GetWithContext(ctx, base+"decommissioned", &bs)
			}); err != nil {
				return err
			}
			return showList(cmd, asJSON, bs)
		}),
		readVerb("under-replicated", "List the ledgers with copies on a missing or decommissioned bookie", &asJSON, func(cmd *cobra.Command, _ []string) error {
			var us []ledger.UnderReplicated
			if err := a.doREST(cmd, "list under-replicated ledgers", func(ctx context.Context, c *rest.Client) error {
				return c.GetWithContext(ctx, base+"under-replicated", &us)
			}); err != nil {
				return err
			}
			if us == nil {
				us = []ledger.UnderReplicated{}
			}
			return show(cmd, asJSON, us, func(w io.Writer) {
				fmt.Fprintln(w, "LEDGER\tSTATE\tBOOKIES\tENTRIES")
				for _, u := range us {
					fmt.Fprintf(w, "%d\t%s\t%s\t%d\n", u.Ledger, u.State, strings.Join(u.Bookies, ","), u.Entries)
				}
			})
		}),
	}
}
