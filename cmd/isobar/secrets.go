package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/internal/secrets"
)

// newSecretsCmd is `isobar secrets`: the CA, certificates and tokens of
// a secure federation, laid out as `isobar dev --secure` lays them out,
// for deployments whose processes run apart (deploy/compose).
func newSecretsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Make the CA, certificates and tokens of a secure federation (as isobar dev --secure does)",
	}
	cmd.AddCommand(newSecretsCreateCmd())
	return cmd
}

func newSecretsCreateCmd() *cobra.Command {
	var (
		dir     string
		regions string
		hosts   []string
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Make (or keep) the secrets of a federation under a directory",
		Long: `Make the secrets of a federation of the given regions under --dir, or keep
those already there: a federation CA, a CA per region, a certificate per
component kind (etcd, bookie, broker, nats, replicator, proxy) from its
region's CA, each region's certificates toward clients and the other
regions from the federation CA, the token signing key, and tokens for the
superuser (role admin), each region's replicators (replicator-<region>)
and proxies (proxy-<region>). docs/security.md lists the files and which
process uses which.

Every server certificate is valid for localhost, 127.0.0.1 and each
--host; run it again with more hosts and the certificates are issued
again. Keys are readable by their owner only: run it as the user the
processes run as.`,
		Example: `  isobar secrets create --dir /secrets --regions us-east,eu-west --host broker-us-east-1,proxy-us-east`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageError{errors.New("--dir is required")}
			}
			if regions == "" {
				return usageError{errors.New("--regions is required (region names, comma-separated)")}
			}
			names, err := parseRegions(regions)
			if err != nil {
				return usageError{err}
			}
			if i := slices.IndexFunc(hosts, func(h string) bool { return h == "" }); i >= 0 {
				return usageError{fmt.Errorf("--host: entry %d is empty", i+1)}
			}
			f, err := secrets.Ensure(dir, names, hosts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "secrets of %d regions in %s\n", len(names), f.Dir)
			rel := func(p string) string {
				if r, err := filepath.Rel(f.Dir, p); err == nil {
					return r
				}
				return p
			}
			fmt.Fprintf(out, "  clients trust        %s\n", rel(f.CA))
			fmt.Fprintf(out, "  superuser token      %s (role %s)\n", rel(f.SuperUserToken), secrets.SuperUser)
			fmt.Fprintf(out, "  token signing key    %s\n", rel(f.SecretKey))
			for _, name := range names {
				r := f.Regions[name]
				fmt.Fprintf(out, "  %s: CA %s, replicator token %s (role %s), proxy token %s (role %s)\n",
					name, rel(r.CA), rel(r.ReplicatorToken), r.ReplicatorRole, rel(r.ProxyToken), r.ProxyRole)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dir, "dir", "", "directory to make the secrets in (kept when already there)")
	fl.StringVar(&regions, "regions", "", "region names, comma-separated")
	fl.StringSliceVar(&hosts, "host", nil, "host names the servers are reached at, besides localhost and 127.0.0.1 (comma-separated or repeated)")
	return cmd
}
