package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

func (a *adminCmd) tenantsCmd() *cobra.Command {
	cmd := group("tenants", "Create, inspect, update and delete tenants")
	var asJSON bool
	var roles, clusters []string
	tenantFlags := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringSliceVarP(&roles, "admin-roles", "r", nil, "admin roles, comma-separated")
		c.Flags().StringSliceVarP(&clusters, "allowed-clusters", "c", nil, "clusters the tenant may use, comma-separated (create: default every cluster)")
		return c
	}
	cmd.AddCommand(
		readVerb("list", "List tenant names", &asJSON, func(cmd *cobra.Command, _ []string) error {
			var names []string
			if err := a.do(cmd, "list tenants", func(ctx context.Context, c pulsaradmin.Client) (err error) {
				names, err = c.Tenants().ListWithContext(ctx)
				return err
			}); err != nil {
				return err
			}
			return showList(cmd, asJSON, names)
		}),
		readVerb("get <tenant>", "Show a tenant's admin roles and allowed clusters", &asJSON, func(cmd *cobra.Command, args []string) error {
			if err := parseName("tenant", args[0]); err != nil {
				return err
			}
			var td utils.TenantData
			if err := a.do(cmd, "get tenant "+args[0], func(ctx context.Context, c pulsaradmin.Client) (err error) {
				td, err = c.Tenants().GetWithContext(ctx, args[0])
				return err
			}); err != nil {
				return err
			}
			if td.AdminRoles == nil {
				td.AdminRoles = []string{}
			}
			if td.AllowedClusters == nil {
				td.AllowedClusters = []string{}
			}
			return show(cmd, asJSON, td, func(w io.Writer) {
				fmt.Fprintf(w, "adminRoles:\t%s\n", orNone(td.AdminRoles))
				fmt.Fprintf(w, "allowedClusters:\t%s\n", orNone(td.AllowedClusters))
			})
		}),
		tenantFlags(verb("create <tenant>", "Create a tenant", func(cmd *cobra.Command, args []string) error {
			if err := parseName("tenant", args[0]); err != nil {
				return err
			}
			td := utils.TenantData{Name: args[0], AdminRoles: splitList(roles), AllowedClusters: splitList(clusters)}
			if td.AdminRoles == nil {
				td.AdminRoles = []string{}
			}
			if err := a.do(cmd, "create tenant "+args[0], func(ctx context.Context, c pulsaradmin.Client) error {
				if len(td.AllowedClusters) == 0 { // as pulsar-admin: every cluster
					all, err := c.Clusters().ListWithContext(ctx)
					if err != nil {
						return err
					}
					td.AllowedClusters = all
				}
				return c.Tenants().CreateWithContext(ctx, td)
			}); err != nil {
				return err
			}
			done(cmd, "created tenant %s (allowed clusters: %s)", args[0], orNone(td.AllowedClusters))
			return nil
		})),
		tenantFlags(verb("update <tenant>", "Change a tenant's admin roles and/or allowed clusters", func(cmd *cobra.Command, args []string) error {
			if err := parseName("tenant", args[0]); err != nil {
				return err
			}
			setRoles, setClusters := cmd.Flags().Changed("admin-roles"), cmd.Flags().Changed("allowed-clusters")
			if !setRoles && !setClusters {
				return usageError{errors.New("nothing to update: give --admin-roles and/or --allowed-clusters")}
			}
			return a.do(cmd, "update tenant "+args[0], func(ctx context.Context, c pulsaradmin.Client) error {
				td, err := c.Tenants().GetWithContext(ctx, args[0])
				if err != nil {
					return err
				}
				td.Name = args[0]
				if setRoles {
					td.AdminRoles = splitList(roles)
				}
				if setClusters {
					td.AllowedClusters = splitList(clusters)
				}
				if td.AdminRoles == nil {
					td.AdminRoles = []string{}
				}
				if td.AllowedClusters == nil {
					td.AllowedClusters = []string{}
				}
				if err := c.Tenants().UpdateWithContext(ctx, td); err != nil {
					return err
				}
				done(cmd, "updated tenant %s", args[0])
				return nil
			})
		})),
		verb("delete <tenant>", "Delete a tenant (it must have no namespaces)", func(cmd *cobra.Command, args []string) error {
			if err := parseName("tenant", args[0]); err != nil {
				return err
			}
			if err := a.do(cmd, "delete tenant "+args[0], func(ctx context.Context, c pulsaradmin.Client) error {
				return c.Tenants().DeleteWithContext(ctx, args[0])
			}); err != nil {
				return err
			}
			done(cmd, "deleted tenant %s", args[0])
			return nil
		}),
	)
	return cmd
}
