package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// restClient is a bare REST client on the admin URL, for Isobar's own
// endpoints, which pulsaradmin does not know.
func (a *adminCmd) restClient() (*rest.Client, error) {
	if err := validateAdminURL(a.url); err != nil {
		return nil, usageError{err}
	}
	hc, err := a.httpClient()
	if err != nil {
		return nil, err
	}
	return &rest.Client{ServiceURL: strings.TrimRight(a.url, "/"), HTTPClient: hc}, nil
}

// doREST is do for Isobar's own endpoints.
func (a *adminCmd) doREST(cmd *cobra.Command, op string, f func(ctx context.Context, c *rest.Client) error) error {
	c, err := a.restClient()
	if err != nil {
		return err
	}
	if err := f(cmd.Context(), c); err != nil {
		return adminErr(op, err)
	}
	return nil
}

// primaryVerbs are the namespace verbs of failover (docs/failover.md).
func (a *adminCmd) primaryVerbs(nsVerb func(*cobra.Command, func(*cobra.Command, string) error) *cobra.Command, asJSON *bool) []*cobra.Command {
	path := func(ns string) string { return "/admin/v2/namespaces/" + ns + "/primary" }
	var activeActive bool
	var autoAfter time.Duration
	set := verb("set-primary <tenant/namespace> [region]", "Make a namespace active-standby with this primary region, or active-active with --active-active", nil)
	set.Args = primaryArgs("<tenant/namespace>")
	set.RunE = func(cmd *cobra.Command, args []string) error {
		ns, err := parseNamespace(args[0])
		if err != nil {
			return err
		}
		primary, err := primaryRegion(args, activeActive)
		if err != nil {
			return err
		}
		if activeActive {
			if err := a.doREST(cmd, "make "+ns+" active-active", func(ctx context.Context, c *rest.Client) error {
				return c.DeleteWithContext(ctx, path(ns))
			}); err != nil {
				return err
			}
			done(cmd, "%s is active-active", ns)
			return nil
		}
		body := map[string]any{"mode": policy.ActiveStandby, "primary": primary}
		if cmd.Flags().Changed("auto-failover-after") {
			if autoAfter < 0 || autoAfter > policy.MaxAutoFailoverSeconds*time.Second || autoAfter%time.Second != 0 {
				return usageError{fmt.Errorf("--auto-failover-after: %v is not a whole number of seconds within 0..%ds", autoAfter, policy.MaxAutoFailoverSeconds)}
			}
			body["autoFailoverAfterSeconds"] = int(autoAfter / time.Second)
		}
		if err := a.doREST(cmd, "set the primary of "+ns, func(ctx context.Context, c *rest.Client) error {
			return c.PostWithContext(ctx, path(ns), body)
		}); err != nil {
			return err
		}
		done(cmd, "%s is active-standby with primary %s", ns, primary)
		return nil
	}
	set.Flags().BoolVar(&activeActive, "active-active", false, "make the namespace active-active (no primary)")
	set.Flags().DurationVar(&autoAfter, "auto-failover-after", 0, "let another region promote itself once the primary has been gone this long (e.g. 30s; 0: manual failover only)")
	get := nsVerb(readVerb("get-primary <tenant/namespace>", "Show a namespace's replication mode, primary region and epoch", asJSON, nil), func(cmd *cobra.Command, ns string) error {
		var f policy.Failover
		if err := a.doREST(cmd, "get the primary of "+ns, func(ctx context.Context, c *rest.Client) error {
			return c.GetWithContext(ctx, path(ns), &f)
		}); err != nil {
			return err
		}
		return show(cmd, *asJSON, f, func(w io.Writer) {
			fmt.Fprintf(w, "mode\t%s\n", f.Mode)
			if f.Primary != "" {
				fmt.Fprintf(w, "primary\t%s\n", f.Primary)
			}
			fmt.Fprintf(w, "epoch\t%d\n", f.Epoch)
			if f.AutoAfterSeconds > 0 {
				fmt.Fprintf(w, "auto failover after\t%ds\n", f.AutoAfterSeconds)
			}
		})
	})
	return []*cobra.Command{set, get}
}

