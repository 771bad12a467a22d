package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

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
		tVerb(verb("terminate <topic>", "Terminate a topic: keep what was sent, refuse further messages for good; prints the last message's id", nil), func(cmd *cobra.Command, t utils.TopicName) error {
			var id utils.MessageID
			if err := a.do(cmd, "terminate topic "+t.String(), func(ctx context.Context, c pulsaradmin.Client) (err error) {
				id, err = c.Topics().TerminateWithContext(ctx, t)
				return err
			}); err != nil {
				return err
			}
			done(cmd, "terminated topic %s at %d:%d", t.String(), id.LedgerID, id.EntryID)
			return nil
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
	cmd.AddCommand(a.topicPrimaryVerbs(&asJSON)...)
	cmd.AddCommand(a.topicPermissionVerbs(tVerb, &asJSON)...)
	cmd.AddCommand(a.topicMessageVerbs(tVerb, &asJSON)...)
	cmd.AddCommand(a.topicPolicyVerbs(tVerb, &asJSON)...)
	cmd.AddCommand(a.topicCompactionVerbs(tVerb, &asJSON)...)
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
