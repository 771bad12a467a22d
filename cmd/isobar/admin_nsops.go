package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// namespaceOpVerbs are the namespace verbs of docs/admin.md, "Namespace
// operations" and "Inactive topics", and the anti-affinity group, named
// as pulsar-admin names them.
func (a *adminCmd) namespaceOpVerbs(nsVerb func(*cobra.Command, func(*cobra.Command, string) error) *cobra.Command, asJSON *bool) []*cobra.Command {
	var bundle, sub string
	bundleFlag := func(c *cobra.Command, what string) *cobra.Command {
		c.Flags().StringVarP(&bundle, "bundle", "b", "", what)
		return c
	}
	subFlag := func(c *cobra.Command, what string) *cobra.Command {
		c.Flags().StringVarP(&sub, "sub", "s", "", what)
		return c
	}
	where := func(ns string) string {
		if bundle != "" {
			return "bundle " + bundle + " of " + ns
		}
		return ns
	}
	nsn := func(ns string) utils.NameSpaceName {
		n, _ := utils.GetNamespaceName(ns)
		return *n
	}

	unload := bundleFlag(nsVerb(verb("unload <tenant/namespace>", "Unload a namespace's bundles (or one): clients reconnect and the bundles are placed again", nil), func(cmd *cobra.Command, ns string) error {
		if err := a.do(cmd, "unload "+where(ns), func(ctx context.Context, c pulsaradmin.Client) error {
			if bundle != "" {
				return c.Namespaces().UnloadNamespaceBundleWithContext(ctx, ns, bundle)
			}
			return c.Namespaces().UnloadWithContext(ctx, ns)
		}); err != nil {
			return err
		}
		done(cmd, "unloaded %s", where(ns))
		return nil
	}), "only this bundle, e.g. 0x00000000_0x40000000")

	clearBacklog := subFlag(bundleFlag(nsVerb(verb("clear-backlog <tenant/namespace>", "Skip every subscription (or one) of every topic of a namespace (or bundle) to the end", nil), func(cmd *cobra.Command, ns string) error {
		what := "clear the backlog of " + where(ns)
		if sub != "" {
			what = "clear the backlog of subscription " + sub + " of " + where(ns)
		}
		if err := a.do(cmd, what, func(ctx context.Context, c pulsaradmin.Client) error {
			n := c.Namespaces()
			switch {
			case bundle != "" && sub != "":
				return n.ClearNamespaceBundleBacklogForSubscriptionWithContext(ctx, nsn(ns), bundle, sub)
			case bundle != "":
				return n.ClearNamespaceBundleBacklogWithContext(ctx, nsn(ns), bundle)
			case sub != "":
				return n.ClearNamespaceBacklogForSubscriptionWithContext(ctx, nsn(ns), sub)
			}
			return n.ClearNamespaceBacklogWithContext(ctx, nsn(ns))
		}); err != nil {
			return err
		}
		done(cmd, "cleared the backlog of %s", where(ns))
		return nil
	}), "only this bundle"), "only this subscription")

	unsubscribe := subFlag(bundleFlag(nsVerb(verb("unsubscribe <tenant/namespace>", "Delete a subscription from every topic of a namespace (or bundle)", nil), func(cmd *cobra.Command, ns string) error {
		if sub == "" {
			return usageError{errors.New("--sub: required")}
		}
		if err := a.do(cmd, "unsubscribe "+sub+" from "+where(ns), func(ctx context.Context, c pulsaradmin.Client) error {
			if bundle != "" {
				return c.Namespaces().UnsubscribeNamespaceBundleWithContext(ctx, nsn(ns), bundle, sub)
			}
			return c.Namespaces().UnsubscribeNamespaceWithContext(ctx, nsn(ns), sub)
		}); err != nil {
			return err
		}
		done(cmd, "deleted subscription %s from %s", sub, where(ns))
		return nil
	}), "only this bundle"), "the subscription (required)")

	var force bool
	deleteBundle := bundleFlag(nsVerb(verb("delete-bundle <tenant/namespace>", "Delete a bundle: refused while it has topics, unless --force deletes them", nil), func(cmd *cobra.Command, ns string) error {
		if bundle == "" {
			return usageError{errors.New("--bundle: required")}
		}
		if err := a.doREST(cmd, "delete "+where(ns), func(ctx context.Context, c *rest.Client) error {
			return c.DeleteWithQueryParamsWithContext(ctx, "/admin/v2/namespaces/"+ns+"/"+bundle, map[string]string{"force": strconv.FormatBool(force)})
		}); err != nil {
			return err
		}
		done(cmd, "deleted %s", where(ns))
		return nil
	}), "the bundle (required)")
	deleteBundle.Flags().BoolVarP(&force, "force", "f", false, "delete the bundle's topics too")

	setInactive, getInactive, removeInactive := inactiveVerbs(nsVerb, "<tenant/namespace>", asJSON,
		func(cmd *cobra.Command, ns string, p utils.InactiveTopicPolicies) error {
			return a.do(cmd, "set the inactive topic policies of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
				return c.Namespaces().SetInactiveTopicPoliciesWithContext(ctx, nsn(ns), p)
			})
		},
		func(cmd *cobra.Command, ns string) (p *utils.InactiveTopicPolicies, err error) {
			// Read raw: pulsaradmin's getter turns "not set" (204) into
			// zero values.
			err = a.doREST(cmd, "get the inactive topic policies of "+ns, func(ctx context.Context, c *rest.Client) error {
				return c.GetWithContext(ctx, "/admin/v2/namespaces/"+ns+"/inactiveTopicPolicies", &p)
			})
			return p, err
		},
		func(cmd *cobra.Command, ns string) error {
			return a.do(cmd, "remove the inactive topic policies of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
				return c.Namespaces().RemoveInactiveTopicPoliciesWithContext(ctx, nsn(ns))
			})
		})

	var group string
	setGroup := nsVerb(verb("set-anti-affinity-group <tenant/namespace>", "Put a namespace in an anti-affinity group: its bundles are placed apart from the group's other namespaces", nil), func(cmd *cobra.Command, ns string) error {
		if group == "" {
			return usageError{errors.New("--group: required")}
		}
		if err := a.do(cmd, "set the anti-affinity group of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().SetNamespaceAntiAffinityGroupWithContext(ctx, ns, group)
		}); err != nil {
			return err
		}
		done(cmd, "set the anti-affinity group of %s to %s", ns, group)
		return nil
	})
	setGroup.Flags().StringVarP(&group, "group", "g", "", "the group (required)")
	getGroup := nsVerb(readVerb("get-anti-affinity-group <tenant/namespace>", "Show a namespace's anti-affinity group", asJSON, nil), func(cmd *cobra.Command, ns string) error {
		var g string
		if err := a.do(cmd, "get the anti-affinity group of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
			g, err = c.Namespaces().GetNamespaceAntiAffinityGroupWithContext(ctx, ns)
			return err
		}); err != nil {
			return err
		}
		var v *string
		if g != "" {
			v = &g
		}
		return show(cmd, *asJSON, v, func(w io.Writer) {
			if v == nil {
				fmt.Fprintln(w, "not set")
			} else {
				fmt.Fprintln(w, g)
			}
		})
	})
	deleteGroup := nsVerb(verb("delete-anti-affinity-group <tenant/namespace>", "Take a namespace out of its anti-affinity group", nil), func(cmd *cobra.Command, ns string) error {
		if err := a.do(cmd, "delete the anti-affinity group of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().DeleteNamespaceAntiAffinityGroupWithContext(ctx, ns)
		}); err != nil {
			return err
		}
		done(cmd, "deleted the anti-affinity group of %s", ns)
		return nil
	})
	var cluster, tenant string
	listGroup := readVerb("get-anti-affinity-namespaces", "List a tenant's namespaces in an anti-affinity group", asJSON, func(cmd *cobra.Command, _ []string) error {
		var errs []error
		for _, f := range []struct{ name, v string }{{"--cluster", cluster}, {"--group", group}, {"--tenant", tenant}} {
			if f.v == "" {
				errs = append(errs, fmt.Errorf("%s: required", f.name))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return usageError{err}
		}
		var names []string
		if err := a.do(cmd, "list anti-affinity group "+group, func(ctx context.Context, c pulsaradmin.Client) (err error) {
			names, err = c.Namespaces().GetAntiAffinityNamespacesWithContext(ctx, tenant, cluster, group)
			return err
		}); err != nil {
			return err
		}
		return showList(cmd, *asJSON, names)
	})
	listGroup.Flags().StringVarP(&cluster, "cluster", "c", "", "the cluster (required)")
	listGroup.Flags().StringVarP(&group, "group", "g", "", "the group (required)")
	listGroup.Flags().StringVarP(&tenant, "tenant", "p", "", "the tenant (required)")

	return []*cobra.Command{unload, clearBacklog, unsubscribe, deleteBundle, setInactive, getInactive, removeInactive,
		setGroup, getGroup, deleteGroup, listGroup, a.splitBundleVerb(nsVerb)}
}

