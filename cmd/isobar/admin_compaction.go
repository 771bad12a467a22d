package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// topicCompactionVerbs are the topic verbs of compaction
// (docs/compaction.md): compact, compaction-status, and the topic's own
// compaction threshold.
func (a *adminCmd) topicCompactionVerbs(tVerb func(*cobra.Command, func(*cobra.Command, utils.TopicName) error) *cobra.Command, asJSON *bool) []*cobra.Command {
	compact := tVerb(verb("compact <topic>", "Start compacting a topic (each partition of a partitioned one): keep each key's latest message for readers that read compacted", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		if err := a.do(cmd, "compact "+t.String(), func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Topics().CompactWithContext(ctx, t)
		}); err != nil {
			return err
		}
		done(cmd, "compaction of %s started", t.String())
		return nil
	})

	var wait bool
	status := tVerb(readVerb("compaction-status <topic>", "Show the status of a topic's (or a partition's) last compaction on its broker: NOT_RUN, RUNNING, SUCCESS or ERROR", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var st utils.LongRunningProcessStatus
		for {
			if err := a.do(cmd, "get the compaction status of "+t.String(), func(ctx context.Context, c pulsaradmin.Client) (err error) {
				st, err = c.Topics().CompactStatusWithContext(ctx, t)
				return err
			}); err != nil {
				return err
			}
			if !wait || st.Status != utils.RUNNING {
				break
			}
			select {
			case <-cmd.Context().Done():
				return cmd.Context().Err()
			case <-time.After(time.Second):
			}
		}
		return show(cmd, *asJSON, st, func(w io.Writer) {
			fmt.Fprintf(w, "status:\t%s\n", st.Status)
			if st.LastError != "" {
				fmt.Fprintf(w, "lastError:\t%s\n", st.LastError)
			}
		})
	})
	status.Flags().BoolVarP(&wait, "wait-complete", "w", false, "wait until the compaction is no longer running")

	var global, applied bool
	scope := func() string {
		if global {
			return "global "
		}
		return ""
	}
	policies := func(cmd *cobra.Command, op string, f func(ctx context.Context, tp pulsaradmin.TopicPolicies) error) error {
		return a.do(cmd, op, func(ctx context.Context, c pulsaradmin.Client) error {
			tp, err := pulsaradmin.TopicPoliciesOf(c, global)
			if err != nil {
				return err
			}
			return f(ctx, tp)
		})
	}
	globalFlag := func(c *cobra.Command) *cobra.Command {
		c.Flags().BoolVar(&global, "global", false, "the topic's global policy, which applies in every cluster (default: this cluster's own)")
		return c
	}
	var threshold string
	set := globalFlag(tVerb(verb("set-compaction-threshold <topic>", "Compact the topic once the backlog its compaction has not read exceeds a size", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		if !cmd.Flags().Changed("threshold") {
			return usageError{fmt.Errorf("-t/--threshold: required")}
		}
		n, err := parseSize(threshold)
		if err != nil {
			return usageError{fmt.Errorf("-t/--threshold: %v", err)}
		}
		if err := policies(cmd, "set "+scope()+"compaction threshold of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.SetCompactionThreshold(ctx, t, n)
		}); err != nil {
			return err
		}
		done(cmd, "set %scompaction threshold of %s to %d bytes", scope(), t.String(), n)
		return nil
	}))
	set.Flags().StringVarP(&threshold, "threshold", "t", "", "backlog size: bytes, or 10M, 1G; 0 turns automatic compaction off for the topic (required)")
	get := globalFlag(tVerb(readVerb("get-compaction-threshold <topic>", "Show a topic's compaction threshold in bytes (null when not set)", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var v *int64
		if err := policies(cmd, "get "+scope()+"compaction threshold of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) (err error) {
			v, err = tp.GetCompactionThreshold(ctx, t, applied)
			return err
		}); err != nil {
			return err
		}
		return show(cmd, *asJSON, v, func(w io.Writer) {
			if v == nil {
				fmt.Fprintln(w, "not set")
				return
			}
			fmt.Fprintln(w, *v)
		})
	}))
	get.Flags().BoolVar(&applied, "applied", false, "the value in force: the topic's own, else its namespace's, else the broker's")
	remove := globalFlag(tVerb(verb("remove-compaction-threshold <topic>", "Remove the topic's compaction threshold: it follows its namespace", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		if err := policies(cmd, "remove "+scope()+"compaction threshold of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.RemoveCompactionThreshold(ctx, t)
		}); err != nil {
			return err
		}
		done(cmd, "removed %scompaction threshold of %s", scope(), t.String())
		return nil
	}))
	return []*cobra.Command{compact, status, set, get, remove}
}
