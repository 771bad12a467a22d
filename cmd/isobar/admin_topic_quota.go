package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// topicQuotaDedupVerbs are the topic policy verbs of backlog quotas
// (set-backlog-quota, get-backlog-quotas, remove-backlog-quota, with the
// namespace verbs' flags) and de-duplication (set-deduplication with
// --enable/--disable, get-deduplication, remove-deduplication), with
// --global and get's --applied as the other topic policies.
func (a *adminCmd) topicQuotaDedupVerbs(tVerb func(*cobra.Command, func(*cobra.Command, utils.TopicName) error) *cobra.Command, asJSON *bool, s *topicPolicyScope) []*cobra.Command {
	var limit, limitTime, pol, typ string
	setQ := s.scoped(tVerb(verb("set-backlog-quota <topic>", "Limit a topic's subscription backlogs by size (-t destination_storage) or by the age of their oldest message (-t message_age), over its namespace's quota of that type", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		q, qt, err := backlogQuotaFlags(limit, limitTime, pol, typ)
		if err != nil {
			return err
		}
		if err := s.run(cmd, "set "+s.scope()+"backlog quota of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.SetBacklogQuota(ctx, t, q, qt)
		}); err != nil {
			return err
		}
		done(cmd, "set %s%s backlog quota of %s: %s", s.scope(), qt, t.String(), formatBacklogQuota(q))
		return nil
	}))
	setQ.Flags().StringVarP(&limit, "limit", "l", "", "backlog size: bytes, or 10M, 1G, -1 for no limit (required with destination_storage)")
	setQ.Flags().StringVar(&limitTime, "limitTime", "", "backlog age: seconds, or 30m, 2h, 1d, -1 for no limit (required with message_age)")
	setQ.Flags().StringVarP(&pol, "policy", "p", "", "producer_request_hold, producer_exception or consumer_backlog_eviction (required)")
	setQ.Flags().StringVarP(&typ, "type", "t", string(utils.DestinationStorage), "destination_storage or message_age")

	getQ := s.readable(tVerb(readVerb("get-backlog-quotas <topic>", "Show a topic's backlog quotas, by type", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var m map[utils.BacklogQuotaType]utils.BacklogQuota
		if err := s.run(cmd, "get "+s.scope()+"backlog quotas of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) (err error) {
			m, err = tp.GetBacklogQuotaMap(ctx, t, s.applied)
			return err
		}); err != nil {
			return err
		}
		if m == nil {
			m = map[utils.BacklogQuotaType]utils.BacklogQuota{}
		}
		return show(cmd, *asJSON, m, func(w io.Writer) {
			if len(m) == 0 {
				fmt.Fprintln(w, "not set")
			}
			for _, k := range slices.Sorted(maps.Keys(m)) {
				fmt.Fprintf(w, "%s\t%s\n", k, formatBacklogQuota(m[k]))
			}
		})
	}))

	var removeType string
	removeQ := s.scoped(tVerb(verb("remove-backlog-quota <topic>", "Remove a topic's backlog quota of a type: its namespace's applies", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		qt, err := parseBacklogQuotaType(removeType)
		if err != nil {
			return err
		}
		if err := s.run(cmd, "remove "+s.scope()+"backlog quota of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.RemoveBacklogQuota(ctx, t, qt)
		}); err != nil {
			return err
		}
		done(cmd, "removed the %s%s backlog quota of %s", s.scope(), qt, t.String())
		return nil
	}))
	removeQ.Flags().StringVarP(&removeType, "type", "t", string(utils.DestinationStorage), "destination_storage or message_age")

	setD := verb("set-deduplication <topic>", "Turn de-duplication on or off for a topic, over its namespace's", nil)
	onOff := enableDisableFlags(setD)
	setD = s.scoped(tVerb(setD, func(cmd *cobra.Command, t utils.TopicName) error {
		on, err := onOff()
		if err != nil {
			return err
		}
		if err := s.run(cmd, "set "+s.scope()+"de-duplication of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.SetDeduplicationStatus(ctx, t, on)
		}); err != nil {
			return err
		}
		done(cmd, "set %sde-duplication of %s: %t", s.scope(), t.String(), on)
		return nil
	}))
	getD := s.readable(tVerb(readVerb("get-deduplication <topic>", "Show whether a topic de-duplicates (null when it does not say)", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var on *bool
		if err := s.run(cmd, "get "+s.scope()+"de-duplication of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) (err error) {
			on, err = tp.GetDeduplicationStatus(ctx, t, s.applied)
			return err
		}); err != nil {
			return err
		}
		return show(cmd, *asJSON, on, func(w io.Writer) {
			if on == nil {
				fmt.Fprintln(w, "not set")
				return
			}
			fmt.Fprintln(w, *on)
		})
	}))
	removeD := s.scoped(tVerb(verb("remove-deduplication <topic>", "Remove a topic's de-duplication setting: its namespace's applies", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		if err := s.run(cmd, "remove "+s.scope()+"de-duplication of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.RemoveDeduplicationStatus(ctx, t)
		}); err != nil {
			return err
		}
		done(cmd, "removed %sde-duplication of %s", s.scope(), t.String())
		return nil
	}))
	return []*cobra.Command{setQ, getQ, removeQ, setD, getD, removeD}
}
