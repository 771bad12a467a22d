package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

func (a *adminCmd) brokersCmd() *cobra.Command {
	cmd := group("brokers", "List brokers, check their health and change their dynamic configuration")
	var asJSON bool
	var name, value string
	update := verb("update-dynamic-config", "Set a dynamic setting for every broker of the region", func(cmd *cobra.Command, _ []string) error {
		if name == "" || !cmd.Flags().Changed("value") {
			return usageError{errors.New("--config and --value: required")}
		}
		// The value is one path segment: a '/' in it is sent escaped,
		// which pulsaradmin's UpdateDynamicConfiguration does not do.
		base, err := url.Parse(strings.TrimRight(a.url, "/"))
		if err != nil {
			return usageError{err}
		}
		p := "/admin/v2/brokers/configuration/" + name + "/" + value
		u := *base
		u.Path, u.RawPath = base.Path+p, base.EscapedPath()+"/admin/v2/brokers/configuration/"+url.PathEscape(name)+"/"+url.PathEscape(value)
		if err := a.doREST(cmd, "update dynamic configuration "+name, func(ctx context.Context, c *rest.Client) error {
			resp, err := c.MakeRequestWithURLWithContext(ctx, http.MethodPost, &u)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}); err != nil {
			return err
		}
		done(cmd, "set %s to %s", name, value)
		return nil
	})
	update.Flags().StringVar(&name, "config", "", "the setting's name (list-dynamic-config lists them) (required)")
	update.Flags().StringVar(&value, "value", "", "its value (required)")
	del := verb("delete-dynamic-config", "Return a dynamic setting to its default", func(cmd *cobra.Command, _ []string) error {
		if name == "" {
			return usageError{errors.New("--config: required")}
		}
		if err := a.do(cmd, "delete dynamic configuration "+name, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Brokers().DeleteDynamicConfigurationWithContext(ctx, name)
		}); err != nil {
			return err
		}
		done(cmd, "deleted %s", name)
		return nil
	})
	del.Flags().StringVar(&name, "config", "", "the setting's name (required)")
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
		readVerb("list-active", "List the active brokers of the cluster the admin URL serves (host:port)", &asJSON, func(cmd *cobra.Command, _ []string) error {
			var names []string
			if err := a.do(cmd, "list active brokers", func(ctx context.Context, c pulsaradmin.Client) (err error) {
				names, err = c.Brokers().GetListActiveBrokersWithContext(ctx)
				return err
			}); err != nil {
				return err
			}
			slices.Sort(names)
			return showList(cmd, asJSON, names)
		}),
		readVerb("leader-broker", "Show the region's leader broker", &asJSON, func(cmd *cobra.Command, _ []string) error {
			var l utils.BrokerInfo
			if err := a.do(cmd, "get the leader broker", func(ctx context.Context, c pulsaradmin.Client) (err error) {
				l, err = c.Brokers().GetLeaderBrokerWithContext(ctx)
				return err
			}); err != nil {
				return err
			}
			return show(cmd, asJSON, l, func(w io.Writer) { fmt.Fprintf(w, "%s\t%s\n", l.BrokerID, l.ServiceURL) })
		}),
		readVerb("load-report", "Show the load report of the broker the admin URL reaches (pulsar-admin broker-stats load-report)", &asJSON, func(cmd *cobra.Command, _ []string) error {
			var rep *utils.LocalBrokerData
			if err := a.do(cmd, "get the load report", func(ctx context.Context, c pulsaradmin.Client) (err error) {
				rep, err = c.BrokerStats().GetLoadReportWithContext(ctx)
				return err
			}); err != nil {
				return err
			}
			return show(cmd, asJSON, rep, func(w io.Writer) {
				fmt.Fprintf(w, "broker\t%s\n", rep.WebServiceURL)
				fmt.Fprintf(w, "cpu\t%.1f%%\n", rep.CPU.Usage)
				fmt.Fprintf(w, "msgRateIn\t%.1f\nmsgRateOut\t%.1f\n", rep.MsgRateIn, rep.MsgRateOut)
				fmt.Fprintf(w, "msgThroughputIn\t%.1f\nmsgThroughputOut\t%.1f\n", rep.MsgThroughputIn, rep.MsgThroughputOut)
				fmt.Fprintf(w, "topics\t%d\nbundles\t%d\n", rep.NumTopics, rep.NumBundles)
				for _, b := range rep.Bundles {
					st := rep.LastStats[b]
					if st == nil {
						st = &utils.NamespaceBundleStats{}
					}
					fmt.Fprintf(w, "bundle\t%s\ttopics=%d\tmsgRateIn=%.1f\tmsgRateOut=%.1f\n", b, st.TopicsNum, st.MsgRateIn, st.MsgRateOut)
				}
			})
		}),
		readVerb("list-dynamic-config", "List the settings that may be changed at run time", &asJSON, func(cmd *cobra.Command, _ []string) error {
			var names []string
			if err := a.do(cmd, "list dynamic configuration names", func(ctx context.Context, c pulsaradmin.Client) (err error) {
				names, err = c.Brokers().GetDynamicConfigurationNamesWithContext(ctx)
				return err
			}); err != nil {
				return err
			}
			return showList(cmd, asJSON, names)
		}),
		readVerb("get-all-dynamic-config", "Show the dynamic settings set in the region", &asJSON, func(cmd *cobra.Command, _ []string) error {
			return a.showConfig(cmd, asJSON, "get dynamic configuration", func(ctx context.Context, c pulsaradmin.Client) (map[string]string, error) {
				return c.Brokers().GetAllDynamicConfigurationsWithContext(ctx)
			})
		}),
		readVerb("get-runtime-config", "Show the value in effect of every dynamic setting on this broker", &asJSON, func(cmd *cobra.Command, _ []string) error {
			return a.showConfig(cmd, asJSON, "get runtime configuration", func(ctx context.Context, c pulsaradmin.Client) (map[string]string, error) {
				return c.Brokers().GetRuntimeConfigurationsWithContext(ctx)
			})
		}),
		update,
		del,
	)
	return cmd
}

// showConfig prints a configuration map, one name and value a line.
func (a *adminCmd) showConfig(cmd *cobra.Command, asJSON bool, op string, get func(ctx context.Context, c pulsaradmin.Client) (map[string]string, error)) error {
	var m map[string]string
	if err := a.do(cmd, op, func(ctx context.Context, c pulsaradmin.Client) (err error) {
		m, err = get(ctx, c)
		return err
	}); err != nil {
		return err
	}
	if m == nil {
		m = map[string]string{}
	}
	return show(cmd, asJSON, m, func(w io.Writer) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(w, "%s\t%s\n", k, m[k])
		}
	})
}
