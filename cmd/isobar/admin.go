package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

const defaultAdminURL = "http://localhost:8080"

// adminCmd holds what every `isobar admin` verb shares: the admin URL.
type adminCmd struct {
	url string
}

// newAdminCmd is `isobar admin <noun> <verb>`, shaped like pulsar-admin:
// it talks to the Pulsar v2 admin REST API of any broker (docs/admin.md).
// Results go to stdout (--json on every read), confirmations and errors
// to stderr; bad arguments exit 2, refusals by the server exit 1.
func newAdminCmd() *cobra.Command {
	a := &adminCmd{}
	cmd := group("admin", "Administer clusters, tenants, namespaces and topics over the admin REST API (like pulsar-admin)")
	cmd.PersistentFlags().StringVar(&a.url, "admin-url", envOr("ISOBAR_ADMIN_URL", defaultAdminURL), "admin REST URL of a broker (env ISOBAR_ADMIN_URL)")
	cmd.AddCommand(a.clustersCmd(), a.tenantsCmd(), a.namespacesCmd(), a.topicsCmd(), a.brokersCmd())
	return cmd
}

// group is a noun: it only holds verbs, and anything else is a usage error.
func group(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var verbs []string
			for _, c := range cmd.Commands() {
				if c.IsAvailableCommand() {
					verbs = append(verbs, c.Name())
				}
			}
			if len(args) == 0 {
				return usageError{fmt.Errorf("%s: missing command; one of: %s", cmd.CommandPath(), strings.Join(verbs, ", "))}
			}
			return usageError{fmt.Errorf("%s: unknown command %q; one of: %s", cmd.CommandPath(), args[0], strings.Join(verbs, ", "))}
		},
	}
}

// verb is a leaf command taking exactly the named positional arguments.
func verb(use, short string, run func(cmd *cobra.Command, args []string) error) *cobra.Command {
	names := strings.Fields(use)[1:]
	var want []string
	for _, n := range names {
		if strings.HasPrefix(n, "<") {
			want = append(want, n)
		}
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != len(want) {
				if len(want) == 0 {
					return usageError{fmt.Errorf("takes no arguments, got %d", len(args))}
				}
				return usageError{fmt.Errorf("want %s, got %d arguments", strings.Join(want, " "), len(args))}
			}
			return nil
		},
		RunE: run,
	}
}

// readVerb is a verb with --json.
func readVerb(use, short string, asJSON *bool, run func(cmd *cobra.Command, args []string) error) *cobra.Command {
	c := verb(use, short, run)
	c.Flags().BoolVar(asJSON, "json", false, "print the result as JSON")
	return c
}

// client builds the admin client; a bad URL is a usage error.
func (a *adminCmd) client() (pulsaradmin.Client, error) {
	if err := validateAdminURL(a.url); err != nil {
		return nil, usageError{err}
	}
	c, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: strings.TrimRight(a.url, "/")})
	if err != nil {
		return nil, fmt.Errorf("admin client for %s: %w", a.url, err)
	}
	return c, nil
}

// do runs one request against the admin API and names op in its error.
func (a *adminCmd) do(cmd *cobra.Command, op string, f func(ctx context.Context, c pulsaradmin.Client) error) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	if err := f(cmd.Context(), c); err != nil {
		return adminErr(op, err)
	}
	return nil
}

// adminError is an answer of the admin API other than success: the HTTP
// status and the server's {"reason": ...}.
type adminError struct {
	Op     string
	Status int
	Reason string
}

func (e *adminError) Error() string {
	status := fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
	if e.Reason == "" || e.Reason == status {
		return fmt.Sprintf("%s: HTTP %s", e.Op, status)
	}
	return fmt.Sprintf("%s: HTTP %s: %s", e.Op, status, e.Reason)
}

