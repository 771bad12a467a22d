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

// autoUpdateStrategies are the schema auto-update strategies, Pulsar's
// names.
var autoUpdateStrategies = []utils.SchemaAutoUpdateCompatibilityStrategy{
	utils.AutoUpdateDisabled, utils.Backward, utils.Forward, utils.Full, utils.AlwaysCompatible,
	utils.BackwardTransitive, utils.ForwardTransitive, utils.FullTransitive,
}

// parseAutoUpdateStrategy reads --compatibility as pulsar-admin does
// (FULL, BACKWARD, FORWARD, NONE for AlwaysCompatible) and also takes
// every strategy's own name, in any case, with or without underscores.
func parseAutoUpdateStrategy(s string) (utils.SchemaAutoUpdateCompatibilityStrategy, error) {
	norm := strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	if strings.EqualFold(norm, "NONE") {
		return utils.AlwaysCompatible, nil
	}
	for _, st := range autoUpdateStrategies {
		if strings.EqualFold(norm, string(st)) {
			return st, nil
		}
	}
	names := make([]string, len(autoUpdateStrategies))
	for i, st := range autoUpdateStrategies {
		names[i] = string(st)
	}
	return "", fmt.Errorf("%q is not a strategy: want NONE or one of %s", s, strings.Join(names, ", "))
}

// enableDisableFlags adds pulsar-admin's --enable/-e and --disable/-d to c; the
// function it returns reads them (exactly one must be given).
func enableDisableFlags(c *cobra.Command) func() (bool, error) {
	var enable, disable bool
	c.Flags().BoolVarP(&enable, "enable", "e", false, "turn it on")
	c.Flags().BoolVarP(&disable, "disable", "d", false, "turn it off")
	return func() (bool, error) {
		if enable == disable {
			return false, usageError{errors.New("give exactly one of --enable and --disable")}
		}
		return enable, nil
	}
}

