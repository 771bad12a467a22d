package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// topicPolicyVerbs are the topic verbs of a topic's own policies:
// set-, get- and remove-<policy>, each with --global for the policy that
// applies in every cluster (default: this cluster's own), get- with
// --applied for the value in force (docs/admin.md, "Topic policies").
func (a *adminCmd) topicPolicyVerbs(tVerb func(*cobra.Command, func(*cobra.Command, utils.TopicName) error) *cobra.Command, asJSON *bool) []*cobra.Command {
	tps := &topicPolicyScope{a: a}
	scoped, readable, scope, run := tps.scoped, tps.readable, tps.scope, tps.run
	applied := &tps.applied
	var out []*cobra.Command

	// A policy that is a number: --max (or flagName) N.
	type intPolicy struct {
		name, what, flagName, flagHelp string
		short                          string // the flag's one-letter form, if any
		get                            func(pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, bool) (*int, error)
		set                            func(pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, int) error
		remove                         func(pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName) error
	}
	ints := []intPolicy{
		{"max-producers", "the most producers on the topic", "max", "the limit; 0 for none (required)", "",
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, bool) (*int, error) {
				return tp.GetMaxProducers
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, int) error {
				return tp.SetMaxProducers
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName) error {
				return tp.RemoveMaxProducers
			}},
		{"max-consumers", "the most consumers on the topic", "max", "the limit; 0 for none (required)", "",
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, bool) (*int, error) {
				return tp.GetMaxConsumers
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, int) error {
				return tp.SetMaxConsumers
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName) error {
				return tp.RemoveMaxConsumers
			}},
		{"max-consumers-per-subscription", "the most consumers on one subscription", "max", "the limit; 0 for none (required)", "",
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, bool) (*int, error) {
				return tp.GetMaxConsumersPerSubscription
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, int) error {
				return tp.SetMaxConsumersPerSubscription
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName) error {
				return tp.RemoveMaxConsumersPerSubscription
			}},
		{"max-subscriptions", "the most subscriptions on the topic", "max", "the limit; 0 for none (required)", "",
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, bool) (*int, error) {
				return tp.GetMaxSubscriptionsPerTopic
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, int) error {
				return tp.SetMaxSubscriptionsPerTopic
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName) error {
				return tp.RemoveMaxSubscriptionsPerTopic
			}},
		{"max-message-size", "the largest message, in bytes", "max", "bytes, at most the broker's; 0 for the broker's (required)", "",
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, bool) (*int, error) {
				return tp.GetMaxMessageSize
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, int) error {
				return tp.SetMaxMessageSize
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName) error {
				return tp.RemoveMaxMessageSize
			}},
		{"max-unacked-messages-per-consumer", "the most unacknowledged messages a consumer of a Shared or Key_Shared subscription holds", "max", "the limit; 0 for none (required)", "",
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, bool) (*int, error) {
				return tp.GetMaxUnackMessagesPerConsumer
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, int) error {
				return tp.SetMaxUnackMessagesPerConsumer
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName) error {
				return tp.RemoveMaxUnackMessagesPerConsumer
			}},
		{"max-unacked-messages-per-subscription", "the most unacknowledged messages of a Shared or Key_Shared subscription", "max", "the limit; 0 for none (required)", "",
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, bool) (*int, error) {
				return tp.GetMaxUnackMessagesPerSubscription
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, int) error {
				return tp.SetMaxUnackMessagesPerSubscription
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName) error {
				return tp.RemoveMaxUnackMessagesPerSubscription
			}},
		{"deduplication-snapshot-interval", "the most seconds between snapshots of a de-duplicated topic's producers", "interval", "seconds; 0 for by entry count only (required)", "i",
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, bool) (*int, error) {
				return tp.GetDeduplicationSnapshotInterval
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName, int) error {
				return tp.SetDeduplicationSnapshotInterval
			},
			func(tp pulsaradmin.TopicPolicies) func(context.Context, utils.TopicName) error {
				return tp.RemoveDeduplicationSnapshotInterval
			}},
	}
	for _, p := range ints {
		var n int
		set := scoped(tVerb(verb("set-"+p.name+" <topic>", "Set "+p.what, nil), func(cmd *cobra.Command, t utils.TopicName) error {
			if !cmd.Flags().Changed(p.flagName) {
				return usageError{fmt.Errorf("--%s: required", p.flagName)}
			}
			if n < 0 {
				return usageError{fmt.Errorf("--%s: %d is negative", p.flagName, n)}
			}
			if err := run(cmd, "set "+scope()+p.name+" of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
				return p.set(tp)(ctx, t, n)
			}); err != nil {
				return err
			}
			done(cmd, "set %s%s of %s to %d", scope(), p.name, t.String(), n)
			return nil
		}))
		set.Flags().IntVarP(&n, p.flagName, p.short, 0, p.flagHelp)
		get := readable(tVerb(readVerb("get-"+p.name+" <topic>", "Show "+p.what+" (null when not set)", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
			var v *int
			if err := run(cmd, "get "+scope()+p.name+" of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) (err error) {
				v, err = p.get(tp)(ctx, t, *applied)
				return err
			}); err != nil {
				return err
			}
			return show(cmd, *asJSON, v, func(w io.Writer) { fmt.Fprintln(w, formatOptional(v)) })
		}))
		remove := scoped(tVerb(verb("remove-"+p.name+" <topic>", "Remove the topic's "+p.name+": it follows its namespace", nil), func(cmd *cobra.Command, t utils.TopicName) error {
			if err := run(cmd, "remove "+scope()+p.name+" of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
				return p.remove(tp)(ctx, t)
			}); err != nil {
				return err
			}
			done(cmd, "removed %s%s of %s", scope(), p.name, t.String())
			return nil
		}))
		out = append(out, set, get, remove)
	}

	var ttl string
	setTTL := scoped(tVerb(verb("set-message-ttl <topic>", "Expire unacknowledged messages after a time", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		secs, err := parseRelativeTime(ttl)
		if err != nil {
			return usageError{fmt.Errorf("--ttl: %v", err)}
		}
		if secs > 1<<31-1 {
			return usageError{fmt.Errorf("--ttl: %q is too long", ttl)}
		}
		if err := run(cmd, "set "+scope()+"message TTL of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.SetMessageTTL(ctx, t, int(secs))
		}); err != nil {
			return err
		}
		done(cmd, "set %smessage TTL of %s to %ds", scope(), t.String(), secs)
		return nil
	}))
	setTTL.Flags().StringVarP(&ttl, "ttl", "t", "", "time to live: seconds, or 30m, 1h, 2d (0: never expire) (required)")
	getTTL := readable(tVerb(readVerb("get-message-ttl <topic>", "Show a topic's message TTL in seconds (null when not set)", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var v *int
		if err := run(cmd, "get "+scope()+"message TTL of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) (err error) {
			v, err = tp.GetMessageTTL(ctx, t, *applied)
			return err
		}); err != nil {
			return err
		}
		return show(cmd, *asJSON, v, func(w io.Writer) { fmt.Fprintln(w, formatOptional(v)) })
	}))
	removeTTL := scoped(tVerb(verb("remove-message-ttl <topic>", "Remove the topic's message TTL: it follows its namespace", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		if err := run(cmd, "remove "+scope()+"message TTL of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.RemoveMessageTTL(ctx, t)
		}); err != nil {
			return err
		}
		done(cmd, "removed %smessage TTL of %s", scope(), t.String())
		return nil
	}))

	var retTime, retSize string
	setRet := scoped(tVerb(verb("set-retention <topic>", "Keep acknowledged messages for a time and/or size (-1: unlimited)", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		rp, err := retentionFlags(retTime, retSize)
		if err != nil {
			return err
		}
		if err := run(cmd, "set "+scope()+"retention of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.SetRetention(ctx, t, rp)
		}); err != nil {
			return err
		}
		done(cmd, "set %sretention of %s to %s", scope(), t.String(), formatRetention(&rp))
		return nil
	}))
	setRet.Flags().StringVarP(&retTime, "time", "t", "", "retention time: 30m, 12h, 7d, 1w, -1 for unlimited, 0 for none (required)")
	setRet.Flags().StringVarP(&retSize, "size", "s", "", "retention size: 500M, 10G, 1T, -1 for unlimited, 0 for none (required)")
	getRet := readable(tVerb(readVerb("get-retention <topic>", "Show a topic's retention (null when not set)", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var rp *utils.RetentionPolicies
		if err := run(cmd, "get "+scope()+"retention of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) (err error) {
			rp, err = tp.GetRetention(ctx, t, *applied)
			return err
		}); err != nil {
			return err
		}
		return show(cmd, *asJSON, rp, func(w io.Writer) { fmt.Fprintln(w, formatRetention(rp)) })
	}))
	removeRet := scoped(tVerb(verb("remove-retention <topic>", "Remove the topic's retention: it follows its namespace", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		if err := run(cmd, "remove "+scope()+"retention of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.RemoveRetention(ctx, t)
		}); err != nil {
			return err
		}
		done(cmd, "removed %sretention of %s", scope(), t.String())
		return nil
	}))

	var clusters []string
	setClusters := tVerb(verb("set-replication-clusters <topic>", "Replicate the topic across these clusters instead of its namespace's (a global policy)", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		cl := splitList(clusters)
		if len(cl) == 0 {
			return usageError{errors.New("--clusters: at least one cluster is required")}
		}
		if err := run(cmd, "set replication clusters of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.SetReplicationClusters(ctx, t, cl)
		}); err != nil {
			return err
		}
		done(cmd, "set replication clusters of %s to %s", t.String(), strings.Join(cl, ","))
		return nil
	})
	setClusters.Flags().StringSliceVarP(&clusters, "clusters", "c", nil, "clusters, comma-separated (required)")
	getClusters := tVerb(readVerb("get-replication-clusters <topic>", "Show the topic's own replication clusters (--applied: those in force)", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var names []string
		if err := run(cmd, "get replication clusters of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) (err error) {
			names, err = tp.GetReplicationClusters(ctx, t, *applied)
			return err
		}); err != nil {
			return err
		}
		return showList(cmd, *asJSON, names)
	})
	getClusters.Flags().BoolVar(applied, "applied", false, "the clusters in force: the topic's own, else its namespace's")
	removeClusters := tVerb(verb("remove-replication-clusters <topic>", "Remove the topic's replication clusters: it follows its namespace", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		if err := run(cmd, "remove replication clusters of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.RemoveReplicationClusters(ctx, t)
		}); err != nil {
			return err
		}
		done(cmd, "removed replication clusters of %s", t.String())
		return nil
	})

	var strategy string
	setSchema := scoped(tVerb(verb("set-schema-compatibility-strategy <topic>", "Set how a new schema must relate to the topic's (stored only)", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		s, err := utils.ParseSchemaCompatibilityStrategy(strings.ToUpper(strategy))
		if err != nil || s == utils.SchemaCompatibilityStrategyUndefined {
			return usageError{fmt.Errorf("--strategy: %q: want ALWAYS_INCOMPATIBLE, ALWAYS_COMPATIBLE, BACKWARD, FORWARD, FULL, BACKWARD_TRANSITIVE, FORWARD_TRANSITIVE or FULL_TRANSITIVE", strategy)}
		}
		if err := run(cmd, "set "+scope()+"schema compatibility strategy of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.SetSchemaCompatibilityStrategy(ctx, t, s)
		}); err != nil {
			return err
		}
		done(cmd, "set %sschema compatibility strategy of %s to %s", scope(), t.String(), s)
		return nil
	}))
	setSchema.Flags().StringVar(&strategy, "strategy", "", "BACKWARD, FORWARD, FULL, their _TRANSITIVE forms, ALWAYS_COMPATIBLE or ALWAYS_INCOMPATIBLE (required)")
	getSchema := readable(tVerb(readVerb("get-schema-compatibility-strategy <topic>", "Show a topic's schema compatibility strategy (null when not set)", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var s *utils.SchemaCompatibilityStrategy
		if err := run(cmd, "get "+scope()+"schema compatibility strategy of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) (err error) {
			s, err = tp.GetSchemaCompatibilityStrategy(ctx, t, *applied)
			return err
		}); err != nil {
			return err
		}
		return show(cmd, *asJSON, s, func(w io.Writer) {
			if s == nil {
				fmt.Fprintln(w, "not set")
			} else {
				fmt.Fprintln(w, *s)
			}
		})
	}))
	removeSchema := scoped(tVerb(verb("remove-schema-compatibility-strategy <topic>", "Remove the topic's schema compatibility strategy: it follows its namespace", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		if err := run(cmd, "remove "+scope()+"schema compatibility strategy of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.RemoveSchemaCompatibilityStrategy(ctx, t)
		}); err != nil {
			return err
		}
		done(cmd, "removed %sschema compatibility strategy of %s", scope(), t.String())
		return nil
	}))

	setInactive, getInactive, removeInactive := inactiveVerbs(tVerb, "<topic>", asJSON,
		func(cmd *cobra.Command, t utils.TopicName, p utils.InactiveTopicPolicies) error {
			return run(cmd, "set "+scope()+"inactive topic policies of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
				return tp.SetInactiveTopicPolicies(ctx, t, p)
			})
		},
		func(cmd *cobra.Command, t utils.TopicName) (p *utils.InactiveTopicPolicies, err error) {
			err = run(cmd, "get "+scope()+"inactive topic policies of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) (err error) {
				p, err = tp.GetInactiveTopicPolicies(ctx, t, *applied)
				return err
			})
			return p, err
		},
		func(cmd *cobra.Command, t utils.TopicName) error {
			return run(cmd, "remove "+scope()+"inactive topic policies of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
				return tp.RemoveInactiveTopicPolicies(ctx, t)
			})
		})

	out = append(out, setTTL, getTTL, removeTTL, setRet, getRet, removeRet,
		setClusters, getClusters, removeClusters, setSchema, getSchema, removeSchema,
		scoped(setInactive), readable(getInactive), scoped(removeInactive))
	out = append(out, a.topicPersistenceDelayedVerbs(tVerb, asJSON, tps)...)
	out = append(out, a.topicSyncReplicationVerbs(tVerb, asJSON, tps)...)
	return append(out, a.topicQuotaDedupVerbs(tVerb, asJSON, tps)...)
}

