package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/bookie/racks"
	"github.com/isobar-mq/isobar/broker/adminapi"
)

// bookiesCmd is `isobar admin bookies`, pulsar-admin's bookies verbs: the
// region's bookies and their racks and groups (racks-info), which ledger
// placement and namespaces' bookie affinity use (docs/ledger.md).
// pulsaradmin has no bookies API: these call the REST paths directly.
func (a *adminCmd) bookiesCmd() *cobra.Command {
	cmd := group("bookies", "List the region's bookies and set their racks and groups (racks-info)")
	var asJSON bool
	var bookie, group, rack, hostname string
	const base = "/admin/v2/bookies/racks-info"
	path := func() (string, error) {
		if bookie == "" {
			return "", usageError{errors.New("--bookie: required")}
		}
		if err := racks.ValidBookieID(bookie); err != nil {
			return "", usageError{fmt.Errorf("--bookie: %w", err)}
		}
		return base + "/" + url.PathEscape(bookie), nil
	}
	bookieFlag := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringVarP(&bookie, "bookie", "b", "", "the bookie's id, as list-bookies shows it (required)")
		return c
	}

	set := bookieFlag(verb("set-bookie-rack", "Put a bookie in a group, with a rack that overrides its configured one", func(cmd *cobra.Command, _ []string) error {
		p, err := path()
		if err != nil {
			return err
		}
		info := racks.Info{Rack: rack, Hostname: hostname}
		if err := errors.Join(racks.ValidGroup(group), info.Validate()); err != nil {
			return usageError{err}
		}
		if err := a.doREST(cmd, "set the rack of bookie "+bookie, func(ctx context.Context, c *rest.Client) error {
			return c.PostWithQueryParamsWithContext(ctx, p, info, map[string]string{"group": group})
		}); err != nil {
			return err
		}
		if rack != "" {
			done(cmd, "bookie %s is in group %s, rack %s", bookie, group, rack)
		} else {
			done(cmd, "bookie %s is in group %s", bookie, group)
		}
		return nil
	}))
	set.Flags().StringVarP(&group, "group", "g", "default", "the bookie's group, which namespaces' bookie affinity names")
	set.Flags().StringVarP(&rack, "rack", "r", "", "the bookie's rack for placement (e.g. /rack-1); empty keeps its configured rack")
	set.Flags().StringVar(&hostname, "hostname", "", "the bookie's host name (kept, not used)")

	cmd.AddCommand(
		readVerb("racks-info", "Show every bookie's group, rack and host name set through racks-info", &asJSON, func(cmd *cobra.Command, _ []string) error {
			var rc racks.Config
			if err := a.doREST(cmd, "get the bookies' racks", func(ctx context.Context, c *rest.Client) error {
				return c.GetWithContext(ctx, base, &rc)
			}); err != nil {
				return err
			}
			if rc == nil {
				rc = racks.Config{}
			}
			return show(cmd, asJSON, rc, func(w io.Writer) {
				fmt.Fprintln(w, "GROUP\tBOOKIE\tRACK\tHOSTNAME")
				for _, g := range slices.Sorted(maps.Keys(rc)) {
					for _, b := range slices.Sorted(maps.Keys(rc[g])) {
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", g, b, orNone(nonEmpty(rc[g][b].Rack)), orNone(nonEmpty(rc[g][b].Hostname)))
					}
				}
			})
		}),
		bookieFlag(readVerb("get-bookie-rack", "Show a bookie's rack and host name set through racks-info", &asJSON, func(cmd *cobra.Command, _ []string) error {
			p, err := path()
			if err != nil {
				return err
			}
			var info racks.Info
			if err := a.doREST(cmd, "get the rack of bookie "+bookie, func(ctx context.Context, c *rest.Client) error {
				return c.GetWithContext(ctx, p, &info)
			}); err != nil {
				return err
			}
			return show(cmd, asJSON, info, func(w io.Writer) {
				fmt.Fprintf(w, "rack\t%s\nhostname\t%s\n", orNone(nonEmpty(info.Rack)), orNone(nonEmpty(info.Hostname)))
			})
		})),
		set,
		bookieFlag(verb("delete-bookie-rack", "Take a bookie out of its group (its configured group and rack apply again)", func(cmd *cobra.Command, _ []string) error {
			p, err := path()
			if err != nil {
				return err
			}
			if err := a.doREST(cmd, "delete the rack of bookie "+bookie, func(ctx context.Context, c *rest.Client) error {
				return c.DeleteWithContext(ctx, p)
			}); err != nil {
				return err
			}
			done(cmd, "bookie %s is in no group", bookie)
			return nil
		})),
		withAliases(readVerb("list-bookies", "List the region's bookies (started at least once and not decommissioned)", &asJSON, func(cmd *cobra.Command, _ []string) error {
			var all adminapi.BookiesClusterInfo
			if err := a.doREST(cmd, "list bookies", func(ctx context.Context, c *rest.Client) error {
				return c.GetWithContext(ctx, "/admin/v2/bookies/all", &all)
			}); err != nil {
				return err
			}
			if all.Bookies == nil {
				all.Bookies = []adminapi.RawBookieInfo{}
			}
			return show(cmd, asJSON, all, func(w io.Writer) {
				for _, b := range all.Bookies {
					fmt.Fprintln(w, b.BookieID)
				}
			})
		}), "list"),
	)
	cmd.AddCommand(a.bookieRecoveryVerbs()...)
	return cmd
}

// withAliases gives c other names (pulsar-admin's verb and a shorter one).
func withAliases(c *cobra.Command, aliases ...string) *cobra.Command {
	c.Aliases = append(c.Aliases, aliases...)
	return c
}
