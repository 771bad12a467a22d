package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/spf13/cobra"
)

// nsPair is a namespace policy whose get- and/or remove- verb pulsar-admin
// has beside a set- verb made elsewhere; both go through the bare REST
// client, as pulsaradmin lacks some of them and reads an unset value as a
// zero one.
type nsPair struct {
	name string // verb suffix
	path string // REST path under /admin/v2/namespaces/<tenant>/<namespace>/
	what string // for messages
	get  bool   // also make get-<name>
}

// namespacePairs are pulsar-admin's get-/remove- verbs the other files
// do not make.
var namespacePairs = []nsPair{
	{name: "retention", path: "retention", what: "retention"},
	{name: "message-ttl", path: "messageTTL", what: "message TTL"},
	{name: "deduplication", path: "deduplication", what: "deduplication", get: true},
	{name: "auto-topic-creation", path: "autoTopicCreation", what: "auto topic creation override"},
	{name: "auto-subscription-creation", path: "autoSubscriptionCreation", what: "auto subscription creation override", get: true},
	{name: "compaction-threshold", path: "compactionThreshold", what: "compaction threshold"},
}

// namespacePairVerbs makes namespacePairs' verbs and
// set-auto-subscription-creation.
func (a *adminCmd) namespacePairVerbs(nsVerb func(*cobra.Command, func(*cobra.Command, string) error) *cobra.Command, asJSON *bool) []*cobra.Command {
	var out []*cobra.Command
	for _, p := range namespacePairs {
		endpoint := func(ns string) string { return "/admin/v2/namespaces/" + ns + "/" + p.path }
		if p.get {
			out = append(out, nsVerb(readVerb("get-"+p.name+" <tenant/namespace>", "Show a namespace's "+p.what+" (null when not set)", asJSON, nil), func(cmd *cobra.Command, ns string) error {
				var raw json.RawMessage
				if err := a.doREST(cmd, "get "+p.what+" of "+ns, func(ctx context.Context, c *rest.Client) (err error) {
					raw, err = getRaw(ctx, c, endpoint(ns))
					return err
				}); err != nil {
					return err
				}
				return showRaw(cmd, *asJSON, raw)
			}))
		}
		out = append(out, nsVerb(verb("remove-"+p.name+" <tenant/namespace>", "Remove a namespace's "+p.what+" (the broker's default applies)", nil), func(cmd *cobra.Command, ns string) error {
			if err := a.doREST(cmd, "remove "+p.what+" of "+ns, func(ctx context.Context, c *rest.Client) error {
				return c.DeleteWithContext(ctx, endpoint(ns))
			}); err != nil {
				return err
			}
			done(cmd, "removed %s of %s", p.what, ns)
			return nil
		}))
	}

	setSub := verb("set-auto-subscription-creation <tenant/namespace>", "Allow or forbid creating subscriptions on first use, overriding the broker", nil)
	enabled := enableDisableFlags(setSub)
	out = append(out, nsVerb(setSub, func(cmd *cobra.Command, ns string) error {
		on, err := enabled()
		if err != nil {
			return err
		}
		body := map[string]bool{"allowAutoSubscriptionCreation": on}
		if err := a.doREST(cmd, "set auto subscription creation of "+ns, func(ctx context.Context, c *rest.Client) error {
			return c.PostWithContext(ctx, "/admin/v2/namespaces/"+ns+"/autoSubscriptionCreation", body)
		}); err != nil {
			return err
		}
		done(cmd, "set auto subscription creation of %s to %t", ns, on)
		return nil
	}))
	return out
}

// getRaw GETs endpoint and returns its JSON body; no content is null.
func getRaw(ctx context.Context, c *rest.Client, endpoint string) (json.RawMessage, error) {
	resp, err := c.MakeRequestWithContext(ctx, http.MethodGet, endpoint)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return json.RawMessage("null"), nil
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("answer is not JSON: %.100q", body)
	}
	return body, nil
}

// showRaw prints a JSON answer as it is (--json), or "not set" for null
// and the compact JSON otherwise.
func showRaw(cmd *cobra.Command, asJSON bool, raw json.RawMessage) error {
	w := cmd.OutOrStdout()
	if asJSON {
		_, err := fmt.Fprintf(w, "%s\n", raw)
		return err
	}
	if string(raw) == "null" {
		_, err := fmt.Fprintln(w, "not set")
		return err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, buf.String())
	return err
}
