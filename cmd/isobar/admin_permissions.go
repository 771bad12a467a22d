package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// Permission grants, with pulsar-admin's verbs and flags (stored now,
// enforced once authorization is on; docs/admin.md).

// roleFlag and actionsFlag check --role and --actions before any request.
func roleFlag(role string) error {
	if role == "" {
		return usageError{errors.New("--role: required")}
	}
	if err := policy.ValidRole(role); err != nil {
		return usageError{fmt.Errorf("--role: %v", err)}
	}
	return nil
}

func actionsFlag(actions []string) ([]utils.AuthAction, error) {
	as, err := policy.NormalizeActions(splitList(actions))
	if err != nil {
		return nil, usageError{fmt.Errorf("--actions: %v", err)}
	}
	out := make([]utils.AuthAction, len(as))
	for i, a := range as {
		out[i] = utils.AuthAction(a)
	}
	return out, nil
}

// showPermissions prints role → actions (or subscription → roles), one
// line each, sorted.
func showPermissions[V ~string](cmd *cobra.Command, asJSON bool, m map[string][]V) error {
	if m == nil {
		m = map[string][]V{}
	}
	return show(cmd, asJSON, m, func(w io.Writer) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			vs := make([]string, len(m[k]))
			for i, v := range m[k] {
				vs[i] = string(v)
			}
			slices.Sort(vs)
			fmt.Fprintf(w, "%s\t%s\n", k, strings.Join(vs, ", "))
		}
	})
}

// namespacePermissionVerbs are the namespace verbs of permission grants.
func (a *adminCmd) namespacePermissionVerbs(nsVerb func(*cobra.Command, func(*cobra.Command, string) error) *cobra.Command, asJSON *bool) []*cobra.Command {
	var role, sub string
	var actions, roles []string

	grant := nsVerb(verb("grant-permission <tenant/namespace>", "Grant a role actions on every topic of a namespace (replacing the role's actions there)", nil), func(cmd *cobra.Command, ns string) error {
		var errs []error
		if err := roleFlag(role); err != nil {
			errs = append(errs, err)
		}
		as, err := actionsFlag(actions)
		if err != nil {
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			return usageError{err}
		}
		nsn, _ := utils.GetNamespaceName(ns)
		if err := a.do(cmd, "grant "+role+" on "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().GrantNamespacePermissionWithContext(ctx, *nsn, role, as)
		}); err != nil {
			return err
		}
		done(cmd, "granted %s %s on %s", role, joinActions(as), ns)
		return nil
	})
	grant.Flags().StringVar(&role, "role", "", "the role (required)")
	grant.Flags().StringSliceVar(&actions, "actions", nil, "actions, comma-separated: "+strings.Join(policy.AuthActions, ", ")+" (required)")

	revoke := nsVerb(verb("revoke-permission <tenant/namespace>", "Revoke a role's grant on a namespace (no error if it has none)", nil), func(cmd *cobra.Command, ns string) error {
		if err := roleFlag(role); err != nil {
			return err
		}
		nsn, _ := utils.GetNamespaceName(ns)
		if err := a.do(cmd, "revoke "+role+" on "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().RevokeNamespacePermissionWithContext(ctx, *nsn, role)
		}); err != nil {
			return err
		}
		done(cmd, "revoked %s on %s", role, ns)
		return nil
	})
	revoke.Flags().StringVar(&role, "role", "", "the role (required)")

	list := nsVerb(readVerb("permissions <tenant/namespace>", "Show the roles granted actions on a namespace", asJSON, nil), func(cmd *cobra.Command, ns string) error {
		nsn, _ := utils.GetNamespaceName(ns)
		var m map[string][]utils.AuthAction
		if err := a.do(cmd, "get permissions of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
			m, err = c.Namespaces().GetNamespacePermissionsWithContext(ctx, *nsn)
			return err
		}); err != nil {
			return err
		}
		return showPermissions(cmd, *asJSON, m)
	})

	subFlag := func() error {
		if sub == "" {
			return usageError{errors.New("-s/--subscription: required")}
		}
		return nil
	}
	grantSub := nsVerb(verb("grant-subscription-permission <tenant/namespace>", "Set the roles that may use a subscription (replacing the ones it had)", nil), func(cmd *cobra.Command, ns string) error {
		var errs []error
		if err := subFlag(); err != nil {
			errs = append(errs, err)
		}
		rs := splitList(roles)
		if len(rs) == 0 {
			errs = append(errs, errors.New("--roles: at least one role is required"))
		}
		for _, r := range rs {
			if err := policy.ValidRole(r); err != nil {
				errs = append(errs, fmt.Errorf("--roles: %v", err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return usageError{err}
		}
		nsn, _ := utils.GetNamespaceName(ns)
		if err := a.do(cmd, "grant "+strings.Join(rs, ", ")+" on subscription "+sub+" of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().GrantSubPermissionWithContext(ctx, *nsn, sub, rs)
		}); err != nil {
			return err
		}
		done(cmd, "granted %s subscription %s on %s", strings.Join(rs, ", "), sub, ns)
		return nil
	})
	grantSub.Flags().StringVarP(&sub, "subscription", "s", "", "the subscription (required)")
	grantSub.Flags().StringSliceVar(&roles, "roles", nil, "roles, comma-separated (required)")

	revokeSub := nsVerb(verb("revoke-subscription-permission <tenant/namespace>", "Remove a role from the roles that may use a subscription", nil), func(cmd *cobra.Command, ns string) error {
		if err := errors.Join(subFlag(), roleFlag(role)); err != nil {
			return usageError{err}
		}
		nsn, _ := utils.GetNamespaceName(ns)
		if err := a.do(cmd, "revoke "+role+" on subscription "+sub+" of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().RevokeSubPermissionWithContext(ctx, *nsn, sub, role)
		}); err != nil {
			return err
		}
		done(cmd, "revoked %s on subscription %s of %s", role, sub, ns)
		return nil
	})
	revokeSub.Flags().StringVarP(&sub, "subscription", "s", "", "the subscription (required)")
	revokeSub.Flags().StringVar(&role, "role", "", "the role (required)")

	listSub := nsVerb(readVerb("subscription-permission <tenant/namespace>", "Show the roles that may use each subscription of a namespace", asJSON, nil), func(cmd *cobra.Command, ns string) error {
		nsn, _ := utils.GetNamespaceName(ns)
		var m map[string][]string
		if err := a.do(cmd, "get subscription permissions of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
			m, err = c.Namespaces().GetSubPermissionsWithContext(ctx, *nsn)
			return err
		}); err != nil {
			return err
		}
		return showPermissions(cmd, *asJSON, m)
	})
	return []*cobra.Command{grant, revoke, list, grantSub, revokeSub, listSub}
}