func adminErr(op string, err error) error {
	var re rest.Error
	if errors.As(err, &re) {
		return &adminError{Op: op, Status: re.Code, Reason: strings.TrimSpace(re.Reason)}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// done confirms a change on stderr; stdout carries only results.
func done(cmd *cobra.Command, format string, args ...any) {
	fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...)
}

// show prints v as JSON or, otherwise, in human form.
func show(cmd *cobra.Command, asJSON bool, v any, human func(w io.Writer)) error {
	w := cmd.OutOrStdout()
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	human(tw)
	return tw.Flush()
}

// showList prints names one a line, or a JSON array (never null).
func showList(cmd *cobra.Command, asJSON bool, names []string) error {
	if names == nil {
		names = []string{}
	}
	return show(cmd, asJSON, names, func(w io.Writer) {
		for _, n := range names {
			fmt.Fprintln(w, n)
		}
	})
}

// ---- argument parsing (all failures are usage errors)

func parseNamespace(s string) (string, error) {
	ns, err := utils.GetNamespaceName(s)
	if err != nil {
		return "", usageError{fmt.Errorf("namespace %q: want tenant/namespace (%v)", s, err)}
	}
	return ns.String(), nil
}

func parseTopic(s string) (utils.TopicName, error) {
	if _, err := restTopicPath(s); err != nil {
		return utils.TopicName{}, usageError{err}
	}
	t, err := utils.GetTopicName(s)
	if err != nil {
		return utils.TopicName{}, usageError{fmt.Errorf("topic %q: %v", s, err)}
	}
	return *t, nil
}

func parseName(kind, s string) error {
	if s == "" || !utils.CheckName(s) {
		return usageError{fmt.Errorf("%s %q: use letters, digits and -=:._", kind, s)}
	}
	return nil
}

// parseRelativeTime reads a time like pulsar-admin: a number with an
// optional unit s, m, h, d, w or y (no unit: seconds), or a Go duration
// ("1h30m"). It returns seconds.
func parseRelativeTime(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	units := map[byte]int64{'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 7 * 86400, 'y': 365 * 86400}
	num, mul := s, int64(1)
	if u, ok := units[s[len(s)-1]]; ok {
		num, mul = s[:len(s)-1], u
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		return n * mul, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a time like 30s, 10m, 1h, 2d, 1w", s)
	}
	return int64(d / time.Second), nil
}

// parseSize reads a size like pulsar-admin: a number with an optional unit
// k, m, g or t (powers of 1024; no unit: bytes). It returns bytes.
func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	units := map[byte]int64{'k': 1 << 10, 'm': 1 << 20, 'g': 1 << 30, 't': 1 << 40}
	num, mul := s, int64(1)
	if u, ok := units[strings.ToLower(s)[len(s)-1]]; ok {
		num, mul = s[:len(s)-1], u
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size like 500M, 10G, 1T", s)
	}
	return n * mul, nil
}

func splitList(v []string) []string {
	var out []string
	for _, s := range v {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func orNone(v []string) string {
	if len(v) == 0 {
		return "(none)"
	}
	return strings.Join(v, ", ")
}

// ---- clusters

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

// ---- tenants

func (a *adminCmd) tenantsCmd() *cobra.Command {
	cmd := group("tenants", "Create, inspect, update and delete tenants")
	var asJSON bool
	var roles, clusters []string
	tenantFlags := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringSliceVar(&roles, "admin-roles", nil, "admin roles, comma-separated")
		c.Flags().StringSliceVar(&clusters, "allowed-clusters", nil, "clusters the tenant may use, comma-separated (create: default every cluster)")
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

// ---- namespaces

func (a *adminCmd) namespacesCmd() *cobra.Command {
	cmd := group("namespaces", "Create and delete namespaces, list their topics and set their policies")
	var asJSON bool
	// nsVerb is a verb on one namespace: it parses <tenant/namespace> first.
	nsVerb := func(c *cobra.Command, run func(cmd *cobra.Command, ns string) error) *cobra.Command {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			ns, err := parseNamespace(args[0])
			if err != nil {
				return err
			}
			return run(cmd, ns)
		}
		return c
	}
	var createClusters []string
	create := nsVerb(verb("create <tenant/namespace>", "Create a namespace", nil), func(cmd *cobra.Command, ns string) error {
		cl := splitList(createClusters)
		if err := a.do(cmd, "create namespace "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			if len(cl) == 0 {
				return c.Namespaces().CreateNamespaceWithContext(ctx, ns)
			}
			p := utils.NewDefaultPolicies()
			p.ReplicationClusters = cl
			return c.Namespaces().CreateNsWithPolicesWithContext(ctx, ns, *p)
		}); err != nil {
			return err
		}
		done(cmd, "created namespace %s", ns)
		return nil
	})
	create.Flags().StringSliceVar(&createClusters, "clusters", nil, "replication clusters, comma-separated (default: the broker's cluster)")

	var retTime, retSize string
	setRetention := nsVerb(verb("set-retention <tenant/namespace>", "Keep acknowledged messages for a time and/or size (-1: unlimited)", nil), func(cmd *cobra.Command, ns string) error {
		rp, err := retentionFlags(retTime, retSize)
		if err != nil {
			return err
		}
		if err := a.do(cmd, "set retention of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().SetRetentionWithContext(ctx, ns, rp)
		}); err != nil {
			return err
		}
		done(cmd, "set retention of %s to %s", ns, formatRetention(&rp))
		return nil
	})
	setRetention.Flags().StringVar(&retTime, "time", "", "retention time: 30m, 12h, 7d, 1w, -1 for unlimited, 0 for none (required)")
	setRetention.Flags().StringVar(&retSize, "size", "", "retention size: 500M, 10G, 1T, -1 for unlimited, 0 for none (required)")

	var ttl string
	setTTL := nsVerb(verb("set-message-ttl <tenant/namespace>", "Expire unacknowledged messages after a time", nil), func(cmd *cobra.Command, ns string) error {
		secs, err := parseRelativeTime(ttl)
		if err != nil {
			return usageError{fmt.Errorf("--ttl: %v", err)}
		}
		if secs > 1<<31-1 {
			return usageError{fmt.Errorf("--ttl: %q is too long", ttl)}
		}
		if err := a.do(cmd, "set message TTL of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().SetNamespaceMessageTTLWithContext(ctx, ns, int(secs))
		}); err != nil {
			return err
		}
		done(cmd, "set message TTL of %s to %ds", ns, secs)
		return nil
	})
	setTTL.Flags().StringVar(&ttl, "ttl", "", "time to live: seconds, or 30m, 1h, 2d (0: never expire) (required)")

	var enable, disable bool
	onOff := func(c *cobra.Command) *cobra.Command {
		c.Flags().BoolVar(&enable, "enable", false, "turn it on")
		c.Flags().BoolVar(&disable, "disable", false, "turn it off")
		return c
	}
	enabled := func() (bool, error) {
		if enable == disable {
			return false, usageError{errors.New("give exactly one of --enable and --disable")}
		}
		return enable, nil
	}
	setDedup := onOff(nsVerb(verb("set-deduplication <tenant/namespace>", "Turn message deduplication on or off", nil), func(cmd *cobra.Command, ns string) error {
		on, err := enabled()
		if err != nil {
			return err
		}
		if err := a.do(cmd, "set deduplication of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().SetDeduplicationStatusWithContext(ctx, ns, on)
		}); err != nil {
			return err
		}
		done(cmd, "set deduplication of %s to %t", ns, on)
		return nil
	}))

	var topicType string
	var numPartitions int
	setAuto := onOff(nsVerb(verb("set-auto-topic-creation <tenant/namespace>", "Allow or forbid creating topics on first use, overriding the broker", nil), func(cmd *cobra.Command, ns string) error {
		on, err := enabled()
		if err != nil {
			return err
		}
		cfg := utils.TopicAutoCreationConfig{Allow: on}
		if on {
			var errs []error
			tt, err := utils.ParseTopicType(topicType)
			if err != nil {
				errs = append(errs, fmt.Errorf("--type: %q is not partitioned or non-partitioned", topicType))
			}
			cfg.Type = tt
			switch {
			case tt == utils.Partitioned && numPartitions < 1:
				errs = append(errs, fmt.Errorf("--num-partitions: %d must be at least 1 for partitioned topics", numPartitions))
			case tt == utils.Partitioned:
				cfg.Partitions = &numPartitions
			case cmd.Flags().Changed("num-partitions") && err == nil:
				errs = append(errs, errors.New("--num-partitions: only with --type partitioned"))
			}
			if err := errors.Join(errs...); err != nil {
				return usageError{err}
			}
		} else if cmd.Flags().Changed("type") || cmd.Flags().Changed("num-partitions") {
			return usageError{errors.New("--type and --num-partitions: only with --enable")}
		}
		nsn, _ := utils.GetNamespaceName(ns)
		if err := a.do(cmd, "set auto topic creation of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().SetTopicAutoCreationWithContext(ctx, *nsn, cfg)
		}); err != nil {
			return err
		}
		done(cmd, "set auto topic creation of %s to %s", ns, formatAutoCreation(&cfg))
		return nil
	}))
	setAuto.Flags().StringVar(&topicType, "type", string(utils.NonPartitioned), "type of auto-created topics: partitioned or non-partitioned")
	setAuto.Flags().IntVar(&numPartitions, "num-partitions", 0, "partitions of auto-created partitioned topics")

	var setClustersList []string
	setClusters := nsVerb(verb("set-clusters <tenant/namespace>", "Set the clusters a namespace replicates to", nil), func(cmd *cobra.Command, ns string) error {
		cl := splitList(setClustersList)
		if len(cl) == 0 {
			return usageError{errors.New("--clusters: at least one cluster is required")}
		}
		if err := a.do(cmd, "set clusters of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().SetNamespaceReplicationClustersWithContext(ctx, ns, cl)
		}); err != nil {
			return err
		}
		done(cmd, "set replication clusters of %s to %s", ns, strings.Join(cl, ", "))
		return nil
	})
	setClusters.Flags().StringSliceVar(&setClustersList, "clusters", nil, "replication clusters, comma-separated (required)")

	cmd.AddCommand(
		readVerb("list <tenant>", "List a tenant's namespaces", &asJSON, func(cmd *cobra.Command, args []string) error {
			if err := parseName("tenant", args[0]); err != nil {
				return err
			}
			var names []string
			if err := a.do(cmd, "list namespaces of "+args[0], func(ctx context.Context, c pulsaradmin.Client) (err error) {
				names, err = c.Namespaces().GetNamespacesWithContext(ctx, args[0])
				return err
			}); err != nil {
				return err
			}
			return showList(cmd, asJSON, names)
		}),
		nsVerb(readVerb("get-policies <tenant/namespace>", "Show a namespace's policies", &asJSON, nil), func(cmd *cobra.Command, ns string) error {
			var p *utils.Policies
			if err := a.do(cmd, "get policies of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
				p, err = c.Namespaces().GetPoliciesWithContext(ctx, ns)
				return err
			}); err != nil {
				return err
			}
			return show(cmd, asJSON, p, func(w io.Writer) { printPolicies(w, p) })
		}),
		create,
		nsVerb(verb("delete <tenant/namespace>", "Delete a namespace (it must have no topics)", nil), func(cmd *cobra.Command, ns string) error {
			if err := a.do(cmd, "delete namespace "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
				return c.Namespaces().DeleteNamespaceWithContext(ctx, ns)
			}); err != nil {
				return err
			}
			done(cmd, "deleted namespace %s", ns)
			return nil
		}),
		nsVerb(readVerb("topics <tenant/namespace>", "List a namespace's persistent topics (partitions included)", &asJSON, nil), func(cmd *cobra.Command, ns string) error {
			var names []string
			if err := a.do(cmd, "list topics of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
				names, err = c.Namespaces().GetTopicsWithContext(ctx, ns)
				return err
			}); err != nil {
				return err
			}
			return showList(cmd, asJSON, names)
		}),
		setRetention,
		nsVerb(readVerb("get-retention <tenant/namespace>", "Show a namespace's retention (null when not set)", &asJSON, nil), func(cmd *cobra.Command, ns string) error {
			p, err := a.policies(cmd, "get retention of "+ns, ns)
			if err != nil {
				return err
			}
			rp := p.RetentionPolicies
			return show(cmd, asJSON, rp, func(w io.Writer) { fmt.Fprintln(w, formatRetention(rp)) })
		}),
		setTTL,
		nsVerb(readVerb("get-message-ttl <tenant/namespace>", "Show a namespace's message TTL in seconds (null when not set)", &asJSON, nil), func(cmd *cobra.Command, ns string) error {
			var secs int
			if err := a.do(cmd, "get message TTL of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
				secs, err = c.Namespaces().GetNamespaceMessageTTLWithContext(ctx, ns)
				return err
			}); err != nil {
				return err
			}
			var v *int // pulsaradmin leaves -1 when the server answers null
			if secs >= 0 {
				v = &secs
			}
			return show(cmd, asJSON, v, func(w io.Writer) {
				if v == nil {
					fmt.Fprintln(w, "not set")
				} else {
					fmt.Fprintln(w, *v)
				}
			})
		}),
		setDedup,
		setAuto,
		nsVerb(readVerb("get-auto-topic-creation <tenant/namespace>", "Show a namespace's auto topic creation override (null when not set)", &asJSON, nil), func(cmd *cobra.Command, ns string) error {
			p, err := a.policies(cmd, "get auto topic creation of "+ns, ns)
			if err != nil {
				return err
			}
			cfg := p.TopicAutoCreationConfig
			return show(cmd, asJSON, cfg, func(w io.Writer) { fmt.Fprintln(w, formatAutoCreation(cfg)) })
		}),
		setClusters,
		nsVerb(readVerb("get-clusters <tenant/namespace>", "Show the clusters a namespace replicates to", &asJSON, nil), func(cmd *cobra.Command, ns string) error {
			var names []string
			if err := a.do(cmd, "get clusters of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
				names, err = c.Namespaces().GetNamespaceReplicationClustersWithContext(ctx, ns)
				return err
			}); err != nil {
				return err
			}
			return showList(cmd, asJSON, names)
		}),
	)
	return cmd
}

