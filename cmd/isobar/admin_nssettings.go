package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	padmin "github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// intSetting is a namespace limit or threshold with set-, get- and
// (when remove is set) remove- verbs, as pulsar-admin names them.
type intSetting struct {
	name  string // verb suffix: set-<name>, get-<name>, remove-<name>
	what  string // for messages
	flag  string // the set verb's flag
	short string // its one-letter form, as pulsar-admin's
	usage string // the flag's help
	// parse reads the flag; nil reads a plain integer.
	parse  func(string) (int64, error)
	get    func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) (int64, error)
	set    func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName, v int64) error
	remove func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) error
	// unset is what get returns when the namespace has no value.
	unset int64
}

func intSettings() []intSetting {
	return []intSetting{
		{name: "max-producers-per-topic", what: "max producers per topic", flag: "max-producers-per-topic", short: "p", usage: "the most producers a topic may have (0: no limit) (required)",
			get: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) (int64, error) {
				v, err := n.GetMaxProducersPerTopicWithContext(ctx, ns)
				return int64(v), err
			},
			set: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName, v int64) error {
				return n.SetMaxProducersPerTopicWithContext(ctx, ns, int(v))
			},
			remove: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) error {
				return n.RemoveMaxProducersPerTopicWithContext(ctx, ns)
			}, unset: -1},
		{name: "max-consumers-per-topic", what: "max consumers per topic", flag: "max-consumers-per-topic", short: "c", usage: "the most consumers a topic may have (0: no limit) (required)",
			get: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) (int64, error) {
				v, err := n.GetMaxConsumersPerTopicWithContext(ctx, ns)
				return int64(v), err
			},
			set: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName, v int64) error {
				return n.SetMaxConsumersPerTopicWithContext(ctx, ns, int(v))
			},
			remove: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) error {
				return n.RemoveMaxConsumersPerTopicWithContext(ctx, ns)
			}, unset: -1},
		{name: "max-consumers-per-subscription", what: "max consumers per subscription", flag: "max-consumers-per-subscription", short: "c", usage: "the most consumers a subscription may have (0: no limit) (required)",
			get: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) (int64, error) {
				v, err := n.GetMaxConsumersPerSubscriptionWithContext(ctx, ns)
				return int64(v), err
			},
			set: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName, v int64) error {
				return n.SetMaxConsumersPerSubscriptionWithContext(ctx, ns, int(v))
			},
			remove: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) error {
				return n.RemoveMaxConsumersPerSubscriptionWithContext(ctx, ns)
			}, unset: -1},
		{name: "max-topics-per-namespace", what: "max topics per namespace", flag: "max-topics-per-namespace", short: "t", usage: "the most topics the namespace may have, partitions counted (0: no limit) (required)",
			get: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) (int64, error) {
				v, err := n.GetMaxTopicsPerNamespaceWithContext(ctx, ns)
				return int64(v), err
			},
			set: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName, v int64) error {
				return n.SetMaxTopicsPerNamespaceWithContext(ctx, ns, int(v))
			},
			remove: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) error {
				return n.RemoveMaxTopicsPerNamespaceWithContext(ctx, ns)
			}, unset: -1},
		{name: "subscription-expiration-time", what: "subscription expiration time (minutes)", flag: "time", short: "t", usage: "minutes without a consumer after which the broker deletes a subscription (0: never) (required)",
			get: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) (int64, error) {
				v, err := n.GetSubscriptionExpirationTimeWithContext(ctx, ns)
				return int64(v), err
			},
			set: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName, v int64) error {
				return n.SetSubscriptionExpirationTimeWithContext(ctx, ns, int(v))
			},
			remove: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) error {
				return n.RemoveSubscriptionExpirationTimeWithContext(ctx, ns)
			}, unset: -1},
		{name: "compaction-threshold", what: "compaction threshold (bytes)", flag: "threshold", short: "t", usage: "backlog size that triggers compaction of each topic: bytes, or 10M, 1G; 0 turns it off (required)", parse: parseSize,
			get: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) (int64, error) {
				return n.GetCompactionThresholdWithContext(ctx, ns)
			},
			set: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName, v int64) error {
				return n.SetCompactionThresholdWithContext(ctx, ns, v)
			}, unset: -1},
		{name: "offload-threshold", what: "offload threshold (bytes)", flag: "size", short: "s", usage: "storage size that triggers offloading: bytes, or 10M, 1G; -1 disables (stored only) (required)",
			parse: func(s string) (int64, error) {
				if s == "-1" {
					return -1, nil
				}
				return parseSize(s)
			},
			get: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) (int64, error) {
				return n.GetOffloadThresholdWithContext(ctx, ns)
			},
			set: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName, v int64) error {
				return n.SetOffloadThresholdWithContext(ctx, ns, v)
			}, unset: -1},
		{name: "offload-threshold-in-seconds", what: "offload threshold (seconds)", flag: "time", usage: "age that triggers offloading: seconds, or 30m, 1h, 2d (stored only) (required)", parse: parseRelativeTime,
			get: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) (int64, error) {
				return n.GetOffloadThresholdInSecondsWithContext(ctx, ns)
			},
			set: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName, v int64) error {
				return n.SetOffloadThresholdInSecondsWithContext(ctx, ns, v)
			}, unset: -1},
		{name: "offload-deletion-lag", what: "offload deletion lag (ms)", flag: "lag", short: "l", usage: "milliseconds to keep offloaded data in the ledgers (stored only) (required)",
			get: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) (int64, error) {
				return n.GetOffloadDeleteLagWithContext(ctx, ns)
			},
			set: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName, v int64) error {
				return n.SetOffloadDeleteLagWithContext(ctx, ns, v)
			},
			remove: func(ctx context.Context, n padmin.Namespaces, ns utils.NameSpaceName) error {
				return n.ClearOffloadDeleteLagWithContext(ctx, ns)
			}, unset: -1},
	}
}

