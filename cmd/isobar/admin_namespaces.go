package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

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
	create.Flags().StringSliceVarP(&createClusters, "clusters", "c", nil, "replication clusters, comma-separated (default: the broker's cluster)")

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
	setRetention.Flags().StringVarP(&retTime, "time", "t", "", "retention time: 30m, 12h, 7d, 1w, -1 for unlimited, 0 for none (required)")
	setRetention.Flags().StringVarP(&retSize, "size", "s", "", "retention size: 500M, 10G, 1T, -1 for unlimited, 0 for none (required)")

	var ttl string
	setTTL := nsVerb(verb("set-message-ttl <tenant/namespace>", "Expire unacknowledged messages after a time", nil), func(cmd *cobra.Command, ns string) error {
		if ttl == "" {
			return usageError{errors.New("--messageTTL (-ttl): required")}
		}
		secs, err := parseRelativeTime(ttl)
		if err != nil {
			return usageError{fmt.Errorf("%s: %v", flagAs(cmd, "messageTTL", "ttl"), err)}
		}
		if secs > 1<<31-1 {
			return usageError{fmt.Errorf("%s: %q is too long", flagAs(cmd, "messageTTL", "ttl"), ttl)}
		}
		if err := a.do(cmd, "set message TTL of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().SetNamespaceMessageTTLWithContext(ctx, ns, int(secs))
		}); err != nil {
			return err
		}
		done(cmd, "set message TTL of %s to %ds", ns, secs)
		return nil
	})
	setTTL.Flags().StringVar(&ttl, "messageTTL", "", "time to live: seconds, or 30m, 1h, 2d (0: never expire); also -ttl (required)")
	alias(setTTL.Flags(), "messageTTL", "ttl")
	singleDash(setTTL, map[string]string{"ttl": "messageTTL"})

	var enable, disable bool
	onOff := func(c *cobra.Command) *cobra.Command {
		c.Flags().BoolVarP(&enable, "enable", "e", false, "turn it on")
		c.Flags().BoolVarP(&disable, "disable", "d", false, "turn it off")
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
	setAuto.Flags().StringVarP(&topicType, "type", "t", string(utils.NonPartitioned), "type of auto-created topics: partitioned or non-partitioned")
	setAuto.Flags().IntVarP(&numPartitions, "num-partitions", "n", 0, "partitions of auto-created partitioned topics")

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
	setClusters.Flags().StringSliceVarP(&setClustersList, "clusters", "c", nil, "replication clusters, comma-separated (required)")

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
	cmd.AddCommand(a.namespaceSettingVerbs(nsVerb, &asJSON)...)
	cmd.AddCommand(a.namespaceSchemaSecurityVerbs(nsVerb, &asJSON)...)
	cmd.AddCommand(a.namespaceRateVerbs(nsVerb, &asJSON)...)
	cmd.AddCommand(a.namespaceBacklogQuotaVerbs(nsVerb, &asJSON)...)
	cmd.AddCommand(a.primaryVerbs(nsVerb, &asJSON)...)
	cmd.AddCommand(a.namespacePermissionVerbs(nsVerb, &asJSON)...)
	cmd.AddCommand(a.namespaceOpVerbs(nsVerb, &asJSON)...)
	cmd.AddCommand(a.namespacePairVerbs(nsVerb, &asJSON)...)
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