// policies reads a namespace's policies. The retention and auto topic
// creation getters read them from here: pulsaradmin turns the server's
// `null` (not set) from .../retention and .../autoTopicCreation into a
// zero value, which would read as "retain nothing" and "disabled".
func (a *adminCmd) policies(cmd *cobra.Command, op, ns string) (*utils.Policies, error) {
	var p *utils.Policies
	err := a.do(cmd, op, func(ctx context.Context, c pulsaradmin.Client) (err error) {
		p, err = c.Namespaces().GetPoliciesWithContext(ctx, ns)
		return err
	})
	if err == nil && p == nil {
		p = &utils.Policies{}
	}
	return p, err
}

// retentionFlags turns --time and --size into retention policies.
func retentionFlags(timeStr, sizeStr string) (utils.RetentionPolicies, error) {
	var errs []error
	var rp utils.RetentionPolicies
	switch timeStr {
	case "":
		errs = append(errs, errors.New("--time: required (-1 for unlimited)"))
	case "-1":
		rp.RetentionTimeInMinutes = -1
	default:
		secs, err := parseRelativeTime(timeStr)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--time: %v", err))
		case secs != 0 && secs < 60:
			errs = append(errs, fmt.Errorf("--time: %q is under a minute, the unit of retention", timeStr))
		case secs/60 > 1<<31-1:
			errs = append(errs, fmt.Errorf("--time: %q is too long", timeStr))
		default:
			rp.RetentionTimeInMinutes = int(secs / 60)
		}
	}
	switch sizeStr {
	case "":
		errs = append(errs, errors.New("--size: required (-1 for unlimited)"))
	case "-1":
		rp.RetentionSizeInMB = -1
	default:
		b, err := parseSize(sizeStr)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--size: %v", err))
		case b != 0 && b < 1<<20:
			errs = append(errs, fmt.Errorf("--size: %q is under 1M, the unit of retention", sizeStr))
		default:
			rp.RetentionSizeInMB = b >> 20
		}
	}
	if err := errors.Join(errs...); err != nil {
		return rp, usageError{err}
	}
	return rp, nil
}

