package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/wire"
)

// messageView is a message as the message verbs print it.
type messageView struct {
	MessageID  string            `json:"messageId"` // ledger:entry[:partition[:batch index]]
	Properties map[string]string `json:"properties"`
	Payload    []byte            `json:"payload"` // base64 in JSON
}

func viewOf(m *utils.Message) messageView {
	id := fmt.Sprintf("%d:%d", m.MessageID.LedgerID, m.MessageID.EntryID)
	if m.MessageID.PartitionIndex >= 0 || m.MessageID.BatchIndex >= 0 {
		id += fmt.Sprintf(":%d", m.MessageID.PartitionIndex)
	}
	if m.MessageID.BatchIndex >= 0 {
		id += fmt.Sprintf(":%d", m.MessageID.BatchIndex)
	}
	props := m.Properties
	if props == nil {
		props = map[string]string{}
	}
	return messageView{MessageID: id, Properties: props, Payload: m.Payload}
}

func printMessages(w io.Writer, ms []messageView) {
	for i, m := range ms {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "message id:\t%s\n", m.MessageID)
		keys := slices.Sorted(maps.Keys(m.Properties))
		for _, k := range keys {
			fmt.Fprintf(w, "  %s:\t%s\n", k, m.Properties[k])
		}
		fmt.Fprintf(w, "payload:\t%q\n", m.Payload)
	}
}

// topicMessageVerbs read a topic's messages and change its properties.
func (a *adminCmd) topicMessageVerbs(tVerb func(*cobra.Command, func(*cobra.Command, utils.TopicName) error) *cobra.Command, asJSON *bool) []*cobra.Command {
	var sub, initial, ts string
	var count, position int
	var props []string

	peek := tVerb(readVerb("peek-messages <topic>", "Show the next messages of a subscription without consuming them (on a partitioned topic, name a partition)", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var errs []error
		if sub == "" {
			errs = append(errs, errors.New("-s/--subscription: required"))
		}
		if count < 1 {
			errs = append(errs, fmt.Errorf("-n/--count: %d must be at least 1", count))
		}
		if err := errors.Join(errs...); err != nil {
			return usageError{err}
		}
		var ms []*utils.Message
		if err := a.do(cmd, fmt.Sprintf("peek at subscription %s on %s", sub, t.String()), func(ctx context.Context, c pulsaradmin.Client) (err error) {
			ms, err = c.Subscriptions().PeekMessagesWithContext(ctx, t, sub, count)
			return err
		}); err != nil {
			return err
		}
		views := []messageView{}
		for _, m := range ms {
			views = append(views, viewOf(m))
		}
		return show(cmd, *asJSON, views, func(w io.Writer) { printMessages(w, views) })
	})
	peek.Flags().StringVarP(&sub, "subscription", "s", "", "subscription name (required)")
	peek.Flags().IntVarP(&count, "count", "n", 1, "number of messages")

	examine := tVerb(readVerb("examine-message <topic>", "Show the message at a position counted from the first (earliest) or the last (latest) of a topic", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var errs []error
		if initial != "earliest" && initial != "latest" {
			errs = append(errs, fmt.Errorf("-i/--initialPosition: %q is not earliest or latest", initial))
		}
		if position < 1 {
			errs = append(errs, fmt.Errorf("-m/--messagePosition: %d must be at least 1", position))
		}
		if err := errors.Join(errs...); err != nil {
			return usageError{err}
		}
		p, err := restTopicPath(t.String())
		if err != nil {
			return usageError{err}
		}
		query := url.Values{"initialPosition": {initial}, "messagePosition": {strconv.Itoa(position)}}
		var view messageView
		if err := a.doREST(cmd, "examine a message of "+t.String(), func(ctx context.Context, c *rest.Client) error {
			// The rest client replaces a request's query string with
			// its own (empty) parameters: this request is made here.
			resp, err := getWithQuery(ctx, c, "/admin/v2/"+p+"/examinemessage", query)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			view, err = entryView(resp)
			return err
		}); err != nil {
			return err
		}
		return show(cmd, *asJSON, view, func(w io.Writer) { printMessages(w, []messageView{view}) })
	})
	examine.Flags().StringVarP(&initial, "initialPosition", "i", "latest", "count from the earliest or the latest message")
	examine.Flags().IntVarP(&position, "messagePosition", "m", 1, "which message, counting from 1")

	getID := tVerb(readVerb("get-message-id <topic>", "Show the id of the first message published at or after a time (on a partitioned topic, name a partition)", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		at, err := parseTimestamp(ts)
		if err != nil {
			return usageError{fmt.Errorf("-d/--datetime: %w", err)}
		}
		var id utils.MessageID
		if err := a.do(cmd, "get the message id at "+ts+" on "+t.String(), func(ctx context.Context, c pulsaradmin.Client) (err error) {
			id, err = c.Topics().GetMessageIDWithContext(ctx, t, at.UnixMilli())
			return err
		}); err != nil {
			return err
		}
		return show(cmd, *asJSON, id, func(w io.Writer) { fmt.Fprintf(w, "%d:%d\n", id.LedgerID, id.EntryID) })
	})
	getID.Flags().StringVarP(&ts, "datetime", "d", "", "the time: RFC 3339 (2026-01-02T15:04:05Z), milliseconds since the epoch, or a duration ago (10m, 2h, 1d) (required)")

	getProps := tVerb(readVerb("get-properties <topic>", "Show a topic's properties", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var m map[string]string
		if err := a.do(cmd, "get the properties of "+t.String(), func(ctx context.Context, c pulsaradmin.Client) (err error) {
			m, err = c.Topics().GetPropertiesWithContext(ctx, t)
			return err
		}); err != nil {
			return err
		}
		if m == nil {
			m = map[string]string{}
		}
		return show(cmd, *asJSON, m, func(w io.Writer) {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				fmt.Fprintf(w, "%s\t%s\n", k, m[k])
			}
		})
	})

	update := tVerb(verb("update-properties <topic>", "Set properties of a topic (the others stay)", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		m, err := parseProperties(props)
		if err == nil && len(m) == 0 {
			err = errors.New("--properties: at least one key=value")
		}
		if err != nil {
			return usageError{err}
		}
		if err := a.do(cmd, "update the properties of "+t.String(), func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Topics().UpdatePropertiesWithContext(ctx, t, m)
		}); err != nil {
			return err
		}
		done(cmd, "set %d properties of %s", len(m), t.String())
		return nil
	})
	update.Flags().StringSliceVarP(&props, "properties", "p", nil, "properties k=v,k2=v2 (repeatable; at least one)")

	var key string
	remove := tVerb(verb("remove-properties <topic>", "Remove a property of a topic", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		if key == "" {
			return usageError{errors.New("-k/--key: required")}
		}
		if err := a.do(cmd, "remove property "+key+" of "+t.String(), func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Topics().RemovePropertyWithContext(ctx, t, key)
		}); err != nil {
			return err
		}
		done(cmd, "removed property %s of %s", key, t.String())
		return nil
	})
	remove.Flags().StringVarP(&key, "key", "k", "", "the property's key (required)")

	return []*cobra.Command{peek, examine, getID, getProps, update, remove}
}

