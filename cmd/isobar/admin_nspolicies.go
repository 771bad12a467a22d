package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// namespaceRESTSettings are the namespace settings pulsaradmin has no
// calls for, with pulsar-admin's verbs and flags (docs/admin.md,
// "Namespaces"), and Isobar's synchronous replication;
// namespaceRateVerbs makes their verbs.
func namespaceRESTSettings() []rateVerb {
	return []rateVerb{
		intRESTSetting("max-unacked-messages-per-consumer", "maxUnackedMessagesPerConsumer",
			"max unacked messages per consumer (Shared and Key_Shared subscriptions)",
			"maxUnackedMessagesPerTopic", "c", "the most unacknowledged messages a consumer may hold (0: no limit) (required)"),
		intRESTSetting("max-unacked-messages-per-subscription", "maxUnackedMessagesPerSubscription",
			"max unacked messages per subscription (Shared and Key_Shared)",
			"maxUnackedMessagesPerSubscription", "c", "the most unacknowledged messages a subscription may hold (0: no limit) (required)"),
		intRESTSetting("deduplication-snapshot-interval", "deduplicationSnapshotInterval",
			"deduplication snapshot interval (seconds)",
			"interval", "i", "seconds between snapshots of a de-duplicated topic's producers (0: by entry count only) (required)"),
		{name: "delayed-delivery", path: "delayedDelivery", what: "delayed delivery policy",
			flags: func(c *cobra.Command) func() (any, error) {
				read := delayedDeliveryFlags(c)
				return func() (any, error) { return read() }
			},
			show: func(w io.Writer, raw json.RawMessage) error {
				var d policy.DelayedDeliveryPolicies
				if err := json.Unmarshal(raw, &d); err != nil {
					return err
				}
				fmt.Fprintln(w, formatDelayedDelivery(d.Active, d.TickTime, d.MaxDelayInMillis))
				return nil
			}},
		syncReplicationSetting(),
	}
}

// intRESTSetting is a namespace setting whose body is a number ≥ 0, set
// with --flag/-short.
func intRESTSetting(name, path, what, flag, short, usage string) rateVerb {
	return rateVerb{name: name, path: path, what: what,
		flags: func(c *cobra.Command) func() (any, error) {
			var v string
			c.Flags().StringVarP(&v, flag, short, "", usage)
			return func() (any, error) {
				if v == "" {
					return nil, usageError{fmt.Errorf("--%s: required", flag)}
				}
				n, err := strconv.ParseInt(v, 10, 32)
				if err != nil || n < 0 {
					return nil, usageError{fmt.Errorf("--%s: %q is not a number from 0 to %d", flag, v, 1<<31-1)}
				}
				return n, nil
			}
		},
		show: func(w io.Writer, raw json.RawMessage) error {
			var n int64
			if err := json.Unmarshal(raw, &n); err != nil {
				return err
			}
			fmt.Fprintln(w, n)
			return nil
		}}
}