// namespaceSettingVerbs are the verbs of the namespace limits and
// settings: the integer ones from intSettings, then the schema
// compatibility strategy, properties, persistence and bookie affinity.
func (a *adminCmd) namespaceSettingVerbs(nsVerb func(*cobra.Command, func(*cobra.Command, string) error) *cobra.Command, asJSON *bool) []*cobra.Command {
	var out []*cobra.Command
	for _, s := range intSettings() {
		var value string
		set := nsVerb(verb("set-"+s.name+" <tenant/namespace>", "Set a namespace's "+s.what, nil), func(cmd *cobra.Command, ns string) error {
			if value == "" {
				return usageError{fmt.Errorf("%s: required", flagAs(cmd, s.flag))}
			}
			parse := s.parse
			if parse == nil {
				parse = func(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }
			}
			v, err := parse(value)
			if err != nil {
				return usageError{fmt.Errorf("%s: %q: %v", flagAs(cmd, s.flag), value, err)}
			}
			nsn, _ := utils.GetNamespaceName(ns)
			if err := a.do(cmd, "set "+s.what+" of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
				return s.set(ctx, c.Namespaces(), *nsn, v)
			}); err != nil {
				return err
			}
			done(cmd, "set %s of %s to %d", s.what, ns, v)
			return nil
		})
		set.Flags().StringVarP(&value, s.flag, s.short, "", s.usage)
		out = append(out, set)
		out = append(out, nsVerb(readVerb("get-"+s.name+" <tenant/namespace>", "Show a namespace's "+s.what+" (null when not set)", asJSON, nil), func(cmd *cobra.Command, ns string) error {
			nsn, _ := utils.GetNamespaceName(ns)
			var v int64
			if err := a.do(cmd, "get "+s.what+" of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
				v, err = s.get(ctx, c.Namespaces(), *nsn)
				return err
			}); err != nil {
				return err
			}
			var p *int64
			if v != s.unset {
				p = &v
			}
			return show(cmd, *asJSON, p, func(w io.Writer) {
				if p == nil {
					fmt.Fprintln(w, "not set")
				} else {
					fmt.Fprintln(w, v)
				}
			})
		}))
		if s.remove != nil {
			out = append(out, nsVerb(verb("remove-"+s.name+" <tenant/namespace>", "Remove a namespace's "+s.what+" (the broker's default applies)", nil), func(cmd *cobra.Command, ns string) error {
				nsn, _ := utils.GetNamespaceName(ns)
				if err := a.do(cmd, "remove "+s.what+" of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
					return s.remove(ctx, c.Namespaces(), *nsn)
				}); err != nil {
					return err
				}
				done(cmd, "removed %s of %s", s.what, ns)
				return nil
			}))
		}
	}

	var strategy string
	setStrategy := nsVerb(verb("set-schema-compatibility-strategy <tenant/namespace>", "Set how a namespace's new schemas are checked (stored; see docs/admin.md)", nil), func(cmd *cobra.Command, ns string) error {
		st, err := utils.ParseSchemaCompatibilityStrategy(strings.ToUpper(strategy))
		if err != nil {
			return usageError{fmt.Errorf("--compatibility: %q: %v", strategy, err)}
		}
		nsn, _ := utils.GetNamespaceName(ns)
		if err := a.do(cmd, "set schema compatibility strategy of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().SetSchemaCompatibilityStrategyWithContext(ctx, *nsn, st)
		}); err != nil {
			return err
		}
		done(cmd, "set schema compatibility strategy of %s to %s", ns, st)
		return nil
	})
	setStrategy.Flags().StringVar(&strategy, "compatibility", "", "UNDEFINED, ALWAYS_INCOMPATIBLE, ALWAYS_COMPATIBLE, BACKWARD, FORWARD, FULL, BACKWARD_TRANSITIVE, FORWARD_TRANSITIVE or FULL_TRANSITIVE (required)")
	out = append(out, setStrategy,
		nsVerb(readVerb("get-schema-compatibility-strategy <tenant/namespace>", "Show a namespace's schema compatibility strategy", asJSON, nil), func(cmd *cobra.Command, ns string) error {
			nsn, _ := utils.GetNamespaceName(ns)
			var st utils.SchemaCompatibilityStrategy
			if err := a.do(cmd, "get schema compatibility strategy of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
				st, err = c.Namespaces().GetSchemaCompatibilityStrategyWithContext(ctx, *nsn)
				return err
			}); err != nil {
				return err
			}
			return show(cmd, *asJSON, st, func(w io.Writer) { fmt.Fprintln(w, st) })
		}))

	var props []string
	setProps := nsVerb(verb("set-properties <tenant/namespace>", "Add or change a namespace's properties (the others stay)", nil), func(cmd *cobra.Command, ns string) error {
		m := map[string]string{}
		for _, kv := range props {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usageError{fmt.Errorf("--properties: %q is not key=value", kv)}
			}
			m[k] = v
		}
		if len(m) == 0 {
			return usageError{errors.New("--properties: at least one key=value is required")}
		}
		nsn, _ := utils.GetNamespaceName(ns)
		if err := a.do(cmd, "set properties of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().UpdatePropertiesWithContext(ctx, *nsn, m)
		}); err != nil {
			return err
		}
		done(cmd, "set %d properties of %s", len(m), ns)
		return nil
	})
	setProps.Flags().StringSliceVarP(&props, "properties", "p", nil, "key=value pairs, comma-separated (required)")
	out = append(out, setProps,
		nsVerb(readVerb("get-properties <tenant/namespace>", "Show a namespace's properties", asJSON, nil), func(cmd *cobra.Command, ns string) error {
			nsn, _ := utils.GetNamespaceName(ns)
			var m map[string]string
			if err := a.do(cmd, "get properties of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
				m, err = c.Namespaces().GetPropertiesWithContext(ctx, *nsn)
				return err
			}); err != nil {
				return err
			}
			if m == nil {
				m = map[string]string{}
			}
			return show(cmd, *asJSON, m, func(w io.Writer) {
				for _, k := range slices.Sorted(maps.Keys(m)) {
					fmt.Fprintf(w, "%s\t%s\n", k, m[k])
				}
			})
		}),
		nsVerb(verb("clear-properties <tenant/namespace>", "Remove every property of a namespace", nil), func(cmd *cobra.Command, ns string) error {
			nsn, _ := utils.GetNamespaceName(ns)
			if err := a.do(cmd, "clear properties of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
				return c.Namespaces().RemovePropertiesWithContext(ctx, *nsn)
			}); err != nil {
				return err
			}
			done(cmd, "cleared the properties of %s", ns)
			return nil
		}))

	setPersistence := verb("set-persistence <tenant/namespace>", "Set the ensemble size and quorums of a namespace's new ledgers", nil)
	persistence := persistenceFlags(setPersistence)
	setPersistence = nsVerb(setPersistence, func(cmd *cobra.Command, ns string) error {
		p, err := persistence()
		if err != nil {
			return err
		}
		if err := a.do(cmd, "set persistence of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().SetPersistenceWithContext(ctx, ns, p)
		}); err != nil {
			return err
		}
		done(cmd, "set persistence of %s to %s", ns, formatPersistence(p))
		return nil
	})
	out = append(out, setPersistence,
		nsVerb(readVerb("get-persistence <tenant/namespace>", "Show a namespace's persistence policy (null when not set)", asJSON, nil), func(cmd *cobra.Command, ns string) error {
			var p *utils.PersistencePolicies
			if err := a.do(cmd, "get persistence of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
				p, err = c.Namespaces().GetPersistenceWithContext(ctx, ns)
				return err
			}); err != nil {
				return err
			}
			return show(cmd, *asJSON, p, func(w io.Writer) {
				if p == nil {
					fmt.Fprintln(w, "not set (broker.ledger applies)")
					return
				}
				showPersistence(w, *p)
			})
		}),
		nsVerb(verb("remove-persistence <tenant/namespace>", "Remove a namespace's persistence policy (broker.ledger applies)", nil), func(cmd *cobra.Command, ns string) error {
			if err := a.do(cmd, "remove persistence of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
				return c.Namespaces().RemovePersistenceWithContext(ctx, ns)
			}); err != nil {
				return err
			}
			done(cmd, "removed the persistence policy of %s", ns)
			return nil
		}))

	var primaryGroup, secondaryGroup string
	setAffinity := nsVerb(verb("set-bookie-affinity-group <tenant/namespace>", "Confine a namespace's new ledgers in this cluster to bookie groups (see bookies set-bookie-rack)", nil), func(cmd *cobra.Command, ns string) error {
		if primaryGroup == "" {
			return usageError{errors.New("--primary-group: required")}
		}
		g := utils.BookieAffinityGroupData{BookkeeperAffinityGroupPrimary: primaryGroup, BookkeeperAffinityGroupSecondary: secondaryGroup}
		if err := a.do(cmd, "set bookie affinity group of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().SetBookieAffinityGroupWithContext(ctx, ns, g)
		}); err != nil {
			return err
		}
		done(cmd, "set bookie affinity group of %s to %s", ns, primaryGroup)
		return nil
	})
	setAffinity.Flags().StringVar(&primaryGroup, "primary-group", "", "the primary bookie group (required)")
	setAffinity.Flags().StringVar(&secondaryGroup, "secondary-group", "", "the secondary bookie group")
	out = append(out, setAffinity,
		nsVerb(readVerb("get-bookie-affinity-group <tenant/namespace>", "Show a namespace's bookie affinity group in this cluster (null when not set)", asJSON, nil), func(cmd *cobra.Command, ns string) error {
			var g *utils.BookieAffinityGroupData
			if err := a.do(cmd, "get bookie affinity group of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
				g, err = c.Namespaces().GetBookieAffinityGroupWithContext(ctx, ns)
				return err
			}); err != nil {
				return err
			}
			return show(cmd, *asJSON, g, func(w io.Writer) {
				if g == nil {
					fmt.Fprintln(w, "not set")
					return
				}
				fmt.Fprintf(w, "primary:\t%s\nsecondary:\t%s\n", g.BookkeeperAffinityGroupPrimary, orNone(nonEmpty(g.BookkeeperAffinityGroupSecondary)))
			})
		}),
		nsVerb(verb("delete-bookie-affinity-group <tenant/namespace>", "Remove a namespace's bookie affinity group in this cluster", nil), func(cmd *cobra.Command, ns string) error {
			if err := a.do(cmd, "delete bookie affinity group of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
				return c.Namespaces().DeleteBookieAffinityGroupWithContext(ctx, ns)
			}); err != nil {
				return err
			}
			done(cmd, "removed the bookie affinity group of %s", ns)
			return nil
		}))
	return out
}