// getWithQuery GETs endpoint?query through c's HTTP client (its TLS and
// token); an answer other than 2xx is a rest.Error with the server's
// reason, as the rest client's own calls return.
func getWithQuery(ctx context.Context, c *rest.Client, endpoint string, query url.Values) (*http.Response, error) {
	u := strings.TrimRight(c.ServiceURL, "/") + endpoint + "?" + query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	re := rest.Error{Code: resp.StatusCode, Reason: strings.TrimSpace(string(body))}
	var r struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal(body, &r) == nil && r.Reason != "" {
		re.Reason = r.Reason
	}
	return nil, re
}

// entryView reads an entry response (Pulsar's X-Pulsar-* headers and the
// payload) as a message view. Of a batch it shows the first message,
// decoded, as pulsar-admin does: its id gets the batch index, its own
// properties join the entry's, and batch-size says how many there are.
func entryView(resp *http.Response) (messageView, error) {
	payload, err := io.ReadAll(resp.Body)
	if err != nil {
		return messageView{}, err
	}
	v := messageView{MessageID: resp.Header.Get("X-Pulsar-Message-Id"), Properties: map[string]string{}, Payload: payload}
	if p := resp.Header.Get("X-Pulsar-Property"); p != "" {
		if err := json.Unmarshal([]byte(p), &v.Properties); err != nil {
			return messageView{}, fmt.Errorf("X-Pulsar-Property: %w", err)
		}
	}
	if p := resp.Header.Get("X-Pulsar-Publish-Time"); p != "" {
		v.Properties["publish-time"] = p
	}
	h := resp.Header.Get("X-Pulsar-Num-Batch-Message")
	if h == "" {
		return v, nil
	}
	n, err := strconv.Atoi(h)
	if err != nil || n < 1 {
		return messageView{}, fmt.Errorf("X-Pulsar-Num-Batch-Message: %q is not a count", h)
	}
	msgs, err := wire.DecodeBatch(payload, n)
	if err != nil {
		return messageView{}, fmt.Errorf("entry %s: %w", v.MessageID, err)
	}
	first := msgs[0]
	for _, kv := range first.Metadata.GetProperties() {
		v.Properties[kv.GetKey()] = kv.GetValue()
	}
	v.Properties["batch-size"] = h
	v.MessageID += ":-1:0" // ledger:entry:partition:batch index, as viewOf writes it
	v.Payload = first.Payload
	return v, nil
}

// parseTimestamp reads a time: RFC 3339, milliseconds since the epoch, or
// a duration ago (parseRelativeTime's forms).
func parseTimestamp(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("required")
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return time.UnixMilli(ms), nil
	}
	secs, err := parseRelativeTime(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time, milliseconds or a duration ago", s)
	}
	return time.Now().Add(-time.Duration(secs) * time.Second), nil
}
