package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// rateVerb is one of a namespace's settings that pulsaradmin cannot
// read, set or remove faithfully (the rates, admin_nspolicies.go's): its
// pulsar-admin verb suffix, its endpoint, and how its set verb's flags
// make the body.
type rateVerb struct {
	name, path, what string
	// perCluster says the setting is kept for each cluster: the verbs act
	// on the entry of the cluster of the broker that answers.
	perCluster bool
	// flags adds the set verb's flags and returns the body they make (or
	// a usage error).
	flags func(c *cobra.Command) func() (any, error)
	// show prints the setting read back (never null).
	show func(w io.Writer, raw json.RawMessage) error
	// long, if set, is the set verb's longer help.
	long string
}

// rateShow makes a rateVerb's show of a printer of rate bodies.
func rateShow(f func(w io.Writer, r rateBody)) func(w io.Writer, raw json.RawMessage) error {
	return func(w io.Writer, raw json.RawMessage) error {
		var rb rateBody
		if err := json.Unmarshal(raw, &rb); err != nil {
			return err
		}
		f(w, rb)
		return nil
	}
}

// rateBody holds any of the rate bodies read back (the fields of the
// other kinds stay zero).
type rateBody struct {
	DispatchThrottlingRateInMsg        int64 `json:"dispatchThrottlingRateInMsg"`
	DispatchThrottlingRateInByte       int64 `json:"dispatchThrottlingRateInByte"`
	RatePeriodInSecond                 int64 `json:"ratePeriodInSecond"`
	RelativeToPublishRate              bool  `json:"relativeToPublishRate"`
	PublishThrottlingRateInMsg         int64 `json:"publishThrottlingRateInMsg"`
	PublishThrottlingRateInByte        int64 `json:"publishThrottlingRateInByte"`
	SubscribeThrottlingRatePerConsumer int64 `json:"subscribeThrottlingRatePerConsumer"`
}

// dispatchFlags are pulsar-admin's flags of the dispatch rates.
func dispatchFlags(relative bool) func(c *cobra.Command) func() (any, error) {
	return func(c *cobra.Command) func() (any, error) {
		var r policy.DispatchRate
		c.Flags().Int64Var(&r.DispatchThrottlingRateInMsg, "msg-dispatch-rate", -1, "messages per period (-1: no limit)")
		c.Flags().Int64Var(&r.DispatchThrottlingRateInByte, "byte-dispatch-rate", -1, "bytes per period (-1: no limit)")
		c.Flags().Int64Var(&r.RatePeriodInSecond, "dispatch-rate-period", 1, "the period, in seconds")
		if relative {
			c.Flags().BoolVar(&r.RelativeToPublishRate, "relative-to-publish-rate", false, "add the topic's publish rate to the limit")
		}
		return func() (any, error) {
			if err := policy.ValidateDispatchRate(r); err != nil {
				return nil, usageError{err}
			}
			return r, nil
		}
	}
}

func showDispatch(w io.Writer, r rateBody) {
	fmt.Fprintf(w, "messages\t%s\nbytes\t%s\nperiod\t%ds\nrelative to publish rate\t%t\n",
		limitText(r.DispatchThrottlingRateInMsg), limitText(r.DispatchThrottlingRateInByte), r.RatePeriodInSecond, r.RelativeToPublishRate)
}

// limitText shows a rate's limit (-1 or 0: none).
func limitText(v int64) string {
	if v <= 0 {
		return "no limit"
	}
	return fmt.Sprint(v)
}