func formatRetention(rp *utils.RetentionPolicies) string {
	if rp == nil {
		return "not set"
	}
	t, s := "unlimited", "unlimited"
	if rp.RetentionTimeInMinutes >= 0 {
		t = fmt.Sprintf("%d minutes", rp.RetentionTimeInMinutes)
	}
	if rp.RetentionSizeInMB >= 0 {
		s = fmt.Sprintf("%d MB", rp.RetentionSizeInMB)
	}
	return "time " + t + ", size " + s
}

func formatAutoCreation(cfg *utils.TopicAutoCreationConfig) string {
	switch {
	case cfg == nil:
		return "not set (the broker's default)"
	case !cfg.Allow:
		return "disabled"
	case cfg.Type == utils.Partitioned && cfg.Partitions != nil:
		return fmt.Sprintf("enabled, partitioned with %d partitions", *cfg.Partitions)
	}
	return "enabled, " + string(cfg.Type)
}

func printPolicies(w io.Writer, p *utils.Policies) {
	if p == nil {
		fmt.Fprintln(w, "no policies")
		return
	}
	fmt.Fprintf(w, "replication clusters:\t%s\n", orNone(p.ReplicationClusters))
	if p.Bundles != nil {
		fmt.Fprintf(w, "bundles:\t%d\n", p.Bundles.NumBundles)
	}
	fmt.Fprintf(w, "retention:\t%s\n", formatRetention(p.RetentionPolicies))
	if p.MessageTTLInSeconds != nil {
		fmt.Fprintf(w, "message TTL:\t%ds\n", *p.MessageTTLInSeconds)
	} else {
		fmt.Fprintf(w, "message TTL:\tnot set\n")
	}
	if p.DeduplicationEnabled != nil {
		fmt.Fprintf(w, "deduplication:\t%t\n", *p.DeduplicationEnabled)
	} else {
		fmt.Fprintf(w, "deduplication:\tnot set\n")
	}
	fmt.Fprintf(w, "auto topic creation:\t%s\n", formatAutoCreation(p.TopicAutoCreationConfig))
	types := make([]string, 0, len(p.BacklogQuotaMap))
	for t := range p.BacklogQuotaMap {
		types = append(types, string(t))
	}
	slices.Sort(types)
	for _, t := range types {
		q := p.BacklogQuotaMap[utils.BacklogQuotaType(t)]
		fmt.Fprintf(w, "backlog quota %s:\tsize %d, time %ds, policy %s\n", t, q.LimitSize, q.LimitTime, q.Policy)
	}
}