// namespaceSchemaSecurityVerbs are the verbs of a namespace's schema
// validation, schema auto-update strategy and flag, subscription auth
// mode and encryption requirement, with pulsar-admin's names (and
// set-/get-schema-validation-enforced as aliases of pulsar-admin's
// set-/get-schema-validation-enforce).
func (a *adminCmd) namespaceSchemaSecurityVerbs(nsVerb func(*cobra.Command, func(*cobra.Command, string) error) *cobra.Command, asJSON *bool) []*cobra.Command {
	var out []*cobra.Command
	nsName := func(ns string) utils.NameSpaceName {
		n, _ := utils.GetNamespaceName(ns) // parsed by nsVerb already
		return *n
	}
	// flag is a namespace's boolean: set with --enable/--disable, shown
	// as true or false.
	flag := func(name, what string, aliases []string,
		set func(ctx context.Context, c pulsaradmin.Client, ns string, on bool) error,
		get func(ctx context.Context, c pulsaradmin.Client, ns string) (bool, error)) {
		setCmd := verb("set-"+name+" <tenant/namespace>", "Turn a namespace's "+what+" on or off", nil)
		on := enableDisableFlags(setCmd)
		setCmd = nsVerb(setCmd, func(cmd *cobra.Command, ns string) error {
			v, err := on()
			if err != nil {
				return err
			}
			if err := a.do(cmd, "set "+what+" of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
				return set(ctx, c, ns, v)
			}); err != nil {
				return err
			}
			done(cmd, "set %s of %s to %t", what, ns, v)
			return nil
		})
		getCmd := nsVerb(readVerb("get-"+name+" <tenant/namespace>", "Show a namespace's "+what, asJSON, nil), func(cmd *cobra.Command, ns string) error {
			var v bool
			if err := a.do(cmd, "get "+what+" of "+ns, func(ctx context.Context, c pulsaradmin.Client) (err error) {
				v, err = get(ctx, c, ns)
				return err
			}); err != nil {
				return err
			}
			return show(cmd, *asJSON, v, func(w io.Writer) { fmt.Fprintln(w, v) })
		})
		for _, al := range aliases {
			setCmd.Aliases = append(setCmd.Aliases, "set-"+al)
			getCmd.Aliases = append(getCmd.Aliases, "get-"+al)
		}
		out = append(out, setCmd, getCmd)
	}
	flag("schema-validation-enforce", "schema validation (producers without a schema refused on topics with one)", []string{"schema-validation-enforced"},
		func(ctx context.Context, c pulsaradmin.Client, ns string, on bool) error {
			return c.Namespaces().SetSchemaValidationEnforcedWithContext(ctx, nsName(ns), on)
		},
		func(ctx context.Context, c pulsaradmin.Client, ns string) (bool, error) {
			return c.Namespaces().GetSchemaValidationEnforcedWithContext(ctx, nsName(ns))
		})
	flag("is-allow-auto-update-schema", "schema auto-update (producers and consumers adding schema versions)", nil,
		func(ctx context.Context, c pulsaradmin.Client, ns string, on bool) error {
			return c.Namespaces().SetIsAllowAutoUpdateSchemaWithContext(ctx, nsName(ns), on)
		},
		func(ctx context.Context, c pulsaradmin.Client, ns string) (bool, error) {
			return c.Namespaces().GetIsAllowAutoUpdateSchemaWithContext(ctx, nsName(ns))
		})
	flag("encryption-required", "encryption requirement (unencrypted messages refused)", nil,
		func(ctx context.Context, c pulsaradmin.Client, ns string, on bool) error {
			return c.Namespaces().SetEncryptionRequiredStatusWithContext(ctx, nsName(ns), on)
		},
		func(ctx context.Context, c pulsaradmin.Client, ns string) (bool, error) {
			p, err := c.Namespaces().GetPoliciesWithContext(ctx, ns)
			if err != nil || p == nil {
				return false, err
			}
			return p.EncryptionRequired, nil
		})

	var strategy string
	var disabled bool
	setStrategy := nsVerb(verb("set-schema-autoupdate-strategy <tenant/namespace>", "Set the strategy checking schemas producers and consumers add, when the namespace sets no schema compatibility strategy", nil), func(cmd *cobra.Command, ns string) error {
		var st utils.SchemaAutoUpdateCompatibilityStrategy
		switch {
		case disabled && strategy != "":
			return usageError{errors.New("give --compatibility or --disabled, not both")}
		case disabled:
			st = utils.AutoUpdateDisabled
		case strategy == "":
			return usageError{errors.New("either --compatibility or --disabled must be specified")}
		default:
			var err error
			if st, err = parseAutoUpdateStrategy(strategy); err != nil {
				return usageError{fmt.Errorf("--compatibility: %v", err)}
			}
		}
		if err := a.do(cmd, "set schema auto-update strategy of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().SetSchemaAutoUpdateCompatibilityStrategyWithContext(ctx, nsName(ns), st)
		}); err != nil {
			return err
		}
		done(cmd, "set schema auto-update strategy of %s to %s", ns, st)
		return nil
	})
	setStrategy.Flags().StringVarP(&strategy, "compatibility", "c", "", "FULL, BACKWARD, FORWARD or NONE (AlwaysCompatible), or a strategy's name: BackwardTransitive, ForwardTransitive, FullTransitive...")
	setStrategy.Flags().BoolVarP(&disabled, "disabled", "d", false, "disable automatic schema updates (AutoUpdateDisabled: new versions only through the admin API's checks)")
	out = append(out, setStrategy,
		nsVerb(readVerb("get-schema-autoupdate-strategy <tenant/namespace>", "Show a namespace's schema auto-update strategy (null when not set)", asJSON, nil), func(cmd *cobra.Command, ns string) error {
			// Read from the policies: pulsaradmin cannot read Pulsar's
			// answer for a strategy that is not set (null).
			p, err := a.policies(cmd, "get schema auto-update strategy of "+ns, ns)
			if err != nil {
				return err
			}
			var v *string
			if s := string(p.SchemaAutoUpdateCompatibilityStrategy); s != "" {
				v = &s
			}
			return show(cmd, *asJSON, v, func(w io.Writer) {
				if v == nil {
					fmt.Fprintln(w, "not set")
				} else {
					fmt.Fprintln(w, *v)
				}
			})
		}))

	var mode string
	setMode := nsVerb(verb("set-subscription-auth-mode <tenant/namespace>", "Set a namespace's subscription auth mode: Prefix requires subscription names to start with the role", nil), func(cmd *cobra.Command, ns string) error {
		var m utils.SubscriptionAuthMode
		switch {
		case strings.EqualFold(mode, string(utils.None)):
			m = utils.None
		case strings.EqualFold(mode, string(utils.Prefix)):
			m = utils.Prefix
		case mode == "":
			return usageError{errors.New("--subscription-auth-mode: required (None or Prefix)")}
		default:
			return usageError{fmt.Errorf("--subscription-auth-mode: %q: want None or Prefix", mode)}
		}
		if err := a.do(cmd, "set subscription auth mode of "+ns, func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Namespaces().SetSubscriptionAuthModeWithContext(ctx, nsName(ns), m)
		}); err != nil {
			return err
		}
		done(cmd, "set subscription auth mode of %s to %s", ns, m)
		return nil
	})
	setMode.Flags().StringVarP(&mode, "subscription-auth-mode", "m", "", "None or Prefix (required)")
	out = append(out, setMode,
		nsVerb(readVerb("get-subscription-auth-mode <tenant/namespace>", "Show a namespace's subscription auth mode", asJSON, nil), func(cmd *cobra.Command, ns string) error {
			p, err := a.policies(cmd, "get subscription auth mode of "+ns, ns)
			if err != nil {
				return err
			}
			m := p.SubscriptionAuthMode
			if m == "" {
				m = utils.None
			}
			return show(cmd, *asJSON, m, func(w io.Writer) { fmt.Fprintln(w, m) })
		}))
	return out
}