func rateVerbs() []rateVerb {
	return []rateVerb{
		{name: "dispatch-rate", path: "dispatchRate", what: "dispatch rate (all of a topic's subscriptions together)", perCluster: true, flags: dispatchFlags(true), show: rateShow(showDispatch)},
		{name: "subscription-dispatch-rate", path: "subscriptionDispatchRate", what: "subscription dispatch rate (each subscription)", perCluster: true, flags: dispatchFlags(true), show: rateShow(showDispatch)},
		{name: "replicator-dispatch-rate", path: "replicatorDispatchRate", what: "replicator dispatch rate (each remote region)", perCluster: true, flags: dispatchFlags(false), show: rateShow(showDispatch)},
		{name: "publish-rate", path: "publishRate", what: "publish rate", perCluster: true, flags: func(c *cobra.Command) func() (any, error) {
			var r policy.PublishRate
			c.Flags().Int64Var(&r.PublishThrottlingRateInMsg, "msg-publish-rate", -1, "messages per second (-1: no limit)")
			c.Flags().Int64Var(&r.PublishThrottlingRateInByte, "byte-publish-rate", -1, "bytes per second (-1: no limit)")
			return func() (any, error) {
				if err := policy.ValidatePublishRate(r); err != nil {
					return nil, usageError{err}
				}
				return r, nil
			}
		}, show: rateShow(func(w io.Writer, r rateBody) {
			fmt.Fprintf(w, "messages per second\t%s\nbytes per second\t%s\n", limitText(r.PublishThrottlingRateInMsg), limitText(r.PublishThrottlingRateInByte))
		})},
		{name: "subscribe-rate", path: "subscribeRate", what: "subscribe rate (per consumer)", perCluster: true, flags: func(c *cobra.Command) func() (any, error) {
			var r policy.SubscribeRate
			c.Flags().IntVar(&r.SubscribeThrottlingRatePerConsumer, "subscribe-rate", -1, "subscribes per consumer per period (-1: no limit)")
			c.Flags().IntVar(&r.RatePeriodInSecond, "subscribe-rate-period", 30, "the period, in seconds")
			return func() (any, error) {
				if err := policy.ValidateSubscribeRate(r); err != nil {
					return nil, usageError{err}
				}
				return r, nil
			}
		}, show: rateShow(func(w io.Writer, r rateBody) {
			fmt.Fprintf(w, "subscribes per consumer\t%s\nperiod\t%ds\n", limitText(r.SubscribeThrottlingRatePerConsumer), r.RatePeriodInSecond)
		})},
	}
}

// namespaceRateVerbs are set-, get- and remove- verbs of a namespace's
// rates, as pulsar-admin names them (docs/admin.md, "Namespace rates"):
// each reads and writes the entry of the cluster of the broker that
// answers; and of the settings of namespaceRESTSettings. They go through
// the bare REST client: pulsaradmin can neither remove a namespace's rate
// nor tell an unset one from zero.
func (a *adminCmd) namespaceRateVerbs(nsVerb func(*cobra.Command, func(*cobra.Command, string) error) *cobra.Command, asJSON *bool) []*cobra.Command {
	var out []*cobra.Command
	for _, r := range append(rateVerbs(), namespaceRESTSettings()...) {
		path := func(ns string) string { return "/admin/v2/namespaces/" + ns + "/" + r.path }
		where := ""
		if r.perCluster {
			where = " in this cluster"
		}
		set := verb("set-"+r.name+" <tenant/namespace>", "Set a namespace's "+r.what+where, nil)
		set.Long = r.long
		body := r.flags(set)
		set = nsVerb(set, func(cmd *cobra.Command, ns string) error {
			b, err := body()
			if err != nil {
				return err
			}
			if err := a.doREST(cmd, "set "+r.name+" of "+ns, func(ctx context.Context, c *rest.Client) error {
				return c.PostWithContext(ctx, path(ns), b)
			}); err != nil {
				return err
			}
			done(cmd, "set %s of %s", r.what, ns)
			return nil
		})
		get := nsVerb(readVerb("get-"+r.name+" <tenant/namespace>", "Show a namespace's "+r.what+where+" (null when not set)", asJSON, nil), func(cmd *cobra.Command, ns string) error {
			var raw json.RawMessage
			if err := a.doREST(cmd, "get "+r.name+" of "+ns, func(ctx context.Context, c *rest.Client) error {
				return c.GetWithContext(ctx, path(ns), &raw)
			}); err != nil {
				return err
			}
			if len(raw) == 0 || string(raw) == "null" {
				return show(cmd, *asJSON, nil, func(w io.Writer) { fmt.Fprintln(w, "not set") })
			}
			var showErr error
			if err := show(cmd, *asJSON, raw, func(w io.Writer) { showErr = r.show(w, raw) }); err != nil {
				return err
			}
			if showErr != nil {
				return adminErr("get "+r.name+" of "+ns, showErr)
			}
			return nil
		})
		remove := nsVerb(verb("remove-"+r.name+" <tenant/namespace>", "Remove a namespace's "+r.what+where, nil), func(cmd *cobra.Command, ns string) error {
			if err := a.doREST(cmd, "remove "+r.name+" of "+ns, func(ctx context.Context, c *rest.Client) error {
				return c.DeleteWithContext(ctx, path(ns))
			}); err != nil {
				return err
			}
			done(cmd, "removed %s of %s", r.what, ns)
			return nil
		})
		out = append(out, set, get, remove)
	}
	return out
}