// ---- topics

func (a *adminCmd) topicsCmd() *cobra.Command {
	cmd := group("topics", "Create, delete and inspect topics and their subscriptions")
	var asJSON bool
	// tVerb is a verb on one topic: it parses <topic> first.
	tVerb := func(c *cobra.Command, run func(cmd *cobra.Command, t utils.TopicName) error) *cobra.Command {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			t, err := parseTopic(args[0])
			if err != nil {
				return err
			}
			return run(cmd, t)
		}
		return c
	}
	// simple runs one change on a topic and confirms it.
	simple := func(use, short, what, did string, f func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName) error) *cobra.Command {
		return tVerb(verb(use, short, nil), func(cmd *cobra.Command, t utils.TopicName) error {
			if err := a.do(cmd, what+" "+t.String(), func(ctx context.Context, c pulsaradmin.Client) error {
				return f(ctx, c, t)
			}); err != nil {
				return err
			}
			done(cmd, "%s %s", did, t.String())
			return nil
		})
	}
	var partitions int
	partitionsFlag := func(c *cobra.Command) *cobra.Command {
		c.Flags().IntVarP(&partitions, "partitions", "p", 0, "number of partitions (required, at least 1)")
		return c
	}
	checkPartitions := func() error {
		if partitions < 1 {
			return usageError{fmt.Errorf("-p/--partitions: %d must be at least 1", partitions)}
		}
		return nil
	}
	var force, perPartition bool
	// Verbs share a variable only where their flags share the default:
	// only the running verb's flags are parsed.
	var sub, msgID, resetID, resetTime string
	var skipN int64
	subFlag := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringVarP(&sub, "subscription", "s", "", "subscription name (required)")
		return c
	}
	past := func(s string) func() string { return func() string { return s } }
	// subVerb is a verb on one subscription of a topic; did says what it
	// did, once the flags are parsed.
	subVerb := func(use, short, what string, did func() string, validate func(cmd *cobra.Command) error, f func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName) error) *cobra.Command {
		return subFlag(tVerb(verb(use, short, nil), func(cmd *cobra.Command, t utils.TopicName) error {
			var errs []error
			if sub == "" {
				errs = append(errs, errors.New("-s/--subscription: required"))
			}
			if validate != nil {
				if err := validate(cmd); err != nil {
					errs = append(errs, err)
				}
			}
			if err := errors.Join(errs...); err != nil {
				return usageError{err}
			}
			op := fmt.Sprintf("%s subscription %s on %s", what, sub, t.String())
			if err := a.do(cmd, op, func(ctx context.Context, c pulsaradmin.Client) error { return f(ctx, c, t) }); err != nil {
				return err
			}
			done(cmd, "%s subscription %s on %s", did(), sub, t.String())
			return nil
		}))
	}

	del := simple("delete <topic>", "Delete a non-partitioned topic (--force: even with producers, consumers or subscriptions)", "delete topic", "deleted topic",
		func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName) error {
			return c.Topics().DeleteWithContext(ctx, t, force, true)
		})
	del.Flags().BoolVar(&force, "force", false, "delete even if it has producers, consumers or subscriptions")
	delPart := simple("delete-partitioned-topic <topic>", "Delete a partitioned topic and its partitions", "delete partitioned topic", "deleted partitioned topic",
		func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName) error {
			return c.Topics().DeleteWithContext(ctx, t, force, false)
		})
	delPart.Flags().BoolVar(&force, "force", false, "delete even if partitions have producers, consumers or subscriptions")

	partStats := tVerb(readVerb("partitioned-stats <topic>", "Show a partitioned topic's aggregate stats", &asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var st utils.PartitionedTopicStats
		if err := a.do(cmd, "get partitioned stats of "+t.String(), func(ctx context.Context, c pulsaradmin.Client) (err error) {
			st, err = c.Topics().GetPartitionedStatsWithContext(ctx, t, perPartition)
			return err
		}); err != nil {
			return err
		}
		return show(cmd, asJSON, st, func(w io.Writer) { printPartitionedStats(w, t, &st) })
	})
	partStats.Flags().BoolVar(&perPartition, "per-partition", false, "also show each partition's stats")

	createSub := subVerb("create-subscription <topic>", "Create a durable subscription at a position", "create", past("created"),
		func(*cobra.Command) error { _, err := parseSubPosition(msgID); return err },
		func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName) error {
			id, _ := parseSubPosition(msgID)
			return c.Subscriptions().CreateWithContext(ctx, t, sub, id)
		})
	createSub.Flags().StringVarP(&msgID, "messageId", "m", "latest", "where it starts: latest, earliest or ledger:entry")

	unsub := subVerb("unsubscribe <topic>", "Delete a subscription (--force: even with consumers)", "delete", past("deleted"), nil,
		func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName) error {
			if force {
				return c.Subscriptions().ForceDeleteWithContext(ctx, t, sub)
			}
			return c.Subscriptions().DeleteWithContext(ctx, t, sub)
		})
	unsub.Flags().BoolVar(&force, "force", false, "disconnect its consumers and delete it")

	skip := subVerb("skip <topic>", "Skip the next N messages of a subscription", "skip messages of", func() string { return fmt.Sprintf("skipped %d messages of", skipN) },
		func(*cobra.Command) error {
			if skipN < 1 {
				return fmt.Errorf("-n/--count: %d must be at least 1", skipN)
			}
			return nil
		},
		func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName) error {
			return c.Subscriptions().SkipMessagesWithContext(ctx, t, sub, skipN)
		})
	skip.Flags().Int64VarP(&skipN, "count", "n", 0, "number of messages to skip (required)")

	reset := subVerb("reset-cursor <topic>", "Move a subscription back (or forward) to a time or a message id", "reset cursor of", past("reset the cursor of"),
		func(*cobra.Command) error {
			switch {
			case (resetTime == "") == (resetID == ""):
				return errors.New("give exactly one of --time and --messageId")
			case resetTime != "":
				_, err := parseRelativeTime(resetTime)
				if err != nil {
					return fmt.Errorf("--time: %v", err)
				}
			default:
				if _, err := utils.ParseMessageID(resetID); err != nil {
					return fmt.Errorf("--messageId: %q is not ledger:entry", resetID)
				}
			}
			return nil
		},
		func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName) error {
			if resetTime != "" {
				secs, _ := parseRelativeTime(resetTime)
				at := time.Now().Add(-time.Duration(secs) * time.Second)
				return c.Subscriptions().ResetCursorToTimestampWithContext(ctx, t, sub, at.UnixMilli())
			}
			id, _ := utils.ParseMessageID(resetID)
			return c.Subscriptions().ResetCursorToMessageIDWithContext(ctx, t, sub, *id)
		})
	reset.Flags().StringVarP(&resetTime, "time", "t", "", "reset to this long ago: 30s, 10m, 2h, 1d")
	reset.Flags().StringVarP(&resetID, "messageId", "m", "", "reset to this message id: ledger:entry")

	cmd.AddCommand(
		readVerb("list <tenant/namespace>", "List a namespace's topics: partitioned and non-partitioned (with partitions)", &asJSON, func(cmd *cobra.Command, args []string) error {
			ns, err := parseNamespace(args[0])
			if err != nil {
				return err
			}
			nsn, _ := utils.GetNamespaceName(ns)
			var parted, plain []string
			if err := a.do(cmd, "list topics of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
				parted, plain, err = c.Topics().ListWithContext(ctx, *nsn)
				return err
			}); err != nil {
				return err
			}
			slices.Sort(parted)
			slices.Sort(plain)
			out := struct {
				Partitioned    []string `json:"partitioned"`
				NonPartitioned []string `json:"nonPartitioned"`
			}{append([]string{}, parted...), append([]string{}, plain...)}
			return show(cmd, asJSON, out, func(w io.Writer) {
				for _, n := range out.Partitioned {
					fmt.Fprintf(w, "%s\tpartitioned\n", n)
				}
				for _, n := range out.NonPartitioned {
					fmt.Fprintf(w, "%s\t\n", n)
				}
			})
		}),
		simple("create <topic>", "Create a non-partitioned topic", "create topic", "created topic",
			func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName) error {
				return c.Topics().CreateWithContext(ctx, t, 0)
			}),
		partitionsFlag(tVerb(verb("create-partitioned-topic <topic>", "Create a partitioned topic", nil), func(cmd *cobra.Command, t utils.TopicName) error {
			if err := checkPartitions(); err != nil {
				return err
			}
			if err := a.do(cmd, "create partitioned topic "+t.String(), func(ctx context.Context, c pulsaradmin.Client) error {
				return c.Topics().CreateWithContext(ctx, t, partitions)
			}); err != nil {
				return err
			}
			done(cmd, "created %s with %d partitions", t.String(), partitions)
			return nil
		})),
		partitionsFlag(tVerb(verb("update-partitioned-topic <topic>", "Raise a partitioned topic's partition count", nil), func(cmd *cobra.Command, t utils.TopicName) error {
			if err := checkPartitions(); err != nil {
				return err
			}
			if err := a.do(cmd, "update partitioned topic "+t.String(), func(ctx context.Context, c pulsaradmin.Client) error {
				return c.Topics().UpdateWithContext(ctx, t, partitions)
			}); err != nil {
				return err
			}
			done(cmd, "%s now has %d partitions", t.String(), partitions)
			return nil
		})),
		tVerb(readVerb("get-partitioned-topic-metadata <topic>", "Show a topic's partition count (0: not partitioned)", &asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
			var md utils.PartitionedTopicMetadata
			if err := a.do(cmd, "get partitioned topic metadata of "+t.String(), func(ctx context.Context, c pulsaradmin.Client) (err error) {
				md, err = c.Topics().GetMetadataWithContext(ctx, t)
				return err
			}); err != nil {
				return err
			}
			return show(cmd, asJSON, md, func(w io.Writer) { fmt.Fprintf(w, "partitions:\t%d\n", md.Partitions) })
		}),
		del,
		delPart,
		tVerb(readVerb("stats <topic>", "Show a topic's stats (a partitioned topic's aggregate)", &asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
			var st utils.TopicStats
			if err := a.do(cmd, "get stats of "+t.String(), func(ctx context.Context, c pulsaradmin.Client) (err error) {
				st, err = c.Topics().GetStatsWithContext(ctx, t)
				return err
			}); err != nil {
				return err
			}
			return show(cmd, asJSON, st, func(w io.Writer) { printTopicStats(w, t.String(), &st) })
		}),
		partStats,
		tVerb(readVerb("stats-internal <topic>", "Show a topic's ledgers and cursors", &asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
			var st utils.PersistentTopicInternalStats
			if err := a.do(cmd, "get internal stats of "+t.String(), func(ctx context.Context, c pulsaradmin.Client) (err error) {
				st, err = c.Topics().GetInternalStatsWithContext(ctx, t)
				return err
			}); err != nil {
				return err
			}
			return show(cmd, asJSON, st, func(w io.Writer) { printInternalStats(w, &st) })
		}),
		tVerb(readVerb("subscriptions <topic>", "List a topic's subscriptions", &asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
			var names []string
			if err := a.do(cmd, "list subscriptions of "+t.String(), func(ctx context.Context, c pulsaradmin.Client) (err error) {
				names, err = c.Subscriptions().ListWithContext(ctx, t)
				return err
			}); err != nil {
				return err
			}
			slices.Sort(names)
			return showList(cmd, asJSON, names)
		}),
		createSub,
		unsub,
		skip,
		subVerb("clear-backlog <topic>", "Skip every message of a subscription", "clear backlog of", past("cleared the backlog of"), nil,
			func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName) error {
				return c.Subscriptions().ClearBacklogWithContext(ctx, t, sub)
			}),
		reset,
		simple("unload <topic>", "Unload a topic (its owner closes it; the next user loads it again)", "unload topic", "unloaded topic",
			func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName) error {
				return c.Topics().UnloadWithContext(ctx, t)
			}),
		tVerb(readVerb("last-message-id <topic>", "Show the id (ledger:entry) of a topic's last message", &asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
			var id utils.MessageID
			if err := a.do(cmd, "get last message id of "+t.String(), func(ctx context.Context, c pulsaradmin.Client) (err error) {
				id, err = c.Topics().GetLastMessageIDWithContext(ctx, t)
				return err
			}); err != nil {
				return err
			}
			return show(cmd, asJSON, id, func(w io.Writer) { fmt.Fprintf(w, "%d:%d\n", id.LedgerID, id.EntryID) })
		}),
	)
	return cmd
}