// inactiveVerbs are set-, get- and remove-inactive-topic-policies for a
// namespace or a topic (target names it in the use line).
func inactiveVerbs[T any](
	targetVerb func(*cobra.Command, func(*cobra.Command, T) error) *cobra.Command,
	target string, asJSON *bool,
	set func(cmd *cobra.Command, name T, p utils.InactiveTopicPolicies) error,
	get func(cmd *cobra.Command, name T) (*utils.InactiveTopicPolicies, error),
	remove func(cmd *cobra.Command, name T) error,
) (*cobra.Command, *cobra.Command, *cobra.Command) {
	var enable, disable bool
	var duration, mode string
	setV := targetVerb(verb("set-inactive-topic-policies "+target, "Delete topics that have been inactive for a time (--enable-delete-while-inactive) or keep them", nil), func(cmd *cobra.Command, name T) error {
		var errs []error
		if enable == disable {
			errs = append(errs, errors.New("give exactly one of --enable-delete-while-inactive and --disable-delete-while-inactive"))
		}
		secs, err := parseRelativeTime(duration)
		switch {
		case duration == "":
			errs = append(errs, errors.New("--max-inactive-duration: required, e.g. 10m"))
		case err != nil:
			errs = append(errs, fmt.Errorf("--max-inactive-duration: %v", err))
		case secs > 1<<31-1:
			errs = append(errs, fmt.Errorf("--max-inactive-duration: %q is too long", duration))
		}
		var m *utils.InactiveTopicDeleteMode
		if mode != "" {
			v, err := utils.ParseInactiveTopicDeleteMode(mode)
			if err != nil {
				errs = append(errs, fmt.Errorf("--delete-mode: %q: want %s or %s", mode, utils.DeleteWhenNoSubscriptions, utils.DeleteWhenSubscriptionsCaughtUp))
			}
			m = &v
		}
		if err := errors.Join(errs...); err != nil {
			return usageError{err}
		}
		p := utils.NewInactiveTopicPolicies(m, int(secs), enable)
		if err := set(cmd, name, p); err != nil {
			return err
		}
		done(cmd, "set the inactive topic policies of %v: %s", name, formatInactive(&p))
		return nil
	})
	setV.Flags().BoolVarP(&enable, "enable-delete-while-inactive", "e", false, "delete inactive topics")
	setV.Flags().BoolVarP(&disable, "disable-delete-while-inactive", "d", false, "keep inactive topics")
	setV.Flags().StringVarP(&duration, "max-inactive-duration", "t", "", "how long a topic must be inactive: seconds, or 30m, 1h, 2d (required)")
	setV.Flags().StringVarP(&mode, "delete-mode", "m", "", "delete_when_no_subscriptions or delete_when_subscriptions_caught_up (default: the broker's)")
	getV := targetVerb(readVerb("get-inactive-topic-policies "+target, "Show the inactive topic policies (null when not set)", asJSON, nil), func(cmd *cobra.Command, name T) error {
		p, err := get(cmd, name)
		if err != nil {
			return err
		}
		return show(cmd, *asJSON, p, func(w io.Writer) { fmt.Fprintln(w, formatInactive(p)) })
	})
	removeV := targetVerb(verb("remove-inactive-topic-policies "+target, "Remove the inactive topic policies: the next level's apply", nil), func(cmd *cobra.Command, name T) error {
		if err := remove(cmd, name); err != nil {
			return err
		}
		done(cmd, "removed the inactive topic policies of %v", name)
		return nil
	})
	return setV, getV, removeV
}

func formatInactive(p *utils.InactiveTopicPolicies) string {
	if p == nil {
		return "not set"
	}
	mode := "the broker's mode"
	if p.InactiveTopicDeleteMode != nil {
		mode = string(*p.InactiveTopicDeleteMode)
	}
	if !p.DeleteWhileInactive {
		return fmt.Sprintf("keep inactive topics (%ds, %s)", p.MaxInactiveDurationSeconds, mode)
	}
	return fmt.Sprintf("delete topics inactive for %ds, %s", p.MaxInactiveDurationSeconds, strings.ReplaceAll(mode, "_", " "))
}
