package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/internal/config"
	"github.com/isobar-mq/isobar/metastore"
)

// bookieFile is the YAML shape of `isobar bookie --config`.
type bookieFile struct {
	Metastore metastore.Config `yaml:"metastore"`
	Bookie    bookie.Config    `yaml:"bookie"`
}

func newBookieCmd(g *globalFlags) *cobra.Command {
	var cfgPath string
	var f bookieFile
	cmd := &cobra.Command{
		Use:   "bookie",
		Short: "Run a bookie (storage node) against an external metadata store",
		Long: `Run one bookie. Configuration comes from --config (YAML with sections
"metastore" and "bookie"), then ISOBAR_* environment variables
(e.g. ISOBAR_BOOKIE_JOURNALDIR, ISOBAR_METASTORE_ENDPOINTS=a:2379,b:2379),
then flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := config.Load(cfgPath, &f, cmd.Flags(), os.Environ()); err != nil {
				return usageError{err}
			}
			logger, err := g.logger()
			if err != nil {
				return err
			}
			var errs []error
			if err := f.Metastore.Validate(); err != nil {
				errs = append(errs, err)
			}
			if f.Bookie.Region == "" {
				errs = append(errs, errors.New("bookie.region: required"))
			}
			if err := f.Bookie.Validate(); err != nil {
				errs = append(errs, err)
			}
			if err := errors.Join(errs...); err != nil {
				return usageError{err}
			}
			return runBookie(cmd.Context(), f, logger)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfgPath, "config", "", "YAML config file")
	fl.StringSliceVar(&f.Metastore.Endpoints, "metastore", nil, "etcd endpoints of the region's metadata store")
	fl.StringVar(&f.Bookie.Region, "region", "", "region name")
	fl.StringVar(&f.Bookie.ID, "id", "", "bookie id, fixed at its first start (default: <hostname>-<8 hex digits>; directories of earlier versions: advertised address)")
	fl.StringVar(&f.Bookie.ListenAddr, "listen", "127.0.0.1:3181", "listen address")
	fl.StringVar(&f.Bookie.AdvertiseAddr, "advertise", "", "address clients dial (default: listen address)")
	fl.StringVar(&f.Bookie.Rack, "rack", "", "rack / failure-domain label")
	fl.StringVar(&f.Bookie.JournalDir, "journal-dir", "", "journal directory")
	fl.StringVar(&f.Bookie.LedgerDir, "ledger-dir", "", "ledger storage directory (may be another disk)")
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
			logger, err := g.logger()
			if err != nil {
				return err
			}
			mc.Logger = logger
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

// identityUsage marks a refusal of the bookie's identity checks as a usage
// error (exit status 2): the operator's configuration or directories are
// wrong, and starting again as is fails again.
func identityUsage(err error) error {
	if errors.Is(err, bookie.ErrIdentity) {
		return usageError{err}
	}
	return err
}

func runBookie(ctx context.Context, f bookieFile, logger *slog.Logger) error {
	f.Metastore.Logger = logger
	meta, err := metastore.Connect(ctx, f.Metastore)
	if err != nil {
		return err
	}
	defer meta.Close()
	srv, err := bookie.New(f.Bookie, meta, logger)
	if err != nil {
		return identityUsage(err)
	}
	if err := srv.Start(ctx); err != nil {
		srv.Shutdown(context.Background())
		if ctx.Err() != nil {
			return nil // stopped (Ctrl-C) while starting: a clean exit
		}
		return identityUsage(err)
	}
	fmt.Fprintf(os.Stdout, "bookie %s serving on %s (region %s)\n", srv.ID(), srv.Addr(), f.Bookie.Region)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
