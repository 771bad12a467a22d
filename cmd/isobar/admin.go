package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

const defaultAdminURL = "http://localhost:8080"

// adminCmd holds what every `isobar admin` verb shares: the admin URL.
type adminCmd struct {
	url                   string
	tokenFile, trustCerts string
}

// newAdminCmd is `isobar admin <noun> <verb>`, shaped like pulsar-admin:
// it talks to the Pulsar v2 admin REST API of any broker (docs/admin.md).
// Results go to stdout (--json on every read), confirmations and errors
// to stderr; bad arguments exit 2, refusals by the server exit 1.
func newAdminCmd() *cobra.Command {
	a := &adminCmd{}
	cmd := group("admin", "Administer clusters, tenants, namespaces and topics over the admin REST API (like pulsar-admin)")
	pf := cmd.PersistentFlags()
	pf.StringVarP(&a.url, "admin-url", "u", envOr("ISOBAR_ADMIN_URL", defaultAdminURL), "admin REST URL of a broker (env ISOBAR_ADMIN_URL; pulsar-admin's --admin-url, also --web-service-url)")
	alias(pf, "admin-url", "web-service-url")
	cmd.PersistentFlags().StringVar(&a.tokenFile, "token-file", os.Getenv("ISOBAR_TOKEN_FILE"), "file holding the token to authenticate with, sent as Authorization: Bearer (env ISOBAR_TOKEN_FILE)")
	cmd.PersistentFlags().StringVar(&a.trustCerts, "tls-trust-certs-file", os.Getenv("ISOBAR_TLS_TRUST_CERTS_FILE"), "PEM file of the CAs an https:// broker's certificate chains to (env ISOBAR_TLS_TRUST_CERTS_FILE)")
	cmd.AddCommand(a.clustersCmd(), a.tenantsCmd(), a.namespacesCmd(), a.topicsCmd(), a.brokersCmd(), a.schemasCmd(), a.bookiesCmd(), a.transactionsCmd(), a.applyCmd())
	return cmd
}

// group is a noun: it only holds verbs, and anything else is a usage
// error naming the closest verbs (unknownCommand).
func group(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE:  unknownCommand,
	}
}

// verb is a leaf command taking exactly the named positional arguments.
func verb(use, short string, run func(cmd *cobra.Command, args []string) error) *cobra.Command {
	names := strings.Fields(use)[1:]
	var want []string
	for _, n := range names {
		if strings.HasPrefix(n, "<") {
			want = append(want, n)
		}
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != len(want) {
				if len(want) == 0 {
					return usageError{fmt.Errorf("takes no arguments, got %d", len(args))}
				}
				return usageError{fmt.Errorf("want %s, got %d arguments", strings.Join(want, " "), len(args))}
			}
			return nil
		},
		RunE: run,
	}
}

// readVerb is a verb with --json.
func readVerb(use, short string, asJSON *bool, run func(cmd *cobra.Command, args []string) error) *cobra.Command {
	c := verb(use, short, run)
	c.Flags().BoolVar(asJSON, "json", false, "print the result as JSON")
	return c
}

// client builds the admin client; a bad URL is a usage error.
func (a *adminCmd) client() (pulsaradmin.Client, error) {
	if err := validateAdminURL(a.url); err != nil {
		return nil, usageError{err}
	}
	if a.tokenFile != "" {
		if _, err := os.Stat(a.tokenFile); err != nil {
			return nil, usageError{fmt.Errorf("--token-file: %w", err)}
		}
	}
	c, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: strings.TrimRight(a.url, "/"),
		TokenFile: a.tokenFile, TLSTrustCertsFilePath: a.trustCerts})
	if err != nil {
		return nil, fmt.Errorf("admin client for %s: %w", a.url, err)
	}
	return c, nil
}

// do runs one request against the admin API and names op in its error.
func (a *adminCmd) do(cmd *cobra.Command, op string, f func(ctx context.Context, c pulsaradmin.Client) error) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	if err := f(cmd.Context(), c); err != nil {
		return adminErr(op, err)
	}
	return nil
}

// adminError is an answer of the admin API other than success: the HTTP
// status and the server's {"reason": ...}.
type adminError struct {
	Op     string
	Status int
	Reason string
}

func (e *adminError) Error() string {
	status := fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
	if e.Reason == "" || e.Reason == status {
		return fmt.Sprintf("%s: HTTP %s", e.Op, status)
	}
	return fmt.Sprintf("%s: HTTP %s: %s", e.Op, status, e.Reason)
}

func adminErr(op string, err error) error {
	var re rest.Error
	if errors.As(err, &re) {
		return &adminError{Op: op, Status: re.Code, Reason: strings.TrimSpace(re.Reason)}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// done confirms a change on stderr; stdout carries only results.
func done(cmd *cobra.Command, format string, args ...any) {
	fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...)
}

// show prints v as JSON or, otherwise, in human form.
func show(cmd *cobra.Command, asJSON bool, v any, human func(w io.Writer)) error {
	w := cmd.OutOrStdout()
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	human(tw)
	return tw.Flush()
}

// showList prints names one a line, or a JSON array (never null).
func showList(cmd *cobra.Command, asJSON bool, names []string) error {
	if names == nil {
		names = []string{}
	}
	return show(cmd, asJSON, names, func(w io.Writer) {
		for _, n := range names {
			fmt.Fprintln(w, n)
		}
	})
}

// ---- argument parsing (all failures are usage errors)

func parseNamespace(s string) (string, error) {
	ns, err := utils.GetNamespaceName(s)
	if err != nil {
		return "", usageError{fmt.Errorf("namespace %q: want tenant/namespace (%v)", s, err)}
	}
	return ns.String(), nil
}

func parseTopic(s string) (utils.TopicName, error) {
	if _, err := restTopicPath(s); err != nil {
		return utils.TopicName{}, usageError{err}
	}
	t, err := utils.GetTopicName(s)
	if err != nil {
		return utils.TopicName{}, usageError{fmt.Errorf("topic %q: %v", s, err)}
	}
	return *t, nil
}

func parseName(kind, s string) error {
	if s == "" || !utils.CheckName(s) {
		return usageError{fmt.Errorf("%s %q: use letters, digits and -=:._", kind, s)}
	}
	return nil
}

// parseRelativeTime reads a time like pulsar-admin: a number with an
// optional unit s, m, h, d, w or y (no unit: seconds), or a Go duration
// ("1h30m"). It returns seconds.
func parseRelativeTime(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	units := map[byte]int64{'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 7 * 86400, 'y': 365 * 86400}
	num, mul := s, int64(1)
	if u, ok := units[s[len(s)-1]]; ok {
		num, mul = s[:len(s)-1], u
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		return n * mul, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a time like 30s, 10m, 1h, 2d, 1w", s)
	}
	return int64(d / time.Second), nil
}

// parseSize reads a size like pulsar-admin: a number with an optional unit
// k, m, g or t (powers of 1024; no unit: bytes). It returns bytes.
func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	units := map[byte]int64{'k': 1 << 10, 'm': 1 << 20, 'g': 1 << 30, 't': 1 << 40}
	num, mul := s, int64(1)
	if u, ok := units[strings.ToLower(s)[len(s)-1]]; ok {
		num, mul = s[:len(s)-1], u
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size like 500M, 10G, 1T", s)
	}
	return n * mul, nil
}

func splitList(v []string) []string {
	var out []string
	for _, s := range v {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func orNone(v []string) string {
	if len(v) == 0 {
		return "(none)"
	}
	return strings.Join(v, ", ")
}