// delayedDeliveryFlags adds pulsar-admin's flags of set-delayed-delivery
// (--enable/-e or --disable/-d, --time/-t the tick, --maxDelay) to c;
// the function it returns reads and checks them.
func delayedDeliveryFlags(c *cobra.Command) func() (policy.DelayedDeliveryPolicies, error) {
	enabled := enableDisableFlags(c)
	var tick, maxDelay string
	c.Flags().StringVarP(&tick, "time", "t", "1s", "the delivery timer's tick: 500ms, 1s, 1m (0: none)")
	c.Flags().StringVar(&maxDelay, "maxDelay", "0", "the longest delay a message may ask for: 10s, 1h, 7d (0: no limit)")
	return func() (policy.DelayedDeliveryPolicies, error) {
		var errs []error
		on, err := enabled()
		if err != nil {
			errs = append(errs, err)
		}
		tickMs, err := parseMillis(tick)
		if err != nil {
			errs = append(errs, fmt.Errorf("--time: %v", err))
		}
		maxMs, err := parseMillis(maxDelay)
		if err != nil {
			errs = append(errs, fmt.Errorf("--maxDelay: %v", err))
		}
		d := policy.DelayedDeliveryPolicies{Active: on, TickTime: tickMs, MaxDelayInMillis: maxMs}
		if len(errs) == 0 {
			if err := d.Validate(); err != nil {
				errs = append(errs, err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return d, usageError{err}
		}
		return d, nil
	}
}

// parseMillis reads a time as parseRelativeTime does, or a number of
// milliseconds ending in "ms"; it returns milliseconds.
func parseMillis(s string) (int64, error) {
	if num, ok := strings.CutSuffix(s, "ms"); ok {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not a time like 500ms, 1s, 10m", s)
		}
		return n, nil
	}
	secs, err := parseRelativeTime(s)
	if err != nil {
		return 0, err
	}
	if secs > (1<<63-1)/1000 {
		return 0, fmt.Errorf("%q is too long", s)
	}
	return secs * 1000, nil
}

func formatDelayedDelivery(active bool, tickMs, maxDelayMs int64) string {
	if !active {
		return "off: messages are delivered at once"
	}
	limit := "no limit"
	if maxDelayMs > 0 {
		limit = (time.Duration(maxDelayMs) * time.Millisecond).String()
	}
	return fmt.Sprintf("on, tick %v, longest delay %s", time.Duration(tickMs)*time.Millisecond, limit)
}

// namespaceBacklogQuotaVerbs are set-backlog-quota, get-backlog-quotas and
// remove-backlog-quota, with pulsar-admin's flags (docs/admin.md,
// "Namespaces"); removing goes through the bare REST client, as
// pulsaradmin removes only the destination_storage quota.
func (a *adminCmd) namespaceBacklogQuotaVerbs(nsVerb func(*cobra.Command, func(*cobra.Command, string) error) *cobra.Command, asJSON *bool) []*cobra.Command {
	var limit, limitTime, pol, typ string
	set := nsVerb(verb("set-backlog-quota <tenant/namespace>", "Limit a namespace's subscription backlogs by size (-t destination_storage) or by the age of their oldest message (-t message_age)", nil), func(cmd *cobra.Command, ns string) error {
		q, qt, err := backlogQuotaFlags(limit, limitTime, pol, typ)
		if err != nil {
			return err
		}
		if err := a.do(cmd, "set backlog quota of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().SetBacklogQuotaWithContext(ctx, ns, q, qt)
		}); err != nil {
			return err
		}
		done(cmd, "set %s backlog quota of %s: %s", qt, ns, formatBacklogQuota(q))
		return nil
	})
	set.Flags().StringVarP(&limit, "limit", "l", "", "backlog size: bytes, or 10M, 1G, -1 for no limit (required with destination_storage)")
	set.Flags().StringVar(&limitTime, "limitTime", "", "backlog age: seconds, or 30m, 2h, 1d, -1 for no limit (required with message_age)")
	set.Flags().StringVarP(&pol, "policy", "p", "", "producer_request_hold, producer_exception or consumer_backlog_eviction (required)")
	set.Flags().StringVarP(&typ, "type", "t", string(utils.DestinationStorage), "destination_storage or message_age")

	get := nsVerb(readVerb("get-backlog-quotas <tenant/namespace>", "Show a namespace's backlog quotas, by type", asJSON, nil), func(cmd *cobra.Command, ns string) error {
		var m map[utils.BacklogQuotaType]utils.BacklogQuota
		if err := a.do(cmd, "get backlog quotas of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
			m, err = c.Namespaces().GetBacklogQuotaMapWithContext(ctx, ns)
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
	})

	var removeType string
	remove := nsVerb(verb("remove-backlog-quota <tenant/namespace>", "Remove a namespace's backlog quota of a type", nil), func(cmd *cobra.Command, ns string) error {
		qt, err := parseBacklogQuotaType(removeType)
		if err != nil {
			return err
		}
		if err := a.doREST(cmd, "remove backlog quota of "+ns, func(ctx context.Context, c *rest.Client) error {
			return c.DeleteWithQueryParamsWithContext(ctx, "/admin/v2/namespaces/"+ns+"/backlogQuota", map[string]string{"backlogQuotaType": string(qt)})
		}); err != nil {
			return err
		}
		done(cmd, "removed the %s backlog quota of %s", qt, ns)
		return nil
	})
	remove.Flags().StringVarP(&removeType, "type", "t", string(utils.DestinationStorage), "destination_storage or message_age")
	return []*cobra.Command{set, get, remove}
}

func parseBacklogQuotaType(s string) (utils.BacklogQuotaType, error) {
	qt, err := utils.ParseBacklogQuotaType(s)
	if err != nil || s == "" {
		return "", usageError{fmt.Errorf("--type: %q: want %s or %s", s, utils.DestinationStorage, utils.MessageAge)}
	}
	return qt, nil
}

// backlogQuotaFlags reads set-backlog-quota's flags, as pulsar-admin: the
// type's own limit is required; every problem is reported at once.
func backlogQuotaFlags(limit, limitTime, pol, typ string) (utils.BacklogQuota, utils.BacklogQuotaType, error) {
	var errs []error
	qt, err := parseBacklogQuotaType(typ)
	if err != nil {
		errs = append(errs, err)
	}
	q := utils.BacklogQuota{LimitSize: -1, LimitTime: -1, Policy: utils.RetentionPolicy(pol)}
	switch {
	case limit == "" && qt == utils.DestinationStorage:
		errs = append(errs, errors.New("--limit: required with --type destination_storage"))
	case limit == "", limit == "-1":
	default:
		if q.LimitSize, err = parseSize(limit); err != nil {
			errs = append(errs, fmt.Errorf("--limit: %v", err))
		}
	}
	switch {
	case limitTime == "" && qt == utils.MessageAge:
		errs = append(errs, errors.New("--limitTime: required with --type message_age"))
	case limitTime == "", limitTime == "-1":
	default:
		if q.LimitTime, err = parseRelativeTime(limitTime); err != nil {
			errs = append(errs, fmt.Errorf("--limitTime: %v", err))
		}
	}
	if pol == "" {
		errs = append(errs, errors.New("--policy: required"))
	} else if err := (policy.BacklogQuota{LimitSize: q.LimitSize, LimitTime: q.LimitTime, Policy: pol}).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--policy: %v", err))
	}
	if err := errors.Join(errs...); err != nil {
		return q, qt, usageError{err}
	}
	return q, qt, nil
}

func formatBacklogQuota(q utils.BacklogQuota) string {
	size, age := "no limit", "no limit"
	if q.LimitSize > 0 {
		size = fmt.Sprintf("%d bytes", q.LimitSize)
	}
	if q.LimitTime > 0 {
		age = (time.Duration(q.LimitTime) * time.Second).String()
	}
	return fmt.Sprintf("size %s, age %s, %s", size, age, q.Policy)
}