// parseSubPosition reads --messageId of create-subscription.
func parseSubPosition(s string) (utils.MessageID, error) {
	switch strings.ToLower(s) {
	case "latest":
		return utils.Latest, nil
	case "earliest":
		return utils.Earliest, nil
	}
	id, err := utils.ParseMessageID(s)
	if err != nil {
		return utils.MessageID{}, fmt.Errorf("--messageId: %q is not latest, earliest or ledger:entry", s)
	}
	return *id, nil
}

func printTopicStats(w io.Writer, name string, st *utils.TopicStats) {
	fmt.Fprintf(w, "topic:\t%s\n", name)
	fmt.Fprintf(w, "msgRateIn / msgRateOut:\t%.2f / %.2f msg/s\n", st.MsgRateIn, st.MsgRateOut)
	fmt.Fprintf(w, "msgThroughputIn / Out:\t%.0f / %.0f B/s\n", st.MsgThroughputIn, st.MsgThroughputOut)
	fmt.Fprintf(w, "msgInCounter / msgOutCounter:\t%d / %d\n", st.MsgCounterIn, st.MsgCounterOut)
	fmt.Fprintf(w, "storageSize:\t%d B\n", st.StorageSize)
	fmt.Fprintf(w, "backlogSize:\t%d B\n", st.BacklogSize)
	fmt.Fprintf(w, "publishers:\t%d\n", len(st.Publishers))
	for _, p := range st.Publishers {
		fmt.Fprintf(w, "  %s\t%s, %.2f msg/s\n", p.ProducerName, p.Address, p.MsgRateIn)
	}
	printSubscriptions(w, st.Subscriptions)
}

