package main

import (
	"context"
	"errors"
	"strconv"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/spf13/cobra"
)

// splitBundleVerb is `namespaces split-bundle` (pulsar-admin's), docs/admin.md,
// Namespace operations, Split.
func (a *adminCmd) splitBundleVerb(nsVerb func(*cobra.Command, func(*cobra.Command, string) error) *cobra.Command) *cobra.Command {
	var (
		bundle, alg string
		unload      bool
	)
	c := nsVerb(verb("split-bundle <tenant/namespace>", "Split a bundle in two; its owner keeps both halves unless --unload", nil), func(cmd *cobra.Command, ns string) error {
		if bundle == "" {
			return usageError{errors.New("--bundle: required")}
		}
		params := map[string]string{"unload": strconv.FormatBool(unload)}
		if alg != "" {
			params["splitAlgorithmName"] = alg
		}
		what := "bundle " + bundle + " of " + ns
		if err := a.doREST(cmd, "split "+what, func(ctx context.Context, c *rest.Client) error {
			return c.PutWithQueryParamsWithContext(ctx, "/admin/v2/namespaces/"+ns+"/"+bundle+"/split", nil, nil, params)
		}); err != nil {
			return err
		}
		done(cmd, "split %s", what)
		return nil
	})
	c.Flags().StringVarP(&bundle, "bundle", "b", "", "the bundle (required), e.g. 0x00000000_0x40000000")
	c.Flags().BoolVar(&unload, "unload", false, "unload both halves after the split")
	c.Flags().StringVar(&alg, "split-algorithm-name", "", "range_equally_divide (default) or topic_count_equally_divide")
	return c
}