// topicPrimaryVerbs are the topic verbs of failover: a topic's own mode
// and primary, overriding its namespace's (docs/failover.md).
func (a *adminCmd) topicPrimaryVerbs(asJSON *bool) []*cobra.Command {
	path := func(topic string) (string, error) {
		p, err := restTopicPath(topic)
		if err != nil {
			return "", usageError{err}
		}
		if !strings.HasPrefix(p, "persistent/") {
			return "", usageError{fmt.Errorf("topic %q: only a persistent topic has a primary region", topic)}
		}
		return "/admin/v2/" + p + "/primary", nil
	}
	var activeActive bool
	set := verb("set-primary <topic> [region]", "Give a topic its own primary region (active-standby), or make it active-active with --active-active, whatever its namespace's mode", nil)
	set.Args = primaryArgs("<topic>")
	set.RunE = func(cmd *cobra.Command, args []string) error {
		p, err := path(args[0])
		if err != nil {
			return err
		}
		primary, err := primaryRegion(args, activeActive)
		if err != nil {
			return err
		}
		body := map[string]any{"mode": policy.ActiveStandby, "primary": primary}
		if activeActive {
			body = map[string]any{"mode": policy.ActiveActive}
		}
		if err := a.doREST(cmd, "set the primary of "+args[0], func(ctx context.Context, c *rest.Client) error {
			return c.PostWithContext(ctx, p, body)
		}); err != nil {
			return err
		}
		if activeActive {
			done(cmd, "%s is active-active", args[0])
		} else {
			done(cmd, "%s is active-standby with primary %s", args[0], primary)
		}
		return nil
	}
	set.Flags().BoolVar(&activeActive, "active-active", false, "make the topic active-active (no primary)")

	remove := verb("remove-primary <topic>", "Make a topic follow its namespace's replication mode and primary again", func(cmd *cobra.Command, args []string) error {
		p, err := path(args[0])
		if err != nil {
			return err
		}
		if err := a.doREST(cmd, "remove the primary of "+args[0], func(ctx context.Context, c *rest.Client) error {
			return c.DeleteWithContext(ctx, p)
		}); err != nil {
			return err
		}
		done(cmd, "%s follows its namespace's replication mode", args[0])
		return nil
	})

	var applied bool
	get := readVerb("get-primary <topic>", "Show a topic's own replication mode, primary and epoch (--applied: the ones in force, its own or its namespace's)", asJSON, func(cmd *cobra.Command, args []string) error {
		p, err := path(args[0])
		if err != nil {
			return err
		}
		var params map[string]string
		if applied {
			params = map[string]string{"applied": "true"}
		}
		var f *policy.Failover
		if err := a.doREST(cmd, "get the primary of "+args[0], func(ctx context.Context, c *rest.Client) error {
			// 204 (no policy of its own) leaves f nil.
			_, err := c.GetWithQueryParamsWithContext(ctx, p, &f, params, true)
			return err
		}); err != nil {
			return err
		}
		if f == nil {
			return show(cmd, *asJSON, nil, func(w io.Writer) {
				fmt.Fprintf(w, "%s follows its namespace (get-primary --applied shows the namespace's)\n", args[0])
			})
		}
		return show(cmd, *asJSON, f, func(w io.Writer) {
			fmt.Fprintf(w, "mode\t%s\n", f.Mode)
			if f.Primary != "" {
				fmt.Fprintf(w, "primary\t%s\n", f.Primary)
			}
			fmt.Fprintf(w, "epoch\t%d\n", f.Epoch)
		})
	})
	get.Flags().BoolVar(&applied, "applied", false, "show the mode in force: the topic's own, else its namespace's")
	return []*cobra.Command{set, get, remove}
}

// primaryArgs checks set-primary's arguments: what, then an optional
// region.
func primaryArgs(what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < 1 || len(args) > 2 {
			return usageError{fmt.Errorf("want %s [region], got %d arguments", what, len(args))}
		}
		return nil
	}
}

// primaryRegion is set-primary's region argument, checked against
// --active-active (exactly one of them).
func primaryRegion(args []string, activeActive bool) (string, error) {
	var primary string
	if len(args) == 2 {
		primary = args[1]
		if err := parseName("region", primary); err != nil {
			return "", err
		}
	}
	if activeActive == (primary != "") {
		return "", usageError{fmt.Errorf("give a primary region or --active-active, not both or neither")}
	}
	return primary, nil
}

// httpClient is an HTTP client that trusts --tls-trust-certs-file and
// sends the token of --token-file, read at each request.
func (a *adminCmd) httpClient() (*http.Client, error) {
	if a.tokenFile == "" && a.trustCerts == "" {
		return http.DefaultClient, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if a.trustCerts != "" {
		b, err := os.ReadFile(a.trustCerts)
		if err != nil {
			return nil, usageError{fmt.Errorf("--tls-trust-certs-file: %w", err)}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, usageError{fmt.Errorf("--tls-trust-certs-file: %s holds no PEM certificate", a.trustCerts)}
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var rt http.RoundTripper = tr
	if a.tokenFile != "" {
		if _, err := os.Stat(a.tokenFile); err != nil {
			return nil, usageError{fmt.Errorf("--token-file: %w", err)}
		}
		rt = bearer{file: a.tokenFile, next: tr}
	}
	return &http.Client{Transport: rt}, nil
}

// bearer sends the token in file with every request.
type bearer struct {
	file string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := os.ReadFile(b.file)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	return b.next.RoundTrip(r)
}