// topicPolicyScope holds the --global and --applied flags of the topic
// policy verbs.
type topicPolicyScope struct {
	a               *adminCmd
	global, applied bool
}

// scoped adds --global to c.
func (s *topicPolicyScope) scoped(c *cobra.Command) *cobra.Command {
	c.Flags().BoolVar(&s.global, "global", false, "the topic's global policy, which applies in every cluster (default: this cluster's own)")
	return c
}

// readable adds --applied and --global to c.
func (s *topicPolicyScope) readable(c *cobra.Command) *cobra.Command {
	c.Flags().BoolVar(&s.applied, "applied", false, "the value in force: the topic's own, else its namespace's, else the broker's")
	return s.scoped(c)
}

// scope names the scope asked, for messages.
func (s *topicPolicyScope) scope() string {
	if s.global {
		return "global "
	}
	return ""
}

// run runs f with the topic policies client of the scope asked.
func (s *topicPolicyScope) run(cmd *cobra.Command, op string, f func(ctx context.Context, tp pulsaradmin.TopicPolicies) error) error {
	return s.a.do(cmd, op, func(ctx context.Context, c pulsaradmin.Client) error {
		tp, err := pulsaradmin.TopicPoliciesOf(c, s.global)
		if err != nil {
			return err
		}
		return f(ctx, tp)
	})
}

// formatOptional prints an optional number: "not set" for null.
func formatOptional(v *int) string {
	if v == nil {
		return "not set"
	}
	return fmt.Sprint(*v)
}