// persistenceFlags adds pulsar-admin's flags of set-persistence (-e, -w,
// -a, -r) to c; the function it returns reads and checks them.
func persistenceFlags(c *cobra.Command) func() (utils.PersistencePolicies, error) {
	var ensemble, writeQ, ackQ int
	var markDeleteRate float64
	c.Flags().IntVarP(&ensemble, "bookkeeper-ensemble", "e", 0, "bookies each ledger is spread over (required)")
	c.Flags().IntVarP(&writeQ, "bookkeeper-write-quorum", "w", 0, "copies of each entry (required)")
	c.Flags().IntVarP(&ackQ, "bookkeeper-ack-quorum", "a", 0, "copies acknowledged before a write succeeds (required)")
	c.Flags().Float64VarP(&markDeleteRate, "ml-mark-delete-max-rate", "r", 0, "cursor position writes per second, per subscription (0: every acknowledgement)")
	return func() (utils.PersistencePolicies, error) {
		var errs []error
		if ackQ < 1 || writeQ < ackQ || ensemble < writeQ || ensemble > 100 {
			errs = append(errs, fmt.Errorf("want 100 >= --bookkeeper-ensemble (%d) >= --bookkeeper-write-quorum (%d) >= --bookkeeper-ack-quorum (%d) >= 1", ensemble, writeQ, ackQ))
		}
		if markDeleteRate < 0 || math.IsNaN(markDeleteRate) || math.IsInf(markDeleteRate, 0) {
			errs = append(errs, fmt.Errorf("--ml-mark-delete-max-rate: %g is not a rate of 0 or more", markDeleteRate))
		}
		if err := errors.Join(errs...); err != nil {
			return utils.PersistencePolicies{}, usageError{err}
		}
		return utils.NewPersistencePolicies(ensemble, writeQ, ackQ, markDeleteRate), nil
	}
}

func formatPersistence(p utils.PersistencePolicies) string {
	return fmt.Sprintf("E=%d Qw=%d Qa=%d, mark-delete rate %g", p.BookkeeperEnsemble, p.BookkeeperWriteQuorum, p.BookkeeperAckQuorum, p.ManagedLedgerMaxMarkDeleteRate)
}

func showPersistence(w io.Writer, p utils.PersistencePolicies) {
	fmt.Fprintf(w, "ensemble:\t%d\nwrite quorum:\t%d\nack quorum:\t%d\nmark-delete rate:\t%g\n", p.BookkeeperEnsemble, p.BookkeeperWriteQuorum, p.BookkeeperAckQuorum, p.ManagedLedgerMaxMarkDeleteRate)
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
