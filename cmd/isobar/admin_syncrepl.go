package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// syncReplicationSetting makes the namespace verbs of synchronous
// replication (policy.SyncReplication), set-, get- and
// remove-sync-replication: one of namespaceRESTSettings.
func syncReplicationSetting() rateVerb {
	return rateVerb{name: "sync-replication", path: "syncReplication", what: "synchronous replication",
		long: "Set a namespace's synchronous replication: a message is acknowledged to its producer only once --regions other regions\n" +
			"of the namespace's replication clusters hold it too, so a failover to one of them loses nothing acknowledged.\n" +
			"With --fallback-after, a message that has waited that long is acknowledged from this region alone, and the\n" +
			"topic stays asynchronous until the regions catch up. A topic's own setting (topics set-sync-replication) wins.",
		flags: func(c *cobra.Command) func() (any, error) {
			read := syncReplicationFlags(c)
			return func() (any, error) { return read() }
		},
		show: func(w io.Writer, raw json.RawMessage) error {
			var s policy.SyncReplication
			if err := json.Unmarshal(raw, &s); err != nil {
				return err
			}
			showSyncReplication(w, s)
			return nil
		}}
}

// syncReplicationFlags adds set-sync-replication's flags to c: --regions
// (required) and --fallback-after. The function it returns reads and
// checks them, reporting every problem at once, before any request.
func syncReplicationFlags(c *cobra.Command) func() (policy.SyncReplication, error) {
	var regions int
	var fallback time.Duration
	c.Flags().IntVar(&regions, "regions", 0, fmt.Sprintf("how many other regions must hold a message before it is acknowledged (1 to %d, and at most the replication clusters less one) (required)", policy.MaxSyncRegions))
	c.Flags().DurationVar(&fallback, "fallback-after", 0, "acknowledge from this region alone once a message has waited this long, until the regions catch up (whole seconds up to 1h, e.g. 30s; 0: never, publishes wait)")
	return func() (policy.SyncReplication, error) {
		var errs []error
		switch {
		case !c.Flags().Changed("regions"):
			errs = append(errs, errors.New("--regions: required"))
		case regions < 1 || regions > policy.MaxSyncRegions:
			errs = append(errs, fmt.Errorf("--regions: %d is not within 1..%d", regions, policy.MaxSyncRegions))
		}
		if fallback < 0 || fallback > policy.MaxSyncFallbackSeconds*time.Second || fallback%time.Second != 0 {
			errs = append(errs, fmt.Errorf("--fallback-after: %v is not a whole number of seconds within 0..%ds", fallback, policy.MaxSyncFallbackSeconds))
		}
		s := policy.SyncReplication{Regions: regions, FallbackAfterSeconds: int(fallback / time.Second)}
		if err := errors.Join(errs...); err != nil {
			return s, usageError{err}
		}
		return s, nil
	}
}

// showSyncReplication prints a synchronous replication policy, a field a
// line.
func showSyncReplication(w io.Writer, s policy.SyncReplication) {
	fmt.Fprintf(w, "regions\t%d\n", s.Regions)
	fmt.Fprintf(w, "fallback after\t%s\n", formatSyncFallback(s.FallbackAfterSeconds))
}

func formatSyncFallback(secs int) string {
	if secs <= 0 {
		return "never (publishes wait for the regions)"
	}
	return (time.Duration(secs) * time.Second).String()
}

// topicSyncReplicationVerbs are the topic verbs of synchronous
// replication: set-, get- and remove-sync-replication, with --global and
// get's --applied as the other topic policies. pulsaradmin has no calls
// for it (an Isobar policy), so they go through the bare REST client.
func (a *adminCmd) topicSyncReplicationVerbs(tVerb func(*cobra.Command, func(*cobra.Command, utils.TopicName) error) *cobra.Command, asJSON *bool, s *topicPolicyScope) []*cobra.Command {
	path := func(t utils.TopicName) (string, error) {
		p, err := restTopicPath(t.String())
		if err != nil {
			return "", usageError{err}
		}
		return "/admin/v2/" + p + "/syncReplication", nil
	}
	params := func(applied bool) map[string]string {
		q := map[string]string{}
		if s.global {
			q["isGlobal"] = "true"
		}
		if applied {
			q["applied"] = "true"
		}
		return q
	}

	set := verb("set-sync-replication <topic>", "Acknowledge a topic's messages only once this many other regions hold them, over its namespace's setting", nil)
	set.Long = "Set a topic's synchronous replication, over its namespace's: a message is acknowledged to its producer only once\n" +
		"--regions other regions of the topic's replication clusters hold it too. Without --global the setting is this\n" +
		"cluster's own and applies only to the region of the broker that answers: use --global (or ask the region that\n" +
		"stores the topic's messages, its primary) to have it where publishes are acknowledged."
	flags := syncReplicationFlags(set)
	set = s.scoped(tVerb(set, func(cmd *cobra.Command, t utils.TopicName) error {
		sr, err := flags()
		if err != nil {
			return err
		}
		p, err := path(t)
		if err != nil {
			return err
		}
		if err := a.doREST(cmd, "set "+s.scope()+"synchronous replication of "+t.String(), func(ctx context.Context, c *rest.Client) error {
			return c.PostWithQueryParamsWithContext(ctx, p, sr, params(false))
		}); err != nil {
			return err
		}
		fallback := "none"
		if sr.FallbackAfterSeconds > 0 {
			fallback = "after " + formatSyncFallback(sr.FallbackAfterSeconds)
		}
		done(cmd, "set %ssynchronous replication of %s: %d other regions, fallback %s", s.scope(), t.String(), sr.Regions, fallback)
		return nil
	}))

	get := s.readable(tVerb(readVerb("get-sync-replication <topic>", "Show a topic's synchronous replication (null when not set)", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		p, err := path(t)
		if err != nil {
			return err
		}
		var sr *policy.SyncReplication
		if err := a.doREST(cmd, "get "+s.scope()+"synchronous replication of "+t.String(), func(ctx context.Context, c *rest.Client) error {
			// 204 (not set) leaves sr nil.
			_, err := c.GetWithQueryParamsWithContext(ctx, p, &sr, params(s.applied), true)
			return err
		}); err != nil {
			return err
		}
		return show(cmd, *asJSON, sr, func(w io.Writer) {
			if sr == nil {
				fmt.Fprintln(w, "not set")
				return
			}
			showSyncReplication(w, *sr)
		})
	}))

	remove := s.scoped(tVerb(verb("remove-sync-replication <topic>", "Remove the topic's synchronous replication: it follows its namespace", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		p, err := path(t)
		if err != nil {
			return err
		}
		if err := a.doREST(cmd, "remove "+s.scope()+"synchronous replication of "+t.String(), func(ctx context.Context, c *rest.Client) error {
			return c.DeleteWithQueryParamsWithContext(ctx, p, params(false))
		}); err != nil {
			return err
		}
		done(cmd, "removed %ssynchronous replication of %s", s.scope(), t.String())
		return nil
	}))
	return []*cobra.Command{set, get, remove}
}