func printSubscriptions(w io.Writer, subs map[string]utils.SubscriptionStats) {
	fmt.Fprintf(w, "subscriptions:\t%d\n", len(subs))
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		s := subs[n]
		fmt.Fprintf(w, "  %s\t%s, backlog %d, unacked %d, consumers %d, %.2f msg/s out\n",
			n, s.SubType, s.MsgBacklog, s.UnAckedMessages, len(s.Consumers), s.MsgRateOut)
	}
}

func printPartitionedStats(w io.Writer, t utils.TopicName, st *utils.PartitionedTopicStats) {
	fmt.Fprintf(w, "topic:\t%s\n", t.String())
	fmt.Fprintf(w, "partitions:\t%d\n", st.Metadata.Partitions)
	fmt.Fprintf(w, "msgRateIn / msgRateOut:\t%.2f / %.2f msg/s\n", st.MsgRateIn, st.MsgRateOut)
	fmt.Fprintf(w, "msgThroughputIn / Out:\t%.0f / %.0f B/s\n", st.MsgThroughputIn, st.MsgThroughputOut)
	fmt.Fprintf(w, "storageSize:\t%d B\n", st.StorageSize)
	fmt.Fprintf(w, "publishers:\t%d\n", len(st.Publishers))
	printSubscriptions(w, st.Subscriptions)
	names := make([]string, 0, len(st.Partitions))
	for n := range st.Partitions {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p := st.Partitions[n]
		fmt.Fprintf(w, "%s:\tin %d, out %d, storage %d B, %d publishers, %d subscriptions\n",
			n, p.MsgCounterIn, p.MsgCounterOut, p.StorageSize, len(p.Publishers), len(p.Subscriptions))
	}
}