// topicPermissionVerbs are the topic verbs of permission grants.
func (a *adminCmd) topicPermissionVerbs(tVerb func(*cobra.Command, func(*cobra.Command, utils.TopicName) error) *cobra.Command, asJSON *bool) []*cobra.Command {
	var role string
	var actions []string
	grant := tVerb(verb("grant-permission <topic>", "Grant a role actions on a topic (replacing the role's actions there; a partitioned topic's grant covers its partitions)", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var errs []error
		if err := roleFlag(role); err != nil {
			errs = append(errs, err)
		}
		as, err := actionsFlag(actions)
		if err != nil {
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			return usageError{err}
		}
		if err := a.do(cmd, "grant "+role+" on "+t.String(), func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Topics().GrantPermissionWithContext(ctx, t, role, as)
		}); err != nil {
			return err
		}
		done(cmd, "granted %s %s on %s", role, joinActions(as), t.String())
		return nil
	})
	grant.Flags().StringVar(&role, "role", "", "the role (required)")
	grant.Flags().StringSliceVar(&actions, "actions", nil, "actions, comma-separated: "+strings.Join(policy.AuthActions, ", ")+" (required)")

	revoke := tVerb(verb("revoke-permission <topic>", "Revoke a role's grant on a topic (an error if the topic has none of its own for the role)", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		if err := roleFlag(role); err != nil {
			return err
		}
		if err := a.do(cmd, "revoke "+role+" on "+t.String(), func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Topics().RevokePermissionWithContext(ctx, t, role)
		}); err != nil {
			return err
		}
		done(cmd, "revoked %s on %s", role, t.String())
		return nil
	})
	revoke.Flags().StringVar(&role, "role", "", "the role (required)")

	list := tVerb(readVerb("permissions <topic>", "Show the roles granted actions on a topic: its namespace's grants and its own", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var m map[string][]utils.AuthAction
		if err := a.do(cmd, "get permissions of "+t.String(), func(ctx context.Context, c pulsaradmin.Client) (err error) {
			m, err = c.Topics().GetPermissionsWithContext(ctx, t)
			return err
		}); err != nil {
			return err
		}
		return showPermissions(cmd, *asJSON, m)
	})
	return []*cobra.Command{grant, revoke, list}
}

func joinActions(as []utils.AuthAction) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = string(a)
	}
	return strings.Join(s, ",")
}
