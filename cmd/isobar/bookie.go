package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/roles"
)

// newBookieCmd is `isobar bookie`: one storage node of a region.
func newBookieCmd(g *globalFlags) *cobra.Command {
	rc := &roleCmd{g: g}
	f := &rc.file
	b := &f.Bookie
	cmd := &cobra.Command{
		Use:   "bookie",
		Short: "Run a bookie (storage node) against the region's metadata store",
		Long: `Run one bookie. Configuration comes from --config (YAML with sections
"metastore" and "bookie"), then ISOBAR_* environment variables
(e.g. ISOBAR_BOOKIE_JOURNALDIR, ISOBAR_METASTORE_ENDPOINTS=a:2379,b:2379),
then flags. SIGTERM stops it gracefully: it stops taking requests, answers
those in flight, deregisters and flushes its storage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := rc.load(cmd); err != nil {
				return err
			}
			var errs []error
			if b.Region == "" {
				errs = append(errs, errors.New("bookie.region: required"))
			}
			if err := validate(append(errs, f.Metastore.Validate(), b.Config.Validate(), roles.ValidAddr("bookie.httpAddr", b.HTTPAddr))...); err != nil {
				return err
			}
			var c *roles.Bookie
			p := process{role: "bookie", name: b.ID, region: b.Region, httpAddr: b.HTTPAddr,
				identity: []any{"listen", b.ListenAddr, "journal", b.JournalDir, "ledgers", b.LedgerDir, "metastore", f.Metastore.Endpoints}}
			return rc.run(cmd.Context(), p, func(d roles.Deps) lifecycle.Component {
				c = roles.NewBookie(b.Config, f.Metastore, d.Logger, d.Telemetry.MeterProvider())
				return c
			}, func() {
				s := c.Server()
				logf(cmd, "bookie %s serving on %s (region %s)", s.ID(), s.Addr(), b.Region)
			})
		},
	}
	rc.bind(cmd)
	fl := cmd.Flags()
	fl.StringSliceVar(&f.Metastore.Endpoints, "metastore", nil, "etcd endpoints of the region's metadata store")
	fl.StringVar(&b.Region, "region", "", "region name")
	fl.StringVar(&b.ID, "id", "", "bookie id, fixed at its first start (default: <hostname>-<8 hex digits>; directories of earlier versions: advertised address)")
	fl.StringVar(&b.ListenAddr, "listen", "127.0.0.1:3181", "listen address")
	fl.StringVar(&b.AdvertiseAddr, "advertise", "", "address clients dial (default: listen address)")
	fl.StringVar(&b.Rack, "rack", "", "rack / failure-domain label")
	fl.StringVar(&b.Group, "group", "", "bookie group, for namespaces' bookie affinity (racks-info overrides it)")
	fl.StringVar(&b.JournalDir, "journal-dir", "", "journal directory")
	fl.StringVar(&b.LedgerDir, "ledger-dir", "", "ledger storage directory (may be another disk)")
	fl.StringVar(&b.HTTPAddr, "http-addr", "0.0.0.0:8000", "health and metrics listen address (empty: none)")
	cmd.AddCommand(newBookieDecommissionCmd(g))
	return cmd
}

func newBookieDecommissionCmd(g *globalFlags) *cobra.Command {
	var mc metastore.Config
	var region, id string
	cmd := &cobra.Command{
		Use:   "decommission",
		Short: "Retire a bookie for good so that its id may be reused",
		Long: `Retire a bookie whose disks are gone for good, once its ledgers are
re-replicated: delete its cookie from the region's metadata store
(/isobar/<region>/cookies/<id>), so that a bookie on new directories may
take the id. Refused while the bookie is registered (live). Directories
that still hold the bookie's cookie must be wiped before they are used
again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var errs []error
			if err := mc.Validate(); err != nil {
				errs = append(errs, err)
			}
			if region == "" {
				errs = append(errs, errors.New("--region: required"))
			}
			if id == "" {
				errs = append(errs, errors.New("--id: required"))
			}
			if err := errors.Join(errs...); err != nil {
				return usageError{err}
			}
			meta, err := metastore.Connect(cmd.Context(), mc)
			if err != nil {
				return err
			}
			defer meta.Close()
			if err := bookie.Decommission(cmd.Context(), meta, region, id); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "bookie %s of region %s decommissioned\n", id, region)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&mc.Endpoints, "metastore", nil, "etcd endpoints of the region's metadata store")
	fl.StringVar(&region, "region", "", "region name")
	fl.StringVar(&id, "id", "", "id of the bookie to retire")
	return cmd
}

// badIdentity reports a bookie refusing its directories (its identity
// checks): the operator's configuration or directories are wrong, and
// starting again as is fails again.
func badIdentity(err error) bool { return errors.Is(err, bookie.ErrIdentity) }