func printInternalStats(w io.Writer, st *utils.PersistentTopicInternalStats) {
	fmt.Fprintf(w, "state:\t%s\n", st.State)
	fmt.Fprintf(w, "entriesAddedCounter:\t%d\n", st.EntriesAddedCounter)
	fmt.Fprintf(w, "numberOfEntries:\t%d\n", st.NumberOfEntries)
	fmt.Fprintf(w, "totalSize:\t%d B\n", st.TotalSize)
	fmt.Fprintf(w, "currentLedgerEntries:\t%d\n", st.CurrentLedgerEntries)
	fmt.Fprintf(w, "lastConfirmedEntry:\t%s\n", st.LastConfirmedEntry)
	fmt.Fprintf(w, "ledgers:\t%d\n", len(st.Ledgers))
	for _, l := range st.Ledgers {
		fmt.Fprintf(w, "  %d\t%d entries, %d B\n", l.LedgerID, l.Entries, l.Size)
	}
	fmt.Fprintf(w, "cursors:\t%d\n", len(st.Cursors))
	names := make([]string, 0, len(st.Cursors))
	for n := range st.Cursors {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		c := st.Cursors[n]
		fmt.Fprintf(w, "  %s\tmarkDelete %s, read %s, %s\n", n, c.MarkDeletePosition, c.ReadPosition, c.State)
	}
}

// ---- brokers

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
